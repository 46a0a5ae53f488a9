"""Colliders for scene objects, implementing the physics engine's Collider protocol.

``contact(position, orientation, half_extents) -> Contact | None``: the vehicle
is a box (its ``body_box_m``) at ``position`` (ENU) with ``orientation``
(w, x, y, z body->world); the answer is the deepest contact between that box
and the object, with the normal pointing out of the object toward the body and
the penetration depth, or None when they do not touch. The engine turns it
into the same restitution + Coulomb friction response it applies at the
ground; this is AirSim's collision input (impact point, normal, penetration
depth; seed 000, sec. 3.3.4), computed here by the Flexible Collision Library
(``python-fcl``: exact box-box, GJK/EPA for the other convex shapes).

The terrain, where a scene has one, is :class:`~aerial_sim.world.terrain.TerrainCollider`.

A mesh object collides as its convex hull (as Unreal's default "simple
collision" does): FCL's triangle-soup (BVH) contacts have no inside, so their
penetration depth is unusable for a response, while GJK/EPA on the hull is
exact. Its rendering (the camera) uses the real triangles.
"""

from __future__ import annotations

from typing import Sequence

import fcl
import numpy as np

from aerial_sim.physics.contact import Contact
from aerial_sim.world.geometry import object_mesh, quaternion_to_matrix
from aerial_sim.world.scene import Scene, SceneObject
from aerial_sim.world.terrain import TerrainCollider

#: Contacts this close to the deepest one count as one touching patch (m).
PATCH_DEPTH_TOLERANCE_M = 1e-3


class FclCollider:
    """Collision geometry of one scene object, queried against the vehicle's body box."""

    def __init__(self, name: str, geometry, rotation: np.ndarray, translation: np.ndarray, bounds: np.ndarray):
        self.name = name
        self._object = fcl.CollisionObject(geometry, fcl.Transform(rotation, translation))
        #: World axis-aligned bounding box ((xmin, ymin, zmin), (xmax, ymax, zmax)), for the engine's broad phase.
        self.bounds = tuple(tuple(float(v) for v in corner) for corner in bounds)
        self._center = np.mean(bounds, axis=0)
        self._bounding_radius = 0.5 * float(np.linalg.norm(bounds[1] - bounds[0]))
        self._request = fcl.CollisionRequest(num_max_contacts=16, enable_contact=True)
        self._body_boxes: dict[tuple[float, float, float], fcl.Box] = {}

    def contact(self, position: Sequence[float], orientation: Sequence[float],
                half_extents: Sequence[float]) -> Contact | None:
        position = np.asarray(position, float)
        half_extents = tuple(float(h) for h in half_extents)
        # Broad phase: bounding spheres apart -> no contact, no FCL call.
        if np.linalg.norm(position - self._center) > self._bounding_radius + np.linalg.norm(half_extents):
            return None
        box = self._body_boxes.get(half_extents)
        if box is None:
            box = self._body_boxes[half_extents] = fcl.Box(*(2.0 * h for h in half_extents))
        body = fcl.CollisionObject(box, fcl.Transform(quaternion_to_matrix(orientation), position))
        result = fcl.CollisionResult()
        if fcl.collide(self._object, body, self._request, result) == 0:
            return None
        deepest = max(result.contacts, key=lambda c: c.penetration_depth)
        normal = np.asarray(deepest.normal, float)  # FCL: from the first object (obstacle) to the second (body)
        normal /= np.linalg.norm(normal)
        # FCL reports a resting face as several contacts (e.g. the 4 corners of the overlap):
        # their centroid is the impact point and their spread the support patch radius.
        patch = np.array([c.pos for c in result.contacts
                          if c.penetration_depth >= deepest.penetration_depth - PATCH_DEPTH_TOLERANCE_M])
        point = patch.mean(axis=0)
        return Contact(
            point=tuple(float(v) for v in point),
            normal=tuple(float(v) for v in normal),
            depth_m=float(max(deepest.penetration_depth, 0.0)),
            patch_radius_m=float(np.linalg.norm(patch - point, axis=1).max()),
        )

    def __repr__(self) -> str:
        return f"FclCollider({self.name!r})"


def scene_colliders(scene: Scene) -> list:
    """One collider per object, for ``PhysicsWorld.add_collider``, and the terrain's when the scene has one
    (the ground plane is built into the physics world; over a terrain it is lowered below it:
    :func:`ground_height_below`)."""
    colliders = [collider_for(obj, scene) for obj in scene.objects]
    if scene.terrain is not None:
        colliders.append(TerrainCollider(scene.terrain))
    return colliders


def ground_height_below(scene: Scene, default: float = 0.0) -> float:
    """Height for the physics world's built-in ground plane: ``default``, or the terrain's lowest point."""
    return default if scene.terrain is None else float(scene.terrain.bounds[0, 2])


def collider_for(obj: SceneObject, scene: Scene) -> FclCollider:
    """Build the collider of one scene object (in its world pose)."""
    mesh = object_mesh(obj, scene)  # world frame: gives the bounds (and the hull of a mesh object)
    if obj.shape == "mesh":
        points, hull_faces = convex_hull(np.asarray(mesh.vertices, float))
        faces = np.hstack([np.full((len(hull_faces), 1), 3), hull_faces]).ravel()
        geometry = fcl.Convex(points, len(hull_faces), faces)
        return FclCollider(obj.name, geometry, np.eye(3), np.zeros(3), mesh.bounds)
    if obj.shape == "box":
        geometry = fcl.Box(*obj.size)
    elif obj.shape == "cylinder":
        geometry = fcl.Cylinder(obj.radius, obj.height)
    else:
        geometry = fcl.Sphere(obj.radius)
    return FclCollider(obj.name, geometry, quaternion_to_matrix(obj.quaternion), np.asarray(obj.position, float),
                       mesh.bounds)


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
