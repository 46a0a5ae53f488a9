"""ENU/FLU (aerial_sim, REP-103) <-> NED/FRD (AirSim) conversions: the one place they happen.

AirSim's API speaks NED world coordinates (x north, y east, z down) and FRD
body axes (x forward, y right, z down), angles in radians except where the
wire contract says degrees (``YawMode.yaw_or_rate``, ``rotateToYaw``).
aerial_sim's graph speaks ENU ``map`` and FLU ``base_link``. Both are
right-handed; the conversions are fixed rotations:

- world vectors:  (n, e, d) = (y, x, -z)         (R_NED_ENU, its own inverse)
- body vectors:   (f, r, d) = (x, -y, -z)         (R_FRD_FLU, its own inverse)
- attitudes:      q_NED<-FRD = q_NED<-ENU * q_ENU<-FLU * q_FLU<-FRD
- headings:       psi_NED = pi/2 - psi_ENU        (north clockwise vs east counter-clockwise)

Quaternions are (w, x, y, z) tuples, body->world, Hamilton convention, as in
the rest of the core.
"""

from __future__ import annotations

import math
from typing import Sequence

from aerial_sim.control.geometry import wrap_angle
from aerial_sim.physics.rotation import quat_multiply, quat_normalize
from aerial_sim.sensors.quaternions import quat_from_rpy

_HALF_SQRT2 = math.sqrt(0.5)
#: Rotation taking ENU vectors to NED: 180 deg about the (east + north) axis.
_Q_NED_ENU = (0.0, _HALF_SQRT2, _HALF_SQRT2, 0.0)
#: Rotation taking FRD vectors to FLU (and back): 180 deg about x.
_Q_FLU_FRD = (0.0, 1.0, 0.0, 0.0)


def world_to_ned(vector_enu: Sequence[float]) -> tuple[float, float, float]:
    """A position, velocity or acceleration in ``map`` (ENU) -> NED."""
    x, y, z = vector_enu
    return (float(y), float(x), -float(z))


def world_to_enu(vector_ned: Sequence[float]) -> tuple[float, float, float]:
    """A NED vector -> ENU (the same swap: the rotation is its own inverse)."""
    return world_to_ned(vector_ned)


def body_to_frd(vector_flu: Sequence[float]) -> tuple[float, float, float]:
    """A body-frame vector (rates, specific force, field) FLU -> FRD."""
    x, y, z = vector_flu
    return (float(x), -float(y), -float(z))


def body_to_flu(vector_frd: Sequence[float]) -> tuple[float, float, float]:
    return body_to_frd(vector_frd)


def orientation_to_ned(q_enu_flu: Sequence[float]) -> tuple[float, float, float, float]:
    """Attitude body(FLU)->ENU -> body(FRD)->NED, with w >= 0."""
    q = quat_multiply(quat_multiply(_Q_NED_ENU, tuple(q_enu_flu)), _Q_FLU_FRD)
    return _positive(quat_normalize(q))


def orientation_to_enu(q_ned_frd: Sequence[float]) -> tuple[float, float, float, float]:
    """Attitude body(FRD)->NED -> body(FLU)->ENU, with w >= 0 (both fixed rotations are involutions)."""
    q = quat_multiply(quat_multiply(_Q_NED_ENU, tuple(q_ned_frd)), _Q_FLU_FRD)
    return _positive(quat_normalize(q))


def heading_to_ned(yaw_enu: float) -> float:
    """Heading (rad): ENU (0 = east, counter-clockwise) -> NED (0 = north, clockwise), in [-pi, pi)."""
    return wrap_angle(math.pi / 2.0 - yaw_enu)


def heading_to_enu(yaw_ned: float) -> float:
    return wrap_angle(math.pi / 2.0 - yaw_ned)


#: NED/FRD roll, pitch, yaw (rad) -> quaternion: AirSim's ``to_quaternion`` is the same Z-Y-X
#: (fixed-axis roll, pitch, yaw) composition as a URDF ``rpy``.
euler_to_quaternion = quat_from_rpy


def quaternion_to_euler(q: Sequence[float]) -> tuple[float, float, float]:
    """Quaternion (w, x, y, z) -> roll, pitch, yaw (rad; Z-Y-X), AirSim's ``to_eularian_angles`` order."""
    w, x, y, z = q
    roll = math.atan2(2.0 * (w * x + y * z), 1.0 - 2.0 * (x * x + y * y))
    pitch = math.asin(max(-1.0, min(1.0, 2.0 * (w * y - z * x))))
    yaw = math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    return roll, pitch, yaw


def body_covariance_to_frd(covariance: Sequence[float]) -> list[float]:
    """A row-major 3x3 body-frame covariance FLU -> FRD: C' = S C S with S = diag(1, -1, -1)."""
    signs = (1.0, -1.0, -1.0)
    return [float(covariance[3 * i + j]) * signs[i] * signs[j] for i in range(3) for j in range(3)]


def _positive(q):
    return q if q[0] >= 0.0 else tuple(-c for c in q)
