"""Ideal pinhole camera over a scene: depth, segmentation and colour from one ray per pixel.

Model. Pinhole intrinsics from the resolution and horizontal field of view:
f_x = f_y = (W / 2) / tan(hfov / 2), c_x = (W - 1) / 2, c_y = (H - 1) / 2
(pixel centres at integer coordinates, as ROS CameraInfo and OpenCV use), no
distortion (``plumb_bob``, D = 0). The ray of pixel (u, v) in the optical
frame (z forward, x right, y down, REP-103) is d = ((u - c_x) / f_x, (v - c_y) / f_y, 1);
a point (X, Y, Z) projects to u = f_x X / Z + c_x, v = f_y Y / Z + c_y.

Images (AirSim's DepthPlanar / DepthPerspective, Segmentation and Scene
images; seed 000, sec. 3 and Fig. 1):
- depth, float32 metres: ``planar`` = Z of the hit point in the optical frame
  (what a stereo camera such as the D435 of seed 004 reports), ``perspective``
  = distance along the ray. Per REP-117/REP-118: no surface along the ray or
  farther than ``max_range_m`` -> +inf, nearer than ``min_range_m`` -> -inf.
- segmentation, uint16: the segmentation id of the surface hit, 0 where none.
- colour, uint8 RGB: surface colour x (ambient + (1 - ambient) max(0, n.s))
  (Lambert's cosine law with a sun direction s), ground as a 2-tone checker,
  sky colour where nothing was hit.

The camera is mounted on ``base_link`` at ``mount_position_m`` (FLU) with
``mount_rpy_deg`` (roll, pitch, yaw of the camera link; pitch > 0 looks
down); the camera link looks along its x axis, its optical frame is rotated
as REP-103 says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np

from aerial_sim.config import require, require_positive
from aerial_sim.world import render_kernels
from aerial_sim.world.geometry import SURFACE_GROUND, quaternion_to_matrix, rpy_to_matrix
from aerial_sim.world.scene import NO_HIT_ID, Scene

#: Columns are the optical axes (x right, y down, z forward) in the camera link frame (x forward, y left, z up).
R_LINK_OPTICAL = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


@dataclass(frozen=True)
class CameraParams:
    """Pinhole depth/segmentation/colour camera (defaults: the 460x320 frames of seed 004, sec. 2.2)."""

    width: int = 460
    height: int = 320
    hfov_deg: float = 90.0  # AirSim's default FOV
    mount_position_m: tuple[float, float, float] = (0.1, 0.0, 0.0)  # in base_link (FLU)
    mount_rpy_deg: tuple[float, float, float] = (0.0, 0.0, 0.0)  # camera link in base_link; pitch > 0 looks down
    min_range_m: float = 0.05
    max_range_m: float = 100.0
    depth_mode: Literal["planar", "perspective"] = "planar"
    ambient: float = 0.35  # share of light reaching surfaces facing away from the sun
    sun_direction_enu: tuple[float, float, float] = (0.3, -0.4, 0.866)  # toward the sun
    sky_color: tuple[int, int, int] = (150, 190, 235)

    def __post_init__(self) -> None:
        require(self.width > 0 and self.height > 0, f"width/height must be > 0, got {self.width}x{self.height}")
        require(0 < self.hfov_deg < 180, f"hfov_deg must be in (0, 180), got {self.hfov_deg}")
        require_positive(self, "min_range_m", "max_range_m")
        require(self.min_range_m < self.max_range_m, "min_range_m must be < max_range_m")
        require(0 <= self.ambient <= 1, f"ambient must be in [0, 1], got {self.ambient}")
        require(math.hypot(*self.sun_direction_enu) > 0, "sun_direction_enu must not be zero")


@dataclass(frozen=True)
class CameraFrame:
    """One rendered frame; an image is None when it was not asked for."""

    depth: np.ndarray | None  # (H, W) float32 metres
    segmentation: np.ndarray | None  # (H, W) uint16
    color: np.ndarray | None  # (H, W, 3) uint8 RGB


class CameraModel:
    """Renders :class:`CameraFrame` s of ``scene`` from a base_link pose (position ENU, quaternion w,x,y,z)."""

    def __init__(self, params: CameraParams, scene: Scene):
        self.params = params
        self.scene = scene
        self.fx = self.fy = (params.width / 2.0) / math.tan(math.radians(params.hfov_deg) / 2.0)
        self.cx = (params.width - 1) / 2.0
        self.cy = (params.height - 1) / 2.0
        self.R_base_optical = rpy_to_matrix(*np.radians(params.mount_rpy_deg)) @ R_LINK_OPTICAL
        self.t_base_camera = np.asarray(params.mount_position_m, float)
        u, v = np.meshgrid(np.arange(params.width), np.arange(params.height))
        rays = np.stack([(u - self.cx) / self.fx, (v - self.cy) / self.fy, np.ones(u.shape)], axis=-1).reshape(-1, 3)
        norms = np.linalg.norm(rays, axis=1)
        self._unit_rays_optical = (rays / norms[:, None]).astype(np.float32)
        self._planar_per_metre = (1.0 / norms).astype(np.float32)  # optical z of a unit ray
        sun = np.asarray(params.sun_direction_enu, float)
        self._sun = (sun / np.linalg.norm(sun)).astype(np.float32)
        self._build_lookup_tables()
        self.caster = scene.ray_caster
        render_kernels.warm_up(shading=True)  # compile or load now, not on the first frame

    # -- intrinsics -------------------------------------------------------------------------
    @property
    def K(self) -> np.ndarray:
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    @property
    def P(self) -> np.ndarray:
        return np.hstack([self.K, np.zeros((3, 1))])

    def camera_info(self) -> dict:
        """CameraInfo fields (sensor_msgs/CameraInfo names) of this ideal monocular camera."""
        return {
            "width": self.params.width,
            "height": self.params.height,
            "distortion_model": "plumb_bob",
            "d": [0.0] * 5,
            "k": self.K.flatten().tolist(),
            "r": np.eye(3).flatten().tolist(),
            "p": self.P.flatten().tolist(),
        }

    # -- poses ------------------------------------------------------------------------------
    def optical_pose(self, position: Sequence[float], orientation: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
        """(R_world_optical, camera origin in world) for a base_link pose."""
        R_world_base = quaternion_to_matrix(orientation)
        origin = np.asarray(position, float) + R_world_base @ self.t_base_camera
        return R_world_base @ self.R_base_optical, origin

    def project(self, points_world: np.ndarray, position: Sequence[float], orientation: Sequence[float]) -> np.ndarray:
        """Pixel coordinates (N, 2) of world points, via K (points behind the camera give nan)."""
        R_world_optical, origin = self.optical_pose(position, orientation)
        p_optical = (np.atleast_2d(points_world) - origin) @ R_world_optical  # = R^T (p - o)
        with np.errstate(divide="ignore", invalid="ignore"):
            uvw = p_optical @ self.K.T
            uv = uvw[:, :2] / uvw[:, 2:3]
        uv[p_optical[:, 2] <= 0] = np.nan
        return uv

    # -- rendering --------------------------------------------------------------------------
    def render(self, position: Sequence[float], orientation: Sequence[float],
               depth: bool = True, segmentation: bool = True, color: bool = True,
               reference: bool = False) -> CameraFrame:
        """Find the first hit of each pixel's ray from the camera at this base_link pose and build the asked images.

        Hits come from the compiled rasteriser (:class:`~aerial_sim.world.geometry.PinholeRasterizer`),
        colours from :mod:`aerial_sim.world.render_kernels`; ``reference=True`` (or no numba) casts
        the rays with Embree and shades with the NumPy code they are tested against.
        """
        if not (depth or segmentation or color):
            return CameraFrame(None, None, None)
        shape = (self.params.height, self.params.width)
        R_world_optical, origin = self.optical_pose(position, orientation)
        directions = self._unit_rays_optical @ R_world_optical.T.astype(np.float32)
        reference = reference or not render_kernels.COMPILED
        if reference:
            hits = self.caster.cast(origin, directions, normals=color, reference=True)
        else:
            p = self.params
            hits = self.caster.rasterizer.hits(origin, R_world_optical, (self.fx, self.fy, self.cx, self.cy),
                                               (p.width, p.height), directions, self._unit_rays_optical, normals=color)
        depth_image = segmentation_image = color_image = None
        if depth:
            depth_image = self._depth(hits.distance).reshape(shape)
        if segmentation:
            segmentation_image = self._segmentation_lut[hits.surface].reshape(shape)
        if color:
            shade = self._color_reference if reference else self._color
            color_image = shade(origin, directions, hits).reshape(shape + (3,))
        return CameraFrame(depth_image, segmentation_image, color_image)

    def _depth(self, distance: np.ndarray) -> np.ndarray:
        value = distance * self._planar_per_metre if self.params.depth_mode == "planar" else distance.copy()
        value[value > self.params.max_range_m] = np.inf
        value[value < self.params.min_range_m] = -np.inf
        return value

    def _color(self, origin: np.ndarray, directions: np.ndarray, hits) -> np.ndarray:
        rgb = np.empty((len(directions), 3), np.uint8)
        ambient = self.params.ambient
        render_kernels.shade_colors(origin, directions, hits.distance, hits.surface, hits.normal, self._albedo_lut,
                                    self._sun, np.float32(ambient), np.float32(1.0 - ambient),
                                    float(self.scene.ground.checker_size_m), self._sky, rgb)
        return rgb

    def _color_reference(self, origin: np.ndarray, directions: np.ndarray, hits) -> np.ndarray:
        """NumPy version of :func:`~aerial_sim.world.render_kernels.shade_colors` (the reference)."""
        albedo = self._albedo_lut[hits.surface]
        ground = hits.surface == SURFACE_GROUND
        if self.scene.ground.checker_size_m > 0 and ground.any():
            xy = origin[:2] + directions[ground, :2] * hits.distance[ground, None]
            cell = np.floor(xy / self.scene.ground.checker_size_m).astype(np.int64).sum(axis=1) & 1
            albedo[ground] *= np.where(cell == 1, 0.85, 1.0).astype(np.float32)[:, None]
        ambient = self.params.ambient
        shade = ambient + (1.0 - ambient) * np.clip(hits.normal @ self._sun, 0.0, 1.0)
        rgb = albedo * shade[:, None]
        rgb[hits.surface == 0] = self.params.sky_color
        return (rgb + 0.5).astype(np.uint8)  # albedo <= 255 and shade <= 1: no clipping needed

    def set_surface_segmentation_id(self, surface: int, segmentation_id: int) -> None:
        """Render surface ``surface`` (1 ground, 2 + k object k) with ``segmentation_id`` from now on."""
        self._segmentation_lut[surface] = segmentation_id

    def _build_lookup_tables(self) -> None:
        """Surface index (0 none, 1 ground, 2 + k object k) -> segmentation id and albedo."""
        scene = self.scene
        self._segmentation_lut = np.asarray(scene.surface_table(lambda s: s.segmentation_id, NO_HIT_ID), np.uint16)
        self._albedo_lut = np.asarray(scene.surface_table(scene.object_color, self.params.sky_color), np.float32)
        self._sky = np.asarray(self.params.sky_color, np.float32)
