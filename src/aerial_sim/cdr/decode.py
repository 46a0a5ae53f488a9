"""Read the fields the nodes need straight from CDR bytes, no rclpy message objects (the wire rules:
:mod:`aerial_sim.cdr`).

Messages read here: ``nav_msgs/Odometry`` (:class:`OdometryFields`), ``sensor_msgs/Imu``
(:class:`ImuFields`), ``sensor_msgs/JointState`` (:class:`JointStateFields`), ``sensor_msgs/PointCloud2``
(:class:`PointCloud2Fields`), ``sensor_msgs/Image`` (:class:`ImageFields`), ``std_msgs/Float64MultiArray`` (:func:`decode_float64_array`), and the
``header.stamp`` of any message that starts with a ``std_msgs/Header`` (:func:`cdr_header_stamp_ns`).

Bytes that are not such a message (truncated, another encapsulation, a string or sequence
running past the end, text that is not UTF-8) raise ``ValueError`` with a short reason; values
are returned as written, NaN included (the node's own finiteness checks judge them).
Quaternions are returned ``(w, x, y, z)`` (the simulator's order; the wire has x, y, z, w).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

ENCAPSULATION_BYTES = 4
_LITTLE, _BIG = "<", ">"
_U32 = {order: struct.Struct(order + "I") for order in (_LITTLE, _BIG)}
_STAMP = {order: struct.Struct(order + "iI") for order in (_LITTLE, _BIG)}
#: Odometry after child_frame_id: position 3d, orientation 4d, pose covariance 36d (skipped),
#: twist linear 3d, angular 3d, twist covariance 36d (skipped).
_ODOMETRY_BODY = {order: struct.Struct(order + "7d288x6d288x") for order in (_LITTLE, _BIG)}
#: Imu after frame_id: orientation 4d + covariance 9d, angular velocity 3d + 9d, linear acceleration 3d + 9d.
_IMU_BODY = {order: struct.Struct(order + "37d") for order in (_LITTLE, _BIG)}


class OdometryFields(NamedTuple):
    """A ``nav_msgs/Odometry`` as the nodes read it (covariances left out: no node uses them).

    Pose in ``frame_id`` (``map``, ENU), twist in ``child_frame_id`` (the body, ``base_link``)."""

    stamp_sec: int
    stamp_nanosec: int
    frame_id: str
    child_frame_id: str
    position: tuple[float, float, float]
    orientation_wxyz: tuple[float, float, float, float]
    linear_velocity: tuple[float, float, float]
    angular_velocity: tuple[float, float, float]

    @property
    def time_s(self) -> float:
        """The stamp in seconds, computed as :func:`aerial_sim.nodes.ros.stamps.from_stamp` does (bit for bit)."""
        return self.stamp_sec + self.stamp_nanosec * 1e-9

    @property
    def stamp_ns(self) -> int:
        return self.stamp_sec * 1_000_000_000 + self.stamp_nanosec

    @classmethod
    def from_message(cls, msg) -> "OdometryFields":
        """The same fields from a nav_msgs/Odometry-shaped object (read by attribute)."""
        p, q = msg.pose.pose.position, msg.pose.pose.orientation
        v, w = msg.twist.twist.linear, msg.twist.twist.angular
        stamp = msg.header.stamp
        return cls(stamp.sec, stamp.nanosec, getattr(msg.header, "frame_id", ""), getattr(msg, "child_frame_id", ""),
                   (p.x, p.y, p.z), (q.w, q.x, q.y, q.z), (v.x, v.y, v.z), (w.x, w.y, w.z))


class ImuFields(NamedTuple):
    """A ``sensor_msgs/Imu``: every field (covariances row-major, 9 values each)."""

    stamp_sec: int
    stamp_nanosec: int
    frame_id: str
    orientation_wxyz: tuple[float, float, float, float]
    orientation_covariance: tuple[float, ...]
    angular_velocity: tuple[float, float, float]
    angular_velocity_covariance: tuple[float, ...]
    linear_acceleration: tuple[float, float, float]
    linear_acceleration_covariance: tuple[float, ...]

    @property
    def time_s(self) -> float:
        return self.stamp_sec + self.stamp_nanosec * 1e-9


class JointStateFields(NamedTuple):
    """A ``sensor_msgs/JointState``: joint names and the three value sequences (each may be empty)."""

    stamp_sec: int
    stamp_nanosec: int
    frame_id: str
    name: tuple[str, ...]
    position: tuple[float, ...]
    velocity: tuple[float, ...]
    effort: tuple[float, ...]

    @property
    def time_s(self) -> float:
        return self.stamp_sec + self.stamp_nanosec * 1e-9


class PointCloud2Fields(NamedTuple):
    """A ``sensor_msgs/PointCloud2``: every field; ``fields`` as (name, offset, datatype, count) each."""

    stamp_sec: int
    stamp_nanosec: int
    frame_id: str
    height: int
    width: int
    fields: tuple[tuple[str, int, int, int], ...]
    is_bigendian: bool
    point_step: int
    row_step: int
    data: bytes
    is_dense: bool


class ImageFields(NamedTuple):
    """A ``sensor_msgs/Image``: every field; ``data`` a memoryview of the pixel bytes in the message's
    own buffer (no copy: ``np.frombuffer`` reads it as it is)."""

    stamp_sec: int
    stamp_nanosec: int
    frame_id: str
    height: int
    width: int
    encoding: str
    is_bigendian: bool
    step: int
    data: memoryview

    @property
    def stamp_ns(self) -> int:
        return self.stamp_sec * 1_000_000_000 + self.stamp_nanosec


def decode_clock(data: bytes) -> tuple[int, int]:
    """``rosgraph_msgs/Clock`` CDR bytes -> ``(sec, nanosec)`` (``ValueError`` if they are not one): its one
    field, a ``builtin_interfaces/Time``, sits where a header's stamp does."""
    return _read_stamp(data, byte_order(data))


