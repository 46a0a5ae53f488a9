"""Scene geometry: world-frame triangle meshes of scene objects and a ray caster over them.

Rays are cast with Intel Embree 4 (through ``embreex``) against all object
triangles at once; the ground is the analytic plane z = 0, intersected in
closed form (exact at any distance, no tessellation). One cast per pixel gives
everything the camera needs: hit distance (depth), which surface was hit
(segmentation id, colour) and the surface normal (Lambert shading). This
replaces the Unreal render passes AirSim uses for its depth, segmentation and
scene images (seed 000, sec. 3).

Meshes are built and loaded (OBJ/STL) with ``trimesh``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np
import trimesh
from embreex import rtcore_scene
from embreex.mesh_construction import TriangleMesh

from aerial_sim.config import ParamsError
from aerial_sim.world import raster_kernels, render_kernels

if TYPE_CHECKING:
    from aerial_sim.world.scene import Scene, SceneObject

#: Surface index of a ray that hit nothing; 1 is the ground, 2 + k is scene object k.
SURFACE_NONE = 0
SURFACE_GROUND = 1
CYLINDER_SECTIONS = 48


def quaternion_to_matrix(q: Sequence[float]) -> np.ndarray:
    """Rotation matrix of a (w, x, y, z) quaternion (normalised here), body->world."""
    w, x, y, z = (float(v) for v in q)
    n = math.sqrt(w * w + x * x + y * y + z * z)
    if not n > 0:
        raise ValueError(f"quaternion {tuple(q)} has zero norm")
    w, x, y, z = w / n, x / n, y / n, z / n
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def rpy_to_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """R = Rz(yaw) Ry(pitch) Rx(roll) (REP-103 fixed-axis roll, pitch, yaw), radians."""
    cr, sr, cp, sp, cy, sy = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch), math.cos(yaw), math.sin(yaw)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def object_transform(obj: SceneObject) -> np.ndarray:
    """4x4 homogeneous transform object->world (ENU)."""
    transform = np.eye(4)
    transform[:3, :3] = quaternion_to_matrix(obj.quaternion)
    transform[:3, 3] = obj.position
    return transform


def object_mesh(obj: SceneObject, scene: Scene) -> trimesh.Trimesh:
    """The object's triangle mesh in the world frame."""
    if obj.shape == "box":
        mesh = trimesh.creation.box(extents=obj.size)
    elif obj.shape == "cylinder":
        mesh = trimesh.creation.cylinder(radius=obj.radius, height=obj.height, sections=CYLINDER_SECTIONS)
    elif obj.shape == "sphere":
        mesh = trimesh.creation.icosphere(subdivisions=3, radius=obj.radius)
    else:
        mesh = load_mesh_file(scene.mesh_path(obj), f"{scene.name}: object '{obj.name}'.file")
        mesh.apply_scale(obj.scale)
    mesh.apply_transform(object_transform(obj))
    return mesh


def load_mesh_file(path, where: str) -> trimesh.Trimesh:
    """Load an OBJ/STL (anything trimesh reads) as one triangle mesh; ParamsError if unreadable."""
    try:
        loaded = trimesh.load(str(path), force="mesh", process=False)
    except Exception as error:  # trimesh raises many types for unreadable files
        raise ParamsError(f"{where}: cannot read mesh {path}: {error}") from error
    if not isinstance(loaded, trimesh.Trimesh) or len(loaded.faces) == 0:
        raise ParamsError(f"{where}: {path} holds no triangles")
    return loaded


@dataclass(frozen=True)
class RayHits:
    """Result of casting N rays: per ray distance, surface index and unit world normal."""

    distance: np.ndarray  # (N,) float32, metres along the unit ray direction; +inf where nothing was hit
    surface: np.ndarray  # (N,) int32: SURFACE_NONE, SURFACE_GROUND or 2 + object index
    normal: np.ndarray  # (N, 3) float32 unit world normals facing the ray origin; zero where nothing was hit
    #                     ((0, 3) when the cast was asked for no normals)


