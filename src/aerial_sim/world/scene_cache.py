"""A disk cache of loaded scenes: every node after the first, and every later launch, maps the scene in.

Loading the shipped city (YAML of 1 800 objects, an OpenStreetMap extract extruded and draped on terrain, 14
glTF props) costs about 4 CPU s, and every node that takes a ``scene`` pays it (physics, camera, lidar, distance,
scene markers, the AirSim server's camera rig). :func:`cached_scene` keeps what :func:`~aerial_sim.world.scene.
load_scene` built in one file per scene, in the user's cache folder (``$XDG_CACHE_HOME/aerial_sim/scenes``,
else ``~/.cache/aerial_sim/scenes``; never the repository), and the next load reads that file instead.

**The file.** A 16-byte magic, the length of a JSON header, the header, then the scene's arrays (triangles,
texture coordinates, textures, the terrain's grid), each 64-byte aligned (read in one go and used in place, no
copy per array). The header holds the scene's
description as a tree (the params dataclasses by name and field, each array by its place; an array shared by
several parts, such as one texture, stays one array shared by them, as :mod:`aerial_sim.world.surface_tables`
expects), the key it was built under, the SHA-256 of every file it was built from, and a CRC-32 of the arrays.

**Key.** The file's name comes from the scene file's absolute path, the materials table's path and the home
point (each such combination has its own file). Inside, it is used only if it was built by this code from
these files: the cache format, a digest of the sources of :mod:`aerial_sim.world` and of the modules it
parses with, the versions of numpy, trimesh, shapely, osmium, pymap3d, rasterio and Pillow, and the SHA-256
of the scene file, the materials table, the terrain's heightmap or DEM and its texture, the OSM extract,
each mesh file and every file a mesh file names (a glTF's external buffers and images, an OBJ's MTL
libraries and their textures). Any difference rebuilds it; changing a texture needs no manual step.

**Failure.** A cache file that is corrupt, truncated or not one of ours (wrong magic, bad header, a length or
CRC that does not match, a tree that does not decode) is one warning line on the ``aerial_sim.scene_cache``
logger and a rebuild, never an error of the load; a cache folder that cannot be written is one warning and
the scene as loaded. The nodes of a first launch start together: one builds the scene while holding
``<file>.lock`` (``flock``, released by the system if it dies) and the others wait for it and read its file
(up to :data:`LOCK_WAIT_S`, then they build too). A builder writes a temporary file beside the cache file and
renames it into place (atomic on POSIX), so a reader sees the old file or a whole new one, never a mix.

**Off.** ``AERIAL_SIM_SCENE_CACHE=off`` (or ``0``, ``false``, ``no``) disables the cache, any other
non-empty value is the folder to use; ``load_scene(..., cache=False)`` disables it for one load.

**Derived files.** :func:`cached_derived` keeps what a node builds from a loaded scene in a ``.<kind>`` file beside
the scene's, keyed on the scene's key and dependencies and what else it depends on, under the same rules (one
warning and a rebuild for a broken file, the lock, the atomic rename, off with the cache): the camera's
simplified meshes (:func:`cached_lod_levels`, ``.lod``: :mod:`aerial_sim.world.lod`, keyed also on the ``lod``
settings and the versions of fast-simplification and scipy), the colliders' per-file hulls (``.hulls``:
:mod:`aerial_sim.world.colliders`), the sensors' surface tables (:func:`cached_surfaces`, ``.surfaces``), the
camera's draw tables beyond them (:func:`cached_draw_tables`, ``.draw``: the simplified levels' rows, their
groups and the closed rows), the camera's rasteriser over them (:func:`cached_rasterizer`, ``.raster``: its
hierarchies) and the scene markers node's message (``.markers``:
:func:`aerial_sim.viewer.marker_array.scene_marker_array`, keyed also on a digest of its sources).

Loaded from the cache, a scene is the same scene: the same objects, materials and terrain, every array the
same dtype, shape and bytes, so images, lidar scans and collisions are bit-identical (test_world_scene_cache).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import struct
import tempfile
import time
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

import numpy as np

#: First bytes of every cache file.
MAGIC = b"aerial_sim.scene"
#: Bumped whenever the file layout or the meaning of the tree changes.
FORMAT = 1
#: Environment variable: off/0/false/no disables the cache; any other non-empty value is its folder.
ENV = "AERIAL_SIM_SCENE_CACHE"
#: Packages whose version can change what a scene load produces.
_LIBRARIES = ("numpy", "trimesh", "shapely", "osmium", "pymap3d", "rasterio", "Pillow")
#: Cache files unused this long are removed when another is written; stale temporary files after an hour.
_PRUNE_AFTER_S, _TEMP_PRUNE_AFTER_S = 30 * 86400.0, 3600.0
#: How long a process waits for another that builds the same scene before building it too (s).
LOCK_WAIT_S = 300.0
_ALIGN = 64
#: The cache's files: a scene, and what :func:`cached_derived` keeps beside it.
_SUFFIXES = (".scene", ".lod", ".hulls", ".surfaces", ".draw", ".raster", ".markers")

log = logging.getLogger("aerial_sim.scene_cache")


class CacheFileError(Exception):
    """A cache file that cannot be used as it is: corrupt, truncated or foreign (rebuilt, with one warning)."""


def cache_folder() -> Path | None:
    """The folder of the scene cache, or None when ``AERIAL_SIM_SCENE_CACHE`` turns it off."""
    setting = os.environ.get(ENV, "").strip()
    if setting.lower() in ("off", "0", "false", "no"):
        return None
    if setting:
        return Path(setting).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aerial_sim" / "scenes"


def cached_scene(path: Path, materials_path, home, build: Callable[[list[Path]], Any], enabled: bool | None = None):
    """The scene of ``path`` from the cache when it was built by this code from the same files, else
    ``build(dependencies)`` (which appends every file it reads to ``dependencies``), then stored.

    ``enabled`` None: as ``AERIAL_SIM_SCENE_CACHE`` says. Errors of ``build`` (a broken scene file) pass
    through and nothing is stored.
    """
    folder = cache_folder() if enabled is not False else None
    if folder is None:
        return build([])
    try:
        scene_bytes = Path(path).read_bytes()
    except OSError:
        return build([])  # the load names the missing file
    materials = None if materials_path is None else str(Path(materials_path).resolve())
    slot = hashlib.sha256(json.dumps([str(Path(path).resolve()), materials, _home_key(home)]).encode()).hexdigest()
    file = folder / f"{Path(path).stem}-{slot[:20]}.scene"
    key = {"format": FORMAT, "code": code_fingerprint(), "scene_sha256": hashlib.sha256(scene_bytes).hexdigest(),
           "home": _home_key(home), "materials": materials}
    seen = _identity(file)
    scene = _usable(file, key, home)
    if scene is not None:
        return scene
    with _builder_lock(file):  # another process building this scene: wait for its file rather than build it too
        if _identity(file) != seen:
            scene = _usable(file, key, home)
            if scene is not None:
                return scene
        return _build_and_write(file, key, path, home, build)


#: Packages whose version can change the simplified levels of :mod:`aerial_sim.world.lod`.
_LOD_LIBRARIES = ("fast-simplification", "scipy")


def cached_lod_levels(scene, originals: dict, build: Callable[[], dict]) -> dict:
    """The simplified levels of the scene's large meshes (:func:`aerial_sim.world.lod.levels_of` of each mesh file,
    ``{path: [Level, ...]}``) from the scene's ``.lod`` file when it was made by this code from the scene's cache
    file's inputs and lod settings, else ``build()``, then stored.

    ``originals`` maps each mesh file to its parts (level 0): a stored level keeps only its arrays (triangles,
    uv, uv1) and triangle size, and takes everything else (materials, textures) from the part it simplifies, as
    :func:`aerial_sim.world.lod.levels_of` makes it. Only for a scene loaded through the cache (a hit or a build
    that was written): any other is built each time.
    """
    from aerial_sim.world.lod import Level

    def encode(levels: dict):
        # level 0 is the parts themselves: only its size; then each simplified level's size and arrays
        return {str(path): [levels[path][0].size, [[level.size, [[part.triangles, part.uv, part.uv1]
                                                                 for part in level.parts]]
                                                   for level in levels[path][1:]]] for path in originals}

    def decode(tree) -> dict:
        levels = {}
        for path, parts in originals.items():
            size, stored = tree[str(path)]
            chain = [Level(tuple(parts), float(size))]
            for size, arrays in stored:
                if len(arrays) != len(parts):
                    raise CacheFileError(f"corrupt ({path} has {len(parts)} parts, a stored level {len(arrays)})")
                chain.append(Level(tuple(dataclasses.replace(part, triangles=triangles, uv=uv, uv1=uv1, tangents=None)
                                         for part, (triangles, uv, uv1) in zip(parts, arrays)), float(size)))
            levels[path] = chain
        return levels

    key = {"lod": dataclasses.asdict(scene.lod), "libraries": _versions(_LOD_LIBRARIES),
           "files": sorted(str(path) for path in originals)}
    return cached_derived(scene, "lod", key, build, encode, decode, "the levels of detail are")


def cached_surfaces(scene, build: Callable[[], Any]):
    """The scene's surface tables (:func:`aerial_sim.world.surface_tables.scene_surfaces`, what every ray caster
    holds: camera, lidar, rangefinder) from the scene's ``.surfaces`` file, else ``build()``, then stored. Their
    code is in the scene's key (the sources of :mod:`aerial_sim.world`), so only the scene's key is theirs."""
    return cached_derived(scene, "surfaces", {"tables": 1}, build, _surfaces_tree, _surfaces_of_tree,
                          "the surface tables are")


def cached_draw_tables(scene, surfaces, build: Callable[[], Any]):
    """What the camera draws beyond the scene's surface tables ``surfaces``: ``build()`` returns
    ``((render surfaces, LodGroups or None), closed rows)`` (:func:`aerial_sim.world.surface_tables.render_surfaces`,
    :func:`aerial_sim.world.closed_surfaces.closed_rows`), kept in the scene's ``.draw`` file. The render tables
    begin with the rows of ``surfaces`` (the same chunks first): each of their arrays whose first rows equal
    ``surfaces``' is stored as the rows after them and joined to ``surfaces``' again when read (exact, checked when
    written), so the file holds the simplified levels' rows, not the scene's twice. Keyed also on the ``lod``
    settings and the libraries that simplify (the levels are part of it)."""
    from aerial_sim.world.surface_tables import LodGroups

    def encode(value):
        (render, lod), closed = value
        tails: dict[int, np.ndarray] = {}

        def tail(full, prefix):
            if full is None:
                return None
            if prefix is not None and full.dtype == prefix.dtype and full.shape[1:] == prefix.shape[1:] and \
                    len(full) >= len(prefix) and np.array_equal(full[:len(prefix)], prefix):
                if id(full) not in tails:  # one array shared by two tables (the maps' corners): one tail
                    tails[id(full)] = full[len(prefix):]
                return ["tail", tails[id(full)]]
            return ["whole", full]

        tree = {"closed": closed, "lod": None if lod is None else [lod.group, lod.level, lod.lift], "render": None}
        if render is not surfaces:
            tree["render"] = _table_tree(render, lambda name, value, within: tail(
                value, None if within is None else getattr(within, name, None)), surfaces)
        return tree

    def decode(tree):
        joined: dict[int, np.ndarray] = {}

        def untail(node, prefix):
            if node is None:
                return None
            kind, array = node
            if kind == "whole":
                return array
            if kind != "tail" or prefix is None:
                raise ValueError(f"a render table's column is {kind!r}")
            key = (id(array), id(prefix))
            if key not in joined:
                joined[key] = np.ascontiguousarray(np.concatenate([prefix, array]))
            return joined[key]

        render = surfaces if tree["render"] is None else _table_of_tree(
            tree["render"], lambda name, node, within: untail(node, None if within is None else
                                                               getattr(within, name, None)), surfaces)
        lod = None if tree["lod"] is None else LodGroups(*tree["lod"])
        closed = tree["closed"]
        if len(closed) != render.count or (lod is not None and {len(a) for a in tree["lod"]} != {render.count}):
            raise ValueError("the draw tables' rows do not match")
        return (render, lod), closed

    key = {"tables": 1, "lod": dataclasses.asdict(scene.lod), "libraries": _versions(_LOD_LIBRARIES)}
    return cached_derived(scene, "draw", key, build, encode, decode, "the camera's draw tables are")


def cached_rasterizer(scene, build: Callable[[], Any]):
    """The camera's rasteriser (:class:`aerial_sim.world.pinhole_rasterizer.PinholeRasterizer` over the draw tables:
    its hierarchies over the triangles always drawn and over each simplified level, which the city's 3 100 levels
    make about 1 CPU s) from the scene's ``.raster`` file, else ``build()``, then stored; keyed as the draw
    tables it is built from."""
    from aerial_sim.world.pinhole_rasterizer import PinholeRasterizer

    key = {"rasterizer": 1, "lod": dataclasses.asdict(scene.lod), "libraries": _versions(_LOD_LIBRARIES)}
    return cached_derived(scene, "raster", key, build, lambda rasterizer: rasterizer.state(),
                          PinholeRasterizer.from_state, "the camera's rasteriser is")


def _table_tree(surfaces, column, within=None) -> dict:
    """A :class:`~aerial_sim.world.surface_tables.SceneSurfaces` (and its MaterialMaps) as a tree of its init fields,
    each field's value ``column(name, value, the same table of `within` or None)``."""
    def fields(table, other):
        return {name: column(name, getattr(table, name), other) for name in _init_fields(type(table))
                if name != "maps"}

    maps = None if surfaces.maps is None else fields(surfaces.maps, None if within is None else within.maps)
    return {"surfaces": fields(surfaces, within), "maps": maps}


