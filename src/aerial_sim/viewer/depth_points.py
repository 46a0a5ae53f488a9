"""Depth image -> 3D points (pinhole back-projection), vectorised.

For pixel (u, v) with depth d (planar, along the optical z axis, as REP-118
depth images are), the point in the optical frame (z forward, x right, y down) is
x = (u - c_x) d / f_x,  y = (v - c_y) d / f_y,  z = d
with f_x, f_y, c_x, c_y from ``CameraInfo.k`` (the camera model of
:mod:`aerial_sim.world.camera`). Pixels with d = 0 (no return, seed 004 sec. 2's
fill-rate zeros), NaN or inf give no point.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from aerial_sim.world.camera import CameraParams


def intrinsics_from_k(k: Sequence[float]) -> tuple[float, float, float, float]:
    """``CameraInfo.k`` (row-major 3x3) -> (f_x, f_y, c_x, c_y)."""
    return float(k[0]), float(k[4]), float(k[2]), float(k[5])


def depth_to_points(depth_m: np.ndarray, fx: float, fy: float, cx: float, cy: float, stride: int = 1) -> np.ndarray:
    """(H, W) depth in metres -> (N, 3) float32 points in the optical frame, invalid pixels dropped.

    ``stride`` > 1 keeps every stride-th pixel in each direction (a lighter cloud).
    """
    depth = np.asarray(depth_m, dtype=np.float32)[::stride, ::stride]
    v, u = np.indices(depth.shape, dtype=np.float32)
    u *= stride
    v *= stride
    valid = np.isfinite(depth) & (depth > 0)
    z = depth[valid]
    return np.stack([(u[valid] - cx) * z / fx, (v[valid] - cy) * z / fy, z], axis=1).astype(np.float32, copy=False)


def optical_to_base(params: CameraParams) -> tuple[np.ndarray, np.ndarray]:
    """Rotation and translation taking optical-frame points to ``base_link`` (FLU) for a camera mount."""
    # Imported here: the camera module pulls in trimesh, scipy and numba (about 1.5 s of CPU), which the
    # depth_to_points node, started by every sim.launch.yaml, never needs.
    from aerial_sim.world.camera import R_LINK_OPTICAL
    from aerial_sim.world.rotations import rpy_to_matrix

    roll, pitch, yaw = (math.radians(a) for a in params.mount_rpy_deg)
    rotation = rpy_to_matrix(roll, pitch, yaw) @ R_LINK_OPTICAL
    return rotation, np.asarray(params.mount_position_m, dtype=float)
