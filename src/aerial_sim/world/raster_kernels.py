"""Compiled rasteriser of the pinhole camera: which triangle each pixel centre sees, and where.

The camera casts one ray per pixel centre through a pinhole (:mod:`aerial_sim.world.camera`).
For rays that share one origin the first hit can be found without a ray-casting acceleration
structure: project every triangle into the image and keep, per pixel centre, the triangle with
the nearest point there (a z-buffer holding a *visibility buffer*; Burns and Hunt, "The
Visibility Buffer", JCGT 2(2), 2013). The hit distance itself is then computed exactly as a
ray caster does, as the intersection of the pixel's ray with the chosen triangle's plane,
so depth does not carry the rasteriser's interpolation error.

- :func:`rasterize`: a triangle with its three corners beyond one side plane of the view frustum is
  skipped; every other triangle is clipped against the near plane z = ``near`` in the optical
  frame (Sutherland-Hodgman, one plane: a triangle becomes 0, 3 or 4 vertices), projected with
  u = f_x x / z + c_x, v = f_y y / z + c_y, and every pixel centre (integer u, v) inside it, by
  the signs of its three edge functions (Pineda, "A Parallel Algorithm for Polygon
  Rasterization", SIGGRAPH 1988), is depth-tested on 1/z, which is affine in (u, v) over a
  planar triangle. The inside test accepts edge functions down to a small negative tolerance
  scaled to the coordinates' size, so a pixel centre on an edge shared by two triangles is
  covered by at least one of them whatever the rounding (no cracks); covering it twice is
  harmless for a z-buffer. Like the ray caster, both sides of a triangle are seen, except that the
  faces of a closed, outward-wound object (a building, a prop mesh that is closed) turned away from a
  camera outside that object's box are skipped: such a face is never the first hit (back-face culling,
  which leaves the visibility buffer unchanged and saves filling the far side of every building).
- :func:`resolve_hits`: per pixel, the analytic ground plane z = 0 (computed exactly as
  :func:`~aerial_sim.world.render_kernels.merge_hits` does, in float32), then the chosen
  triangle's plane, t = (n . v0) / (n . d) in the optical frame, kept where nearer (ties go to
  the ground), with the triangle's unit world normal turned to face the camera.

:func:`to_optical` moves the world's triangles and their planes into the optical frame first.
The result is a :class:`~aerial_sim.world.ray_hits.RayHits` as the ray caster gives it; the two
agree except on pixels whose centre lies within rounding of a silhouette edge (and in the last
float32 bit of the distance), which the tests bound.
"""

from __future__ import annotations

import math

import numpy as np

from aerial_sim.jit import COMPILED, njit

#: Inside-test tolerance of an edge function, relative to the squared size of the triangle's
#: coordinates (float64 rounding is about 1e-16 of it): closes cracks, never visibly widens an edge.
EDGE_TOLERANCE = 1e-12


@njit(cache=True, nogil=True)
def rotate_rays(rays, rotation, out):
    """World directions of the camera's optical-frame rays: out[i] = R rays[i] (``rotation`` R_world_optical).

    float32 throughout, each component summed in axis order (x, y, z) with no fused multiply-add, so
    a pose gives the same rays on every call (one pass, no temporaries: a NumPy product of an (N, 3)
    by a 3 x 3 array cost more than rasterising the frame).
    """
    for i in range(rays.shape[0]):
        x, y, z = rays[i, 0], rays[i, 1], rays[i, 2]
        for axis in range(3):
            out[i, axis] = x * rotation[axis, 0] + y * rotation[axis, 1] + z * rotation[axis, 2]


@njit(cache=True, nogil=True)
def to_optical(triangles, world_normals, origin, rotation, ids, count, vertices, plane_normals, plane_offsets):
    """Triangles and their planes in the optical frame: v = R^T (p - o), n = R^T n_world, offset = n . v_0.

    ``rotation`` is R_world_optical (columns: the optical axes in the world); only the triangles
    ``ids[:count]`` are moved; outputs (indexed like ``triangles``) are filled in place.
    """
    for j in range(count):
        t = ids[j]
        for k in range(3):
            dx = triangles[t, k, 0] - origin[0]
            dy = triangles[t, k, 1] - origin[1]
            dz = triangles[t, k, 2] - origin[2]
            for axis in range(3):
                vertices[t, k, axis] = dx * rotation[0, axis] + dy * rotation[1, axis] + dz * rotation[2, axis]
        nx, ny, nz = world_normals[t, 0], world_normals[t, 1], world_normals[t, 2]
        offset = 0.0
        for axis in range(3):
            value = nx * rotation[0, axis] + ny * rotation[1, axis] + nz * rotation[2, axis]
            plane_normals[t, axis] = value
            offset += value * vertices[t, 0, axis]
        plane_offsets[t] = offset


