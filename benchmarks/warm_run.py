"""Warm runs against cold ones: CPU per simulated second, and the wall time between two warm runs.

    tools/dev.sh bench warm_run [--runs 3] [--mission hop_1m] [--quiet-s 0.2] [--no-record]

The graph is the smoke sweep's without its recorder (the graph's own cost between runs;
``tools/dev.sh bench batch`` measures whole warm batch runs, recorder and post-processing included): ``sim.launch.yaml`` in lockstep, empty scene, no camera, IMU, barometer,
magnetometer, GPS, flight controller and mission, no RViz helpers.

- **cold**: ``--runs`` launches, each flying the mission once and ending; CPU of the launcher and
  everything it reaped (``wait4``), per simulated second (the mission's track, take-off to disarm).
- **warm**: one launch, the mission node kept (``exit_when_done: false``), the mission flown
  ``--runs`` + 1 times: after each landing (``metrics.json``) this script pauses the physics node,
  waits ``--quiet-s``, sets the mission's ``output_dir`` for the next run, calls
  ``/physics/restart`` and un-pauses (doc/batch.md, warm runs). The first flight of the launch is
  left out; each later one is measured from the landing before it to its own landing: CPU of the
  launch's processes (``/proc``) per simulated second, and the *overhead*: wall time from the
  landing before to the first ``/clock`` tick of the new run after t = 0 (the mission's 0.5 s
  drain, the pause, the quiet time, the service calls, the first period).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))
os.environ.setdefault("AERIAL_SIM_SHARE", str(REPO))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
import _results  # noqa: E402

GRAPH = ["scene:=empty", "use_camera:=false", "record:=false", "viewer:=false", "airsim_api:=false",
         "use_scene_markers:=false", "use_depth_points:=false", "lockstep:=true"]


def launch_command(mission: str, run_dir: Path, params: Path) -> list[str]:
    return [sys.executable, "-m", "aerial_sim", "launch", "sim.launch.yaml", f"mission:={mission}", *GRAPH,
            f"run_dir:={run_dir}", "--params-file", str(params)]


def sim_seconds(run_dir: Path) -> float:
    """The mission's track: first to last stamp (take-off to disarm)."""
    with open(run_dir / "track.csv") as stream:
        stamps = [float(row[0]) for row in csv.reader(stream) if row and row[0][0].isdigit()]
    return stamps[-1]


def complete_json(path: Path) -> bool:
    try:
        json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return True


def wait_for(path: Path, process: subprocess.Popen, timeout_s: float = 600.0) -> float:
    deadline = time.monotonic() + timeout_s
    while not path.is_file():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"no {path} (launch ended or timed out)")
        time.sleep(0.02)
    return time.monotonic()


def cold(mission: str, folder: Path, params: Path, index: int) -> dict:
    run_dir = folder / f"cold_{index}"
    with open(folder / f"cold_{index}.log", "w") as log:
        began = time.monotonic()
        process = subprocess.Popen(launch_command(mission, run_dir, params), stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True, cwd=REPO)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0 or not (run_dir / "metrics.json").is_file():
        raise SystemExit(f"cold run {index} failed; see {folder}/cold_{index}.log")
    sim_s = sim_seconds(run_dir)
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "sim_s": sim_s, "wall_s": time.monotonic() - began}


