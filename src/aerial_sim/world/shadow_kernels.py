"""A bounding-volume hierarchy of a scene's triangles, and the camera's shadow test through it.

Build (:func:`build_bvh`). Triangles are ordered along a Morton (Z-order) curve of their
centroids, 21 bits per axis over the scene's bounds (Lauterbach et al., "Fast BVH Construction
on GPUs", Eurographics 2009: the linear BVH), and cut into leaves of :data:`LEAF_SIZE`
consecutive triangles; the leaves are the bottom of a complete binary tree in heap order
(node k has children 2k + 1 and 2k + 2), each node's axis-aligned box the union of its
children's. No surface-area heuristic: the build is one sort and one pass (1 M triangles in
well under a second), and the tree does not depend on any direction, so it serves every sun.

Shadows (:func:`sun_visibility`). A camera pixel's surface point p is in shadow when some
triangle lies along the ray p + t s, t > 0 (s the unit direction toward the sun), which is
what Embree's occlusion query answers (:meth:`~aerial_sim.world.ray_caster.RayCaster.occluded`,
the NumPy reference path). Here it is answered in the sun's orthographic view: with (u, v, s) an
orthonormal basis, a point is (a, b, h) = (p.u, p.v, p.s), every ray toward the sun is the single
point (a, b) of that view, and a triangle occludes p exactly when (a, b) lies inside the triangle's
projection (the signs of its three edge functions, Pineda 1988) and the triangle's plane there is
nearer the sun, h_tri(a, b) > h (t = h_tri - h > 0): the "irregular z-buffer" of Johnson et al.
(ACM TOG 24(4), 2005). The scene is static and the sun moves only when the time of day is set, so
everything about the casters is done once per sun direction (:func:`sun_view`): their edge
functions and planes in that view, and a uniform grid over the view (about
:data:`CELLS_PER_CASTER` cells per caster) listing in each cell the casters whose box meets it and
the highest of them. A frame then costs, per sunlit-facing pixel, one cell lookup and the tests
against that cell's casters (none where the point is above all of them), stopping at the first that
hides it. Same rays, same answer as the ray caster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aerial_sim.jit import COMPILED, njit

#: Triangles per leaf.
LEAF_SIZE = 4
#: Inside-test tolerance of an edge function, relative to the squared size of the coordinates:
#: a ray through an edge shared by two triangles meets at least one of them.
EDGE_TOLERANCE = 1e-12


@dataclass(frozen=True)
class TriangleBVH:
    """Linear BVH over (T, 3, 3) triangles: ``order`` (T,) the triangles in leaf order, ``lower`` / ``upper``
    (nodes, 3) boxes in heap order (an empty node has lower > upper), ``first_leaf`` the heap index of leaf 0."""

    order: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    first_leaf: int


def build_bvh(triangles: np.ndarray, order_axes: int = 3) -> TriangleBVH:
    """The hierarchy over ``triangles`` (T, 3, 3) float64 corners (see the module docstring), the Morton
    order taken over the first ``order_axes`` coordinates of their centroids."""
    triangles = np.ascontiguousarray(triangles, np.float64).reshape(-1, 3, 3)
    count = len(triangles)
    leaves = max(1, -(-count // LEAF_SIZE))
    leaves_pow2 = 1 << max(0, math.ceil(math.log2(leaves)))
    nodes = 2 * leaves_pow2 - 1
    if count == 0:
        return TriangleBVH(np.empty(0, np.int64), np.full((nodes, 3), np.inf), np.full((nodes, 3), -np.inf),
                           leaves_pow2 - 1)
    centroids = triangles.mean(axis=1)
    low, high = centroids.min(axis=0), centroids.max(axis=0)
    scale = np.where(high > low, (2 ** 21 - 1) / np.maximum(high - low, 1e-300), 0.0)
    scale[order_axes:] = 0.0
    codes = _morton_codes(centroids, low, scale) if COMPILED else _morton_codes_reference(centroids, low, scale)
    order = np.argsort(codes, kind="stable").astype(np.int64)
    lower, upper = np.empty((nodes, 3)), np.empty((nodes, 3))
    _node_bounds(triangles, order, LEAF_SIZE, leaves_pow2 - 1, lower, upper)
    return TriangleBVH(order, lower, upper, leaves_pow2 - 1)


def _morton_codes_reference(centroids, low, scale):
    quantised = np.clip(((centroids - low) * scale).astype(np.int64), 0, 2 ** 21 - 1)
    codes = np.zeros(len(centroids), np.int64)
    for bit in range(21):
        for axis in range(3):
            codes |= ((quantised[:, axis] >> bit) & 1) << (3 * bit + axis)
    return codes


@njit(cache=True, nogil=True)
def _spread_bits(x):
    """The low 21 bits of x moved to every third bit (bit k -> bit 3 k)."""
    x &= 0x1FFFFF
    x = (x | (x << 32)) & 0x1F00000000FFFF
    x = (x | (x << 16)) & 0x1F0000FF0000FF
    x = (x | (x << 8)) & 0x100F00F00F00F00F
    x = (x | (x << 4)) & 0x10C30C30C30C30C3
    x = (x | (x << 2)) & 0x1249249249249249
    return x


@njit(cache=True, nogil=True)
def _morton_codes(centroids, low, scale):
    codes = np.empty(centroids.shape[0], np.int64)
    top = 2 ** 21 - 1
    for i in range(centroids.shape[0]):
        code = 0
        for axis in range(3):
            q = int((centroids[i, axis] - low[axis]) * scale[axis])
            q = min(max(q, 0), top)
            code |= _spread_bits(q) << axis
        codes[i] = code
    return codes


@njit(cache=True, nogil=True)
def _node_bounds(triangles, order, leaf_size, first_leaf, lower, upper):
    """Leaf boxes from their triangles, then every inner node's box from its two children (heap order)."""
    count = order.shape[0]
    for leaf in range(lower.shape[0] - first_leaf):
        node = first_leaf + leaf
        for axis in range(3):
            lower[node, axis] = np.inf
            upper[node, axis] = -np.inf
        for k in range(leaf * leaf_size, min((leaf + 1) * leaf_size, count)):
            t = order[k]
            for corner in range(3):
                for axis in range(3):
                    value = triangles[t, corner, axis]
                    lower[node, axis] = min(lower[node, axis], value)
                    upper[node, axis] = max(upper[node, axis], value)
    for node in range(first_leaf - 1, -1, -1):
        for axis in range(3):
            lower[node, axis] = min(lower[2 * node + 1, axis], lower[2 * node + 2, axis])
            upper[node, axis] = max(upper[2 * node + 1, axis], upper[2 * node + 2, axis])


