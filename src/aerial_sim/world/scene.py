"""Scenes: a ground plane plus posed objects, loaded from ``config/scenes/<name>.yaml``.

A scene file has these top-level keys (all optional)::

    description: free text
    ground: {segmentation_id: 1, material: asphalt, color: [..], checker_size_m: 1.0}
    terrain: {file: hills.png, size_m: [400, 400], height_range_m: [0, 35]}   # or a GeoTIFF DEM
    lighting: {time_of_day: "2026-06-21 15:30:00", shadows: true, ...}
    classes: {1: ground, 10: building, 60: kiosk}    # class id -> name (datasets' category names)
    objects:
      - {name: tower, shape: box, size: [4, 4, 20], position: [20, 0, 10], yaw_deg: 30,
         segmentation_id: 10, material: cement}
      - {name: pole, shape: cylinder, radius: 0.15, height: 8, position: [5, 3, 4], ...}
      - {name: ball, shape: sphere, radius: 1.0, ...}
      - {name: statue, shape: mesh, file: meshes/statue.obj, scale: 1.0, ...}
      - {name: house, shape: mesh, file: assets/house.glb, scale: 2.0, ...}

Positions are ENU metres of the object's centre (box, cylinder, sphere) or of
the mesh file's origin; orientation is ``yaw_deg`` (about ENU z, counter-
clockwise from east) or a body->world quaternion ``orientation: [w, x, y, z]``.
A cylinder's axis is its local z. Mesh paths are relative to the scene file;
a mesh file may be OBJ (with its MTL materials and textures), STL, or glTF 2.0 /
GLB (base colour and base-colour texture; glTF's +Y up becomes +Z):
:mod:`aerial_sim.world.assets`.

Each object is one *instance*: its instance id is its place in the list + 2
(:meth:`Scene.instance_id`; 0 nothing, 1 the ground), unique per object, while
its ``segmentation_id`` is its *class* (several objects may share it) and its
``material`` the class of surface depth noise and lidar intensity depend on.

``osm`` (:mod:`aerial_sim.world.osm`) adds an OpenStreetMap extract's
buildings, extruded, as objects named ``osm_w<way id>`` / ``osm_r<relation id>``.
``terrain`` (:mod:`aerial_sim.world.terrain`) replaces the ground plane with a
height field, for every sensor and for collisions; it takes the ground's
segmentation id and material. ``lighting`` is :mod:`aerial_sim.world.lighting`, ``lod`` (level of detail of large meshes
for the camera) :mod:`aerial_sim.world.lod`.

Class names (:attr:`Scene.class_names`, what the camera publishes on ``camera/class_names`` and
``aerial_sim export`` writes as COCO category names): ``classes`` names an id; the ground's id is
``ground`` and the OSM buildings' ``building`` unless named there; any other id is named from the
names of the objects that carry it: each name split at ``_``/``-``/spaces, numbering tokens
(``7``, ``n6``) dropped, the tokens all of them share in front kept (``pole_n6``, ``pole_s18``
-> ``pole``; ``tree_0_crown`` -> ``tree_crown``), else ``class_<id>``.

Segmentation ids (``mono16`` pixels): 0 means nothing was hit (sky); the
ground has its own id (default 1); objects use 1..65535. Objects may share an
id (a class of objects) only if they share a material, so that
:meth:`Scene.material_of_id` is unambiguous. The ground is the plane z = 0,
the same plane the physics engine builds in (so it has no collider here),
unless a terrain is given.

This module only describes a scene; what is built from it lives beside it:
triangles in :mod:`aerial_sim.world.object_meshes` and :mod:`aerial_sim.world.surface_tables`, the ray caster
in :mod:`aerial_sim.world.ray_caster` (:func:`~aerial_sim.world.ray_caster.ray_caster_of`), colliders in
:mod:`aerial_sim.world.colliders` (:func:`~aerial_sim.world.colliders.scene_colliders`).

This is the scene description AirSim takes from the Unreal level (seed 000,
sec. 3: depth, segmentation and scene images; sec. 3.3.4: collisions).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np
import yaml

from aerial_sim.config import ParamsError, params_from_mapping, require
from aerial_sim.paths import config_path, resolve_config
from aerial_sim.world.assets import asset_files, load_asset
from aerial_sim.world.errors import located
from aerial_sim.world.lighting import LightingParams
from aerial_sim.world.lod import LodParams
from aerial_sim.world.materials import DEFAULT_MATERIAL, Material, load_materials
from aerial_sim.world.terrain import Terrain, TerrainParams, load_terrain, terrain_files

#: ``file`` of an object made from an OpenStreetMap building (its triangles are built, not read).
OSM_FILE_PREFIX = "osm:"
#: Segmentation id of pixels that hit nothing.
NO_HIT_ID = 0
MAX_SEGMENTATION_ID = 65535

Shape = Literal["box", "cylinder", "sphere", "mesh"]
_SHAPE_FIELDS = {"box": ("size",), "cylinder": ("radius", "height"), "sphere": ("radius",), "mesh": ("file",)}


@dataclass(frozen=True)
class GroundParams:
    """The ground plane z = 0 (ENU)."""

    segmentation_id: int = 1
    material: str = "asphalt"
    color: tuple[int, int, int] | None = None  # None: the material's colour
    checker_size_m: float = 1.0  # side of the 2-tone checker squares in the colour image; 0: plain

    def __post_init__(self) -> None:
        require(0 <= self.segmentation_id <= MAX_SEGMENTATION_ID, f"segmentation_id: must be 0..65535, got {self.segmentation_id}")
        require(math.isfinite(self.checker_size_m) and self.checker_size_m >= 0, "checker_size_m: must be >= 0")


@dataclass(frozen=True)
class SceneObject:
    """One object of a scene; which size fields are needed depends on ``shape``."""

    name: str
    shape: Shape
    segmentation_id: int
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    yaw_deg: float | None = None
    orientation: tuple[float, float, float, float] | None = None  # (w, x, y, z) body->world
    size: tuple[float, float, float] | None = None  # box: full extents along its local x, y, z (m)
    radius: float | None = None  # cylinder, sphere (m)
    height: float | None = None  # cylinder: length along its local z (m)
    file: str | None = None  # mesh: OBJ/STL/glTF/GLB path, relative to the scene file
    scale: float = 1.0  # mesh: uniform scale applied to the file's coordinates
    material: str = DEFAULT_MATERIAL
    color: tuple[int, int, int] | None = None  # None: the material's colour
    ground_cover: bool = False  # a surface of the ground (a road, a lawn): instance id 1, no box, no collider

    def __post_init__(self) -> None:
        require(1 <= self.segmentation_id <= MAX_SEGMENTATION_ID, f"segmentation_id: must be 1..65535, got {self.segmentation_id}")
        require(all(math.isfinite(v) for v in self.position), f"position: must be finite, got {self.position}")
        require(self.yaw_deg is None or self.orientation is None, "orientation: give yaw_deg or orientation, not both")
        if self.orientation is not None:
            norm = math.sqrt(sum(q * q for q in self.orientation))
            require(abs(norm - 1.0) < 1e-3, f"orientation: must be a unit quaternion (w, x, y, z), norm is {norm:.4f}")
        for needed in _SHAPE_FIELDS[self.shape]:
            require(getattr(self, needed) is not None, f"{needed}: required for shape '{self.shape}'")
        for extra in {f for fields in _SHAPE_FIELDS.values() for f in fields} - set(_SHAPE_FIELDS[self.shape]):
            require(getattr(self, extra) is None, f"{extra}: not used by shape '{self.shape}'")
        for name in ("radius", "height", "scale"):
            value = getattr(self, name)
            require(value is None or (math.isfinite(value) and value > 0), f"{name}: must be > 0, got {value!r}")
        require(self.size is None or all(math.isfinite(s) and s > 0 for s in self.size), f"size: must be > 0, got {self.size}")
        require(self.color is None or all(0 <= c <= 255 for c in self.color), f"color: must be 0-255, got {self.color}")

    @property
    def quaternion(self) -> tuple[float, float, float, float]:
        """Orientation as a unit (w, x, y, z) quaternion, body->world."""
        if self.orientation is not None:
            w, x, y, z = self.orientation
            n = math.sqrt(w * w + x * x + y * y + z * z)
            return (w / n, x / n, y / n, z / n)
        half = math.radians(self.yaw_deg or 0.0) / 2.0
        return (math.cos(half), 0.0, 0.0, math.sin(half))


class Scene:
    """A loaded scene: ground, objects, materials; builds the ray caster and colliders on demand."""

    def __init__(self, name: str, ground: GroundParams, objects: tuple[SceneObject, ...],
                 materials: dict[str, Material], base_dir: Path, description: str = "",
                 terrain: Terrain | None = None, lighting: LightingParams | None = None, home=None,
                 class_names: dict[int, str] | None = None, lod: LodParams | None = None):
        from aerial_sim.environment.geodesy import HomePoint

        self.name = name
        self.ground = ground
        self.objects = objects
        self.materials = materials
        self.base_dir = base_dir
        self.description = description
        #: The ground's height field, or None for the plane z = 0.
        self.terrain = terrain
        self.lighting = lighting or LightingParams()
        #: Level of detail of large meshes for the camera (:mod:`aerial_sim.world.lod`).
        self.lod = lod or LodParams()
        #: The WGS-84 origin of ``map`` the terrain and the sun were placed with.
        self.home = home or HomePoint()
        #: Built things cached on the scene by the modules that build them (ray caster, ...).
        self.cache: dict[str, Any] = {}
        self._named_classes = dict(class_names or {})

    @cached_property
    def class_names(self) -> dict[int, str]:
        """Segmentation (class) id -> class name for every id of the scene and every id ``classes`` names
        (module docstring), ascending."""
        names = dict(self._named_classes)
        names.setdefault(self.ground.segmentation_id, "ground")
        carriers: dict[int, list[str]] = {}
        for obj in self.objects:
            carriers.setdefault(obj.segmentation_id, []).append(obj.name)
        for class_id, object_names in carriers.items():
            names.setdefault(class_id, derived_class_name(object_names) or f"class_{class_id}")
        return dict(sorted(names.items()))

    def instance_id(self, index: int) -> int:
        """Instance id of object ``index`` (its ray-caster surface index): unique per object, ground 1, none 0."""
        return index + 2

    def material(self, name: str) -> Material:
        return self.materials[name]

    def material_of_id(self, segmentation_id: int) -> Material:
        """The material of the surface with this segmentation id (``default`` for 0, nothing hit).

        Raises ``KeyError`` for an id no surface of the scene has.
        """
        if segmentation_id == NO_HIT_ID:
            return self.materials[DEFAULT_MATERIAL]
        return self.materials[self._material_name_by_id[segmentation_id]]

    def depth_noise_lut(self) -> np.ndarray:
        """A 65536-entry float32 table id -> ``depth_noise_m`` (1/m), so ``lut[segmentation_image]``
        gives the per-pixel noise coefficient; unused ids hold the default material's value."""
        lut = np.full(MAX_SEGMENTATION_ID + 1, self.materials[DEFAULT_MATERIAL].depth_noise_m, np.float32)
        for seg_id, material_name in self._material_name_by_id.items():
            lut[seg_id] = self.materials[material_name].depth_noise_m
        return lut

    def surface_table(self, value_of: Callable[[SceneObject | GroundParams], Any], nothing: Any) -> list:
        """One value per ray-caster surface index (:mod:`aerial_sim.world.surface_tables`): ``nothing`` for
        rays that hit nothing, then the ground, then each object, so ``np.asarray(table)[hits.surface]``
        gives every ray its surface's value."""
        return [nothing, value_of(self.ground)] + [value_of(obj) for obj in self.objects]

    def object_color(self, obj: SceneObject | GroundParams) -> tuple[int, int, int]:
        return obj.color if obj.color is not None else self.materials[obj.material].color

    def mesh_path(self, obj: SceneObject) -> Path:
        if obj.file.startswith(OSM_FILE_PREFIX):
            return self.base_dir / obj.file
        path = Path(obj.file).expanduser()
        return path if path.is_absolute() else self.base_dir / path

    @cached_property
    def _material_name_by_id(self) -> dict[int, str]:
        by_id = {self.ground.segmentation_id: self.ground.material}
        for obj in self.objects:
            by_id.setdefault(obj.segmentation_id, obj.material)
        return by_id

    def __repr__(self) -> str:
        return f"Scene({self.name!r}, {len(self.objects)} objects)"


