"""The CPU of each per-message callback of a batch run's container, in process: a flight replayed into real nodes.

    tools/dev.sh bench callbacks [--before DIR] [--pairs 3] [--rounds 3] [--seconds 10] [--no-record]

A smoke-like flight (quad_x: 0.2 s on the ground, armed, take-off to 1 m, a 1 m hop in x, hover) is flown
in this process (``PhysicsWorld`` at 1,000 Hz and the flight supervisor at 250 Hz) and its ground-truth
odometry and IMU are written as the physics node writes them, one of each per 4 ms period
(``nodes/_physics/publishing.py``). Then, in a fresh process per checkout (its ``src`` first on
``PYTHONPATH``), the nodes whose callbacks run every period in a container are built as the launch builds
them (lockstep, sim time): IMU, barometer, magnetometer, GPS and flight controller (armed and taking off
as the mission would have it). Each period's odometry goes to the process's shared odometry reader
(``SharedReaders``, decoded once, every node's clock advanced, each node's callback) and the IMU to its
subscription, as the executor hands them over; every output goes out through the node's own publisher
to a raw subscription in the same process (as the container's recorder reads them). Figures are the
thread CPU per period (us) of each node's part, the best of ``--rounds`` replays of the whole flight
(nodes built anew each round). With ``--before``, the checkouts alternate ``--pairs`` times and the
table gives each's best and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PERIOD_S = 0.004
NAMESPACE = "drone1"
PARTS = ("odometry (decode, clocks)", "barometer", "magnetometer", "gps", "flight_controller", "imu")


def fly(seconds: float) -> list[tuple[bytes, bytes]]:
    """(odometry, IMU) CDR bytes of each 4 ms period of a short flight."""
    from aerial_sim.control.controller import ControllerParams, VehicleState
    from aerial_sim.control.supervisor import FlightSupervisor, SupervisorParams
    from aerial_sim.nodes._physics.publishing import imu_bytes, odometry_bytes
    from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
    from aerial_sim.vehicles.multirotor import load_vehicle

    vehicle = load_vehicle("quad_x")
    world = PhysicsWorld(PhysicsParams())
    world.add_vehicle("uav", vehicle)
    fc = FlightSupervisor(SupervisorParams(takeoff_altitude=1.0), ControllerParams(), vehicle)
    out = []
    for k in range(int(round(seconds / PERIOD_S))):
        t = world.time_s
        if k == 50:
            fc.arm(True)
            fc.takeoff()
        if k == 1000:
            fc.command_pose(t, (1.0, 0.0, 1.0), 0.0)
        truth = world.ground_truth("uav")
        stamp_ns = round(t * 1e9)
        out.append((odometry_bytes(truth, stamp_ns, f"{NAMESPACE}/base_link"), imu_bytes(truth, stamp_ns, f"{NAMESPACE}/base_link")))
        world.set_controls("uav", fc.update(t, VehicleState.from_ground_truth(truth), PERIOD_S))
        world.step(4)
    return out


def replay(inputs_path: str, rounds: int) -> dict[str, float]:
    """In a child process: the best round's CPU per period (us) of each part."""
    import rclpy
    import rclpy.executors
    from nav_msgs.msg import Odometry
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import Imu

    from aerial_sim.nodes.barometer import BarometerNode
    from aerial_sim.nodes.flight_controller import FlightControllerNode
    from aerial_sim.nodes.gps import GpsNode
    from aerial_sim.nodes.imu import ImuNode
    from aerial_sim.nodes.magnetometer import MagnetometerNode
    from aerial_sim.nodes.ros.qos import stream_qos
    from aerial_sim.nodes.ros.shared_subscriptions import SHARED_READERS

    inputs = pickle.loads(Path(inputs_path).read_bytes())
    rclpy.init(domain_id=int(os.environ.get("ROS_DOMAIN_ID", "0")))
    clock = time.thread_time_ns
    best: dict[str, float] = {}
    try:
        for _ in range(rounds):
            SHARED_READERS.reset()
            options = {"namespace": NAMESPACE, "parameter_overrides": [Parameter("use_sim_time", value=True),
                                                                        Parameter("lockstep", value=True)]}
            nodes = {"barometer": BarometerNode(**options), "magnetometer": MagnetometerNode(**options),
                     "gps": GpsNode(**options), "flight_controller": FlightControllerNode(**options),
                     "imu": ImuNode(**options)}
            spent = dict.fromkeys(PARTS, 0)
            reader = next(iter(SHARED_READERS.readers.values()))
            for route in reader.routes:
                name = route.node.get_name()

                def timed(fields, callback=route.callback, name=name):
                    started = clock()
                    callback(fields)
                    spent[name] += clock() - started
                route.callback = timed
            imu_callback = next(s for s in nodes["imu"].subscriptions if s.topic_name.endswith("ground_truth/imu")).callback
            # Publishers of the inputs (the outputs connect to them), raw readers of every output (the recorder's part).
            feeder = rclpy.create_node("feeder", namespace=NAMESPACE)
            keep = [feeder.create_publisher(Odometry, "ground_truth/odom", stream_qos(True)),
                    feeder.create_publisher(Imu, "ground_truth/imu", stream_qos(True))]
            for node in nodes.values():
                for publisher in node.publishers:
                    if not publisher.topic_name.startswith(("/rosout", "/parameter_events", "/tf", "/lockstep")):
                        keep.append(feeder.create_subscription(publisher.msg_type, publisher.topic_name, lambda _: None,
                                                               publisher.qos_profile, raw=True))
            executor = rclpy.executors.SingleThreadedExecutor()
            for node in (*nodes.values(), feeder):
                executor.add_node(node)
            deadline = time.monotonic() + 20.0
            outputs = [n.publisher for n in (nodes["barometer"], nodes["magnetometer"], nodes["imu"])] + [nodes["gps"].vel_publisher]
            while any(o.publisher is None for o in outputs) and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.05)
            if any(o.publisher is None for o in outputs):
                raise RuntimeError("the sensors' outputs did not connect to their inputs within 20 s")
            fc = nodes["flight_controller"]
            period_count = 0
            for k, (odometry, imu) in enumerate(inputs):
                if k == 50:
                    fc.fc.arm(True)
                    fc.fc.takeoff()
                if k == 1000:
                    fc.fc.command_pose(k * PERIOD_S, (1.0, 0.0, 1.0), 0.0)
                started = clock()
                reader.on_bytes(odometry)
                spent["odometry (decode, clocks)"] += clock() - started
                started = clock()
                imu_callback(imu)
                spent["imu"] += clock() - started
                period_count += 1
            routed = sum(spent[name] for name in ("barometer", "magnetometer", "gps", "flight_controller"))
            spent["odometry (decode, clocks)"] -= routed
            for name, ns in spent.items():
                best[name] = min(best.get(name, float("inf")), ns / period_count / 1e3)
            executor.shutdown()
            for node in (*nodes.values(), feeder):
                node.destroy_node()
    finally:
        rclpy.try_shutdown()
    best["all"] = sum(best[name] for name in PARTS)
    return best