#: The layout of the last message each decoder below read: (its encapsulation header, its bytes from the
#: frame id's length to the body, frame id(s), body offset, byte order). A stream's messages all share one
#: (the same frame ids): the next message with the same bytes there has the same strings and offsets, so
#: only its stamp and body are read (the strings' parse was a third of a decode).
_ODOMETRY_LAYOUT: tuple = (b"", b"", "", "", 0, "")
_IMU_LAYOUT: tuple = (b"", b"", "", 0, "")


def decode_odometry(data: bytes) -> OdometryFields:
    """``nav_msgs/Odometry`` CDR bytes -> :class:`OdometryFields` (``ValueError`` if they are not one)."""
    global _ODOMETRY_LAYOUT
    encapsulation, strings, frame_id, child_frame_id, offset, order = _ODOMETRY_LAYOUT
    body = _ODOMETRY_BODY.get(order)
    if not (offset and data.startswith(strings, 12) and data.startswith(encapsulation) and len(data) >= offset + body.size):
        order = byte_order(data)
        _read_stamp(data, order)
        frame_id, offset = read_string(data, 12, order)
        child_frame_id, offset = read_string(data, offset, order)
        body = _ODOMETRY_BODY[order]
        offset = align(offset, 8)
        if len(data) < offset + body.size:
            raise ValueError(f"truncated: nav_msgs/Odometry needs {offset + body.size} bytes, got {len(data)}")
        _ODOMETRY_LAYOUT = (bytes(data[:4]), bytes(data[12:offset]), frame_id, child_frame_id, offset, order)
    sec, nanosec = _STAMP[order].unpack_from(data, ENCAPSULATION_BYTES)
    v = body.unpack_from(data, offset)
    return OdometryFields(sec, nanosec, frame_id, child_frame_id, v[0:3], (v[6], v[3], v[4], v[5]), v[7:10], v[10:13])


def decode_imu(data: bytes) -> ImuFields:
    """``sensor_msgs/Imu`` CDR bytes -> :class:`ImuFields` (``ValueError`` if they are not one)."""
    global _IMU_LAYOUT
    encapsulation, strings, frame_id, offset, order = _IMU_LAYOUT
    body = _IMU_BODY.get(order)
    if not (offset and data.startswith(strings, 12) and data.startswith(encapsulation) and len(data) >= offset + body.size):
        order = byte_order(data)
        _read_stamp(data, order)
        frame_id, offset = read_string(data, 12, order)
        body = _IMU_BODY[order]
        offset = align(offset, 8)
        if len(data) < offset + body.size:
            raise ValueError(f"truncated: sensor_msgs/Imu needs {offset + body.size} bytes, got {len(data)}")
        _IMU_LAYOUT = (bytes(data[:4]), bytes(data[12:offset]), frame_id, offset, order)
    sec, nanosec = _STAMP[order].unpack_from(data, ENCAPSULATION_BYTES)
    v = body.unpack_from(data, offset)
    return ImuFields(sec, nanosec, frame_id, (v[3], v[0], v[1], v[2]), v[4:13], v[13:16], v[16:25], v[25:28], v[28:37])


