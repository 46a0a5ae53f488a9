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
  blue channel, roughness from its green, sampled at the base colour's texture coordinates, TEXCOORD_0);
  ``KHR_materials_*`` extensions are ignored.
- OBJ with an MTL file: ``Kd`` and ``map_Kd`` (Wavefront MTL); an OBJ without one, and STL,
  carry no material and take the scene object's colour.

Loading is :mod:`trimesh`'s (glTF and OBJ readers; textures decoded by Pillow). Texture
coordinates follow trimesh's convention, (0, 0) at the image's bottom-left (trimesh
flips glTF's top-left v on load), so texel row = (1 - v) H. glTF's up axis (+Y) is turned to
the scene's +Z (``gltf_y_up``, glTF spec sec. 3.4: "+Y is up"), so an asset exported from
Blender or taken from a glTF library stands upright without a hand-made rotation.

A file that cannot be used is one :class:`~aerial_sim.config.ParamsError` naming it: not found,
not a mesh format, no triangles, a broken glTF, or a texture an MTL/glTF names that is missing
(trimesh would otherwise render it silently untextured).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import trimesh

from aerial_sim.config import ParamsError

#: File suffixes read as meshes.
MESH_SUFFIXES = (".obj", ".stl", ".ply", ".off", ".gltf", ".glb")
#: glTF's +Y up -> the scene's +Z up (a +90 deg turn about x).
GLTF_Y_UP_TO_Z_UP = np.array([[1.0, 0, 0, 0], [0, 0, -1.0, 0], [0, 1.0, 0, 0], [0, 0, 0, 1.0]])


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

    def transformed(self, transform: np.ndarray) -> SurfacePart:
        corners = self.triangles @ transform[:3, :3].T + transform[:3, 3]
        return SurfacePart(corners, self.uv, self.base_color, self.texture, self.metallic, self.roughness,
                           self.pbr_texture)


def load_asset(path: Path, where: str, gltf_y_up: bool = True) -> list[SurfacePart]:
    """The textured parts of a mesh file, in the file's frame (glTF turned Z-up); ParamsError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{where}: no such mesh file: {path}")
    suffix = path.suffix.lower()
    if suffix not in MESH_SUFFIXES:
        raise ParamsError(f"{where}: {path.name}: not a mesh file (known: {', '.join(MESH_SUFFIXES)})")
    if suffix == ".obj":
        _check_mtl_textures(path, where)
    if suffix == ".gltf":
        _check_gltf_uris(path, where)
    try:
        # trimesh logs (not raises) some problems; keep its chatter out of the node's log.
        logging.getLogger("trimesh").setLevel(logging.ERROR)
        loaded = trimesh.load(str(path), force="scene", process=False)
        meshes = loaded.dump(concatenate=False) if isinstance(loaded, trimesh.Scene) else [loaded]
    except Exception as error:  # trimesh raises many types for unreadable files
        raise ParamsError(f"{where}: cannot read mesh {path}: {type(error).__name__}: {error}") from error
    parts = [part for mesh in meshes if isinstance(mesh, trimesh.Trimesh) and len(mesh.faces)
             for part in [_part_of(mesh, path, where)]]
    if not parts:
        raise ParamsError(f"{where}: {path} holds no triangles")
    if suffix in (".gltf", ".glb") and gltf_y_up:
        parts = [part.transformed(GLTF_Y_UP_TO_Z_UP) for part in parts]
    return parts


def _part_of(mesh: trimesh.Trimesh, path: Path, where: str) -> SurfacePart:
    triangles = np.asarray(mesh.triangles, np.float64)
    visual = mesh.visual
    if getattr(visual, "kind", None) != "texture":
        return SurfacePart(triangles)
    material = visual.material
    uv = getattr(visual, "uv", None)
    color, image = _material_color_and_image(material)
    pbr_image = getattr(material, "metallicRoughnessTexture", None)
    if (image is not None or pbr_image is not None) and (uv is None or len(uv) != len(mesh.vertices)):
        raise ParamsError(f"{where}: {path.name}: a textured material without texture coordinates")
    corner_uv = None if uv is None or (image is None and pbr_image is None) else np.asarray(uv, np.float32)[mesh.faces]
    texture = None if image is None else np.ascontiguousarray(np.asarray(image.convert("RGB"), np.uint8))
    metallic = roughness = pbr_texture = None
    if isinstance(material, trimesh.visual.material.PBRMaterial):  # glTF: absent factors are the spec's 1
        metallic, roughness = (float(np.clip(1.0 if value is None else value, 0.0, 1.0))
                               for value in (material.metallicFactor, material.roughnessFactor))
        if pbr_image is not None:
            pbr_texture = np.ascontiguousarray(np.asarray(pbr_image.convert("RGB"), np.uint8))
    return SurfacePart(triangles, corner_uv, color, texture, metallic, roughness, pbr_texture)


def _material_color_and_image(material):
    """(base colour 0-255 or None, PIL image or None) of a trimesh PBR or simple material."""
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
