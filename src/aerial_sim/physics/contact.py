"""Contacts: colliders report impact point, normal and depth; the engine responds.

AirSim paper (Shah et al. 2017), sec. 3.3.4: for each collision the engine gets
the impact position, the impact normal and the penetration depth, and computes
a response with restitution and Coulomb friction that changes both linear and
angular velocity. Here any object with a ``contact(position, orientation,
half_extents)`` method is a collider (the world engineer's scene objects); the
ground plane is built in. The vehicle is represented by its body box.

The response (see :mod:`aerial_sim.physics.rigid_body`) has three parts:

- projection: a penetrating body is moved out along the normal by the depth;
- impulse: an approaching contact point gets the normal impulse
  ``j = -(1 + e) v_n / (1/m + n . ((I^-1 (r x n)) x r))`` (restitution ``e``,
  zero below a bounce threshold) and a tangential impulse bounded by
  ``friction * j`` (Coulomb), applied to linear and angular velocity;
- support: a body resting on a collider gets the normal force that cancels the
  push into it, Coulomb friction up to ``friction * N`` against sliding and
  spinning, and, when it rests on a face, the tipping torque a support patch of
  the given radius can provide. A landed vehicle therefore rests exactly (zero
  velocity and acceleration, the accelerometer reads +g) and takes off as soon
  as its thrust exceeds its weight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from aerial_sim.physics.rotation import rotation_matrix

Vector3 = tuple[float, float, float]
Quaternion = tuple[float, float, float, float]
INF = math.inf


@dataclass(frozen=True)
class Contact:
    """One contact between the body box and a collider (world frame ``map``)."""

    #: Impact point (m).
    point: Vector3
    #: Unit normal pointing out of the obstacle, toward the body.
    normal: Vector3
    #: Penetration depth (m, >= 0).
    depth_m: float
    #: Radius of the touching patch (m): 0 for a corner or edge, about half the face size when a face rests flat.
    patch_radius_m: float = 0.0


@runtime_checkable
class Collider(Protocol):
    """Anything the body box can hit.

    ``contact`` returns None when the box (centre ``position``, body->world
    ``orientation``, half sizes ``half_extents`` along body x, y, z) does not
    touch the object. An optional ``bounds`` attribute ``((xmin, ymin, zmin),
    (xmax, ymax, zmax))`` lets the engine skip distant objects cheaply.
    Colliders are static: the answer depends on the arguments only (a body
    resting on one sleeps until its own state or inputs change).
    """

    def contact(self, position: Vector3, orientation: Quaternion, half_extents: Vector3) -> Contact | None: ...


def box_corners(position: Vector3, orientation: Quaternion, half_extents: Vector3) -> list[Vector3]:
    """The eight corners of the box in the world frame: ``position + R(q) (+-hx, +-hy, +-hz)``."""
    r0, r1, r2 = rotation_matrix(orientation)
    hx, hy, hz = half_extents
    px, py, pz = position
    corners = []
    for sx in (-hx, hx):
        ax, ay, az = px + r0[0] * sx, py + r1[0] * sx, pz + r2[0] * sx
        for sy in (-hy, hy):
            bx, by, bz = ax + r0[1] * sy, ay + r1[1] * sy, az + r2[1] * sy
            for sz in (-hz, hz):
                corners.append((bx + r0[2] * sz, by + r1[2] * sz, bz + r2[2] * sz))
    return corners


class GroundPlane:
    """The horizontal ground ``z = height_m`` in ``map`` (normal +z)."""

    #: Corners within this distance (m) of the deepest one share the contact (a face resting flat).
    FACE_TOLERANCE_M = 1e-5

    def __init__(self, height_m: float = 0.0):
        self.height_m = float(height_m)
        self.bounds = ((-INF, -INF, -INF), (INF, INF, self.height_m))

    def contact(self, position: Vector3, orientation: Quaternion, half_extents: Vector3) -> Contact | None:
        corners = box_corners(position, orientation, half_extents)
        lowest = min([c[2] for c in corners])
        depth = self.height_m - lowest
        if depth < 0.0:
            return None
        level = lowest + self.FACE_TOLERANCE_M
        touching = [c for c in corners if c[2] <= level]
        count = len(touching)
        x = sum([c[0] for c in touching]) / count
        y = sum([c[1] for c in touching]) / count
        radius = 0.0
        if count >= 3:
            # A face rests flat: the support point can move by the inscribed radius of the face,
            # half its shorter side (the shortest distance between two of its corners).
            radius = 0.5 * min(
                math.dist(a, b) for i, a in enumerate(touching) for b in touching[i + 1 :]
            )
        return Contact(point=(x, y, lowest), normal=(0.0, 0.0, 1.0), depth_m=depth, patch_radius_m=radius)
