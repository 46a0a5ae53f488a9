"""Small rotation helpers for the controller (numpy only, no ROS).

Quaternions are ``(w, x, y, z)`` tuples rotating body vectors into the world
frame (body->world), as everywhere in aerial_sim's core. World frame ENU, body
frame FLU (REP-103).
"""

from __future__ import annotations

import math

import numpy as np

from aerial_sim.physics.rotation import quat_from_yaw, quat_multiply, rotation_matrix

__all__ = ["quat_to_matrix", "matrix_to_quat", "quat_multiply", "quat_conjugate", "yaw_of", "quat_from_yaw",
           "wrap_angle", "heading_to_world"]


def quat_to_matrix(q) -> np.ndarray:
    """Rotation matrix R (body->world) of quaternion ``q = (w, x, y, z)``, as a numpy array."""
    return np.array(rotation_matrix(q))


def matrix_to_quat(rotation: np.ndarray) -> tuple[float, float, float, float]:
    """Unit quaternion ``(w, x, y, z)`` of a rotation matrix (Shepperd's method), with w >= 0."""
    m = rotation
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0.0:
        s = 2.0 * math.sqrt(1.0 + trace)
        q = (0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s)
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = ((m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s)
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = ((m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s)
    else:
        s = 2.0 * math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = ((m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s)
    sign = -1.0 if q[0] < 0 else 1.0
    norm = math.sqrt(sum(c * c for c in q))
    return tuple(sign * c / norm for c in q)


def quat_conjugate(q) -> tuple[float, float, float, float]:
    w, x, y, z = q
    return (w, -x, -y, -z)


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