@njit(cache=True, nogil=True, error_model="numpy")
def rasterize(vertices, ids, count, width, height, fx, fy, cx, cy, near, inverse_depth, triangle_of_pixel, closed,
              surface_of_triangle, inside, plane_offsets):
    """Visibility buffer: ``triangle_of_pixel[v * width + u]`` = the nearest triangle covering pixel (u, v).

    ``vertices`` (T, 3, 3): triangle corners in the optical frame (x right, y down, z forward),
    metres, of which the triangles ``ids[:count]`` are drawn, in that order (ties keep the first);
    ``inverse_depth`` (H W,) zeros and ``triangle_of_pixel`` (H W,) -1 on entry. A triangle of a closed,
    outward-wound surface (``closed[t]``) that faces away from the camera (its plane n . p = ``plane_offsets[t]``
    with the offset > 0: the camera behind it) is skipped unless the camera is inside that surface's box
    (``inside[surface_of_triangle[t]]``): from outside, a closed surface's nearest hit always faces the camera.
    """
    polygon = np.empty((4, 3))
    projected = np.empty((4, 3))
    # The frustum's side planes, a pixel wider than the image: x = left z, x = right z, y = top z, y = bottom z.
    left, right = (-1.0 - cx) / fx, (width - cx) / fx
    top, bottom = (-1.0 - cy) / fy, (height - cy) / fy
    for j in range(count):
        t = ids[j]
        if closed[t] and plane_offsets[t] > 0.0 and not inside[surface_of_triangle[t]]:
            continue  # a back face of a closed object seen from outside
        # A triangle with all three corners beyond one side plane cannot cover a pixel (cheap early out).
        out_left = out_right = out_top = out_bottom = 0
        for k in range(3):
            x, y, z = vertices[t, k, 0], vertices[t, k, 1], vertices[t, k, 2]
            out_left += x < left * z
            out_right += x > right * z
            out_top += y < top * z
            out_bottom += y > bottom * z
        if out_left == 3 or out_right == 3 or out_top == 3 or out_bottom == 3:
            continue
        z0, z1, z2 = vertices[t, 0, 2], vertices[t, 1, 2], vertices[t, 2, 2]
        if z0 >= near and z1 >= near and z2 >= near:
            # Wholly beyond the near plane (most triangles): project in place, and skip a triangle whose box
            # holds no pixel centre (most of a large world's far triangles) before setting up its edges.
            w0, w1, w2 = 1.0 / z0, 1.0 / z1, 1.0 / z2
            u0, v0 = fx * vertices[t, 0, 0] * w0 + cx, fy * vertices[t, 0, 1] * w0 + cy
            u1, v1 = fx * vertices[t, 1, 0] * w1 + cx, fy * vertices[t, 1, 1] * w1 + cy
            u2, v2 = fx * vertices[t, 2, 0] * w2 + cx, fy * vertices[t, 2, 1] * w2 + cy
            if (math.ceil(max(min(u0, u1, u2), -1.0) - 1e-6) > math.floor(min(max(u0, u1, u2), float(width)) + 1e-6)
                    or math.ceil(max(min(v0, v1, v2), -1.0) - 1e-6)
                    > math.floor(min(max(v0, v1, v2), float(height)) + 1e-6)):
                continue
            _fill(u0, v0, w0, u1, v1, w1, u2, v2, w2, t, width, height, inverse_depth, triangle_of_pixel)
            continue
        count = _clip_near(vertices[t], near, polygon)
        if count < 3:
            continue
        for k in range(count):
            inverse_z = 1.0 / polygon[k, 2]
            projected[k, 0] = fx * polygon[k, 0] * inverse_z + cx
            projected[k, 1] = fy * polygon[k, 1] * inverse_z + cy
            projected[k, 2] = inverse_z
        for k in range(1, count - 1):
            _fill(projected[0, 0], projected[0, 1], projected[0, 2], projected[k, 0], projected[k, 1],
                  projected[k, 2], projected[k + 1, 0], projected[k + 1, 1], projected[k + 1, 2], t, width, height,
                  inverse_depth, triangle_of_pixel)


