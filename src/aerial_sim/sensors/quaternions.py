"""Quaternion helpers of the sensor models, for (w, x, y, z) body->world quaternions: a numpy rotation
matrix, URDF roll-pitch-yaw, the Hamilton product and slerp (in plain floats, per sample).
"""

from __future__ import annotations

import math

import numpy as np

from aerial_sim.physics import rotation as physics_rotation
from aerial_sim.sensors.truth import Quat

def rotation_matrix(q: Quat) -> np.ndarray:
    """3x3 rotation matrix of quaternion ``q = (w, x, y, z)`` (body -> world), as a numpy array."""
    return np.array(physics_rotation.rotation_matrix(q))


def quat_from_rpy(roll: float, pitch: float, yaw: float) -> Quat:
    """Quaternion of fixed-axis roll (x), pitch (y), yaw (z) rotations, as URDF ``rpy``."""
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    return (
        cr * cp * cy + sr * sp * sy,
        sr * cp * cy - cr * sp * sy,
        cr * sp * cy + sr * cp * sy,
        cr * cp * sy - sr * sp * cy,
    )


quat_multiply = physics_rotation.quat_multiply  # Hamilton product a * b (apply b first, then a)


def slerp(a: Quat, b: Quat, fraction: float) -> Quat:
    """Spherical linear interpolation from ``a`` (fraction 0) to ``b`` (fraction 1), shortest path.

    In plain floats: on 4-vectors NumPy's per-call overhead made this 5 us a sample, and every
    sensor sample between two ground-truth messages takes one (``bench sensors``)."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    dot = aw * bw + ax * bx + ay * by + az * bz
    if dot < 0.0:
        bw, bx, by, bz, dot = -bw, -bx, -by, -bz, -dot
    if dot > 0.9995:  # nearly equal: normalised lerp is exact to rounding
        q = (aw + fraction * (bw - aw), ax + fraction * (bx - ax), ay + fraction * (by - ay), az + fraction * (bz - az))
    else:
        theta = math.acos(dot)
        sine = math.sin(theta)
        ka, kb = math.sin((1 - fraction) * theta), math.sin(fraction * theta)
        q = ((ka * aw + kb * bw) / sine, (ka * ax + kb * bx) / sine, (ka * ay + kb * by) / sine, (ka * az + kb * bz) / sine)
    norm = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    return (q[0] / norm, q[1] / norm, q[2] / norm, q[3] / norm)