def _table_of_tree(tree, column, within=None):
    """The SceneSurfaces of :func:`_table_tree`'s tree (``column(name, node, the same table of `within` or None)``
    each field's value); an error for a tree of other fields or rows of other lengths."""
    from aerial_sim.world.material_maps import MaterialMaps
    from aerial_sim.world.surface_tables import SceneSurfaces

    def build(cls, node, other):
        names = [name for name in _init_fields(cls) if name != "maps"]
        if list(node) != names:
            raise ValueError(f"a {cls.__name__} of fields {sorted(node)}")
        return {name: column(name, node[name], other) for name in names}

    values = build(SceneSurfaces, tree["surfaces"], within)
    maps = None if tree["maps"] is None else MaterialMaps(**build(MaterialMaps, tree["maps"], None if within is None
                                                                                           else within.maps))
    surfaces = SceneSurfaces(**values, maps=maps)
    rows = len(surfaces.triangles)
    row_aligned = [surfaces.surface, surfaces.uv, surfaces.texture, surfaces.albedo, surfaces.pbr,
                   surfaces.pbr_texture, surfaces.uv1, surfaces.uv_sets]
    if maps is not None:
        row_aligned += [getattr(maps, name) for name in _init_fields(MaterialMaps)]
    if any(array is not None and len(array) != rows for array in row_aligned):
        raise ValueError("the surface tables' rows do not match")
    return surfaces


