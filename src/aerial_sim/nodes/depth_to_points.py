"""Depth to points node: ``camera/depth/image_raw`` + ``camera_info`` -> ``camera/depth/points`` (PointCloud2).

The back-projection is :func:`aerial_sim.viewer.depth_points.depth_to_points`
(vectorised numpy). The cloud is in the image's optical frame, stamped with the
image's stamp, fields x, y, z float32, invalid pixels (0 = no return) left out.

The depth image is subscribed only while something subscribes to ``camera/depth/points`` (the
publisher's matched-subscription count, looked at every ``LISTENER_POLL_S`` of wall time, and before
each conversion): the recorder leaves the topic out by default and the web viewer subscribes only
while a browser is connected, so in the default graph the node usually costs nothing. Receiving the
30 Hz depth images was most of its cost, more than the conversion (benchmarks/viewer_idle.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image, PointCloud2, PointField

from aerial_sim.cdr.encode import encode_point_cloud2
from aerial_sim.config import require
from aerial_sim.recording.export import image_to_array
from aerial_sim.nodes.ros.clocks import InputStampClock
from aerial_sim.nodes.ros.parameters import declare_params
from aerial_sim.nodes.ros.qos import stream_qos
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.viewer.depth_points import depth_to_points, intrinsics_from_k

FIELDS = [(axis, 4 * i, PointField.FLOAT32, 1) for i, axis in enumerate("xyz")]  # name, offset, datatype, count
#: How often (wall clock) the node looks whether anything listens to its clouds: the delay before
#: the first cloud for a new listener, at most.
LISTENER_POLL_S = 0.5


@dataclass(frozen=True)
class DepthToPointsParams:
    stride: int = 1  # keep every stride-th pixel in u and v
    lockstep: bool = False

    def __post_init__(self) -> None:
        require(self.stride >= 1, f"stride must be >= 1, got {self.stride}")


def depth_array(msg: Image) -> np.ndarray:
    """32FC1 metres or 16UC1 millimetres -> float32 metres (H, W); ValueError otherwise."""
    if msg.encoding not in ("32FC1", "16UC1"):
        raise ValueError(f"unsupported depth encoding {msg.encoding!r}")
    array = image_to_array(msg)
    return array if msg.encoding == "32FC1" else array.astype(np.float32) * 1e-3


def to_cloud(points: np.ndarray, header) -> bytes:
    """A PointCloud2 of ``points`` (N, 3) stamped and framed as ``header``, as CDR bytes with zero padding
    (rclpy's serializer leaves the bytes after each PointField.datatype as its buffer held them, issue 32)."""
    stamp = header.stamp
    return encode_point_cloud2(stamp.sec * 1_000_000_000 + stamp.nanosec, header.frame_id, 1, len(points), FIELDS,
                               False, 12, 12 * len(points), np.ascontiguousarray(points, dtype="<f4").tobytes(), True)


class DepthToPoints(Node):
    def __init__(self, **node_options):
        super().__init__("depth_to_points", **node_options)
        self.params = declare_params(self, DepthToPointsParams)
        self.qos = stream_qos(self.params.lockstep)
        self.intrinsics = None
        self.create_subscription(CameraInfo, "camera/depth/camera_info", self.on_info, self.qos)
        self.publisher = self.create_publisher(PointCloud2, "camera/depth/points", self.qos)
        self.sim_clock = InputStampClock(self)
        self.depth_subscription = None  # held while something listens to the clouds
        self.create_timer(LISTENER_POLL_S, self.follow_listeners, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.follow_listeners()

    def follow_listeners(self) -> None:
        """Subscribe to the depth image while the clouds have a listener; unsubscribe when none is left."""
        listened = self.publisher.get_subscription_count() > 0
        if listened and self.depth_subscription is None:
            self.depth_subscription = self.create_subscription(Image, "camera/depth/image_raw", self.on_depth, self.qos)
        elif not listened and self.depth_subscription is not None:
            self.destroy_subscription(self.depth_subscription)
            self.depth_subscription = None

    def on_info(self, msg: CameraInfo) -> None:
        fx, fy, cx, cy = intrinsics_from_k(msg.k)
        if fx <= 0 or fy <= 0:
            self.get_logger().warning("camera_info with f_x or f_y <= 0 ignored", throttle_duration_sec=5)
            return
        self.intrinsics = (fx, fy, cx, cy)

    def on_depth(self, msg: Image) -> None:
        self.sim_clock.advance(msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec)
        if self.publisher.get_subscription_count() == 0:
            return  # nobody listens: no cloud to make
        if self.intrinsics is None:
            self.get_logger().warning("no camera_info yet: depth image skipped", throttle_duration_sec=5)
            return
        try:
            depth = depth_array(msg)
        except ValueError as error:
            self.get_logger().warning(f"depth image skipped: {error}", throttle_duration_sec=5)
            return
        points = depth_to_points(depth, *self.intrinsics, stride=self.params.stride)
        self.publisher.publish(to_cloud(points, msg.header))


def main(args=None):
    return run_node(DepthToPoints, args, background=True)


if __name__ == "__main__":
    raise SystemExit(main())
