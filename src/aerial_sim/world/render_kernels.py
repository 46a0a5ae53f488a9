"""Compiled per-ray loops of the ray caster and the camera's colour shading.

The same arithmetic as the NumPy reference paths (:meth:`RayCaster.cast` and
:meth:`CameraModel.render` with ``reference=True``), written once per ray and
compiled by numba, so a 460x320 frame makes one pass over its rays instead of
a dozen NumPy passes with masked temporaries:

- :func:`merge_hits`: the analytic ground plane z = 0 (t = -o_z / d_z, kept
  when finite and > 0), then Embree's nearest triangle hit where it is nearer
  (ties go to the ground, as in the reference), and the unit geometric normal
  turned to face the ray origin (n <- -n when n.d > 0).
- :func:`shade_surfaces`: Lambert's cosine law, colour = albedo x (a + (1 - a)
  max(0, min(1, n.s))) (a the ambient share, s the unit sun direction; the
  direct term dropped where a shadow ray found the sun hidden), the albedo a
  triangle's colour times its texture sampled at the hit (barycentric uv,
  bilinear), the ground's 2-tone checker (albedo x 0.85 on cells with odd
  floor(x/c) + floor(y/c)), exposure gain, distance fog, a sky gradient where
  nothing was hit, rounded to uint8. A glTF metallic-roughness surface (metallic
  m >= 0, roughness r) takes the direct sun through the glTF 2.0 spec's BRDF
  (Appendix B; Karis, *Real Shading in Unreal Engine 4*, SIGGRAPH 2013) instead
  of Lambert's: f = (1 - F)(1 - m) c / pi + F D G / (4 n.l n.v), with GGX
  D = a^2 / (pi ((n.h)^2 (a^2 - 1) + 1)^2), a = r^2 (r >= 0.03), Smith-Schlick
  G = G1(n.l) G1(n.v), G1(x) = x / (x (1 - k) + k), k = (r + 1)^2 / 8, Schlick
  F = F0 + (1 - F0)(1 - v.h)^5, F0 = 0.04 (1 - m) + c m (per channel, c the
  albedo / 255), h the half vector of the sun s and the view v = -d; the sun's
  irradiance is the one that gives a Lambert albedo c its colour c x (1 - a) n.l,
  so direct = (1 - a) n.l [(1 - F)(1 - m) c + pi f_spec] x 255. The ambient share
  lights every surface as a uniform sky would: a x albedo (for a metal the
  reflectance of a uniform environment is about F0 = its base colour).

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
def merge_hits(origins, directions, tfar, prim, ng, surface_of_triangle, ground_plane, distance, surface, normal,
               triangle):
    """Nearest of ground plane and Embree hit per ray, into ``distance``, ``surface``, ``triangle`` (-1: none or
    the ground plane) and (if it has rows) ``normal``.

    ``tfar``, ``prim``, ``ng``: Embree's per-ray distance, primitive id (-1: no hit) and geometric
    normal, or empty arrays when the scene has no triangles; ``ground_plane``: whether the plane z = 0
    is the ground (False over a terrain, whose triangles are then the ground).
    """
    with_objects = prim.shape[0] > 0
    with_normals = normal.shape[0] > 0
    one = np.float32(1.0)
    for i in range(directions.shape[0]):
        oz = origins[i, 2]
        t_ground = -oz / directions[i, 2]
        best = np.float32(np.inf)
        kind = 0
        which = -1
        if ground_plane and math.isfinite(t_ground) and t_ground > 0:
            best = t_ground
            kind = 1
            if with_normals:
                normal[i, 0] = 0.0
                normal[i, 1] = 0.0
                normal[i, 2] = one if oz >= 0 else -one
        if with_objects and prim[i] >= 0 and tfar[i] < best:
            best = tfar[i]
            kind = surface_of_triangle[prim[i]]
            which = prim[i]
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
        triangle[i] = which


@njit(cache=True, nogil=True, error_model="numpy")
def shade_surfaces(origin, directions, distance, surface, triangle, normal, lit, uv_plane, texture_of,
                   albedo_of, texels, texture_table, ground_albedo, sun, ambient, lit_share, checker_size_m,
                   sky_horizon, sky_zenith, sky_gradient, fog_density, fog_color, gain, pbr_of, pbr_texture_of, out,
                   ambient_scale, emission, uv_plane1, uv_sets):
    """Shaded uint8 RGB per ray into ``out`` (N, 3):
    colour = albedo x (a + (1 - a) direct max(0, n.s) lit) x gain, fogged, + 0.5, clipped to 255.

    albedo: the triangle's base colour, times its texture's bilinear sample at the hit's texture
    coordinates (the corners' uv interpolated barycentrically, written as the affine map ``uv_plane`` of
    the point; repeat wrapping) / 255; the ground
    plane's colour, or an untextured terrain's, in the 2-tone checker. Fog: c + (fog - c)(1 - exp(-k d)).
    Sky: the horizon colour, blended linearly in the ray's up component toward the zenith colour.

    ``origin`` (3,) float64; ``triangle`` (N,) int32 scene triangle index (-1: ground plane or nothing);
    ``lit`` (N,) uint8, 0 where the sun is hidden (shadow); ``uv_plane`` (T, 8) float64,
    ``texture_of`` (T,) int32, ``albedo_of`` (T, 3) float32: the
    :class:`~aerial_sim.world.surface_tables.SceneSurfaces` arrays, as ``pbr_of`` (T, 2) float32 (metallic,
    roughness; metallic < 0: Lambert) and ``pbr_texture_of`` (T,) int32 (its metallicRoughnessTexture in
    ``texture_table``, -1 none: blue x metallic, green x roughness); ``ambient`` = a and ``lit_share`` =
    (1 - a) x direct light, float32. ``ambient_scale`` (N,) and ``emission`` (N, 3) float32, or both None
    (no maps: numba then compiles the call without their code, as fast as before they came): the glTF occlusion factor of each pixel's ambient light and the colour it emits, added before the
    exposure and fog (:mod:`aerial_sim.world.material_maps`, whose shading normals come as ``normal``).
    ``uv_plane1`` (T, 8) float64 and ``uv_sets`` (T,) uint8: the glTF TEXCOORD_1 planes and which textures are
    sampled there (bit 1 the base colour's, 2 the metallicRoughnessTexture's), or both None (no texture on
    TEXCOORD_1: compiled without their code).
    (One loop, no per-pixel call: a call with these arguments costs more than the shading.)
    """
    half = np.float32(0.5)
    for i in range(directions.shape[0]):
        kind = surface[i]
        if kind == 0:
            t = np.float32(0.0)
            if sky_gradient:
                t = max(directions[i, 2], np.float32(0.0))
            for c in range(3):
                out[i, c] = np.uint8(sky_horizon[c] + (sky_zenith[c] - sky_horizon[c]) * t + half)
            continue
        w = triangle[i]
        r, g, b = ground_albedo[0], ground_albedo[1], ground_albedo[2]
        textured = False
        if w >= 0:
            r, g, b = albedo_of[w, 0], albedo_of[w, 1], albedo_of[w, 2]
            k = texture_of[w]
            if k >= 0:
                textured = True
                px = origin[0] + np.float64(directions[i, 0] * distance[i])
                py = origin[1] + np.float64(directions[i, 1] * distance[i])
                pz = origin[2] + np.float64(directions[i, 2] * distance[i])
                # Texture coordinates as an affine function of the hit point on the triangle's plane.
                u = uv_plane[w, 0] * px + uv_plane[w, 1] * py + uv_plane[w, 2] * pz + uv_plane[w, 3]
                v = uv_plane[w, 4] * px + uv_plane[w, 5] * py + uv_plane[w, 6] * pz + uv_plane[w, 7]
                if uv_sets is not None:  # None: numba compiles the call without this
                    if uv_sets[w] & 1:  # the base colour texture on TEXCOORD_1
                        u = uv_plane1[w, 0] * px + uv_plane1[w, 1] * py + uv_plane1[w, 2] * pz + uv_plane1[w, 3]
                        v = uv_plane1[w, 4] * px + uv_plane1[w, 5] * py + uv_plane1[w, 6] * pz + uv_plane1[w, 7]
                offset, width, height = texture_table[k, 0], texture_table[k, 1], texture_table[k, 2]
                x = (u - math.floor(u)) * width - 0.5
                y = (1.0 - (v - math.floor(v))) * height - 0.5
                x0, y0 = math.floor(x), math.floor(y)
                fx, fy = np.float32(x - x0), np.float32(y - y0)
                # x0 in [-1, width - 1], y0 in [-1, height - 1]: wrap by one comparison, not an integer division.
                xa, ya = int(x0), int(y0)
                if xa < 0:
                    xa += width
                if ya < 0:
                    ya += height
                xb, yb = xa + 1, ya + 1
                if xb == width:
                    xb = 0
                if yb == height:
                    yb = 0
                i00 = offset + (ya * width + xa) * 3
                i01 = offset + (ya * width + xb) * 3
                i10 = offset + (yb * width + xa) * 3
                i11 = offset + (yb * width + xb) * 3
                r = r * _bilinear(texels, i00, i01, i10, i11, fx, fy)
                g = g * _bilinear(texels, i00 + 1, i01 + 1, i10 + 1, i11 + 1, fx, fy)
                b = b * _bilinear(texels, i00 + 2, i01 + 2, i10 + 2, i11 + 2, fx, fy)
        factor = np.float32(1.0)
        if kind == 1 and not textured and checker_size_m > 0:
            x = origin[0] + np.float64(directions[i, 0] * distance[i])
            y = origin[1] + np.float64(directions[i, 1] * distance[i])
            cell = np.int64(math.floor(x / checker_size_m)) + np.int64(math.floor(y / checker_size_m))
            if cell & 1:
                factor = np.float32(0.85)
        cosine = normal[i, 0] * sun[0] + normal[i, 1] * sun[1] + normal[i, 2] * sun[2]
        cosine = min(max(cosine, np.float32(0.0)), np.float32(1.0))
        if lit[i] == 0:
            cosine = np.float32(0.0)
        fog = np.float32(0.0)
        if fog_density > 0:
            fog = np.float32(1.0 - math.exp(-fog_density * distance[i]))
        a = ambient
        if ambient_scale is not None:  # None: numba compiles this call without the maps' code
            a = ambient * ambient_scale[i]
        if w >= 0 and pbr_of[w, 0] >= 0:  # a glTF metallic-roughness surface: the BRDF (module docstring)
            metallic, roughness = pbr_of[w, 0], pbr_of[w, 1]
            k = pbr_texture_of[w]
            if k >= 0:
                px = origin[0] + np.float64(directions[i, 0] * distance[i])
                py = origin[1] + np.float64(directions[i, 1] * distance[i])
                pz = origin[2] + np.float64(directions[i, 2] * distance[i])
                u = uv_plane[w, 0] * px + uv_plane[w, 1] * py + uv_plane[w, 2] * pz + uv_plane[w, 3]
                v = uv_plane[w, 4] * px + uv_plane[w, 5] * py + uv_plane[w, 6] * pz + uv_plane[w, 7]
                if uv_sets is not None:
                    if uv_sets[w] & 2:  # the metallicRoughnessTexture on TEXCOORD_1
                        u = uv_plane1[w, 0] * px + uv_plane1[w, 1] * py + uv_plane1[w, 2] * pz + uv_plane1[w, 3]
                        v = uv_plane1[w, 4] * px + uv_plane1[w, 5] * py + uv_plane1[w, 6] * pz + uv_plane1[w, 7]
                i00, i01, i10, i11, fx, fy = _texel_corners(u, v, texture_table[k, 0], texture_table[k, 1],
                                                            texture_table[k, 2])
                roughness = roughness * _bilinear(texels, i00 + 1, i01 + 1, i10 + 1, i11 + 1, fx, fy)
                metallic = metallic * _bilinear(texels, i00 + 2, i01 + 2, i10 + 2, i11 + 2, fx, fy)
            d_g = np.float32(0.0)  # pi D G / (4 n.l n.v), and Schlick's (1 - v.h)^5
            fresnel_w = np.float32(0.0)
            if cosine > 0:
                d_g, fresnel_w = _ggx(normal[i, 0], normal[i, 1], normal[i, 2], -directions[i, 0], -directions[i, 1],
                                      -directions[i, 2], sun[0], sun[1], sun[2], cosine, roughness)
            for c in range(3):
                albedo = r if c == 0 else (g if c == 1 else b)
                f0 = np.float32(0.04) * (np.float32(1.0) - metallic) + albedo * np.float32(1.0 / 255.0) * metallic
                fresnel = f0 + (np.float32(1.0) - f0) * fresnel_w
                direct = (np.float32(1.0) - fresnel) * (np.float32(1.0) - metallic) * albedo \
                    + d_g * fresnel * np.float32(255.0)
                value = a * albedo + lit_share * cosine * direct
                if ambient_scale is not None:
                    value = value + emission[i, c]
                if gain != 1:
                    value = value * gain
                if fog_density > 0:
                    value = value + (fog_color[c] - value) * fog
                out[i, c] = np.uint8(min(value + half, np.float32(255.0)))
            continue
        shade = a + lit_share * cosine
        if ambient_scale is not None:  # glTF emission (material_maps)
            for c in range(3):
                albedo = r if c == 0 else (g if c == 1 else b)
                value = albedo * factor * shade + emission[i, c]
                if gain != 1:
                    value = value * gain
                if fog_density > 0:
                    value = value + (fog_color[c] - value) * fog
                out[i, c] = np.uint8(min(value + half, np.float32(255.0)))
            continue
        for c in range(3):
            albedo = r if c == 0 else (g if c == 1 else b)
            value = albedo * factor * shade
            if gain != 1:
                value = value * gain
            if fog_density > 0:
                value = value + (fog_color[c] - value) * fog
            out[i, c] = np.uint8(min(value + half, np.float32(255.0)))


@njit(cache=True, nogil=True, inline="always")
def _texel_corners(u, v, offset, width, height):
    """Flat indices of the four texels around texture coordinates (u, v) (repeat wrapping, (0, 0) bottom-left)
    and the bilinear weights (fx, fy): the base-colour sampling of :func:`shade_surfaces`."""
    x = (u - math.floor(u)) * width - 0.5
    y = (1.0 - (v - math.floor(v))) * height - 0.5
    x0, y0 = math.floor(x), math.floor(y)
    fx, fy = np.float32(x - x0), np.float32(y - y0)
    xa, ya = int(x0), int(y0)
    if xa < 0:
        xa += width
    if ya < 0:
        ya += height
    xb, yb = xa + 1, ya + 1
    if xb == width:
        xb = 0
    if yb == height:
        yb = 0
    return (offset + (ya * width + xa) * 3, offset + (ya * width + xb) * 3, offset + (yb * width + xa) * 3,
            offset + (yb * width + xb) * 3, fx, fy)


@njit(cache=True, nogil=True, inline="always")
def _ggx(nx, ny, nz, vx, vy, vz, sx, sy, sz, nl, roughness):
    """(pi D G / (4 n.l n.v), (1 - v.h)^5) of the glTF BRDF's specular term (module docstring), float32."""
    one = np.float32(1.0)
    r = max(roughness, np.float32(0.03))
    hx, hy, hz = sx + vx, sy + vy, sz + vz
    length = np.float32(math.sqrt(hx * hx + hy * hy + hz * hz))
    if length == 0:
        return np.float32(0.0), np.float32(0.0)
    hx, hy, hz = hx / length, hy / length, hz / length
    nh = max(nx * hx + ny * hy + nz * hz, np.float32(0.0))
    vh = max(vx * hx + vy * hy + vz * hz, np.float32(0.0))
    nv = max(nx * vx + ny * vy + nz * vz, np.float32(1e-4))
    a2 = (r * r) * (r * r)
    den = nh * nh * (a2 - one) + one
    k = (r + one) * (r + one) / np.float32(8.0)
    g = nl / (nl * (one - k) + k) * (nv / (nv * (one - k) + k))
    d_g = a2 / (den * den) * g / (np.float32(4.0) * nl * nv)  # pi D G / (4 n.l n.v): the pi of D cancels
    w = one - vh
    return d_g, w * w * w * w * w