def _surfaces_tree(surfaces) -> dict:
    return _table_tree(surfaces, lambda name, value, within: value)


def _surfaces_of_tree(tree):
    return _table_of_tree(tree, lambda name, node, within: node)


def cached_derived(scene, kind: str, key: dict, build: Callable[[], Any], encode: Callable[[Any], Any] = lambda v: v,
                   decode: Callable[[Any], Any] = lambda tree: tree, what: str = "it is"):
    """What ``build()`` makes of a scene loaded through the cache, from the ``.<kind>`` file beside the scene's
    cache file when that file was made from the same scene file key, dependencies and ``key``; else built and
    stored (``encode(value)``: a tree of arrays, lists, dicts and numbers; ``decode(tree)`` its value again, any
    error of it a broken file). Same rules as the scene: a broken file is one warning and a rebuild, one builder
    under ``<file>.lock``, an atomic rename. ``scene.cache[kind + "_cache"]`` says hit, built or unwritten; a scene
    loaded from its files (no scene cache file) is built each time."""
    made, state = scene.cache.get("scene_cache_key"), scene.cache.get("scene_cache")
    if made is None or state is None:
        return build()
    file = state[1].with_suffix("." + kind)
    key = dict(key, scene=made["scene"], dependencies=made["dependencies"])
    seen = _identity(file)
    value = _usable_derived(file, key, decode)
    if value is None:
        with _builder_lock(file):  # another process building it: wait for its file rather than build it too
            if _identity(file) != seen:
                value = _usable_derived(file, key, decode)
            if value is None:
                value = build()
                try:
                    _write_file(file, {"key": key}, encode(value))
                except Exception as error:
                    log.warning(f"scene cache {file}: not written ({type(error).__name__}: {error}); {what} made "
                                f"each time (set {ENV}=off to silence this)")
                    scene.cache[kind + "_cache"] = ("unwritten", file)
                else:
                    scene.cache[kind + "_cache"] = ("built", file)
                return value
    scene.cache[kind + "_cache"] = ("hit", file)
    return value


