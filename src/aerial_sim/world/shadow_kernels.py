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
what Embree's occlusion query answers (:meth:`~aerial_sim.world.geometry.RayCaster.occluded`,
the NumPy reference path). Here the rays of an 8 x 8 pixel tile are answered together, in the
sun's orthographic view: with (u, v, s) an orthonormal basis, a point is (a, b, h) = (p.u, p.v, p.s),
every ray toward the sun is the single point (a, b) of that view, and a triangle occludes p
exactly when (a, b) lies inside the triangle's projection (the signs of its three edge
functions, Pineda 1988) and the triangle's plane there is nearer the sun, h_tri(a, b) > h
(t = h_tri - h > 0): the "irregular z-buffer" of Johnson et al. (ACM TOG 24(4), 2005). The
tree is walked once per tile with the tile's (a, b) bounds and lowest h (a box whose projection
misses the tile, or that lies wholly at or below the tile's lowest point along s, is skipped),
gathering candidate triangles that are then tested against the tile's points. Same rays, same
answer as the ray caster, but one traversal per 64 rays instead of one per ray.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aerial_sim.jit import COMPILED, njit

#: Triangles per leaf.
LEAF_SIZE = 4
#: Pixels per side of a shadow tile (its rays share one walk of the tree).
TILE = 8
#: Most candidate triangles a tile's rays are tested against here: a tile that meets more (a fine mesh near the
#: rays, such as a dense terrain shading itself) is marked :data:`UNDECIDED`, for one ray query per pixel.
CANDIDATES = 128
#: ``lit`` value of a pixel whose shadow ray was left to the caller.
UNDECIDED = 2
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
    """A scene's triangles in the sun's orthographic view, and a hierarchy over them there.

    ``basis`` (3, 3) rows u, v, s (s the unit vector toward the sun, u and v across its view);
    ``corners`` (T, 3, 3) each corner's (a, b, h) = (p.u, p.v, p.s), in the leaf order of ``tree``, a
    :class:`TriangleBVH` over those (a, b, h) corners, ordered along (a, b): its boxes are the tightest
    a query from the sun's view can use, and a leaf's triangles lie side by side in memory. Built once per sun direction (:func:`sun_view`).
    """

    sun: tuple[float, float, float]
    basis: np.ndarray
    corners: np.ndarray
    tree: TriangleBVH


def sun_basis(sun: np.ndarray) -> np.ndarray:
    """Rows u, v, s: s = ``sun`` (unit, toward the sun) in float64, u and v completing a right-handed basis."""
    s = np.asarray(sun, np.float32).astype(np.float64)
    u = np.array([s[1], -s[0], 0.0]) if abs(s[2]) < 0.9 else np.array([0.0, s[2], -s[1]])  # s x z, or s x x
    u /= math.sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2])
    v = np.array([s[1] * u[2] - s[2] * u[1], s[2] * u[0] - s[0] * u[2], s[0] * u[1] - s[1] * u[0]])
    return np.array([u, v, s])


def sun_view(triangles: np.ndarray, sun: np.ndarray) -> SunView:
    """The :class:`SunView` of ``triangles`` (T, 3, 3) world corners for the unit direction ``sun`` (float32)."""
    basis = sun_basis(sun)
    triangles = np.ascontiguousarray(triangles, np.float64).reshape(-1, 3, 3)
    corners = np.empty_like(triangles)
    if COMPILED:
        _to_sun_view(triangles, basis, corners)
    else:
        corners[:] = triangles @ basis.T
    key = tuple(float(c) for c in np.asarray(sun, np.float32))
    tree = build_bvh(corners, order_axes=2)
    return SunView(key, basis, np.ascontiguousarray(corners[tree.order]), tree)


@njit(cache=True, nogil=True)
def _to_sun_view(triangles, basis, out):
    for t in range(triangles.shape[0]):
        for k in range(3):
            x, y, z = triangles[t, k, 0], triangles[t, k, 1], triangles[t, k, 2]
            for axis in range(3):
                out[t, k, axis] = x * basis[axis, 0] + y * basis[axis, 1] + z * basis[axis, 2]


