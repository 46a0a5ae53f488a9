"""A fleet's two per-period messages: ``/swarm/state`` (ground truth out of the physics node) and
``/swarm/motor_commands`` (the flight controllers' commands into it), each one message for every vehicle.

``/swarm/state`` is a ``sensor_msgs/PointCloud2``: one point per vehicle, in the physics node's vehicle
order (:class:`aerial_sim.vehicles.fleet.FleetSelection`, the order of ``/swarm/poses``), stamped with
sim time, ``frame_id`` ``map``. Every field is a little-endian float64 (``PointField.FLOAT64``), in order:

- ``x y z``: position of the centre of mass in ``map`` (ENU, m): what RViz draws as the point;
- ``qw qx qy qz``: body (FLU) -> ``map`` orientation;
- ``vx vy vz``: velocity in the body frame (m/s), as ``nav_msgs/Odometry``'s twist;
- ``wx wy wz``: angular velocity in the body frame (rad/s);
- ``fx fy fz``: specific force in the body frame (m/s^2, +g up at rest), as the ground-truth IMU's
  ``linear_acceleration``.

That is each vehicle's ``ground_truth/odom`` and ``ground_truth/imu`` without the covariances (fixed
ground-truth values). PointCloud2 is ROS's standard message for N records with named, typed fields.

``/swarm/motor_commands`` is a ``std_msgs/Float64MultiArray``, a matrix with dimensions ``vehicle``
(one row per vehicle that has a new command) and ``index_then_controls``: the vehicle's index in the
physics node's order, then its motor commands u_i in [0, 1] (``<vehicle>/motor_commands``'s content),
padded with NaN to the widest row (a mixed fleet's vehicles differ in rotor count).

Why: each message a process receives or sends costs a wake-up of Fast DDS's threads and, in Python,
an executor callback or a reliable write (issue 14). One message for the fleet instead of two or
three per vehicle is what lets a process serving many vehicles' sensors and controllers, and the
physics node, keep up with a hundred vehicles (``tools/dev.sh bench swarm_realtime``).

Pure: no rclpy. Written and read as CDR bytes (:mod:`aerial_sim.cdr`): rclpy converting a typed
PointCloud2's ``data`` cost the physics node about 2 ms per message at 64 vehicles. The physics
node makes rows with :func:`state_row` and the message with :func:`encode_state`; a reader gets the
stamp and rows back with :func:`decode_state` (checked by :func:`check_layout`), then builds the
fields a node reads from a row (:func:`odometry_fields`, :func:`imu_fields`): the same values, bit
for bit, as decoding that vehicle's own ground-truth messages (``test/test_swarm_messages.py``).
Commands: :func:`encode_commands`, :func:`decode_commands`.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

import math

from aerial_sim.cdr.decode import (ImuFields, OdometryFields, PointCloud2Fields, decode_float64_array,
                                   decode_point_cloud2)
from aerial_sim.cdr.encode import encode_float64_array, encode_point_cloud2
from aerial_sim.physics.rotation import rotate_inverse

FIELDS = ("x", "y", "z", "qw", "qx", "qy", "qz", "vx", "vy", "vz", "wx", "wy", "wz", "fx", "fy", "fz")
#: ``sensor_msgs/PointField.FLOAT64``.
FLOAT64 = 8
POINT_STEP = 8 * len(FIELDS)
_ROW = np.dtype("<f8")
#: The covariance the physics node puts in ground-truth messages (a tiny variance on the diagonal).
GROUND_TRUTH_VARIANCE = 1e-12
VECTOR_COVARIANCE = tuple(GROUND_TRUTH_VARIANCE if i % 4 == 0 else 0.0 for i in range(9))


class PointFieldSpec(NamedTuple):
    """One ``sensor_msgs/PointField``: name, byte offset, datatype, count."""

    name: str
    offset: int
    datatype: int
    count: int


#: The fields of a ``/swarm/state`` message, as its PointField list.
LAYOUT = tuple(PointFieldSpec(name, 8 * i, FLOAT64, 1) for i, name in enumerate(FIELDS))


def state_row(truth) -> tuple[float, ...]:
    """One vehicle's row from its :class:`aerial_sim.physics.state.GroundTruth` (the values its
    ``ground_truth/odom`` and ``ground_truth/imu`` carry)."""
    velocity_body = rotate_inverse(truth.orientation, truth.velocity_world)
    return (*truth.position, *truth.orientation, *velocity_body, *truth.angular_velocity_body,
            *truth.specific_force_body)


def pack_rows(rows: Sequence[Sequence[float]]) -> bytes:
    """The message's ``data``: the rows as little-endian float64, row after row."""
    return np.asarray(rows, dtype=_ROW).reshape(len(rows), len(FIELDS)).tobytes()


def encode_state(stamp_ns: int, rows: Sequence[Sequence[float]]) -> bytes:
    """The ``/swarm/state`` message of ``rows`` (one per vehicle, :func:`state_row`) as CDR bytes."""
    count = len(rows)
    return encode_point_cloud2(stamp_ns, "map", 1, count, LAYOUT, False, POINT_STEP, POINT_STEP * count,
                               pack_rows(rows), True)


