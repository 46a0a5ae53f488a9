"""Largest number of vehicles in real time: bisection over N, for the batched core and the launched fleet.

    tools/dev.sh bench swarm_realtime [--parts core,fleet] [--core-start 1000] [--fleet-start 4]
                                      [--fleet-max 200] [--seconds 10] [--warmup 20] [--min-factor 0.97]
                                      [--ground-truth-hz 50]

Each part grows N by doubling until a trial falls below real time, then bisects between the
last N that held and the first that did not (to ``--core-tolerance`` / ``--fleet-tolerance``
of N), printing every trial. The answer is the largest N seen to hold.

- core (no ROS): N quad-X hovering at 10 m on a 3 m grid, 1000 Hz steps, ``world.step(4)`` per
  4 ms control period as the physics node drives it (the batched path above one vehicle); a
  trial's real-time factor is simulated seconds per CPU second of this process over about
  ``--core-seconds`` (best of ``--repeats``, one thread): what one core of its own would do, which
  a shared machine's wall clock does not show (printed beside it). Holds: factor >= 1.
- fleet: ``sim.launch.yaml vehicles:=N scene:=empty mission:=none use_camera:=false
  viewer:=false airsim_api:=false record:=false`` (physics, two processes for every vehicle's
  sensors and one for every flight controller, as in doc/many_vehicles.md; the vehicles wait
  on the ground, disarmed), the physics node's ``ground_truth_rate_hz`` set to ``--ground-truth-hz``
  (50, issue 14's figure; 0 = the node's own choice). Once every sensor and controller process has
  logged that it built all its nodes (100 vehicles: about 40 s after the first ``/clock``), and
  ``--warmup`` s more, the real-time factor from
  ``/clock`` over ``--seconds`` s, the last vehicle's ground-truth rate per simulated second,
  the physics node's own choice (its log line) and the CPU of every launched process. Holds:
  factor >= ``--min-factor`` (a paced clock cannot exceed 1; the window's noise is about 1 %)
  with ground truth at 50 Hz or more per vehicle (the node never goes below its 50 Hz floor, it
  gives up real time instead, and says so), and no flight controller warned that its odometry
  arrived below 50 Hz of sim time (a starved controller process drops best-effort messages: at
  N = 80 on 2026-11-25 each controller got about a third of them), and the last vehicle's IMU
  delivered at least 95 % of its 200 Hz per simulated second to this process (sensor processes
  that fall behind lose messages while the clock keeps time).

Figures are wall-clock on a shared 2-core machine: other sessions' load moves them.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "benchmarks")]
from _domain import private_domain  # noqa: E402

private_domain()
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("AERIAL_SIM_SHARE", str(REPO))
os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])

FLEET_ARGS = ["scene:=empty", "mission:=none", "use_camera:=false", "viewer:=false", "airsim_api:=false",
              "record:=false"]
FLOOR_HZ = 50.0
#: The fleet's IMU rate (mpu6000 preset) and the share of it the last vehicle's IMU must deliver per
#: simulated second for the sensor processes to count as keeping up (best effort: a few may be lost).
IMU_HZ = 200.0
SENSOR_SHARE = 0.95


def bisect_largest(holds, start: int, maximum: int, tolerance: float) -> int | None:
    """Largest N in [1, maximum] for which ``holds(N)`` (assumed monotone), found by doubling from
    ``start`` then bisecting to ``tolerance`` x N; None when not even N = 1 holds."""
    low, high = 0, None
    n = start
    while n <= maximum:
        if holds(n):
            low = n
            n *= 2
        else:
            high = n
            break
    if high is None:
        return low  # held up to the maximum asked for
    if low == 0:  # the start already failed: search below it
        n = high // 2
        while n >= 1 and not holds(n):
            high, n = n, n // 2
        if n < 1:
            return None
        low = n
    while high - low > max(1, int(tolerance * low)):
        middle = (low + high) // 2
        if holds(middle):
            low = middle
        else:
            high = middle
    return low


# -- core --------------------------------------------------------------------------------------


def core_factor(count: int, seconds: float, repeats: int) -> tuple[float, float]:
    """Real-time factor of N hovering quads per CPU second of this process and per wall second
    (best of ``repeats`` each): the first is what one core of its own would do, the second what
    the shared machine gave."""
    from swarm import RATE_HZ, STEPS_PER_CONTROL, hover_world

    world = hover_world(count)
    start = time.process_time()
    for _ in range(10):
        world.step(STEPS_PER_CONTROL)  # ten periods to size the measurement
    one = max((time.process_time() - start) / 10, 1e-6)
    periods = max(10, int(seconds / one))
    best_cpu = best_wall = math.inf
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(periods):
            world.step(STEPS_PER_CONTROL)
        best_cpu = min(best_cpu, time.process_time() - cpu)
        best_wall = min(best_wall, time.perf_counter() - wall)
    simulated = periods * STEPS_PER_CONTROL / RATE_HZ
    return simulated / best_cpu, simulated / best_wall


def core_part(args) -> int | None:
    print(f"core: N quad-X hovering, 1000 Hz steps, world.step(4) per control period, one thread; "
          f"about {args.core_seconds:g} CPU s per trial, best of {args.repeats}; real-time factor per CPU "
          "second (one core of its own; decides) and per wall second (this shared machine)", flush=True)

    def holds(count: int) -> bool:
        factor, wall_factor = core_factor(count, args.core_seconds, args.repeats)
        verdict = "holds" if factor >= 1.0 else "below real time"
        print(f"  N = {count:>7}: real-time factor {factor:6.2f} per CPU s ({count * factor / 1e3:6.2f} M "
              f"vehicle-steps/s), {wall_factor:6.2f} per wall s  {verdict}", flush=True)
        return factor >= 1.0

    largest = bisect_largest(holds, args.core_start, args.core_max, args.core_tolerance)
    print(f"core: largest N in real time on one core = {largest} (to within {args.core_tolerance:.0%})\n", flush=True)
    return largest


# -- launched fleet ----------------------------------------------------------------------------


def launch_fleet(count: int, log, ground_truth_hz: float = 0.0) -> subprocess.Popen:
    """``ground_truth_hz`` > 0 sets the physics node's ``ground_truth_rate_hz`` (a params file for ``physics``)."""
    run_dir = Path(tempfile.mkdtemp(prefix="swarm_realtime_"))
    extra = []
    if ground_truth_hz > 0:
        params = run_dir / "ground_truth_rate.yaml"
        params.write_text(f"physics:\n  ros__parameters:\n    ground_truth_rate_hz: {float(ground_truth_hz)}\n")
        extra = ["--params-file", str(params)]
    command = [sys.executable, "-m", "aerial_sim", "launch", *extra, "sim.launch.yaml", f"vehicles:={count}",
               *FLEET_ARGS, f"run_dir:={run_dir}"]
    return subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def stop_fleet(launcher: subprocess.Popen) -> None:
    try:
        os.killpg(launcher.pid, signal.SIGINT)
        launcher.wait(timeout=40)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()