@njit(cache=True, nogil=True, error_model="numpy")
def sun_visibility(origin, directions, distance, surface, normal, triangle, lift, width, height, sun, basis, corners,
                   lower, upper, first_leaf, leaf_size, lit):
    """``lit[i]`` = 0 where pixel i's surface point is hidden from the sun by a triangle, 1 elsewhere.

    ``origin`` (3,) float64 camera centre; ``directions`` (N, 3) float32 unit pixel rays (row-major,
    N = width height); ``distance``, ``surface``, ``normal``: the camera's hits; ``sun`` (3,) float32
    unit vector toward the sun; ``basis``, ``corners`` and the tree (``lower``, ``upper``,
    ``first_leaf``, ``leaf_size``): the :class:`SunView` of the scene for that sun. Only points facing
    the sun (n.s > 0) are tested, each from p + n (2e-3 + 1e-4 d + lift) (off its surface, as the reference's
    shadow ray starts; ``lift[triangle[i]]`` the extra offset of a simplified mesh's pixel,
    :mod:`aerial_sim.world.lod`, 0 where ``triangle[i]`` < 0). The pixels of a tile with more than :data:`CANDIDATES` candidate triangles are
    left :data:`UNDECIDED` (a ray caster answers those faster).
    """
    ux, uy, uz = basis[0, 0], basis[0, 1], basis[0, 2]
    vx, vy, vz = basis[1, 0], basis[1, 1], basis[1, 2]
    sx, sy, sz = basis[2, 0], basis[2, 1], basis[2, 2]
    per_tile = TILE * TILE
    point_a, point_b, point_h = np.empty(per_tile), np.empty(per_tile), np.empty(per_tile)
    point_index = np.empty(per_tile, np.int64)
    hidden = np.zeros(per_tile, np.uint8)
    candidates = np.empty((CANDIDATES, 13))  # edge functions (A, B, C) x 3, plane (P_a, P_b, P_c), -tolerance
    stack = np.empty(128, np.int64)
    count = corners.shape[0]
    for i in range(directions.shape[0]):
        lit[i] = 1
    for tile_y in range(0, height, TILE):
        for tile_x in range(0, width, TILE):
            # The tile's points that face the sun, in the sun's view.
            n = 0
            a_low, a_high, b_low, b_high, h_low = np.inf, -np.inf, np.inf, -np.inf, np.inf
            for y in range(tile_y, min(tile_y + TILE, height)):
                for x in range(tile_x, min(tile_x + TILE, width)):
                    i = y * width + x
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
                    point_a[n], point_b[n], point_h[n], point_index[n] = a, b, h, i
                    hidden[n] = 0
                    n += 1
                    a_low, a_high = min(a_low, a), max(a_high, a)
                    b_low, b_high = min(b_low, b), max(b_high, b)
                    h_low = min(h_low, h)
            if n == 0:
                continue
            found = 0
            stack[0] = 0
            top = 1
            while top > 0:
                top -= 1
                node = stack[top]
                # Skip a box beside the tile in the sun's view, or wholly at or below its lowest point
                # (an empty node has lower = +inf > upper and is skipped here too).
                if (upper[node, 2] <= h_low or upper[node, 0] < a_low or lower[node, 0] > a_high
                        or upper[node, 1] < b_low or lower[node, 1] > b_high):
                    continue
                if node < first_leaf:
                    stack[top] = 2 * node + 1
                    stack[top + 1] = 2 * node + 2
                    top += 2
                    continue
                leaf = node - first_leaf
                for k in range(leaf * leaf_size, min((leaf + 1) * leaf_size, count)):
                    a0, b0, h0 = corners[k, 0, 0], corners[k, 0, 1], corners[k, 0, 2]
                    a1, b1, h1 = corners[k, 1, 0], corners[k, 1, 1], corners[k, 1, 2]
                    a2, b2, h2 = corners[k, 2, 0], corners[k, 2, 1], corners[k, 2, 2]
                    if max(h0, h1, h2) <= h_low:
                        continue
                    if max(a0, a1, a2) < a_low or min(a0, a1, a2) > a_high:
                        continue
                    if max(b0, b1, b2) < b_low or min(b0, b1, b2) > b_high:
                        continue
                    area = (a1 - a0) * (b2 - b0) - (b1 - b0) * (a2 - a0)
                    if not (abs(area) > 0.0):  # edge-on to the sun: no ray toward the sun crosses it
                        continue
                    # Edge functions e_k(a, b) = A_k a + B_k b + C_k (positive inside, edge k opposite corner k)
                    # and the plane h(a, b) = P_a a + P_b b + P_c, so a point's test is a few products.
                    sign = 1.0 if area > 0 else -1.0
                    size = max(abs(a0), abs(a1), abs(a2), abs(b0), abs(b1), abs(b2))
                    row = candidates[found]
                    row[0], row[1], row[2] = -(b2 - b1) * sign, (a2 - a1) * sign, (a1 * b2 - a2 * b1) * sign
                    row[3], row[4], row[5] = -(b0 - b2) * sign, (a0 - a2) * sign, (a2 * b0 - a0 * b2) * sign
                    row[6], row[7], row[8] = -(b1 - b0) * sign, (a1 - a0) * sign, (a0 * b1 - a1 * b0) * sign
                    inverse = sign / area  # 1 / |area|: e_k / |area| are the barycentric weights
                    row[9] = (row[0] * h0 + row[3] * h1 + row[6] * h2) * inverse
                    row[10] = (row[1] * h0 + row[4] * h1 + row[7] * h2) * inverse
                    row[11] = (row[2] * h0 + row[5] * h1 + row[8] * h2) * inverse
                    row[12] = -EDGE_TOLERANCE * size * size
                    found += 1
                    if found == CANDIDATES:
                        break
                if found == CANDIDATES:
                    break
            if found == CANDIDATES:  # too many triangles near these rays: the caller casts them one by one
                for k in range(n):
                    lit[point_index[k]] = UNDECIDED
                continue
            if found > 0:
                _test_candidates(candidates, found, point_a, point_b, point_h, hidden, n)
            for k in range(n):
                if hidden[k]:
                    lit[point_index[k]] = 0