@njit(cache=True, nogil=True, inline="always")
def _clip_near(triangle, near, out):
    """Sutherland-Hodgman against z >= near: the clipped polygon's corners into ``out``; returns their count."""
    count = 0
    for k in range(3):
        a = triangle[k]
        b = triangle[(k + 1) % 3]
        a_inside = a[2] >= near
        if a_inside:
            out[count, 0], out[count, 1], out[count, 2] = a[0], a[1], a[2]
            count += 1
        if a_inside != (b[2] >= near):
            s = (near - a[2]) / (b[2] - a[2])
            out[count, 0] = a[0] + s * (b[0] - a[0])
            out[count, 1] = a[1] + s * (b[1] - a[1])
            out[count, 2] = near
            count += 1
    return count


@njit(cache=True, nogil=True, error_model="numpy")
def _fill(u0, v0, w0, u1, v1, w1, u2, v2, w2, triangle, width, height, inverse_depth, triangle_of_pixel):
    """Depth-test every pixel centre inside the projected triangle (corners (u, v, 1/z)) against the buffer."""
    area = (u1 - u0) * (v2 - v0) - (v1 - v0) * (u2 - u0)
    if not (abs(area) > 0.0) or not math.isfinite(area):
        return
    size = max(abs(u0), abs(u1), abs(u2), abs(v0), abs(v1), abs(v2), float(width), float(height))
    tolerance = EDGE_TOLERANCE * size * size
    u_low = max(min(u0, u1, u2), -1.0)
    u_high = min(max(u0, u1, u2), float(width))
    v_low = max(min(v0, v1, v2), -1.0)
    v_high = min(max(v0, v1, v2), float(height))
    x_first, x_last = int(math.ceil(u_low - 1e-6)), int(math.floor(u_high + 1e-6))
    y_first, y_last = int(math.ceil(v_low - 1e-6)), int(math.floor(v_high + 1e-6))
    x_first, y_first = max(x_first, 0), max(y_first, 0)
    x_last, y_last = min(x_last, width - 1), min(y_last, height - 1)
    if x_first > x_last or y_first > y_last:
        return
    sign = 1.0 if area > 0 else -1.0
    inverse_area = 1.0 / abs(area)
    # Edge k is opposite corner k; e_k(x, y) = a_k (y - y_k) - b_k (x - x_k), positive inside when area > 0.
    # Kept times the sign of the area (exact: a sign change), so inside is e_k >= -tolerance whatever the winding.
    a0, b0 = (u2 - u1) * sign, (v2 - v1) * sign
    a1, b1 = (u0 - u2) * sign, (v0 - v2) * sign
    a2, b2 = (u1 - u0) * sign, (v1 - v0) * sign
    r0 = 1.0 / b0 if b0 != 0.0 else 0.0
    r1 = 1.0 / b1 if b1 != 0.0 else 0.0
    r2 = 1.0 / b2 if b2 != 0.0 else 0.0
    for y in range(y_first, y_last + 1):
        row = y * width
        e0 = a0 * (y - v1) - b0 * (x_first - u1)
        e1 = a1 * (y - v2) - b1 * (x_first - u2)
        e2 = a2 * (y - v0) - b2 * (x_first - u0)
        # The row's span where every edge function can be inside, solved from its value at x_first and its
        # slope with a pixel to spare each side (long thin triangles, such as a road's, fill a small part of
        # their box): only the pixel centres there are tested.
        low, high = float(x_first), float(x_last)
        low, high = _edge_span(e0 + tolerance, b0, r0, x_first, low, high)
        low, high = _edge_span(e1 + tolerance, b1, r1, x_first, low, high)
        low, high = _edge_span(e2 + tolerance, b2, r2, x_first, low, high)
        if not (low <= high):
            continue
        start, stop = int(math.ceil(low)), int(math.floor(high))
        if start > x_first:
            e0 -= b0 * (start - x_first)
            e1 -= b1 * (start - x_first)
            e2 -= b2 * (start - x_first)
        low_e = -tolerance
        for x in range(start, stop + 1):
            if e0 >= low_e and e1 >= low_e and e2 >= low_e:
                w = (e0 * w0 + e1 * w1 + e2 * w2) * inverse_area
                index = row + x
                if w > inverse_depth[index]:
                    inverse_depth[index] = w
                    triangle_of_pixel[index] = triangle
            e0 -= b0
            e1 -= b1
            e2 -= b2


@njit(cache=True, nogil=True, inline="always")
def _edge_span(reach, slope, inverse_slope, x_first, low, high):
    """(low, high) narrowed to where reach - slope (x - x_first) >= 0 could hold, a pixel wider each side."""
    if slope > 0.0:
        high = min(high, x_first + reach * inverse_slope + 1.0)
    elif slope < 0.0:
        low = max(low, x_first + reach * inverse_slope - 1.0)
    elif reach < 0.0:
        high = -1.0
    return low, high


