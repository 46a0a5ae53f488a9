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

``--flight``: the graph exactly as ``tools/dev.sh sim`` starts it (the default mission, the AirSim
server on), measured mid-flight: the window opens once ``/clock`` passes ``--after-sim-s`` (the
vehicle has taken off) and reads ``/clock`` only; then the run is left to land and end by itself,
and its ``recording.txt`` gives the whole run's real-time factor and the camera's rate per simulated
second. The load average (``/proc/loadavg``) is printed before and after, since other work on the
machine moves every figure. E.g. ``tools/dev.sh bench graph --flight --variants default --extra scene:=city``.

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
from _domain import private_domain  # noqa: E402

private_domain()
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

    from aerial_sim.cdr.decode import cdr_header_stamp_ns
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


def wait_for_sim_time(sim_s: float, timeout_s: float) -> bool:
    """Wait until ``/clock`` reads ``sim_s`` or more (False after ``timeout_s`` wall seconds)."""
    import rclpy
    from rclpy.node import Node
    from rosgraph_msgs.msg import Clock

    from aerial_sim.cdr.decode import cdr_header_stamp_ns
    from aerial_sim.nodes.ros.executors import make_executor
    from aerial_sim.nodes.ros.qos import stream_qos

    context = rclpy.context.Context()
    rclpy.init(args=[], context=context)
    node = Node(f"graph_bench_wait_{os.getpid()}", context=context, enable_rosout=False,
                start_parameter_services=False)
    latest = [0.0]

    def on_clock(data: bytes) -> None:
        stamp_ns = cdr_header_stamp_ns(data)
        if stamp_ns is not None:
            latest[0] = stamp_ns * 1e-9

    node.create_subscription(Clock, "/clock", on_clock, stream_qos(False), raw=True)
    executor = make_executor(context)
    executor.add_node(node)
    deadline = time.monotonic() + timeout_s
    while latest[0] < sim_s and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.2)
    executor.remove_node(node)
    node.destroy_node()
    rclpy.try_shutdown(context=context)
    return latest[0] >= sim_s


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def recording_figures(run_dir: Path) -> dict:
    """The whole run's real-time factor and camera colour rate (Hz of sim time) from its recording.txt."""
    figures = {}
    report = run_dir / "recording.txt"
    if not report.exists():
        return figures
    for line in report.read_text().splitlines():
        words = line.split()
        if line.startswith("real-time factor:"):
            figures["run_rtf"] = float(words[-1])
        elif words and words[0].startswith("/drone1/camera/") and words[0].endswith("/image_raw") and "Hz" in words:
            figures.setdefault("camera_hz", {})[words[0].split("/")[3]] = float(words[words.index("Hz") - 1])
    return figures


def measure_variant(args: list[str], warmup_s: float, seconds: float, probe: str = "all",
                    skip: tuple[str, ...] = (), flight_after_sim_s: float | None = None) -> dict:
    from aerial_sim.cli.topics import _survey

    run_dir = Path(tempfile.mkdtemp(prefix="graph_bench_"))
    graph = [] if flight_after_sim_s is not None else ["mission:=none", "airsim_api:=false"]
    command = [sys.executable, "-m", "aerial_sim", "launch", "sim.launch.yaml", *graph, f"run_dir:={run_dir}", *args]
    load_before = load_average()
    log = open(run_dir / "launch.log", "wb")  # noqa: SIM115 - the launch writes it until it ends
    launcher = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    figures = {"run_dir": str(run_dir)}
    try:
        if flight_after_sim_s is None:
            time.sleep(warmup_s)
        elif not wait_for_sim_time(flight_after_sim_s, 600.0):
            raise RuntimeError("the flight never reached its measuring window (no /clock for 600 s)")
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
        if flight_after_sim_s is not None:
            try:
                launcher.wait(timeout=600)  # the mission lands and the run ends by itself
            except subprocess.TimeoutExpired:
                pass
            figures = recording_figures(run_dir)
        return {"cores": cores, "probe": probe, "speed": speed, "rates": rates, "load": (load_before, load_average()),
                **figures}
    finally:
        stop_launch(launcher)


def stop_launch(launcher: subprocess.Popen) -> None:
    if launcher.poll() is None:
        try:
            os.killpg(launcher.pid, signal.SIGINT)
        except ProcessLookupError:
            return
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
    print(f"{'load before':<18}" + "".join(f"{results[n]['load'][0]:>{width}}" for n in names))
    print(f"{'load after':<18}" + "".join(f"{results[n]['load'][1]:>{width}}" for n in names))
    if any("run_rtf" in r for r in results.values()):
        print("\nWhole run (recording.txt)")
        print(f"{'real-time factor':<18}" + "".join(f"{results[n].get('run_rtf', 0):>{width}.3f}" for n in names))
        streams = sorted({s for r in results.values() for s in r.get("camera_hz", {})})
        for stream in streams:
            print(f"{'camera ' + stream:<18}" + "".join(
                f"{results[n].get('camera_hz', {}).get(stream, 0):>{width}.2f}" for n in names))
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
    parser.add_argument("--flight", action="store_true",
                        help="the default mission and the AirSim server, measured mid-flight (see above)")
    parser.add_argument("--after-sim-s", type=float, default=6.0,
                        help="--flight: the window opens at this sim time (s)")
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
        results[variant] = measure_variant(args, options.warmup, options.seconds,
                                           "clock" if options.flight else options.probe, skip,
                                           options.after_sim_s if options.flight else None)
    graph = "the default mission, measured mid-flight" if options.flight else "mission:=none airsim_api:=false"
    print(f"\nos: {os.cpu_count()} cores; sim.launch.yaml {graph} {' '.join(options.extra) or 'scene:=urban'}")
    print_tables(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
