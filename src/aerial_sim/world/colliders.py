"""Colliders for scene objects, implementing the physics engine's Collider protocol.

``contact(position, orientation, half_extents) -> Contact | None``: the vehicle
is a box (its ``body_box_m``) at ``position`` (ENU) with ``orientation``
(w, x, y, z body->world); the answer is the deepest contact between that box
and the object, with the normal pointing out of the object toward the body and
the penetration depth, or None when they do not touch. The engine turns it
into the same restitution + Coulomb friction response it applies at the
ground; this is AirSim's collision input (impact point, normal, penetration
depth; seed 000, sec. 3.3.4), computed here by the Flexible Collision Library
(``python-fcl``: exact box-box, GJK/EPA for the other convex shapes), through
:class:`~aerial_sim.physics.fcl_contact.FclCollider`.

The terrain, where a scene has one, is :class:`~aerial_sim.world.terrain.TerrainCollider`.

A mesh object collides as its convex hull (as Unreal's default "simple
collision" does): FCL's triangle-soup (BVH) contacts have no inside, so their
penetration depth is unusable for a response, while GJK/EPA on the hull is
exact. Its rendering (the camera) uses the real triangles.
"""

from __future__ import annotations

import fcl
import numpy as np

from aerial_sim.physics.fcl_contact import FclCollider
from aerial_sim.world.object_meshes import mesh_file_surface, object_mesh, object_surface, object_transform
from aerial_sim.world.rotations import quaternion_to_matrix
from aerial_sim.world.scene import Scene, SceneObject
from aerial_sim.world.terrain import TerrainCollider

def scene_colliders(scene: Scene) -> list:
    """One collider per object, for ``PhysicsWorld.add_collider``, and the terrain's when the scene has one
    (the ground plane is built into the physics world; over a terrain it is lowered below it:
    :func:`ground_height_below`)."""
    _mesh_file_hulls(scene)
    colliders = [collider_for(obj, scene) for obj in scene.objects if not obj.ground_cover]  # covers: the ground
    if scene.terrain is not None:
        colliders.append(TerrainCollider(scene.terrain))
    return colliders


def ground_height_below(scene: Scene, default: float = 0.0) -> float:
    """Height for the physics world's built-in ground plane: ``default``, or the terrain's lowest point."""
    return default if scene.terrain is None else float(scene.terrain.bounds[0, 2])


def collider_for(obj: SceneObject, scene: Scene) -> FclCollider:
    """Build the collider of one scene object (in its world pose)."""
    if obj.shape == "mesh":
        points, hull_faces = placed_hull(obj, scene)
        faces = np.hstack([np.full((len(hull_faces), 1), 3), hull_faces]).ravel()
        geometry = fcl.Convex(points, len(hull_faces), faces)
        return FclCollider(obj.name, geometry, np.eye(3), np.zeros(3), np.array([points.min(0), points.max(0)]))
    mesh = object_mesh(obj, scene)  # world frame: gives the bounds
    if obj.shape == "box":
        geometry = fcl.Box(*obj.size)
    elif obj.shape == "cylinder":
        geometry = fcl.Cylinder(obj.radius, obj.height)
    else:
        geometry = fcl.Sphere(obj.radius)
    return FclCollider(obj.name, geometry, quaternion_to_matrix(obj.quaternion), np.asarray(obj.position, float),
                       mesh.bounds)


def placed_hull(obj: SceneObject, scene: Scene) -> tuple[np.ndarray, np.ndarray]:
    """(world vertices, outward triangles) of a mesh object's convex hull.

    The hull is built once per mesh file, in the file's frame (Qhull), and each instance places its
    vertices by the object's pose and scale (a rotation and a positive uniform scale keep a hull a hull and
    its winding outward): the city's 1 800 props share 17 files (issue 29). The hull's vertices are the
    placed file vertices themselves (the same product as the object's triangles), so its extreme points
    are the object's bounds. A flat mesh (no inside, :func:`convex_hull` thickens it along its normal) is
    built per instance in the world frame, as before.
    """
    vertices, _ = mesh_file_surface(obj, scene)
    hulls = scene.cache.setdefault("mesh_file_hulls", {})
    path = scene.mesh_path(obj)
    if path not in hulls:
        hulls[path] = None if _is_flat(vertices) else _hull_indices(vertices)
    if hulls[path] is None:
        return convex_hull(object_surface(obj, scene)[0])
    return object_surface(obj, scene)[0], hulls[path]


