"""One instant of a vehicle's ground truth as the sensor models read it, and odometry turned into one.

- :class:`TruthSample`: one instant of ground truth (same field names as
  ``aerial_sim.physics.state.GroundTruth``, so either can be passed to a model);
  :class:`GroundTruthLike`, the protocol both satisfy;
- :func:`truth_from_odometry`: a sample from ``ground_truth/odom``, or None for a malformed message
  (:data:`UNUSABLE_ODOMETRY` is the line a node logs then).

No ROS import here: the nodes in ``aerial_sim.nodes`` adapt these to topics.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Protocol

from aerial_sim.cdr.decode import OdometryFields
from aerial_sim.physics import rotation as physics_rotation

Vec3 = tuple[float, float, float]


Quat = tuple[float, float, float, float]


#: Standard gravity (m/s^2), the unit of the "g" in accelerometer datasheets.
STANDARD_GRAVITY = 9.80665


#: Two instants closer than this (s) are the same instant (stamps are integer nanoseconds).
TIME_EPSILON_S = 1e-9


#: A quaternion whose squared norm is below this carries no rotation (a malformed message).
MIN_QUATERNION_NORM2 = 1e-6


#: Ground truth beyond these is not a vehicle state but a malformed message: |position| m,
#: |velocity| m/s, |body rate| rad/s (every model here is valid far inside them).
MAX_TRUTH_POSITION_M = 1e6


MAX_TRUTH_SPEED_M_S = 1e3


MAX_TRUTH_RATE_RAD_S = 1e3


#: What a node logs (throttled) when :func:`truth_from_odometry` refuses a message.
UNUSABLE_ODOMETRY = (f"ground_truth/odom ignored: a non-finite value, a zero quaternion, or an implausible state "
                     f"(|p| > {MAX_TRUTH_POSITION_M:g} m, |v| > {MAX_TRUTH_SPEED_M_S:g} m/s "
                     f"or |w| > {MAX_TRUTH_RATE_RAD_S:g} rad/s)")


class GroundTruthLike(Protocol):
    """What a sensor model reads: :class:`TruthSample` or ``physics.state.GroundTruth``."""

    time_s: float
    position: Vec3
    orientation: Quat
    velocity_world: Vec3
    angular_velocity_body: Vec3
    specific_force_body: Vec3
    angular_acceleration_body: Vec3


class TruthSample(NamedTuple):
    """Ground truth of one vehicle at one instant (SI units, ENU world ``map``, FLU body).

    ``specific_force_body`` is what a perfect accelerometer at the body origin
    reads (+g up at rest, 0 in free fall).

    A named tuple (immutable, as the nodes of a process share one per odometry message): made several
    times a period (each odometry message, each resampled instant), it costs a third of a frozen
    dataclass's construction. ``_replace`` makes a changed copy.
    """

    time_s: float
    position: Vec3 = (0.0, 0.0, 0.0)
    orientation: Quat = (1.0, 0.0, 0.0, 0.0)
    velocity_world: Vec3 = (0.0, 0.0, 0.0)
    angular_velocity_body: Vec3 = (0.0, 0.0, 0.0)
    specific_force_body: Vec3 = (0.0, 0.0, STANDARD_GRAVITY)
    angular_acceleration_body: Vec3 = (0.0, 0.0, 0.0)


_VECTOR_FIELDS = ("position", "velocity_world", "angular_velocity_body", "specific_force_body", "angular_acceleration_body")


def as_truth_sample(truth: GroundTruthLike) -> TruthSample:
    """Copy any ground-truth-like object into a :class:`TruthSample`."""
    if isinstance(truth, TruthSample):
        return truth
    return TruthSample(
        time_s=float(truth.time_s),
        orientation=tuple(map(float, truth.orientation)),
        **{name: tuple(map(float, getattr(truth, name, (0.0, 0.0, 0.0)))) for name in _VECTOR_FIELDS},
    )


def truth_from_odometry(msg: Any) -> TruthSample | None:
    """A :class:`TruthSample` from odometry: :class:`aerial_sim.cdr.decode.OdometryFields` (what the nodes'
    raw subscriptions decode) or a nav_msgs/Odometry-shaped object (read by attribute, no ROS import).

    Pose is in ``map`` (ENU), twist in the body frame (nav_msgs convention), so the
    linear velocity is rotated into the world. Returns None (log :data:`UNUSABLE_ODOMETRY`)
    when any value is not finite, the orientation quaternion is (nearly) zero, which gives
    no rotation, or the state is beyond the ``MAX_TRUTH_*`` bounds. A quaternion that is not
    of unit length is normalised.
    """
    odom = msg if isinstance(msg, OdometryFields) else OdometryFields.from_message(msg)
    # The checks and the conversion written out on the fields (the same operations as on one 13-tuple of
    # them, so the same bits): once per odometry message and process.
    position, orientation, velocity, rates = odom.position, odom.orientation_wxyz, odom.linear_velocity, odom.angular_velocity
    w, x, y, z = orientation
    norm2 = w * w + x * x + y * y + z * z
    if (not all(map(math.isfinite, position + orientation + velocity + rates)) or norm2 < MIN_QUATERNION_NORM2
            or math.hypot(*position) > MAX_TRUTH_POSITION_M or math.hypot(*velocity) > MAX_TRUTH_SPEED_M_S
            or math.hypot(*rates) > MAX_TRUTH_RATE_RAD_S):
        return None
    norm = math.sqrt(norm2)
    if abs(norm - 1.0) > 1e-6:
        orientation = (w / norm, x / norm, y / norm, z / norm)
    return TruthSample(odom.stamp_sec + odom.stamp_nanosec * 1e-9, position, orientation,
                       physics_rotation.rotate(orientation, velocity), rates)


class _LastTruth:
    """:func:`truth_from_odometry` of the last odometry fields, by identity: the nodes of a vehicle that
    share a process (barometer, magnetometer, GPS, flight controller) get the same fields object for a
    message (it is decoded once per process), so it is checked and converted once too."""

    def __init__(self):
        self.odom = None
        self.truth = None

    def __call__(self, odom) -> TruthSample | None:
        if odom is not self.odom:
            self.odom, self.truth = odom, truth_from_odometry(odom)
        return self.truth


#: :func:`truth_from_odometry`, converted once per odometry fields object in the process (:class:`_LastTruth`).
last_truth_from_odometry = _LastTruth()
