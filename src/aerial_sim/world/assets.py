"""Mesh assets of a scene: OBJ (+ MTL), STL, glTF 2.0 / GLB, loaded with their materials and textures.

An asset file becomes a list of :class:`SurfacePart` s, one per (mesh, material) pair
of the file, each with its triangles in the file's frame, the texture coordinates of
their corners and the material's base colour and base-colour texture:

- glTF 2.0 / GLB: the node hierarchy is flattened (each primitive in the scene's frame),
  the metallic-roughness material's ``baseColorFactor``, ``baseColorTexture``, ``metallicFactor`` and
  ``roughnessFactor`` are kept (Khronos glTF 2.0 spec, sec. 3.9.2; the camera shades them with the
  spec's BRDF, :mod:`aerial_sim.world.render_kernels`). A factor the file leaves out takes the spec's
  default, **1** for both: a material with no ``metallicFactor`` is a metal, as in every glTF viewer
  (trimesh reports it as None). The ``metallicRoughnessTexture`` multiplies them (metalness from its
  blue channel, roughness from its green, sampled at the base colour's texture coordinates, TEXCOORD_0).
  The ``normalTexture`` with its ``scale``, the ``occlusionTexture`` with its ``strength`` and the
  ``emissiveTexture`` x ``emissiveFactor`` (x ``KHR_materials_emissive_strength``'s ``emissiveStrength``) are
  kept too (spec sec. 3.9.3-3.9.5, :class:`SurfaceMaps`; shaded by :mod:`aerial_sim.world.material_maps`).
  Each texture is sampled at the set its ``texCoord`` names, TEXCOORD_0 (the default) or TEXCOORD_1
  (:attr:`SurfacePart.uv_sets`); a normal map is read in the frame of the primitive's TANGENT attribute where
  the file gives one (xyz the tangent, w the sign of the bitangent B = w (N x T), spec sec. 3.7.2.1;
  :attr:`SurfacePart.tangents`), else in the per-face frame of the texture coordinates. A texture's
  ``KHR_texture_transform`` (offset, rotation, scale, texCoord override) moves the coordinates it samples
  (:func:`_texture_transforms`; at most two distinct mappings per material). Other
  ``KHR_materials_*`` extensions are ignored. trimesh drops the scale and strengths, reads no TEXCOORD_1 and
  no TANGENT, so these are read from the file's own JSON (each material found by a tag put in its name for the
  load; TEXCOORD_1, TANGENT and the untransformed POSITION handed through trimesh as custom attributes).
- OBJ with an MTL file: ``Kd`` and ``map_Kd`` (Wavefront MTL); an OBJ without one, and STL,
  carry no material and take the scene object's colour.

Loading is :mod:`trimesh`'s (glTF and OBJ readers; textures decoded by Pillow). Texture
coordinates follow trimesh's convention, (0, 0) at the image's bottom-left (trimesh
flips glTF's top-left v on load), so texel row = (1 - v) H. glTF's up axis (+Y) is turned to
the scene's +Z (``gltf_y_up``, glTF spec sec. 3.4: "+Y is up"), so an asset exported from
Blender or taken from a glTF library stands upright without a hand-made rotation.

A file that cannot be used is one :class:`~aerial_sim.config.ParamsError` naming it: not found,
not a mesh format, no triangles, a broken glTF, a texture an MTL/glTF names that is missing, a glTF
material texture whose image cannot be decoded (trimesh would otherwise render it silently untextured), a
``texCoord`` other than 0 and 1 or naming a set the primitive lacks, or a TANGENT / TEXCOORD_1 that is not
finite or not one per vertex (the message names the file and the material).
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import math
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING

import numpy as np

from aerial_sim.config import ParamsError

if TYPE_CHECKING:  # imported where a file is read: a scene from the cache needs no trimesh (1-2 s of import)
    import trimesh

#: File suffixes read as meshes.
MESH_SUFFIXES = (".obj", ".stl", ".ply", ".off", ".gltf", ".glb")
#: Bits of :attr:`SurfacePart.uv_sets`: which of a part's textures are sampled at TEXCOORD_1.
UV1_BASE, UV1_PBR, UV1_NORMAL, UV1_OCCLUSION, UV1_EMISSIVE = 1, 2, 4, 8, 16
#: glTF's +Y up -> the scene's +Z up (a +90 deg turn about x).
GLTF_Y_UP_TO_Z_UP = np.array([[1.0, 0, 0, 0], [0, 0, -1.0, 0], [0, 1.0, 0, 0], [0, 0, 0, 1.0]])


@dataclass(frozen=True)
class SurfaceMaps:
    """A glTF material's normal, occlusion and emissive maps (glTF 2.0 sec. 3.9.3-3.9.5): textures (H, W, 3) uint8
    or None; the normal map's ``scale`` (x, y of the tangent-space normal), the occlusion's ``strength``
    (occlusion = 1 + strength (R - 1)), and the emitted colour 0-255 per channel (emissiveFactor x 255 x
    KHR_materials_emissive_strength), which the emissive texture multiplies."""

    normal_texture: np.ndarray | None = None
    normal_scale: float = 1.0
    occlusion_texture: np.ndarray | None = None
    occlusion_strength: float = 1.0
    emissive: tuple[float, float, float] = (0.0, 0.0, 0.0)
    emissive_texture: np.ndarray | None = None

    @property
    def textures(self) -> tuple:
        return tuple(t for t in (self.normal_texture, self.occlusion_texture, self.emissive_texture) if t is not None)


@dataclass(frozen=True)
class SurfacePart:
    """Triangles sharing one material: corners (T, 3, 3) float64, texture coordinates (T, 3, 2) float32 or None,
    base colour RGB 0-255 (None: the file gives none, the object's colour is used), texture (H, W, 3) uint8 or None,
    and the glTF metallic and roughness factors 0..1 (None: not a metallic-roughness material, shaded by Lambert's law)."""

    triangles: np.ndarray
    uv: np.ndarray | None = None
    base_color: tuple[float, float, float] | None = None
    texture: np.ndarray | None = None
    metallic: float | None = None
    roughness: float | None = None
    pbr_texture: np.ndarray | None = None  # glTF metallicRoughnessTexture (H, W, 3) uint8: G roughness, B metalness
    maps: SurfaceMaps | None = None  # glTF normal, occlusion and emissive maps (None: none)
    #: (T, 3, 2) float32 corner coordinates of glTF's TEXCOORD_1 (v flipped as ``uv``), None: no texture uses it.
    uv1: np.ndarray | None = None
    #: Which textures are sampled at ``uv1`` (bits UV1_BASE ... UV1_EMISSIVE; 0: all at ``uv``).
    uv_sets: int = 0
    #: (T, 3, 3) float32 per corner (a, b, w) of a normal-mapped part: the vertex tangent (the file's TANGENT, else
    #: computed by MikkTSpace's construction, :func:`mikktspace_tangents`) less its part along the face normal, as
    #: a e_1 + b e_2 of the face's edges e_1 = P_1 - P_0, e_2 = P_2 - P_0 (so it moves with any placement of the
    #: part), w = +-1 the bitangent's sign, B = w (N x T); the camera interpolates the corners' tangents at each
    #: pixel. Faces of (0, 0, 0) corners and None: the per-face frame of the texture coordinates.
    tangents: np.ndarray | None = None

    def transformed(self, transform: np.ndarray) -> SurfacePart:
        corners = self.triangles @ transform[:3, :3].T + transform[:3, 3]
        return dataclasses.replace(self, triangles=corners)


def load_asset(path: Path, where: str, gltf_y_up: bool = True) -> list[SurfacePart]:
    """The textured parts of a mesh file, in the file's frame (glTF turned Z-up); ParamsError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{where}: no such mesh file: {path}")
    suffix = path.suffix.lower()
    if suffix not in MESH_SUFFIXES:
        raise ParamsError(f"{where}: {path.name}: not a mesh file (known: {', '.join(MESH_SUFFIXES)})")
    import trimesh

    if suffix == ".obj":
        _check_mtl_textures(path, where)
    if suffix == ".gltf":
        _check_gltf_uris(path, where)
    document = None
    try:
        # trimesh logs (not raises) some problems; keep its chatter out of the node's log.
        logging.getLogger("trimesh").setLevel(logging.ERROR)
        if suffix in (".gltf", ".glb"):
            document, tagged = _tagged_gltf(path)
            loaded = trimesh.load(io.BytesIO(tagged), file_type=suffix[1:], force="scene", process=False,
                                  resolver=trimesh.resolvers.FilePathResolver(str(path)))
        else:
            loaded = trimesh.load(str(path), force="scene", process=False)
        meshes = loaded.dump(concatenate=False) if isinstance(loaded, trimesh.Scene) else [loaded]
    except Exception as error:  # trimesh raises many types for unreadable files
        raise ParamsError(f"{where}: cannot read mesh {path}: {type(error).__name__}: {error}") from error
    parts = [part for mesh in meshes if isinstance(mesh, trimesh.Trimesh) and len(mesh.faces)
             for part in [_part_of(mesh, path, where, document)]]
    if not parts:
        raise ParamsError(f"{where}: {path} holds no triangles")
    if suffix in (".gltf", ".glb") and gltf_y_up:
        parts = [part.transformed(GLTF_Y_UP_TO_Z_UP) for part in parts]
    return parts


def _part_of(mesh: trimesh.Trimesh, path: Path, where: str, document: dict | None = None) -> SurfacePart:
    import trimesh

    triangles = np.asarray(mesh.triangles, np.float64)
    visual = mesh.visual
    if getattr(visual, "kind", None) != "texture":
        return SurfacePart(triangles)
    material = visual.material
    uv = getattr(visual, "uv", None)
    color, image = _material_color_and_image(material)
    pbr_image = getattr(material, "metallicRoughnessTexture", None)
    maps = _maps_of(material, document, path, where) if document is not None else None
    used = {UV1_BASE: image, UV1_PBR: pbr_image}
    if maps is not None:
        used |= {UV1_NORMAL: maps.normal_texture, UV1_OCCLUSION: maps.occlusion_texture,
                 UV1_EMISSIVE: maps.emissive_texture}
    used = {bit for bit, texture in used.items() if texture is not None}
    mapped = bool(used)
    sets = _texture_sets(material, document, path, where) if document is not None else {}
    uv_sets = sum(bit for bit in used if sets.get(bit, 0) == 1)
    if any(sets.get(bit, 0) == 0 for bit in used) and (uv is None or len(uv) != len(mesh.vertices)):
        raise ParamsError(f"{where}: {path.name}: a textured material without texture coordinates")
    corner_uv = None if not mapped else np.zeros((len(mesh.faces), 3, 2), np.float32) if uv is None else \
        np.asarray(uv, np.float32)[mesh.faces]
    corner_uv1 = None
    if uv_sets:
        corner_uv1 = _vertex_attribute(mesh, "TEXCOORD_1", 2, path, where, _label_of(material, document))
        corner_uv1[:, 1] = 1.0 - corner_uv1[:, 1]  # glTF's top-left origin -> trimesh's bottom-left, as for uv
        corner_uv1 = corner_uv1.astype(np.float32)[mesh.faces]
    transforms = _texture_transforms(material, document, path, where) if document is not None else {}
    if any(bit in transforms for bit in used):
        corner_uv, corner_uv1, uv_sets = _transformed_uv(used, sets, transforms, corner_uv, corner_uv1, path, where,
                                                         _label_of(material, document))
    tangents = None
    if maps is not None and maps.normal_texture is not None and _CUSTOM + "TANGENT" in mesh.vertex_attributes:
        label = _label_of(material, document)
        tangent = _vertex_attribute(mesh, "TANGENT", 4, path, where, label)
        sign = np.abs(tangent[:, 3])
        if np.any(np.abs(sign - 1.0) > 1e-3):
            raise ParamsError(f"{where}: {path.name}: {label} TANGENT: w must be +1 or -1 (the bitangent's sign), "
                              f"got {tangent[np.argmax(np.abs(sign - 1.0)), 3]!r}")
        tangents = _corner_tangents(_vertex_attribute(mesh, "POSITION", 3, path, where, label), tangent, mesh.faces)
    elif maps is not None and maps.normal_texture is not None:  # no TANGENT: computed, as the spec asks (MikkTSpace)
        vertex_uv = None
        if uv_sets & UV1_NORMAL:
            vertex_uv = _vertex_attribute(mesh, "TEXCOORD_1", 2, path, where, _label_of(material, document))
            vertex_uv[:, 1] = 1.0 - vertex_uv[:, 1]
        elif uv is not None and len(uv) == len(mesh.vertices):
            vertex_uv = np.asarray(uv, np.float64)
        if vertex_uv is not None and UV1_NORMAL not in transforms:  # a transformed map keeps its per-face frames
            positions = np.asarray(mesh.vertices, np.float64)
            normals = np.asarray(mesh.vertex_normals, np.float64) if len(mesh.vertices) else positions
            tangents = _corner_tangents(positions, mikktspace_tangents(positions, normals, vertex_uv, mesh.faces),
                                        mesh.faces)
    texture = None if image is None else np.ascontiguousarray(np.asarray(image.convert("RGB"), np.uint8))
    metallic = roughness = pbr_texture = None
    if isinstance(material, trimesh.visual.material.PBRMaterial):  # glTF: absent factors are the spec's 1
        metallic, roughness = (float(np.clip(1.0 if value is None else value, 0.0, 1.0))
                               for value in (material.metallicFactor, material.roughnessFactor))
        if pbr_image is not None:
            pbr_texture = np.ascontiguousarray(np.asarray(pbr_image.convert("RGB"), np.uint8))
    return SurfacePart(triangles, corner_uv, color, texture, metallic, roughness, pbr_texture, maps, corner_uv1,
                       uv_sets, tangents)


def _vertex_attribute(mesh: trimesh.Trimesh, name: str, width: int, path: Path, where: str, label: str) -> np.ndarray:
    """The primitive's glTF attribute ``name`` (handed through trimesh by :func:`_tagged_gltf`), float64
    (vertices, ``width``); ParamsError naming the file and material when it is absent, not one finite row per
    vertex."""
    values = mesh.vertex_attributes.get(_CUSTOM + name)
    if values is None:
        raise ParamsError(f"{where}: {path.name}: {label}: a texture names texCoord 1, but the primitive has no "
                          f"TEXCOORD_1" if name == "TEXCOORD_1" else f"{where}: {path.name}: {label}: no {name}")
    values = np.asarray(values, np.float64)
    if values.ndim != 2 or values.shape != (len(mesh.vertices), width):
        raise ParamsError(f"{where}: {path.name}: {label} {name}: must be {width} numbers per vertex for its "
                          f"{len(mesh.vertices)} vertices, got shape {values.shape}")
    if not np.isfinite(values).all():
        raise ParamsError(f"{where}: {path.name}: {label} {name}: holds values that are not finite (NaN or inf)")
    return values


def _corner_tangents(positions: np.ndarray, tangent: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """(T, 3, 3) float32 (a, b, w) per corner (:attr:`SurfacePart.tangents`) from the primitive's vertex positions
    and its (V, 4) tangents (xyz, w): each corner's tangent less its part along the face normal, as a e_1 + b e_2
    of the face's edges (least squares in the face's plane: the Gram system of e_1, e_2; exact, the projected
    tangent lies in that plane); w the sign of the face's summed w (one frame orientation per face), on every
    corner. A face that is degenerate or whose projected tangents are all zero gets (0, 0, 0) on every corner."""
    corners = positions[faces]
    e1, e2 = corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]
    normal = np.cross(e1, e2)
    t = tangent[faces, :3].copy()  # (T, 3 corners, 3)
    with np.errstate(divide="ignore", invalid="ignore"):
        t -= normal[:, None, :] * ((t * normal[:, None, :]).sum(axis=2) / (normal * normal).sum(axis=1)[:, None])[..., None]
    d00, d01, d11 = (e1 * e1).sum(1), (e1 * e2).sum(1), (e2 * e2).sum(1)
    r1, r2 = (t * e1[:, None, :]).sum(2), (t * e2[:, None, :]).sum(2)
    den = (d00 * d11 - d01 * d01)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        a, b = (d11[:, None] * r1 - d01[:, None] * r2) / den, (d00[:, None] * r2 - d01[:, None] * r1) / den
    w = np.where(tangent[faces, 3].sum(axis=1) < 0, -1.0, 1.0)
    out = np.stack([a, b, np.repeat(w[:, None], 3, axis=1)], axis=2)
    length = np.linalg.norm(t, axis=2).max(axis=1)
    good = np.isfinite(out).all(axis=(1, 2)) & (den[:, 0] > 0) & (length > 1e-12 * np.sqrt(d00 + d11))
    out[~good] = 0.0
    out[good & (np.linalg.norm(t, axis=2) <= 1e-12 * np.sqrt(d00 + d11)[:, None]).any(axis=1)] = 0.0
    return out.astype(np.float32)


def mikktspace_tangents(positions: np.ndarray, normals: np.ndarray, uv: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """(V, 4) unit vertex tangents (xyz, w) of a primitive that gives none, by MikkTSpace's construction (what
    glTF 2.0 sec. 3.7.2.1 asks for: "When tangents are not specified, client implementations SHOULD calculate
    tangents using default MikkTSpace algorithms with the specified vertex positions, normals, and texture
    coordinates associated with the normal texture"; Mikkelsen 2008, *Simulation of wrinkled surfaces
    revisited*, sec. 4-5): each face's tangent is its texture-space gradient dP/du = (dv_2 e_1 - dv_1 e_2) / det
    (u, v with v up, det = du_1 dv_2 - du_2 dv_1), unit, its orientation w = sign(det); at each vertex the faces
    that share it with the same orientation sum their tangents, each first made orthogonal to the vertex's normal,
    unit, and weighted by the face's angle at that corner; the sum is made unit again. Vertices are those of the
    primitive (a glTF vertex is already one position + normal + texture coordinate, as MikkTSpace welds them);
    a vertex whose faces have both orientations takes the majority's (MikkTSpace splits it: a seam, where the
    renderer's per-face frames take over). Vertices with no usable face get (0, 0, 0, 1)."""
    corners, corner_uv = positions[faces], uv[faces]
    e1, e2 = corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]
    du1, dv1 = corner_uv[:, 1, 0] - corner_uv[:, 0, 0], corner_uv[:, 1, 1] - corner_uv[:, 0, 1]
    du2, dv2 = corner_uv[:, 2, 0] - corner_uv[:, 0, 0], corner_uv[:, 2, 1] - corner_uv[:, 0, 1]
    det = du1 * dv2 - du2 * dv1
    face_tangent = dv2[:, None] * e1 - dv1[:, None] * e2
    face_tangent *= np.where(det < 0, -1.0, 1.0)[:, None]
    orientation = np.where(det < 0, -1.0, 1.0)
    usable = (det != 0) & np.isfinite(face_tangent).all(axis=1) & (np.linalg.norm(face_tangent, axis=1) > 0)
    count = len(positions)
    sums = {sign: np.zeros((count, 3)) for sign in (-1.0, 1.0)}
    weights = {sign: np.zeros(count) for sign in (-1.0, 1.0)}
    for k in range(3):  # corner k of every face
        vertex = faces[:, k]
        before, after = corners[:, (k + 2) % 3] - corners[:, k], corners[:, (k + 1) % 3] - corners[:, k]
        with np.errstate(divide="ignore", invalid="ignore"):
            cosine = (before * after).sum(1) / (np.linalg.norm(before, axis=1) * np.linalg.norm(after, axis=1))
        angle = np.arccos(np.clip(np.nan_to_num(cosine), -1.0, 1.0))
        n = normals[vertex]
        t = face_tangent - n * (face_tangent * n).sum(1, keepdims=True)
        length = np.linalg.norm(t, axis=1, keepdims=True)
        ok = usable & (length[:, 0] > 0)
        t = np.where(ok[:, None], t / np.where(length > 0, length, 1.0), 0.0)
        for sign in (-1.0, 1.0):
            pick = ok & (orientation == sign)
            np.add.at(sums[sign], vertex[pick], angle[pick, None] * t[pick])
            np.add.at(weights[sign], vertex[pick], angle[pick])
    major = np.where(weights[-1.0] > weights[1.0], -1.0, 1.0)
    total = np.where(major[:, None] < 0, sums[-1.0], sums[1.0])
    length = np.linalg.norm(total, axis=1, keepdims=True)
    out = np.zeros((count, 4))
    out[:, :3] = np.where(length > 1e-12, total / np.where(length > 0, length, 1.0), 0.0)
    out[:, 3] = major
    return out