def _mesh_file_hulls(scene: Scene) -> None:
    """Fill the scene's per-file merged surfaces and hulls (what :func:`placed_hull` builds for each mesh file) for
    every mesh file of a colliding object at once, from the scene cache's ``.hulls`` file when it has them
    (:func:`aerial_sim.world.scene_cache.cached_derived`): the city's 458 files, about 0.6 CPU s, every launch."""
    from aerial_sim.world.scene_cache import cached_derived

    objects = {}
    for obj in scene.objects:
        if obj.shape == "mesh" and not obj.ground_cover:
            objects.setdefault(scene.mesh_path(obj), obj)
    surfaces = scene.cache.setdefault("mesh_file_surfaces", {})
    hulls = scene.cache.setdefault("mesh_file_hulls", {})
    if all(path in hulls for path in objects):
        return

    def build() -> dict:
        made = {}
        for path, obj in objects.items():
            vertices, faces = mesh_file_surface(obj, scene)
            made[str(path)] = [vertices, faces, None if _is_flat(vertices) else _hull_indices(vertices)]
        return made

    def decode(tree) -> dict:
        for path in objects:
            vertices, faces, hull = tree[str(path)]
            if vertices.ndim != 2 or faces.ndim != 2 or (hull is not None and hull.ndim != 2):
                raise ValueError(f"the hull of {path} is not one")
        return tree

    stored = cached_derived(scene, "hulls", {"files": sorted(str(path) for path in objects)}, build, decode=decode,
                            what="the colliders' hulls are")
    for path in objects:
        vertices, faces, hull = stored[str(path)]
        surfaces.setdefault(path, (vertices, faces))
        hulls.setdefault(path, hull)


def _is_flat(points: np.ndarray) -> bool:
    if len(points) < 4:
        return True
    _, singular, _ = np.linalg.svd(points - points.mean(axis=0), full_matrices=False)
    return bool(singular[-1] <= 1e-9 * max(singular[0], 1e-12))


def _hull_indices(points: np.ndarray) -> np.ndarray:
    """Outward triangles of the convex hull of ``points``, indexing ``points``."""
    return convex_hull(points)[1]


#: Half thickness (m) given to a flat mesh (a sign, a poster) so that its hull has an inside.
FLAT_HALF_THICKNESS_M = 5e-4


def convex_hull(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(vertices, outward-wound triangles) of the convex hull of ``points`` (Qhull, through SciPy).

    A flat point set (all in one plane, e.g. a glTF quad) is given a thickness of
    2 x :data:`FLAT_HALF_THICKNESS_M` along its normal first, which Qhull needs to build a hull.
    """
    from scipy.spatial import ConvexHull

    centred = points - points.mean(axis=0)
    _, singular, axes = np.linalg.svd(centred, full_matrices=False)
    if singular[-1] <= 1e-9 * max(singular[0], 1e-12) or len(points) < 4:
        normal = axes[-1] * FLAT_HALF_THICKNESS_M
        points = np.concatenate([points + normal, points - normal])
    hull = ConvexHull(points)
    faces = hull.simplices.copy()
    # Qhull's simplices are not consistently wound: turn each to face away from the centroid.
    centre = points[hull.vertices].mean(axis=0)
    a, b, c = points[faces[:, 0]], points[faces[:, 1]], points[faces[:, 2]]
    inward = np.einsum("ij,ij->i", np.cross(b - a, c - a), a - centre) < 0
    faces[inward] = faces[inward][:, ::-1]
    return points, faces