def _usable_derived(file: Path, key: dict, decode: Callable[[Any], Any]):
    """The decoded value of a derived cache file when it is usable, else None (one warning when it is broken)."""
    if not file.is_file():
        return None
    try:
        found = _read_file(file, lambda header: header["key"] == key)
        return None if found is None else decode(found[1])
    except CacheFileError as error:
        log.warning(f"scene cache {file}: {error}; rebuilding it")
    except Exception as error:  # anything else a foreign file can provoke is the same: not usable
        log.warning(f"scene cache {file}: unusable ({type(error).__name__}: {error}); rebuilding it")
    return None


def _versions(libraries) -> dict[str, str]:
    from importlib import metadata

    versions = {}
    for library in libraries:
        try:
            versions[library] = metadata.version(library)
        except metadata.PackageNotFoundError:
            versions[library] = "-"
    return versions


def _identity(file: Path):
    try:
        stat = file.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


def _usable(file: Path, key: dict, home):
    """The scene of the cache file when it is usable (a hit), else None (one warning when it is broken)."""
    if not file.is_file():
        return None
    try:
        scene = _read(file, key, home)
    except CacheFileError as error:
        log.warning(f"scene cache {file}: {error}; rebuilding it")
        return None
    except Exception as error:  # anything else a foreign file can provoke is the same: not usable
        log.warning(f"scene cache {file}: unusable ({type(error).__name__}: {error}); rebuilding it")
        return None
    return scene


