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
  sky colour where nothing was hit. The surface colour is the triangle's base
  colour times its texture at the hit point; the scene's ``lighting`` section
  (:mod:`aerial_sim.world.lighting`) may place the sun from the time of day,
  hide it behind occluders (shadow rays, answered in the sun's view against the casters
  binned once per sun direction: :mod:`aerial_sim.world.shadow_kernels`), grade the
  sky, fog by distance, scale the exposure and supersample the colour image.
- instance, uint16: the instance id of the object hit (unique per object; 1 the
  ground and the ground cover on it, 0 nothing) beside the class segmentation id.
- normals, float32 (H, W, 3): the unit surface normal in the optical frame
  (facing the camera; zero where nothing was hit), AirSim's SurfaceNormals.

Depth, segmentation, instance and normals never depend on the lighting.

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
from aerial_sim.world import material_maps, raster_kernels, render_kernels, shadow_kernels
from aerial_sim.world.assets import UV1_BASE, UV1_PBR
from aerial_sim.world.lighting import daylight, parse_time_of_day, sun_direction_enu, sun_position
from aerial_sim.world.ray_caster import ray_caster_of
from aerial_sim.world.rotations import quaternion_to_matrix, rpy_to_matrix
from aerial_sim.world.scene import NO_HIT_ID, Scene
from aerial_sim.world.surface_tables import SURFACE_GROUND, render_surfaces

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
    instance: np.ndarray | None = None  # (H, W) uint16 instance ids
    normals: np.ndarray | None = None  # (H, W, 3) float32 unit normals, optical frame