@njit(cache=True, nogil=True, error_model="numpy")
def _test_candidates(candidates, found, point_a, point_b, point_h, hidden, n):
    """Mark the tile's points that one of the ``found`` candidate triangles hides.

    A point (a, b, h) is hidden by a triangle when its three edge functions are >= -tolerance there and
    the triangle's plane is above it, P_a a + P_b b + P_c > h (a loop over the points with no branch).
    """
    for c in range(found):
        row = candidates[c]
        a0, b0, c0, a1, b1, c1, a2, b2, c2 = row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8]
        pa, pb, pc, low = row[9], row[10], row[11], row[12]
        for k in range(n):
            a, b = point_a[k], point_b[k]
            inside = ((a0 * a + b0 * b + c0 >= low) & (a1 * a + b1 * b + c1 >= low) & (a2 * a + b2 * b + c2 >= low)
                      & (pa * a + pb * b + pc > point_h[k]))
            hidden[k] |= np.uint8(inside)


def warm_up() -> None:
    """Compile (or load from the cache) the kernels for the dtypes the camera passes."""
    if not COMPILED:
        return
    triangle = np.array([[[-1.0, -1.0, 2.0], [1.0, -1.0, 2.0], [0.0, 1.0, 2.0]]])
    sun = np.array([0.0, 0.0, 1.0], np.float32)
    view = sun_view(triangle, sun)
    tree = view.tree
    sun_visibility(np.array([0.0, 0.0, 1.0]), np.array([[0.0, 0.0, -1.0]], np.float32), np.ones(1, np.float32),
                   np.ones(1, np.int32), np.array([[0.0, 0.0, 1.0]], np.float32), np.zeros(1, np.int32),
                   np.zeros(1, np.float32), 1, 1, sun, view.basis, view.corners,
                   tree.lower, tree.upper, tree.first_leaf, LEAF_SIZE, np.empty(1, np.uint8))