class RayCaster:
    """First-hit ray queries against a scene's objects (Embree) and ground plane (analytic)."""

    def __init__(self, scene: Scene):
        self.scene = scene
        meshes = [object_mesh(obj, scene) for obj in scene.objects]
        self.meshes = meshes
        self._embree = None
        self._surface_of_triangle = np.empty(0, np.int32)
        render_kernels.warm_up()
        if meshes:
            triangles = np.concatenate([m.triangles for m in meshes]).astype(np.float32)
            self._embree = rtcore_scene.EmbreeScene()
            TriangleMesh(self._embree, triangles)
            counts = [len(m.faces) for m in meshes]
            # Embree reports a primitive (triangle) id; map it to 2 + object index.
            self._surface_of_triangle = np.repeat(np.arange(len(meshes), dtype=np.int32) + 2, counts)
        self._rasterizer: PinholeRasterizer | None = None

    @property
    def triangle_count(self) -> int:
        return sum(len(m.faces) for m in self.meshes)

    @property
    def rasterizer(self) -> PinholeRasterizer:
        """A :class:`PinholeRasterizer` over the same triangles (built once, on first use)."""
        if self._rasterizer is None:
            self._rasterizer = PinholeRasterizer(self.meshes, self._surface_of_triangle)
        return self._rasterizer

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
        normal = np.zeros((count, 3) if normals else (0, 3), np.float32)
        render_kernels.merge_hits(origins, directions, tfar, prim, ng, self._surface_of_triangle,
                                  distance, surface, normal)
        return RayHits(distance, surface, normal)

    def _merge_reference(self, origins, directions, tfar, prim, ng, normals: bool) -> RayHits:
        """NumPy version of :func:`~aerial_sim.world.render_kernels.merge_hits` (the reference)."""
        count = len(directions)
        distance = np.full(count, np.inf, np.float32)
        surface = np.zeros(count, np.int32)
        normal = np.zeros((count, 3) if normals else (0, 3), np.float32)

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
            if not normals:
                return RayHits(distance, surface, normal)
            ng = ng[closer]
            ng /= np.linalg.norm(ng, axis=1, keepdims=True)
            facing = np.einsum("ij,ij->i", ng, directions[closer]) > 0
            ng[facing] *= -1.0
            normal[closer] = ng
        return RayHits(distance, surface, normal)


class PinholeRasterizer:
    """First hits of a pinhole camera's pixel rays, found by rasterising the scene's triangles.

    Gives what :meth:`RayCaster.cast` gives for rays that share the camera's origin and pass
    through its pixel centres, at a fraction of the cost (the kernels and their method:
    :mod:`aerial_sim.world.raster_kernels`). Surfaces nearer than :attr:`NEAR_PLANE_M` to the
    camera centre are not seen (the ray caster would report them as too near anyway).
    """

    NEAR_PLANE_M = 1e-3

    def __init__(self, meshes: Sequence[trimesh.Trimesh], surface_of_triangle: np.ndarray):
        if meshes:
            self.triangles = np.concatenate([m.triangles for m in meshes]).astype(np.float64)
        else:
            self.triangles = np.empty((0, 3, 3))
        normals = np.cross(self.triangles[:, 1] - self.triangles[:, 0], self.triangles[:, 2] - self.triangles[:, 0])
        lengths = np.linalg.norm(normals, axis=1)
        visible = lengths > 0  # a degenerate triangle covers no pixel and has no plane
        self.triangles = np.ascontiguousarray(self.triangles[visible])
        self.surface_of_triangle = np.ascontiguousarray(np.asarray(surface_of_triangle, np.int32)[visible])
        self.world_normals = normals[visible] / lengths[visible, None]
        self.world_normals32 = self.world_normals.astype(np.float32)
        raster_kernels.warm_up()

    def hits(self, origin: np.ndarray, R_world_optical: np.ndarray, intrinsics: tuple[float, float, float, float],
             size: tuple[int, int], directions: np.ndarray, rays_optical: np.ndarray, normals: bool = True) -> RayHits:
        """Hits of the rays through every pixel centre (row-major), as :meth:`RayCaster.cast` reports them.

        ``origin`` camera centre (world), ``R_world_optical`` its optical frame, ``intrinsics``
        (f_x, f_y, c_x, c_y), ``size`` (width, height); ``directions`` and ``rays_optical`` (W H, 3)
        float32: the unit pixel rays in the world and in the optical frame.
        """
        width, height = size
        origin32 = np.asarray(origin, np.float32)  # the ray caster's float32 ray origin
        count = len(self.triangles)
        vertices, plane_normals, plane_offsets = np.empty((count, 3, 3)), np.empty((count, 3)), np.empty(count)
        raster_kernels.to_optical(self.triangles, self.world_normals, origin32.astype(np.float64),
                                  np.ascontiguousarray(R_world_optical, np.float64), vertices, plane_normals,
                                  plane_offsets)
        inverse_depth = np.zeros(width * height)
        triangle_of_pixel = np.full(width * height, -1, np.int32)
        fx, fy, cx, cy = intrinsics
        raster_kernels.rasterize(vertices, width, height, fx, fy, cx, cy, self.NEAR_PLANE_M,
                                 inverse_depth, triangle_of_pixel)
        pixels = width * height
        distance = np.empty(pixels, np.float32)
        surface = np.empty(pixels, np.int32)
        normal = np.zeros((pixels, 3) if normals else (0, 3), np.float32)
        raster_kernels.resolve_hits(origin32, directions, rays_optical, triangle_of_pixel, plane_normals,
                                    plane_offsets, self.world_normals32, self.surface_of_triangle,
                                    distance, surface, normal)
        return RayHits(distance, surface, normal)