@contextmanager
def _builder_lock(file: Path):
    """Hold ``<file>.lock`` (flock, released by the OS if the holder dies) while building ``file``, waiting up to
    :data:`LOCK_WAIT_S` for another builder; without a lock (no fcntl, a folder that cannot be written) or
    after the wait, build anyway (the atomic rename keeps the file whole)."""
    try:
        import fcntl

        file.parent.mkdir(parents=True, exist_ok=True)
        handle = open(file.parent / (file.name + ".lock"), "ab")
    except (ImportError, OSError):
        yield
        return
    with handle:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    log.warning(f"scene cache {file}: another process has been building it for {LOCK_WAIT_S:.0f} s; "
                                "building it here too")
                    break
                time.sleep(0.05)
            except OSError:
                break  # a file system without locks
        try:
            yield
        finally:
            try:
                fcntl.flock(handle, fcntl.LOCK_UN)
            except OSError:
                pass


def _build_and_write(file: Path, key: dict, path: Path, home, build):
    dependencies: list[Path] = []
    scene = build(dependencies)
    try:
        digests = _write(file, key, [Path(path)] + dependencies, scene)
    except Exception as error:  # a read-only or full disk, an array type the format has no place for
        log.warning(f"scene cache {file}: not written ({type(error).__name__}: {error}); the scene is loaded "
                    f"from its files each time (set {ENV}=off to silence this)")
        scene.cache["scene_cache"] = ("unwritten", file)
    else:
        scene.cache["scene_cache"] = ("built", file)
        scene.cache["scene_cache_key"] = {"scene": key, "dependencies": digests}
    return scene


_fingerprint: str | None = None