def run_child(checkout: Path, inputs_path: str, rounds: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=f"{checkout / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", inputs_path, "--rounds", str(rounds)],
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: replay failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="another checkout, alternating with this one")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--no-record", action="store_true", help="leave doc/results/callbacks.json as it is")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        print(json.dumps(replay(options.child, options.rounds)))
        return
    with tempfile.TemporaryDirectory() as folder:
        inputs_path = str(Path(folder) / "inputs.pickle")
        Path(inputs_path).write_bytes(pickle.dumps(fly(options.seconds)))
        checkouts = {"now": REPO} if options.before is None else {"before": options.before.resolve(), "now": REPO}
        best: dict[str, dict[str, float]] = {name: {} for name in checkouts}
        for pair in range(options.pairs):
            for name, checkout in checkouts.items():
                figures = run_child(checkout, inputs_path, options.rounds)
                print(f"pair {pair + 1} {name}: all {figures['all']:.1f} us a period", flush=True)
                for part, us in figures.items():
                    best[name][part] = min(best[name].get(part, float("inf")), us)
    print(f"\nthread CPU per 4 ms period (us), best of {options.pairs} x {options.rounds} replays of "
          f"{options.seconds:g} s")
    print(f"{'part':28s}" + "".join(f"{name:>10s}" for name in checkouts) + ("     ratio" if len(checkouts) == 2 else ""))
    for part in (*PARTS, "all"):
        row = [best[name][part] for name in checkouts]
        ratio = f"{row[1] / row[0]:9.2f}x" if len(row) == 2 and row[0] > 0 else ""
        print(f"{part:28s}" + "".join(f"{value:10.1f}" for value in row) + ratio)
    sys.path.insert(0, str(REPO / "benchmarks"))
    import _results  # noqa: PLC0415

    rows = [_results.row(f"{name}: {part}", round(best[name][part], 1), "us CPU per 4 ms period",
                         f"best of {options.pairs} x {options.rounds} replays")
            for part in (*PARTS, "all") for name in checkouts]
    _results.record("callbacks", "Per-message callbacks of a container's nodes, a flight replayed in process", rows)


if __name__ == "__main__":
    main()
