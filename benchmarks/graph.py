"""The launched graph as a user starts it: CPU per node, topic rates in sim time, real-time factor.

    tools/dev.sh bench graph [--seconds 20] [--warmup 12] [--variants default,no_viewer,...]
                              [--extra NAME:=VALUE ...] [--params-file FILE]

For each variant, launches ``sim.launch.yaml`` (mission:=none: the vehicle waits on the ground
while every sensor, the camera and the recorder run, so the window is steady), waits
``--warmup`` s, then for ``--seconds`` s measures:

- CPU of every node process (utime + stime from /proc, in cores = CPU s per wall s);
- the rate of every topic per simulated second (``aerial_sim topics``' probe: raw,
  best-effort subscriptions counted in this process; its own CPU is printed too);
- the real-time factor (sim seconds per wall second, from ``/clock``).

Streams made only for a listener (``camera/depth/points``: depth_to_points converts only while
something subscribes) are not probed unless ``--probe-all``: probing them would make the graph do
the work a user's graph (no browser connected) does not do.

The probe that counts every topic costs about half a core itself, which a 2-core machine takes
from the graph: ``--probe clock`` reads only ``/clock`` (the real-time factor, as a user's run
would see it; no rates, which lockstep makes exact anyway and each run's recording.txt reports).

Variants: default (everything on), no_viewer, no_recorder, no_camera, lockstep (everything on, in
lockstep: the real-time factor is as fast as the slowest participant allows) and lockstep_no_camera
(not run unless asked: ``--variants lockstep,lockstep_no_camera``); ``lockstep_strict`` and
``lockstep_no_camera_strict`` are the same with ``lockstep_slack:=0``. Rows are printed side by
side, so ratios come from one run on one (noisy) machine. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src")]
os.environ.setdefault("ROS_DOMAIN_ID", str(150 + os.getpid() % 80))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("AERIAL_SIM_SHARE", str(REPO))
os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])

VARIANTS = {
    "default": [],
    "no_viewer": ["viewer:=false"],
    "no_recorder": ["record:=false"],
    "no_camera": ["use_camera:=false"],
    # Lockstep for the whole graph (issue 11): the clock waits for every sensor, the camera and
    # depth noise; the figure is how fast that is, and every stream should be at its rate.
    "lockstep": ["lockstep:=true"],
    "lockstep_no_camera": ["lockstep:=true", "use_camera:=false"],
    # The same with lockstep_slack:=0: the clock waits at every participant's due time (before the slack).
    "lockstep_strict": ["lockstep:=true", "lockstep_slack:=0"],
    "lockstep_no_camera_strict": ["lockstep:=true", "use_camera:=false", "lockstep_slack:=0"],
}
#: Streams and their configured rates (Hz of sim time) in the default graph, to flag shortfalls.
CONFIGURED_HZ = {
    "/clock": 250.0, "/drone1/ground_truth/odom": 250.0, "/drone1/motor_commands": 250.0,
    "/drone1/imu/data": 200.0, "/drone1/air_pressure": 50.0, "/drone1/magnetic_field": 75.0,
    "/drone1/gps/fix": 50.0, "/drone1/camera/depth/image_raw": 30.0, "/drone1/camera/color/image_raw": 30.0,
    "/drone1/camera/segmentation/image_raw": 30.0, "/drone1/camera/depth/points": 30.0,
}
#: Streams published only while something subscribes (probed with --probe-all only).
ON_DEMAND = ("/drone1/camera/depth/points",)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def node_processes(launcher_pid: int) -> dict[str, int]:
    """Process name -> pid for the launcher's children (``python -m aerial_sim.nodes.<module>``)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat[1]) != launcher_pid:
            continue
        words = [w.decode(errors="replace") for w in cmdline]
        # launch's name (two processes of one executable, e.g. a fleet's sensors_0 and sensors_1), else the module's
        name = next((w.split(":=", 1)[1] for w in words if w.startswith("__node:=")), None)
        name = name or next((w.rsplit(".", 1)[1] for w in words if w.startswith("aerial_sim.nodes.")), None)
        if name is None:
            name = next((Path(w).name for w in words if "/lib/aerial_sim/" in w), None)
        if name:
            found[name] = int(entry.name)
    return found


def clock_only_survey(seconds: float) -> tuple[list, float | None]:
    """The real-time factor from /clock alone (raw bytes, the events executor): no topic rows."""
    import rclpy
    from rclpy.node import Node
    from rosgraph_msgs.msg import Clock

    from aerial_sim.cdr import cdr_header_stamp_ns
    from aerial_sim.cli.topics import ClockMeter
    from aerial_sim.nodes.ros.executors import make_executor
    from aerial_sim.nodes.ros.qos import stream_qos

    context = rclpy.context.Context()
    rclpy.init(args=[], context=context)
    node = Node(f"graph_bench_clock_{os.getpid()}", context=context, enable_rosout=False,
                start_parameter_services=False)
    meter = ClockMeter()

    def on_clock(data: bytes) -> None:
        stamp_ns = cdr_header_stamp_ns(data)  # a Clock is one builtin_interfaces/Time, as a header starts
        if stamp_ns is not None:
            meter.record(time.monotonic(), stamp_ns * 1e-9)

    # Best effort matches /clock whether physics offers it reliable (lockstep) or best effort.
    node.create_subscription(Clock, "/clock", on_clock, stream_qos(False), raw=True)
    executor = make_executor(context)
    executor.add_node(node)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.1)
    executor.remove_node(node)
    node.destroy_node()
    rclpy.try_shutdown(context=context)
    return [], meter.speed()