def decode_state(data: bytes, vehicles: int) -> tuple[int, int, list[list[float]]]:
    """Stamp (sec, nanosec) and rows of a ``/swarm/state`` message's CDR bytes for a fleet of
    ``vehicles``; ``ValueError`` naming what is wrong with anything else (:func:`check_layout`)."""
    cloud = decode_point_cloud2(data)
    check_layout(cloud, vehicles)
    rows = np.frombuffer(cloud.data, dtype=_ROW).reshape(vehicles, len(FIELDS)).tolist()
    return cloud.stamp_sec, cloud.stamp_nanosec, rows


def check_layout(cloud: PointCloud2Fields, vehicles: int) -> None:
    """``ValueError`` naming the first thing about a received cloud that is not a ``/swarm/state``
    of ``vehicles`` vehicles (a cloud from another publisher, another fleet, a truncated buffer)."""
    got = tuple(PointFieldSpec(*f) for f in cloud.fields)
    if got != LAYOUT:
        raise ValueError(f"fields {[f.name for f in got]} are not {list(FIELDS)} (float64 at 8-byte steps)")
    if cloud.is_bigendian:
        raise ValueError("big-endian data: /swarm/state is little-endian")
    if cloud.point_step != POINT_STEP or cloud.row_step != POINT_STEP * cloud.width:
        raise ValueError(f"point_step {cloud.point_step} / row_step {cloud.row_step}: expected {POINT_STEP} / "
                         f"{POINT_STEP * cloud.width}")
    if cloud.height != 1 or cloud.width != vehicles:
        raise ValueError(f"{cloud.height} x {cloud.width} points for a fleet of {vehicles} vehicles "
                         f"(expected 1 x {vehicles})")
    if len(cloud.data) != POINT_STEP * vehicles:
        raise ValueError(f"{len(cloud.data)} bytes of data, expected {POINT_STEP * vehicles}")
    if cloud.frame_id != "map":
        raise ValueError(f"frame_id '{cloud.frame_id}', expected 'map'")


def odometry_fields(row: Sequence[float], stamp_sec: int, stamp_nanosec: int, child_frame_id: str) -> OdometryFields:
    """The :class:`OdometryFields` of one row, as the vehicle's ``ground_truth/odom`` decodes."""
    return OdometryFields(stamp_sec, stamp_nanosec, "map", child_frame_id, tuple(row[0:3]), tuple(row[3:7]),
                          tuple(row[7:10]), tuple(row[10:13]))


def imu_fields(row: Sequence[float], stamp_sec: int, stamp_nanosec: int, frame_id: str) -> ImuFields:
    """The :class:`ImuFields` of one row, as the vehicle's ``ground_truth/imu`` decodes."""
    return ImuFields(stamp_sec, stamp_nanosec, frame_id, tuple(row[3:7]), VECTOR_COVARIANCE, tuple(row[10:13]),
                     VECTOR_COVARIANCE, tuple(row[13:16]), VECTOR_COVARIANCE)


#: The labels of ``/swarm/motor_commands``'s two dimensions.
COMMAND_DIMENSIONS = ("vehicle", "index_then_controls")


def encode_commands(commands: dict[int, Sequence[float]]) -> bytes:
    """``/swarm/motor_commands`` for ``{vehicle index: controls}`` (at least one) as CDR bytes."""
    width = 1 + max(len(controls) for controls in commands.values())
    data = [value for index, controls in sorted(commands.items())
            for value in (float(index), *controls, *([math.nan] * (width - 1 - len(controls))))]
    rows = len(commands)
    return encode_float64_array(data, ((COMMAND_DIMENSIONS[0], rows, rows * width), (COMMAND_DIMENSIONS[1], width, width)))


def decode_commands(data: bytes, vehicles: int) -> list[tuple[int, list[float]]]:
    """(vehicle index, controls) of each row of a ``/swarm/motor_commands`` message (padding NaN
    dropped); ``ValueError`` naming what is wrong with a message that is not one for ``vehicles``."""
    dims, offset, values = decode_float64_array(data)
    if tuple(d[0] for d in dims) != COMMAND_DIMENSIONS or offset != 0:
        raise ValueError(f"layout {[d[0] for d in dims]} (offset {offset}) is not {list(COMMAND_DIMENSIONS)} (offset 0)")
    rows, width = dims[0][1], dims[1][1]
    if width < 2 or rows * width != len(values):
        raise ValueError(f"{rows} rows of {width} values do not make the {len(values)} values sent")
    decoded = []
    for start in range(0, len(values), width):
        index = values[start]
        if not (math.isfinite(index) and index == int(index) and 0 <= index < vehicles):
            raise ValueError(f"vehicle index {index!r} is not one of the fleet's 0..{vehicles - 1}")
        controls = list(values[start + 1:start + width])
        while controls and math.isnan(controls[-1]):
            controls.pop()
        decoded.append((int(index), controls))
    return decoded