def _label_of(material, document: dict | None) -> str:
    """How a message names a loaded glTF material: ``material 'name'`` or ``material k``."""
    name = getattr(material, "name", None) or ""
    if document is None or not name.startswith(_MATERIAL_TAG):
        return "its material"
    index = int(name[len(_MATERIAL_TAG):])
    spec = document["materials"][index]
    return f"material '{spec.get('name')}'" if spec.get("name") else f"material {index}"


def _texture_sets(material, document: dict, path: Path, where: str) -> dict[int, int]:
    """The ``texCoord`` each texture of a loaded glTF material names, by its bit (UV1_BASE ...); ParamsError
    naming the file, material and texture for anything but 0 or 1."""
    name = getattr(material, "name", None) or ""
    if not name.startswith(_MATERIAL_TAG):
        return {}
    spec = document["materials"][int(name[len(_MATERIAL_TAG):])]
    sets = {}
    for bit, (key, _) in zip((UV1_BASE, UV1_PBR, UV1_NORMAL, UV1_OCCLUSION, UV1_EMISSIVE), _MATERIAL_TEXTURES):
        entry = spec
        for step in key.split("/"):
            entry = entry.get(step) if isinstance(entry, dict) else None
        if isinstance(entry, dict):
            value = entry.get("texCoord", 0)
            where_set = "texCoord"
            transform = (entry.get("extensions") or {}).get(TEXTURE_TRANSFORM) if isinstance(
                entry.get("extensions"), dict) else None
            if isinstance(transform, dict) and "texCoord" in transform:  # the extension's texCoord overrides
                value, where_set = transform["texCoord"], f"{TEXTURE_TRANSFORM}.texCoord"
            if value not in (0, 1) or isinstance(value, bool):
                raise ParamsError(f"{where}: {path.name}: {_label_of(material, document)} {key.split('/')[-1]}: "
                                  f"{where_set} must be 0 or 1 (TEXCOORD_0, TEXCOORD_1), got {value!r}")
            sets[bit] = int(value)
    return sets