def code_fingerprint() -> str:
    """SHA-256 over the sources that build a scene (the world package, config parsing, geodesy) and the
    versions of the libraries they read files with: a cache built by other code is not used."""
    global _fingerprint
    if _fingerprint is None:
        from importlib import metadata

        package = Path(__file__).resolve().parents[1]
        digest = hashlib.sha256()
        for source in sorted(package.glob("world/*.py")) + [package / "config.py", package / "paths.py",
                                                            package / "environment" / "geodesy.py"]:
            digest.update(source.name.encode() + b"\0" + source.read_bytes())
        for library in _LIBRARIES:
            try:
                version = metadata.version(library)
            except metadata.PackageNotFoundError:
                version = "-"
            digest.update(f"{library}={version};".encode())
        _fingerprint = digest.hexdigest()
    return _fingerprint


def source_digest(*files) -> str:
    """SHA-256 of the named source files, for the key of what code outside :mod:`aerial_sim.world` derives from a
    scene (the scene's key covers that package's sources only)."""
    digest = hashlib.sha256()
    for file in files:
        digest.update(Path(file).name.encode() + b"\0" + Path(file).read_bytes())
    return digest.hexdigest()


def _home_key(home) -> list[float]:
    return [float(home.latitude), float(home.longitude), float(home.altitude)]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- the tree: a scene as JSON plus a list of arrays ------------------------------------------------------------

def _classes() -> dict[str, type]:
    """The types a cache file may name (nothing else is ever constructed from one)."""
    from aerial_sim.environment.geodesy import HomePoint
    from aerial_sim.world.assets import SurfaceMaps, SurfacePart
    from aerial_sim.world.lighting import LightingParams
    from aerial_sim.world.lod import LodParams
    from aerial_sim.world.materials import Material
    from aerial_sim.world.scene import GroundParams, SceneObject

    return {cls.__name__: cls for cls in (HomePoint, SurfaceMaps, SurfacePart, LightingParams, LodParams, Material,
                                          GroundParams, SceneObject)}


def _encode(value, arrays: list[np.ndarray], memo: dict[int, int], classes: dict[str, type]):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise TypeError("an array of Python objects")
        if id(value) not in memo:
            memo[id(value)] = len(arrays)
            arrays.append(value)
        return {"@a": memo[id(value)]}
    if isinstance(value, np.generic):
        arrays.append(np.asarray(value))
        return {"@n": len(arrays) - 1}
    if isinstance(value, tuple):
        return {"@t": [_encode(v, arrays, memo, classes) for v in value]}
    if isinstance(value, list):
        return [_encode(v, arrays, memo, classes) for v in value]
    if isinstance(value, dict):
        return {"@d": [[_encode(k, arrays, memo, classes), _encode(v, arrays, memo, classes)] for k, v in value.items()]}
    if isinstance(value, Path):
        return {"@p": str(value)}
    from aerial_sim.world.terrain import Terrain

    if isinstance(value, Terrain):
        return {"@terrain": [_encode(value.grid, arrays, memo, classes), value.source,
                             _encode(value.texture, arrays, memo, classes)]}
    name = type(value).__name__
    if dataclasses.is_dataclass(value) and classes.get(name) is type(value):
        return {"@c": name, "f": {field: _encode(getattr(value, field), arrays, memo, classes)
                                  for field in _init_fields(type(value))}}
    raise TypeError(f"a {name} has no place in a scene cache")