@dataclass(frozen=True)
class SunView:
    """A scene's shadow casters in the sun's orthographic view, binned into a grid there; built once per sun
    direction (:func:`sun_view`) and kept: only the camera's own points change from frame to frame.

    ``basis`` (3, 3) rows u, v, s (s the unit vector toward the sun, u and v across its view). ``rows`` (T, 14):
    each non-degenerate caster's edge functions and plane in that view (A_k, B_k, C_k for k = 0, 1, 2; P_a, P_b,
    P_c; the inside tolerance, negative; its highest corner's h), set up once here rather than for every frame.
    ``grid`` (4,) float64: the lowest (a, b) of the grid, its cell size and that size's inverse; ``cells_a``
    and ``cells_b`` the cells along a and b; cell (i, j) (index j ``cells_a`` + i) lists the casters
    ``members[first[c]:first[c + 1]]`` whose (a, b) box, widened by what the inside tolerance may accept, meets
    it, and ``highest[c]`` is the highest h among them (-inf: none).
    """

    sun: tuple[float, float, float]
    basis: np.ndarray
    rows: np.ndarray
    grid: np.ndarray
    cells_a: int
    cells_b: int
    first: np.ndarray
    members: np.ndarray
    highest: np.ndarray


def sun_basis(sun: np.ndarray) -> np.ndarray:
    """Rows u, v, s: s = ``sun`` (unit, toward the sun) in float64, u and v completing a right-handed basis."""
    s = np.asarray(sun, np.float32).astype(np.float64)
    u = np.array([s[1], -s[0], 0.0]) if abs(s[2]) < 0.9 else np.array([0.0, s[2], -s[1]])  # s x z, or s x x
    u /= math.sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2])
    v = np.array([s[1] * u[2] - s[2] * u[1], s[2] * u[0] - s[0] * u[2], s[0] * u[1] - s[1] * u[0]])
    return np.array([u, v, s])


#: Grid cells per caster aimed at (the cell size follows from it and the casters' extent in the sun's view).
CELLS_PER_CASTER = 8.0
#: Most grid cells, whatever the casters (4 M: 48 MB of cell arrays).
MAX_CELLS = 1 << 22


