"""World-frame triangles of scene objects: a primitive (box, cylinder, sphere) built with ``trimesh``, a mesh
file's parts (OBJ/STL/glTF/GLB, :mod:`aerial_sim.world.assets`) read once per scene and placed by the object's
pose and scale."""

from __future__ import annotations

import numpy as np
import trimesh

from aerial_sim.world.assets import SurfacePart, load_asset
from aerial_sim.world.rotations import quaternion_to_matrix
from aerial_sim.world.scene import Scene, SceneObject

#: Sides of the prism a cylinder is drawn as.
CYLINDER_SECTIONS = 48


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
