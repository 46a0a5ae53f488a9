"""Run AirSim's own PythonClient example scripts, unchanged, against a running aerial_sim AirSim server.

    python tools/airsim_examples.py --scripts AIRSIM/PythonClient/multirotor --python CLIENT_VENV/bin/python \
        [--timeout 90] [--port 41451] [--json results.json]

The scripts are not part of this project (bring a checkout of AirSim's repository); CLIENT_VENV holds the
``airsim`` client (and ``opencv-python-headless`` for the scripts that import cv2). Start the graph first,
e.g. ``aerial_sim launch sim.launch.yaml mission:=none vehicles:=2 airsim_settings:=FILE``. Before each
script the simulation is un-paused and reset through the client; each script runs in its own folder (its
``setup_path`` import works), with a newline typed on its terminal every half second (``airsim.wait_key``,
``input()`` and termios key reads go on), and is stopped after ``--timeout`` seconds. Prints one Markdown table row per
script: exit code (or "timeout": still running when stopped), seconds, and the last line it printed to
standard error. doc/airsim_settings.md lists a run's outcome.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

#: Modules of the folder that are no examples (imported by the others).
NOT_EXAMPLES = {"setup_path.py", "speaker.py", "wav_reader.py"}


def reset(python: str, port: int) -> None:
    # A script stopped while it had the simulation paused (pause_continue_drone.py) must not leave it paused.
    code = (f"import airsim; c = airsim.MultirotorClient(port={port}); c.confirmConnection(); c.simPause(False); "
            "c.reset(); "
            "[c.enableApiControl(False, v) for v in c.listVehicles()]")
    subprocess.run([python, "-c", code], capture_output=True, timeout=60)


def run(python: str, script: Path, timeout_s: float) -> dict:
    start = time.monotonic()
    keyboard, terminal = pty.openpty()  # a terminal on standard input: scripts that read keys with termios
    process = subprocess.Popen([python, script.name], cwd=script.parent, stdin=terminal,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    os.close(terminal)

    def keys() -> None:  # wait_key() / input() / getch(): a newline now and then
        try:
            while process.poll() is None:
                os.write(keyboard, b"\n")
                time.sleep(0.5)
        except OSError:
            pass
        finally:
            os.close(keyboard)

    threading.Thread(target=keys, daemon=True).start()
    try:
        out, err = process.communicate(timeout=timeout_s)
        code: int | str = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGINT)
        try:
            out, err = process.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
        code = "timeout"
    lines = [line for line in (err or "").splitlines() if line.strip()]
    return {"script": script.name, "code": code, "seconds": round(time.monotonic() - start, 1),
            "stderr": lines[-1][:160] if lines else "", "stdout_lines": len((out or "").splitlines())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scripts", required=True, type=Path)
    parser.add_argument("--python", required=True)
    parser.add_argument("--port", type=int, default=41451)
    parser.add_argument("--timeout", type=float, default=90.0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("only", nargs="*", help="script names (default: every example)")
    args = parser.parse_args(argv)
    scripts = sorted(p for p in args.scripts.glob("*.py") if p.name not in NOT_EXAMPLES
                     and (not args.only or p.name in args.only))
    results = []
    print("| script | exit | s | last stderr line |\n|---|---|---|---|", flush=True)
    for script in scripts:
        reset(args.python, args.port)
        result = run(args.python, script, args.timeout)
        results.append(result)
        print(f"| {result['script']} | {result['code']} | {result['seconds']} | {result['stderr']} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    ok = sum(1 for r in results if r["code"] == 0)
    print(f"\n{ok} of {len(results)} ended with exit code 0", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
