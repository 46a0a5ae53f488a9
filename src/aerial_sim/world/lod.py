"""Level of detail: simplified versions of a scene's large meshes, which the camera draws by distance.

The ``lod:`` section of a scene file (all optional)::

    lod:
      enabled: true          # false: every mesh is drawn at full detail
      pixels: 3.0            # draw the coarsest level whose triangles are at most this wide on screen
      min_triangles: 256     # mesh files with fewer triangles get no levels

Levels. Each mesh file (glTF, OBJ, ...) of at least ``min_triangles`` triangles gets a chain of
simplified versions, each about a quarter of the one before (Garland and Heckbert's quadric error
metric edge collapse, "Surface Simplification Using Quadric Error Metrics", SIGGRAPH 1997, as the
``fast-simplification`` package implements it: Forstmann's Fast-Quadric-Mesh-Simplification), until a
level would have fewer than :data:`MIN_LEVEL_TRIANGLES` triangles or simplification stops paying
(a level keeps more than 3/4 of the one before). Each material part of the file is simplified on
its own (corners merged by position first), so a level keeps the file's materials; a simplified
triangle takes the texture mapping of the original triangle whose centroid is nearest its own (the
affine map u = g_u . p + c_u, v = g_v . p + c_v of that triangle's plane), which is exact wherever the
original mapping is one affine map across a plane (a facade, a quad) and close elsewhere.

Choice. Level l's triangle size is s_l = sqrt(2 A_l / T_l) (A_l its area, T_l its triangles; the legs
of a right isosceles triangle of the mean area), times the object's ``scale``. For each object whose
box meets its view, the camera draws the coarsest level with s_l f <= ``pixels`` d (f the focal length
in pixels, d the distance from the camera centre to the object's world box, 0 inside it): its triangles
are then at most ``pixels`` wide where they are nearest, so what simplification removed is detail of
about that size on screen. Everything else (terrain, boxes, cylinders, spheres, OSM buildings, small
meshes) is always drawn whole.

What LOD changes: only what the camera's rasteriser draws. A pixel on a simplified mesh gets the exact
depth, normal, segmentation and instance id *of the simplified surface* (its ray's intersection with
the drawn triangle's plane), so depth there may differ from the full mesh's by up to about the level's
deviation (well under s_l). Its shadow ray starts s_l further off the surface (the full mesh, which
casts the shadows, may lie up to about that far above a simplified surface). The lidar, rangefinder,
collisions, shadows and the NumPy/Embree reference render (``reference=True``) always use the full
meshes. The choice depends on the pose only, so the same pose renders the same bytes every run.

Levels are built when the camera first renders (each file once per scene); a 1.3 M-triangle mesh's
chain takes about 4 s of CPU. A scene loaded through the scene cache keeps them there
(:func:`aerial_sim.world.scene_cache.cached_lod_levels`): later cameras read them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from aerial_sim.config import require
from aerial_sim.world.assets import SurfacePart

#: A level is not made with fewer triangles than this (the last level may have fewer).
MIN_LEVEL_TRIANGLES = 32
#: Most simplified levels per file.
MAX_LEVELS = 8
#: Each level aims at this share of the one before.
LEVEL_RATIO = 0.25


@dataclass(frozen=True)
class LodParams:
    """The ``lod:`` section of a scene file (see the module docstring)."""

    enabled: bool = True
    pixels: float = 3.0
    min_triangles: int = 256

    def __post_init__(self) -> None:
        require(math.isfinite(self.pixels) and self.pixels > 0, f"pixels: must be > 0, got {self.pixels!r}")
        require(self.min_triangles >= 1, f"min_triangles: must be >= 1, got {self.min_triangles!r}")


@dataclass(frozen=True)
class Level:
    """One level of a mesh file: its parts (in the file's frame) and its triangle size s_l (file units)."""

    parts: tuple[SurfacePart, ...]
    size: float

    @property
    def triangle_count(self) -> int:
        return sum(len(part.triangles) for part in self.parts)


def triangle_size(parts) -> float:
    """s = sqrt(2 A / T) of the parts' triangles (0 for none)."""
    count = sum(len(part.triangles) for part in parts)
    if not count:
        return 0.0
    area = sum(float(_areas(part.triangles).sum()) for part in parts)
    return math.sqrt(2.0 * area / count)


def levels_of(parts, min_triangles: int = 256) -> list[Level]:
    """Level 0 (the parts as given) and the simplified levels after it; only level 0 below ``min_triangles``."""
    parts = tuple(parts)
    levels = [Level(parts, triangle_size(parts))]
    if levels[0].triangle_count < min_triangles:
        return levels
    meshes = [_indexed(part.triangles) for part in parts]  # (vertices, faces) of each part's current level
    for _ in range(MAX_LEVELS):
        before = sum(len(faces) for _, faces in meshes)
        meshes = [_simplified(vertices, faces) for vertices, faces in meshes]
        after = sum(len(faces) for _, faces in meshes)
        if after > 0.75 * before or after < MIN_LEVEL_TRIANGLES:
            break
        level_parts = tuple(_part(vertices, faces, original) for (vertices, faces), original in zip(meshes, parts))
        levels.append(Level(level_parts, triangle_size(level_parts)))
    return levels


def _areas(triangles: np.ndarray) -> np.ndarray:
    return 0.5 * np.linalg.norm(np.cross(triangles[:, 1] - triangles[:, 0], triangles[:, 2] - triangles[:, 0]), axis=1)


def _indexed(triangles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(vertices, faces) of a triangle soup, corners at the same position merged (a sort, no hashing)."""
    corners = np.ascontiguousarray(triangles, np.float64).reshape(-1, 3)
    if not len(corners):
        return corners, np.empty((0, 3), np.int64)
    order = np.lexsort(corners.T[::-1])
    ordered = corners[order]
    new = np.ones(len(corners), bool)
    new[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    inverse = np.empty(len(corners), np.int64)
    inverse[order] = np.cumsum(new) - 1
    faces = inverse.reshape(-1, 3)
    faces = faces[(faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2]) & (faces[:, 0] != faces[:, 2])]
    return ordered[new], faces


def _simplified(vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """About :data:`LEVEL_RATIO` of the mesh's triangles (a mesh of fewer than 16 is kept as it is)."""
    import fast_simplification

    if len(faces) < 16:
        return vertices, faces
    points, simple = fast_simplification.simplify(vertices, faces, target_reduction=1.0 - LEVEL_RATIO)
    return np.asarray(points, np.float64), np.asarray(simple, np.int64).reshape(-1, 3)


def _part(vertices: np.ndarray, faces: np.ndarray, original: SurfacePart) -> SurfacePart:
    """A level's part: its non-degenerate triangles, with ``original``'s material (base colour, textures,
    metallic-roughness) and transferred uv."""
    triangles = np.ascontiguousarray(vertices[faces])
    triangles = triangles[_areas(triangles) > 0]
    uv = uv1 = None
    # Any sampled map (base colour, metallic-roughness, normal, occlusion, emissive) needs the uv sets it names.
    sampled = original.texture is not None or original.pbr_texture is not None or \
        (original.maps is not None and bool(original.maps.textures))
    if original.uv is not None and sampled and len(triangles):
        uv = _transferred_uv(triangles, original, original.uv)
        if original.uv1 is not None:
            uv1 = _transferred_uv(triangles, original, original.uv1)
    # The file's tangents belong to its faces: a level's faces take the frame of their texture coordinates.
    return dataclasses.replace(original, triangles=triangles, uv=uv, uv1=uv1, tangents=None)


def _transferred_uv(triangles: np.ndarray, original: SurfacePart, coordinates: np.ndarray) -> np.ndarray:
    """(T, 3, 2) float32 corner texture coordinates: each triangle's corners through the affine map of
    ``coordinates`` (``original``'s uv or uv1) on the original triangle whose centroid is nearest its centroid."""
    from scipy.spatial import cKDTree

    corners, uv = original.triangles, coordinates.astype(np.float64)
    e1, e2 = corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]
    d00, d01, d11 = (e1 * e1).sum(1), (e1 * e2).sum(1), (e2 * e2).sum(1)
    den = d00 * d11 - d01 * d01
    with np.errstate(divide="ignore", invalid="ignore"):
        g1 = np.where(den[:, None] > 0, (d11[:, None] * e1 - d01[:, None] * e2) / den[:, None], 0.0)
        g2 = np.where(den[:, None] > 0, (d00[:, None] * e2 - d01[:, None] * e1) / den[:, None], 0.0)
    _, nearest = cKDTree(corners.mean(axis=1)).query(triangles.mean(axis=1))
    out = np.empty((len(triangles), 3, 2), np.float32)
    q = triangles - corners[nearest, 0][:, None, :]  # corners relative to the original's first corner
    b1 = np.einsum("tkc,tc->tk", q, g1[nearest])
    b2 = np.einsum("tkc,tc->tk", q, g2[nearest])
    for k in range(2):
        base = uv[nearest, 0, k][:, None]
        out[:, :, k] = base + (uv[nearest, 1, k] - uv[nearest, 0, k])[:, None] * b1 + \
            (uv[nearest, 2, k] - uv[nearest, 0, k])[:, None] * b2
    return out