#: The glTF extension that moves, turns and scales a texture's coordinates (on a textureInfo).
TEXTURE_TRANSFORM = "KHR_texture_transform"


def _texture_transforms(material, document: dict, path: Path, where: str) -> dict[int, np.ndarray]:
    """The ``KHR_texture_transform`` of each texture of a loaded glTF material that has one, by its bit
    (UV1_BASE ...), as the 2 x 3 affine matrix of glTF's texture coordinates (origin top-left, v down):
    uv' = offset + R(rotation) (scale * uv), R = [[cos, -sin], [sin, cos]] (the extension's
    ``translation * rotation * scale``, Khronos KHR_texture_transform). ParamsError naming the file, material,
    texture and key for a value that is not finite numbers of the right count."""
    name = getattr(material, "name", None) or ""
    if not name.startswith(_MATERIAL_TAG):
        return {}
    spec = document["materials"][int(name[len(_MATERIAL_TAG):])]
    label = _label_of(material, document)
    transforms = {}
    for bit, (key, _) in zip((UV1_BASE, UV1_PBR, UV1_NORMAL, UV1_OCCLUSION, UV1_EMISSIVE), _MATERIAL_TEXTURES):
        entry = spec
        for step in key.split("/"):
            entry = entry.get(step) if isinstance(entry, dict) else None
        extensions = entry.get("extensions") if isinstance(entry, dict) else None
        transform = extensions.get(TEXTURE_TRANSFORM) if isinstance(extensions, dict) else None
        if transform is None:
            continue
        texture = f"{where}: {path.name}: {label} {key.split('/')[-1]} {TEXTURE_TRANSFORM}"
        if not isinstance(transform, dict):
            raise ParamsError(f"{texture}: must be an object, got {transform!r}")

        def numbers(field: str, default: list[float], count: int) -> np.ndarray:
            value = transform.get(field, default)
            values = value if isinstance(value, (list, tuple)) else [value]
            ok = len(values) == count and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                              and math.isfinite(v) for v in values)
            if not ok:
                what = f"{count} finite numbers" if count > 1 else "a finite number"
                raise ParamsError(f"{texture}.{field}: must be {what}, got {value!r}")
            return np.asarray(values, np.float64)

        offset, (rotation,), scale = numbers("offset", [0.0, 0.0], 2), numbers("rotation", 0.0, 1), \
            numbers("scale", [1.0, 1.0], 2)
        cos, sin = math.cos(rotation), math.sin(rotation)
        transforms[bit] = np.array([[cos * scale[0], -sin * scale[1], offset[0]],
                                    [sin * scale[0], cos * scale[1], offset[1]]])
    return transforms


