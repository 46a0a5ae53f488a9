"""First-hit ray queries against a scene: Intel Embree 4 (through ``embreex``) over all its triangles at once, the
ground plane z = 0 (without a terrain) intersected in closed form (exact at any distance, no tessellation).

One cast per ray gives everything a sensor needs: hit distance (depth, lidar range), which surface was hit
(segmentation id, colour, material) and the surface normal (shading). This replaces the Unreal render passes
AirSim uses for its depth, segmentation and scene images (seed 000, sec. 3). The camera rasterises its pixel rays
instead (:mod:`aerial_sim.world.pinhole_rasterizer`) and answers shadow rays in the sun's view
(:mod:`aerial_sim.world.shadow_kernels`); the caster hands out both, built once per scene.
"""

from __future__ import annotations

import math
import threading
from functools import cached_property

import numpy as np
from embreex import rtcore_scene
from embreex.mesh_construction import TriangleMesh

from aerial_sim.world import render_kernels
from aerial_sim.world.closed_surfaces import closed_rows
from aerial_sim.world.pinhole_rasterizer import PinholeRasterizer
from aerial_sim.world.ray_hits import RayHits
from aerial_sim.world.scene import Scene
from aerial_sim.world.shadow_kernels import SunView, sun_view
from aerial_sim.world.surface_tables import SURFACE_GROUND, render_surfaces, scene_surfaces


def ray_caster_of(scene: Scene) -> RayCaster:
    """The scene's :class:`RayCaster`, built on first use and shared by every sensor of the process."""
    caster = scene.cache.get("ray_caster")
    if caster is None:
        caster = scene.cache["ray_caster"] = RayCaster(scene)
    return caster


