"""The physics node's own CPU per lockstep period, in process: command in, step, state out.

    tools/dev.sh bench physics_period [--before DIR] [--pairs 4] [--rounds 5] [--periods 2000] [--no-record]

In a fresh process per checkout (its ``src`` first on ``PYTHONPATH``), a lockstep ``PhysicsNode`` is built as
the launch builds it (one quad, empty scene) and its simulation thread stopped once started; the readers a
batch graph's container has are there (the recorder's raw reader of each of the five streams, and one more of
the odometry and the ground-truth IMU: the shared odometry reader and the IMU node), unspun. Then the calling
thread runs the node's period itself, the parts timed with the thread's CPU clock:

- ``command in``: a motor command published raw (as the flight controller does), then the node's lockstep look
  (``LockstepWait.ready``: the wait set, the take, the decoding, the gate) and ``_apply_inputs``;
- ``step``: ``PhysicsWorld.step`` of one period (4 steps of 1 ms);
- ``state out``: ``_publish_state`` (ground truth, encoded and published: clock, wind, odometry, IMU, rotors);
- ``period``: the three in a row. The commands alternate every simulated second between a climb and a sink, so
  the air density changes as in a flight.

Each figure is the best of ``--rounds`` runs of ``--periods`` periods (us of thread CPU a period). With
``--before``, the checkouts alternate ``--pairs`` times; the table gives each's best and the ratio. It is the
node's code alone: in a whole flight the same code costs two to three times as much (doc/scale.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PARTS = ("command in", "step", "state out", "period")


def measure(rounds: int, periods: int) -> dict[str, float]:
    """The parts' best thread CPU per period (us) in this process (the checkout first on ``sys.path``)."""
    import rclpy
    from geometry_msgs.msg import Vector3Stamped
    from nav_msgs.msg import Odometry
    from rclpy.node import Node
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import Imu, JointState
    from std_msgs.msg import Float64MultiArray

    from aerial_sim.cdr.encode import float64_array_encoder
    from aerial_sim.nodes.ros.qos import COMMAND_QOS, LOCKSTEP_QOS
    from aerial_sim.nodes.ros.raw_publish import raw_sender

    rclpy.init(args=["--ros-args", "-p", "lockstep:=true", "-p", "scene:=empty", "-p", "lockstep_settle_s:=0.2",
                     "-p", "lockstep_settle_max_s:=0.5"])
    from aerial_sim.nodes.physics import PhysicsNode  # noqa: PLC0415 - after init, as the launch imports it

    side = Node("physics_period_readers")
    streams = ((Clock, "/clock"), (Vector3Stamped, "/drone1/ground_truth/wind"), (Odometry, "/drone1/ground_truth/odom"),
               (Imu, "/drone1/ground_truth/imu"), (JointState, "/drone1/rotors"), (Odometry, "/drone1/ground_truth/odom"),
               (Imu, "/drone1/ground_truth/imu"))
    readers = [side.create_subscription(kind, topic, lambda _: None, LOCKSTEP_QOS, raw=True) for kind, topic in streams]
    send = raw_sender(side.create_publisher(Float64MultiArray, "/drone1/motor_commands", COMMAND_QOS))
    physics = PhysicsNode()
    time.sleep(1.0)  # started and settled; then this thread runs the periods
    physics._stop.set()
    physics.command_arrived.set()
    physics.simulation_thread.join(5.0)
    physics._stop.clear()
    encode = float64_array_encoder(4)
    climb, sink = encode([0.62] * 4), encode([0.58] * 4)
    world = physics.world
    clock = time.thread_time_ns

    def drain() -> None:
        for reader in readers:
            with reader.handle:
                while reader.handle.take_message(reader.msg_type, True) is not None:
                    pass

    def command_in(k: int) -> None:
        send(climb if (k // 250) % 2 == 0 else sink)
        while not physics.lockstep_wait.ready():
            pass
        physics._apply_inputs()

    best = {part: float("inf") for part in PARTS}
    for _ in range(rounds):
        spent = dict.fromkeys(PARTS, 0)
        for k in range(periods):
            if k % 100 == 0:
                drain()  # the readers' queues, as a recorder and the executor keep them short
            t0 = clock()
            command_in(k)
            t1 = clock()
            world.step(physics.params.steps_per_period)
            t2 = clock()
            physics._publish_state()
            t3 = clock()
            spent["command in"] += t1 - t0
            spent["step"] += t2 - t1
            spent["state out"] += t3 - t2
            spent["period"] += t3 - t0
        for part in PARTS:
            best[part] = min(best[part], spent[part] / periods / 1e3)
    return best


def run_child(checkout: Path, rounds: int, periods: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=f"{checkout / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               AERIAL_SIM_SHARE=str(checkout))
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", "--rounds", str(rounds),
                           "--periods", str(periods)], env=env, capture_output=True, text=True, check=False, timeout=300)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{checkout}: the period benchmark failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="another checkout, alternating with this one")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--periods", type=int, default=2000)
    parser.add_argument("--no-record", action="store_true", help="leave doc/results/physics_period.json as it is")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        figures = measure(options.rounds, options.periods)
        print(json.dumps(figures), flush=True)
        os._exit(0)  # the node's thread is stopped; nothing to close
    sys.path.insert(0, str(REPO / "benchmarks"))
    import _domain  # noqa: PLC0415
    import _results  # noqa: PLC0415

    _domain.private_domain()
    checkouts = {"now": REPO} if options.before is None else {"before": options.before.resolve(), "now": REPO}
    figures: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
    for pair in range(options.pairs):
        for name, checkout in checkouts.items():
            figures[name].append(run_child(checkout, options.rounds, options.periods))
            print(f"pair {pair + 1} {name}: period {figures[name][-1]['period']:.1f} us", flush=True)
    best = {name: {part: min(f[part] for f in runs) for part in PARTS} for name, runs in figures.items()}
    median = {name: {part: statistics.median(f[part] for f in runs) for part in PARTS} for name, runs in figures.items()}
    print(f"\nthread CPU per 4 ms lockstep period (us): best (median) of {options.pairs} processes x best of "
          f"{options.rounds} x {options.periods} periods")
    print(f"{'part':12s}" + "".join(f"{name:>18s}" for name in checkouts) + ("     ratio" if len(checkouts) == 2 else ""))
    for part in PARTS:
        cells = "".join(f"{best[name][part]:9.1f} ({median[name][part]:5.1f})" for name in checkouts)
        ratio = f"{best['now'][part] / best['before'][part]:9.2f}x" if len(checkouts) == 2 else ""
        print(f"{part:12s}{cells}{ratio}")
    rows = [_results.row(f"{name}: {part}", round(best[name][part], 1), "us CPU per 4 ms period",
                         f"best of {options.pairs} x {options.rounds} x {options.periods} periods; median "
                         f"{median[name][part]:.1f}") for part in PARTS for name in checkouts]
    if not options.no_record:
        _results.record("physics_period", "The physics node's own CPU per lockstep period, in process", rows,
                        command="tools/dev.sh bench physics_period" + (" --before <checkout of the earlier commit>"
                                                                       if options.before is not None else ""))


if __name__ == "__main__":
    main()
