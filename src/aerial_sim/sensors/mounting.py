"""Where a sensor sits on the body and what that does to what it measures.

- :class:`Mount`: the pose of ``<ns>/<sensor>_link`` in ``base_link`` (URDF-style offset and rpy);
- :func:`in_sensor_frame`: a body vector measured in the sensor frame, plus bias and noise;
- :func:`lever_arm_acceleration`: the extra specific force at an offset from the body origin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from aerial_sim.physics import rotation as physics_rotation
from aerial_sim.sensors.quaternions import quat_from_rpy, rotation_matrix
from aerial_sim.sensors.truth import GroundTruthLike, Quat, Vec3

@dataclass(frozen=True)
class Mount:
    """Pose of a sensor frame (``<ns>/<sensor>_link``) in ``<ns>/base_link``.

    ``position_m``: FLU offset of the sensor from the body origin (lever arm).
    ``rpy_rad``: fixed-axis roll, pitch, yaw of the sensor frame in the body frame (URDF style).
    """

    position_m: Vec3 = (0.0, 0.0, 0.0)
    rpy_rad: Vec3 = (0.0, 0.0, 0.0)

    @property
    def orientation(self) -> Quat:
        """Quaternion sensor frame -> base_link."""
        return quat_from_rpy(*self.rpy_rad)

    @property
    def rotation(self) -> np.ndarray:
        """Rotation matrix sensor frame -> base_link (its transpose maps body vectors into the sensor)."""
        return rotation_matrix(self.orientation)


def sensor_mount(params: Any) -> Mount:
    """The pose of a sensor's frame in base_link: its params' ``mount``, or the body origin for a
    model without one (the barometer measures at the body origin, yet stamps ``<ns>/baro_link``),
    so every frame a sensor node stamps has a transform on ``/tf_static``."""
    mount = getattr(params, "mount", None)
    return mount if isinstance(mount, Mount) else Mount()


def in_sensor_frame(rows, vector: Vec3, bias: Vec3, noise: Sequence[float]) -> Vec3:
    """``rows @ vector + bias + noise`` in plain floats: a body vector measured in the sensor frame
    (``rows``: the mount's body -> sensor rotation). On 3-vectors NumPy's per-call overhead was
    most of an IMU or magnetometer sample's cost."""
    x, y, z = vector
    (b0, b1, b2), (n0, n1, n2) = bias, noise
    (r00, r01, r02), (r10, r11, r12), (r20, r21, r22) = rows
    return (r00 * x + r01 * y + r02 * z + b0 + n0, r10 * x + r11 * y + r12 * z + b1 + n1,
            r20 * x + r21 * y + r22 * z + b2 + n2)


def lever_arm_acceleration(truth: GroundTruthLike, offset_m: np.ndarray) -> np.ndarray:
    """Extra specific force at ``offset_m`` from the body origin: ``alpha x r + omega x (omega x r)`` (body frame)."""
    omega, alpha = truth.angular_velocity_body, truth.angular_acceleration_body
    cross = physics_rotation.cross  # on 3-vectors 14x faster than np.cross (12 us a call, per sample)
    return np.add(cross(alpha, offset_m), cross(omega, cross(omega, offset_m)))
