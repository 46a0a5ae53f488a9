"""Scene geometry: world-frame triangle meshes of scene objects and a ray caster over them.

Rays are cast with Intel Embree 4 (through ``embreex``) against all object
triangles at once; the ground is the analytic plane z = 0, intersected in
closed form (exact at any distance, no tessellation). One cast per pixel gives
everything the camera needs: hit distance (depth), which surface was hit
(segmentation id, colour) and the surface normal (Lambert shading). This
replaces the Unreal render passes AirSim uses for its depth, segmentation and
scene images (seed 000, sec. 3).

Meshes are built and loaded (OBJ/STL) with ``trimesh``.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

import numpy as np
import trimesh
from embreex import rtcore_scene
from embreex.mesh_construction import TriangleMesh

from aerial_sim.world import raster_kernels, render_kernels
from aerial_sim.world.assets import SurfacePart, load_asset
from aerial_sim.world.material_maps import MaterialMaps, has_texture, material_maps_of
from aerial_sim.world.shadow_kernels import LEAF_SIZE, SunView, build_bvh, sun_view
from aerial_sim.world.scene import OSM_FILE_PREFIX, Scene, SceneObject

#: Surface index of a ray that hit nothing; 1 is the ground, 2 + k is scene object k.
SURFACE_NONE = 0
SURFACE_GROUND = 1
CYLINDER_SECTIONS = 48


def quaternion_to_matrix(q: Sequence[float]) -> np.ndarray:
    """Rotation matrix of a (w, x, y, z) quaternion (normalised here), body->world."""
    w, x, y, z = (float(v) for v in q)
    n = math.sqrt(w * w + x * x + y * y + z * z)
    if not n > 0:
        raise ValueError(f"quaternion {tuple(q)} has zero norm")
    w, x, y, z = w / n, x / n, y / n, z / n
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def rpy_to_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """R = Rz(yaw) Ry(pitch) Rx(roll) (REP-103 fixed-axis roll, pitch, yaw), radians."""
    cr, sr, cp, sp, cy, sy = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch), math.cos(yaw), math.sin(yaw)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def object_transform(obj: SceneObject) -> np.ndarray:
    """4x4 homogeneous transform object->world (ENU)."""
    transform = np.eye(4)
    transform[:3, :3] = quaternion_to_matrix(obj.quaternion)
    transform[:3, 3] = obj.position
    return transform


def object_parts(obj: SceneObject, scene: Scene) -> list[SurfacePart]:
    """The object's surfaces in the world frame: one part for a primitive, one per material of a mesh file."""
    if obj.shape == "mesh":
        parts = mesh_file_parts(obj, scene)
        transform = object_transform(obj)
        transform[:3, :3] *= obj.scale
        return [part.transformed(transform) for part in parts]
    if obj.shape == "box":
        mesh = trimesh.creation.box(extents=obj.size)
    elif obj.shape == "cylinder":
        mesh = trimesh.creation.cylinder(radius=obj.radius, height=obj.height, sections=CYLINDER_SECTIONS)
    else:
        mesh = trimesh.creation.icosphere(subdivisions=3, radius=obj.radius)
    mesh.apply_transform(object_transform(obj))
    return [SurfacePart(np.asarray(mesh.triangles, np.float64))]


def mesh_file_parts(obj: SceneObject, scene: Scene) -> list[SurfacePart]:
    """The parts of a mesh object's file in the file's frame, read once per scene (``scene.cache``)."""
    loaded = scene.cache.setdefault("mesh_files", {})
    path = scene.mesh_path(obj)
    if path not in loaded:
        loaded[path] = load_asset(path, f"{scene.name}: object '{obj.name}'.file")
    return loaded[path]


def object_mesh(obj: SceneObject, scene: Scene) -> trimesh.Trimesh:
    """The object's triangle mesh in the world frame (all its parts as one mesh, vertices merged)."""
    triangles = np.concatenate([part.triangles for part in object_parts(obj, scene)])
    mesh = trimesh.Trimesh(vertices=triangles.reshape(-1, 3), faces=np.arange(3 * len(triangles)).reshape(-1, 3),
                           process=False)
    mesh.merge_vertices()
    return mesh


def load_mesh_file(path, where: str) -> trimesh.Trimesh:
    """Load a mesh file (OBJ/STL/glTF/GLB) as one triangle mesh in its own frame; ParamsError if unusable."""
    triangles = np.concatenate([part.triangles for part in load_asset(path, where)])
    return trimesh.Trimesh(vertices=triangles.reshape(-1, 3), faces=np.arange(3 * len(triangles)).reshape(-1, 3),
                           process=False)


@dataclass(frozen=True)
class RayHits:
    """Result of casting N rays: per ray distance, surface index and unit world normal."""

    distance: np.ndarray  # (N,) float32, metres along the unit ray direction; +inf where nothing was hit
    surface: np.ndarray  # (N,) int32: SURFACE_NONE, SURFACE_GROUND or 2 + object index
    normal: np.ndarray  # (N, 3) float32 unit world normals facing the ray origin; zero where nothing was hit
    #                     ((0, 3) when the cast was asked for no normals)
    triangle: np.ndarray | None = None  # (N,) int32 index into SceneSurfaces.triangles, -1: none or ground plane