def load_scene(name_or_path: str | Path, materials_path: str | Path | None = None, home=None,
               cache: bool | None = None) -> Scene:
    """Load ``config/scenes/<name>.yaml`` (or a path) into a :class:`Scene`.

    ``home`` (a :class:`~aerial_sim.environment.geodesy.HomePoint`; default AirSim's) places a
    GeoTIFF terrain and the sun of ``lighting.time_of_day``.

    A scene loaded once is kept in the user's cache folder and read by later loads, in this process or
    any other, until one of its files or the code changes (:mod:`aerial_sim.world.scene_cache`); ``cache``
    False loads it from its files (None: as ``AERIAL_SIM_SCENE_CACHE`` says).

    Every error is a :class:`ParamsError` naming the file, object and field,
    e.g. ``urban.yaml: objects[2] 'pole_1'.radius: must be > 0, got -1.0``.
    """
    from aerial_sim.environment.geodesy import HomePoint
    from aerial_sim.world.scene_cache import cached_scene

    path = resolve_config(str(name_or_path), "scenes")
    home = home or HomePoint()
    return cached_scene(path, materials_path, home,
                        lambda dependencies: _build_scene(path, name_or_path, materials_path, home, dependencies),
                        enabled=cache)


def _build_scene(path: Path, name_or_path, materials_path, home, dependencies: list[Path]) -> Scene:
    """:func:`load_scene` from the files, appending every file it reads (beside the scene file) to ``dependencies``."""
    try:
        # libyaml's parser where PyYAML has it (its wheels do): a city of thousands of objects parses in a tenth
        # of the pure-Python parser's time, to the same document.
        document = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except FileNotFoundError as error:
        raise ParamsError(f"scene '{name_or_path}': file not found ({path})") from error
    except yaml.YAMLError as error:
        raise ParamsError(f"{path.name}: not valid YAML: {error}") from error
    if document is None:  # an empty file (or comments only): a typo'd path or a file cut short, not a world
        raise ParamsError(f"scene '{name_or_path}': {path.name} is empty (write 'objects: []' for a ground-only "
                          "world, as scene:=empty)")
    if not isinstance(document, dict):
        raise ParamsError(f"{path.name}: expected a mapping with ground/objects")
    known = ("description", "ground", "objects", "terrain", "lighting", "osm", "classes", "lod")
    unknown = sorted(set(document) - set(known))
    if unknown:
        raise ParamsError(f"{path.name}: {unknown[0]}: unknown key (known: {', '.join(known)})")
    materials = load_materials(materials_path)
    dependencies.append(Path(materials_path) if materials_path is not None else config_path("materials.yaml"))
    with located(f"{path.name}: ground"):
        ground = params_from_mapping(GroundParams, document.get("ground"), where=f"{path.name}: ground")
    _check_material(materials, ground.material, f"{path.name}: ground")

    raw_objects = document.get("objects") or []
    if not isinstance(raw_objects, list):
        raise ParamsError(f"{path.name}: objects: expected a list")
    objects = []
    names: set[str] = set()
    material_by_id = {ground.segmentation_id: ("ground", ground.material)}
    for index, raw in enumerate(raw_objects):
        label = raw.get("name", "?") if isinstance(raw, dict) else "?"
        where = f"{path.name}: objects[{index}] '{label}'"
        with located(where):
            obj = params_from_mapping(SceneObject, raw, where=where)
        if obj.name in names:
            raise ParamsError(f"{where}.name: duplicate object name")
        names.add(obj.name)
        _check_material(materials, obj.material, where)
        owner, owner_material = material_by_id.setdefault(obj.segmentation_id, (obj.name, obj.material))
        if owner_material != obj.material:
            raise ParamsError(
                f"{where}.segmentation_id: {obj.segmentation_id} is also used by '{owner}' with material "
                f"'{owner_material}'; objects sharing an id must share a material"
            )
        if obj.shape == "mesh" and not (path.parent / obj.file).is_file() and not Path(obj.file).is_file():
            raise ParamsError(f"{where}.file: no such mesh file: {obj.file}")
        objects.append(obj)
    terrain = None
    if document.get("terrain") is not None:
        with located(f"{path.name}: terrain"):
            terrain_params = params_from_mapping(TerrainParams, document["terrain"], where=f"{path.name}: terrain")
        terrain = load_terrain(terrain_params, path.parent, home, f"{path.name}: terrain")
        dependencies.extend(terrain_files(terrain_params, path.parent))
    with located(f"{path.name}: lighting"):
        lighting = params_from_mapping(LightingParams, document.get("lighting"), where=f"{path.name}: lighting")
    class_names = _class_table(document.get("classes"), path.name)
    with located(f"{path.name}: lod"):
        lod = params_from_mapping(LodParams, document.get("lod"), where=f"{path.name}: lod")
    osm_parts = {}
    if document.get("osm") is not None:
        from aerial_sim.world.assets import SurfacePart
        from aerial_sim.world.osm import OsmParams, building_parts, load_buildings, load_ground, read_extract

        where = f"{path.name}: osm"
        with located(where):
            osm = params_from_mapping(OsmParams, document["osm"], where=where)
        _check_material(materials, osm.material, where)
        owner, owner_material = material_by_id.setdefault(osm.segmentation_id, ("osm", osm.material))
        if owner_material != osm.material:
            raise ParamsError(f"{where}.segmentation_id: {osm.segmentation_id} is also used by '{owner}' with "
                              f"material '{owner_material}'; objects sharing an id must share a material")
        class_names.setdefault(osm.segmentation_id, "building")
        extract = read_extract(osm, path.parent, home, where)
        dependencies.append(extract.path)
        for building in load_buildings(osm, path.parent, home, where, terrain, extract):
            name = f"osm_{building.osm_id}"
            if name in names:
                raise ParamsError(f"{where}: object name '{name}' is also an OSM building's")
            names.add(name)
            objects.append(SceneObject(name=name, shape="mesh", segmentation_id=osm.segmentation_id,
                                       file=f"{OSM_FILE_PREFIX}{building.osm_id}", material=osm.material))
            osm_parts[objects[-1].file] = building_parts(building)
        for cover in load_ground(osm, extract, terrain) if osm.ground else ():
            kind = getattr(osm.ground_classes, cover.kind)
            cover_where = f"{where}.ground_classes.{cover.kind}"
            _check_material(materials, kind.material, cover_where)
            owner, owner_material = material_by_id.setdefault(kind.segmentation_id, (f"osm {cover.kind}", kind.material))
            if owner_material != kind.material:
                raise ParamsError(f"{cover_where}.segmentation_id: {kind.segmentation_id} is also used by '{owner}' "
                                  f"with material '{owner_material}'; objects sharing an id must share a material")
            class_names.setdefault(kind.segmentation_id, cover.kind)
            name = f"osm_ground_{cover.kind}"
            if name in names:
                raise ParamsError(f"{where}: object name '{name}' is also the OSM {cover.kind} cover's")
            names.add(name)
            objects.append(SceneObject(name=name, shape="mesh", segmentation_id=kind.segmentation_id,
                                       file=f"{OSM_FILE_PREFIX}ground_{cover.kind}", material=kind.material,
                                       ground_cover=True))
            osm_parts[objects[-1].file] = _cover_parts(cover, materials[kind.material].color, osm.seed)
    scene = Scene(path.stem, ground, tuple(objects), materials, path.parent, str(document.get("description", "")),
                  terrain=terrain, lighting=lighting, home=home, class_names=class_names, lod=lod)
    scene.cache["mesh_files"] = {scene.base_dir / file: parts for file, parts in osm_parts.items()}
    # Read every mesh file now, so that a broken one is an error of the scene file, not of the first frame.
    loaded = scene.cache.setdefault("mesh_files", {})
    for obj in objects:
        if obj.shape == "mesh" and scene.mesh_path(obj) not in loaded:
            loaded[scene.mesh_path(obj)] = load_asset(scene.mesh_path(obj), f"{scene.name}: object '{obj.name}'.file")
            dependencies.extend([scene.mesh_path(obj)] + asset_files(scene.mesh_path(obj)))
    return scene


