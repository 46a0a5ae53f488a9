"""Web viewer node: a live 3D view of the run in the browser (http://127.0.0.1:<port>).

Subscribes (in its namespace) to ``ground_truth/odom`` (vehicle and trail),
``camera/depth/points`` (PointCloud2 in the optical frame, placed in ``map``
with the vehicle pose nearest its stamp and the camera mount) and the camera
images, and hands them to :class:`aerial_sim.viewer.web.WebViewer`, which
pushes them to browsers at ``update_rate_hz`` (wall clock). Prints the URL at
start-up. Binds to 127.0.0.1 only.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from nav_msgs.msg import Odometry
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from sensor_msgs.msg import Image, PointCloud2

from aerial_sim.config import require
from aerial_sim.nodes.common import declare_params, from_stamp, run_node, stream_qos
from aerial_sim.recording.export import image_to_array
from aerial_sim.viewer.depth_points import optical_to_base
from aerial_sim.viewer.scene_view import scene_primitives
from aerial_sim.viewer.web import WebViewer, WebViewerParams, depth_colors, segmentation_colors
from aerial_sim.world.camera import CameraParams
from aerial_sim.world.geometry import quaternion_to_matrix
from aerial_sim.world.scene import load_scene

IMAGES = {
    "camera/color/image_raw": "color",
    "camera/depth/image_raw": "depth",
    "camera/segmentation/image_raw": "segmentation",
}


@dataclass(frozen=True)
class WebViewerNodeParams:
    scene: str = "empty"
    lockstep: bool = False
    #: camera mount in base_link, to place the depth cloud (defaults: the camera node's)
    camera_mount_position_m: tuple[float, float, float] = CameraParams.mount_position_m
    camera_mount_rpy_deg: tuple[float, float, float] = CameraParams.mount_rpy_deg
    viewer: WebViewerParams = field(default_factory=WebViewerParams)

    def __post_init__(self) -> None:
        require(bool(self.scene), "scene must name a scene (e.g. 'empty')")


def cloud_xyz(msg: PointCloud2) -> np.ndarray:
    """x, y, z float32 fields of a PointCloud2 -> (N, 3) array (ValueError when they are missing)."""
    offsets = {f.name: f.offset for f in msg.fields if f.datatype == 7 and f.count == 1}  # 7 = FLOAT32
    if not {"x", "y", "z"} <= offsets.keys():
        raise ValueError("PointCloud2 without float32 x, y, z fields")
    count = msg.width * msg.height
    endian = ">" if msg.is_bigendian else "<"
    dtype = np.dtype({"names": ["x", "y", "z"], "formats": [endian + "f4"] * 3,
                      "offsets": [offsets["x"], offsets["y"], offsets["z"]], "itemsize": msg.point_step})  # fmt: skip
    records = np.frombuffer(msg.data, dtype=dtype, count=count)
    return np.stack([records["x"], records["y"], records["z"]], axis=1).astype(np.float32)


class WebViewerNode(Node):
    def __init__(self):
        super().__init__("web_viewer")
        self.params = declare_params(self, WebViewerNodeParams)
        scene = load_scene(self.params.scene)
        self.viewer = WebViewer(self.params.viewer, scene_primitives(scene))
        mount = CameraParams(mount_position_m=self.params.camera_mount_position_m,
                             mount_rpy_deg=self.params.camera_mount_rpy_deg)  # fmt: skip
        self.R_base_optical, self.t_base_optical = optical_to_base(mount)
        self.poses: deque = deque(maxlen=500)  # (t, position, orientation) for placing clouds
        qos = stream_qos(self.params.lockstep)
        self.create_subscription(Odometry, "ground_truth/odom", self.on_odom, qos)
        self.create_subscription(PointCloud2, "camera/depth/points", self.on_cloud, qos)
        for topic, label in IMAGES.items():
            self.create_subscription(Image, topic, lambda msg, label=label: self.on_image(label, msg), qos)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._latest_images: dict[str, Image] = {}
        self.create_timer(1.0 / self.params.viewer.update_rate_hz, self.tick, clock=steady)
        print(f"[web_viewer] open {self.viewer.url} in a browser (scene '{scene.name}')", flush=True)

    def on_odom(self, msg: Odometry) -> None:
        p, q = msg.pose.pose.position, msg.pose.pose.orientation
        values = (p.x, p.y, p.z, q.w, q.x, q.y, q.z)
        if not all(math.isfinite(v) for v in values):
            self.get_logger().warning("odometry with non-finite pose ignored", throttle_duration_sec=5)
            return
        t = from_stamp(msg.header.stamp)
        self.poses.append((t, values[:3], values[3:]))
        self.viewer.set_pose(t, values[:3], values[3:])

    def on_cloud(self, msg: PointCloud2) -> None:
        if not self.poses:
            return
        try:
            points = cloud_xyz(msg)
        except ValueError as error:
            self.get_logger().warning(f"point cloud skipped: {error}", throttle_duration_sec=5)
            return
        t = from_stamp(msg.header.stamp)
        _, position, orientation = min(self.poses, key=lambda pose: abs(pose[0] - t))
        R_map_base = quaternion_to_matrix(orientation)
        base = points @ self.R_base_optical.T + self.t_base_optical
        self.viewer.set_cloud(base @ R_map_base.T + np.asarray(position))

    def on_image(self, label: str, msg: Image) -> None:
        self._latest_images[label] = msg  # converted at the (lower) update rate, in tick()

    def tick(self) -> None:
        images, self._latest_images = self._latest_images, {}
        for label, msg in images.items():
            self.show_image(label, msg)
        self.viewer.refresh()

    def show_image(self, label: str, msg: Image) -> None:
        try:
            array = image_to_array(msg)
        except ValueError as error:
            self.get_logger().warning(f"{label} image skipped: {error}", throttle_duration_sec=5)
            return
        if label == "depth":
            array = depth_colors(array if array.dtype == np.float32 else array * 1e-3)
        elif label == "segmentation":
            array = segmentation_colors(array)
        elif array.ndim == 2:
            array = np.repeat(array[..., None], 3, axis=-1)
        self.viewer.set_image(label, array[..., :3])

    def destroy_node(self):
        self.viewer.close()
        return super().destroy_node()


def main(args=None):
    return run_node(WebViewerNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