def decode_joint_state(data: bytes) -> JointStateFields:
    """``sensor_msgs/JointState`` CDR bytes -> :class:`JointStateFields` (``ValueError`` if they are not one)."""
    order = byte_order(data)
    sec, nanosec = _read_stamp(data, order)
    frame_id, offset = read_string(data, 12, order)
    count, offset = read_count(data, offset, order, "name")
    names = []
    for _ in range(count):  # not used by any node, but they come before the values
        name, offset = read_string(data, offset, order)
        names.append(name)
    position, offset = read_float64_sequence(data, offset, order, "position")
    velocity, offset = read_float64_sequence(data, offset, order, "velocity")
    effort, offset = read_float64_sequence(data, offset, order, "effort")
    return JointStateFields(sec, nanosec, frame_id, tuple(names), position, velocity, effort)


def decode_float64_array(data: bytes) -> tuple[tuple[tuple[str, int, int], ...], int, tuple[float, ...]]:
    """``std_msgs/Float64MultiArray`` CDR bytes -> its dimensions ((label, size, stride) each), data
    offset and values (``ValueError`` if they are not one)."""
    order = byte_order(data)
    count, offset = read_count(data, ENCAPSULATION_BYTES, order, "dim")
    dims = []
    for _ in range(count):
        label, offset = read_string(data, offset, order)
        (size, stride), offset = _read_u32s(data, offset, order, 2, "dim size, stride")
        dims.append((label, size, stride))
    (data_offset,), offset = _read_u32s(data, offset, order, 1, "data_offset")
    values, _ = read_float64_sequence(data, offset, order, "data")
    return tuple(dims), data_offset, values


def decode_point_cloud2(data: bytes) -> PointCloud2Fields:
    """``sensor_msgs/PointCloud2`` CDR bytes -> :class:`PointCloud2Fields` (``ValueError`` if they are not one)."""
    order = byte_order(data)
    sec, nanosec = _read_stamp(data, order)
    frame_id, offset = read_string(data, 12, order)
    (height, width), offset = _read_u32s(data, offset, order, 2, "height, width")
    count, offset = read_count(data, offset, order, "fields")
    fields = []
    for _ in range(count):
        name, offset = read_string(data, offset, order)
        (field_offset,), offset = _read_u32s(data, offset, order, 1, "field offset")
        if len(data) < offset + 1:
            raise ValueError(f"truncated: field datatype at byte {offset}, got {len(data)} bytes")
        datatype = data[offset]
        (field_count,), offset = _read_u32s(data, offset + 1, order, 1, "field count")
        fields.append((name, field_offset, datatype, field_count))
    if len(data) < offset + 1:
        raise ValueError(f"truncated: is_bigendian at byte {offset}, got {len(data)} bytes")
    is_bigendian = bool(data[offset])
    (point_step, row_step), offset = _read_u32s(data, offset + 1, order, 2, "point_step, row_step")
    length, offset = read_count(data, offset, order, "data")
    end = offset + length
    if end + 1 > len(data):
        raise ValueError(f"data: {length} bytes at byte {offset} run past the end ({len(data)} bytes)")
    return PointCloud2Fields(sec, nanosec, frame_id, height, width, tuple(fields), is_bigendian, point_step, row_step,
                             data[offset:end], bool(data[end]))


def decode_image(data: bytes) -> ImageFields:
    """``sensor_msgs/Image`` CDR bytes -> :class:`ImageFields` (``ValueError`` if they are not one). The pixels
    are not copied: rclpy's typed Image costs 0.9 ms for a 460x320 32FC1 frame (``array.array`` of its bytes),
    this some microseconds."""
    order = byte_order(data)
    sec, nanosec = _read_stamp(data, order)
    frame_id, offset = read_string(data, 12, order)
    (height, width), offset = _read_u32s(data, offset, order, 2, "height, width")
    encoding, offset = read_string(data, offset, order)
    if len(data) < offset + 1:
        raise ValueError(f"truncated: is_bigendian at byte {offset}, got {len(data)} bytes")
    is_bigendian = bool(data[offset])
    (step,), offset = _read_u32s(data, offset + 1, order, 1, "step")
    length, offset = read_count(data, offset, order, "data")
    end = offset + length
    if end > len(data):
        raise ValueError(f"data: {length} bytes at byte {offset} run past the end ({len(data)} bytes)")
    return ImageFields(sec, nanosec, frame_id, height, width, encoding, is_bigendian, step,
                       memoryview(data)[offset:end])