def measure_variant(args: list[str], warmup_s: float, seconds: float, probe: str = "all",
                    skip: tuple[str, ...] = ()) -> dict:
    from aerial_sim.cli.topics import _survey

    run_dir = Path(tempfile.mkdtemp(prefix="graph_bench_"))
    command = [sys.executable, "-m", "aerial_sim", "launch", "sim.launch.yaml", "mission:=none",
               "airsim_api:=false", f"run_dir:={run_dir}", *args]
    launcher = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        time.sleep(warmup_s)
        nodes = node_processes(launcher.pid)
        before = {name: cpu_seconds(pid) for name, pid in nodes.items()}
        probe_before = resource.getrusage(resource.RUSAGE_SELF)
        wall_start = time.monotonic()
        rows, speed = _survey(seconds, None, 0.5, skip) if probe == "all" else clock_only_survey(seconds)
        wall = time.monotonic() - wall_start
        probe_after = resource.getrusage(resource.RUSAGE_SELF)
        cores = {}
        for name, pid in nodes.items():
            try:
                cores[name] = (cpu_seconds(pid) - before[name]) / wall
            except OSError:
                cores[name] = float("nan")  # the node died during the window
        probe = (probe_after.ru_utime + probe_after.ru_stime - probe_before.ru_utime - probe_before.ru_stime) / wall
        rates = {}
        for row in rows:
            rate = row.meter.rate_hz() if row.meter is not None else None
            rates[row.name] = None if rate is None or not speed else rate / speed
        return {"cores": cores, "probe": probe, "speed": speed, "rates": rates}
    finally:
        os.killpg(launcher.pid, signal.SIGINT)
        try:
            launcher.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()


def print_tables(results: dict[str, dict]) -> None:
    names = list(results)
    nodes = sorted({n for r in results.values() for n in r["cores"]},
                   key=lambda n: -max(r["cores"].get(n, 0.0) for r in results.values()))
    width = max(12, *(len(n) + 2 for n in names))
    print("\nCPU (cores) per node process")
    print(f"{'node':<18}" + "".join(f"{n:>{width}}" for n in names))
    for node in nodes:
        cells = [results[n]["cores"].get(node) for n in names]
        print(f"{node:<18}" + "".join(f"{'-' if c is None else f'{c:.2f}':>{width}}" for c in cells))
    print(f"{'total':<18}" + "".join(f"{sum(results[n]['cores'].values()):>{width}.2f}" for n in names))
    print(f"{'(probe)':<18}" + "".join(f"{results[n]['probe']:>{width}.2f}" for n in names))
    print(f"{'real-time factor':<18}" + "".join(f"{results[n]['speed'] or 0:>{width}.2f}" for n in names))
    print("\nTopic rates (Hz of sim time; * = below 90 % of the configured rate)")
    topics = sorted(CONFIGURED_HZ)
    print(f"{'topic':<42}{'want':>6}" + "".join(f"{n:>{width}}" for n in names))
    for topic in topics:
        cells = []
        for n in names:
            rate = results[n]["rates"].get(topic)
            flag = "*" if rate is not None and rate < 0.9 * CONFIGURED_HZ[topic] else " "
            cells.append("-" if rate is None else f"{rate:.1f}{flag}")
        print(f"{topic:<42}{CONFIGURED_HZ[topic]:>6.0f}" + "".join(f"{c:>{width}}" for c in cells))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=12.0)
    parser.add_argument("--variants", default="default,no_viewer,no_recorder,no_camera")
    parser.add_argument("--probe", choices=("all", "clock"), default="all",
                        help="all: count every topic (costs the graph about half a core); clock: /clock only")
    parser.add_argument("--extra", nargs="*", default=[], metavar="NAME:=VALUE",
                        help="launch arguments added to every variant (e.g. lockstep_slack:=0.3)")
    parser.add_argument("--params-file", type=Path, metavar="FILE",
                        help="a node-parameters file for every variant (aerial_sim launch --params-file)")
    parser.add_argument("--probe-all", action="store_true",
                        help=f"also probe the streams made only for a listener ({', '.join(ON_DEMAND)})")
    options = parser.parse_args()
    chosen = [v.strip() for v in options.variants.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    results = {}
    for index, variant in enumerate(chosen, 1):
        print(f"[{index}/{len(chosen)}] {variant}: warm-up {options.warmup:g} s, measuring {options.seconds:g} s...",
              flush=True)
        skip = () if options.probe_all else ON_DEMAND
        args = [*VARIANTS[variant], *options.extra, *(["--params-file", str(options.params_file)] if options.params_file else [])]
        results[variant] = measure_variant(args, options.warmup, options.seconds, options.probe, skip)
    print(f"\nos: {os.cpu_count()} cores; sim.launch.yaml mission:=none airsim_api:=false scene:=urban")
    print_tables(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