class RayCaster:
    """First-hit ray queries against a scene's triangles (Embree) and, without a terrain, the ground plane (analytic)."""

    #: Sun views (:meth:`sun_view`) kept at once (each holds its casters' grid: about 50 MB for the city).
    SUN_VIEWS_KEPT = 2

    def __init__(self, scene: Scene):
        self.scene = scene
        self.surfaces = scene_surfaces(scene)
        #: Whether the ground is the analytic plane z = 0 (no terrain).
        self.ground_plane = scene.terrain is None
        self._embree_scene = None
        self._embree_lock = threading.Lock()
        self._surface_of_triangle = self.surfaces.surface
        render_kernels.warm_up()
        self._rasterizer: PinholeRasterizer | None = None
        self._sun_views: dict[tuple[float, float, float], SunView] = {}
        self._sun_view_lock = threading.Lock()

    @property
    def _embree(self):
        """Embree's scene of the triangles (None without triangles), built on the first ray query: a camera
        alone never needs it (it rasterises, and answers its shadow rays in the sun's view), and for a
        1 M-triangle world the build takes seconds."""
        if self._embree_scene is None and self.surfaces.count:
            with self._embree_lock:
                if self._embree_scene is None:
                    embree = rtcore_scene.EmbreeScene()
                    TriangleMesh(embree, self.surfaces.triangles.astype(np.float32))
                    self._embree_scene = embree
        return self._embree_scene

    @property
    def triangle_count(self) -> int:
        return self.surfaces.count

    @property
    def bounds(self) -> np.ndarray | None:
        """((xmin, ymin, zmin), (xmax, ymax, zmax)) of every triangle, None for an empty scene."""
        if not self.surfaces.count:
            return None
        corners = self.surfaces.triangles.reshape(-1, 3)
        return np.array([corners.min(axis=0), corners.max(axis=0)])

    def sun_view(self, sun: np.ndarray) -> SunView:
        """The triangles that may cast shadows under the unit direction ``sun``, in its view, binned in a grid
        there (:func:`~aerial_sim.world.shadow_kernels.sun_view`), built once for each new sun direction.

        A terrain (with the ground cover draped on it) whose steepest triangle is less steep than the sun is
        high (slope |n_xy| / n_z below s_z / |s_xy|) is left out: a ray toward the sun from a point on or above
        a height field rises faster than the ground under it can, so it never meets the terrain (as the ground
        plane never shadows).
        A mesh drawn by level of detail casts its shadows with its first simplified level (a quarter of its
        triangles; :mod:`aerial_sim.world.lod`).
        """
        key = tuple(float(c) for c in np.asarray(sun, np.float32))
        view = self._sun_views.get(key)
        if view is None:
            with self._sun_view_lock:
                view = self._sun_views.get(key)
                if view is None:
                    surfaces, lod = render_surfaces(self.scene)
                    casts = np.ones(surfaces.count, bool) if lod is None else (lod.group < 0) | (lod.level == 1)
                    ground = self._ground_like  # the rows of scene_surfaces, which render_surfaces' begin with
                    if ground.any() and self._terrain_slope < _slope(np.asarray(key)) * (1.0 - 1e-6):
                        casts[:len(ground)] &= ~ground
                    view = sun_view(surfaces.triangles[casts], np.asarray(key, np.float32))
                    # A few suns kept (cameras of one process may be set to different times of day).
                    views = dict(list(self._sun_views.items())[-(self.SUN_VIEWS_KEPT - 1):])
                    views[key] = view
                    self._sun_views = views
        return view

    @cached_property
    def _ground_like(self) -> np.ndarray:
        """(T,) bool: the terrain's triangles and those of ground cover draped on the ground (OSM roads, land
        use: :mod:`aerial_sim.world.osm`), which together form one height field."""
        cover = [2 + k for k, obj in enumerate(self.scene.objects) if obj.ground_cover]
        return np.isin(self.surfaces.surface, [SURFACE_GROUND] + cover) if cover or not self.ground_plane else \
            np.zeros(self.surfaces.count, bool)

    @cached_property
    def _terrain_slope(self) -> float:
        """The steepest slope (rise over run) of the terrain's triangles; 0 without a terrain. Ground cover draped
        on it (corners on the terrain + the lift, edges short enough that it departs from there by less than half
        the lift: :mod:`aerial_sim.world.osm`) follows it: a ray rising faster than the terrain from a point on or
        above the cover could meet it only within lift / (sun slope - terrain slope) of its start."""
        terrain = self.surfaces.triangles[self.surfaces.surface == SURFACE_GROUND]
        if not len(terrain):
            return 0.0
        normals = np.cross(terrain[:, 1] - terrain[:, 0], terrain[:, 2] - terrain[:, 0])
        with np.errstate(divide="ignore", invalid="ignore"):
            slopes = np.hypot(normals[:, 0], normals[:, 1]) / np.abs(normals[:, 2])
        slopes = slopes[np.linalg.norm(normals, axis=1) > 0]  # a degenerate triangle has no slope
        return float(slopes.max()) if len(slopes) else 0.0

    @property
    def rasterizer(self) -> PinholeRasterizer:
        """A :class:`~aerial_sim.world.pinhole_rasterizer.PinholeRasterizer` over the same triangles and the simplified levels of the scene's large
        meshes (:func:`~aerial_sim.world.surface_tables.render_surfaces`; built once, on first use)."""
        if self._rasterizer is None:
            from aerial_sim.world.scene_cache import cached_rasterizer

            surfaces, lod = render_surfaces(self.scene)
            self._rasterizer = cached_rasterizer(self.scene, lambda: PinholeRasterizer(
                surfaces.triangles, surfaces.surface, self.ground_plane, lod, closed_rows(self.scene)))
        return self._rasterizer

    def occluded(self, origins: np.ndarray, directions: np.ndarray, max_distance: float = np.inf) -> np.ndarray:
        """(N,) bool: whether a triangle lies along each ray within ``max_distance`` (Embree's occlusion query).

        The ground plane is not tested: shadow rays toward a sun above the horizon cannot meet it from above.
        """
        count = len(directions)
        if self._embree is None or count == 0:
            return np.zeros(count, bool)
        origins = np.ascontiguousarray(origins, np.float32)
        directions = np.ascontiguousarray(directions, np.float32)
        dists = None if not np.isfinite(max_distance) else np.full(count, max_distance, np.float32)
        return self._embree.run(origins, directions, dists=dists, query="OCCLUDED") >= 0

    def cast(self, origins: np.ndarray, directions: np.ndarray, normals: bool = True,
             reference: bool = False) -> RayHits:
        """Cast rays (``origins`` (N,3) or (3,), unit ``directions`` (N,3), world frame).

        ``normals=False`` skips the normals (left zero), which only shading needs.
        The hits are merged by the compiled :func:`~aerial_sim.world.render_kernels.merge_hits`;
        ``reference=True`` (or no numba) merges them with the NumPy code it is tested against.
        """
        directions = np.ascontiguousarray(directions, dtype=np.float32)
        count = len(directions)
        origins = np.ascontiguousarray(np.broadcast_to(np.asarray(origins, np.float32), (count, 3)))
        if self._embree is not None:
            result = self._embree.run(origins, directions, output=1)
            tfar, prim, ng = result["tfar"], result["primID"], result["Ng"]
        else:
            tfar, prim, ng = np.empty(0, np.float32), np.empty(0, np.int32), np.empty((0, 3), np.float32)
        if reference or not render_kernels.COMPILED:
            return self._merge_reference(origins, directions, tfar, prim, ng, normals)
        distance = np.empty(count, np.float32)
        surface = np.empty(count, np.int32)
        triangle = np.empty(count, np.int32)
        normal = np.zeros((count, 3) if normals else (0, 3), np.float32)
        render_kernels.merge_hits(origins, directions, tfar, prim, ng, self._surface_of_triangle, self.ground_plane,
                                  distance, surface, normal, triangle)
        return RayHits(distance, surface, normal, triangle)

    def _merge_reference(self, origins, directions, tfar, prim, ng, normals: bool) -> RayHits:
        """NumPy version of :func:`~aerial_sim.world.render_kernels.merge_hits` (the reference)."""
        count = len(directions)
        distance = np.full(count, np.inf, np.float32)
        surface = np.zeros(count, np.int32)
        triangle = np.full(count, -1, np.int32)
        normal = np.zeros((count, 3) if normals else (0, 3), np.float32)

        if self.ground_plane:
            # Ground plane z = 0, seen from either side.
            with np.errstate(divide="ignore", invalid="ignore"):
                t_ground = -origins[:, 2] / directions[:, 2]
            ground = np.isfinite(t_ground) & (t_ground > 0)
            distance[ground] = t_ground[ground]
            surface[ground] = SURFACE_GROUND
            if normals:
                normal[ground, 2] = np.where(origins[ground, 2] >= 0, 1.0, -1.0)

        if len(prim):
            hit = prim >= 0
            closer = hit & (tfar < distance)
            distance[closer] = tfar[closer]
            surface[closer] = self._surface_of_triangle[prim[closer]]
            triangle[closer] = prim[closer]
            if not normals:
                return RayHits(distance, surface, normal, triangle)
            ng = ng[closer]
            ng /= np.linalg.norm(ng, axis=1, keepdims=True)
            facing = np.einsum("ij,ij->i", ng, directions[closer]) > 0
            ng[facing] *= -1.0
            normal[closer] = ng
        return RayHits(distance, surface, normal, triangle)


def _slope(direction: np.ndarray) -> float:
    """Rise over run of a direction (inf straight up)."""
    run = math.hypot(float(direction[0]), float(direction[1]))
    return float(direction[2]) / run if run > 0 else math.inf
