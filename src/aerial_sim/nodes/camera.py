"""Camera node: renders ideal depth, segmentation and colour images of the scene from ground truth.

Subscribes ``ground_truth/odom``; every ``1 / rate_hz`` of simulation time it
renders the scene from the pose in the newest odometry message (one ray per
pixel, :class:`aerial_sim.world.camera.CameraModel`) and publishes, stamped
with that message's sim time and framed ``<ns>/camera_depth_optical_frame``:

- ``camera/depth/image_ideal`` (32FC1, metres; +inf no return, -inf too near),
- ``camera/segmentation/image_raw`` (mono16 scene segmentation ids),
- ``camera/color/image_raw`` (rgb8),
- ``camera/instance/image_raw`` (mono16 instance ids, unique per scene object),
- ``camera/normals/image_raw`` (32FC3 unit surface normals in the optical frame),
- ``camera/flow/image_raw`` (32FC2 optical flow in pixels from the previous frame, from the second frame on),
- ``camera/detections_3d`` (visualization_msgs/MarkerArray: a CUBE per object in view, ``ns`` its class id,
  ``id`` its instance id, in ``map``; :mod:`aerial_sim.world.labels`),
- ``camera/detections_2d`` (visualization_msgs/ImageMarker, one per object in view and frame: a POLYGON
  whose corners are the centres of the extreme pixels of that object's visible pixels, ``ns`` its class id,
  ``id`` its instance id; vision_msgs has no wheel on PyPI, see doc/datasets.md),
- ``camera/depth/camera_info`` and ``camera/color/camera_info``,
- ``camera/class_names`` (diagnostic_msgs/DiagnosticStatus, latched: published once, transient-local): the
  scene's class id -> name table (:attr:`~aerial_sim.world.scene.Scene.class_names`), one KeyValue per class,
  ``key`` the segmentation id in decimal, ``value`` its name; ``hardware_id`` the scene. It names the ids of
  the segmentation image and the ``ns`` of the detections, and ``aerial_sim export`` reads it from the bag for
  the COCO category names (vision_msgs' LabelInfo, made for this, has no wheel on PyPI).

Each image can be switched off (``publish_depth``, ``publish_segmentation``,
``publish_color``, ``publish_instance``, ``publish_normals``, ``publish_flow``, ``publish_detections``,
``publish_detections_2d``); only what is published is computed, and an image no
subscriber is matched to at that moment is not rendered either (DDS would not
deliver it to anyone; the camera_info messages are always sent). ``distortion_d`` (plumb_bob) and
``color_noise_std`` / ``noise_seed`` (:mod:`aerial_sim.world.lens`, off by default) put a lens and
sensor noise in front of the ideal pinhole; an AirSim settings file (``airsim_settings``) that gives this
vehicle's front_center camera (or CameraDefaults) ``DistortionParams`` sets the lens instead, the one the
AirSim server's images of that camera have. Every message goes out as CDR bytes with zero padding
(:func:`aerial_sim.cdr.encode.encode_image_array`, ``encode_camera_info_of``; the markers and class names through
:func:`~aerial_sim.nodes.ros.zero_padding.zero_padded_bytes`), so identical lockstep runs record identical
bags (issue 32); the images cost less to publish so than as typed messages (``tools/dev.sh bench cdr``). Rendering runs
in the odometry callback: a 460x320 urban frame with all three images costs
24-30 ms of CPU on this (loaded, 2-core) machine, half of what the NumPy shading
cost (benchmarks/camera.py), and odometry is a
best-effort stream, so a message that arrives meanwhile is simply superseded by
the next one.
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import time
from dataclasses import dataclass

import numpy as np
import rclpy.clock
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import CameraInfo, Image
from builtin_interfaces.msg import Duration
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from geometry_msgs.msg import Point
from visualization_msgs.msg import ImageMarker, Marker, MarkerArray

from aerial_sim.cdr.decode import OdometryFields
from aerial_sim.cdr.encode import encode_camera_info_of, encode_image_array
from aerial_sim.config import ParamsError, require, require_positive
from aerial_sim.control.geometry import matrix_to_quat
from aerial_sim.nodes.ros.clocks import InputStampClock
from aerial_sim.nodes.ros.frames import frame_in_namespace, publish_static_mount
from aerial_sim.nodes.ros.lockstep import participant_publisher
from aerial_sim.nodes.ros.parameters import declare_params
from aerial_sim.nodes.ros.qos import LATCHED_QOS, stream_qos
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.stamps import stamp_from_fields
from aerial_sim.nodes.ros.subscriptions import subscribe_odometry
from aerial_sim.nodes.ros.zero_padding import zero_padded_bytes
from aerial_sim.sensors.truth import UNUSABLE_ODOMETRY, truth_from_odometry
from aerial_sim.world.camera import CameraParams
from aerial_sim.world.labels import boxes_3d, detections_2d
from aerial_sim.world.image_artefacts import apply_artefacts
from aerial_sim.world.lens import LensParams, camera_for, color_noise
from aerial_sim.world.scene import load_scene


@dataclass(frozen=True)
class CameraNodeParams:
    """What the node renders and publishes (the camera itself is :class:`CameraParams`)."""

    scene: str = "empty"  # config/scenes/<scene>.yaml, or a path
    rate_hz: float = 30.0  # frames per second of simulation time
    publish_depth: bool = True
    publish_segmentation: bool = True
    publish_color: bool = True
    publish_instance: bool = True  # camera/instance/image_raw, mono16 instance ids (rendered only while subscribed)
    publish_normals: bool = True  # camera/normals/image_raw, 32FC3 unit normals in the optical frame (same)
    publish_flow: bool = True  # camera/flow/image_raw, 32FC2 optical flow from the previous frame (same)
    publish_detections: bool = True  # camera/detections_3d, MarkerArray of the objects in view (same)
    publish_detections_2d: bool = True  # camera/detections_2d, an ImageMarker per object in view (same)
    lockstep: bool = False  # reliable QoS on the odometry input and image outputs
    frame_id: str = "camera_depth_optical_frame"  # prefixed with the namespace
    #: AirSim settings.json whose lens (DistortionParams of this vehicle's front_center camera, else
    #: CameraDefaults') this camera takes over distortion_d, as the AirSim server does: a path, auto or none.
    airsim_settings: str = "none"

    def __post_init__(self) -> None:
        require_positive(self, "rate_hz")
        require(bool(self.scene), "scene must name a scene (e.g. 'empty')")


#: Odometry messages the camera keeps in real time (100 ms at 250 Hz; lockstep keeps its reliable 200).
ODOM_KEEP = 25


def has_subscribers(publisher) -> bool:
    """Whether ``publisher`` exists and a subscription is matched to it now (what it publishes reaches someone)."""
    return publisher is not None and publisher.get_subscription_count() > 0


class CameraNode(Node):
    def __init__(self, **node_options):
        super().__init__("camera", **node_options)
        self.node_params = declare_params(self, CameraNodeParams)
        self.camera_params = declare_params(self, CameraParams)
        self.lens_params = declare_params(self, LensParams)
        self.image_artefacts = None  # a settings file's NoiseSettings Horz* artefacts (_camera_model)
        self.scene = load_scene(self.node_params.scene)
        self.model = self._camera_model()  # a CameraModel unless distorted
        self.frame_id = frame_in_namespace(self, self.node_params.frame_id)
        publish_static_mount(self, self.frame_id, self.model.t_base_camera, matrix_to_quat(self.model.R_base_optical))
        qos = stream_qos(self.node_params.lockstep)
        p = self.node_params
        self.depth_pub = self.create_publisher(Image, "camera/depth/image_ideal", qos) if p.publish_depth else None
        self.segmentation_pub = (
            self.create_publisher(Image, "camera/segmentation/image_raw", qos) if p.publish_segmentation else None
        )
        self.color_pub = self.create_publisher(Image, "camera/color/image_raw", qos) if p.publish_color else None
        self.instance_pub = (
            self.create_publisher(Image, "camera/instance/image_raw", qos) if p.publish_instance else None
        )
        self.normals_pub = self.create_publisher(Image, "camera/normals/image_raw", qos) if p.publish_normals else None
        self.flow_pub = self.create_publisher(Image, "camera/flow/image_raw", qos) if p.publish_flow else None
        self.detections_pub = (
            self.create_publisher(MarkerArray, "camera/detections_3d", qos) if p.publish_detections else None
        )
        self.detections_2d_pub = (
            self.create_publisher(ImageMarker, "camera/detections_2d", qos) if p.publish_detections_2d else None
        )
        period_ns = int(round(1e9 / p.rate_hz))  # a 2D box lasts one frame
        self._marker_lifetime = Duration(sec=period_ns // 1_000_000_000, nanosec=period_ns % 1_000_000_000)
        self._frame_poses = [None, None]  # (position, orientation, stamp) of the frame before the last, and the last
        # Depth camera_info goes out last, after the frame's images: the output lockstep waits for.
        self.depth_info_pub = participant_publisher(self, CameraInfo, "camera/depth/camera_info", qos, p.lockstep, p.rate_hz,
                                                    inputs=("ground_truth/odom",))
        self.color_info_pub = self.create_publisher(CameraInfo, "camera/color/camera_info", qos) if p.publish_color else None
        self.camera_info = CameraInfo(**self.model.camera_info())
        self._odom_qos = qos if p.lockstep else self._real_time_odometry_qos(qos)
        self.odom_subscription = None  # made once the renderer is warmed up (_subscribe_when_warm)
        self.class_names_pub = self.create_publisher(DiagnosticStatus, "camera/class_names", LATCHED_QOS)
        self.class_names_pub.publish(zero_padded_bytes(DiagnosticStatus(
            level=DiagnosticStatus.OK, name=f"{self.get_fully_qualified_name()}: class names",
            message="segmentation class id -> name", hardware_id=self.scene.name,
            values=[KeyValue(key=str(class_id), value=name) for class_id, name in self.scene.class_names.items()])))
        self._next_frame_s = -math.inf
        self._last_stamp_s = -math.inf
        self._last_frame = None  # (position, orientation, stamp ns) of the last frame published
        self._warmed = threading.Event()  # set once the warm-up frame is rendered (_warm_up)
        threading.Thread(target=self._warm_up, name="camera-warm-up", daemon=True).start()
        steady = rclpy.clock.Clock(clock_type=rclpy.clock.ClockType.STEADY_TIME)
        self._subscribe_timer = self.create_timer(0.01, self._subscribe_when_warm, clock=steady)
        self.get_logger().info(
            f"camera: scene '{self.scene.name}' ({self.model.caster.triangle_count} triangles), "
            f"{self.camera_params.width}x{self.camera_params.height} at {p.rate_hz:g} Hz sim time, "
            f"hfov {self.camera_params.hfov_deg:g} deg, {self.camera_params.depth_mode} depth"
            + (f", plumb_bob D = {list(self.lens_params.distortion_d)}" if self.lens_params.distorted else "")
            + (f", colour noise {self.lens_params.color_noise_std:g} levels (seed {self.lens_params.noise_seed})"
               if self.lens_params.color_noise_std > 0 else "")
        )

    def _warm_up(self) -> None:
        """Render one frame of every image this node may publish, from a pose 20 m above the scene's origin looking
        30 deg down, in a thread of its own while the node spins (its parameter services answer meanwhile: the
        recorder asks them for the stream rates, and gives up after 10 s); odometry is skipped until it is done.

        The renderer builds its rasteriser, the levels of detail and the sun's view of the shadow casters on its
        first frame (2.2 s of CPU in the city): done on the first odometry, it left the city graph's first
        3.5 s of sim time without an image (doc/worlds.md). Each image is a function of the pose alone, so the
        frames are the same as without it (test_world_camera.py). In lockstep the physics node sends a state
        skipped meanwhile again, as for any participant that has not answered it."""
        p = self.node_params
        began = time.thread_time()
        try:
            pitch = math.radians(30.0) / 2.0
            self.model.render((0.0, 0.0, 20.0), (math.cos(pitch), 0.0, math.sin(pitch), 0.0), depth=p.publish_depth,
                              segmentation=p.publish_segmentation, color=p.publish_color,
                              instance=p.publish_instance or p.publish_detections or p.publish_detections_2d,
                              normals=p.publish_normals)
            self.get_logger().info(f"renderer warmed up in {time.thread_time() - began:.2f} s of CPU")
        except Exception as error:  # noqa: BLE001 - the first real frame meets it again, through the InputGuard
            self.get_logger().error(f"warm-up frame failed: {type(error).__name__}: {error}")
        finally:
            self._warmed.set()

    def _real_time_odometry_qos(self, qos: QoSProfile) -> QoSProfile:
        """The streams' best-effort QoS keeping :data:`ODOM_KEEP` odometry messages (``AERIAL_SIM_CAMERA_ODOM_KEEP``
        overrides it, for ``benchmarks/camera_late_frames.py``): the camera renders the first state at or after
        each frame's due time, and with the streams' 5 (20 ms at 250 Hz) a camera held up longer than that
        found the due state gone and stamped the frame later (10 late frames of 2,375 over four 20 s runs at
        a load of 7-9, none with 25 in as many runs). Taking the 25 costs a decode each."""
        keep = ODOM_KEEP
        text = os.environ.get("AERIAL_SIM_CAMERA_ODOM_KEEP")
        if text:
            try:
                keep = int(text)
                if keep < 1:
                    raise ValueError(text)
            except ValueError:
                self.get_logger().warning(f"AERIAL_SIM_CAMERA_ODOM_KEEP={text!r} is no whole number >= 1: {ODOM_KEEP} kept")
                keep = ODOM_KEEP
        return QoSProfile(history=qos.history, depth=keep, reliability=qos.reliability, durability=qos.durability)

    def _subscribe_when_warm(self) -> None:
        """Subscribe to ``ground_truth/odom`` once the warm-up frame is rendered (executor thread): its
        subscription in the graph is what says the camera is ready, and a physics node with a start gate
        (``start_gate_nodes``) holds the clock at 0 until it sees it, so the first frame is the one at t = 0
        (doc/lockstep.md)."""
        if not self._warmed.is_set():
            return
        self.destroy_timer(self._subscribe_timer)
        self.odom_subscription = subscribe_odometry(self, "ground_truth/odom", self.on_odom, self._odom_qos,
                                                    clock=InputStampClock(self))

    def _camera_model(self):
        """The camera through the settings file's lens when it gives one (airsim_settings), else through
        ``distortion_d``; a file or lens that cannot be used is one error line, and ``distortion_d`` serves.
        The file's NoiseSettings, when it has them, set ``color_noise_std`` and the horizontal artefacts
        (:mod:`aerial_sim.world.image_artefacts`), seeded by ``noise_seed``."""
        found = None
        if self.node_params.airsim_settings not in ("", "none"):
            from aerial_sim.airsim.settings import camera_artefacts, camera_lens, camera_noise, usable_settings

            usable = usable_settings(self.node_params.airsim_settings, lambda error: self.get_logger().error(
                f"{error}; the camera's own distortion_d and color_noise_std are used"))
            if usable is not None:
                vehicle = self.get_namespace().strip("/").split("/")[-1]
                found = camera_lens(usable[1], vehicle)
                noise = camera_noise(usable[1], vehicle)
                if noise is not None:
                    std, key = noise
                    if self.lens_params.color_noise_std > 0 and self.lens_params.color_noise_std != std:
                        self.get_logger().warning(f"color_noise_std {self.lens_params.color_noise_std:g} ignored: the "
                                                  f"AirSim settings' {key} is this camera's noise (the AirSim "
                                                  "server's too)")
                    self.lens_params = dataclasses.replace(self.lens_params, color_noise_std=float(std))
                self.image_artefacts = (camera_artefacts(usable[1], vehicle) or (None,))[0]
        if found is not None:
            d, key = found
            if self.lens_params.distorted and tuple(self.lens_params.distortion_d) != tuple(d):
                self.get_logger().warning(f"distortion_d {list(self.lens_params.distortion_d)} ignored: the AirSim "
                                          f"settings' {key} is this camera's lens (the AirSim server's too)")
            lens = dataclasses.replace(self.lens_params, distortion_d=tuple(d))
            try:
                model = camera_for(self.camera_params, lens, self.scene)
                self.lens_params = lens
                return model
            except ParamsError as error:
                self.get_logger().error(f"AirSim settings {key}: {error}; the camera's own distortion_d is used")
        return camera_for(self.camera_params, self.lens_params, self.scene)

    def on_odom(self, odom: OdometryFields) -> None:
        if not self._warmed.is_set():  # the warm-up frame is still rendering (_warm_up)
            return
        stamp_s = odom.time_s
        if stamp_s == self._last_stamp_s and self._last_frame is not None and self._last_frame[2] == odom.stamp_ns:
            if self.node_params.lockstep:
                # The physics node re-sends a state while lockstep waits: a reader of this frame that
                # joined late (DDS discovery; depth noise, the recorder) gets it now, with every image it reads.
                self.publish_frame(*self._last_frame[:2], stamp_from_fields(odom))
            return
        if stamp_s < self._last_stamp_s:  # simulation restarted
            self._next_frame_s = -math.inf
        self._last_stamp_s = stamp_s
        if stamp_s < self._next_frame_s - 1e-9:
            return
        if truth_from_odometry(odom) is None:  # the checks every consumer of ground truth makes
            self.get_logger().warning(UNUSABLE_ODOMETRY, throttle_duration_sec=5)
            return
        position, orientation = odom.position, odom.orientation_wxyz
        rate = self.node_params.rate_hz
        self._next_frame_s = (math.floor(stamp_s * rate + 1e-6) + 1) / rate
        if self._last_frame is None:  # once: a late first frame (a clock started before this node) shows here
            self.get_logger().info(f"first frame at t = {stamp_s:.3f} s of sim time")
        self._last_frame = (position, orientation, odom.stamp_ns)
        self.publish_frame(position, orientation, stamp_from_fields(odom))

    def detections(self, instance: np.ndarray, stamp) -> MarkerArray:
        """One CUBE per object in view (ns = class id, id = instance id), in ``map``; DELETEALL first."""
        boxes = boxes_3d(self.scene)
        markers = [Marker(action=Marker.DELETEALL)]
        markers[0].header.stamp, markers[0].header.frame_id = stamp, "map"
        for instance_id in np.unique(instance):
            box = boxes.get(int(instance_id))
            if box is None:
                continue
            marker = Marker(ns=str(box.class_id), id=int(instance_id), type=Marker.CUBE, action=Marker.ADD)
            marker.header.stamp, marker.header.frame_id = stamp, "map"
            marker.pose.position.x, marker.pose.position.y, marker.pose.position.z = box.center
            (marker.pose.orientation.w, marker.pose.orientation.x, marker.pose.orientation.y,
             marker.pose.orientation.z) = box.orientation
            marker.scale.x, marker.scale.y, marker.scale.z = box.size
            marker.color.r, marker.color.g, marker.color.b, marker.color.a = 0.1, 0.9, 0.2, 0.4
            marker.text = box.name
            markers.append(marker)
        return MarkerArray(markers=markers)

    def image_markers(self, instance: np.ndarray, header) -> list[ImageMarker]:
        """One ImageMarker POLYGON per object in view: the box of its visible pixels (ns = class, id = instance)."""
        markers = []
        for box in detections_2d(instance, self.scene):
            marker = ImageMarker(header=header, ns=str(box.class_id), id=box.instance_id, type=ImageMarker.POLYGON,
                                 action=ImageMarker.ADD, scale=1.0, lifetime=self._marker_lifetime)
            marker.position.x, marker.position.y = (box.u_min + box.u_max) / 2.0, (box.v_min + box.v_max) / 2.0
            marker.points = [Point(x=float(u), y=float(v)) for u, v in ((box.u_min, box.v_min), (box.u_max, box.v_min),
                                                                         (box.u_max, box.v_max), (box.u_min, box.v_max))]
            marker.outline_color.g, marker.outline_color.a = 1.0, 1.0
            markers.append(marker)
        return markers

    def publish_frame(self, position, orientation, stamp) -> None:
        frame = self.model.render(
            position,
            orientation,
            depth=has_subscribers(self.depth_pub),
            segmentation=has_subscribers(self.segmentation_pub),
            color=has_subscribers(self.color_pub),
            instance=(has_subscribers(self.instance_pub) or has_subscribers(self.detections_pub)
                      or has_subscribers(self.detections_2d_pub)),
            normals=has_subscribers(self.normals_pub),
        )
        self.camera_info.header.stamp = stamp
        self.camera_info.header.frame_id = self.frame_id
        header = self.camera_info.header
        stamp_ns, frame_id = stamp.sec * 1_000_000_000 + stamp.nanosec, self.frame_id
        if frame.depth is not None:
            self.depth_pub.publish(encode_image_array(stamp_ns, frame_id, frame.depth, "32FC1"))
        if frame.segmentation is not None:
            self.segmentation_pub.publish(encode_image_array(stamp_ns, frame_id, frame.segmentation, "mono16"))
        if frame.color is not None:
            color = color_noise(frame.color, self.lens_params.color_noise_std, self.lens_params.noise_seed, stamp_ns)
            color = apply_artefacts(color, self.image_artefacts, self.lens_params.noise_seed, stamp_ns)
            self.color_pub.publish(encode_image_array(stamp_ns, frame_id, color, "rgb8"))
        if frame.instance is not None and has_subscribers(self.instance_pub):
            self.instance_pub.publish(encode_image_array(stamp_ns, frame_id, frame.instance, "mono16"))
        if frame.instance is not None and has_subscribers(self.detections_pub):
            self.detections_pub.publish(zero_padded_bytes(self.detections(frame.instance, stamp)))
        if frame.instance is not None and has_subscribers(self.detections_2d_pub):
            for marker in self.image_markers(frame.instance, header):
                self.detections_2d_pub.publish(zero_padded_bytes(marker))
        if frame.normals is not None:
            self.normals_pub.publish(encode_image_array(stamp_ns, frame_id, frame.normals, "32FC3"))
        stamp_key = (stamp.sec, stamp.nanosec)
        if self._frame_poses[1] is None or self._frame_poses[1][2] != stamp_key:  # a new frame (not a re-send)
            self._frame_poses = [self._frame_poses[1], (position, orientation, stamp_key)]
        previous = self._frame_poses[0]
        if previous is not None and has_subscribers(self.flow_pub):
            flow = self.model.optical_flow(position, orientation, previous[0], previous[1])
            self.flow_pub.publish(encode_image_array(stamp_ns, frame_id, flow, "32FC2"))
        info = encode_camera_info_of(self.camera_info)
        if self.color_info_pub is not None:
            self.color_info_pub.publish(info)
        self.depth_info_pub.publish(info)

def main(args=None):
    return run_node(CameraNode, args, background=True)


if __name__ == "__main__":
    raise SystemExit(main())