def _transformed_uv(used: set[int], sets: dict[int, int], transforms: dict[int, np.ndarray], corner_uv, corner_uv1,
                    path: Path, where: str, label: str):
    """(corner uv, corner uv1, uv_sets) once each texture's ``KHR_texture_transform`` is applied to the set it
    samples. A part carries two coordinate sets: the textures' (set, transform) pairs fill them, the base
    colour's first; a material whose textures need more than two is refused (one error naming the file)."""
    mappings: dict[int, tuple] = {}
    for bit in sorted(used):
        matrix = transforms.get(bit)
        mappings[bit] = (sets.get(bit, 0), None if matrix is None else matrix.tobytes())
    distinct = list(dict.fromkeys(mappings.values()))
    if len(distinct) > 2:
        raise ParamsError(f"{where}: {path.name}: {label}: its textures use {len(distinct)} different texture "
                          f"coordinates (texCoord with {TEXTURE_TRANSFORM}); at most 2 per material are supported")
    raw = {0: corner_uv, 1: corner_uv1}

    def mapped(mapping: tuple) -> np.ndarray:
        coords = raw[mapping[0]]
        if mapping[1] is None:
            return coords
        matrix = np.frombuffer(mapping[1]).reshape(2, 3)
        gltf = np.stack([coords[..., 0], 1.0 - coords[..., 1]], axis=-1).astype(np.float64)  # v down, as glTF's
        moved = gltf @ matrix[:, :2].T + matrix[:, 2]
        return np.stack([moved[..., 0], 1.0 - moved[..., 1]], axis=-1).astype(np.float32)

    first = mapped(distinct[0])
    second = mapped(distinct[1]) if len(distinct) > 1 else None
    uv_sets = sum(bit for bit, mapping in mappings.items() if len(distinct) > 1 and mapping == distinct[1])
    return first, second, uv_sets