def sun_view(triangles: np.ndarray, sun: np.ndarray) -> SunView:
    """The :class:`SunView` of ``triangles`` (T, 3, 3) world corners for the unit direction ``sun`` (float32)."""
    basis = sun_basis(sun)
    triangles = np.ascontiguousarray(triangles, np.float64).reshape(-1, 3, 3)
    key = tuple(float(c) for c in np.asarray(sun, np.float32))
    corners = np.empty_like(triangles)
    if COMPILED:
        _to_sun_view(triangles, basis, corners)
    else:
        corners[:] = triangles @ basis.T
    rows = np.empty((len(corners), 14))
    boxes = np.empty((len(corners), 4))
    count = _caster_rows(corners, rows, boxes) if COMPILED else _caster_rows.py_func(corners, rows, boxes)
    # Casters along a Morton curve of their (a, b) box centres: a cell's casters lie near each other in memory.
    centres = np.zeros((count, 3))
    centres[:, 0] = 0.5 * (boxes[:count, 0] + boxes[:count, 2])
    centres[:, 1] = 0.5 * (boxes[:count, 1] + boxes[:count, 3])
    if count:
        low, high = centres.min(axis=0), centres.max(axis=0)
        scale = np.where(high > low, (2 ** 21 - 1) / np.maximum(high - low, 1e-300), 0.0)
        codes = _morton_codes(centres, low, scale) if COMPILED else _morton_codes_reference(centres, low, scale)
        order = np.argsort(codes, kind="stable")
        rows, boxes = np.ascontiguousarray(rows[order]), np.ascontiguousarray(boxes[order])
    else:
        rows, boxes = rows[:0], boxes[:0]
    if count == 0:
        grid = np.array([0.0, 0.0, 1.0, 1.0])
        return SunView(key, basis, rows, grid, 1, 1, np.zeros(2, np.int64), np.empty(0, np.int32),
                       np.full(1, -np.inf))
    low_a, low_b = float(boxes[:, 0].min()), float(boxes[:, 1].min())
    span_a, span_b = float(boxes[:, 2].max()) - low_a, float(boxes[:, 3].max()) - low_b
    cells = min(MAX_CELLS, max(1.0, CELLS_PER_CASTER * count))
    size = max(math.sqrt(max(span_a * span_b, 1e-12) / cells), span_a / cells, span_b / cells, 1e-6)
    cells_a = min(int(span_a / size) + 1, MAX_CELLS)
    cells_b = min(int(span_b / size) + 1, max(1, MAX_CELLS // cells_a))
    size = max(size, span_a / cells_a * (1.0 + 1e-9), span_b / cells_b * (1.0 + 1e-9))
    grid = np.array([low_a, low_b, size, 1.0 / size])
    first = np.zeros(cells_a * cells_b + 1, np.int64)
    highest = np.full(cells_a * cells_b, -np.inf)
    binning = _bin_casters if COMPILED else _bin_casters.py_func
    binning(rows, boxes, grid, cells_a, cells_b, first, highest, np.empty(0, np.int32))
    members = np.empty(int(first[-1]), np.int32)
    binning(rows, boxes, grid, cells_a, cells_b, first, highest, members)
    return SunView(key, basis, rows, grid, cells_a, cells_b, first, members, highest)


@njit(cache=True, nogil=True)
def _to_sun_view(triangles, basis, out):
    for t in range(triangles.shape[0]):
        for k in range(3):
            x, y, z = triangles[t, k, 0], triangles[t, k, 1], triangles[t, k, 2]
            for axis in range(3):
                out[t, k, axis] = x * basis[axis, 0] + y * basis[axis, 1] + z * basis[axis, 2]


@njit(cache=True, nogil=True)
def _caster_rows(corners, rows, boxes):
    """Each caster's :class:`SunView` row and its (a, b) box (low a, low b, high a, high b), widened by what the
    inside tolerance accepts beyond its edges; triangles edge-on to the sun (no ray toward the sun crosses
    them) are left out. Returns how many rows were written."""
    count = 0
    for t in range(corners.shape[0]):
        a0, b0, h0 = corners[t, 0, 0], corners[t, 0, 1], corners[t, 0, 2]
        a1, b1, h1 = corners[t, 1, 0], corners[t, 1, 1], corners[t, 1, 2]
        a2, b2, h2 = corners[t, 2, 0], corners[t, 2, 1], corners[t, 2, 2]
        area = (a1 - a0) * (b2 - b0) - (b1 - b0) * (a2 - a0)
        if not (abs(area) > 0.0):
            continue
        # Edge functions e_k(a, b) = A_k a + B_k b + C_k (positive inside, edge k opposite corner k)
        # and the plane h(a, b) = P_a a + P_b b + P_c, so a point's test is a few products.
        sign = 1.0 if area > 0 else -1.0
        size = max(abs(a0), abs(a1), abs(a2), abs(b0), abs(b1), abs(b2))
        row = rows[count]
        row[0], row[1], row[2] = -(b2 - b1) * sign, (a2 - a1) * sign, (a1 * b2 - a2 * b1) * sign
        row[3], row[4], row[5] = -(b0 - b2) * sign, (a0 - a2) * sign, (a2 * b0 - a0 * b2) * sign
        row[6], row[7], row[8] = -(b1 - b0) * sign, (a1 - a0) * sign, (a0 * b1 - a1 * b0) * sign
        inverse = sign / area  # 1 / |area|: e_k / |area| are the barycentric weights
        row[9] = (row[0] * h0 + row[3] * h1 + row[6] * h2) * inverse
        row[10] = (row[1] * h0 + row[4] * h1 + row[7] * h2) * inverse
        row[11] = (row[2] * h0 + row[5] * h1 + row[8] * h2) * inverse
        row[12] = -EDGE_TOLERANCE * size * size
        row[13] = max(h0, h1, h2)
        # A point a distance w outside edge k has e_k = -w |edge k|: the tolerance accepts w up to
        # tolerance / |edge k|; the box is widened by that (for the shortest edge) and a little more.
        shortest = min(math.sqrt(row[0] * row[0] + row[1] * row[1]), math.sqrt(row[3] * row[3] + row[4] * row[4]),
                       math.sqrt(row[6] * row[6] + row[7] * row[7]))
        pad = -row[12] / shortest + 1e-9 * (size + 1.0)
        boxes[count, 0] = min(a0, a1, a2) - pad
        boxes[count, 1] = min(b0, b1, b2) - pad
        boxes[count, 2] = max(a0, a1, a2) + pad
        boxes[count, 3] = max(b0, b1, b2) + pad
        count += 1
    return count


@njit(cache=True, nogil=True)
def _bin_casters(rows, boxes, grid, cells_a, cells_b, first, highest, members):
    """With ``members`` empty: count each cell's casters into ``first`` (then its running sum: cell c's members
    start at first[c]) and their highest h into ``highest``; with ``members`` of first[-1] rows: list them, each
    cell's highest first. A caster is in a cell when its box meets the cell and no edge function is below the
    tolerance at all four of the cell's corners (the cell lies wholly outside that edge)."""
    counting = members.shape[0] == 0
    fill = first[:-1].copy()
    size = grid[2]
    for t in range(rows.shape[0]):
        i_low = min(max(int(math.floor((boxes[t, 0] - grid[0]) * grid[3])), 0), cells_a - 1)
        j_low = min(max(int(math.floor((boxes[t, 1] - grid[1]) * grid[3])), 0), cells_b - 1)
        i_high = min(max(int(math.floor((boxes[t, 2] - grid[0]) * grid[3])), 0), cells_a - 1)
        j_high = min(max(int(math.floor((boxes[t, 3] - grid[1]) * grid[3])), 0), cells_b - 1)
        low = rows[t, 12]
        for j in range(j_low, j_high + 1):
            b = grid[1] + j * size
            for i in range(i_low, i_high + 1):
                a = grid[0] + i * size
                outside = False
                for k in range(3):
                    ea, eb, ec = rows[t, 3 * k], rows[t, 3 * k + 1], rows[t, 3 * k + 2]
                    # the edge function's largest value over the cell (slack: the corners' rounding)
                    top = ea * a + eb * b + ec + max(ea * size, 0.0) + max(eb * size, 0.0)
                    if top < low - 1e-9 * (abs(ea * a) + abs(eb * b) + abs(ec) + 1.0):
                        outside = True
                        break
                if outside:
                    continue
                cell = j * cells_a + i
                if counting:
                    first[cell + 1] += 1
                    highest[cell] = max(highest[cell], rows[t, 13])
                else:
                    members[fill[cell]] = t
                    fill[cell] += 1
    if counting:
        for cell in range(first.shape[0] - 1):
            first[cell + 1] += first[cell]
    else:
        for cell in range(first.shape[0] - 1):  # highest first: a point's tests stop at the first below it
            start, stop = first[cell], first[cell + 1]
            if stop - start > 1:
                tops = np.empty(stop - start)
                for k in range(start, stop):
                    tops[k - start] = -rows[members[k], 13]
                members[start:stop] = members[start:stop][np.argsort(tops, kind="mergesort")]


@njit(cache=True, nogil=True, error_model="numpy")
def sun_visibility(origin, directions, distance, surface, normal, triangle, lift, sun, basis, rows, grid, cells_a,
                   cells_b, first, members, highest, lit):
    """``lit[i]`` = 0 where pixel i's surface point is hidden from the sun by a caster, 1 elsewhere.

    ``origin`` (3,) float64 camera centre; ``directions`` (N, 3) float32 unit pixel rays; ``distance``,
    ``surface``, ``normal``: the camera's hits; ``sun`` (3,) float32 unit vector toward the sun; ``basis``,
    ``rows``, ``grid``, ``cells_a``, ``cells_b``, ``first``, ``members``, ``highest``: the :class:`SunView` of the
    scene for that sun. Only points facing the sun (n.s > 0) are tested, each from p + n (2e-3 + 1e-4 d + lift)
    (off its surface, as the reference's shadow ray starts; ``lift[triangle[i]]`` the extra offset of a
    simplified mesh's pixel, :mod:`aerial_sim.world.lod`, 0 where ``triangle[i]`` < 0): against the casters of
    its grid cell, unless the point is at or above the highest of them.
    """
    ux, uy, uz = basis[0, 0], basis[0, 1], basis[0, 2]
    vx, vy, vz = basis[1, 0], basis[1, 1], basis[1, 2]
    sx, sy, sz = basis[2, 0], basis[2, 1], basis[2, 2]
    low_a, low_b, inverse = grid[0], grid[1], grid[3]
    for i in range(directions.shape[0]):
        lit[i] = 1
        if surface[i] == 0:
            continue
        if normal[i, 0] * sun[0] + normal[i, 1] * sun[1] + normal[i, 2] * sun[2] <= 0:
            continue
        d = np.float64(distance[i])
        offset = 2e-3 + 1e-4 * d
        if triangle[i] >= 0:
            offset += lift[triangle[i]]
        px = origin[0] + directions[i, 0] * d + normal[i, 0] * offset
        py = origin[1] + directions[i, 1] * d + normal[i, 1] * offset
        pz = origin[2] + directions[i, 2] * d + normal[i, 2] * offset
        a = px * ux + py * uy + pz * uz
        b = px * vx + py * vy + pz * vz
        h = px * sx + py * sy + pz * sz
        x = math.floor((a - low_a) * inverse)
        y = math.floor((b - low_b) * inverse)
        if not (0.0 <= x < cells_a and 0.0 <= y < cells_b):
            continue
        cell = int(y) * cells_a + int(x)
        if h >= highest[cell]:
            continue
        for k in range(first[cell], first[cell + 1]):
            t = members[k]
            if rows[t, 13] <= h:  # this caster and the rest of the cell's lie wholly below the point
                break
            low = rows[t, 12]
            if (rows[t, 0] * a + rows[t, 1] * b + rows[t, 2] >= low and rows[t, 3] * a + rows[t, 4] * b + rows[t, 5] >= low
                    and rows[t, 6] * a + rows[t, 7] * b + rows[t, 8] >= low
                    and rows[t, 9] * a + rows[t, 10] * b + rows[t, 11] > h):
                lit[i] = 0
                break


def warm_up() -> None:
    """Compile (or load from the cache) the kernels for the dtypes the camera passes."""
    if not COMPILED:
        return
    triangle = np.array([[[-1.0, -1.0, 2.0], [1.0, -1.0, 2.0], [0.0, 1.0, 2.0]]])
    sun = np.array([0.0, 0.0, 1.0], np.float32)
    view = sun_view(triangle, sun)
    sun_visibility(np.array([0.0, 0.0, 1.0]), np.array([[0.0, 0.0, -1.0]], np.float32), np.ones(1, np.float32),
                   np.ones(1, np.int32), np.array([[0.0, 0.0, 1.0]], np.float32), np.zeros(1, np.int32),
                   np.zeros(1, np.float32), sun, *shadow_arguments(view), np.empty(1, np.uint8))


def shadow_arguments(view: SunView) -> tuple:
    """The arguments of :func:`sun_visibility` that ``view`` gives (basis .. highest)."""
    return (view.basis, view.rows, view.grid, view.cells_a, view.cells_b, view.first, view.members, view.highest)