@dataclass(frozen=True)
class SceneSurfaces:
    """Every triangle of a scene with what the renderer needs per triangle (all arrays row-aligned).

    ``triangles`` (T, 3, 3) float64 world corners; ``surface`` (T,) int32 (1 ground/terrain, 2 + k object k);
    ``uv`` (T, 3, 2) float32 corner texture coordinates (0 where untextured); ``texture`` (T,) int32 index into
    ``texture_table`` or -1; ``albedo`` (T, 3) float32 base colour 0-255 (multiplies the texture, / 255);
    ``texels`` all textures' RGB bytes, flat; ``texture_table`` (K, 3) int64 (offset, width, height);
    ``pbr`` (T, 2) float32 glTF (metallic, roughness), metallic -1 for a surface shaded by Lambert's law alone;
    ``pbr_texture`` (T,) int32 index into ``texture_table`` of its metallicRoughnessTexture, or -1;
    ``maps`` the glTF normal, occlusion and emissive maps (:mod:`aerial_sim.world.material_maps`; None: none).
    """

    triangles: np.ndarray
    surface: np.ndarray
    uv: np.ndarray
    texture: np.ndarray
    albedo: np.ndarray
    texels: np.ndarray
    texture_table: np.ndarray
    pbr: np.ndarray | None = None
    pbr_texture: np.ndarray | None = None
    maps: MaterialMaps | None = None

    @property
    def count(self) -> int:
        return len(self.triangles)

    @cached_property
    def uv_plane(self) -> np.ndarray:
        """(T, 8) float64: each textured triangle's texture coordinates as an affine map of a point p on its plane,
        u = g_u . p + c_u, v = g_v . p + c_v (rows g_u, c_u, g_v, c_v; zero for untextured or degenerate ones).

        With e_1 = B - A, e_2 = C - A and q = p - A, the barycentric weights are b_1 = q . g_1, b_2 = q . g_2,
        g_1 = (d_11 e_1 - d_01 e_2) / D, g_2 = (d_00 e_2 - d_01 e_1) / D (d_ij = e_i . e_j, D = d_00 d_11 - d_01^2),
        so u = u_A + (u_B - u_A) b_1 + (u_C - u_A) b_2 is affine in p: one dot product a pixel instead of solving
        for the weights.
        """
        plane = np.zeros((self.count, 8))
        textured = np.flatnonzero((self.texture >= 0) | (self.pbr_texture >= 0 if self.pbr_texture is not None
                                                         else False) | has_texture(self.maps))
        if len(textured) == 0:
            return plane
        corners, uv = self.triangles[textured], self.uv[textured].astype(np.float64)
        e1, e2 = corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]
        d00, d01, d11 = (e1 * e1).sum(1), (e1 * e2).sum(1), (e2 * e2).sum(1)
        den = d00 * d11 - d01 * d01
        usable = den > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            g1 = (d11[:, None] * e1 - d01[:, None] * e2) / den[:, None]
            g2 = (d00[:, None] * e2 - d01[:, None] * e1) / den[:, None]
        for column, k in ((0, 0), (4, 1)):
            gradient = (uv[:, 1, k] - uv[:, 0, k])[:, None] * g1 + (uv[:, 2, k] - uv[:, 0, k])[:, None] * g2
            constant = uv[:, 0, k] - (gradient * corners[:, 0]).sum(1)
            plane[textured[usable], column:column + 3] = gradient[usable]
            plane[textured[usable], column + 3] = constant[usable]
        return plane


#: (metallic, roughness) of a surface shaded by Lambert's law (not a metallic-roughness material).
LAMBERT = (-1.0, 1.0)


def scene_surfaces(scene: Scene) -> SceneSurfaces:
    """Gather the terrain's and every object's triangles, colours and textures (built once per scene)."""
    if "surfaces" in scene.cache:
        return scene.cache["surfaces"]
    surfaces = scene.cache["surfaces"] = _surfaces_of(_scene_chunks(scene))
    return surfaces


def _scene_chunks(scene: Scene) -> list[tuple]:
    """The (triangles, surface, uv, albedo, texture image or None, (metallic, roughness), metallic-roughness image
    or None) of the terrain and each object's parts."""
    chunks = []
    if scene.terrain is not None:
        terrain = scene.terrain
        chunks.append((terrain.triangles, SURFACE_GROUND, terrain.corner_uv if terrain.texture is not None else None,
                       scene.object_color(scene.ground) if terrain.texture is None else (255.0, 255.0, 255.0),
                       terrain.texture, LAMBERT, None))
    for index, obj in enumerate(scene.objects):
        chunks += _part_chunks(scene, index, object_parts(obj, scene))
    return chunks