@njit(cache=True, nogil=True)
def frustum_triangles(lower, upper, first_leaf, leaf_size, triangle_count, origin, planes, ids):
    """The triangles in leaves of a :class:`~aerial_sim.world.shadow_kernels.TriangleBVH` whose boxes meet the
    view frustum, in leaf order, into ``ids``; returns their count.

    ``planes`` (K, 3) world normals of planes through ``origin``, the frustum being n_k . (p - o) >= 0 for
    all k: a box is skipped when its farthest corner along some n_k, n_k . (c - o) + |n_k| . e (centre c,
    half extents e), is below 0 (a millionth of its size of slack keeps rounding from skipping a box
    that touches a plane).
    """
    return _frustum_walk(lower, upper, 0, first_leaf, leaf_size, 0, triangle_count, origin, planes, ids, 0)


@njit(cache=True, nogil=True)
def _frustum_walk(lower, upper, node_offset, first_leaf, leaf_size, first_triangle, triangle_count, origin, planes,
                  ids, count):
    """:func:`frustum_triangles` of the tree whose heap starts at row ``node_offset`` of ``lower`` / ``upper`` and
    whose triangles are ``first_triangle`` + (0 .. ``triangle_count`` - 1), appended to ``ids`` after ``count``."""
    stack = np.empty(128, np.int64)
    stack[0] = 0
    top = 1
    while top > 0:
        top -= 1
        node = stack[top]
        row = node_offset + node
        if not (lower[row, 0] <= upper[row, 0]):  # empty
            continue
        cx = 0.5 * (lower[row, 0] + upper[row, 0]) - origin[0]
        cy = 0.5 * (lower[row, 1] + upper[row, 1]) - origin[1]
        cz = 0.5 * (lower[row, 2] + upper[row, 2]) - origin[2]
        ex = 0.5 * (upper[row, 0] - lower[row, 0])
        ey = 0.5 * (upper[row, 1] - lower[row, 1])
        ez = 0.5 * (upper[row, 2] - lower[row, 2])
        slack = 1e-6 * (abs(cx) + abs(cy) + abs(cz) + ex + ey + ez)
        outside = False
        for k in range(planes.shape[0]):
            nx, ny, nz = planes[k, 0], planes[k, 1], planes[k, 2]
            if nx * cx + ny * cy + nz * cz + abs(nx) * ex + abs(ny) * ey + abs(nz) * ez < -slack:
                outside = True
                break
        if outside:
            continue
        if node < first_leaf:
            stack[top] = 2 * node + 2  # the left child is popped first: leaves come out in order
            stack[top + 1] = 2 * node + 1
            top += 2
            continue
        leaf = node - first_leaf
        for t in range(leaf * leaf_size, min((leaf + 1) * leaf_size, triangle_count)):
            ids[count] = first_triangle + t
            count += 1
    return count


@njit(cache=True, nogil=True)
def lod_triangles(group_levels, level_size, level_node, level_first_leaf, level_first, level_count, lower, upper,
                  leaf_size, origin, planes, focal, pixels, ids, count):
    """Append to ``ids`` (after ``count``) the triangles in view of each level-of-detail group's chosen level;
    returns the new count (:mod:`aerial_sim.world.lod`).

    Group g's levels are ``group_levels[g]`` .. ``group_levels[g + 1]`` - 1 (finest first); level l has triangle
    size ``level_size[l]`` (m) and its own tree (heap at row ``level_node[l]`` of ``lower`` / ``upper``, first leaf
    ``level_first_leaf[l]``, triangles ``level_first[l]`` + (0 .. ``level_count[l]`` - 1)). The chosen level is the
    coarsest with size x ``focal`` <= ``pixels`` x d, d the distance from ``origin`` to the box of the group's
    finest level (0 inside it); ``pixels`` <= 0 always chooses the finest.
    """
    for g in range(group_levels.shape[0] - 1):
        first, last = group_levels[g], group_levels[g + 1]
        if first == last:
            continue
        chosen = first
        if pixels > 0.0:
            root = level_node[first]
            squared = 0.0
            for axis in range(3):
                gap = max(lower[root, axis] - origin[axis], origin[axis] - upper[root, axis], 0.0)
                squared += gap * gap
            reach = pixels * math.sqrt(squared)
            for level in range(last - 1, first, -1):
                if level_size[level] * focal <= reach:
                    chosen = level
                    break
        count = _frustum_walk(lower, upper, level_node[chosen], level_first_leaf[chosen], leaf_size,
                              level_first[chosen], level_count[chosen], origin, planes, ids, count)
    return count


