"""The scene's triangles as row-aligned tables, one row per triangle, with what the renderer needs of each:
its surface index, corner texture coordinates, base colour, texture, metallic-roughness values and the glTF
material maps (:mod:`aerial_sim.world.material_maps`); and the camera's tables, which add the simplified levels
of large meshes (:mod:`aerial_sim.world.lod`) with their groups. Built once per scene (``scene.cache``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from aerial_sim.world.assets import SurfacePart
from aerial_sim.world.material_maps import MaterialMaps, has_texture, material_maps_of
from aerial_sim.world.object_meshes import mesh_file_parts, object_parts, object_transform
from aerial_sim.world.scene import OSM_FILE_PREFIX, Scene

#: Surface index of a ray that hit nothing; 1 is the ground, 2 + k is scene object k.
SURFACE_NONE = 0
SURFACE_GROUND = 1


@dataclass(frozen=True)
class SceneSurfaces:
    """Every triangle of a scene with what the renderer needs per triangle (all arrays row-aligned).

    ``triangles`` (T, 3, 3) float64 world corners; ``surface`` (T,) int32 (1 ground/terrain, 2 + k object k);
    ``uv`` (T, 3, 2) float32 corner texture coordinates (0 where untextured); ``texture`` (T,) int32 index into
    ``texture_table`` or -1; ``albedo`` (T, 3) float32 base colour 0-255 (multiplies the texture, / 255);
    ``texels`` all textures' RGB bytes, flat; ``texture_table`` (K, 3) int64 (offset, width, height);
    ``pbr`` (T, 2) float32 glTF (metallic, roughness), metallic -1 for a surface shaded by Lambert's law alone;
    ``pbr_texture`` (T,) int32 index into ``texture_table`` of its metallicRoughnessTexture, or -1;
    ``maps`` the glTF normal, occlusion and emissive maps (:mod:`aerial_sim.world.material_maps`; None: none);
    ``uv1`` (T, 3, 2) float32 glTF TEXCOORD_1 corner coordinates and ``uv_sets`` (T,) uint8 which textures of
    the row are sampled there (bits :data:`~aerial_sim.world.assets.UV1_BASE` ...), both None where no texture
    of the scene names texCoord 1.
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
    uv1: np.ndarray | None = None
    uv_sets: np.ndarray | None = None

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
        textured = np.flatnonzero((self.texture >= 0) | (self.pbr_texture >= 0 if self.pbr_texture is not None
                                                         else False) | has_texture(self.maps))
        return _uv_plane(self.triangles, self.uv, textured)

    @cached_property
    def uv_plane1(self) -> np.ndarray | None:
        """(T, 8) float64: :attr:`uv_plane` of the TEXCOORD_1 coordinates ``uv1``, for the rows with a texture
        sampled there (None without ``uv1``)."""
        if self.uv1 is None or self.uv_sets is None:
            return None
        return _uv_plane(self.triangles, self.uv1, np.flatnonzero(self.uv_sets))


def _uv_plane(triangles: np.ndarray, uv: np.ndarray, textured: np.ndarray) -> np.ndarray:
    """(T, 8) float64 :attr:`SceneSurfaces.uv_plane` of the corner coordinates ``uv`` for the rows ``textured``."""
    plane = np.zeros((len(triangles), 8))
    if len(textured) == 0:
        return plane
    corners, uv = triangles[textured], uv[textured].astype(np.float64)
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
    from aerial_sim.world.scene_cache import cached_surfaces

    surfaces = scene.cache["surfaces"] = cached_surfaces(scene, lambda: _surfaces_of(_scene_chunks(scene)))
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
        chunks.append((part.triangles, 2 + index, part.uv, color, part.texture, pbr, part.pbr_texture, part.maps,
                       part.uv1, part.uv_sets, part.tangents))
    return chunks


@dataclass(frozen=True)
class LodGroups:
    """The objects the camera draws by level of detail (:mod:`aerial_sim.world.lod`), over the rows of the
    surfaces :func:`render_surfaces` returns: ``group`` (R,) int32 each row's group (-1: always drawn), ``level``
    (R,) int32 its level (0 the full mesh), ``lift`` (R,) float32 how much further off the surface its pixels'
    shadow rays start: its level's triangle size s_l in metres, and level 1's for the full mesh, since level 1
    casts the object's shadows (:meth:`~aerial_sim.world.ray_caster.RayCaster.sun_view`)."""

    group: np.ndarray
    level: np.ndarray
    lift: np.ndarray


def render_surfaces(scene: Scene) -> tuple[SceneSurfaces, LodGroups | None]:
    """What the camera draws: every row of :func:`scene_surfaces` (same rows, same order), then the simplified
    levels of the scene's large meshes (:mod:`aerial_sim.world.lod`) with their groups; the surfaces of
    :func:`scene_surfaces` and None when the scene has no such mesh or its ``lod`` is off (built once per scene,
    kept with :func:`~aerial_sim.world.closed_surfaces.closed_rows` in the scene cache's ``.draw`` file:
    :func:`aerial_sim.world.scene_cache.cached_draw_tables`)."""
    if "render_surfaces" in scene.cache:
        return scene.cache["render_surfaces"]
    from aerial_sim.world.scene_cache import cached_draw_tables

    surfaces = scene_surfaces(scene)

    def build():
        from aerial_sim.world.closed_surfaces import closed_rows

        scene.cache["render_surfaces"] = _render_surfaces(scene, surfaces)  # closed_rows reads it
        return scene.cache["render_surfaces"], closed_rows(scene)

    result, closed = cached_draw_tables(scene, surfaces, build)
    scene.cache["closed_rows"] = closed
    scene.cache["render_surfaces"] = result
    return result


