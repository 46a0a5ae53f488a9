"""Compiled per-ray loops of the ray caster and the camera's colour shading.

The same arithmetic as the NumPy reference paths (:meth:`RayCaster.cast` and
:meth:`CameraModel.render` with ``reference=True``), written once per ray and
compiled by numba, so a 460x320 frame makes one pass over its rays instead of
a dozen NumPy passes with masked temporaries:

- :func:`merge_hits`: the analytic ground plane z = 0 (t = -o_z / d_z, kept
  when finite and > 0), then Embree's nearest triangle hit where it is nearer
  (ties go to the ground, as in the reference), and the unit geometric normal
  turned to face the ray origin (n <- -n when n.d > 0).
- :func:`shade_colors`: Lambert's cosine law, colour = albedo x (a + (1 - a)
  max(0, min(1, n.s))) (a the ambient share, s the unit sun direction), the
  ground's 2-tone checker (albedo x 0.85 on cells with odd floor(x/c) +
  floor(y/c)), sky colour where nothing was hit, rounded to uint8.

Every quantity keeps the reference's precision (float32 rays, distances and
normals; the checker's world x, y in float64), and numba does not contract to
fused multiply-adds without ``fastmath``: depth and segmentation are
identical to the reference, colour differs by at most one level in rare
pixels (the reference's n.s is a BLAS product whose summation order may
differ). ``cache=True`` keeps the machine code in ``__pycache__``; the first
compilation (a few seconds) happens when a :class:`RayCaster` or a
:class:`CameraModel` is built (:func:`warm_up`), not on the first frame.

Without numba (a declared dependency) :data:`COMPILED` is False and the
callers use their NumPy reference paths.
"""

from __future__ import annotations

import math

import numpy as np

from aerial_sim.jit import COMPILED, njit


# error_model="numpy": x / 0 gives inf or nan as in NumPy (the ground test of a horizontal ray).
@njit(cache=True, nogil=True, error_model="numpy")
def merge_hits(origins, directions, tfar, prim, ng, surface_of_triangle, distance, surface, normal):
    """Nearest of ground plane and Embree hit per ray, into ``distance``, ``surface`` and (if it has rows) ``normal``.

    ``tfar``, ``prim``, ``ng``: Embree's per-ray distance, primitive id (-1: no hit) and geometric
    normal, or empty arrays when the scene has no objects.
    """
    with_objects = prim.shape[0] > 0
    with_normals = normal.shape[0] > 0
    one = np.float32(1.0)
    for i in range(directions.shape[0]):
        oz = origins[i, 2]
        t_ground = -oz / directions[i, 2]
        best = np.float32(np.inf)
        kind = 0
        if math.isfinite(t_ground) and t_ground > 0:
            best = t_ground
            kind = 1
            if with_normals:
                normal[i, 0] = 0.0
                normal[i, 1] = 0.0
                normal[i, 2] = one if oz >= 0 else -one
        if with_objects and prim[i] >= 0 and tfar[i] < best:
            best = tfar[i]
            kind = surface_of_triangle[prim[i]]
            if with_normals:
                gx, gy, gz = ng[i, 0], ng[i, 1], ng[i, 2]
                length = np.float32(math.sqrt(gx * gx + gy * gy + gz * gz))
                gx, gy, gz = gx / length, gy / length, gz / length
                if gx * directions[i, 0] + gy * directions[i, 1] + gz * directions[i, 2] > 0:
                    gx, gy, gz = -gx, -gy, -gz
                normal[i, 0] = gx
                normal[i, 1] = gy
                normal[i, 2] = gz
        distance[i] = best
        surface[i] = kind


@njit(cache=True, nogil=True, error_model="numpy")
def shade_colors(origin, directions, distance, surface, normal, albedo_lut, sun, ambient, lit_share, checker_size_m,
                 sky, out):
    """Lambert-shaded uint8 RGB per ray into ``out`` (N, 3).

    ``origin`` (3,) float64; ``ambient`` = a and ``lit_share`` = 1 - a, both rounded to float32 (from float64).
    """
    dark_cell = np.float32(0.85)
    half = np.float32(0.5)
    for i in range(directions.shape[0]):
        kind = surface[i]
        if kind == 0:
            for c in range(3):
                out[i, c] = np.uint8(sky[c] + half)
            continue
        factor = np.float32(1.0)
        if kind == 1 and checker_size_m > 0:
            x = origin[0] + np.float64(directions[i, 0] * distance[i])
            y = origin[1] + np.float64(directions[i, 1] * distance[i])
            cell = np.int64(math.floor(x / checker_size_m)) + np.int64(math.floor(y / checker_size_m))
            if cell & 1:
                factor = dark_cell
        cosine = normal[i, 0] * sun[0] + normal[i, 1] * sun[1] + normal[i, 2] * sun[2]
        cosine = min(max(cosine, np.float32(0.0)), np.float32(1.0))
        shade = ambient + lit_share * cosine
        for c in range(3):
            out[i, c] = np.uint8(albedo_lut[kind, c] * factor * shade + half)


def warm_up(shading: bool = False) -> None:
    """Compile (or load from the cache) :func:`merge_hits`, and :func:`shade_colors` if ``shading``,
    for the dtypes the renderer passes."""
    if not COMPILED:
        return
    origins = np.zeros((1, 3), np.float32)
    directions = np.array([[0.0, 0.0, -1.0]], np.float32)
    origins[0, 2] = 1.0
    distance, surface, normal = np.empty(1, np.float32), np.empty(1, np.int32), np.empty((1, 3), np.float32)
    merge_hits(origins, directions, np.empty(0, np.float32), np.empty(0, np.int32), np.empty((0, 3), np.float32),
               np.empty(0, np.int32), distance, surface, normal)
    if shading:
        shade_colors(np.zeros(3), directions, distance, surface, normal, np.zeros((2, 3), np.float32),
                     np.array([0.0, 0.0, 1.0], np.float32), np.float32(0.35), np.float32(0.65), 1.0,
                     np.zeros(3, np.float32), np.empty((1, 3), np.uint8))