def _part_chunks(scene: Scene, index: int, parts: list[SurfacePart]) -> list[tuple]:
    """The chunks of object ``index``'s ``parts`` (world frame) for :func:`_surfaces_of`."""
    obj = scene.objects[index]
    chunks = []
    for part in parts:
        if obj.color is not None or part.base_color is None:
            color = scene.object_color(obj) if part.texture is None or obj.color is not None else (255.0,) * 3
        else:
            color = part.base_color
        pbr = LAMBERT if part.metallic is None else (part.metallic, part.roughness)
        chunks.append((part.triangles, 2 + index, part.uv, color, part.texture, pbr, part.pbr_texture, part.maps))
    return chunks


@dataclass(frozen=True)
class LodGroups:
    """The objects the camera draws by level of detail (:mod:`aerial_sim.world.lod`), over the rows of the
    surfaces :func:`render_surfaces` returns: ``group`` (R,) int32 each row's group (-1: always drawn), ``level``
    (R,) int32 its level (0 the full mesh), ``lift`` (R,) float32 how much further off the surface its pixels'
    shadow rays start: its level's triangle size s_l in metres, and level 1's for the full mesh, since level 1
    casts the object's shadows (:meth:`RayCaster.sun_view`)."""

    group: np.ndarray
    level: np.ndarray
    lift: np.ndarray


def render_surfaces(scene: Scene) -> tuple[SceneSurfaces, LodGroups | None]:
    """What the camera draws: every row of :func:`scene_surfaces` (same rows, same order), then the simplified
    levels of the scene's large meshes (:mod:`aerial_sim.world.lod`) with their groups; the surfaces of
    :func:`scene_surfaces` and None when the scene has no such mesh or its ``lod`` is off (built once per scene)."""
    if "render_surfaces" in scene.cache:
        return scene.cache["render_surfaces"]
    from aerial_sim.world.lod import levels_of

    surfaces = scene_surfaces(scene)
    chunks = []
    full_rows = len(surfaces.triangles)
    group_of_surface = np.full(len(scene.objects) + 2, -1, np.int32)
    lift_of_surface = np.zeros(len(scene.objects) + 2, np.float32)
    extra_group, extra_level, extra_lift = [], [], []
    levels_by_file = scene.cache.setdefault("lod_levels", {})
    groups = 0
    if scene.lod.enabled:
        for index, obj in enumerate(scene.objects):
            if obj.shape != "mesh" or obj.file.startswith(OSM_FILE_PREFIX) or obj.ground_cover:
                continue  # OSM buildings and ground cover (draped on the terrain) are always drawn whole
            path = scene.mesh_path(obj)
            if path not in levels_by_file:
                levels_by_file[path] = levels_of(mesh_file_parts(obj, scene), scene.lod.min_triangles)
            levels = levels_by_file[path]
            if len(levels) < 2:
                continue
            group_of_surface[2 + index] = groups
            lift_of_surface[2 + index] = levels[1].size * obj.scale  # the full mesh's shadows: level 1's
            transform = object_transform(obj)
            transform[:3, :3] *= obj.scale
            for number, level in enumerate(levels[1:], start=1):
                parts = [part.transformed(transform) for part in level.parts]
                chunks += _part_chunks(scene, index, parts)
                rows = sum(len(part.triangles) for part in parts)
                extra_group.append(np.full(rows, groups, np.int32))
                extra_level.append(np.full(rows, number, np.int32))
                extra_lift.append(np.full(rows, level.size * obj.scale, np.float32))
            groups += 1
    if not groups:
        result = scene.cache["render_surfaces"] = (surfaces, None)
        return result
    group = np.concatenate([group_of_surface[surfaces.surface]] + extra_group)
    level = np.concatenate([np.zeros(full_rows, np.int32)] + extra_level)
    lift = np.concatenate([lift_of_surface[surfaces.surface]] + extra_lift)
    # The same chunks as scene_surfaces' first (so the same rows and texture numbers), then the levels'.
    result = scene.cache["render_surfaces"] = (_surfaces_of(_scene_chunks(scene) + chunks),
                                               LodGroups(group, level, lift))
    return result


def closed_outward(triangles: np.ndarray) -> bool:
    """Whether ``triangles`` (T, 3, 3) form closed surfaces wound counter-clockwise seen from outside: corners
    merged by position, every directed edge (a, b) occurs exactly once and so does (b, a) (each edge shared by
    two triangles, wound opposite ways), and the enclosed signed volume (sum of v0 . (v1 x v2) / 6) is > 0.
    From outside such a surface a ray meets a triangle facing it (n . d < 0) before any facing away."""
    triangles = np.asarray(triangles, np.float64).reshape(-1, 3, 3)
    if len(triangles) < 4:
        return False
    from aerial_sim.world.lod import _indexed

    _, faces = _indexed(triangles)
    if len(faces) != len(triangles):  # a triangle with two corners at one position
        return False
    edges = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    keys = edges[:, 0] * (int(faces.max()) + 1) + edges[:, 1]
    reverse = edges[:, 1] * (int(faces.max()) + 1) + edges[:, 0]
    keys.sort()
    reverse.sort()
    if np.any(keys[1:] == keys[:-1]) or not np.array_equal(keys, reverse):
        return False
    volume = np.einsum("ij,ij->i", triangles[:, 0], np.cross(triangles[:, 1], triangles[:, 2])).sum() / 6.0
    return bool(volume > 0)