#: Put before each glTF material's index in its name while trimesh loads the file (:func:`_tagged_gltf`).
_MATERIAL_TAG = "aerial_sim-material-"
#: Put before a primitive attribute's name to hand it through trimesh as a custom vertex attribute.
_CUSTOM = "_aerial_sim_"
#: glTF material textures: (where in the material, trimesh's attribute).
_MATERIAL_TEXTURES = (("pbrMetallicRoughness/baseColorTexture", "baseColorTexture"),
                      ("pbrMetallicRoughness/metallicRoughnessTexture", "metallicRoughnessTexture"),
                      ("normalTexture", "normalTexture"), ("occlusionTexture", "occlusionTexture"),
                      ("emissiveTexture", "emissiveTexture"))


def _tagged_gltf(path: Path) -> tuple[dict, bytes]:
    """The glTF's JSON document, and the file's bytes with material k named ``_MATERIAL_TAG + k`` (so each
    loaded material can be matched to its JSON, whose scale and strengths trimesh drops)."""
    data = path.read_bytes()
    if path.suffix.lower() == ".gltf":
        document = json.loads(data)
        chunks = b""
    else:  # GLB: 12-byte header, then a JSON chunk (length, type, bytes) and the binary chunk
        if len(data) < 20 or data[:4] != b"glTF" or data[16:20] != b"JSON":
            raise ValueError("not a GLB file (no glTF header and JSON chunk)")
        length = struct.unpack_from("<I", data, 12)[0]
        document = json.loads(data[20:20 + length])
        chunks = data[20 + length:]
    if not isinstance(document, dict):
        raise ValueError("not a glTF document")
    tagged = json.loads(json.dumps(document))
    for index, material in enumerate(tagged.get("materials") or []):
        if isinstance(material, dict):
            material["name"] = f"{_MATERIAL_TAG}{index}"
    for mesh in tagged.get("meshes") or []:
        for primitive in (mesh.get("primitives") if isinstance(mesh, dict) else None) or []:
            attributes = primitive.get("attributes") if isinstance(primitive, dict) else None
            if not isinstance(attributes, dict):
                continue
            # What trimesh does not read, handed through as custom attributes (the untransformed POSITION for the
            # tangents' face coordinates): only where used, so other files load as before.
            if "TANGENT" in attributes and "POSITION" in attributes:
                attributes[_CUSTOM + "TANGENT"] = attributes["TANGENT"]
                attributes[_CUSTOM + "POSITION"] = attributes["POSITION"]
            if "TEXCOORD_1" in attributes:
                attributes[_CUSTOM + "TEXCOORD_1"] = attributes["TEXCOORD_1"]
    text = json.dumps(tagged).encode()
    if path.suffix.lower() == ".gltf":
        return document, text
    text += b" " * (-len(text) % 4)
    body = struct.pack("<I4s", len(text), b"JSON") + text + chunks
    return document, struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body