def _decode(node, arrays: list[np.ndarray], classes: dict[str, type]):
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_decode(v, arrays, classes) for v in node]
    if not isinstance(node, dict) or len(node) not in (1, 2):
        raise CacheFileError(f"the tree holds a {type(node).__name__} it cannot hold")
    if "@a" in node:
        return arrays[node["@a"]]
    if "@n" in node:
        return arrays[node["@n"]][()]
    if "@t" in node:
        return tuple(_decode(v, arrays, classes) for v in node["@t"])
    if "@d" in node:
        return {_decode(k, arrays, classes): _decode(v, arrays, classes) for k, v in node["@d"]}
    if "@p" in node:
        return Path(node["@p"])
    if "@terrain" in node:
        from aerial_sim.world.terrain import Terrain

        grid, source, texture = node["@terrain"]
        return Terrain(_decode(grid, arrays, classes), source, _decode(texture, arrays, classes))
    if "@c" in node and node["@c"] in classes:
        # The values were checked by the class when the scene was built (and the file's CRC and key vouch for
        # them): set, not checked again (the city's 2 200 objects' checks would be a third of the load).
        cls, values = classes[node["@c"]], node["f"]
        if list(values) != _init_fields(cls):
            raise CacheFileError(f"the tree's {cls.__name__} has fields {sorted(values)}")
        instance = object.__new__(cls)
        for name, value in values.items():
            object.__setattr__(instance, name, _decode(value, arrays, classes))
        return instance
    raise CacheFileError(f"the tree names something unknown: {sorted(node)[0]!r}")


_fields_of: dict[type, list[str]] = {}


def _init_fields(cls: type) -> list[str]:
    if cls not in _fields_of:
        fields = dataclasses.fields(cls)
        if not all(f.init for f in fields):  # a field set in __post_init__ would be missing
            raise TypeError(f"{cls.__name__} has a field outside __init__")
        _fields_of[cls] = [f.name for f in fields]
    return _fields_of[cls]


def _scene_tree(scene) -> dict:
    return {"name": scene.name, "ground": scene.ground, "objects": scene.objects, "materials": scene.materials,
            "base_dir": scene.base_dir, "description": scene.description, "terrain": scene.terrain,
            "lighting": scene.lighting, "class_names": scene._named_classes, "lod": scene.lod,
            "mesh_files": scene.cache.get("mesh_files", {})}


# --- the file ---------------------------------------------------------------------------------------------------

def _write(file: Path, key: dict, dependencies: list[Path], scene) -> list[list[str]]:
    """Write the scene's cache file; its dependencies' [path, SHA-256] pairs."""
    unique = list(dict.fromkeys(Path(p).resolve() for p in dependencies))
    digests = [[str(p), file_sha256(p)] for p in unique]
    _write_file(file, {"key": key, "dependencies": digests}, _scene_tree(scene))
    return digests


