"""What an OpenStreetMap road looks like: a seeded procedural asphalt texture and painted lane markings.

Asphalt (:func:`asphalt_texture`): a 256 x 256 tile laid every :data:`TILE_M` metres (texture coordinates
u, v = east, north / TILE_M), of the road material's colour c (``config/materials.yaml``) times
1 + 0.08 n_1 + 0.05 n_2 + 0.06 g: n_1, n_2 value noise (uniform values on a 8 x 8 and a 32 x 32 lattice,
interpolated bicubically, periodic so the tiles join without a seam) for patches of wear and repair, g per-texel
grain (the stones of the mix); all three from ``numpy.random.default_rng(seed)``: the same seed draws the same
road. Its mean is c, so a road reads as its material's colour from afar.

Lane markings (:func:`lane_markings`), white paint (:data:`PAINT_RGB`) as in most countries' road codes:
- an edge line :data:`LINE_WIDTH_M` wide, :data:`EDGE_INSET_M` inside the outline of the road surface (the
  union of every road: edge lines follow kerbs round the corners of junctions), where the road is wide enough
  to hold both lines and a lane between them;
- a dashed centre line on roads at least :data:`CENTRE_LINE_MIN_WIDTH_M` wide (two lanes of 3.75 m: OSM's
  tertiary roads and above by the default widths; residential and service streets are left without one,
  as they mostly are): :data:`DASH_M` of paint every :data:`DASH_PERIOD_M`, along each way's centre line,
  kept :data:`CENTRE_LINE_END_M` inside the road's outline.
The markings are draped on the ground like the road, :data:`PAINT_LIFT_M` above it (so the rasteriser never
mixes the two), and belong to the road's scene object: their pixels carry the road's class id, the ground's
instance, the road's material (depth noise, lidar reflectivity).
"""

from __future__ import annotations

import numpy as np

#: Size (m) of the ground one asphalt texture tile covers, and of the tile (texels per side).
TILE_M, TILE_TEXELS = 4.0, 256
#: Road paint: colour (RGB 0-255), line width, the edge line's distance inside the road outline (m).
PAINT_RGB = (232, 232, 224)
LINE_WIDTH_M, EDGE_INSET_M = 0.12, 0.25
#: Dashed centre line: on roads this wide (m) or wider; dash length and period (m); kept this far inside the outline.
CENTRE_LINE_MIN_WIDTH_M, DASH_M, DASH_PERIOD_M, CENTRE_LINE_END_M = 7.5, 3.0, 9.0, 1.0
#: How far above the road surface the paint is draped (m).
PAINT_LIFT_M = 0.02


def asphalt_texture(color, seed: int, size: int = TILE_TEXELS) -> np.ndarray:
    """(size, size, 3) uint8 asphalt of mean colour ``color`` (module docstring)."""
    rng = np.random.default_rng(seed)
    coarse = _periodic_noise(rng, 8, size)
    fine = _periodic_noise(rng, 32, size)
    grain = rng.uniform(-1.0, 1.0, (size, size))
    factor = 1.0 + 0.08 * coarse + 0.05 * fine + 0.06 * grain
    factor /= factor.mean()
    texels = np.asarray(color, float)[None, None, :] * factor[..., None]
    return np.clip(np.rint(texels), 0, 255).astype(np.uint8)


def _periodic_noise(rng: np.random.Generator, cells: int, size: int) -> np.ndarray:
    """Value noise in [-1, 1]: uniform values on a periodic ``cells`` x ``cells`` lattice, Catmull-Rom
    interpolated to ``size`` x ``size`` (it wraps: the last texel meets the first)."""
    lattice = rng.uniform(-1.0, 1.0, (cells, cells))
    position = np.arange(size) * cells / size
    base = np.floor(position).astype(int)
    t = position - base
    # Catmull-Rom weights of the lattice points base-1 .. base+2.
    weights = np.stack([(-t ** 3 + 2 * t ** 2 - t) / 2, (3 * t ** 3 - 5 * t ** 2 + 2) / 2,
                        (-3 * t ** 3 + 4 * t ** 2 + t) / 2, (t ** 3 - t ** 2) / 2], axis=1)
    index = (base[:, None] + np.arange(-1, 3)[None, :]) % cells
    rows = np.einsum("rk,rkc->rc", weights, lattice[index])  # (size, cells): interpolated along the first axis
    return np.clip(np.einsum("ck,rck->rc", weights, rows[:, index]), -1.0, 1.0)


def road_uv(triangles: np.ndarray) -> np.ndarray:
    """(T, 3, 2) float32 texture coordinates of road triangles: east, north / TILE_M (the tile repeats)."""
    return (np.asarray(triangles)[..., :2] / TILE_M).astype(np.float32)


def lane_markings(region, centre_lines: list[tuple[float, np.ndarray]]):
    """The painted area (a shapely geometry, ENU metres) of a road surface ``region`` whose ways are
    ``centre_lines`` [(width m, (N, 2) ENU points)] (module docstring); empty where nothing is painted."""
    import shapely
    from shapely.geometry import LineString
    from shapely.ops import substring

    if region.is_empty:
        return region
    inside = region.buffer(-EDGE_INSET_M, quad_segs=3)
    edges = inside.difference(region.buffer(-(EDGE_INSET_M + LINE_WIDTH_M), quad_segs=3))
    dashes = []
    for width, points in centre_lines:
        if width < CENTRE_LINE_MIN_WIDTH_M or len(points) < 2:
            continue
        line = LineString(points)
        starts = np.arange(DASH_PERIOD_M / 2.0, line.length - DASH_M, DASH_PERIOD_M)
        dashes += [substring(line, s, s + DASH_M) for s in starts]
    dashes = [dash for dash in dashes if dash.geom_type == "LineString" and dash.length > 0]
    if dashes:
        paint = shapely.MultiLineString(dashes).buffer(LINE_WIDTH_M / 2.0, cap_style="flat")
        edges = shapely.union_all([edges, paint.intersection(region.buffer(-CENTRE_LINE_END_M, quad_segs=3))])
    return shapely.MultiPolygon(_polygons(edges))


def _polygons(geometry) -> list:
    """The polygons of a shapely geometry, collections flattened (intersections may add lines and points)."""
    if geometry.geom_type == "Polygon":
        return [geometry] if geometry.area > 0 else []
    return [p for part in getattr(geometry, "geoms", []) for p in _polygons(part)]