def _render_surfaces(scene: Scene, surfaces: SceneSurfaces) -> tuple[SceneSurfaces, LodGroups | None]:
    """:func:`render_surfaces`, made from the scene's files."""
    chunks = []
    full_rows = len(surfaces.triangles)
    group_of_surface = np.full(len(scene.objects) + 2, -1, np.int32)
    lift_of_surface = np.zeros(len(scene.objects) + 2, np.float32)
    extra_group, extra_level, extra_lift = [], [], []
    groups = 0
    if scene.lod.enabled:
        levels_by_file = _lod_levels(scene)
        for index, obj in enumerate(scene.objects):
            if not _has_levels(obj):
                continue
            levels = levels_by_file[scene.mesh_path(obj)]
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
        return surfaces, None
    group = np.concatenate([group_of_surface[surfaces.surface]] + extra_group)
    level = np.concatenate([np.zeros(full_rows, np.int32)] + extra_level)
    lift = np.concatenate([lift_of_surface[surfaces.surface]] + extra_lift)
    # The same chunks as scene_surfaces' first (so the same rows and texture numbers), then the levels'.
    return _surfaces_of(_scene_chunks(scene) + chunks), LodGroups(group, level, lift)


def _has_levels(obj) -> bool:
    """Whether the camera may draw the object by level of detail: a mesh file's object (OSM buildings and ground
    cover, draped on the terrain, are always drawn whole)."""
    return obj.shape == "mesh" and not obj.file.startswith(OSM_FILE_PREFIX) and not obj.ground_cover


def _lod_levels(scene: Scene) -> dict:
    """The levels (:func:`aerial_sim.world.lod.levels_of`) of each mesh file the camera may draw by level of detail,
    made once per scene, from the scene cache's ``.lod`` file when it has them
    (:func:`aerial_sim.world.scene_cache.cached_lod_levels`)."""
    if "lod_levels" not in scene.cache:
        from aerial_sim.world.lod import levels_of
        from aerial_sim.world.scene_cache import cached_lod_levels

        originals = {}
        for obj in scene.objects:
            if _has_levels(obj) and scene.mesh_path(obj) not in originals:
                originals[scene.mesh_path(obj)] = mesh_file_parts(obj, scene)
        scene.cache["lod_levels"] = cached_lod_levels(scene, originals, lambda: {
            path: levels_of(parts, scene.lod.min_triangles) for path, parts in originals.items()})
    return scene.cache["lod_levels"]


def _joined(items, empty):
    """The arrays ``items`` end to end (contiguous), or ``empty`` when there are none."""
    return np.ascontiguousarray(np.concatenate(items)) if items else empty


def _surfaces_of(chunks: list[tuple]) -> SceneSurfaces:
    """One :class:`SceneSurfaces` of the chunks (triangles, surface, uv, albedo, texture image or None,
    (metallic, roughness), metallic-roughness image or None[, SurfaceMaps or None, TEXCOORD_1 corners or None,
    uv_sets bits, corner tangents or None]), in order."""
    textures: list[np.ndarray] = []
    texture_ids: dict[int, int] = {}
    triangles, surface, uv, texture, albedo, pbrs, pbr_textures = [], [], [], [], [], [], []
    maps = []  # (count, SurfaceMaps or None) per chunk: an object part's 8th item
    uv1, uv_sets, tangents = [], [], []  # an object part's 9th to 11th items

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
        extra = (chunk[8:11] if len(chunk) > 10 else (None, 0, None)) if corner_uv is not None else (None, 0, None)
        uv1.append(extra[0] if extra[1] else None)
        uv_sets.append(np.full(count, extra[1] if extra[0] is not None else 0, np.uint8))
        tangents.append(extra[2])
    all_triangles = _joined(triangles, np.empty((0, 3, 3)))
    all_uv = _joined(uv, np.empty((0, 3, 2), np.float32))
    all_tangents = None
    if any(rows is not None for rows in tangents):
        all_tangents = _joined([np.zeros((len(c), 3, 3), np.float32) if rows is None else np.asarray(rows, np.float32)
                                for c, rows in zip(triangles, tangents)], np.empty((0, 3, 3), np.float32))
    material_maps = material_maps_of(maps, texture_id, all_triangles, all_uv, all_tangents)
    all_uv1 = all_sets = None
    if any(rows is not None for rows in uv1):
        all_uv1 = _joined([np.zeros((len(c), 3, 2), np.float32) if rows is None else np.asarray(rows, np.float32)
                           for c, rows in zip(triangles, uv1)], np.empty((0, 3, 2), np.float32))
        all_sets = _joined(uv_sets, np.empty(0, np.uint8))
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
        maps=material_maps, uv1=all_uv1, uv_sets=all_sets,
    )
    return surfaces