def _maps_of(material, document: dict, path: Path, where: str) -> SurfaceMaps | None:
    """The normal, occlusion and emissive maps of a loaded glTF material (None: none), after checking that every
    texture its JSON names was decoded."""
    name = getattr(material, "name", None) or ""
    if not name.startswith(_MATERIAL_TAG):
        return None
    index = int(name[len(_MATERIAL_TAG):])
    spec = document["materials"][index]
    label = f"material '{spec.get('name')}'" if spec.get("name") else f"material {index}"
    for key, attribute in _MATERIAL_TEXTURES:
        entry = spec
        for step in key.split("/"):
            entry = entry.get(step) if isinstance(entry, dict) else None
        if isinstance(entry, dict) and getattr(material, attribute, None) is None:
            raise ParamsError(f"{where}: {path.name}: {label} {key.split('/')[-1]}: {_image_of(document, entry)} "
                              "cannot be read as an image")

    def rgb(image):
        return None if image is None else np.ascontiguousarray(np.asarray(image.convert("RGB"), np.uint8))

    def number(value, key: str, low: float = -math.inf, high: float = math.inf) -> float:
        """A material's number, or ParamsError naming the file, material and key."""
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not (math.isfinite(number) and low <= number <= high):
            raise ParamsError(f"{where}: {path.name}: {label} {key}: must be a finite number in [{low:g}, {high:g}], "
                              f"got {value!r}")
        return number

    factors = spec.get("emissiveFactor") or (0.0, 0.0, 0.0)
    if not isinstance(factors, (list, tuple)) or len(factors) != 3:
        raise ParamsError(f"{where}: {path.name}: {label} emissiveFactor: must be 3 numbers in [0, 1], got {factors!r}")
    factor = np.array([number(c, "emissiveFactor", 0.0, 1.0) for c in factors])
    strength = number(((spec.get("extensions") or {}).get("KHR_materials_emissive_strength") or {}).get(
        "emissiveStrength", 1.0), "KHR_materials_emissive_strength.emissiveStrength", 0.0)
    emissive = tuple(float(c) for c in factor * 255.0 * strength)
    maps = SurfaceMaps(rgb(material.normalTexture),
                       number((spec.get("normalTexture") or {}).get("scale", 1.0), "normalTexture.scale"),
                       rgb(material.occlusionTexture),
                       number((spec.get("occlusionTexture") or {}).get("strength", 1.0), "occlusionTexture.strength",
                              0.0, 1.0), emissive,
                       rgb(material.emissiveTexture) if any(emissive) else None)
    if maps.normal_texture is None and maps.occlusion_texture is None and not any(emissive):
        return None
    return maps


