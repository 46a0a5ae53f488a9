"""CPU of a batch graph's start-up (issue 34): the launcher and the node container, side by side with other checkouts.

    tools/dev.sh bench startup [--pairs 10] [--before DIR ...]

The smoke sweep's graph as ``aerial_sim batch`` launches it (``hop_1m`` in the empty scene, no camera, lockstep,
the nodes in one process, the batch's headless arguments and node parameters), in two parts:

- **launcher**: ``aerial_sim launch --print --compose`` of it: evaluating the launch files, writing the nodes'
  parameter files and the container's entries; everything a launch does before it starts a process. CPU from
  ``wait4``.
- **container**: ``python -m aerial_sim.nodes.container --entries FILE`` with those entries, its own CPU (all its
  threads, ``getrusage``) read at the moment the physics node logs ``lockstep: starting`` (a hook on rclpy's
  logging call): the interpreter, the imports, the nodes built, DDS discovery, the start gate and the settle.
  Then it is stopped (SIGINT).

``batch_cpu``'s start-up column reads ``/proc`` every 0.2 s, while the flight after the line burns about a CPU
second per wall second: this reads it at the line. Each round runs every checkout once, alternating (``--before
DIR``: another checkout, e.g. ``git worktree add /tmp/base main``, its ``src`` first on ``PYTHONPATH``), and
prints each part's mean and median; an other checkout's bytecode is written first, as ``tools/dev.sh`` writes this
one's. Nothing is recorded. The domain: ``ROS_DOMAIN_ID`` or one leased from
``AERIAL_SIM_DOMAIN_RANGE`` (:mod:`_domain`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from _domain import private_domain  # noqa: E402

ARGUMENTS = ("scene:=empty", "mission:=hop_1m", "use_camera:=false", "use_depth_noise:=false", "seed:=0",
             "lockstep:=true", "viewer:=false", "airsim_api:=false", "use_scene_markers:=false",
             "use_depth_points:=false")
#: aerial_sim.batch.execute.BATCH_NODE_DEFAULTS, and the mission kept as a warm graph keeps it.
PARAMS = ("/**/recorder:\n  ros__parameters:\n    write_report: false\n"
          "/**/mission:\n  ros__parameters:\n    write_plots: false\n    exit_when_done: false\n")

#: Runs the container of sys.argv[1]'s entries; prints its CPU at the physics node's lockstep line, then stops it.
CONTAINER = r"""
import json, os, resource, sys
import rclpy.impl.rcutils_logger as logger_module
real = logger_module._rclpy
class Hook:
    def __getattr__(self, name):
        return getattr(real, name)
    def rclpy_logging_rcutils_log(self, severity, name, message, *rest):
        real.rclpy_logging_rcutils_log(severity, name, message, *rest)
        if "lockstep: starting" in message:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            print(json.dumps({"cpu_s": usage.ru_utime + usage.ru_stime}), file=sys.__stdout__, flush=True)
            os.kill(os.getpid(), 2)
logger_module._rclpy = Hook()
from aerial_sim.nodes import container
container.main(["--entries", sys.argv[1]])
"""


def environment(checkout: Path) -> dict[str, str]:
    src = str((checkout / "src").resolve())
    return dict(os.environ, PYTHONPATH=os.pathsep.join([src] + [p for p in [os.environ.get("PYTHONPATH")] if p]),
                AERIAL_SIM_SHARE=str(checkout.resolve()), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
                PYTHONUNBUFFERED="1")


def launcher(checkout: Path, folder: Path) -> tuple[float, Path]:
    """CPU s of ``aerial_sim launch --print --compose`` and the container entries file it wrote."""
    params = folder / "params.yaml"
    params.write_text(PARAMS)
    command = [sys.executable, "-m", "aerial_sim", "launch", "--print", "--compose", str(checkout / "launch" / "sim.launch.yaml"),
               *ARGUMENTS, f"run_dir:={folder / 'run'}", "--params-file", str(params)]
    process = subprocess.Popen(command, env=environment(checkout), stdout=subprocess.PIPE, text=True)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    entries = re.search(r"--entries (\S+)", output)
    if status != 0 or entries is None:
        raise SystemExit(f"{checkout}: {shlex.join(command)} failed ({status}):\n{output[-2000:]}")
    return usage.ru_utime + usage.ru_stime, Path(entries.group(1))


def container(checkout: Path, entries: Path, timeout_s: float = 120.0) -> float:
    """The container's CPU s at its lockstep line (see the module doc)."""
    process = subprocess.Popen([sys.executable, "-c", CONTAINER, str(entries)], env=environment(checkout),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, process_group=0)
    try:
        line = process.stdout.readline()
        process.wait(timeout=timeout_s)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    try:
        return float(json.loads(line)["cpu_s"])
    except (ValueError, KeyError):
        raise SystemExit(f"{checkout}: the container printed no lockstep line (exit {process.returncode})") from None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=10, help="rounds, each running every checkout once")
    parser.add_argument("--before", type=Path, action="append", default=[], metavar="DIR",
                        help="another checkout, alternated with this one (may be given more than once)")
    options = parser.parse_args()
    private_domain()
    for path in options.before:  # as tools/dev.sh writes this checkout's: no side pays for compiling its modules
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(path / "src" / "aerial_sim")],
                       stdout=subprocess.DEVNULL, check=False)
    checkouts = [(f"before: {path}", path.resolve()) for path in options.before] + [("this", REPO)]
    figures: dict[str, dict[str, list[float]]] = {label: {"launcher": [], "container": []} for label, _ in checkouts}
    with tempfile.TemporaryDirectory(prefix="bench_startup_") as tmp:
        for round_ in range(options.pairs):
            for index, (label, checkout) in enumerate(checkouts):
                folder = Path(tmp) / f"{round_}-{index}"
                folder.mkdir()
                cpu_s, entries = launcher(checkout, folder)
                figures[label]["launcher"].append(cpu_s)
                try:
                    figures[label]["container"].append(container(checkout, entries))
                finally:
                    shutil.rmtree(entries.parent, ignore_errors=True)  # --print's parameter folder
            print(f"round {round_ + 1}/{options.pairs}: " + ", ".join(
                f"{label.split(':')[0]} {figures[label]['launcher'][-1]:.2f} + {figures[label]['container'][-1]:.2f}"
                for label, _ in checkouts) + f" (load average {os.getloadavg()[0]:.1f})", flush=True)
    print(f"\nCPU s of the smoke graph's start-up, {options.pairs} rounds alternating (mean, median):")
    for label, _ in checkouts:
        parts = figures[label]
        total = [a + b for a, b in zip(parts["launcher"], parts["container"])]
        print(f"  {label}: " + ", ".join(f"{name} {statistics.mean(values):.3f} ({statistics.median(values):.3f})"
                                         for name, values in (*parts.items(), ("both", total))))
    if options.before:
        now = figures["this"]
        for label, _ in checkouts[:-1]:
            ratios = ", ".join(f"{name} {statistics.mean(now[name]) / statistics.mean(values):.2f}x"
                               for name, values in figures[label].items())
            print(f"  this / {label}: {ratios}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