@njit(cache=True, nogil=True, inline="always")
def _bilinear(texels, i00, i01, i10, i11, fx, fy):
    """Bilinear blend / 255 of four texels (one channel): weights (1 - fx)(1 - fy), fx (1 - fy), ..."""
    t00, t01 = np.float32(texels[i00]), np.float32(texels[i01])
    t10, t11 = np.float32(texels[i10]), np.float32(texels[i11])
    top = t00 + (t01 - t00) * fx
    bottom = t10 + (t11 - t10) * fx
    return (top + (bottom - top) * fy) * np.float32(1.0 / 255.0)


#: ``shade_surfaces``' ambient factors and emission where no pixel has glTF maps.
NO_MAPS = NO_EMISSION = None


def warm_up(shading: bool = False, maps: bool = False, uv_sets: bool = False) -> None:
    """Compile (or load from the cache) :func:`merge_hits`, and :func:`shade_colors` if ``shading`` (with
    ``maps``: its version for a scene with glTF maps too; ``uv_sets``: with textures on TEXCOORD_1 too), for
    the dtypes the renderer passes."""
    if not COMPILED:
        return
    origins = np.zeros((1, 3), np.float32)
    directions = np.array([[0.0, 0.0, -1.0]], np.float32)
    origins[0, 2] = 1.0
    distance, surface, normal = np.empty(1, np.float32), np.empty(1, np.int32), np.empty((1, 3), np.float32)
    for own_origins in (True, False):  # RayCaster.cast: one origin for all rays, or a lidar's read-only (N, 3) of them
        origins.setflags(write=own_origins)
        merge_hits(origins, directions, np.empty(0, np.float32), np.empty(0, np.int32), np.empty((0, 3), np.float32),
                   np.empty(0, np.int32), True, distance, surface, normal, np.empty(1, np.int32))
    if shading:
        colour = np.zeros(3, np.float32)
        shade_surfaces(np.zeros(3), directions, distance, surface, np.full(1, -1, np.int32), normal,
                       np.ones(1, np.uint8), np.zeros((1, 8)),
                       np.full(1, -1, np.int32), np.zeros((1, 3), np.float32), np.zeros(3, np.uint8),
                       np.zeros((0, 3), np.int64), colour, np.array([0.0, 0.0, 1.0], np.float32), np.float32(0.35),
                       np.float32(0.65), 1.0, colour, colour, False, np.float32(0.0), colour, np.float32(1.0),
                       np.zeros((1, 2), np.float32), np.full(1, -1, np.int32), np.empty((1, 3), np.uint8),
                       *((np.ones(1, np.float32), np.zeros((1, 3), np.float32)) if maps else (NO_MAPS, NO_EMISSION)),
                       *((np.zeros((1, 8)), np.zeros(1, np.uint8)) if uv_sets else (None, None)))
