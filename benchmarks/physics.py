"""Physics speed: the engine's steps per second, the same flight in RotorPy, and the physics node.

    tools/dev.sh bench physics [--steps N] [--repeats R] [--node-seconds S] [--no-node]

Core (pure Python, no ROS): steps/s (and the real-time factor at 1000 Hz) for one
quad-X hovering with a control update every 4 steps (as the physics node drives
it); one quad-X resting on the ground, driven the same way (it sleeps: its steps
change nothing), and again with sleeping switched off (the contact path awake);
and four vehicles in one world. Then the same one-vehicle hover, 1 ms steps, in
RotorPy (Folk et al., the simulator the house style cites) and the ratio. RotorPy
is not a project dependency: on first run it is installed with ``pip --target
build/benchmark_deps --no-deps`` (it only needs NumPy and SciPy for this), or
skipped with a message if that fails.

Node: ``python -m aerial_sim.nodes.physics`` in its own process (its own
ROS_DOMAIN_ID, discovery on localhost), one quad-X at 5 m fed hover motor
commands at 250 Hz from this process. Over the window it prints the physics rate
actually achieved (sim steps per wall second, from ``/clock``), the real-time
factor, the ground-truth odometry rate received, and the node's CPU share (user +
system time from ``/proc/<pid>/stat``, in cores). Goal: 1000 Hz in real time on
under half a core. Then once with ``clock_speed:=0`` (as fast as possible): the
real-time factor it reaches.

Timings are wall-clock on a shared machine: take the best of several repeats.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from _results import record, row
from aerial_sim.environment.environment import Environment, EnvironmentParams  # noqa: E402
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld  # noqa: E402
from aerial_sim.vehicles.multirotor import load_vehicle  # noqa: E402

RATE_HZ = 1000.0
STEPS_PER_CONTROL = 4
DEPS = REPO / "build" / "benchmark_deps"
NODE_ALTITUDE_M = 5.0
COMMAND_RATE_HZ = 250.0


def best_rate(run, steps: int, repeats: int) -> float:
    """Best steps/s over ``repeats`` runs of ``run(steps)`` (the least disturbed one)."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        run(steps)
        best = min(best, time.perf_counter() - start)
    return steps / best


def hover_world(count: int = 1, height: float = 10.0) -> tuple[PhysicsWorld, tuple[float, ...]]:
    world = PhysicsWorld(PhysicsParams(rate_hz=RATE_HZ), EnvironmentParams())
    quad = load_vehicle("quad_x")
    controls = quad.hover_controls(world.environment.air_density(height), world.environment.gravity(height))
    for index in range(count):
        name = f"drone{index + 1}"
        world.add_vehicle(name, quad, position=(3.0 * index, 0.0, height))
        world.set_controls(name, controls, spun_up=True)
    return world, controls


def aerial_sim_hover(steps: int, repeats: int, count: int = 1) -> float:
    world, controls = hover_world(count)
    names = world.vehicle_names()

    def run(n):
        for _ in range(n // STEPS_PER_CONTROL):
            for name in names:
                world.set_controls(name, controls)
            world.step(STEPS_PER_CONTROL)

    return best_rate(run, steps, repeats)


def aerial_sim_resting(steps: int, repeats: int, sleep: bool = True) -> float:
    """A quad-X on the ground, motors off, driven as the physics node drives it: every
    control period the same command and (zero) external wrench again, then 4 steps."""
    world = PhysicsWorld(PhysicsParams(rate_hz=RATE_HZ, sleep_at_rest=sleep), EnvironmentParams())
    quad = load_vehicle("quad_x")
    world.add_vehicle("drone1", quad, position=(0.0, 0.0, 0.0))
    world.step(100)
    off = (0.0,) * len(quad.rotors)
    zero = (0.0, 0.0, 0.0)

    def run(n):
        for _ in range(n // STEPS_PER_CONTROL):
            world.set_controls("drone1", off)
            world.set_external_wrench("drone1", zero, zero)
            world.step(STEPS_PER_CONTROL)

    return best_rate(run, steps, repeats)


def rotorpy_hover(steps: int, repeats: int) -> float | None:
    """The same hover in RotorPy (1 ms steps, motor-speed commands), or None if unavailable."""
    if not (DEPS / "rotorpy").is_dir():
        print("  installing RotorPy into build/benchmark_deps (first run only)...", flush=True)
        result = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(DEPS), "rotorpy"],
            capture_output=True, text=True,
        )
        if result.returncode != 0:
            print(f"  RotorPy skipped: pip install failed: {result.stderr.strip().splitlines()[-1:]}")
            return None
    sys.path.insert(0, str(DEPS))
    try:
        import numpy as np
        from rotorpy.vehicles.crazyflie_params import quad_params
        from rotorpy.vehicles.multirotor import Multirotor
    except ImportError as error:
        print(f"  RotorPy skipped: {error}")
        return None
    hover_speed = math.sqrt(quad_params["mass"] * 9.81 / (quad_params["num_rotors"] * quad_params["k_eta"]))
    initial = {
        "x": np.array([0.0, 0.0, 10.0]), "v": np.zeros(3), "q": np.array([0.0, 0.0, 0.0, 1.0]), "w": np.zeros(3),
        "wind": np.zeros(3), "rotor_speeds": np.full(4, hover_speed),
    }
    vehicle = Multirotor(quad_params, initial_state=initial)
    control = {"cmd_motor_speeds": np.full(4, hover_speed)}
    dt = 1.0 / RATE_HZ

    def run(n):
        state = {k: v.copy() for k, v in initial.items()}
        for _ in range(n):
            state = vehicle.step(state, control, dt)

    return best_rate(run, steps, repeats)