def closed_rows(scene: Scene) -> np.ndarray:
    """(R,) bool over the rows of :func:`render_surfaces`: whether the row belongs to a closed, outward-wound
    surface (:func:`closed_outward`) of one object (checked once per mesh file and level, per OpenStreetMap
    building, per primitive shape), whose faces turned away from a camera outside the object are never seen
    first. Terrain and ground cover are open surfaces (built once per scene)."""
    if "closed_rows" in scene.cache:
        return scene.cache["closed_rows"]
    surfaces, lod = render_surfaces(scene)
    by_file = scene.cache.setdefault("closed_files", {})
    closed_object = np.zeros(len(scene.objects) + 2, bool)
    for index, obj in enumerate(scene.objects):
        if obj.ground_cover or obj.scale <= 0:
            continue
        if obj.shape != "mesh":
            closed_object[2 + index] = True  # trimesh's box, cylinder and icosphere
            continue
        path = scene.mesh_path(obj)
        if path not in by_file:
            by_file[path] = closed_outward(np.concatenate([part.triangles for part in mesh_file_parts(obj, scene)]))
        closed_object[2 + index] = by_file[path]
    closed = closed_object[surfaces.surface]
    if lod is not None:
        levels_by_file = scene.cache.get("lod_levels", {})
        level_rows = np.flatnonzero(lod.level > 0)
        closed[level_rows] = False
        checked = {}
        objects = surfaces.surface[level_rows] - 2
        for index in np.unique(objects):
            obj = scene.objects[index]
            path = scene.mesh_path(obj)
            levels = levels_by_file.get(path)
            if levels is None or not closed_object[2 + index]:
                continue
            rows = level_rows[objects == index]
            for number in np.unique(lod.level[rows]):
                key = (path, int(number))
                if key not in checked:
                    checked[key] = closed_outward(np.concatenate([part.triangles for part in levels[number].parts]))
                closed[rows[lod.level[rows] == number]] = checked[key]
    closed[surfaces.surface == SURFACE_GROUND] = False
    scene.cache["closed_rows"] = closed
    return closed


def _joined(items, empty):
    """The arrays ``items`` end to end (contiguous), or ``empty`` when there are none."""
    return np.ascontiguousarray(np.concatenate(items)) if items else empty


def _surfaces_of(chunks: list[tuple]) -> SceneSurfaces:
    """One :class:`SceneSurfaces` of the chunks (triangles, surface, uv, albedo, texture image or None,
    (metallic, roughness), metallic-roughness image or None), in order."""
    textures: list[np.ndarray] = []
    texture_ids: dict[int, int] = {}
    triangles, surface, uv, texture, albedo, pbrs, pbr_textures = [], [], [], [], [], [], []
    maps = []  # (count, SurfaceMaps or None) per chunk: an object part's 8th item

    def texture_id(image) -> int:
        if id(image) not in texture_ids:
            texture_ids[id(image)] = len(textures)
            textures.append(image)
        return texture_ids[id(image)]

    for chunk in chunks:
        corners, kind, corner_uv, color, image, pbr, pbr_image = chunk[:7]
        count = len(corners)
        maps.append((count, chunk[7] if len(chunk) > 7 and corner_uv is not None else None))
        pbrs.append(np.tile(np.asarray(pbr, np.float32), (count, 1)))
        pbr_textures.append(np.full(count, -1 if pbr_image is None or corner_uv is None else texture_id(pbr_image),
                                    np.int32))
        triangles.append(np.asarray(corners, np.float64))
        surface.append(np.full(count, kind, np.int32))
        albedo.append(np.tile(np.asarray(color, np.float32), (count, 1)))
        uv.append(np.zeros((count, 3, 2), np.float32) if corner_uv is None else np.asarray(corner_uv, np.float32))
        texture.append(np.full(count, -1 if image is None or corner_uv is None else texture_id(image), np.int32))
    all_triangles = _joined(triangles, np.empty((0, 3, 3)))
    all_uv = _joined(uv, np.empty((0, 3, 2), np.float32))
    material_maps = material_maps_of(maps, texture_id, all_triangles, all_uv)
    table = np.zeros((len(textures), 3), np.int64)
    offset = 0
    for k, image in enumerate(textures):
        table[k] = (offset, image.shape[1], image.shape[0])
        offset += image.size
    texels = np.concatenate([image.ravel() for image in textures]) if textures else np.zeros(3, np.uint8)
    surfaces = SceneSurfaces(
        triangles=all_triangles, surface=_joined(surface, np.empty(0, np.int32)),
        uv=all_uv, texture=_joined(texture, np.empty(0, np.int32)),
        albedo=_joined(albedo, np.empty((0, 3), np.float32)), texels=np.ascontiguousarray(texels), texture_table=table,
        pbr=_joined(pbrs, np.empty((0, 2), np.float32)), pbr_texture=_joined(pbr_textures, np.empty(0, np.int32)),
        maps=material_maps,
    )
    return surfaces


