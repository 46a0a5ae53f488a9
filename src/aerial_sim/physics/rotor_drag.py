"""Rotor drag: the thrust-dependent horizontal drag of the follow-on paper, and AirSim's drag for comparison.

Seed 004, sec. 3.1. A rotor moving edgewise through the air with relative
velocity ``V_a`` (body frame) feels ``F_i = -sqrt(T_i) * c_d1 * pi_e3 * V_a``,
eq. (6), where ``pi_e3 = I - e3 e3^T`` keeps only the horizontal (body x, y)
part. With ``sqrt(T_i) ~= k T_i + b`` (eq. 7) and the rotor's own velocity
``R^T V_a + omega x d_i`` the vehicle's drag is the sum of eq. (11); for a
symmetric vehicle with no wind and small thrust differences it reduces to
eq. (13)::

    F_a = -(k T + b) * c_d1 * pi_e3 * v          (T total thrust, v body velocity)

Convention for ``b``: eq. (9) sums ``k T_i + b`` over n rotors, which is
``k T + n b``; eq. (13) writes that sum as ``k T + b``. Here ``b`` is the
vehicle-level offset of eq. (13) (``n`` times the per-rotor fit of eq. 7), and
the per-rotor form gives each rotor ``k T_i + b / n``, so both forms agree in
steady flight.

Default coefficients. The paper does not publish its k, b and c_d1; these are
derived for AirSim's generic quadrotor (config/vehicles/quad_x.yaml: 1 kg,
4 rotors, D = 0.2286 m, maximum thrust 4.179 N per rotor at sea level):

- ``k``, ``b`` (:func:`linearize_sqrt_thrust`): least-squares line through
  ``sqrt(T_i)`` for ``T_i`` uniform from 20 % to 100 % of the maximum thrust
  (the linearisation of eq. 7 / Fig. 11): k = 0.3282 N^-1/2 and a per-rotor
  offset of 0.7283 N^1/2, so b = 4 x 0.7283 = 2.913 N^1/2;
- ``c_d1``: momentum theory bounds it. Air crossing a disc of area ``A`` at the
  induced velocity ``v_i = sqrt(T / (2 rho A))``, if fully carried along at the
  flight speed ``v``, costs the "ram" drag ``rho A v_i v = sqrt(T) sqrt(rho A / 2) v``:
  eq. (6) with ``c_d1 = sqrt(rho A / 2)`` = 0.1586 (kg/m)^1/2
  (:func:`ram_drag_bound`). Real rotors entrain only part of that air; the
  default is 40 % of the bound, 0.0634, which gives quad_x 0.39 N of drag per
  m/s at hover thrust (0.39 1/s mass-normalised), so a 10 m/s cruise needs
  about 22 degrees of tilt. Identify your vehicle's value from a flight with
  ``aerial_sim drag-eval --fit``.

AirSim's own drag (seed 000 sec. 3.3.1; eq. (5) of seed 004), which
``drag-eval`` compares against this model, is :func:`airsim_linear_drag_body`:
``|F| = 1/2 rho |v|^2 C_lin A`` opposite the air-relative velocity, the same
law the physics engine applies when its linear drag is on.

Everything here works on plain float tuples: one evaluation of eq. (13) is a
few hundred nanoseconds in CPython, where a numpy 3-vector would cost more
than the arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from aerial_sim.config import ParamsError, require_non_negative

Vector = tuple[float, float, float]
Quaternion = tuple[float, float, float, float]


@dataclass(frozen=True)
class RotorDragParams:
    """Coefficients of eqs. (11)/(13) of seed 004 (defaults derived in the module docstring)."""

    #: Slope of sqrt(T_i) ~= k T_i + b/n (N^-1/2), eq. (7).
    k: float = 0.3282
    #: Vehicle-level offset of eq. (13) (N^1/2): n times the per-rotor offset of eq. (7).
    b: float = 2.913
    #: c_d1 of eq. (6), (kg/m)^1/2: 40 % of the ram-drag bound sqrt(rho A / 2) of a 0.2286 m disc.
    c_d1: float = 0.0634
    #: False: eq. (13) (force only). True: eq. (11) summed rotor by rotor, with
    #: omega x d_i, per-rotor thrusts, and the moment of each rotor's force.
    per_rotor: bool = False

    def __post_init__(self):
        require_non_negative(self, "k", "b", "c_d1")


class RotorDragModel:
    """Rotor drag wrench on the body (FLU, N and N m) from thrusts and air-relative motion.

    ``rotor_positions`` (body frame, m) are needed for the per-rotor form only.
    """

    def __init__(self, params: RotorDragParams, rotor_positions: Sequence[Vector] = ()):
        if params.per_rotor and not rotor_positions:
            raise ParamsError("per_rotor rotor drag needs the rotor positions (from the vehicle config)")
        self.params = params
        self.rotor_positions = tuple(tuple(float(c) for c in d) for d in rotor_positions)

    def force_eq13(self, total_thrust_n: float, velocity_air_body: Vector) -> Vector:
        """Eq. (13): ``-(k T + b) c_d1 pi_e3 v`` (no vertical component)."""
        p = self.params
        gain = -(p.k * total_thrust_n + p.b) * p.c_d1
        return (gain * velocity_air_body[0], gain * velocity_air_body[1], 0.0)

    def wrench(
        self, thrusts_n: Sequence[float], velocity_air_body: Vector, angular_velocity_body: Vector = (0.0, 0.0, 0.0)
    ) -> tuple[Vector, Vector]:
        """(force, torque) in the body frame for per-rotor thrusts and the body's air-relative velocity."""
        if not self.params.per_rotor:
            return self.force_eq13(math.fsum(thrusts_n), velocity_air_body), (0.0, 0.0, 0.0)
        if len(thrusts_n) != len(self.rotor_positions):
            raise ValueError(f"expected {len(self.rotor_positions)} rotor thrusts, got {len(thrusts_n)}")
        p = self.params
        offset = p.b / len(thrusts_n)
        vx, vy, vz = velocity_air_body
        wx, wy, wz = angular_velocity_body
        fx = fy = tx = ty = tz = 0.0
        for thrust, (dx, dy, dz) in zip(thrusts_n, self.rotor_positions):
            # Eq. (11): the rotor hub moves with v + omega x d_i; pi_e3 drops the z part.
            ux = vx + wy * dz - wz * dy
            uy = vy + wz * dx - wx * dz
            gain = -(p.k * thrust + offset) * p.c_d1
            fix, fiy = gain * ux, gain * uy
            fx += fix
            fy += fiy
            # Moment of a horizontal force applied at the hub: d_i x F_i.
            tx += -dz * fiy
            ty += dz * fix
            tz += dx * fiy - dy * fix
        return (fx, fy, 0.0), (tx, ty, tz)


