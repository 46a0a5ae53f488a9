"""What a ground-truth message costs to read and to publish: rclpy's typed messages against
:mod:`aerial_sim.cdr`'s decoders and encoders, per message (the CPU of one process).

    tools/dev.sh bench cdr [--count 20000]

Reading: microseconds per message for nav_msgs/Odometry, sensor_msgs/Imu and sensor_msgs/JointState
(4 rotors), both ways, and the typed path's cost as what a typed subscriber also pays: the message
object rclpy builds, then the attribute reads of :func:`aerial_sim.sensors.truth.truth_from_odometry`.
Publishing: building the typed message and ``publish`` against encoding the CDR and publishing the
bytes, on a reliable topic with one subscriber in a second node of this process (so the middleware
really sends), for the physics node's odometry, the IMU node's output, the motor commands and the camera
node's 640x480 rgb8 and 32FC1 images (typed: :func:`image_message`, the camera node's path before
``cdr.encode.encode_image``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src")]

from _results import record, row  # noqa: E402


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
    parser.add_argument("--no-record", action="store_true", help="do not write doc/results/cdr.json")
    options = parser.parse_args()
    from rclpy.serialization import deserialize_message, serialize_message

    from aerial_sim.cdr.decode import OdometryFields, decode_imu, decode_joint_state, decode_odometry

    odometry, imu, rotors = messages()
    rows = [
        ("nav_msgs/Odometry", odometry, decode_odometry,
         lambda data: OdometryFields.from_message(deserialize_message(data, type(odometry)))),
        ("sensor_msgs/Imu", imu, decode_imu, lambda data: deserialize_message(data, type(imu))),
        ("sensor_msgs/JointState", rotors, decode_joint_state, lambda data: deserialize_message(data, type(rotors))),
    ]
    print(f"{'message':<24}{'rclpy us':>10}{'cdr us':>9}{'ratio':>7}")
    results = []
    for name, message, decode, typed in rows:
        data = serialize_message(message)
        typed_us = per_call_us(typed, data, max(1, options.count // 10))
        raw_us = per_call_us(decode, data, options.count)
        print(f"{name:<24}{typed_us:>10.1f}{raw_us:>9.1f}{typed_us / raw_us:>7.1f}", flush=True)
        results += [row(f"read {name}: rclpy deserialize_message", round(typed_us, 1), "us"),
                    row(f"read {name}: aerial_sim.cdr decode", round(raw_us, 1), "us", f"{typed_us / raw_us:.1f}x faster")]
    results += print_publishing(max(1, options.count // 10))
    record("cdr", "Reading and writing messages as CDR bytes (aerial_sim.cdr)", results,
           notes="Per message, one process; publishing with one subscriber matched in the same process.")
    return 0


def typed_odometry(position, orientation, velocity, rates, covariance):
    from nav_msgs.msg import Odometry

    message = Odometry()
    message.header.stamp.sec, message.header.stamp.nanosec = 12, 345_000_000
    message.header.frame_id, message.child_frame_id = "map", "drone1/base_link"
    p, q = message.pose.pose.position, message.pose.pose.orientation
    p.x, p.y, p.z = position
    q.w, q.x, q.y, q.z = orientation
    v, w = message.twist.twist.linear, message.twist.twist.angular
    v.x, v.y, v.z = velocity
    w.x, w.y, w.z = rates
    message.pose.covariance = message.twist.covariance = list(covariance)
    return message


def image_message(array, encoding: str, header):
    """The typed sensor_msgs/Image the camera node published before ``cdr.encode.encode_image_array`` (one copy into
    an ``array('B')``, which skips rosidl's per-byte conversion)."""
    import array as array_module

    import numpy as np
    from sensor_msgs.msg import Image

    message = Image(header=header, height=array.shape[0], width=array.shape[1], encoding=encoding)
    message.is_bigendian = 0
    message.step = array.strides[0]
    data = array_module.array("B")
    data.frombytes(np.ascontiguousarray(array).data.cast("B"))
    message.data = data
    return message


def typed_imu(rates, acceleration, covariance):
    from sensor_msgs.msg import Imu

    message = Imu()
    message.header.stamp.sec, message.header.stamp.nanosec = 12, 345_000_000
    message.header.frame_id = "drone1/imu_link"
    message.orientation_covariance[0] = -1.0
    message.angular_velocity.x, message.angular_velocity.y, message.angular_velocity.z = rates
    message.linear_acceleration.x, message.linear_acceleration.y, message.linear_acceleration.z = acceleration
    message.angular_velocity_covariance = message.linear_acceleration_covariance = list(covariance)
    return message


def print_publishing(count: int) -> list[dict]:
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Imu
    from std_msgs.msg import Float64MultiArray

    from aerial_sim.cdr.encode import encode_float64_array, encode_image_array, encode_imu, encode_odometry

    rclpy.init()
    sender, receiver = rclpy.create_node("cdr_bench_sender"), rclpy.create_node("cdr_bench_receiver")
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    position, orientation, velocity, rates, acceleration = (1.0, 2.0, 3.0), (1.0, 0.0, 0.0, 0.0), (0.1, 0.2, 0.3), \
        (0.01, 0.02, 0.03), (0.1, 0.0, 9.81)
    covariance36 = [1e-12 if i % 7 == 0 else 0.0 for i in range(36)]
    covariance9 = (1e-4, 0.0, 0.0, 0.0, 1e-4, 0.0, 0.0, 0.0, 1e-4)
    stamp_ns, controls = 12_345_000_000, (0.61, 0.62, 0.63, 0.64)
    rows = [
        ("nav_msgs/Odometry", Odometry,
         lambda: typed_odometry(position, orientation, velocity, rates, covariance36),
         lambda: encode_odometry(stamp_ns, "map", "drone1/base_link", position, orientation, covariance36,
                                     velocity, rates, covariance36)),
        ("sensor_msgs/Imu", Imu, lambda: typed_imu(rates, acceleration, covariance9),
         lambda: encode_imu(stamp_ns, "drone1/imu_link", (1.0, 0.0, 0.0, 0.0), (-1.0,) + (0.0,) * 8, rates,
                                covariance9, acceleration, covariance9)),
        ("std_msgs/Float64MultiArray", Float64MultiArray, lambda: Float64MultiArray(data=list(controls)),
         lambda: encode_float64_array(controls)),
    ]
    import numpy as np
    from sensor_msgs.msg import Image

    header = typed_imu(rates, acceleration, covariance9).header
    header.frame_id = "drone1/camera_depth_optical_frame"
    frames = {"rgb8": np.full((480, 640, 3), 200, np.uint8), "32FC1": np.full((480, 640), 7.5, np.float32)}
    for encoding, frame in frames.items():  # the camera node's frames: image_message was its typed path
        rows.append((f"sensor_msgs/Image 640x480 {encoding}", Image,
                     lambda frame=frame, encoding=encoding: image_message(frame, encoding, header),
                     lambda frame=frame, encoding=encoding: encode_image_array(stamp_ns, header.frame_id, frame,
                                                                                   encoding)))
    print(f"\n{'publishing':<34}{'typed us':>9}{'cdr us':>8}{'ratio':>7}   (build or encode, then publish)")
    results = []
    try:
        for name, message_type, build, encode in rows:
            calls = count if "Image" not in name else max(1, count // 20)
            topic = "/cdr_bench/" + name.split("/")[1].split()[0].lower() + str(len(results))
            publisher = sender.create_publisher(message_type, topic, qos)
            receiver.create_subscription(message_type, topic, lambda _: None, qos, raw=True)
            time.sleep(0.5)  # discovery: the subscriber matched before timing
            for _ in range(min(calls, 50)):  # warm up both paths (the middleware's first large messages cost more)
                publisher.publish(build())
                publisher.publish(encode())
            typed_us = raw_us = float("inf")
            for _ in range(3):  # interleaved: a burst of load on the machine hits both alike
                typed_us = min(typed_us, per_call_us(lambda _: publisher.publish(build()), None, calls))
                raw_us = min(raw_us, per_call_us(lambda _: publisher.publish(encode()), None, calls))
            print(f"{name:<34}{typed_us:>9.1f}{raw_us:>8.1f}{typed_us / raw_us:>7.1f}", flush=True)
            results += [row(f"publish {name}: typed message", round(typed_us, 1), "us"),
                        row(f"publish {name}: aerial_sim.cdr bytes", round(raw_us, 1), "us", f"{typed_us / raw_us:.1f}x faster")]
    finally:
        sender.destroy_node()
        receiver.destroy_node()
        rclpy.shutdown()
    return results


if __name__ == "__main__":
    raise SystemExit(main())