def cdr_header_stamp_ns(data: bytes) -> int | None:
    """``header.stamp`` in ns of CDR bytes whose first field is a ``std_msgs/Header``; None when the
    bytes are too short (the recorder and bag tools take None as "no stamp").

    Lenient where the decoders are strict: any encapsulation id, its low bit taken as the byte order.
    """
    if len(data) < ENCAPSULATION_BYTES + 8:
        return None
    sec, nanosec = _STAMP[_LITTLE if data[1] & 1 else _BIG].unpack_from(data, ENCAPSULATION_BYTES)
    return sec * 1_000_000_000 + nanosec


def cdr_header_frame_id(data: bytes) -> str | None:
    """``header.frame_id`` of CDR bytes whose first field is a ``std_msgs/Header`` (None: unreadable)."""
    try:
        return read_string(data, ENCAPSULATION_BYTES + 8, byte_order(data))[0]
    except (ValueError, UnicodeDecodeError):
        return None


# --------------------------------------------------------------------------- the CDR primitives


def byte_order(data: bytes) -> str:
    """The struct byte order of CDR bytes from their encapsulation header (``ValueError`` unless XCDR1)."""
    if len(data) < ENCAPSULATION_BYTES:
        raise ValueError(f"truncated: {len(data)} bytes, no CDR encapsulation header")
    if data[0] != 0 or data[1] > 1:
        raise ValueError(f"not plain CDR: encapsulation id 0x{data[0]:02x}{data[1]:02x}")
    return _LITTLE if data[1] else _BIG


def align(offset: int, size: int) -> int:
    """``offset`` (from the start of the bytes) moved up to a multiple of ``size`` from the payload start."""
    return offset + (-(offset - ENCAPSULATION_BYTES) % size)


def read_string(data: bytes, offset: int, order: str) -> tuple[str, int]:
    """The string at ``offset`` (aligned first) and the offset after it."""
    offset = align(offset, 4)
    if len(data) < offset + 4:
        raise ValueError(f"truncated: string length at byte {offset}, got {len(data)} bytes")
    (length,) = _U32[order].unpack_from(data, offset)
    start = offset + 4
    end = start + length
    if end > len(data):
        raise ValueError(f"string of {length} bytes at byte {start} runs past the end ({len(data)} bytes)")
    text_end = end - 1 if length and data[end - 1] == 0 else end
    return data[start:text_end].decode(), end


def read_count(data: bytes, offset: int, order: str, what: str) -> tuple[int, int]:
    """A sequence's uint32 element count at ``offset`` (aligned first) and the offset after it."""
    offset = align(offset, 4)
    if len(data) < offset + 4:
        raise ValueError(f"truncated: {what} count at byte {offset}, got {len(data)} bytes")
    return _U32[order].unpack_from(data, offset)[0], offset + 4


def read_float64_sequence(data: bytes, offset: int, order: str, what: str) -> tuple[tuple[float, ...], int]:
    """A ``float64[]`` at ``offset``: its values and the offset after it."""
    count, offset = read_count(data, offset, order, what)
    if count == 0:
        return (), offset
    offset = align(offset, 8)
    end = offset + 8 * count
    if end > len(data):
        raise ValueError(f"{what}: {count} float64 at byte {offset} run past the end ({len(data)} bytes)")
    return struct.unpack_from(f"{order}{count}d", data, offset), end


def _read_u32s(data: bytes, offset: int, order: str, count: int, what: str) -> tuple[tuple[int, ...], int]:
    """``count`` uint32 at ``offset`` (aligned first) and the offset after them."""
    offset = align(offset, 4)
    if len(data) < offset + 4 * count:
        raise ValueError(f"truncated: {what} at byte {offset}, got {len(data)} bytes")
    return struct.unpack_from(f"{order}{count}I", data, offset), offset + 4 * count


def _read_stamp(data: bytes, order: str) -> tuple[int, int]:
    if len(data) < ENCAPSULATION_BYTES + 8:
        raise ValueError(f"truncated: {len(data)} bytes, no header stamp")
    return _STAMP[order].unpack_from(data, ENCAPSULATION_BYTES)