def linearize_sqrt_thrust(
    rotor_count: int, max_thrust_n: float, fit_range: tuple[float, float] = (0.2, 1.0)
) -> tuple[float, float]:
    """(k, b) of eq. (7)/(13): least-squares line ``k T_i + b/n`` through ``sqrt(T_i)``.

    ``T_i`` is uniform over ``fit_range`` (fractions) of the rotor's maximum
    thrust (closed form); ``b`` is the per-rotor offset times ``rotor_count``.
    """
    if rotor_count < 1 or not max_thrust_n > 0:
        raise ParamsError("linearize_sqrt_thrust needs rotor_count >= 1 and a positive maximum thrust")
    lo, hi = (fraction * max_thrust_n for fraction in fit_range)
    if not 0.0 <= lo < hi:
        raise ParamsError(f"fit_range must be increasing fractions >= 0, got {fit_range}")
    # Moments of T and sqrt(T) for T uniform on [lo, hi].
    width = hi - lo
    mean_t = (lo + hi) / 2.0
    mean_tt = (hi**3 - lo**3) / (3.0 * width)
    mean_s = (hi**1.5 - lo**1.5) / (1.5 * width)
    mean_ts = (hi**2.5 - lo**2.5) / (2.5 * width)
    k = (mean_ts - mean_t * mean_s) / (mean_tt - mean_t**2)
    return k, rotor_count * (mean_s - k * mean_t)


def ram_drag_bound(diameter_m: float, air_density_kg_m3: float = 1.225) -> float:
    """Momentum-theory upper bound of ``c_d1``: ``sqrt(rho A / 2)`` for a disc of diameter ``D``."""
    return math.sqrt(air_density_kg_m3 * math.pi * diameter_m**2 / 8.0)


def airsim_linear_drag_body(
    velocity_air_body: Vector, air_density_kg_m3: float, linear_drag_coefficient: float, cross_section_m2: Vector
) -> Vector:
    """AirSim's linear drag (seed 000 sec. 3.3.1): ``|F| = 1/2 rho |v|^2 C_lin A``, opposite ``v``.

    ``A`` is the cross-section seen along the velocity, from the areas
    ``(A_x, A_y, A_z)`` seen along each body axis (``MultirotorParams.cross_section``,
    computed as AirSim's ``MultiRotorPhysicsBody::createDragVertices`` does):
    ``A |v| = A_x |v_x| + A_y |v_y| + A_z |v_z|``.
    """
    vx, vy, vz = velocity_air_body
    ax, ay, az = cross_section_m2
    gain = -0.5 * air_density_kg_m3 * linear_drag_coefficient * (ax * abs(vx) + ay * abs(vy) + az * abs(vz))
    return (gain * vx, gain * vy, gain * vz)


def rotate_world_to_body(orientation: Quaternion, vector: Vector) -> Vector:
    """``R^T v`` for a body->world quaternion ``(w, x, y, z)``."""
    w, x, y, z = orientation
    vx, vy, vz = vector
    return (
        (1 - 2 * (y * y + z * z)) * vx + 2 * (x * y + w * z) * vy + 2 * (x * z - w * y) * vz,
        2 * (x * y - w * z) * vx + (1 - 2 * (x * x + z * z)) * vy + 2 * (y * z + w * x) * vz,
        2 * (x * z + w * y) * vx + 2 * (y * z - w * x) * vy + (1 - 2 * (x * x + y * y)) * vz,
    )


def air_velocity_body(velocity_body: Vector, orientation: Quaternion, wind_enu_m_s: Vector) -> Vector:
    """Body-frame velocity relative to the air: ``v_body - R^T wind`` (``R^T V_a`` of eq. 10)."""
    if wind_enu_m_s == (0.0, 0.0, 0.0):
        return velocity_body
    wind_body = rotate_world_to_body(orientation, wind_enu_m_s)
    return (velocity_body[0] - wind_body[0], velocity_body[1] - wind_body[1], velocity_body[2] - wind_body[2])
