"""Small rotation helpers for the controller and the nodes (plain floats or numpy, no ROS).

Quaternions are ``(w, x, y, z)`` tuples rotating body vectors into the world
frame (body->world), as everywhere in aerial_sim's core. World frame ENU, body
frame FLU (REP-103).
"""

from __future__ import annotations

import math

import numpy as np

from aerial_sim.physics.rotation import quat_from_yaw, quat_multiply, rotation_matrix

__all__ = ["quat_to_matrix", "matrix_to_quat", "quat_multiply", "yaw_of", "quat_from_yaw",
           "wrap_angle", "heading_to_world"]


def quat_to_matrix(q) -> np.ndarray:
    """Rotation matrix R (body->world) of quaternion ``q = (w, x, y, z)``, as a numpy array."""
    return np.array(rotation_matrix(q))


def matrix_to_quat(rotation) -> tuple[float, float, float, float]:
    """Unit quaternion ``(w, x, y, z)`` of a rotation matrix, a 3x3 array or its rows as tuples
    (Shepperd's method), with w >= 0."""
    (m00, m01, m02), (m10, m11, m12), (m20, m21, m22) = rotation
    trace = m00 + m11 + m22
    if trace > 0.0:
        s = 2.0 * math.sqrt(1.0 + trace)
        q = (0.25 * s, (m21 - m12) / s, (m02 - m20) / s, (m10 - m01) / s)
    elif m00 > m11 and m00 > m22:
        s = 2.0 * math.sqrt(1.0 + m00 - m11 - m22)
        q = ((m21 - m12) / s, 0.25 * s, (m01 + m10) / s, (m02 + m20) / s)
    elif m11 > m22:
        s = 2.0 * math.sqrt(1.0 + m11 - m00 - m22)
        q = ((m02 - m20) / s, (m01 + m10) / s, 0.25 * s, (m12 + m21) / s)
    else:
        s = 2.0 * math.sqrt(1.0 + m22 - m00 - m11)
        q = ((m10 - m01) / s, (m02 + m20) / s, (m12 + m21) / s, 0.25 * s)
    w, x, y, z = q
    sign = -1.0 if w < 0 else 1.0
    norm = math.sqrt(w * w + x * x + y * y + z * z)
    return (sign * w / norm, sign * x / norm, sign * y / norm, sign * z / norm)


def yaw_of(q) -> float:
    """Heading (rad, ENU: 0 = facing east, counter-clockwise positive) of body->world quaternion ``q``."""
    w, x, y, z = q
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def wrap_angle(angle: float) -> float:
    """``angle`` wrapped to [-pi, pi)."""
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


def heading_to_world(vector_flu, yaw: float) -> np.ndarray:
    """Rotate a body-frame (FLU) velocity into ENU by the heading only.

    A ``cmd_vel`` in ``base_link`` means "forward/left/up as the vehicle is
    heading", independent of the momentary tilt, which is how AirSim's
    ``moveByVelocityBodyFrame`` and PX4 offboard body-frame velocity behave.
    """
    c, s = math.cos(yaw), math.sin(yaw)
    fx, fy, fz = vector_flu
    return np.array([c * fx - s * fy, s * fx + c * fy, fz], dtype=float)