def _image_of(document: dict, texture_info: dict) -> str:
    """What a glTF textureInfo's image is, for a message: its file, or its place in the file."""
    try:
        texture = document["textures"][texture_info["index"]]
        image = document["images"][texture["source"]]
    except (KeyError, IndexError, TypeError):
        return f"texture {texture_info.get('index')} (no such texture or image)"
    if image.get("uri") and not str(image["uri"]).startswith("data:"):
        return f"image {image['uri']}"
    return f"image {texture['source']} (bufferView {image.get('bufferView')})" if "bufferView" in image else \
        f"image {texture['source']} (embedded data)"


def _material_color_and_image(material):
    """(base colour 0-255 or None, PIL image or None) of a trimesh PBR or simple material."""
    import trimesh

    if material is None:
        return None, None
    if isinstance(material, trimesh.visual.material.PBRMaterial):
        factor = material.baseColorFactor
        color = None if factor is None else tuple(float(c) for c in np.asarray(factor, float)[:3])
        if color is not None and max(color) <= 1.0 and np.asarray(factor).dtype.kind == "f":
            color = tuple(255.0 * c for c in color)
        return color, material.baseColorTexture
    diffuse = getattr(material, "diffuse", None)
    image = getattr(material, "image", None)
    color = None if diffuse is None else tuple(float(c) for c in np.asarray(diffuse, float)[:3])
    return color, image