class CameraModel:
    """Renders :class:`CameraFrame` s of ``scene`` from a base_link pose (position ENU, quaternion w,x,y,z)."""

    def __init__(self, params: CameraParams, scene: Scene, supersample: bool = True):
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
        self.lighting = scene.lighting
        self._gain = np.float32(2.0 ** self.lighting.exposure_ev)
        self._fog_density = np.float32(self.lighting.fog_density_per_m)
        self._set_sun(params.sun_direction_enu, 1.0, 1.0)
        if self.lighting.time_of_day is not None:
            self.set_time_of_day(parse_time_of_day(self.lighting.time_of_day, scene.home.longitude))
        self._build_lookup_tables()
        self.caster = ray_caster_of(scene)
        #: What the camera draws and shades: the scene's triangles, then its large meshes' simplified levels.
        self._surfaces, lod = render_surfaces(scene)
        #: Each drawn triangle's extra shadow-ray offset (its level's triangle size; 0 at full detail).
        self._lift = lod.lift if lod is not None else np.zeros(max(1, self._surfaces.count), np.float32)
        #: Level of detail (:mod:`aerial_sim.world.lod`): draw each large mesh at the coarsest level whose
        #: triangles are at most this many pixels wide; 0 draws every mesh whole.
        self.lod_pixels = float(scene.lod.pixels) if scene.lod.enabled else 0.0
        self._supersampled: CameraModel | None = None
        #: Colour supersampling factor per axis (the fine model itself renders plainly).
        self._antialiasing = self.lighting.antialiasing if supersample else 1
        render_kernels.warm_up(shading=True)  # compile or load now, not on the first frame
        uv_sets = self._surfaces.uv_sets is not None  # glTF textures on TEXCOORD_1
        if self._surfaces.maps is not None:
            material_maps.warm_up(uv_sets)
        elif uv_sets:
            render_kernels.warm_up(shading=True, uv_sets=True)
        if self.lighting.shadows:
            shadow_kernels.warm_up()

    # -- sun --------------------------------------------------------------------------------
    def _set_sun(self, direction, direct: float, ambient_factor: float) -> None:
        sun = np.asarray(direction, float)
        self._sun = (sun / np.linalg.norm(sun)).astype(np.float32)
        ambient = self.params.ambient
        self._ambient = np.float32(ambient * ambient_factor)
        self._lit_share = np.float32(1.0 - ambient) if direct == 1.0 else np.float32((1.0 - ambient) * direct)

    def set_time_of_day(self, moment) -> tuple[float, float]:
        """Place the sun for ``moment`` (an aware datetime) at the scene's home point; returns (azimuth, elevation) deg."""
        azimuth, elevation = sun_position(moment, self.scene.home.latitude, self.scene.home.longitude)
        direct, ambient_factor = daylight(elevation)
        self._set_sun(sun_direction_enu(azimuth, elevation), direct, ambient_factor)
        if getattr(self, "_supersampled", None) is not None:
            self._supersampled.set_time_of_day(moment)
        return azimuth, elevation

    def set_fog(self, density_per_m: float | None) -> None:
        """Distance-fog density (1/m) from now on; None: the scene's ``lighting.fog_density_per_m`` again."""
        density = self.lighting.fog_density_per_m if density_per_m is None else float(density_per_m)
        if not (math.isfinite(density) and density >= 0):
            raise ValueError(f"fog density must be >= 0, got {density_per_m!r}")
        self._fog_density = np.float32(density)
        if getattr(self, "_supersampled", None) is not None:
            self._supersampled.set_fog(density_per_m)

    @property
    def sun_direction(self) -> np.ndarray:
        """Unit ENU vector toward the sun the colour image is lit by."""
        return self._sun.astype(float)

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

    def optical_rays(self) -> np.ndarray:
        """(H, W, 3) float32: the ray (x, y, 1) = ((u - c_x) / f_x, (v - c_y) / f_y, 1) of each pixel, optical frame."""
        u, v = np.meshgrid(np.arange(self.params.width), np.arange(self.params.height))
        return np.stack([(u - self.cx) / self.fx, (v - self.cy) / self.fy, np.ones(u.shape)], axis=-1).astype(np.float32)

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
               reference: bool = False, instance: bool = False, normals: bool = False) -> CameraFrame:
        """Find the first hit of each pixel's ray from the camera at this base_link pose and build the asked images.

        Hits come from the compiled rasteriser (:class:`~aerial_sim.world.pinhole_rasterizer.PinholeRasterizer`),
        colours from :mod:`aerial_sim.world.render_kernels`; ``reference=True`` (or no numba) casts
        the rays with Embree and shades with the NumPy code they are tested against.
        """
        if not (depth or segmentation or color or instance or normals):
            return CameraFrame(None, None, None)
        shape = (self.params.height, self.params.width)
        supersample = self._antialiasing > 1 and color
        if supersample and not (depth or segmentation or instance or normals):
            return CameraFrame(None, None, self._supersampled_color(position, orientation, reference))
        R_world_optical, origin = self.optical_pose(position, orientation)
        directions = self._world_rays(R_world_optical)
        reference = reference or not render_kernels.COMPILED
        with_normals = color or normals
        if reference:
            hits = self.caster.cast(origin, directions, normals=with_normals, reference=True)
        else:
            p = self.params
            hits = self.caster.rasterizer.hits(origin, R_world_optical, (self.fx, self.fy, self.cx, self.cy),
                                               (p.width, p.height), directions, self._unit_rays_optical,
                                               normals=with_normals, lod_pixels=self.lod_pixels)
        depth_image = segmentation_image = color_image = instance_image = normal_image = None
        if depth:
            depth_image = self._depth(hits.distance).reshape(shape)
        if segmentation:
            segmentation_image = np.take(self._segmentation_lut, hits.surface).reshape(shape)  # (faster than [])
        if instance:
            instance_image = np.take(self._instance_lut, hits.surface).reshape(shape)
        if normals:
            normal_image = (hits.normal @ R_world_optical.astype(np.float32)).reshape(shape + (3,))
        if supersample:
            color_image = self._supersampled_color(position, orientation, reference)
        elif color:
            shade = self._color_reference if reference else self._color
            color_image = shade(origin, directions, hits).reshape(shape + (3,))
        return CameraFrame(depth_image, segmentation_image, color_image, instance_image, normal_image)

    def optical_flow(self, position: Sequence[float], orientation: Sequence[float],
                     previous_position: Sequence[float], previous_orientation: Sequence[float]) -> np.ndarray:
        """(H, W, 2) float32 optical flow (u, v) in pixels from the previous pose's frame to this one's.

        For each pixel, the surface point it sees now is projected into the camera at the previous pose:
        flow = (u, v) - (u_prev, v_prev) (AirSim's OpticalFlow, exact for a static world; it includes the
        motion of the camera only). A pixel that sees the sky is a point at infinity (rotation only); one
        whose point was behind the previous camera is nan.
        """
        shape = (self.params.height, self.params.width)
        R_world_optical, origin = self.optical_pose(position, orientation)
        directions = self._world_rays(R_world_optical)
        if render_kernels.COMPILED:
            p = self.params
            hits = self.caster.rasterizer.hits(origin, R_world_optical, (self.fx, self.fy, self.cx, self.cy),
                                               (p.width, p.height), directions, self._unit_rays_optical, normals=False,
                                               lod_pixels=self.lod_pixels)
        else:
            hits = self.caster.cast(origin, directions, normals=False, reference=True)
        R_previous, origin_previous = self.optical_pose(previous_position, previous_orientation)
        hit = np.isfinite(hits.distance)
        # Hit points relative to the previous camera; sky directions as points at infinity.
        relative = np.where(hit[:, None], origin - origin_previous + directions * np.where(hit, hits.distance, 0.0)[:, None],
                            directions.astype(np.float64))
        p_previous = relative @ R_previous  # = R_prev^T (p - o_prev)
        with np.errstate(divide="ignore", invalid="ignore"):
            u_previous = self.fx * p_previous[:, 0] / p_previous[:, 2] + self.cx
            v_previous = self.fy * p_previous[:, 1] / p_previous[:, 2] + self.cy
        behind = p_previous[:, 2] <= 0
        u, v = np.meshgrid(np.arange(self.params.width), np.arange(self.params.height))
        flow = np.stack([u.ravel() - u_previous, v.ravel() - v_previous], axis=1)
        flow[behind] = np.nan
        return flow.astype(np.float32).reshape(shape + (2,))

    def _world_rays(self, R_world_optical: np.ndarray) -> np.ndarray:
        """(H W, 3) float32 unit pixel rays in the world frame (a new array each call)."""
        rotation = np.ascontiguousarray(R_world_optical, np.float32)
        if not render_kernels.COMPILED:
            return self._unit_rays_optical @ rotation.T
        directions = np.empty_like(self._unit_rays_optical)
        raster_kernels.rotate_rays(self._unit_rays_optical, rotation, directions)
        return directions

    def _supersampled_color(self, position, orientation, reference: bool) -> np.ndarray:
        """Colour rendered at s x the resolution (same field of view) and averaged over s x s blocks."""
        s = self._antialiasing
        if self._supersampled is None:
            import dataclasses

            fine = dataclasses.replace(self.params, width=self.params.width * s, height=self.params.height * s)
            self._supersampled = CameraModel(fine, self.scene, supersample=False)
            self._supersampled._set_sun(self._sun, 1.0, 1.0)
            self._supersampled._ambient, self._supersampled._lit_share = self._ambient, self._lit_share
            self._supersampled._fog_density = self._fog_density
        self._supersampled.lod_pixels = self.lod_pixels
        fine = self._supersampled.render(position, orientation, depth=False, segmentation=False, reference=reference)
        blocks = fine.color.reshape(self.params.height, s, self.params.width, s, 3).astype(np.float32)
        return (blocks.mean(axis=(1, 3)) + 0.5).astype(np.uint8)

    def _sun_visibility(self, origin: np.ndarray, directions: np.ndarray, hits, reference: bool = False) -> np.ndarray:
        """(N,) uint8: 1 where the sun lights the hit point (no shadows asked: everywhere), 0 in shadow.

        Compiled: the pixels' shadow rays answered in the sun's view, against its casters binned once per sun
        direction (:func:`~aerial_sim.world.shadow_kernels.sun_visibility`); ``reference``: one Embree occlusion
        query per ray.
        """
        if not self.lighting.shadows or self._lit_share == 0 or self._sun[2] <= 0 or not self.caster.triangle_count:
            return np.ones(len(directions), np.uint8)
        if not reference and render_kernels.COMPILED:
            lit = np.empty(len(directions), np.uint8)  # the kernel fills every pixel
            shadow_kernels.sun_visibility(np.asarray(origin, np.float64), directions, hits.distance, hits.surface,
                                          hits.normal, hits.triangle, self._lift, self._sun,
                                          *shadow_kernels.shadow_arguments(self.caster.sun_view(self._sun)), lit)
            return lit
        lit = np.ones(len(directions), np.uint8)
        facing = (hits.surface != 0) & (hits.normal @ self._sun > 0)
        index = np.flatnonzero(facing)
        if len(index) == 0:
            return lit
        lit[index[self._shadow_rays_hit(origin, directions, hits, index)]] = 0
        return lit

    def _shadow_rays_hit(self, origin: np.ndarray, directions: np.ndarray, hits, index: np.ndarray) -> np.ndarray:
        """Whether a triangle hides the sun from each hit point ``index`` (Embree's occlusion query, one ray each)."""
        distance = hits.distance[index, None].astype(np.float64)
        points = origin + directions[index] * distance
        # Start a little off the surface (relative to the float32 precision of the hit) so it does not shadow itself.
        triangle = hits.triangle[index]
        lift = np.where(triangle >= 0, self._lift[np.maximum(triangle, 0)], 0.0)[:, None]
        points += hits.normal[index] * (2e-3 + 1e-4 * distance + lift)
        sun = np.broadcast_to(self._sun, (len(index), 3))
        return self.caster.occluded(points, sun)

    def _depth(self, distance: np.ndarray) -> np.ndarray:
        value = distance * self._planar_per_metre if self.params.depth_mode == "planar" else distance.copy()
        value[value > self.params.max_range_m] = np.inf
        value[value < self.params.min_range_m] = -np.inf
        return value

    def _color(self, origin: np.ndarray, directions: np.ndarray, hits) -> np.ndarray:
        rgb = np.empty((len(directions), 3), np.uint8)
        surfaces = self._surfaces
        lighting = self.lighting
        normal, ambient_scale, emission = hits.normal, render_kernels.NO_MAPS, render_kernels.NO_EMISSION
        if surfaces.maps is not None:  # glTF normal, occlusion and emissive maps (material_maps)
            normal, ambient_scale, emission = material_maps.shading_inputs(surfaces, origin, directions, hits)
        render_kernels.shade_surfaces(
            origin, directions, hits.distance, hits.surface, hits.triangle, normal,
            self._sun_visibility(origin, directions, hits), surfaces.uv_plane, surfaces.texture,
            surfaces.albedo, surfaces.texels, surfaces.texture_table, self._albedo_lut[1], self._sun, self._ambient,
            self._lit_share, float(self.scene.ground.checker_size_m), self._sky, self._sky_zenith,
            lighting.sky_zenith_color is not None, self._fog_density, self._fog, self._gain, self._pbr,
            self._pbr_texture, rgb, ambient_scale, emission, surfaces.uv_plane1, surfaces.uv_sets)
        return rgb

    def _color_reference(self, origin: np.ndarray, directions: np.ndarray, hits) -> np.ndarray:
        """NumPy version of :func:`~aerial_sim.world.render_kernels.shade_surfaces` (the reference)."""
        surfaces = self._surfaces
        lighting = self.lighting
        triangle = hits.triangle
        on_triangle = triangle >= 0
        albedo = np.tile(self._albedo_lut[1], (len(directions), 1))
        albedo[on_triangle] = surfaces.albedo[triangle[on_triangle]]
        textured = np.zeros(len(directions), bool)
        textured[on_triangle] = surfaces.texture[triangle[on_triangle]] >= 0
        if textured.any():
            albedo[textured] *= self._sample_textures(origin, directions[textured], hits.distance[textured],
                                                      triangle[textured], bit=UV1_BASE)
        ground = (hits.surface == SURFACE_GROUND) & ~textured
        if self.scene.ground.checker_size_m > 0 and ground.any():
            xy = origin[:2] + (directions[ground, :2] * hits.distance[ground, None]).astype(np.float64)
            cell = np.floor(xy / self.scene.ground.checker_size_m).astype(np.int64).sum(axis=1) & 1
            albedo[ground] *= np.where(cell == 1, 0.85, 1.0).astype(np.float32)[:, None]
        normal = hits.normal
        if surfaces.maps is not None:  # glTF normal, occlusion and emissive maps (material_maps)
            def sample(rows, textures, bit):
                return self._sample_textures(origin, directions[rows], hits.distance[rows], triangle[rows], textures,
                                             bit)

            normal, ambient_scale, emission = material_maps.apply_maps_reference(surfaces, sample, origin, directions,
                                                                                 hits)
        cosine = np.clip(normal @ self._sun, 0.0, 1.0)
        cosine[self._sun_visibility(origin, directions, hits, reference=True) == 0] = 0.0
        shade = self._ambient + self._lit_share * cosine
        rgb = albedo * shade[:, None]
        pbr = np.flatnonzero(on_triangle)
        pbr = pbr[self._pbr[triangle[pbr], 0] >= 0]
        if len(pbr):  # glTF metallic-roughness surfaces (render_kernels' docstring)
            factors = self._pbr[triangle[pbr]].copy()
            mapped = self._pbr_texture[triangle[pbr]] >= 0
            if mapped.any():  # metallicRoughnessTexture: blue x metallic, green x roughness
                rows = pbr[mapped]
                sample = self._sample_textures(origin, directions[rows], hits.distance[rows], triangle[rows],
                                               self._pbr_texture[triangle[rows]], UV1_PBR)
                factors[mapped, 0] *= sample[:, 2]
                factors[mapped, 1] *= sample[:, 1]
            rgb[pbr] = self._pbr_color(albedo[pbr], normal[pbr], -directions[pbr], cosine[pbr], factors)
        if surfaces.maps is not None:  # occluded ambient light, and emission
            rgb += self._ambient * albedo * (ambient_scale - 1.0)[:, None] + emission
        if self._gain != 1:
            rgb *= self._gain
        if self._fog_density > 0:
            fog = (1.0 - np.exp(-float(self._fog_density) * hits.distance.astype(np.float64))).astype(np.float32)
            rgb += (self._fog - rgb) * fog[:, None]
        sky = hits.surface == 0
        up = np.clip(directions[sky, 2], 0.0, None) if lighting.sky_zenith_color is not None else np.zeros(sky.sum())
        rgb[sky] = self._sky + (self._sky_zenith - self._sky) * up[:, None].astype(np.float32)
        return np.minimum(rgb + 0.5, 255.0).astype(np.uint8)

    @property
    def _pbr(self) -> np.ndarray:
        pbr = self._surfaces.pbr
        return pbr if pbr is not None else np.full((self._surfaces.count, 2), -1.0, np.float32)

    @property
    def _pbr_texture(self) -> np.ndarray:
        index = self._surfaces.pbr_texture
        return index if index is not None else np.full(self._surfaces.count, -1, np.int32)

    def _pbr_color(self, albedo, normal, view, cosine, pbr) -> np.ndarray:
        """NumPy version of the glTF BRDF of :func:`~aerial_sim.world.render_kernels.shade_surfaces` (float32)."""
        one = np.float32(1.0)
        metallic, r = pbr[:, 0:1], np.maximum(pbr[:, 1], np.float32(0.03))
        half = self._sun + view
        half /= np.linalg.norm(half, axis=1, keepdims=True).astype(np.float32)
        nh = np.maximum((normal * half).sum(axis=1), 0.0).astype(np.float32)
        vh = np.maximum((view * half).sum(axis=1), 0.0).astype(np.float32)
        nv = np.maximum((normal * view).sum(axis=1), np.float32(1e-4)).astype(np.float32)
        a2 = (r * r) * (r * r)
        den = nh * nh * (a2 - one) + one
        k = (r + one) * (r + one) / np.float32(8.0)
        nl = np.maximum(cosine, np.float32(1e-30))
        g = nl / (nl * (one - k) + k) * (nv / (nv * (one - k) + k))
        d_g = np.where(cosine > 0, a2 / (den * den) * g / (np.float32(4.0) * nl * nv), 0.0).astype(np.float32)
        w = np.where(cosine > 0, (one - vh) ** 5, 0.0).astype(np.float32)
        f0 = np.float32(0.04) * (one - metallic) + albedo * np.float32(1.0 / 255.0) * metallic
        fresnel = f0 + (one - f0) * w[:, None]
        direct = (one - fresnel) * (one - metallic) * albedo + d_g[:, None] * fresnel * np.float32(255.0)
        return (self._ambient * albedo + self._lit_share * cosine[:, None] * direct).astype(np.float32)

    def _sample_textures(self, origin, directions, distance, triangle, texture=None, bit: int = UV1_BASE) -> np.ndarray:
        """Bilinear texture samples / 255 (M, 3) at the hits on textured triangles (as the kernel samples), of their
        base-colour texture or of ``texture`` (M,) (indices into the texture table); at TEXCOORD_1 where the
        triangle's ``uv_sets`` has ``bit``."""
        surfaces = self._surfaces
        texture = surfaces.texture[triangle] if texture is None else texture
        points = origin + directions * distance[:, None].astype(np.float64)
        corners = surfaces.triangles[triangle]
        e1, e2, q = corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0], points - corners[:, 0]
        d00, d01, d11 = (e1 * e1).sum(1), (e1 * e2).sum(1), (e2 * e2).sum(1)
        d20, d21 = (q * e1).sum(1), (q * e2).sum(1)
        den = d00 * d11 - d01 * d01
        b1, b2 = (d11 * d20 - d01 * d21) / den, (d00 * d21 - d01 * d20) / den
        weights = np.stack([1.0 - b1 - b2, b1, b2], axis=1)
        corner_uv = surfaces.uv[triangle]
        if surfaces.uv_sets is not None:
            second = (surfaces.uv_sets[triangle] & bit) != 0
            corner_uv = np.where(second[:, None, None], surfaces.uv1[triangle], corner_uv)
        uv = np.einsum("nk,nkc->nc", weights, corner_uv.astype(np.float64))
        out = np.empty((len(triangle), 3), np.float32)
        for k in np.unique(texture):
            rows = texture == k
            offset, width, height = surfaces.texture_table[k]
            image = surfaces.texels[offset:offset + width * height * 3].reshape(height, width, 3).astype(np.float32)
            x = (uv[rows, 0] - np.floor(uv[rows, 0])) * width - 0.5
            y = (1.0 - (uv[rows, 1] - np.floor(uv[rows, 1]))) * height - 0.5
            x0, y0 = np.floor(x), np.floor(y)
            fx, fy = (x - x0).astype(np.float32)[:, None], (y - y0).astype(np.float32)[:, None]
            xa, ya = x0.astype(np.int64) % width, y0.astype(np.int64) % height
            xb, yb = (xa + 1) % width, (ya + 1) % height
            top = image[ya, xa] + (image[ya, xb] - image[ya, xa]) * fx
            bottom = image[yb, xa] + (image[yb, xb] - image[yb, xa]) * fx
            out[rows] = (top + (bottom - top) * fy) * np.float32(1.0 / 255.0)
        return out

    def set_surface_segmentation_id(self, surface: int, segmentation_id: int) -> None:
        """Render surface ``surface`` (1 ground, 2 + k object k) with ``segmentation_id`` from now on."""
        self._segmentation_lut[surface] = segmentation_id

    def _build_lookup_tables(self) -> None:
        """Surface index (0 none, 1 ground, 2 + k object k) -> segmentation id and albedo."""
        scene = self.scene
        self._segmentation_lut = np.asarray(scene.surface_table(lambda s: s.segmentation_id, NO_HIT_ID), np.uint16)
        # Instance ids: the surface index, but ground cover (roads, lawns) is part of the ground's instance (1).
        self._instance_lut = np.arange(len(self._segmentation_lut), dtype=np.uint16)
        self._instance_lut[2:][[obj.ground_cover for obj in scene.objects]] = SURFACE_GROUND
        self._albedo_lut = np.asarray(scene.surface_table(scene.object_color, self.params.sky_color), np.float32)
        self._sky = np.asarray(self.params.sky_color, np.float32)
        zenith = self.lighting.sky_zenith_color
        self._sky_zenith = np.asarray(zenith if zenith is not None else self.params.sky_color, np.float32)
        self._fog = np.asarray(self.lighting.fog_color, np.float32)
