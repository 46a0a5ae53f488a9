"""Snapshots of the simulated state handed to the rest of the system (ground truth).

The physics engine keeps the six kinematic quantities of the AirSim paper
(sec. 3.3): position, orientation, linear and angular velocity, linear and
angular acceleration. :class:`GroundTruth` freezes them at one instant, plus the
specific force a perfect accelerometer would read.
"""

from __future__ import annotations

from dataclasses import dataclass

Vector3 = tuple[float, float, float]


@dataclass(frozen=True)
class GroundTruth:
    """Noise-free state of one vehicle (world frame ``map`` ENU, body frame FLU, SI units)."""

    time_s: float
    #: Centre of mass in ``map`` (m).
    position: Vector3
    #: Body->world unit quaternion (w, x, y, z).
    orientation: tuple[float, float, float, float]
    #: Velocity of the centre of mass in ``map`` (m/s).
    velocity_world: Vector3
    #: Angular velocity in the body frame (rad/s).
    angular_velocity_body: Vector3
    #: True kinematic acceleration in ``map`` (m/s^2): 0 at rest, (0, 0, -g) in free fall.
    linear_acceleration_world: Vector3
    #: What a perfect accelerometer reads, body frame (m/s^2): (0, 0, +g) at rest, 0 in free fall.
    specific_force_body: Vector3
    #: Angular acceleration in the body frame (rad/s^2).
    angular_acceleration_body: Vector3


@dataclass(frozen=True)
class RotorState:
    """One actuated vertex after the motor lag: speed, thrust and reaction torque."""

    #: Rotor speed (rad/s): n_max * sqrt(u_filtered), since thrust is proportional to n^2.
    speed_rad_s: float
    #: Thrust along the rotor normal (N).
    thrust_n: float
    #: Reaction torque on the body about the normal (N m), signed (-d_i * |tau_i|).
    torque_nm: float
    #: Control after the first-order motor lag, in [0, 1].
    control: float
