"""First hits of a pinhole camera's pixel rays by rasterising the scene's triangles (the compiled kernels of
:mod:`aerial_sim.world.raster_kernels`), culled by a hierarchy over them and, for large meshes, by level of detail."""

from __future__ import annotations

import threading

import numpy as np

from aerial_sim.world import raster_kernels
from aerial_sim.world.ray_hits import RayHits
from aerial_sim.world.shadow_kernels import LEAF_SIZE, build_bvh
from aerial_sim.world.surface_tables import LodGroups


class PinholeRasterizer:
    """First hits of a pinhole camera's pixel rays, found by rasterising the scene's triangles.

    Gives what :meth:`~aerial_sim.world.ray_caster.RayCaster.cast` gives for rays that share the camera's origin and pass
    through its pixel centres, at a fraction of the cost (the kernels and their method:
    :mod:`aerial_sim.world.raster_kernels`). Surfaces nearer than :attr:`NEAR_PLANE_M` to the
    camera centre are not seen (the ray caster would report them as too near anyway).
    """

    NEAR_PLANE_M = 1e-3

    def __init__(self, triangles: np.ndarray, surface_of_triangle: np.ndarray, ground_plane: bool = True,
                 lod: LodGroups | None = None, closed: np.ndarray | None = None):
        self.triangles = np.asarray(triangles, np.float64).reshape(-1, 3, 3)
        surface_of_triangle = np.asarray(surface_of_triangle, np.int32)
        # Each surface's box (a camera outside it is outside the surface's object).
        surfaces = int(surface_of_triangle.max()) + 1 if len(surface_of_triangle) else 1
        corners = self.triangles.reshape(-1, 3)  # (empty: no boxes)
        self._surface_lower = np.full((surfaces, 3), np.inf)
        self._surface_upper = np.full((surfaces, 3), -np.inf)
        if len(corners):
            by_surface = np.argsort(surface_of_triangle, kind="stable")
            ordered = surface_of_triangle[by_surface]
            starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
            boxes = self.triangles[by_surface]
            self._surface_lower[ordered[starts]] = np.minimum.reduceat(boxes.min(axis=1), starts)
            self._surface_upper[ordered[starts]] = np.maximum.reduceat(boxes.max(axis=1), starts)
        self.ground_plane = bool(ground_plane)
        normals = np.cross(self.triangles[:, 1] - self.triangles[:, 0], self.triangles[:, 2] - self.triangles[:, 0])
        lengths = np.linalg.norm(normals, axis=1)
        visible = lengths > 0  # a degenerate triangle covers no pixel and has no plane
        group = lod.group if lod is not None else np.full(len(self.triangles), -1, np.int32)
        kept = np.flatnonzero(visible & (group < 0))
        #: A hierarchy over the triangles always drawn, which are stored first, in its leaf order: each frame
        #: draws only the leaves whose boxes meet the view frustum.
        self.tree = build_bvh(self.triangles[kept])
        pieces = [kept[self.tree.order]]
        self._levels = None
        if lod is not None:
            pieces += self._level_trees(np.flatnonzero(visible & (group >= 0)), lod, len(kept))
        kept = np.concatenate(pieces)
        self.triangles = np.ascontiguousarray(self.triangles[kept])
        #: Index of each kept triangle among the ones given (hits report that index).
        self.index = np.ascontiguousarray(kept.astype(np.int32))
        self.surface_of_triangle = np.ascontiguousarray(surface_of_triangle[kept])
        #: Whether each kept triangle is part of a closed, outward-wound surface (:func:`~aerial_sim.world.closed_surfaces.closed_outward`): drawn
        #: only while it faces the camera, unless the camera is inside its object's box.
        self.closed = np.ascontiguousarray((np.zeros(len(kept), bool) if closed is None else
                                            np.asarray(closed, bool)[kept]).astype(np.uint8))
        self.world_normals = np.ascontiguousarray(normals[kept] / lengths[kept, None])
        self.world_normals32 = self.world_normals.astype(np.float32)
        self._static_count = len(pieces[0])
        self._local = threading.local()
        raster_kernels.warm_up()

    #: What :meth:`state` holds: every array the frames read (the normals' float32 copy is made again).
    STATE = ("triangles", "index", "surface_of_triangle", "closed", "world_normals", "_surface_lower", "_surface_upper")

    def state(self) -> dict:
        """Everything a frame reads, as arrays and numbers (the scene cache's ``.raster`` file,
        :func:`aerial_sim.world.scene_cache.cached_rasterizer`); :meth:`from_state` makes the same rasteriser."""
        return {**{name: getattr(self, name) for name in self.STATE}, "ground_plane": self.ground_plane,
                "static_count": self._static_count, "levels": None if self._levels is None else list(self._levels),
                "tree": [self.tree.order, self.tree.lower, self.tree.upper, int(self.tree.first_leaf)]}

    @classmethod
    def from_state(cls, state: dict) -> "PinholeRasterizer":
        """The rasteriser :meth:`state` was taken of; ValueError when ``state`` is not one."""
        from aerial_sim.world.shadow_kernels import TriangleBVH

        rasterizer = cls.__new__(cls)
        for name in cls.STATE:
            setattr(rasterizer, name, state[name])
        rows = len(rasterizer.triangles)
        if rasterizer.triangles.shape != (rows, 3, 3) or \
                any(len(getattr(rasterizer, name)) != rows for name in ("index", "surface_of_triangle", "closed",
                                                                        "world_normals")):
            raise ValueError("the rasteriser's rows do not match")
        rasterizer.ground_plane = bool(state["ground_plane"])
        rasterizer._static_count = int(state["static_count"])
        rasterizer._levels = None if state["levels"] is None else tuple(state["levels"])
        order, lower, upper, first_leaf = state["tree"]
        rasterizer.tree = TriangleBVH(order, lower, upper, int(first_leaf))
        rasterizer.world_normals32 = rasterizer.world_normals.astype(np.float32)
        rasterizer._local = threading.local()
        raster_kernels.warm_up()
        return rasterizer

    def _level_trees(self, rows: np.ndarray, lod: LodGroups, start: int) -> list[np.ndarray]:
        """A hierarchy over each level of each group, stored after the ``start`` triangles always drawn;
        returns the rows of each level in its leaf order."""
        order = np.lexsort((rows, lod.level[rows], lod.group[rows]))
        rows = rows[order]
        keys = lod.group[rows].astype(np.int64) * (1 << 20) + lod.level[rows]
        cuts = np.flatnonzero(np.diff(keys)) + 1
        pieces, groups = [], []
        size, node, first_leaf, first, count, lower, upper = [], [], [], [], [], [], []
        nodes = 0
        for segment in np.split(rows, cuts):
            tree = build_bvh(self.triangles[segment])
            pieces.append(segment[tree.order])
            size.append(float(lod.lift[segment[0]]) if lod.level[segment[0]] > 0 else 0.0)  # s_l; never read at l = 0
            node.append(nodes)
            first_leaf.append(tree.first_leaf)
            first.append(start)
            count.append(len(segment))
            lower.append(tree.lower)
            upper.append(tree.upper)
            nodes += len(tree.lower)
            start += len(segment)
            groups.append(lod.group[segment[0]])
        group_levels = np.concatenate([[0], np.flatnonzero(np.diff(groups)) + 1, [len(groups)]])
        as64 = lambda values: np.asarray(values, np.int64)  # noqa: E731
        #: Per level-of-detail group, its levels (group_levels[g] .. group_levels[g + 1] - 1), each level's
        #: triangle size, tree (heap row, first leaf) and triangles (first, count): raster_kernels.lod_triangles.
        self._levels = (as64(group_levels), np.asarray(size), as64(node), as64(first_leaf), as64(first), as64(count),
                        np.ascontiguousarray(np.concatenate(lower)), np.ascontiguousarray(np.concatenate(upper)))
        return pieces

    @property
    def lod_groups(self) -> int:
        """How many objects are drawn by level of detail."""
        return 0 if self._levels is None else len(self._levels[0]) - 1

    def _buffers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """This thread's per-frame work arrays (kept between frames: for a large world, allocating them
        each frame cost more than transforming the triangles into them)."""
        buffers = getattr(self._local, "buffers", None)
        if buffers is None:
            count = len(self.triangles)
            buffers = self._local.buffers = (np.empty((count, 3, 3)), np.empty((count, 3)), np.empty(count),
                                             np.empty(count, np.int32))
        return buffers

    @staticmethod
    def _frustum_planes(rotation: np.ndarray, intrinsics: tuple[float, float, float, float],
                        size: tuple[int, int]) -> np.ndarray:
        """World normals n of the view frustum's planes, n . (p - o) >= 0 inside: the four side planes a pixel
        beyond the image (as :func:`~aerial_sim.world.raster_kernels.rasterize` rejects triangles) and z = 0."""
        fx, fy, cx, cy = intrinsics
        width, height = size
        left, right = (-1.0 - cx) / fx, (width - cx) / fx
        top, bottom = (-1.0 - cy) / fy, (height - cy) / fy
        optical = np.array([[1.0, 0.0, -left], [-1.0, 0.0, right], [0.0, 1.0, -top], [0.0, -1.0, bottom],
                            [0.0, 0.0, 1.0]])
        return np.ascontiguousarray(optical @ rotation.T)

    def _frame_buffers(self, pixels: int) -> tuple[np.ndarray, ...]:
        """This thread's per-pixel arrays for frames of ``pixels`` pixels, kept between frames (fresh arrays of
        a 640x480 frame's 10 MB cost a few ms of page faults each frame)."""
        frames = getattr(self._local, "frames", None)
        if frames is None:
            frames = self._local.frames = {}
        buffers = frames.get(pixels)
        if buffers is None:
            buffers = frames[pixels] = (np.empty(pixels), np.empty(pixels, np.int32), np.empty(pixels, np.float32),
                                        np.empty(pixels, np.int32), np.empty((pixels, 3), np.float32),
                                        np.empty(pixels, np.int32))
        return buffers

    def hits(self, origin: np.ndarray, R_world_optical: np.ndarray, intrinsics: tuple[float, float, float, float],
             size: tuple[int, int], directions: np.ndarray, rays_optical: np.ndarray, normals: bool = True,
             lod_pixels: float = 0.0) -> RayHits:
        """Hits of the rays through every pixel centre (row-major), as :meth:`~aerial_sim.world.ray_caster.RayCaster.cast` reports them.

        ``origin`` camera centre (world), ``R_world_optical`` its optical frame, ``intrinsics``
        (f_x, f_y, c_x, c_y), ``size`` (width, height); ``directions`` and ``rays_optical`` (W H, 3)
        float32: the unit pixel rays in the world and in the optical frame. ``lod_pixels`` > 0 draws each
        level-of-detail group at the coarsest level whose triangles are at most that many pixels wide
        (:mod:`aerial_sim.world.lod`); 0 draws every mesh whole.

        The arrays of the result are this thread's buffers for frames of this size: the next call of the
        same thread for the same size overwrites them (copy what is kept).
        """
        width, height = size
        origin32 = np.asarray(origin, np.float32)  # the ray caster's float32 ray origin
        vertices, plane_normals, plane_offsets, ids = self._buffers()
        rotation = np.ascontiguousarray(R_world_optical, np.float64)
        fx, fy, cx, cy = intrinsics
        origin64 = origin32.astype(np.float64)
        planes = self._frustum_planes(rotation, intrinsics, size)
        count = raster_kernels.frustum_triangles(self.tree.lower, self.tree.upper, self.tree.first_leaf, LEAF_SIZE,
                                                 self._static_count, origin64, planes, ids)
        if self._levels is not None:
            count = raster_kernels.lod_triangles(*self._levels, LEAF_SIZE, origin64, planes, float(fx),
                                                 float(lod_pixels), ids, count)
        raster_kernels.to_optical(self.triangles, self.world_normals, origin64, rotation, ids, count, vertices,
                                  plane_normals, plane_offsets)
        pixels = width * height
        inverse_depth, triangle_of_pixel, distance, surface, normal, triangle = self._frame_buffers(pixels)
        inverse_depth.fill(0.0)
        triangle_of_pixel.fill(-1)
        if not normals:
            normal = normal[:0]
        margin = 1e-2  # m: the camera near a closed object's box counts as inside it (rounding)
        inside = np.all((origin64 >= self._surface_lower - margin) & (origin64 <= self._surface_upper + margin),
                        axis=1).astype(np.uint8)
        raster_kernels.rasterize(vertices, ids, count, width, height, fx, fy, cx, cy, self.NEAR_PLANE_M,
                                 inverse_depth, triangle_of_pixel, self.closed, self.surface_of_triangle, inside,
                                 plane_offsets)
        raster_kernels.resolve_hits(origin32, directions, rays_optical, triangle_of_pixel, plane_normals,
                                    plane_offsets, self.world_normals32, self.surface_of_triangle, self.index,
                                    self.ground_plane, distance, surface, normal, triangle)
        return RayHits(distance, surface, normal, triangle)