@njit(cache=True, nogil=True, error_model="numpy")
def resolve_hits(origin, directions, rays_optical, triangle_of_pixel, plane_normals, plane_offsets,
                 world_normals, surface_of_triangle, index, ground_plane, distance, surface, normal, triangle):
    """Per pixel: nearest of the ground plane and the visible triangle's plane, as the ray caster reports hits.

    ``origin`` (3,) float32 camera centre (world); ``directions`` (N, 3) float32 unit world rays;
    ``rays_optical`` (N, 3) float32 the same rays in the optical frame; ``plane_normals`` (T, 3) and
    ``plane_offsets`` (T,) the triangles' planes n . p = offset in the optical frame (float64, camera
    at the origin); ``world_normals`` (T, 3) float32 unit normals; ``index`` (T,) the scene's index of
    each triangle, written to ``triangle`` (-1 for the ground plane or nothing); ``ground_plane``: whether
    the plane z = 0 is the ground (False over a terrain). Outputs as
    :func:`~aerial_sim.world.render_kernels.merge_hits` (``normal``: zero where nothing was hit, or no rows when
    normals are not asked for).
    """
    with_normals = normal.shape[0] > 0
    one = np.float32(1.0)
    zero = np.float32(0.0)
    oz = origin[2]
    for i in range(directions.shape[0]):
        t_ground = -oz / directions[i, 2]
        best = np.float32(np.inf)
        kind = 0
        which = -1
        if with_normals:
            normal[i, 0] = zero
            normal[i, 1] = zero
            normal[i, 2] = zero
        if ground_plane and math.isfinite(t_ground) and t_ground > 0:
            best = t_ground
            kind = 1
            if with_normals:
                normal[i, 0] = 0.0
                normal[i, 1] = 0.0
                normal[i, 2] = one if oz >= 0 else -one
        t = triangle_of_pixel[i]
        if t >= 0:
            n = plane_normals[t]
            along = n[0] * rays_optical[i, 0] + n[1] * rays_optical[i, 1] + n[2] * rays_optical[i, 2]
            hit = np.float32(plane_offsets[t] / along)
            if hit > 0 and hit < best:
                best = hit
                kind = surface_of_triangle[t]
                which = index[t]
                if with_normals:
                    gx, gy, gz = world_normals[t, 0], world_normals[t, 1], world_normals[t, 2]
                    if gx * directions[i, 0] + gy * directions[i, 1] + gz * directions[i, 2] > 0:
                        gx, gy, gz = -gx, -gy, -gz
                    normal[i, 0] = gx
                    normal[i, 1] = gy
                    normal[i, 2] = gz
        distance[i] = best
        surface[i] = kind
        triangle[i] = which


def warm_up() -> None:
    """Compile (or load from the cache) the kernels for the dtypes the camera passes."""
    if not COMPILED:
        return
    triangle = np.array([[[-1.0, -1.0, 2.0], [1.0, -1.0, 2.0], [0.0, 1.0, 0.5]]])
    rotate_rays(np.zeros((1, 3), np.float32), np.eye(3, dtype=np.float32), np.empty((1, 3), np.float32))
    ids = np.zeros(1, np.int32)
    frustum_triangles(np.zeros((1, 3)), np.ones((1, 3)), 0, 4, 1, np.zeros(3), np.eye(3), ids)
    one = np.zeros(1, np.int64)
    lod_triangles(np.array([0, 1], np.int64), np.ones(1), one, one, one, np.ones(1, np.int64), np.zeros((1, 3)),
                  np.ones((1, 3)), 4, np.zeros(3), np.eye(3), 1.0, 2.0, np.zeros(2, np.int32), 0)
    to_optical(triangle, np.array([[0.0, 0.0, 1.0]]), np.zeros(3), np.eye(3), ids, 1, np.empty((1, 3, 3)),
               np.empty((1, 3)), np.empty(1))
    inverse_depth, triangle_of_pixel = np.zeros(4), np.full(4, -1, np.int32)
    rasterize(triangle, ids, 1, 2, 2, 1.0, 1.0, 0.5, 0.5, 1.0, inverse_depth, triangle_of_pixel, np.zeros(1, np.uint8),
              np.zeros(1, np.int32), np.zeros(1, np.uint8), np.zeros(1))
    rays = np.array([[0.0, 0.0, 1.0]] * 4, np.float32)
    resolve_hits(np.zeros(3, np.float32), rays, rays, triangle_of_pixel, np.array([[0.0, 0.0, 1.0]]),
                 np.array([2.0]), np.array([[0.0, 0.0, 1.0]], np.float32), np.array([2], np.int32),
                 np.array([0], np.int32), True, np.empty(4, np.float32), np.empty(4, np.int32),
                 np.empty((4, 3), np.float32), np.empty(4, np.int32))
