"""Web viewer node: a live 3D view of the run in the browser (http://127.0.0.1:<port>).

Subscribes (in its namespace) to ``ground_truth/odom`` (vehicle and trail),
``camera/depth/points`` (PointCloud2 in the optical frame, placed in ``map``
with the vehicle pose nearest its stamp and the camera mount), ``/swarm/poses``
(PoseArray: one frame per vehicle of the physics node), ``lidar/points``
(the latest sweep, each point placed with the pose at its own ``time``, i.e.
deskewed, and the lidar mount; coloured by height) and the camera images, and hands them to :class:`aerial_sim.viewer.web.WebViewer`, which
pushes them to browsers at ``update_rate_hz`` (wall clock). Prints the URL at
start-up. Binds to 127.0.0.1 only.

The images and the depth cloud (30 Hz streams, decoded and placed here) are subscribed only while
at least one browser is connected: the ``update_rate_hz`` timer, on the executor's thread, compares
the server's client count (kept by the server's own thread) with the subscriptions held, subscribes
on the first browser and destroys the subscriptions when the last one leaves. With nobody watching,
the camera streams cost the viewer nothing and ``depth_to_points`` (which takes depth images only for
a listener) nothing either. ``/swarm/poses`` stays subscribed, and so does ``lidar/points`` (10 Hz, off
in the default graph): its latest sweep is placed (deskewed, coloured) on the timer, so the scene a new
browser receives already holds it. Ground truth stays subscribed too (the trail covers the whole
flight), but with nobody watching the timer takes the newest message from a queue of one that no
executor spins (:func:`~aerial_sim.nodes.ros.raw_take.unspun_reader_node`): the trail samples the latest pose
at ``update_rate_hz`` of wall time anyway, and no Python runs for the other messages. (The 250 Hz
stream cost an idle viewer 0.12 of the two cores in a lockstep run at 4.7x real time when it took
every message; a DDS content filter on the stamps moved about as much onto the physics node, whose
writer evaluated it for every message.) A browser gets every message (the depth cloud is placed with
the pose nearest its stamp). Every stream is taken best effort, also in lockstep (a display may miss a
message; it is no lockstep participant).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np
from geometry_msgs.msg import PoseArray
from nav_msgs.msg import Odometry
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Image, PointCloud2

from aerial_sim.cdr.decode import OdometryFields, decode_odometry
from aerial_sim.config import require
from aerial_sim.nodes.ros.clocks import InputStampClock
from aerial_sim.nodes.ros.parameters import declare_params
from aerial_sim.nodes.ros.raw_take import not_called, take_raw, unspun_reader_node
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.stamps import from_stamp
from aerial_sim.nodes.ros.subscriptions import subscribe_odometry
from aerial_sim.recording.export import image_to_array
from aerial_sim.sensors.lidar import LidarParams, points_to_world
from aerial_sim.sensors.mounting import Mount
from aerial_sim.sensors.pointcloud import cloud_to_array, xyz
from aerial_sim.sensors.resampling import PoseTrack
from aerial_sim.sensors.truth import UNUSABLE_ODOMETRY, truth_from_odometry
from aerial_sim.viewer.depth_points import optical_to_base
from aerial_sim.viewer.scene_view import scene_primitives
from aerial_sim.viewer.web import WebViewer, WebViewerParams, depth_colors, height_colors, segmentation_colors
from aerial_sim.world.camera import CameraParams
from aerial_sim.world.rotations import quaternion_to_matrix
from aerial_sim.world.scene import load_scene

IMAGES = {
    "camera/color/image_raw": "color",
    "camera/depth/image_raw": "depth",
    "camera/segmentation/image_raw": "segmentation",
}


@dataclass(frozen=True)
class WebViewerNodeParams:
    scene: str = "empty"
    #: camera mount in base_link, to place the depth cloud (defaults: the camera node's)
    camera_mount_position_m: tuple[float, float, float] = CameraParams.mount_position_m
    camera_mount_rpy_deg: tuple[float, float, float] = CameraParams.mount_rpy_deg
    #: lidar mount in base_link, to place lidar sweeps (default: the lidar node's)
    lidar_mount: Mount = field(default_factory=lambda: LidarParams().mount)
    viewer: WebViewerParams = field(default_factory=WebViewerParams)

    def __post_init__(self) -> None:
        require(bool(self.scene), "scene must name a scene (e.g. 'empty')")


def pose_array_arrays(msg: PoseArray) -> tuple[np.ndarray, np.ndarray]:
    """Positions (N, 3) and orientations (N, 4; w, x, y, z) of a PoseArray, non-finite or zero-quaternion poses dropped."""
    values = np.array([(p.position.x, p.position.y, p.position.z, p.orientation.w, p.orientation.x, p.orientation.y,
                        p.orientation.z) for p in msg.poses], dtype=float).reshape(-1, 7)
    keep = np.all(np.isfinite(values), axis=1) & (np.linalg.norm(values[:, 3:], axis=1) > 0.5)
    return values[keep, :3], values[keep, 3:]


def cloud_xyz(msg: PointCloud2) -> np.ndarray:
    """x, y, z fields of a PointCloud2 -> (N, 3) float32 array (ValueError when they are missing)."""
    return xyz(cloud_to_array(msg))


class WebViewerNode(Node):
    def __init__(self, **node_options):
        super().__init__("web_viewer", **node_options)
        self.params = declare_params(self, WebViewerNodeParams)
        scene = load_scene(self.params.scene)
        self.viewer = WebViewer(self.params.viewer, scene_primitives(scene))
        mount = CameraParams(mount_position_m=self.params.camera_mount_position_m,
                             mount_rpy_deg=self.params.camera_mount_rpy_deg)  # fmt: skip
        self.R_base_optical, self.t_base_optical = optical_to_base(mount)
        self.poses: deque = deque(maxlen=500)  # (t, position, orientation) for placing clouds
        # Best effort also in lockstep: a display may miss a message, and a reliable reader would make
        # the physics node keep, acknowledge and resend its 250 Hz ground truth for it.
        self.qos = qos_profile_sensor_data
        self._stamp_clock = InputStampClock(self)
        self._idle_reader = unspun_reader_node(self, "idle")
        self._odometry, self._odometry_watched = self.subscribe_ground_truth(watched=False), False
        self.create_subscription(PoseArray, "/swarm/poses", self.on_swarm, self.qos)
        self.create_subscription(PointCloud2, "lidar/points", self.on_lidar, self.qos)
        self._latest_lidar: PointCloud2 | None = None
        self._watched: list = []  # the image and cloud subscriptions, held while a browser is connected
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._latest_images: dict[str, Image] = {}
        self._tick_timer = self.create_timer(1.0 / self.params.viewer.update_rate_hz, self.tick, clock=steady)
        print(f"[web_viewer] open {self.viewer.url} in a browser (scene '{scene.name}')", flush=True)

    def on_odom(self, odom: OdometryFields) -> None:
        truth = truth_from_odometry(odom)
        if truth is None:
            self.get_logger().warning(UNUSABLE_ODOMETRY, throttle_duration_sec=5)
            return
        self.poses.append((truth.time_s, truth.position, truth.orientation))
        self.viewer.set_pose(truth.time_s, truth.position, truth.orientation)

    def on_swarm(self, msg: PoseArray) -> None:
        self.viewer.set_swarm(*pose_array_arrays(msg))

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

    def on_lidar(self, msg: PointCloud2) -> None:
        self._latest_lidar = msg  # placed at the update rate, in tick()

    def show_lidar(self, msg: PointCloud2) -> None:
        """Show the latest sweep, deskewed with the recorded poses around it (lidar frame -> map)."""
        if not self.poses:
            return
        try:
            points = cloud_to_array(msg)
            xyz(points[:0])  # raises when x, y or z is missing
        except ValueError as error:
            self.get_logger().warning(f"lidar cloud skipped: {error}", throttle_duration_sec=5)
            return
        points = points[np.isfinite(points["x"]) & np.isfinite(points["y"]) & np.isfinite(points["z"])]
        start = from_stamp(msg.header.stamp)
        track = PoseTrack()
        for t, position, orientation in self.poses:  # poses within the sweep and one either side
            if start - 0.05 <= t <= start + 0.25 and (not len(track) or t > track.last_time_s):
                track.push(t, position, orientation)
        if not len(track):
            _, position, orientation = min(self.poses, key=lambda pose: abs(pose[0] - start))
            track.push(start, position, orientation)
        world = points_to_world(points, start, track, self.params.lidar_mount)
        self.viewer.set_cloud(world, name="lidar", colors=height_colors(world[:, 2]))

    def on_image(self, label: str, msg: Image) -> None:
        self._latest_images[label] = msg  # converted at the (lower) update rate, in tick()

    def subscribe_ground_truth(self, watched: bool):
        """Ground truth: every message while ``watched``, else a queue of one the timer takes from (module doc)."""
        if watched:
            return subscribe_odometry(self, "ground_truth/odom", self.on_odom, self.qos, clock=self._stamp_clock)
        newest_only = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
        return self._idle_reader.create_subscription(Odometry, self.resolve_topic_name("ground_truth/odom"), not_called,
                                                     newest_only, raw=True)

    def take_idle_pose(self) -> None:
        """No browser: the newest ground truth that arrived since the last tick, if any, to the trail."""
        newest = None
        while (cdr := take_raw(self._odometry)) is not None:
            newest = cdr
        if newest is None:
            return
        try:
            odom = decode_odometry(newest)
        except ValueError as error:
            self.get_logger().warning(f"ground_truth/odom dropped: {error}", throttle_duration_sec=5)
            return
        self._stamp_clock.advance(odom.stamp_sec * 1_000_000_000 + odom.stamp_nanosec)
        self.on_odom(odom)

    def follow_browsers(self) -> None:
        """Subscribe to the images and clouds on the first browser, destroy them when the last one leaves;
        ground truth at its full rate while watched, the newest at each tick otherwise."""
        watched = self.viewer.has_clients()
        if watched != self._odometry_watched:
            owner = self if self._odometry_watched else self._idle_reader
            owner.destroy_subscription(self._odometry)
            self._odometry, self._odometry_watched = self.subscribe_ground_truth(watched), watched
        if watched and not self._watched:
            self._watched = [
                self.create_subscription(PointCloud2, "camera/depth/points", self.on_cloud, self.qos),
                *(self.create_subscription(Image, topic, lambda msg, label=label: self.on_image(label, msg), self.qos)
                  for topic, label in IMAGES.items()),
            ]
            self.get_logger().info("a browser is connected: subscribed to the images and the depth cloud")
        elif not watched and self._watched:
            for subscription in self._watched:
                self.destroy_subscription(subscription)
            self._watched = []
            self._latest_images.clear()
            self.get_logger().info("no browser left: images and depth cloud unsubscribed")

    def tick(self) -> None:
        self.follow_browsers()
        if not self._odometry_watched:
            self.take_idle_pose()
        if self._latest_lidar is not None:
            sweep, self._latest_lidar = self._latest_lidar, None
            self.show_lidar(sweep)
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
        if label in ("depth", "segmentation") and array.ndim != 2:
            self.get_logger().warning(f"{label} image skipped: encoding {msg.encoding!r} has more than one channel",
                                      throttle_duration_sec=5)
            return
        if label == "depth":
            array = depth_colors(array if array.dtype == np.float32 else array * 1e-3)
        elif label == "segmentation":
            array = segmentation_colors(array)
        elif array.ndim == 2:
            array = np.repeat(array[..., None], 3, axis=-1)
        self.viewer.set_image(label, array[..., :3])

    def destroy_node(self):
        """Stop pushing (no image is encoded after this), then stop the server, then the node."""
        self._tick_timer.cancel()
        self._latest_images.clear()
        self.viewer.close()
        self._idle_reader.destroy_node()
        return super().destroy_node()


def main(args=None):
    return run_node(WebViewerNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
