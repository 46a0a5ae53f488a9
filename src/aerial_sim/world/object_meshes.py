"""World-frame triangles of scene objects: a primitive (box, cylinder, sphere) built with ``trimesh``, a mesh
file's parts (OBJ/STL/glTF/GLB, :mod:`aerial_sim.world.assets`) read once per scene and placed by the object's
pose and scale."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from aerial_sim.world.assets import SurfacePart, load_asset
from aerial_sim.world.rotations import quaternion_to_matrix
from aerial_sim.world.scene import Scene, SceneObject

if TYPE_CHECKING:  # imported where a primitive or a mesh is built: a camera or lidar whose tables come from the
    import trimesh  # scene cache needs none of it (0.85 CPU s of a camera process's 1.9 s of imports)

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
    import trimesh

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
    import trimesh

    vertices, faces = object_surface(obj, scene)
    return trimesh.Trimesh(vertices=vertices, faces=faces, process=False)


def object_surface(obj: SceneObject, scene: Scene) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (N, 3) float64, faces (M, 3) int64) of the object's triangles in the world frame, vertices merged.

    A mesh object's file is merged once per scene (:func:`mesh_file_surface`) and each instance only places
    its vertices: corner for corner the same float64 values as :func:`object_parts`' triangles (the same
    product with the same transform), at a fraction of the cost of merging each instance's triangles
    (the city's 1 800 props: issue 29).
    """
    if obj.shape != "mesh":
        triangles = np.concatenate([part.triangles for part in object_parts(obj, scene)])
        return merged_surface(triangles)
    vertices, faces = mesh_file_surface(obj, scene)
    transform = object_transform(obj)
    transform[:3, :3] *= obj.scale
    return vertices @ transform[:3, :3].T + transform[:3, 3], faces


def mesh_file_surface(obj: SceneObject, scene: Scene) -> tuple[np.ndarray, np.ndarray]:
    """(vertices, faces) of all the parts of a mesh object's file in the file's frame, merged once per scene."""
    merged = scene.cache.setdefault("mesh_file_surfaces", {})
    path = scene.mesh_path(obj)
    if path not in merged:
        merged[path] = merged_surface(np.concatenate([part.triangles for part in mesh_file_parts(obj, scene)]))
    return merged[path]


def merged_surface(triangles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(vertices, faces) of (T, 3, 3) triangles, corners that are exactly equal merged into one vertex, the
    vertices in the order of their first corner (as trimesh's ``merge_vertices`` orders them)."""
    corners = np.ascontiguousarray(triangles, np.float64).reshape(-1, 3)
    _, first, inverse = np.unique(corners, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return corners[first[order]], rank[inverse.reshape(-1)].reshape(-1, 3).astype(np.int64)


def load_mesh_file(path, where: str) -> trimesh.Trimesh:
    """Load a mesh file (OBJ/STL/glTF/GLB) as one triangle mesh in its own frame; ParamsError if unusable."""
    import trimesh

    triangles = np.concatenate([part.triangles for part in load_asset(path, where)])
    return trimesh.Trimesh(vertices=triangles.reshape(-1, 3), faces=np.arange(3 * len(triangles)).reshape(-1, 3),
                           process=False)
