"""Lidar node: ``ground_truth/odom`` -> ``lidar/points`` (sensor_msgs/PointCloud2 in ``<ns>/lidar_link``).

Thin adapter around :class:`aerial_sim.sensors.lidar.LidarSweeper`: ground truth
(250 Hz) extends the pose track, and each finished sweep (one revolution, or one
frame of a non-repetitive scanner) is published once, stamped with the sweep's
start (sim-time instants k / rotations_per_second), every point in the lidar
frame at its own firing time with ``time`` = seconds since the stamp.

Fields: ``x y z intensity`` float32, ``ring`` uint16, ``time`` float32 (the
Velodyne driver's ``PointXYZIRT`` layout) and ``segmentation_id`` uint16, 24
bytes a point (:mod:`aerial_sim.sensors.pointcloud`). No-returns are left out
(``is_dense``, height 1) or, with ``no_return: nan``, kept as NaN points of an
organized cloud (height = rings). Parameters: the device ``preset``
(``config/sensors/<preset>.yaml``: ``velodyne_vlp16`` by default, ``ouster_os1_64``,
``livox_mid360``), every :class:`~aerial_sim.sensors.lidar.LidarParams` field,
``scene``, ``frame_id``, ``lockstep`` and ``interpolation``.
"""

from __future__ import annotations

from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import PointCloud2

from aerial_sim.cdr.decode import OdometryFields
from aerial_sim.cdr.encode import encode_point_cloud2
from aerial_sim.nodes._sensor import SceneOption
from aerial_sim.nodes.ros.clocks import InputStampClock
from aerial_sim.nodes.ros.frames import frame_in_namespace, publish_static_mount
from aerial_sim.nodes.ros.lockstep import participant_publisher
from aerial_sim.nodes.ros.parameters import declare_params
from aerial_sim.nodes.ros.qos import stream_qos
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.stamps import to_stamp_ns
from aerial_sim.nodes.ros.subscriptions import subscribe_odometry
from aerial_sim.sensors.params import SensorNodeOptions, load_preset
from aerial_sim.sensors.truth import UNUSABLE_ODOMETRY, truth_from_odometry
from aerial_sim.sensors.lidar import LidarModel, LidarParams, LidarScan, LidarSweeper
from aerial_sim.sensors.pointcloud import LIDAR_POINT_DTYPE, point_fields
from aerial_sim.world.scene import load_scene

#: Truth messages a sweep's casting may leave waiting (best effort keeps only this many).
TRUTH_QUEUE_DEPTH = 100


def cloud_bytes(scan: LidarScan, frame_id: str, fields) -> bytes:
    """A PointCloud2 holding ``scan.points`` as they are laid out in memory (little-endian records), as CDR
    bytes with zero padding (identical lockstep runs record identical bags, issue 32); ``fields``:
    (name, offset, datatype, count) each."""
    height, width = scan.points.shape
    return encode_point_cloud2(to_stamp_ns(scan.start_time_s), frame_id, height, width, fields, False,
                               LIDAR_POINT_DTYPE.itemsize, LIDAR_POINT_DTYPE.itemsize * width, scan.points.tobytes(),
                               height == 1)


class LidarNode(Node):
    def __init__(self):
        super().__init__("lidar")
        options = declare_params(self, SensorNodeOptions, defaults=SensorNodeOptions(preset="velodyne_vlp16", frame_id="lidar_link"))
        self.params = declare_params(self, LidarParams, defaults=load_preset(LidarParams, options.preset))
        scene = load_scene(declare_params(self, SceneOption).scene)
        self.frame_id = frame_in_namespace(self, options.frame_id)
        publish_static_mount(self, self.frame_id, self.params.mount.position_m, self.params.mount.orientation)
        self.sweeper = LidarSweeper(LidarModel(self.params, scene), hold=options.interpolation == "hold")
        self.fields = point_fields(LIDAR_POINT_DTYPE)
        qos = stream_qos(options.lockstep)
        truth_qos = QoSProfile(history=qos.history, depth=max(qos.depth, TRUTH_QUEUE_DEPTH), reliability=qos.reliability,
                               durability=qos.durability)  # fmt: skip
        # A sweep is stamped at its start and goes out once its last beam has fired.
        period = self.params.sweep_period_s
        self.publisher = participant_publisher(self, PointCloud2, "lidar/points", qos, options.lockstep, 1.0 / period,
                                               0.0, period, inputs=("ground_truth/odom",))
        subscribe_odometry(self, "ground_truth/odom", self.on_truth, truth_qos, clock=InputStampClock(self))
        p = self.params
        self.get_logger().info(
            f"lidar '{options.preset}' in {self.frame_id}: {p.scan_pattern}, {p.channels} channels, "
            f"{p.points_per_second} points/s, {p.rotations_per_second:g} sweeps/s, scene '{scene.name}'"
        )

    def on_truth(self, odom: OdometryFields) -> None:
        truth = truth_from_odometry(odom)
        if truth is None:
            self.get_logger().warning(UNUSABLE_ODOMETRY, throttle_duration_sec=5)
            return
        for scan in self.sweeper.push(truth):
            self.publisher.publish(cloud_bytes(scan, self.frame_id, self.fields))


def main(args=None):
    return run_node(LidarNode, args, background=True)


if __name__ == "__main__":
    raise SystemExit(main())