def _write_file(file: Path, header: dict, value) -> None:
    """Write ``value`` (a tree of the types :func:`_encode` knows) under ``header`` (JSON) to ``file``: a temporary
    file beside it, renamed into place."""
    arrays: list[np.ndarray] = []
    tree = _encode(value, arrays, {}, _classes())
    specs, offset = [], 0
    for array in arrays:
        specs.append([np.lib.format.dtype_to_descr(array.dtype), list(array.shape), offset])
        offset += -(-array.nbytes // _ALIGN) * _ALIGN
    crc = 0
    for array in arrays:  # over the bytes as written, padding included
        data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        crc = zlib.crc32(b"\0" * (-data.nbytes % _ALIGN), zlib.crc32(data, crc))
    header = json.dumps(dict(header, arrays=specs, data_bytes=offset, crc32=crc, tree=tree)).encode()
    start = -(-(len(MAGIC) + 8 + len(header)) // _ALIGN) * _ALIGN
    file.parent.mkdir(parents=True, exist_ok=True)
    _prune(file.parent)
    handle, temporary = tempfile.mkstemp(prefix=f".{file.name}.", suffix=".tmp", dir=file.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(MAGIC + struct.pack("<Q", len(header)) + header)
            stream.write(b"\0" * (start - stream.tell()))
            for array in arrays:
                data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
                stream.write(data.data)
                stream.write(b"\0" * (-data.nbytes % _ALIGN))
        os.chmod(temporary, 0o644)  # mkstemp's 0600 would keep it from a shared AERIAL_SIM_SCENE_CACHE folder
        os.replace(temporary, file)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _read(file: Path, key: dict, home):
    """The scene of a cache file, None when it was built from other files or by other code (a silent rebuild);
    CacheFileError when it is not a whole cache file of ours."""
    def current(header: dict) -> bool:
        if header["key"] != key:
            log.debug(f"scene cache {file}: built by other code or from another scene file; rebuilding")
            return False
        for name, digest in header["dependencies"]:
            try:
                now = file_sha256(Path(name))
            except OSError:
                now = None
            if now != digest:
                log.debug(f"scene cache {file}: {name} changed; rebuilding")
                return False
        return True

    found = _read_file(file, current)
    if found is None:
        return None
    header, tree = found
    if not isinstance(tree, dict):
        raise CacheFileError("corrupt tree")
    from aerial_sim.world.scene import Scene

    try:
        scene = Scene(tree["name"], tree["ground"], tree["objects"], tree["materials"], tree["base_dir"],
                      tree["description"], terrain=tree["terrain"], lighting=tree["lighting"], home=home,
                      class_names=tree["class_names"], lod=tree["lod"])
    except KeyError as error:
        raise CacheFileError(f"corrupt tree (no {error})") from error
    scene.cache["mesh_files"] = tree["mesh_files"]
    scene.cache["scene_cache"] = ("hit", file)
    scene.cache["scene_cache_key"] = {"scene": key, "dependencies": header["dependencies"]}
    return scene


def _read_file(file: Path, current: Callable[[dict], bool]):
    """(header, tree) of a cache file, None when ``current(header)`` says it was made from other inputs (a silent
    rebuild); CacheFileError when it is not a whole cache file of ours."""
    with open(file, "rb") as stream:
        size = os.fstat(stream.fileno()).st_size
        head = stream.read(len(MAGIC) + 8)
        if len(head) < len(MAGIC) + 8 or head[:len(MAGIC)] != MAGIC:
            raise CacheFileError("not a scene cache file (foreign or corrupt: no aerial_sim header)")
        (length,) = struct.unpack("<Q", head[len(MAGIC):])
        if length > size - len(head):
            raise CacheFileError(f"truncated (its header says {length} bytes, {size - len(head)} are there)")
        try:
            header = json.loads(stream.read(length))
        except ValueError as error:
            raise CacheFileError(f"corrupt header ({error})") from error
        if not isinstance(header, dict) or not isinstance(header.get("key"), dict):
            raise CacheFileError("corrupt header (no key)")
        if not current(header):
            return None
        start = -(-(len(MAGIC) + 8 + length) // _ALIGN) * _ALIGN
        if size < start + header["data_bytes"]:
            raise CacheFileError(f"truncated ({size} bytes, its header says {start + header['data_bytes']})")
        # Read, not memory-mapped: a mapped file cut short under a running node (truncated in place) would kill
        # it with SIGBUS on its next touch of a lost page; a read is a few ms for the city (its CRC reads it all
        # anyway), and the nodes copy what they keep (placed triangles, the renderer's tables).
        data = bytearray(header["data_bytes"])
        stream.seek(start)
        if stream.readinto(data) != len(data):
            raise CacheFileError("truncated (its arrays end early)")
    if zlib.crc32(data) != header["crc32"]:
        raise CacheFileError("corrupt (the arrays' CRC-32 does not match)")
    arrays = []
    for descr, shape, offset in header["arrays"]:
        dtype = np.lib.format.descr_to_dtype(descr)
        count = int(np.prod(shape, dtype=np.int64))
        if offset < 0 or offset + count * dtype.itemsize > header["data_bytes"]:
            raise CacheFileError("corrupt (an array lies outside the file)")
        arrays.append(np.frombuffer(data, dtype, count, offset).reshape(shape))
    tree = _decode(header["tree"], arrays, _classes())
    try:
        os.utime(file)  # in use: not pruned
    except OSError:
        pass
    return header, tree


def _prune(folder: Path) -> None:
    """Remove cache files unused for 30 days and temporary files a killed writer left an hour ago."""
    now = time.time()
    for entry in folder.iterdir():
        try:
            age = now - entry.stat().st_mtime
            if (entry.suffix in _SUFFIXES + (".lock",) and age > _PRUNE_AFTER_S) or \
                    (entry.suffix == ".tmp" and re.match(r"\..*\.(" + "|".join(x[1:] for x in _SUFFIXES) + r")\.",
                                                         entry.name)
                     and age > _TEMP_PRUNE_AFTER_S):
                entry.unlink()
        except OSError:
            pass
