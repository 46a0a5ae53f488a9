"""One FCL collision object queried against a vehicle's body box: the contact every collider answers.

``contact(position, orientation, half_extents) -> Contact | None``: the deepest contact between the
object and the body box at ``position`` (ENU) with ``orientation`` (w, x, y, z body->world), normal out
of the object toward the body, with the penetration depth and the support patch's radius (AirSim's
collision input: seed 000, sec. 3.3.4), computed by the Flexible Collision Library (``python-fcl``:
exact box-box, GJK/EPA for the other convex shapes). The scene's objects
(:mod:`aerial_sim.world.colliders`) and the vehicles' box-box contacts
(:mod:`aerial_sim.physics.vehicle_contact`) both use it.
"""

from __future__ import annotations

from typing import Sequence

import fcl
import numpy as np

from aerial_sim.physics.contact import Contact
from aerial_sim.physics.rotation import rotation_matrix

#: Contacts this close to the deepest one count as one touching patch (m).
PATCH_DEPTH_TOLERANCE_M = 1e-3


class FclCollider:
    """Collision geometry of one object (a scene object, or another vehicle's box), queried against a body box."""

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
        body = fcl.CollisionObject(box, fcl.Transform(np.asarray(rotation_matrix(orientation)), position))
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
