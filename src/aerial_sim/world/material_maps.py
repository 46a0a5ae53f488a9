"""glTF normal, occlusion and emissive maps at the camera's pixels (glTF 2.0 spec, sec. 3.9.3-3.9.5).

For each pixel on a triangle whose material has maps (:class:`~aerial_sim.world.assets.SurfaceMaps`), at the
hit's texture coordinates (of the set each map's ``texCoord`` names, TEXCOORD_0 or TEXCOORD_1; sampled
bilinearly as the base colour is):

- normal map: the texel's RGB / 255 is a tangent-space normal n_t = ((2R - 1) s, (2G - 1) s, 2B - 1), s the
  map's ``scale``, normalised (spec 3.9.3: "scaledNormal = normalize((<sampled normal texture value> * 2.0 -
  1.0) * vec3(<normal scale>, <normal scale>, 1.0))"); the shading normal is n = normalize(x T + y B + z N) with
  N the triangle's geometric normal and T, B the tangent frame **at the pixel**: the part's vertex tangents
  (the file's TANGENT, xyz and w; where the file gives none, computed by MikkTSpace's construction as the spec
  asks, :func:`~aerial_sim.world.assets.mikktspace_tangents`) are interpolated at the hit's barycentric
  coordinates, made orthogonal to N and unit, and B = w (N x T) (spec sec. 3.7.2.1: "bitangent =
  cross(normal, tangent.xyz) * tangent.w"), as a vertex + fragment shader does; a quad whose texture is
  mapped unevenly over its two triangles therefore shades without a crease at their shared edge. Faces
  without vertex tangents (a transformed normal map, the simplified levels of :mod:`aerial_sim.world.lod`, a
  degenerate face) take the per-face frame of the texture coordinates: T the direction of increasing u on
  the face, B = sign (N x T), the sign making B the direction of increasing v (texture up: +Y of the map).
  Seen from its back, the frame is turned over (-T, -B, -N), as the
  Khronos sample viewer does. The shading normal replaces the geometric one in Lambert's law and the BRDF;
  the shadow rays, the depth, the ``normals`` image and every label keep the geometric one.
- occlusion map: the ambient (indirect) light is scaled by 1 + strength (R - 1) (spec 3.9.4: it "applies
  only to indirect lighting").
- emission: the emissive colour (emissiveFactor x KHR_materials_emissive_strength, 0-255), times the emissive
  texture's texel / 255 where there is one, is added to the light the surface reflects (spec 3.9.5), before the
  exposure and the fog: an emissive surface shows in shadow and at night.

:func:`apply_maps` is the compiled per-pixel loop (numba), :func:`apply_maps_reference` the NumPy code it is
tested against; :func:`material_maps_of` builds the per-triangle table once per scene. A scene without maps
has no table (``SceneSurfaces.maps`` is None) and its frames cost nothing more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from aerial_sim.jit import njit
from aerial_sim.world.assets import UV1_EMISSIVE as _UV1_EMISSIVE
from aerial_sim.world.assets import UV1_NORMAL as _UV1_NORMAL
from aerial_sim.world.assets import UV1_OCCLUSION as _UV1_OCCLUSION
from aerial_sim.world.render_kernels import _bilinear, _texel_corners


@dataclass(frozen=True)
class MaterialMaps:
    """Per triangle of a :class:`~aerial_sim.world.surface_tables.SceneSurfaces` (row-aligned): ``normal_texture``,
    ``occlusion_texture``, ``emissive_texture`` (T,) int32 indices into its texture table (-1: none),
    ``normal_scale``, ``occlusion_strength`` (T,) float32, ``emissive`` (T, 3) float32 (0-255; 0: none), and
    ``triangles`` (T, 3, 3) float64 and ``uv`` (T, 3, 2) for the tangent frames, and ``tangents`` (T, 3, 3)
    float32 the vertex tangents as (a, b, w) per corner of each face's edges
    (:attr:`~aerial_sim.world.assets.SurfacePart.tangents`; rows of w = 0 and None: none)."""

    normal_texture: np.ndarray
    normal_scale: np.ndarray
    occlusion_texture: np.ndarray
    occlusion_strength: np.ndarray
    emissive: np.ndarray
    emissive_texture: np.ndarray
    triangles: np.ndarray
    uv: np.ndarray
    tangents: np.ndarray | None = None

    @cached_property
    def frames(self) -> np.ndarray:
        """(T, 9) float32: T, B, N (unit) of each normal-mapped triangle (module docstring), zero for the others.
        With e_1 = P_1 - P_0, e_2 = P_2 - P_0 and their (du, dv): dP/du = (dv_2 e_1 - dv_1 e_2) / det,
        dP/dv = (du_1 e_2 - du_2 e_1) / det, det = du_1 dv_2 - du_2 dv_1. A face with the file's tangent
        (a, b, w): T = a e_1 + b e_2 (in its plane), B = w (N x T)."""
        frames = np.zeros((len(self.normal_texture), 9), np.float32)
        rows = np.flatnonzero(self.normal_texture >= 0)
        if len(rows) == 0:
            return frames
        corners, uv = self.triangles[rows], self.uv[rows].astype(np.float64)
        e1, e2 = corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]
        du1, dv1 = uv[:, 1, 0] - uv[:, 0, 0], uv[:, 1, 1] - uv[:, 0, 1]
        du2, dv2 = uv[:, 2, 0] - uv[:, 0, 0], uv[:, 2, 1] - uv[:, 0, 1]
        det = du1 * dv2 - du2 * dv1
        normal = np.cross(e1, e2)
        normal /= np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-30)
        with np.errstate(divide="ignore", invalid="ignore"):
            tangent = (dv2[:, None] * e1 - dv1[:, None] * e2) / det[:, None]
            along_v = (du1[:, None] * e2 - du2[:, None] * e1) / det[:, None]
        bad = ~np.isfinite(tangent).all(axis=1) | (det == 0)
        tangent[bad], along_v[bad] = e1[bad], np.cross(normal[bad], e1[bad])  # no uv gradient: any frame
        tangent -= normal * (tangent * normal).sum(axis=1, keepdims=True)
        tangent /= np.maximum(np.linalg.norm(tangent, axis=1, keepdims=True), 1e-30)
        bitangent = np.cross(normal, tangent)
        sign = np.where((bitangent * along_v).sum(axis=1) < 0, -1.0, 1.0)
        if self.tangents is not None:  # the vertex tangents where the part has them: their mean, for this frame
            given = self.tangents[rows].astype(np.float64).mean(axis=1)
            keep = given[:, 2] != 0
            from_file = given[keep, 0:1] * e1[keep] + given[keep, 1:2] * e2[keep]
            from_file -= normal[keep] * (from_file * normal[keep]).sum(axis=1, keepdims=True)
            length = np.linalg.norm(from_file, axis=1, keepdims=True)
            keep[keep] = length[:, 0] > 0
            tangent[keep] = (from_file / np.where(length > 0, length, 1.0))[length[:, 0] > 0]
            bitangent[keep] = np.cross(normal[keep], tangent[keep])
            sign[keep] = given[keep, 2]
        bitangent *= sign[:, None]
        frames[rows] = np.concatenate([tangent, bitangent, normal], axis=1)
        return frames

    @cached_property
    def tangent_planes(self) -> tuple[np.ndarray, np.ndarray]:
        """((T, 12) float64, (T,) float32): the tangent of each normal-mapped triangle with vertex tangents as an
        affine function of the hit point p, T(p) = A p + c (A row-major, then c): the corners' tangents
        T_k = a_k e_1 + b_k e_2 interpolated at p's barycentric coordinates, T_0 + b_1 (T_1 - T_0) + b_2 (T_2 - T_0)
        with b_1 = g_1 . (p - P_0), b_2 = g_2 . (p - P_0) (g the dual basis of e_1, e_2 in the face's plane), as a
        vertex shader's interpolated tangent; and each triangle's bitangent sign w (0: none, the per-face frame)."""
        count = len(self.normal_texture)
        planes, signs = np.zeros((count, 12)), np.zeros(count, np.float32)
        if self.tangents is None:
            return planes, signs
        rows = np.flatnonzero((self.normal_texture >= 0) & (self.tangents[:, 0, 2] != 0))
        if len(rows) == 0:
            return planes, signs
        corners, given = self.triangles[rows], self.tangents[rows].astype(np.float64)
        e1, e2 = corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]
        t = given[:, :, 0:1] * e1[:, None, :] + given[:, :, 1:2] * e2[:, None, :]  # (R, 3 corners, 3)
        d00, d01, d11 = (e1 * e1).sum(1), (e1 * e2).sum(1), (e2 * e2).sum(1)
        den = d00 * d11 - d01 * d01
        with np.errstate(divide="ignore", invalid="ignore"):
            g1 = (d11[:, None] * e1 - d01[:, None] * e2) / den[:, None]
            g2 = (d00[:, None] * e2 - d01[:, None] * e1) / den[:, None]
        a = (t[:, 1, :, None] - t[:, 0, :, None]) * g1[:, None, :] + (t[:, 2, :, None] - t[:, 0, :, None]) * g2[:, None, :]
        c = t[:, 0] - np.einsum("rij,rj->ri", a, corners[:, 0])
        good = np.isfinite(a).all(axis=(1, 2)) & np.isfinite(c).all(axis=1) & (den > 0)
        planes[rows[good], :9] = a[good].reshape(-1, 9)
        planes[rows[good], 9:] = c[good]
        signs[rows[good]] = np.where(given[good, 0, 2] < 0, -1.0, 1.0)
        return planes, signs


def material_maps_of(chunks: list[tuple[int, object]], texture_id, triangles: np.ndarray,
                     uv: np.ndarray, tangents: np.ndarray | None = None) -> MaterialMaps | None:
    """The table of ``chunks`` [(triangle count, SurfaceMaps or None)] in row order, their images numbered by
    ``texture_id`` (image -> index in the texture table), with the rows' ``tangents`` (MaterialMaps); None when
    no chunk has maps."""
    if all(maps is None for _, maps in chunks):
        return None
    columns = {name: [] for name in ("normal_texture", "normal_scale", "occlusion_texture", "occlusion_strength",
                                     "emissive", "emissive_texture")}
    for count, maps in chunks:
        def index(image):
            return np.full(count, -1 if maps is None or image is None else texture_id(image), np.int32)

        columns["normal_texture"].append(index(None if maps is None else maps.normal_texture))
        columns["occlusion_texture"].append(index(None if maps is None else maps.occlusion_texture))
        columns["emissive_texture"].append(index(None if maps is None else maps.emissive_texture))
        columns["normal_scale"].append(np.full(count, 1.0 if maps is None else maps.normal_scale, np.float32))
        columns["occlusion_strength"].append(np.full(count, 1.0 if maps is None else maps.occlusion_strength,
                                                     np.float32))
        columns["emissive"].append(np.tile(np.asarray((0.0,) * 3 if maps is None else maps.emissive, np.float32),
                                           (count, 1)))
    return MaterialMaps(**{k: np.ascontiguousarray(np.concatenate(v)) for k, v in columns.items()},
                        triangles=triangles, uv=uv, tangents=tangents)


def has_texture(maps: MaterialMaps | None) -> np.ndarray | bool:
    """(T,) whether each triangle has a map texture (False without a table): its texture coordinates are needed."""
    if maps is None:
        return False
    return (maps.normal_texture >= 0) | (maps.occlusion_texture >= 0) | (maps.emissive_texture >= 0)


@njit(cache=True, nogil=True, error_model="numpy")
def apply_maps(origin, directions, distance, triangle, normal, uv_plane, texels, texture_table, normal_texture,
               normal_scale, occlusion_texture, occlusion_strength, emissive, emissive_texture, frames,
               shading_normal, ambient_scale, emission, uv_plane1, uv_sets, tangent_planes, tangent_signs):
    """Per pixel: the shading normal into ``shading_normal`` (N, 3), the ambient factor into ``ambient_scale``
    (N,) and the emitted colour into ``emission`` (N, 3) (module docstring); pixels without maps get the
    geometric normal, 1 and 0. ``uv_plane1`` (T, 8) and ``uv_sets`` (T,) uint8: the TEXCOORD_1 planes and which
    maps are sampled there (:class:`~aerial_sim.world.surface_tables.SceneSurfaces`), or both None (none is:
    numba then compiles the call without their code). ``tangent_planes`` (T, 12), ``tangent_signs`` (T,):
    :attr:`MaterialMaps.tangent_planes` (the tangent interpolated at the pixel; sign 0: the per-face frame)."""
    one = np.float32(1.0)
    for i in range(directions.shape[0]):
        shading_normal[i, 0], shading_normal[i, 1], shading_normal[i, 2] = normal[i, 0], normal[i, 1], normal[i, 2]
        ambient_scale[i] = one
        emission[i, 0] = emission[i, 1] = emission[i, 2] = np.float32(0.0)
        w = triangle[i]
        if w < 0:
            continue
        kn, ko, ke = normal_texture[w], occlusion_texture[w], emissive_texture[w]
        er, eg, eb = emissive[w, 0], emissive[w, 1], emissive[w, 2]
        if kn < 0 and ko < 0 and er == 0 and eg == 0 and eb == 0:
            continue
        u = v = u1 = v1 = 0.0
        sets = 0
        if kn >= 0 or ko >= 0 or ke >= 0:
            px = origin[0] + np.float64(directions[i, 0] * distance[i])
            py = origin[1] + np.float64(directions[i, 1] * distance[i])
            pz = origin[2] + np.float64(directions[i, 2] * distance[i])
            u = uv_plane[w, 0] * px + uv_plane[w, 1] * py + uv_plane[w, 2] * pz + uv_plane[w, 3]
            v = uv_plane[w, 4] * px + uv_plane[w, 5] * py + uv_plane[w, 6] * pz + uv_plane[w, 7]
            if uv_sets is not None:  # None: numba compiles the call without this
                sets = uv_sets[w]
                if sets != 0:
                    u1 = uv_plane1[w, 0] * px + uv_plane1[w, 1] * py + uv_plane1[w, 2] * pz + uv_plane1[w, 3]
                    v1 = uv_plane1[w, 4] * px + uv_plane1[w, 5] * py + uv_plane1[w, 6] * pz + uv_plane1[w, 7]
        if kn >= 0:
            mu, mv = (u1, v1) if sets & _UV1_NORMAL else (u, v)
            i00, i01, i10, i11, fx, fy = _texel_corners(mu, mv, texture_table[kn, 0], texture_table[kn, 1],
                                                        texture_table[kn, 2])
            s = normal_scale[w]
            x = (np.float32(2.0) * _bilinear(texels, i00, i01, i10, i11, fx, fy) - one) * s
            y = (np.float32(2.0) * _bilinear(texels, i00 + 1, i01 + 1, i10 + 1, i11 + 1, fx, fy) - one) * s
            z = np.float32(2.0) * _bilinear(texels, i00 + 2, i01 + 2, i10 + 2, i11 + 2, fx, fy) - one
            side = one
            if normal[i, 0] * frames[w, 6] + normal[i, 1] * frames[w, 7] + normal[i, 2] * frames[w, 8] < 0:
                side = -one  # seen from the back: the frame turned over
            tx, ty, tz = frames[w, 0], frames[w, 1], frames[w, 2]
            bx, by, bz = frames[w, 3], frames[w, 4], frames[w, 5]
            gx, gy, gz = frames[w, 6], frames[w, 7], frames[w, 8]
            sign = tangent_signs[w]
            if sign != 0:  # the corners' tangents interpolated here, made orthogonal to N, unit; B = w (N x T)
                p = tangent_planes[w]
                qx = p[0] * px + p[1] * py + p[2] * pz + p[9]
                qy = p[3] * px + p[4] * py + p[5] * pz + p[10]
                qz = p[6] * px + p[7] * py + p[8] * pz + p[11]
                along = qx * gx + qy * gy + qz * gz
                qx, qy, qz = qx - along * gx, qy - along * gy, qz - along * gz
                size = math.sqrt(qx * qx + qy * qy + qz * qz)
                if size > 1e-12:
                    tx, ty, tz = np.float32(qx / size), np.float32(qy / size), np.float32(qz / size)
                    bx, by, bz = sign * (gy * tz - gz * ty), sign * (gz * tx - gx * tz), sign * (gx * ty - gy * tx)
            nx = side * (x * tx + y * bx + z * gx)
            ny = side * (x * ty + y * by + z * gy)
            nz = side * (x * tz + y * bz + z * gz)
            length = np.float32(math.sqrt(nx * nx + ny * ny + nz * nz))
            if length > 0:
                shading_normal[i, 0], shading_normal[i, 1], shading_normal[i, 2] = nx / length, ny / length, nz / length
        if ko >= 0:
            mu, mv = (u1, v1) if sets & _UV1_OCCLUSION else (u, v)
            i00, i01, i10, i11, fx, fy = _texel_corners(mu, mv, texture_table[ko, 0], texture_table[ko, 1],
                                                        texture_table[ko, 2])
            ambient_scale[i] = one + occlusion_strength[w] * (_bilinear(texels, i00, i01, i10, i11, fx, fy) - one)
        if ke >= 0:
            mu, mv = (u1, v1) if sets & _UV1_EMISSIVE else (u, v)
            i00, i01, i10, i11, fx, fy = _texel_corners(mu, mv, texture_table[ke, 0], texture_table[ke, 1],
                                                        texture_table[ke, 2])
            er = er * _bilinear(texels, i00, i01, i10, i11, fx, fy)
            eg = eg * _bilinear(texels, i00 + 1, i01 + 1, i10 + 1, i11 + 1, fx, fy)
            eb = eb * _bilinear(texels, i00 + 2, i01 + 2, i10 + 2, i11 + 2, fx, fy)
        emission[i, 0], emission[i, 1], emission[i, 2] = er, eg, eb


def shading_inputs(surfaces, origin, directions, hits) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(shading normals (N, 3), ambient factors (N,), emission (N, 3)) of a frame's pixels, compiled."""
    maps = surfaces.maps
    count = len(directions)
    shading_normal = np.empty((count, 3), np.float32)
    ambient_scale = np.empty(count, np.float32)
    emission = np.empty((count, 3), np.float32)
    apply_maps(np.asarray(origin, np.float64), directions, hits.distance, hits.triangle, hits.normal,
               surfaces.uv_plane, surfaces.texels, surfaces.texture_table, maps.normal_texture, maps.normal_scale,
               maps.occlusion_texture, maps.occlusion_strength, maps.emissive, maps.emissive_texture, maps.frames,
               shading_normal, ambient_scale, emission, surfaces.uv_plane1, surfaces.uv_sets, *maps.tangent_planes)
    return shading_normal, ambient_scale, emission


def apply_maps_reference(surfaces, sample, origin, directions, hits) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NumPy version of :func:`shading_inputs`; ``sample(rows, textures, bit)`` gives the bilinear texel / 255
    (M, 3) of texture ``textures`` (M,) at the hits ``rows``, at TEXCOORD_1 where the row's ``uv_sets`` has
    ``bit`` (the camera's reference sampler)."""
    maps = surfaces.maps
    count = len(directions)
    shading_normal = hits.normal.astype(np.float32).copy()
    ambient_scale = np.ones(count, np.float32)
    emission = np.zeros((count, 3), np.float32)
    triangle = hits.triangle
    rows = np.flatnonzero(triangle >= 0)
    w = triangle[rows]
    mapped = rows[maps.normal_texture[w] >= 0]
    if len(mapped):
        w = triangle[mapped]
        texel = sample(mapped, maps.normal_texture[w], _UV1_NORMAL)
        scale = maps.normal_scale[w][:, None]
        tangent_space = np.concatenate([(2.0 * texel[:, :2] - 1.0) * scale, 2.0 * texel[:, 2:] - 1.0], axis=1)
        frames = maps.frames[w].astype(np.float64)
        planes, signs = maps.tangent_planes[0][w], maps.tangent_planes[1][w]
        interpolated = np.flatnonzero(signs != 0)
        if len(interpolated):  # the corners' tangents at the hit point (see apply_maps)
            point = np.asarray(origin, np.float64) + directions[mapped[interpolated]].astype(np.float64) \
                * hits.distance[mapped[interpolated], None].astype(np.float64)
            q = np.einsum("rij,rj->ri", planes[interpolated, :9].reshape(-1, 3, 3), point) + planes[interpolated, 9:]
            g = frames[interpolated, 6:9]
            q -= g * (q * g).sum(axis=1, keepdims=True)
            size = np.linalg.norm(q, axis=1, keepdims=True)
            ok = size[:, 0] > 1e-12
            t = q[ok] / size[ok]
            frames[interpolated[ok], 0:3] = t
            frames[interpolated[ok], 3:6] = signs[interpolated[ok], None] * np.cross(g[ok], t)
        side = np.where((hits.normal[mapped] * frames[:, 6:9]).sum(axis=1) < 0, -1.0, 1.0)[:, None]
        n = side * (tangent_space[:, 0:1] * frames[:, 0:3] + tangent_space[:, 1:2] * frames[:, 3:6]
                    + tangent_space[:, 2:3] * frames[:, 6:9])
        length = np.linalg.norm(n, axis=1, keepdims=True)
        shading_normal[mapped] = np.where(length > 0, n / np.where(length > 0, length, 1.0), shading_normal[mapped])
    w = triangle[rows]
    occluded = rows[maps.occlusion_texture[w] >= 0]
    if len(occluded):
        w = triangle[occluded]
        red = sample(occluded, maps.occlusion_texture[w], _UV1_OCCLUSION)[:, 0]
        ambient_scale[occluded] = 1.0 + maps.occlusion_strength[w] * (red - 1.0)
    w = triangle[rows]
    glowing = rows[maps.emissive[w].any(axis=1)]
    if len(glowing):
        w = triangle[glowing]
        emission[glowing] = maps.emissive[w]
        textured = maps.emissive_texture[w] >= 0
        if textured.any():
            emission[glowing[textured]] *= sample(glowing[textured], maps.emissive_texture[w[textured]],
                                                  _UV1_EMISSIVE)
    return shading_normal, ambient_scale, emission


def warm_up(uv_sets: bool = False) -> None:
    """Compile (or load from the cache) :func:`apply_maps`, and the shading kernel's version with maps, for the
    dtypes the camera passes (``uv_sets``: their versions for a scene with textures on TEXCOORD_1 too)."""
    from aerial_sim.jit import COMPILED
    from aerial_sim.world import render_kernels

    if not COMPILED:
        return
    render_kernels.warm_up(shading=True, maps=True, uv_sets=uv_sets)
    one = np.ones(1, np.float32)
    none = np.full(1, -1, np.int32)
    for sets in ((None, None),) + (((np.zeros((1, 8)), np.zeros(1, np.uint8)),) if uv_sets else ()):
        apply_maps(np.zeros(3), np.array([[0.0, 0.0, -1.0]], np.float32), one, np.zeros(1, np.int32),
                   np.zeros((1, 3), np.float32), np.zeros((1, 8)), np.zeros(3, np.uint8), np.zeros((1, 3), np.int64),
                   none, one, none, one, np.zeros((1, 3), np.float32), none, np.zeros((1, 9), np.float32),
                   np.empty((1, 3), np.float32), np.empty(1, np.float32), np.empty((1, 3), np.float32), *sets,
                   np.zeros((1, 12)), np.zeros(1, np.float32))
