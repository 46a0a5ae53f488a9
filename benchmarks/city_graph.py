"""The default full graph in the city, flown as ``tools/dev.sh sim scene:=city`` flies it (issue 29's goal:
every camera stream at 30 Hz of sim time at a real-time factor >= 0.95 on 2 cores).

    tools/dev.sh bench city_graph [--checkout DIR] [--runs N] [--window 15]

Each run launches ``sim.launch.yaml scene:=city`` (the mission square_5m, the recorder, the web viewer, the
AirSim server on a free port, shadows on: the scene's own lighting) in ``ROS_DOMAIN_ID`` (default: a free one of 1-101), waits
for the mission's "flying square" line, measures the CPU of every node process for ``--window`` s from /proc
(utime + stime per wall second: cores; and per simulated second, from the graph's /clock over the window), lets the mission land, and prints from the run's ``recording.txt`` the
real-time factor (simulated over wall time of the whole recording) and the rate of each camera stream per
simulated second (its messages over the recording's simulated duration, as recording.txt's LOW figures count). With ``--checkout DIR`` (another checkout's tree, e.g. ``git archive`` of an older commit;
its numba kernels compiled first with ``PYTHONPATH=DIR/src python -m aerial_sim precompile``) the runs
alternate between DIR and this checkout, so before and after share the machine's load; the 1-minute load
average is printed beside each run: on a shared machine the figures mean little above a load of about 2.
Not a test: it prints figures, and records the last run of this checkout in doc/results/city_graph.json.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import record, row

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "benchmarks")]

from graph import clock_only_survey, cpu_seconds, node_processes  # noqa: E402

CAMERA_TOPICS = ("camera/depth/image_ideal", "camera/segmentation/image_raw", "camera/color/image_raw",
                 "camera/depth/image_raw", "camera/depth/camera_info")


def fly(checkout: Path, window_s: float, domain: str) -> dict:
    """One flight of the city graph from ``checkout``'s code: cores per node mid-flight, RTF, camera rates."""
    run_dir = Path(tempfile.mkdtemp(prefix="city_graph_"))
    log_path = run_dir / "launch.log"
    env = dict(os.environ, ROS_DOMAIN_ID=domain, AERIAL_SIM_RUN_DIR=str(run_dir / "run"),
               AERIAL_SIM_SHARE=str(checkout), PYTHONPATH=str(checkout / "src"),
               ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    load_start = os.getloadavg()[0]
    with open(log_path, "w") as log:
        launcher = subprocess.Popen([sys.executable, "-m", "aerial_sim", "launch", "sim.launch.yaml", "scene:=city",
                                     "airsim_port:=0"], cwd=checkout, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
    cores: dict[str, float] = {}
    try:
        deadline = time.monotonic() + 300
        while "flying square" not in log_path.read_text(errors="replace"):
            if launcher.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the flight never started: see {log_path}")
            time.sleep(0.5)
        nodes = node_processes(launcher.pid)
        before = {name: cpu_seconds(pid) for name, pid in nodes.items()}
        started = time.monotonic()
        _, window_rtf = clock_only_survey(window_s)  # sim s per wall s over the window, from /clock
        wall = time.monotonic() - started
        for name, pid in nodes.items():
            try:
                cores[name] = (cpu_seconds(pid) - before[name]) / wall
            except OSError:
                cores[name] = float("nan")  # the node ended during the window
        load_mid = os.getloadavg()[0]
        launcher.wait(timeout=600)  # the mission lands and ends the launch; the recorder writes recording.txt
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGINT)
            launcher.wait(timeout=120)
    report = (run_dir / "run" / "recording.txt").read_text()
    rtf = float(re.search(r"real-time factor: ([0-9.]+)", report).group(1))
    duration_s = float(re.search(r"duration: ([0-9.]+) s", report).group(1))
    rates = {}
    for topic in CAMERA_TOPICS:
        # Messages over the recording's simulated duration (recording.txt's LOW figure: a stream that starts
        # late counts as slow; its rate column runs from the stream's own first message).
        line = next((l for l in report.splitlines() if l.strip().startswith(f"/drone1/{topic} ")), "")
        count = re.search(r"(\d+) msgs", line)
        rates[topic] = round(int(count.group(1)) / duration_s, 1) if count else 0.0
        missed = re.search(r"(\d+) missed", line)
        rates[topic + " missed"] = int(missed.group(1)) if missed else 0
    return {"cores": cores, "window_rtf": window_rtf or float("nan"), "rtf": rtf, "rates": rates,
            "load_start": load_start, "load_mid": load_mid, "run": run_dir}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, help="another checkout to fly first in each round (before/after)")
    parser.add_argument("--runs", type=int, default=1, help="rounds (each: --checkout's flight, then this one's)")
    parser.add_argument("--window", type=float, default=15.0, help="seconds of CPU measured mid-flight")
    parser.add_argument("--domain", default=None, help="ROS_DOMAIN_ID (default: $ROS_DOMAIN_ID, else a free "
                        "one of AERIAL_SIM_DOMAIN_RANGE, 1-101)")
    parser.add_argument("--no-record", action="store_true", help="leave doc/results/city_graph.json alone")
    options = parser.parse_args()
    if options.domain is not None:
        os.environ["ROS_DOMAIN_ID"] = options.domain
    from _domain import private_domain

    options.domain = private_domain()  # this process reads the graph's /clock
    checkouts = ([("before", options.checkout.resolve())] if options.checkout else []) + [("this", REPO)]
    last = None
    for round_index in range(options.runs):
        for label, checkout in checkouts:
            result = fly(checkout, options.window, options.domain)
            rates = ", ".join(f"{t.split('/', 1)[1]} {v} Hz"
                              for t, v in result["rates"].items() if not t.endswith("missed"))
            missed = result["rates"]["camera/depth/image_ideal missed"]
            print(f"[{round_index + 1}] {label} ({checkout}): load {result['load_start']:.1f} at start, "
                  f"{result['load_mid']:.1f} mid-flight; real-time factor {result['rtf']:.3f}; {rates}; "
                  f"ideal depth frames missed {missed}", flush=True)
            order = sorted(result["cores"].items(), key=lambda kv: -kv[1])
            w = result["window_rtf"]
            print(f"    cores mid-flight (real-time factor {w:.3f} there): "
                  + ", ".join(f"{n} {c:.2f}" for n, c in order) + f"; total {sum(result['cores'].values()):.2f}",
                  flush=True)
            print("    CPU s per simulated s: " + ", ".join(f"{n} {c / w:.2f}" for n, c in order)
                  + f"; total {sum(result['cores'].values()) / w:.2f}", flush=True)
            if label == "this":
                last = result
    rows = [row("real-time factor", last["rtf"], "sim s / wall s"),
            row("ideal depth frames missed", last["rates"]["camera/depth/image_ideal missed"], "frames"),
            *(row(f"/drone1/{t}", v, "Hz of sim time (messages / simulated duration)")
              for t, v in last["rates"].items() if not t.endswith("missed")),
            row("real-time factor mid-flight (the CPU window)", round(last["window_rtf"], 3), "sim s / wall s"),
            *(row(f"{n} CPU mid-flight", round(c / last["window_rtf"], 2), "CPU s per simulated s")
              for n, c in sorted(last["cores"].items(), key=lambda kv: -kv[1])),
            row("load average at start / mid-flight", f"{last['load_start']:.1f} / {last['load_mid']:.1f}")]
    if not options.no_record:
        record("city_graph", "The default graph in the city, flown (tools/dev.sh sim scene:=city)", rows,
               command="tools/dev.sh bench city_graph",
               notes="RTF and rates from the run's recording.txt; CPU per node process over a window mid-flight")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