def asset_files(path: Path) -> list[Path]:
    """The files a mesh file names that exist (a .gltf's or .glb's external buffers and images, an OBJ's MTL
    libraries and the texture maps they name): what loading it reads beside it (the scene cache's key)."""
    path = Path(path)
    named: list[Path] = []
    suffix = path.suffix.lower()
    try:
        if suffix in (".gltf", ".glb"):
            document, _ = _tagged_gltf(path)
            for key in ("buffers", "images"):
                for entry in document.get(key) or []:
                    uri = entry.get("uri") if isinstance(entry, dict) else None
                    if isinstance(uri, str) and uri and not uri.startswith("data:"):
                        named.append(path.parent / uri)
        elif suffix == ".obj":
            text = path.read_text(errors="replace")
            for library in re.findall(r"^\s*mtllib\s+(.+?)\s*$", text, re.MULTILINE):
                mtl = path.parent / library
                named.append(mtl)
                if mtl.is_file():
                    named += [mtl.parent / texture for texture in re.findall(
                        r"^\s*(?:map_\w+|bump|disp|decal|refl)\s+(?:-\S+\s+\S+\s+)*(.+?)\s*$",
                        mtl.read_text(errors="replace"), re.MULTILINE)]
    except (OSError, ValueError):
        pass
    return [file for file in named if file.is_file()]


def _check_mtl_textures(path: Path, where: str) -> None:
    """Every ``map_Kd`` of every MTL the OBJ names must exist (trimesh would drop it silently)."""
    text = path.read_text(errors="replace")
    for library in re.findall(r"^\s*mtllib\s+(.+?)\s*$", text, re.MULTILINE):
        mtl = path.parent / library
        if not mtl.is_file():
            raise ParamsError(f"{where}: {path.name}: material library not found: {mtl}")
        for texture in re.findall(r"^\s*map_Kd\s+(?:-\S+\s+\S+\s+)*(.+?)\s*$", mtl.read_text(errors="replace"),
                                  re.MULTILINE):
            if not (mtl.parent / texture).is_file():
                raise ParamsError(f"{where}: {mtl.name}: texture not found: {mtl.parent / texture}")


def _check_gltf_uris(path: Path, where: str) -> None:
    """A .gltf must be JSON, and every external buffer and image it names must exist."""
    import json

    try:
        document = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as error:
        raise ParamsError(f"{where}: cannot read mesh {path}: not valid glTF JSON: {error}") from error
    if not isinstance(document, dict):
        raise ParamsError(f"{where}: cannot read mesh {path}: not a glTF document")
    for key in ("buffers", "images"):
        for entry in document.get(key) or []:
            uri = entry.get("uri") if isinstance(entry, dict) else None
            if uri and not uri.startswith("data:") and not (path.parent / uri).is_file():
                kind = "texture" if key == "images" else "buffer"
                raise ParamsError(f"{where}: {path.name}: {kind} not found: {path.parent / uri}")
