"""Vehicle-to-vehicle collisions: box-box contact and the two-body impulse response.

Each vehicle is its body box, as against the ground and the scene (AirSim paper,
Shah et al. 2017, sec. 3.3.4). The contact (impact point, normal, penetration
depth) comes from FCL's exact box-box test through the same
:class:`~aerial_sim.physics.fcl_contact.FclCollider` the scene objects use. The
response is the scene-contact response of :mod:`aerial_sim.physics.rigid_body`
for two moving bodies: projection out of the overlap, shared by inverse mass;
a normal impulse ``j = -(1 + e) v_n / (K_a + K_b)`` on the relative velocity of
the contact points, with ``K = 1/m + n . ((I^-1 (r x n)) x r)`` of each body
(a body of infinite mass gives back the scene formula); a Coulomb friction
impulse up to ``mu j``. Restitution and friction are the means of the two
vehicles' values. The resting support of the scene contacts is not applied (a
vehicle does not come to rest on another one; it slides off or is pushed out).

Every contact is reported to both parties as a :class:`CollisionRecord`, the
fields of AirSim's ``CollisionInfo``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aerial_sim.physics.contact import Contact, box_corners
from aerial_sim.physics.fcl_contact import FclCollider
from aerial_sim.physics.rigid_body import _effective_inverse_mass
from aerial_sim.physics.rotation import (
    add_scaled,
    cross,
    dot,
    matrix_vector,
    rotation_matrix,
    sub,
    sub_scaled,
    transpose_vector,
)

Vector3 = tuple[float, float, float]


@dataclass(frozen=True)
class CollisionRecord:
    """One vehicle's side of a collision (AirSim ``CollisionInfo``), world frame ``map``."""

    time_s: float
    #: The vehicle this record belongs to.
    vehicle: str
    #: The other party: a vehicle name.
    other: str
    #: Impact point (m).
    point: Vector3
    #: Unit normal out of the other party, toward this vehicle.
    normal: Vector3
    #: Penetration depth (m, >= 0).
    depth_m: float
    #: This vehicle's centre of mass at the impact (m).
    position: Vector3
    #: Approach speed of the contact points along the normal (m/s, > 0 when closing; 0 when touching at rest).
    closing_speed_m_s: float


@dataclass
class BodyView:
    """The part of one vehicle's state a collision reads and changes (plain floats, world frame)."""

    position: Vector3
    orientation: tuple[float, float, float, float]
    velocity: Vector3
    #: Angular velocity, body frame.
    angular_velocity: Vector3
    inv_mass: float
    inverse_inertia: tuple[Vector3, Vector3, Vector3]
    half_extents: Vector3
    restitution: float
    friction: float


def box_box_contact(a: BodyView, b: BodyView) -> Contact | None:
    """Deepest contact between the two body boxes, normal out of ``a`` toward ``b`` (FCL)."""
    import fcl


    corners = box_corners(a.position, a.orientation, a.half_extents)
    bounds = [[min(c[k] for c in corners) for k in range(3)], [max(c[k] for c in corners) for k in range(3)]]
    box = fcl.Box(*(2.0 * h for h in a.half_extents))
    collider = FclCollider("vehicle", box, np.asarray(rotation_matrix(a.orientation)), np.asarray(a.position),
                           np.asarray(bounds))
    return collider.contact(b.position, b.orientation, b.half_extents)


def resolve(a: BodyView, b: BodyView, contact: Contact, slop_m: float, bounce_speed_m_s: float) -> float:
    """Apply projection and the two-body impulse to ``a`` and ``b`` in place; returns the closing speed.

    ``contact.normal`` points out of ``a`` toward ``b``.
    """
    n = contact.normal
    share_a = a.inv_mass / (a.inv_mass + b.inv_mass)
    excess = contact.depth_m - slop_m
    if excess > 0.0:
        a.position = add_scaled(a.position, -excess * share_a, n)
        b.position = add_scaled(b.position, excess * (1.0 - share_a), n)
    rot_a = rotation_matrix(a.orientation)
    rot_b = rotation_matrix(b.orientation)
    r_a = sub(contact.point, a.position)
    r_b = sub(contact.point, b.position)
    velocity_a = add_scaled(a.velocity, 1.0, cross(matrix_vector(rot_a, a.angular_velocity), r_a))
    velocity_b = add_scaled(b.velocity, 1.0, cross(matrix_vector(rot_b, b.angular_velocity), r_b))
    relative = sub(velocity_b, velocity_a)
    normal_speed = dot(relative, n)
    if normal_speed >= 0.0:
        return 0.0
    restitution = 0.5 * (a.restitution + b.restitution) if normal_speed < -bounce_speed_m_s else 0.0
    friction = 0.5 * (a.friction + b.friction)
    normal_impulse = -(1.0 + restitution) * normal_speed / (
        _response(a, rot_a, r_a, n) + _response(b, rot_b, r_b, n)
    )
    impulse = (normal_impulse * n[0], normal_impulse * n[1], normal_impulse * n[2])  # on b; -impulse on a
    sliding = sub_scaled(relative, normal_speed, n)
    slide_speed = math.sqrt(dot(sliding, sliding))
    if slide_speed > 0.0:
        t = (sliding[0] / slide_speed, sliding[1] / slide_speed, sliding[2] / slide_speed)
        stop = slide_speed / (_response(a, rot_a, r_a, t) + _response(b, rot_b, r_b, t))
        impulse = sub_scaled(impulse, min(stop, friction * normal_impulse), t)
    _apply(b, rot_b, r_b, impulse)
    _apply(a, rot_a, r_a, (-impulse[0], -impulse[1], -impulse[2]))
    return -normal_speed


def _response(body: BodyView, rotation, r_world: Vector3, direction_world: Vector3) -> float:
    """How the body's contact point responds to a unit impulse along the direction (1/kg)."""
    return _effective_inverse_mass(body.inv_mass, body.inverse_inertia, transpose_vector(rotation, r_world),
                                   transpose_vector(rotation, direction_world))


def _apply(body: BodyView, rotation, r_world: Vector3, impulse_world: Vector3) -> None:
    body.velocity = add_scaled(body.velocity, body.inv_mass, impulse_world)
    angular = matrix_vector(body.inverse_inertia,
                            cross(transpose_vector(rotation, r_world), transpose_vector(rotation, impulse_world)))
    body.angular_velocity = add_scaled(body.angular_velocity, 1.0, angular)