def derived_class_name(object_names: list[str]) -> str:
    """A class name from the names of the objects of one class (module docstring); '' when they share none."""
    token_lists = [[t for t in re.split(r"[_\-\s]+", name.lower()) if t and not re.fullmatch(r"[a-z]?\d+", t)]
                   for name in object_names]
    shared = []
    for tokens in zip(*token_lists):
        if any(t != tokens[0] for t in tokens):
            break
        shared.append(tokens[0])
    return "_".join(shared)


def _cover_parts(cover, color, seed: int) -> list:
    """The surface parts of an OSM ground cover: a road with lane markings is textured asphalt and its paint
    (:mod:`aerial_sim.world.road_surface`), any other cover one plain part of its material's colour."""
    from aerial_sim.world.assets import SurfacePart

    if cover.paint is None:
        return [SurfacePart(cover.triangles)]
    from aerial_sim.world.road_surface import PAINT_RGB, asphalt_texture, road_uv

    road = SurfacePart(cover.triangles, road_uv(cover.triangles), None, asphalt_texture(color, seed))
    return [road] + ([SurfacePart(cover.paint, base_color=PAINT_RGB)] if len(cover.paint) else [])


def _class_table(raw, file_name: str) -> dict[int, str]:
    """The ``classes`` section: {id: name}; ParamsError naming the entry that is not an id 0..65535 and a name."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ParamsError(f"{file_name}: classes: expected a mapping of class id to name, e.g. {{10: building}}")
    table = {}
    for key, name in raw.items():
        if isinstance(key, bool) or not isinstance(key, int) or not 0 <= key <= MAX_SEGMENTATION_ID:
            raise ParamsError(f"{file_name}: classes.{key}: a class id must be an integer 0..65535")
        if not isinstance(name, str) or not name.strip():
            raise ParamsError(f"{file_name}: classes.{key}: the name must be a non-empty string, got {name!r}")
        table[key] = name.strip()
    return table


def _check_material(materials: dict[str, Material], name: str, where: str) -> None:
    if name not in materials:
        raise ParamsError(f"{where}.material: unknown material '{name}' (known: {', '.join(sorted(materials))})")
