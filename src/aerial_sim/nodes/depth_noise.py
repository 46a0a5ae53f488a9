"""Depth noise node: ideal depth + segmentation in, what a stereo-IR depth camera delivers out.

Subscribes ``camera/depth/image_ideal`` (32FC1, m) and
``camera/segmentation/image_raw`` (mono16 ids), pairs them by stamp, applies
:class:`aerial_sim.sensors.depth_noise.DepthNoiseModel` (seed 004, sec. 2) with
each pixel's material from the scene's material table, and publishes
``camera/depth/image_raw`` (32FC1, m, 0 = no return) with the ideal image's
header. ``camera/depth/camera_info`` supplies the focal length used by the
optional stereo-geometry and incidence-angle modes.

The two images are read as CDR bytes (raw subscriptions, :func:`aerial_sim.cdr.decode.decode_image`): the pixels
are a view of the received bytes, where rclpy's typed Image copied them into an ``array.array`` (0.9 ms
of a 460x320 depth frame, 1.3 ms of the pair here).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from aerial_sim.cdr.decode import ImageFields, decode_image
from aerial_sim.cdr.encode import encode_image
from aerial_sim.config import require, require_positive
from aerial_sim.nodes.ros.clocks import InputStampClock
from aerial_sim.nodes.ros.lockstep import participant_publisher
from aerial_sim.nodes.ros.parameters import declare_params
from aerial_sim.nodes.ros.qos import stream_qos
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.sensors.depth_noise import DepthNoiseModel, DepthNoiseParams, materials_from_scene

DEPTH_ENCODING = "32FC1"
SEGMENTATION_ENCODINGS = ("mono16", "16UC1")


@dataclass(frozen=True)
class DepthNoiseNodeParams:
    """Node-level parameters (the model's own are :class:`DepthNoiseParams`)."""

    #: Scene whose objects' segmentation ids and materials give each pixel's m
    #: (config/scenes/<scene>.yaml with config/materials.yaml); "" = every pixel uses default_material_m.
    scene: str = ""
    #: Reliable streams (lockstep runs) instead of best effort.
    lockstep: bool = False
    #: The camera's frame rate, Hz of sim time: in lockstep the physics node waits for one noisy
    #: frame per 1 / rate_hz (match the camera's rate_hz).
    rate_hz: float = 30.0
    #: Frames waiting for their partner (per stream) before the oldest is dropped.
    pairing_buffer: int = 8

    def __post_init__(self):
        require_positive(self, "rate_hz")
        require(self.pairing_buffer >= 1, f"pairing_buffer must be >= 1, got {self.pairing_buffer}")


def image_array(message: ImageFields, dtype: np.dtype) -> np.ndarray:
    """A (height, width) view of an image message's pixels (row padding and byte order handled)."""
    dtype = np.dtype(dtype).newbyteorder(">" if message.is_bigendian else "<")
    row_items, remainder = divmod(message.step, dtype.itemsize)
    if remainder or row_items < message.width or len(message.data) < message.step * message.height:
        raise ValueError(f"step {message.step} and data size {len(message.data)} do not fit {message.width}x{message.height}")
    pixels = np.frombuffer(message.data, dtype=dtype, count=row_items * message.height)
    return pixels.reshape(message.height, row_items)[:, : message.width]


def stamp_key(message: ImageFields) -> int:
    return message.stamp_ns


class DepthNoiseNode(Node):
    def __init__(self):
        super().__init__("depth_noise")
        self.node_params = declare_params(self, DepthNoiseNodeParams)
        self.noise_params = declare_params(self, DepthNoiseParams)
        materials = materials_from_scene(self.node_params.scene) if self.node_params.scene else {}
        self.model = DepthNoiseModel(self.noise_params, materials=materials)
        self._depth: OrderedDict[int, ImageFields] = OrderedDict()
        self._segmentation: OrderedDict[int, ImageFields] = OrderedDict()
        self.frames_published = 0
        self._processed_key: int | None = None  # stamp of the last pair processed: each gets one noise draw
        qos = stream_qos(self.node_params.lockstep)
        self.publisher = participant_publisher(self, Image, "camera/depth/image_raw", qos, self.node_params.lockstep,
                                               self.node_params.rate_hz,
                                               inputs=("camera/depth/image_ideal", "camera/segmentation/image_raw"))
        # Bytes that are no Image raise ValueError from decode_image: the node's InputGuard reports and drops them.
        self.create_subscription(Image, "camera/depth/image_ideal", lambda data: self.on_depth(decode_image(data)),
                                 qos, raw=True)
        self.create_subscription(Image, "camera/segmentation/image_raw",
                                 lambda data: self.on_segmentation(decode_image(data)), qos, raw=True)
        self.create_subscription(CameraInfo, "camera/depth/camera_info", self.on_camera_info, qos)
        self.sim_clock = InputStampClock(self)
        self.get_logger().info(
            f"depth noise: std = {self.noise_params.noise_coefficient_m:g} m * exp(m d), "
            f"{len(materials)} materials from scene '{self.node_params.scene or '(none)'}', "
            f"fill-rate error {self.noise_params.fill_rate_error:.1%}"
        )

    def on_depth(self, message: ImageFields) -> None:
        self.sim_clock.advance(stamp_key(message))
        self._pair(message, self._depth, self._segmentation)

    def on_segmentation(self, message: ImageFields) -> None:
        self._pair(message, self._segmentation, self._depth)

    def on_camera_info(self, message: CameraInfo) -> None:
        focal_length = float(message.k[0])
        if focal_length > 0.0:
            self.model.focal_length_px = focal_length

    def _pair(self, message: ImageFields, own: OrderedDict, other: OrderedDict) -> None:
        """Process the pair once both images of a stamp are here; otherwise keep this one a while."""
        key = stamp_key(message)
        if key == self._processed_key:  # a frame sent again (lockstep re-send): its noise is already out
            return
        partner = other.pop(key, None)
        if partner is None:
            own[key] = message
            while len(own) > self.node_params.pairing_buffer:
                own.popitem(last=False)
            return
        # Everything older than a completed pair will never complete: drop it.
        for buffer in (own, other):
            for stale in [k for k in buffer if k < key]:
                del buffer[stale]
        depth, segmentation = (message, partner) if own is self._depth else (partner, message)
        self._processed_key = key
        self._process(depth, segmentation)

    def _process(self, depth_msg: ImageFields, segmentation_msg: ImageFields) -> None:
        problem = pair_problem(depth_msg, segmentation_msg)
        if problem:
            self.get_logger().warning(f"depth/segmentation pair skipped: {problem}", throttle_duration_sec=5)
            return
        try:
            depth = image_array(depth_msg, np.float32)
            segmentation = image_array(segmentation_msg, np.uint16)
        except ValueError as error:
            self.get_logger().warning(f"malformed image skipped: {error}", throttle_duration_sec=5)
            return
        unknown = self.model.unknown_ids(segmentation)
        if unknown.size:
            self.get_logger().warning(
                f"segmentation ids {unknown[:10].tolist()} are not in the material table; "
                f"using default m = {self.noise_params.default_material_m:g} 1/m",
                throttle_duration_sec=5,
            )
        noisy = self.model.apply(depth, segmentation)
        # CDR bytes with zero padding: identical lockstep runs record identical bags (issue 32)
        self.publisher.publish(encode_image(depth_msg.stamp_ns, depth_msg.frame_id,
                                            depth_msg.height, depth_msg.width, DEPTH_ENCODING, False,
                                            depth_msg.width * 4, np.ascontiguousarray(noisy, dtype="<f4")))
        self.frames_published += 1


def pair_problem(depth: ImageFields, segmentation: ImageFields) -> str | None:
    """Why a depth/segmentation pair cannot be used, or None."""
    if depth.encoding != DEPTH_ENCODING:
        return f"depth encoding is '{depth.encoding}', expected '{DEPTH_ENCODING}'"
    if segmentation.encoding not in SEGMENTATION_ENCODINGS:
        return f"segmentation encoding is '{segmentation.encoding}', expected 'mono16'"
    if (depth.width, depth.height) != (segmentation.width, segmentation.height):
        return (f"depth is {depth.width}x{depth.height} but segmentation is "
                f"{segmentation.width}x{segmentation.height}")
    if depth.width == 0 or depth.height == 0:
        return "empty image"
    return None


def main(args=None):
    return run_node(DepthNoiseNode, args, background=True)


if __name__ == "__main__":
    raise SystemExit(main())
