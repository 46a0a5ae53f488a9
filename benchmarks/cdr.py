"""What a ground-truth message costs to read: rclpy's ``deserialize_message`` against
:mod:`aerial_sim.cdr`'s decoders, per message (no ROS graph; the CPU of one process).

    tools/dev.sh bench cdr [--count 20000]

Prints microseconds per message for nav_msgs/Odometry, sensor_msgs/Imu and sensor_msgs/JointState
(4 rotors), both ways, and the typed path's cost as what a typed subscriber also pays: the message
object rclpy builds, then the attribute reads of :func:`aerial_sim.sensors.common.truth_from_odometry`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src")]


def per_call_us(function, data, count: int) -> float:
    """Best of 3 batches of ``count`` calls, microseconds per call."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(count):
            function(data)
        best = min(best, (time.perf_counter() - start) / count)
    return best * 1e6


def messages():
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import Imu, JointState

    odometry = Odometry()
    odometry.header.frame_id, odometry.child_frame_id = "map", "drone1/base_link"
    odometry.pose.pose.orientation.w = 1.0
    imu = Imu()
    imu.header.frame_id = "drone1/base_link"
    rotors = JointState(name=[f"rotor_{i}" for i in range(4)], velocity=[800.0] * 4, effort=[4.0] * 4)
    return odometry, imu, rotors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20000)
    options = parser.parse_args()
    from rclpy.serialization import deserialize_message, serialize_message

    from aerial_sim.cdr import OdometryFields, decode_imu, decode_joint_state, decode_odometry

    odometry, imu, rotors = messages()
    rows = [
        ("nav_msgs/Odometry", odometry, decode_odometry,
         lambda data: OdometryFields.from_message(deserialize_message(data, type(odometry)))),
        ("sensor_msgs/Imu", imu, decode_imu, lambda data: deserialize_message(data, type(imu))),
        ("sensor_msgs/JointState", rotors, decode_joint_state, lambda data: deserialize_message(data, type(rotors))),
    ]
    print(f"{'message':<24}{'rclpy us':>10}{'cdr us':>9}{'ratio':>7}")
    for name, message, decode, typed in rows:
        data = serialize_message(message)
        typed_us = per_call_us(typed, data, max(1, options.count // 10))
        raw_us = per_call_us(decode, data, options.count)
        print(f"{name:<24}{typed_us:>10.1f}{raw_us:>9.1f}{typed_us / raw_us:>7.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