def warm(mission: str, folder: Path, params: Path, runs: int, quiet_s: float) -> list[dict]:
    import rclpy
    from rcl_interfaces.srv import SetParameters
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from rosgraph_msgs.msg import Clock
    from std_srvs.srv import SetBool, Trigger

    from aerial_sim.batch.hangs import session_cpu_s
    from aerial_sim.nodes.ros.qos import stream_qos

    log = open(folder / "warm.log", "w")
    process = subprocess.Popen(launch_command(mission, folder / "warm_0", params), stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO)
    context = rclpy.context.Context()
    rclpy.init(context=context)
    node = Node("warm_run_bench", context=context)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)
    ticks: list[tuple[float, int]] = []
    node.create_subscription(Clock, "/clock", lambda m: ticks.append((time.monotonic(), m.clock.sec * 10**9 + m.clock.nanosec)),
                             stream_qos(True))

    clients = {}

    def call(service_type, name, request):
        """A service call through a client kept for the whole benchmark (a new one waits for discovery)."""
        client = clients.get(name)
        if client is None:
            client = clients[name] = node.create_client(service_type, name)
            client.wait_for_service(timeout_sec=30)
        future = client.call_async(request)
        executor.spin_until_future_complete(future, timeout_sec=30)
        if future.result() is None:
            raise SystemExit(f"{name}: no answer")
        return future.result()

    def spin_for(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=max(0.0, min(0.01, end - time.monotonic())))

    marker = ""  # every process of the launch's session (the nodes' command lines do not name the run folder)
    results = []
    try:
        landed = wait_for(folder / "warm_0" / "metrics.json", process)
        for index in range(1, runs + 1):
            cpu_before = session_cpu_s(process.pid, marker)
            run_dir = folder / f"warm_{index}"
            call(SetBool, "/physics/pause", SetBool.Request(data=True))
            spin_for(quiet_s)
            request = SetParameters.Request(parameters=[Parameter("output_dir", value=str(run_dir)).to_parameter_msg()])
            call(SetParameters, "/drone1/mission/set_parameters", request)
            restarted = time.monotonic()
            ticks.clear()
            if not call(Trigger, "/physics/restart", Trigger.Request()).success:
                raise SystemExit("restart refused")
            call(SetBool, "/physics/pause", SetBool.Request(data=False))
            while not any(stamp > 0 for _, stamp in ticks):
                spin_for(0.005)
            first_tick = next(t for t, stamp in ticks if stamp > 0)
            next_landed = None
            while next_landed is None:
                spin_for(0.02)
                if complete_json(run_dir / "metrics.json"):  # the mission's last file, written whole
                    next_landed = time.monotonic()
                if process.poll() is not None:
                    raise SystemExit(f"the warm launch ended; see {folder}/warm.log")
            cpu_s = session_cpu_s(process.pid, marker) - cpu_before
            sim_s = sim_seconds(run_dir)
            results.append({"cpu_s": cpu_s, "sim_s": sim_s, "overhead_s": first_tick - landed,
                            "restart_s": first_tick - restarted, "wall_s": next_landed - landed})
            landed = next_landed
    finally:
        executor.remove_node(node)
        node.destroy_node()
        rclpy.shutdown(context=context)
        os.killpg(process.pid, 2)
        process.wait(timeout=60)
        log.close()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mission", default="hop_1m")
    parser.add_argument("--quiet-s", type=float, default=0.2, help="wall seconds between pause and restart")
    parser.add_argument("--keep", type=Path, default=None, help="keep the run folders here")
    parser.add_argument("--no-record", action="store_true", help="do not write doc/results/warm_run.json")
    options = parser.parse_args()
    from aerial_sim.batch.nodeparams import write_params_file

    with tempfile.TemporaryDirectory(prefix="bench_warm_") as tmp:
        folder = options.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        kept = write_params_file({"mission": {"exit_when_done": False, "write_plots": False}}, folder / "warm.yaml")
        ending = write_params_file({"mission": {"write_plots": False}}, folder / "cold.yaml")
        print(f"warm: one launch, {options.runs} measured runs of {options.mission}...", flush=True)
        warm_runs = warm(options.mission, folder, kept, options.runs, options.quiet_s)
        cold_runs = []
        for index in range(options.runs):
            print(f"cold: run {index + 1}/{options.runs}...", flush=True)
            cold_runs.append(cold(options.mission, folder, ending, index))
        reference = (folder / "cold_0" / "track.csv").read_bytes()
        tracks = [(folder / f"{kind}_{i}" / "track.csv").read_bytes() == reference
                  for kind, count in (("cold", options.runs), ("warm", options.runs + 1)) for i in range(count)]
    cold_cpu = statistics.mean(r["cpu_s"] / r["sim_s"] for r in cold_runs)
    warm_cpu = statistics.mean(r["cpu_s"] / r["sim_s"] for r in warm_runs)
    overhead = [r["overhead_s"] for r in warm_runs]
    restart = [r["restart_s"] for r in warm_runs]
    print(f"\n{options.mission}, {statistics.mean(r['sim_s'] for r in cold_runs):.2f} s simulated per run; "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print(f"cold: {cold_cpu:.3f} CPU s per simulated s (launch to exit, every process; "
          f"{statistics.mean(r['wall_s'] for r in cold_runs):.1f} s wall per run)")
    print(f"warm: {warm_cpu:.3f} CPU s per simulated s (landing to landing, every process; "
          f"{statistics.mean(r['wall_s'] for r in warm_runs):.1f} s wall per run): {warm_cpu / cold_cpu:.2f}x cold")
    print(f"overhead between warm runs (landing to the next run's first tick): median {statistics.median(overhead):.2f} s, "
          f"max {max(overhead):.2f} s; of it pause-to-first-tick {statistics.median(restart):.2f} s median")
    print(f"track.csv byte-identical to the first cold run's: {sum(tracks)} of {len(tracks)} runs (cold and warm)")
    if not options.no_record:
        rows = [
            _results.row("cold run", round(cold_cpu, 3), "CPU s per sim s", "launch to exit, every process, no recorder"),
            _results.row("warm run", round(warm_cpu, 3), "CPU s per sim s", "landing to landing in one graph"),
            _results.row("warm / cold", round(warm_cpu / cold_cpu, 3), "ratio", "measured side by side"),
            _results.row("overhead between warm runs, median", round(statistics.median(overhead), 3), "s wall",
                         f"max {max(overhead):.3f}; landing to the next run's first clock tick"),
            _results.row("restart to first tick, median", round(statistics.median(restart), 3), "s wall",
                         "/physics/restart, unpause, first period"),
            _results.row("runs whose track.csv equals the first cold run's", f"{sum(tracks)} of {len(tracks)}", "",
                         "cold and warm, byte for byte"),
        ]
        _results.record("warm_run", f"Warm runs against cold ones ({options.mission}, no recorder)", rows,
                        command="tools/dev.sh bench warm_run" + (f" --runs {options.runs}" if options.runs != 3 else ""),
                        notes=f"quiet time between pause and restart {options.quiet_s:g} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