# -- the physics node ------------------------------------------------------------------------


@dataclass
class NodeFigures:
    """What one run of the physics node achieved over the measuring window."""

    physics_rate_hz: float  # sim steps per wall second: RATE_HZ x sim-time advance / wall time
    real_time_factor: float
    odom_rate_hz: float  # ground-truth odometry messages received per wall second
    cpu_cores: float  # the node's user + system CPU time / wall time


def cpu_seconds(pid: int) -> float:
    """User + system CPU time (s) of process ``pid``, all its threads (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15


def start_physics_node(clock_speed: float, log) -> subprocess.Popen:
    """The node in its own process (ROS environment variables as :func:`physics_node` set them),
    its output to the file ``log``."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), AERIAL_SIM_SHARE=str(REPO))
    command = [sys.executable, "-m", "aerial_sim.nodes.physics", "--ros-args",
               "-p", f"initial_positions:=[0.0,0.0,{NODE_ALTITUDE_M}]", "-p", f"clock_speed:={clock_speed}"]
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


def stop_physics_node(process: subprocess.Popen) -> None:
    """Ctrl-C the node; kill it if it has not exited after 10 s."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def tail(log, characters: int = 2000) -> str:
    log.seek(0)
    return log.read()[-characters:]


def measure_physics_node(clock_speed: float, seconds: float) -> NodeFigures:
    """Run the node, feed it hover commands at 250 Hz, measure over ``seconds`` after it settles."""
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import Float64MultiArray

    from aerial_sim.nodes.ros.qos import COMMAND_QOS, stream_qos
    from aerial_sim.nodes.ros.stamps import from_stamp

    environment = Environment(EnvironmentParams())
    hover = load_vehicle("quad_x").hover_controls(
        environment.air_density(NODE_ALTITUDE_M), environment.gravity(NODE_ALTITUDE_M)
    )
    log = tempfile.TemporaryFile(mode="w+")
    process = start_physics_node(clock_speed, log)
    node = Node(f"physics_bench_{os.getpid()}")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    clock: list[tuple[float, float]] = []  # (wall time received, sim time)
    odom: list[float] = []  # wall time received
    node.create_subscription(Clock, "/clock", lambda m: clock.append((time.monotonic(), from_stamp(m.clock))),
                             stream_qos())
    node.create_subscription(Odometry, "/drone1/ground_truth/odom", lambda m: odom.append(time.monotonic()),
                             stream_qos())
    commands = node.create_publisher(Float64MultiArray, "/drone1/motor_commands", COMMAND_QOS)
    message = Float64MultiArray(data=list(hover))
    next_command = time.monotonic()

    def spin_for(duration: float) -> None:
        nonlocal next_command
        end = time.monotonic() + duration
        while (now := time.monotonic()) < end:
            if now >= next_command:
                commands.publish(message)
                next_command = max(next_command + 1.0 / COMMAND_RATE_HZ, now)
            executor.spin_once(timeout_sec=max(0.0, min(next_command, end) - time.monotonic()))

    try:
        deadline = time.monotonic() + 30.0
        while not (clock and commands.get_subscription_count()):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the physics node did not come up:\n{tail(log)}")
            spin_for(0.1)
        spin_for(1.0)  # let discovery settle and the rotors spin up
        wall_start, cpu_start, first = time.monotonic(), cpu_seconds(process.pid), len(clock)
        spin_for(seconds)
        wall_end, cpu_end = time.monotonic(), cpu_seconds(process.pid)
        if process.poll() is not None:
            raise RuntimeError(f"the physics node stopped:\n{tail(log)}")
        if len(clock) - first < 2:
            raise RuntimeError("no /clock received in the measuring window")
    finally:
        executor.shutdown()
        node.destroy_node()
        stop_physics_node(process)
        log.close()
    (t0, sim0), (t1, sim1) = clock[first], clock[-1]
    factor = (sim1 - sim0) / (t1 - t0)
    received = sum(1 for t in odom if wall_start <= t <= wall_end)
    return NodeFigures(RATE_HZ * factor, factor, received / (wall_end - wall_start),
                       (cpu_end - cpu_start) / (wall_end - wall_start))


def physics_node(seconds: float) -> None:
    """Print the node's figures in real time and as fast as possible (or why they were skipped)."""
    from _domain import private_domain

    private_domain()
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    try:
        import rclpy

        from aerial_sim.nodes.ros.transport import use_transport_profile
    except ImportError as error:
        print(f"physics node skipped: {error}")
        return
    use_transport_profile()
    rclpy.init()
    try:
        print(f"physics node, 1 quad-X hovering at {NODE_ALTITUDE_M:g} m, hover commands at {COMMAND_RATE_HZ:g} Hz, "
              f"ROS_DOMAIN_ID {os.environ['ROS_DOMAIN_ID']}")
        live = measure_physics_node(1.0, seconds)
        print(f"  real time (clock_speed 1), {seconds:g} s: physics {live.physics_rate_hz:7.1f} Hz "
              f"(real-time factor {live.real_time_factor:.3f}), ground truth {live.odom_rate_hz:5.1f} Hz, "
              f"CPU {live.cpu_cores:.2f} core")
        met = live.real_time_factor > 0.99 and live.cpu_cores < 0.5
        print(f"  goal (1000 Hz in real time on under half a core): {'met' if met else 'NOT met'}")
        fast = measure_physics_node(0.0, seconds / 2)
        print(f"  as fast as possible (clock_speed 0), {seconds / 2:g} s: physics {fast.physics_rate_hz:9,.0f} Hz "
              f"(real-time factor {fast.real_time_factor:.1f}), ground truth {fast.odom_rate_hz:6,.0f} Hz received, "
              f"CPU {fast.cpu_cores:.2f} core")
    except RuntimeError as error:
        print(f"  physics node failed: {error}")
    finally:
        rclpy.try_shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000, help="physics steps per timed run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--node-seconds", type=float, default=10.0, help="measuring window of the node in real time")
    parser.add_argument("--no-node", action="store_true", help="skip the physics node")
    parser.add_argument("--no-record", action="store_true", help="do not write doc/results/physics.json")
    args = parser.parse_args()

    print(f"aerial_sim physics core, {RATE_HZ:g} Hz steps, Python {sys.version.split()[0]}")
    hover = aerial_sim_hover(args.steps, args.repeats)
    print(f"  1 quad-X hovering     : {hover:10,.0f} steps/s  ({hover / RATE_HZ:6.1f} x real time)")
    resting = aerial_sim_resting(args.steps, args.repeats)
    print(f"  1 quad-X on the ground: {resting:10,.0f} steps/s  ({resting / RATE_HZ:6.1f} x real time), asleep")
    awake = aerial_sim_resting(args.steps // 4, args.repeats, sleep=False)
    print(f"  ... with sleep off    : {awake:10,.0f} steps/s  ({awake / RATE_HZ:6.1f} x real time), contact path")
    four = aerial_sim_hover(args.steps // 4, args.repeats, count=4)
    print(f"  4 quad-X hovering     : {four:10,.0f} world steps/s  ({four / RATE_HZ:6.1f} x real time)")
    rotorpy = rotorpy_hover(max(200, args.steps // 20), args.repeats)
    if rotorpy is not None:
        print(f"RotorPy, same hover, 1 ms steps: {rotorpy:10,.0f} steps/s  ({rotorpy / RATE_HZ:6.2f} x real time)")
        print(f"  aerial_sim / RotorPy: {hover / rotorpy:.0f} x")
    rows = [row("1 quad-X hovering", round(hover), "steps/s", f"{hover / RATE_HZ:.1f}x real time (goal: 50x)"),
            row("1 quad-X resting on the ground, asleep", round(resting), "steps/s", f"{resting / RATE_HZ:.1f}x real time"),
            row("1 quad-X resting, sleep off (contact path)", round(awake), "steps/s", f"{awake / RATE_HZ:.1f}x real time"),
            row("4 quad-X hovering", round(four), "world steps/s", f"{four / RATE_HZ:.1f}x real time")]
    if rotorpy is not None:
        rows.append(row("RotorPy, same hover, 1 ms steps", round(rotorpy), "steps/s",
                        f"aerial_sim {hover / rotorpy:.0f}x faster, same run"))
    record("physics", f"Physics core ({RATE_HZ:g} Hz steps)", rows,
           "tools/dev.sh bench physics --no-node", notes="Best of the repeats; the node figures (--node) are printed, not recorded.")
    if not args.no_node:
        physics_node(args.node_seconds)


if __name__ == "__main__":
    main()