#: What each fleet process logs once it has built every vehicle's node (``aerial_sim.nodes.ros.hosting``).
BUILT_LINES = (r"\[sensors_0\] .*one process for ", r"\[sensors_1\] .*one process for ",
               r"\[flight_controller\] .*serving \d+ vehicles in one process")


def fleet_built(log) -> bool:
    """Whether the launch log says every sensor and controller process has built all its nodes: at
    100 vehicles that takes about 40 s after the first /clock on this machine (200 sensor nodes per
    process), and a trial measured before it would miss most of their load."""
    log.flush()
    log.seek(0)
    text = log.read()
    log.seek(0, os.SEEK_END)
    return all(re.search(line, text) for line in BUILT_LINES)


def fleet_trial(node, executor, count: int, warmup_s: float, seconds: float, start_timeout_s: float,
                ground_truth_hz: float = 0.0) -> dict:
    """Launch N vehicles, measure, stop: real-time factor, ground-truth rate, chosen rate, CPU per process."""
    from graph import cpu_seconds, node_processes
    from nav_msgs.msg import Odometry
    from rosgraph_msgs.msg import Clock

    from aerial_sim.nodes.ros.qos import stream_qos
    from aerial_sim.nodes.ros.stamps import from_stamp

    from sensor_msgs.msg import Imu

    clock: list[tuple[float, float]] = []
    odom: list[float] = []  # sim stamps of the last vehicle's ground truth
    imu: list[float] = []  # wall times of the last vehicle's IMU messages
    subscriptions = [
        node.create_subscription(Clock, "/clock", lambda m: clock.append((time.monotonic(), from_stamp(m.clock))),
                                 stream_qos()),
        node.create_subscription(Odometry, f"/drone{count}/ground_truth/odom",
                                 lambda m: odom.append(from_stamp(m.header.stamp)), stream_qos()),
        node.create_subscription(Imu, f"/drone{count}/imu/data", lambda m: imu.append(time.monotonic()), stream_qos(),
                                 raw=True),
    ]
    log = tempfile.TemporaryFile(mode="w+")
    launcher = launch_fleet(count, log, ground_truth_hz)
    result = {"factor": 0.0, "odom_hz": 0.0, "imu_hz": 0.0, "chosen": "?", "floored": False, "cores": {}, "starved": [], "built_s": math.nan}
    try:
        deadline = time.monotonic() + start_timeout_s
        while not clock and time.monotonic() < deadline and launcher.poll() is None:
            executor.spin_once(timeout_sec=0.1)
        if not clock:
            result["chosen"] = "no /clock (did not start)"
            return result
        started = time.monotonic()
        while not fleet_built(log) and time.monotonic() < deadline and launcher.poll() is None:
            executor.spin_once(timeout_sec=0.2)
        result["built_s"] = time.monotonic() - started
        if not fleet_built(log):
            result["chosen"] = "the sensor and controller processes were not all built"
            return result
        end = time.monotonic() + warmup_s
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.1)
        processes = node_processes(launcher.pid)
        before = {name: cpu_seconds(pid) for name, pid in processes.items()}
        first_clock, first_odom, first_imu = len(clock), len(odom), len(imu)
        wall_start = time.monotonic()
        end = wall_start + seconds
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.1)
        wall = time.monotonic() - wall_start
        for name, pid in processes.items():
            try:
                result["cores"][name] = (cpu_seconds(pid) - before[name]) / wall
            except OSError:
                result["cores"][name] = float("nan")
        (t0, sim0), (t1, sim1) = clock[first_clock], clock[-1]
        result["factor"] = (sim1 - sim0) / (t1 - t0) if t1 > t0 else 0.0
        result["imu_hz"] = (len(imu) - first_imu) / wall  # per wall second
        stamps = odom[first_odom:]
        if len(stamps) > 1 and stamps[-1] > stamps[0]:
            result["odom_hz"] = (len(stamps) - 1) / (stamps[-1] - stamps[0])
    finally:
        stop_fleet(launcher)
        for subscription in subscriptions:
            node.destroy_subscription(subscription)
        log.seek(0)
        text = log.read()
        log.close()
        chosen = re.search(r"ground truth ([\d.]+) Hz per vehicle \(asked", text)
        if chosen:
            result["chosen"] = f"{chosen.group(1)} Hz"
        result["floored"] = "load forces the ground-truth floor" in text
        result["starved"] = sorted(set(re.findall(r"\[(\w+)\.flight_controller\]: ground_truth/odom arrives every", text)))
    return result


