"""Rotor drag speed (issue 6): microseconds per drag evaluation, and the node's sustained rate.

Paper (seed 004, sec. 3.1): 4.36e-6 s per evaluation of eq. (13). Goal: at or under it.
Run: ``tools/dev.sh bench rotor_drag`` (``--model-only`` skips the node).
"""

from __future__ import annotations

import sys
import timeit

from _results import record, row
from aerial_sim.physics.rotor_drag import RotorDragModel, RotorDragParams, air_velocity_body

THRUSTS = (2.45, 2.47, 2.44, 2.46)
VELOCITY = (9.4, 0.3, 3.6)
RATES = (0.01, -0.02, 0.005)
ORIENTATION = (0.98, 0.0, 0.18, 0.0)
ROTORS = ((0.160867, -0.160867, 0.025), (-0.160867, 0.160867, 0.025),
          (0.160867, 0.160867, 0.025), (-0.160867, -0.160867, 0.025))


def microseconds(statement, number: int = 200_000) -> float:
    return min(timeit.repeat(statement, number=number, repeat=5)) / number * 1e6


def node_rates(rate_hz: float, seconds: float = 4.0) -> tuple[float, float]:
    import rclpy
    from geometry_msgs.msg import WrenchStamped
    from nav_msgs.msg import Odometry
    from rclpy.node import Node
    from sensor_msgs.msg import JointState

    from _node_rate import measure, start_node, stop_node
    from aerial_sim.nodes.ros.qos import LOCKSTEP_QOS

    process = start_node("rotor_drag", "-p", "rate_hz:=100000.0")
    rclpy.init()
    node = Node("rotor_drag_bench")
    try:
        pubs = [node.create_publisher(JointState, "/drone1/rotors", LOCKSTEP_QOS),
                node.create_publisher(Odometry, "/drone1/ground_truth/odom", LOCKSTEP_QOS)]

        def messages(i: int):
            rotors = JointState(name=[f"rotor_{k}" for k in range(4)], effort=list(THRUSTS))
            rotors.header.stamp.sec, rotors.header.stamp.nanosec = divmod(i * 1_000_000, 1_000_000_000)
            odom = Odometry()
            odom.header.stamp = rotors.header.stamp
            odom.pose.pose.orientation.w = 1.0
            odom.twist.twist.linear.x = 5.0
            return [rotors, odom]

        return measure(node, pubs, messages, "/drone1/rotor_drag/wrench", WrenchStamped, seconds, rate_hz)
    finally:
        node.destroy_node()
        rclpy.shutdown()
        stop_node(process)


def main(argv: list[str]) -> int:
    lumped = RotorDragModel(RotorDragParams())
    per_rotor = RotorDragModel(RotorDragParams(per_rotor=True), ROTORS)
    total = sum(THRUSTS)
    timings = [
        ("eq. (13) force only, total thrust given", microseconds(lambda: lumped.force_eq13(total, VELOCITY))),
        ("eq. (13) wrench from 4 rotor thrusts", microseconds(lambda: lumped.wrench(THRUSTS, VELOCITY))),
        ("eq. (11) per rotor, with omega x d_i", microseconds(lambda: per_rotor.wrench(THRUSTS, VELOCITY, RATES))),
        ("air-relative velocity under wind",
         microseconds(lambda: air_velocity_body(VELOCITY, ORIENTATION, (3.0, 1.0, 0.0)))),
    ]
    print("rotor drag, microseconds per evaluation (best of 5; paper 4.36 us for eq. 13):")
    for what, us in timings:
        print(f"  {what:42s}{us:6.3f} us")
    rows = [row(what, round(us, 3), "us", "paper: 4.36 us for eq. (13)" if what.startswith("eq. (13) force") else "")
            for what, us in timings]
    if "--model-only" in argv:
        record("rotor_drag", "Rotor drag (seed 004 eqs. 11, 13)", rows, "tools/dev.sh bench rotor_drag --model-only")
        return 0
    print("rotor drag node, 4 s each (rotors + odometry pairs -> wrench received, Hz):")
    for target in (250.0, 1000.0):
        sent, got = node_rates(target)
        print(f"  {target:6.0f} Hz offered: published {sent:7.1f} Hz, received {got:7.1f} Hz")
        rows.append(row(f"node: wrench rate with {target:.0f} Hz of input offered", round(got, 1), "Hz",
                        f"inputs published at {sent:.1f} Hz"))
    record("rotor_drag", "Rotor drag (seed 004 eqs. 11, 13)", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