def ray_caster_of(scene: Scene) -> RayCaster:
    """The scene's :class:`RayCaster`, built on first use and shared by every sensor of the process."""
    caster = scene.cache.get("ray_caster")
    if caster is None:
        caster = scene.cache["ray_caster"] = RayCaster(scene)
    return caster


class RayCaster:
    """First-hit ray queries against a scene's triangles (Embree) and, without a terrain, the ground plane (analytic)."""

    #: Sun views (:meth:`sun_view`) kept at once (each holds its casters' grid: about 50 MB for the city).
    SUN_VIEWS_KEPT = 2

    def __init__(self, scene: Scene):
        self.scene = scene
        self.surfaces = scene_surfaces(scene)
        #: Whether the ground is the analytic plane z = 0 (no terrain).
        self.ground_plane = scene.terrain is None
        self._embree_scene = None
        self._embree_lock = threading.Lock()
        self._surface_of_triangle = self.surfaces.surface
        render_kernels.warm_up()
        self._rasterizer: PinholeRasterizer | None = None
        self._sun_views: dict[tuple[float, float, float], SunView] = {}
        self._sun_view_lock = threading.Lock()

    @property
    def _embree(self):
        """Embree's scene of the triangles (None without triangles), built on the first ray query: a camera
        alone never needs it (it rasterises, and answers its shadow rays in the sun's view), and for a
        1 M-triangle world the build takes seconds."""
        if self._embree_scene is None and self.surfaces.count:
            with self._embree_lock:
                if self._embree_scene is None:
                    embree = rtcore_scene.EmbreeScene()
                    TriangleMesh(embree, self.surfaces.triangles.astype(np.float32))
                    self._embree_scene = embree
        return self._embree_scene

    @property
    def triangle_count(self) -> int:
        return self.surfaces.count

    @property
    def bounds(self) -> np.ndarray | None:
        """((xmin, ymin, zmin), (xmax, ymax, zmax)) of every triangle, None for an empty scene."""
        if not self.surfaces.count:
            return None
        corners = self.surfaces.triangles.reshape(-1, 3)
        return np.array([corners.min(axis=0), corners.max(axis=0)])

    def sun_view(self, sun: np.ndarray) -> SunView:
        """The triangles that may cast shadows under the unit direction ``sun``, in its view, binned in a grid
        there (:func:`~aerial_sim.world.shadow_kernels.sun_view`), built once for each new sun direction.

        A terrain (with the ground cover draped on it) whose steepest triangle is less steep than the sun is
        high (slope |n_xy| / n_z below s_z / |s_xy|) is left out: a ray toward the sun from a point on or above
        a height field rises faster than the ground under it can, so it never meets the terrain (as the ground
        plane never shadows).
        A mesh drawn by level of detail casts its shadows with its first simplified level (a quarter of its
        triangles; :mod:`aerial_sim.world.lod`).
        """
        key = tuple(float(c) for c in np.asarray(sun, np.float32))
        view = self._sun_views.get(key)
        if view is None:
            with self._sun_view_lock:
                view = self._sun_views.get(key)
                if view is None:
                    surfaces, lod = render_surfaces(self.scene)
                    casts = np.ones(surfaces.count, bool) if lod is None else (lod.group < 0) | (lod.level == 1)
                    ground = self._ground_like  # the rows of scene_surfaces, which render_surfaces' begin with
                    if ground.any() and self._terrain_slope < _slope(np.asarray(key)) * (1.0 - 1e-6):
                        casts[:len(ground)] &= ~ground
                    view = sun_view(surfaces.triangles[casts], np.asarray(key, np.float32))
                    # A few suns kept (cameras of one process may be set to different times of day).
                    views = dict(list(self._sun_views.items())[-(self.SUN_VIEWS_KEPT - 1):])
                    views[key] = view
                    self._sun_views = views
        return view

    @cached_property
    def _ground_like(self) -> np.ndarray:
        """(T,) bool: the terrain's triangles and those of ground cover draped on the ground (OSM roads, land
        use: :mod:`aerial_sim.world.osm`), which together form one height field."""
        cover = [2 + k for k, obj in enumerate(self.scene.objects) if obj.ground_cover]
        return np.isin(self.surfaces.surface, [SURFACE_GROUND] + cover) if cover or not self.ground_plane else \
            np.zeros(self.surfaces.count, bool)

    @cached_property
    def _terrain_slope(self) -> float:
        """The steepest slope (rise over run) of the terrain's triangles; 0 without a terrain. Ground cover draped
        on it (corners on the terrain + the lift, edges short enough that it departs from there by less than half
        the lift: :mod:`aerial_sim.world.osm`) follows it: a ray rising faster than the terrain from a point on or
        above the cover could meet it only within lift / (sun slope - terrain slope) of its start."""
        terrain = self.surfaces.triangles[self.surfaces.surface == SURFACE_GROUND]
        if not len(terrain):
            return 0.0
        normals = np.cross(terrain[:, 1] - terrain[:, 0], terrain[:, 2] - terrain[:, 0])
        with np.errstate(divide="ignore", invalid="ignore"):
            slopes = np.hypot(normals[:, 0], normals[:, 1]) / np.abs(normals[:, 2])
        slopes = slopes[np.linalg.norm(normals, axis=1) > 0]  # a degenerate triangle has no slope
        return float(slopes.max()) if len(slopes) else 0.0

    @property
    def rasterizer(self) -> PinholeRasterizer:
        """A :class:`PinholeRasterizer` over the same triangles and the simplified levels of the scene's large
        meshes (:func:`render_surfaces`; built once, on first use)."""
        if self._rasterizer is None:
            surfaces, lod = render_surfaces(self.scene)
            self._rasterizer = PinholeRasterizer(surfaces.triangles, surfaces.surface, self.ground_plane, lod,
                                                 closed_rows(self.scene))
        return self._rasterizer

    def occluded(self, origins: np.ndarray, directions: np.ndarray, max_distance: float = np.inf) -> np.ndarray:
        """(N,) bool: whether a triangle lies along each ray within ``max_distance`` (Embree's occlusion query).

        The ground plane is not tested: shadow rays toward a sun above the horizon cannot meet it from above.
        """
        count = len(directions)
        if self._embree is None or count == 0:
            return np.zeros(count, bool)
        origins = np.ascontiguousarray(origins, np.float32)
        directions = np.ascontiguousarray(directions, np.float32)
        dists = None if not np.isfinite(max_distance) else np.full(count, max_distance, np.float32)
        return self._embree.run(origins, directions, dists=dists, query="OCCLUDED") >= 0

    def cast(self, origins: np.ndarray, directions: np.ndarray, normals: bool = True,
             reference: bool = False) -> RayHits:
        """Cast rays (``origins`` (N,3) or (3,), unit ``directions`` (N,3), world frame).

        ``normals=False`` skips the normals (left zero), which only shading needs.
        The hits are merged by the compiled :func:`~aerial_sim.world.render_kernels.merge_hits`;
        ``reference=True`` (or no numba) merges them with the NumPy code it is tested against.
        """
        directions = np.ascontiguousarray(directions, dtype=np.float32)
        count = len(directions)
        origins = np.ascontiguousarray(np.broadcast_to(np.asarray(origins, np.float32), (count, 3)))
        if self._embree is not None:
            result = self._embree.run(origins, directions, output=1)
            tfar, prim, ng = result["tfar"], result["primID"], result["Ng"]
        else:
            tfar, prim, ng = np.empty(0, np.float32), np.empty(0, np.int32), np.empty((0, 3), np.float32)
        if reference or not render_kernels.COMPILED:
            return self._merge_reference(origins, directions, tfar, prim, ng, normals)
        distance = np.empty(count, np.float32)
        surface = np.empty(count, np.int32)
        triangle = np.empty(count, np.int32)
        normal = np.zeros((count, 3) if normals else (0, 3), np.float32)
        render_kernels.merge_hits(origins, directions, tfar, prim, ng, self._surface_of_triangle, self.ground_plane,
                                  distance, surface, normal, triangle)
        return RayHits(distance, surface, normal, triangle)

    def _merge_reference(self, origins, directions, tfar, prim, ng, normals: bool) -> RayHits:
        """NumPy version of :func:`~aerial_sim.world.render_kernels.merge_hits` (the reference)."""
        count = len(directions)
        distance = np.full(count, np.inf, np.float32)
        surface = np.zeros(count, np.int32)
        triangle = np.full(count, -1, np.int32)
        normal = np.zeros((count, 3) if normals else (0, 3), np.float32)

        if self.ground_plane:
            # Ground plane z = 0, seen from either side.
            with np.errstate(divide="ignore", invalid="ignore"):
                t_ground = -origins[:, 2] / directions[:, 2]
            ground = np.isfinite(t_ground) & (t_ground > 0)
            distance[ground] = t_ground[ground]
            surface[ground] = SURFACE_GROUND
            if normals:
                normal[ground, 2] = np.where(origins[ground, 2] >= 0, 1.0, -1.0)

        if len(prim):
            hit = prim >= 0
            closer = hit & (tfar < distance)
            distance[closer] = tfar[closer]
            surface[closer] = self._surface_of_triangle[prim[closer]]
            triangle[closer] = prim[closer]
            if not normals:
                return RayHits(distance, surface, normal, triangle)
            ng = ng[closer]
            ng /= np.linalg.norm(ng, axis=1, keepdims=True)
            facing = np.einsum("ij,ij->i", ng, directions[closer]) > 0
            ng[facing] *= -1.0
            normal[closer] = ng
        return RayHits(distance, surface, normal, triangle)