def fleet_part(args) -> int | None:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from aerial_sim.nodes.ros.transport import use_transport_profile

    use_transport_profile()
    rclpy.init()
    node = rclpy.create_node(f"swarm_realtime_bench_{os.getpid()}")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    asked = f"ground_truth_rate_hz {args.ground_truth_hz:g}" if args.ground_truth_hz > 0 else "physics' own ground-truth rate"
    print(f"fleet: sim.launch.yaml vehicles:=N {' '.join(FLEET_ARGS)}, {asked}; warm-up {args.warmup:g} s, "
          f"measure {args.seconds:g} s; holds: real-time factor >= {args.min_factor:g} with ground truth "
          f">= {FLOOR_HZ:g} Hz per vehicle; ROS_DOMAIN_ID {os.environ['ROS_DOMAIN_ID']}", flush=True)
    trials = {}

    def holds(count: int) -> bool:
        figures = fleet_trial(node, executor, count, args.warmup, args.seconds, args.start_timeout, args.ground_truth_hz)
        trials[count] = figures
        starved = figures["starved"]
        sensors_keep_up = figures["imu_hz"] >= SENSOR_SHARE * IMU_HZ * figures["factor"]
        ok = figures["holds"] = (figures["factor"] >= args.min_factor and figures["odom_hz"] >= 0.9 * FLOOR_HZ
                                 and not starved and sensors_keep_up)
        total = sum(c for c in figures["cores"].values() if not math.isnan(c))
        top = ", ".join(f"{name} {cores:.2f}" for name, cores in
                        sorted(figures["cores"].items(), key=lambda item: -item[1])[:4])
        per_sim_s = total / figures["factor"] if figures["factor"] > 0 else math.nan
        figures["per_sim_s"] = per_sim_s
        print(f"  N = {count:>4}: real-time factor {figures['factor']:5.3f}, ground truth received {figures['odom_hz']:5.1f} Hz "
              f"(drone{count}; physics chose {figures['chosen']}{', floor forced' if figures['floored'] else ''}; "
              f"every node built {figures['built_s']:.0f} s after the first /clock), "
              f"CPU {total:.2f} cores = {per_sim_s:.2f} CPU s per simulated s ({top}); "
              f"IMU of drone{count} {figures['imu_hz']:.0f} per wall s; "
              f"controllers given ground truth below 50 Hz: {len(starved)}{' (' + ', '.join(starved[:3]) + ', ...)' if starved else ''}  "
              f"{'holds' if ok else 'does not hold'}", flush=True)
        return ok

    try:
        if args.fleet_counts:
            for count in (int(c) for c in args.fleet_counts.split(",")):
                holds(count)
            largest = max((n for n, f in trials.items() if f["holds"]), default=None)
        else:
            largest = bisect_largest(holds, args.fleet_start, args.fleet_max, args.fleet_tolerance)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    print(f"fleet: largest N in real time = {largest} (to within {args.fleet_tolerance:.0%})", flush=True)
    if largest and largest in trials:
        cores = trials[largest]["cores"]
        sensors = sum(c for name, c in cores.items() if name.startswith("sensors") and not math.isnan(c))
        print(f"  at N = {largest}: sensor processes {sensors:.2f} cores = {sensors / largest * 1e3:.0f} milli-cores "
              f"per vehicle; flight controllers {cores.get('flight_controller', 0.0):.2f}; "
              f"physics {cores.get('physics', 0.0):.2f}", flush=True)
    return largest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="core,fleet")
    parser.add_argument("--core-start", type=int, default=1000)
    parser.add_argument("--core-max", type=int, default=1_000_000)
    parser.add_argument("--core-seconds", type=float, default=1.0, help="wall time per core trial (about)")
    parser.add_argument("--core-tolerance", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fleet-start", type=int, default=4)
    parser.add_argument("--fleet-max", type=int, default=200)
    parser.add_argument("--fleet-tolerance", type=float, default=0.15)
    parser.add_argument("--fleet-counts", help="measure these N (comma-separated) instead of bisecting")
    parser.add_argument("--seconds", type=float, default=10.0, help="measuring window per fleet trial, wall s")
    parser.add_argument("--warmup", type=float, default=20.0, help="wall s after every node was built")
    parser.add_argument("--start-timeout", type=float, default=240.0)
    parser.add_argument("--min-factor", type=float, default=0.97)
    parser.add_argument("--ground-truth-hz", type=float, default=50.0,
                        help="physics ground_truth_rate_hz per vehicle (issue 14 asks for 50 Hz); 0 = the node's own choice")
    args = parser.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = set(parts) - {"core", "fleet"}
    if unknown:
        parser.error(f"unknown part(s) {', '.join(sorted(unknown))} (known: core, fleet)")
    print(f"os: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start (other work shares them)\n")
    if "core" in parts:
        core_part(args)
    if "fleet" in parts:
        fleet_part(args)
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
