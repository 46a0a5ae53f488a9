"""Terrain: the ground as a height field, from a 16-bit PNG heightmap or a GeoTIFF DEM.

Where a scene gives a terrain, it replaces the ground plane z = 0 for every sensor and for
collisions: its triangles are the ground surface of the ray caster (camera, lidar,
rangefinder) and :class:`TerrainCollider` is the physics engine's ground.

Sources and geo-referencing (``map`` is ENU about the home point, seed 000's NED turned ENU):

- ``*.png``: a 16-bit (or 8-bit) greyscale heightmap, pixel value p -> height
  ``h_min + (h_max - h_min) p / p_max`` (m, ``height_range_m``), the image spanning ``size_m``
  (east, north) centred on ``center_m`` in ``map``; row 0 is the north edge (image up = north).
- ``*.tif`` / ``*.tiff``: a GeoTIFF DEM read with rasterio (GDAL). Each cell centre is taken from
  the file's CRS to WGS-84 latitude/longitude (PROJ), and with the cell's height to ENU about the
  home point (:func:`pymap3d.geodetic2enu`, WGS-84): heights are taken in the datum of the home
  altitude. A DEM without a CRS cannot be placed and is refused. ``nodata`` cells take the
  lowest valid height.

Each grid cell is split into two triangles. Large rasters are decimated to at most
``max_cells`` cells per side (block maximum is not used: plain subsampling, every kept sample is
a real DEM value). Heights anywhere on the terrain are those of the triangulated surface:
:meth:`Terrain.height_at` casts a vertical ray (Embree) onto the same triangles the sensors see.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aerial_sim.config import ParamsError, require
from aerial_sim.physics.contact import Contact

#: The body box's sample points in units of its half extents: corners, edge midpoints, face centres.
_SAMPLES = np.array([(x, y, z) for x in (-1, 0, 1) for y in (-1, 0, 1) for z in (-1, 0, 1) if (x, y, z) != (0, 0, 0)],
                    float)
_IS_CORNER = np.abs(_SAMPLES).sum(axis=1) == 3


def quaternion_matrix(q) -> np.ndarray:
    """Rotation matrix of a (w, x, y, z) quaternion (normalised here), body->world."""
    w, x, y, z = np.asarray(q, float) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


@dataclass(frozen=True)
class TerrainParams:
    """The ``terrain:`` section of a scene file."""

    file: str
    size_m: tuple[float, float] | None = None  # PNG: extent east x north (m)
    height_range_m: tuple[float, float] = (0.0, 10.0)  # PNG: heights of the darkest and brightest pixel (m)
    center_m: tuple[float, float] = (0.0, 0.0)  # PNG: map position of the image centre (east, north)
    max_cells: int = 512  # at most this many cells per side (larger rasters are subsampled)
    texture: str | None = None  # optional image draped over the terrain's extent (north up)

    def __post_init__(self) -> None:
        require(self.size_m is None or all(math.isfinite(s) and s > 0 for s in self.size_m),
                f"size_m: must be > 0, got {self.size_m}")
        low, high = self.height_range_m
        require(math.isfinite(low) and math.isfinite(high) and high >= low,
                f"height_range_m: must be [low, high] with high >= low, got {self.height_range_m}")
        require(2 <= self.max_cells <= 4096, f"max_cells: must be 2..4096, got {self.max_cells}")


class Terrain:
    """A triangulated height field in ``map``: vertices (R, C, 3), texture coordinates (R, C, 2)."""

    def __init__(self, grid: np.ndarray, source: str, texture: np.ndarray | None = None):
        self.grid = np.ascontiguousarray(grid, np.float64)
        self.source = source
        self.texture = texture
        rows, cols = self.grid.shape[:2]
        r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
        self.uv = np.stack([c / (cols - 1), 1.0 - r / (rows - 1)], axis=-1).astype(np.float32)
        a = (r[:-1, :-1] * cols + c[:-1, :-1]).ravel()
        b, d, e = a + 1, a + cols, a + cols + 1
        self.faces = np.concatenate([np.stack([a, d, b], 1), np.stack([b, d, e], 1)])
        self._heights = None
        self._bounds = None

    @property
    def vertices(self) -> np.ndarray:
        return self.grid.reshape(-1, 3)

    @property
    def triangles(self) -> np.ndarray:
        return self.vertices[self.faces]

    @property
    def corner_uv(self) -> np.ndarray:
        return self.uv.reshape(-1, 2)[self.faces]

    @property
    def bounds(self) -> np.ndarray:
        """((xmin, ymin, zmin), (xmax, ymax, zmax)) of the grid (computed once: colliders ask every step)."""
        if self._bounds is None:
            self._bounds = np.array([self.vertices.min(axis=0), self.vertices.max(axis=0)])
        return self._bounds

    def height_at(self, x, y) -> np.ndarray:
        """Terrain height (m, map z) under map points (x, y); nan outside the terrain."""
        x, y = np.broadcast_arrays(np.asarray(x, float), np.asarray(y, float))
        top = self.bounds[1, 2] + 10.0
        origins = np.stack([x.ravel(), y.ravel(), np.full(x.size, top)], axis=1)
        distance, _ = self._vertical_hits(origins)
        return (top - distance).reshape(x.shape)

    def _vertical_hits(self, origins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._heights is None:
            from embreex import rtcore_scene
            from embreex.mesh_construction import TriangleMesh

            self._heights = rtcore_scene.EmbreeScene()
            TriangleMesh(self._heights, self.triangles.astype(np.float32))
        origins = np.ascontiguousarray(origins, np.float32)
        down = np.zeros_like(origins)
        down[:, 2] = -1.0
        result = self._heights.run(origins, down, output=1)
        distance = np.where(result["primID"] >= 0, result["tfar"], np.nan).astype(float)
        normals = np.asarray(result["Ng"], float)
        normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-30)
        normals *= np.where(normals[:, 2:3] < 0, -1.0, 1.0)
        return distance, normals


class TerrainCollider:
    """The terrain as the physics engine's ground (the Collider protocol of :mod:`aerial_sim.physics.contact`).

    The body box's corners, edge midpoints and face centres (26 points, so that a peak under the
    middle of a face is felt) are compared with the terrain height under each: the deepest point
    below the surface gives the penetration depth (measured vertically, which equals the normal
    depth on level ground and overestimates it by 1/cos(slope) on slopes), the surface normal there
    the contact normal, and corners within a millimetre of it the touching patch (its radius from the corners among them).
    """

    FACE_TOLERANCE_M = 1e-3

    def __init__(self, terrain: Terrain):
        self.terrain = terrain
        self.name = "terrain"
        low, high = terrain.bounds
        self.bounds = (tuple(low[:2]) + (-math.inf,), tuple(high[:2]) + (float(high[2]),))
        self._top = float(high[2]) + 10.0
        self._highest = float(high[2])

    def contact(self, position, orientation, half_extents) -> Contact | None:
        if position[2] - math.sqrt(sum(h * h for h in half_extents)) > self._highest:
            return None  # the whole box is above the highest point of the terrain
        corners = np.asarray(position, float) + (_SAMPLES * np.asarray(half_extents, float)) @ \
            quaternion_matrix(orientation).T
        origins = corners.copy()
        origins[:, 2] = self._top
        distance, normals = self.terrain._vertical_hits(origins)
        depth = (self._top - distance) - corners[:, 2]
        depth = np.where(np.isfinite(depth), depth, -np.inf)
        deepest = int(np.argmax(depth))
        if not depth[deepest] >= 0.0:
            return None
        touching = depth >= depth[deepest] - self.FACE_TOLERANCE_M
        patch = corners[touching]
        point = patch.mean(axis=0)
        radius = 0.0
        patch = corners[touching & _IS_CORNER]
        if len(patch) >= 3:
            radius = 0.5 * min(float(np.linalg.norm(a - b)) for i, a in enumerate(patch) for b in patch[i + 1:])
        return Contact(point=tuple(float(v) for v in point), normal=tuple(float(v) for v in normals[deepest]),
                       depth_m=float(depth[deepest]), patch_radius_m=radius)

    def __repr__(self) -> str:
        return f"TerrainCollider({self.terrain.source!r})"


def load_terrain(params: TerrainParams, base_dir: Path, home, where: str) -> Terrain:
    """Read the heightmap or DEM of ``params`` (paths relative to ``base_dir``); ``home`` a HomePoint."""
    path = _resolve(params.file, base_dir)
    if not path.is_file():
        raise ParamsError(f"{where}.file: no such terrain file: {path}")
    suffix = path.suffix.lower()
    if suffix == ".png":
        grid = _png_grid(path, params, where)
    elif suffix in (".tif", ".tiff"):
        grid = _geotiff_grid(path, params, home, where)
    else:
        raise ParamsError(f"{where}.file: {path.name}: not a heightmap (.png) or a GeoTIFF DEM (.tif)")
    texture = None
    if params.texture is not None:
        texture_path = _resolve(params.texture, base_dir)
        texture = _read_image(texture_path, f"{where}.texture")
    return Terrain(grid, str(path), texture)


def terrain_files(params: TerrainParams, base_dir: Path) -> list[Path]:
    """The files a terrain is read from: the heightmap or DEM, and its texture if it has one."""
    return [_resolve(params.file, base_dir)] + ([] if params.texture is None else [_resolve(params.texture, base_dir)])


def _resolve(name: str, base_dir: Path) -> Path:
    path = Path(name).expanduser()
    return path if path.is_absolute() else base_dir / path


def _read_image(path: Path, where: str) -> np.ndarray:
    from PIL import Image

    if not path.is_file():
        raise ParamsError(f"{where}: texture not found: {path}")
    try:
        with Image.open(path) as image:
            return np.ascontiguousarray(np.asarray(image.convert("RGB"), np.uint8))
    except Exception as error:
        raise ParamsError(f"{where}: cannot read image {path}: {error}") from error


def _subsample(values: np.ndarray, max_cells: int) -> tuple[np.ndarray, int, int]:
    """Every k-th row and column so that at most ``max_cells`` cells remain per side; keeps both edges."""
    rows, cols = values.shape
    rows_kept = np.unique(np.linspace(0, rows - 1, min(rows, max_cells + 1)).round().astype(int))
    cols_kept = np.unique(np.linspace(0, cols - 1, min(cols, max_cells + 1)).round().astype(int))
    return values[np.ix_(rows_kept, cols_kept)], rows_kept, cols_kept


def _png_grid(path: Path, params: TerrainParams, where: str) -> np.ndarray:
    from PIL import Image

    if params.size_m is None:
        raise ParamsError(f"{where}.size_m: required for a PNG heightmap (its extent east x north, m)")
    try:
        with Image.open(path) as image:
            values = np.asarray(image)
            maximum = 65535.0 if values.dtype != np.uint8 else 255.0
    except Exception as error:
        raise ParamsError(f"{where}.file: cannot read heightmap {path}: {error}") from error
    if values.ndim != 2 or min(values.shape) < 2:
        raise ParamsError(f"{where}.file: {path.name}: expected a single-channel (greyscale) image of at least 2x2 "
                          f"pixels, got shape {values.shape}")
    rows, cols = values.shape
    low, high = params.height_range_m
    kept, rows_kept, cols_kept = _subsample(values.astype(np.float64), params.max_cells)
    east = params.center_m[0] + params.size_m[0] * (cols_kept / (cols - 1) - 0.5)
    north = params.center_m[1] + params.size_m[1] * (0.5 - rows_kept / (rows - 1))
    e, n = np.meshgrid(east, north)
    return np.stack([e, n, low + (high - low) * kept / maximum], axis=-1)


def _geotiff_grid(path: Path, params: TerrainParams, home, where: str) -> np.ndarray:
    import pymap3d
    import rasterio
    import rasterio.transform
    import rasterio.warp

    try:
        with rasterio.open(path) as dataset:
            crs = dataset.crs
            if crs is None:
                raise ParamsError(f"{where}.file: {path.name}: the DEM has no coordinate reference system (CRS); "
                                  "it cannot be placed on the earth")
            values = dataset.read(1, masked=True)
            transform = dataset.transform
    except ParamsError:
        raise
    except Exception as error:
        raise ParamsError(f"{where}.file: cannot read DEM {path}: {error}") from error
    if values.count() == 0:
        raise ParamsError(f"{where}.file: {path.name}: the DEM has no valid cell")
    filled = np.ma.filled(values.astype(np.float64), float(values.min()))
    kept, rows_kept, cols_kept = _subsample(filled, params.max_cells)
    c, r = np.meshgrid(cols_kept, rows_kept)
    xs, ys = rasterio.transform.xy(transform, r.ravel(), c.ravel(), offset="center")
    lon, lat = rasterio.warp.transform(crs, "EPSG:4326", list(xs), list(ys))
    east, north, up = pymap3d.geodetic2enu(np.asarray(lat), np.asarray(lon), kept.ravel(),
                                           home.latitude, home.longitude, home.altitude)
    return np.stack([east, north, up], axis=-1).reshape(kept.shape + (3,))