def _slope(direction: np.ndarray) -> float:
    """Rise over run of a direction (inf straight up)."""
    run = math.hypot(float(direction[0]), float(direction[1]))
    return float(direction[2]) / run if run > 0 else math.inf


class PinholeRasterizer:
    """First hits of a pinhole camera's pixel rays, found by rasterising the scene's triangles.

    Gives what :meth:`RayCaster.cast` gives for rays that share the camera's origin and pass
    through its pixel centres, at a fraction of the cost (the kernels and their method:
    :mod:`aerial_sim.world.raster_kernels`). Surfaces nearer than :attr:`NEAR_PLANE_M` to the
    camera centre are not seen (the ray caster would report them as too near anyway).
    """

    NEAR_PLANE_M = 1e-3

    def __init__(self, triangles: np.ndarray, surface_of_triangle: np.ndarray, ground_plane: bool = True,
                 lod: LodGroups | None = None, closed: np.ndarray | None = None):
        self.triangles = np.asarray(triangles, np.float64).reshape(-1, 3, 3)
        surface_of_triangle = np.asarray(surface_of_triangle, np.int32)
        # Each surface's box (a camera outside it is outside the surface's object).
        surfaces = int(surface_of_triangle.max()) + 1 if len(surface_of_triangle) else 1
        corners = self.triangles.reshape(-1, 3)  # (empty: no boxes)
        self._surface_lower = np.full((surfaces, 3), np.inf)
        self._surface_upper = np.full((surfaces, 3), -np.inf)
        if len(corners):
            by_surface = np.argsort(surface_of_triangle, kind="stable")
            ordered = surface_of_triangle[by_surface]
            starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
            boxes = self.triangles[by_surface]
            self._surface_lower[ordered[starts]] = np.minimum.reduceat(boxes.min(axis=1), starts)
            self._surface_upper[ordered[starts]] = np.maximum.reduceat(boxes.max(axis=1), starts)
        self.ground_plane = bool(ground_plane)
        normals = np.cross(self.triangles[:, 1] - self.triangles[:, 0], self.triangles[:, 2] - self.triangles[:, 0])
        lengths = np.linalg.norm(normals, axis=1)
        visible = lengths > 0  # a degenerate triangle covers no pixel and has no plane
        group = lod.group if lod is not None else np.full(len(self.triangles), -1, np.int32)
        kept = np.flatnonzero(visible & (group < 0))
        #: A hierarchy over the triangles always drawn, which are stored first, in its leaf order: each frame
        #: draws only the leaves whose boxes meet the view frustum.
        self.tree = build_bvh(self.triangles[kept])
        pieces = [kept[self.tree.order]]
        self._levels = None
        if lod is not None:
            pieces += self._level_trees(np.flatnonzero(visible & (group >= 0)), lod, len(kept))
        kept = np.concatenate(pieces)
        self.triangles = np.ascontiguousarray(self.triangles[kept])
        #: Index of each kept triangle among the ones given (hits report that index).
        self.index = np.ascontiguousarray(kept.astype(np.int32))
        self.surface_of_triangle = np.ascontiguousarray(surface_of_triangle[kept])
        #: Whether each kept triangle is part of a closed, outward-wound surface (:func:`closed_outward`): drawn
        #: only while it faces the camera, unless the camera is inside its object's box.
        self.closed = np.ascontiguousarray((np.zeros(len(kept), bool) if closed is None else
                                            np.asarray(closed, bool)[kept]).astype(np.uint8))
        self.world_normals = np.ascontiguousarray(normals[kept] / lengths[kept, None])
        self.world_normals32 = self.world_normals.astype(np.float32)
        self._static_count = len(pieces[0])
        self._local = threading.local()
        raster_kernels.warm_up()

    def _level_trees(self, rows: np.ndarray, lod: LodGroups, start: int) -> list[np.ndarray]:
        """A hierarchy over each level of each group, stored after the ``start`` triangles always drawn;
        returns the rows of each level in its leaf order."""
        order = np.lexsort((rows, lod.level[rows], lod.group[rows]))
        rows = rows[order]
        keys = lod.group[rows].astype(np.int64) * (1 << 20) + lod.level[rows]
        cuts = np.flatnonzero(np.diff(keys)) + 1
        pieces, groups = [], []
        size, node, first_leaf, first, count, lower, upper = [], [], [], [], [], [], []
        nodes = 0
        for segment in np.split(rows, cuts):
            tree = build_bvh(self.triangles[segment])
            pieces.append(segment[tree.order])
            size.append(float(lod.lift[segment[0]]) if lod.level[segment[0]] > 0 else 0.0)  # s_l; never read at l = 0
            node.append(nodes)
            first_leaf.append(tree.first_leaf)
            first.append(start)
            count.append(len(segment))
            lower.append(tree.lower)
            upper.append(tree.upper)
            nodes += len(tree.lower)
            start += len(segment)
            groups.append(lod.group[segment[0]])
        group_levels = np.concatenate([[0], np.flatnonzero(np.diff(groups)) + 1, [len(groups)]])
        as64 = lambda values: np.asarray(values, np.int64)  # noqa: E731
        #: Per level-of-detail group, its levels (group_levels[g] .. group_levels[g + 1] - 1), each level's
        #: triangle size, tree (heap row, first leaf) and triangles (first, count): raster_kernels.lod_triangles.
        self._levels = (as64(group_levels), np.asarray(size), as64(node), as64(first_leaf), as64(first), as64(count),
                        np.ascontiguousarray(np.concatenate(lower)), np.ascontiguousarray(np.concatenate(upper)))
        return pieces

    @property
    def lod_groups(self) -> int:
        """How many objects are drawn by level of detail."""
        return 0 if self._levels is None else len(self._levels[0]) - 1

    def _buffers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """This thread's per-frame work arrays (kept between frames: for a large world, allocating them
        each frame cost more than transforming the triangles into them)."""
        buffers = getattr(self._local, "buffers", None)
        if buffers is None:
            count = len(self.triangles)
            buffers = self._local.buffers = (np.empty((count, 3, 3)), np.empty((count, 3)), np.empty(count),
                                             np.empty(count, np.int32))
        return buffers

    @staticmethod
    def _frustum_planes(rotation: np.ndarray, intrinsics: tuple[float, float, float, float],
                        size: tuple[int, int]) -> np.ndarray:
        """World normals n of the view frustum's planes, n . (p - o) >= 0 inside: the four side planes a pixel
        beyond the image (as :func:`~aerial_sim.world.raster_kernels.rasterize` rejects triangles) and z = 0."""
        fx, fy, cx, cy = intrinsics
        width, height = size
        left, right = (-1.0 - cx) / fx, (width - cx) / fx
        top, bottom = (-1.0 - cy) / fy, (height - cy) / fy
        optical = np.array([[1.0, 0.0, -left], [-1.0, 0.0, right], [0.0, 1.0, -top], [0.0, -1.0, bottom],
                            [0.0, 0.0, 1.0]])
        return np.ascontiguousarray(optical @ rotation.T)

    def _frame_buffers(self, pixels: int) -> tuple[np.ndarray, ...]:
        """This thread's per-pixel arrays for frames of ``pixels`` pixels, kept between frames (fresh arrays of
        a 640x480 frame's 10 MB cost a few ms of page faults each frame)."""
        frames = getattr(self._local, "frames", None)
        if frames is None:
            frames = self._local.frames = {}
        buffers = frames.get(pixels)
        if buffers is None:
            buffers = frames[pixels] = (np.empty(pixels), np.empty(pixels, np.int32), np.empty(pixels, np.float32),
                                        np.empty(pixels, np.int32), np.empty((pixels, 3), np.float32),
                                        np.empty(pixels, np.int32))
        return buffers

    def hits(self, origin: np.ndarray, R_world_optical: np.ndarray, intrinsics: tuple[float, float, float, float],
             size: tuple[int, int], directions: np.ndarray, rays_optical: np.ndarray, normals: bool = True,
             lod_pixels: float = 0.0) -> RayHits:
        """Hits of the rays through every pixel centre (row-major), as :meth:`RayCaster.cast` reports them.

        ``origin`` camera centre (world), ``R_world_optical`` its optical frame, ``intrinsics``
        (f_x, f_y, c_x, c_y), ``size`` (width, height); ``directions`` and ``rays_optical`` (W H, 3)
        float32: the unit pixel rays in the world and in the optical frame. ``lod_pixels`` > 0 draws each
        level-of-detail group at the coarsest level whose triangles are at most that many pixels wide
        (:mod:`aerial_sim.world.lod`); 0 draws every mesh whole.

        The arrays of the result are this thread's buffers for frames of this size: the next call of the
        same thread for the same size overwrites them (copy what is kept).
        """
        width, height = size
        origin32 = np.asarray(origin, np.float32)  # the ray caster's float32 ray origin
        vertices, plane_normals, plane_offsets, ids = self._buffers()
        rotation = np.ascontiguousarray(R_world_optical, np.float64)
        fx, fy, cx, cy = intrinsics
        origin64 = origin32.astype(np.float64)
        planes = self._frustum_planes(rotation, intrinsics, size)
        count = raster_kernels.frustum_triangles(self.tree.lower, self.tree.upper, self.tree.first_leaf, LEAF_SIZE,
                                                 self._static_count, origin64, planes, ids)
        if self._levels is not None:
            count = raster_kernels.lod_triangles(*self._levels, LEAF_SIZE, origin64, planes, float(fx),
                                                 float(lod_pixels), ids, count)
        raster_kernels.to_optical(self.triangles, self.world_normals, origin64, rotation, ids, count, vertices,
                                  plane_normals, plane_offsets)
        pixels = width * height
        inverse_depth, triangle_of_pixel, distance, surface, normal, triangle = self._frame_buffers(pixels)
        inverse_depth.fill(0.0)
        triangle_of_pixel.fill(-1)
        if not normals:
            normal = normal[:0]
        margin = 1e-2  # m: the camera near a closed object's box counts as inside it (rounding)
        inside = np.all((origin64 >= self._surface_lower - margin) & (origin64 <= self._surface_upper + margin),
                        axis=1).astype(np.uint8)
        raster_kernels.rasterize(vertices, ids, count, width, height, fx, fy, cx, cy, self.NEAR_PLANE_M,
                                 inverse_depth, triangle_of_pixel, self.closed, self.surface_of_triangle, inside,
                                 plane_offsets)
        raster_kernels.resolve_hits(origin32, directions, rays_optical, triangle_of_pixel, plane_normals,
                                    plane_offsets, self.world_normals32, self.surface_of_triangle, self.index,
                                    self.ground_plane, distance, surface, normal, triangle)
        return RayHits(distance, surface, normal, triangle)
