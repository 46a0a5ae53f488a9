"""Write the messages the nodes publish at high rate as CDR bytes, no rclpy message objects (the wire
rules: :mod:`aerial_sim.cdr`).

Writing (``encode_odometry``, ``encode_imu`` (and for fixed frames ``odometry_encoder``, ``imu_encoder``), ``encode_joint_state``, ``encode_clock``,
``encode_float64_array`` (``float64_array_encoder``), ``encode_fluid_pressure``, ``encode_magnetic_field``, ``encode_nav_sat_fix``,
``encode_twist_stamped``, ``encode_pose_stamped``, ``encode_header``, ``encode_pose_array``, ``encode_point_cloud2``,
``encode_diagnostic_array``, ``encode_image`` / ``encode_image_array``, ``encode_camera_info_of``, ``encode_range``): little-endian plain CDR by the same rules, one precompiled ``struct`` per
layout (frame id and name lengths), zero padding bytes. ``Publisher.publish`` sends such bytes as
they are; building and publishing the typed message costs about five times as much (``bench cdr``).
rclpy's own ``serialize_message`` leaves the alignment bytes as its buffer held them and may append
a few bytes; apart from those the bytes are the same (``test/test_cdr.py``). Wrong sizes raise
``ValueError``.
"""

from __future__ import annotations

import functools
import struct

#: The little-endian plain-CDR encapsulation header every encoder below writes (CDR_LE).
CDR_LE_HEADER = b"\x00\x01\x00\x00"


class _Layout:
    """One little-endian ``struct`` format for a whole message, with the CDR alignment rules
    (offsets counted from the payload start) and zero padding bytes."""

    def __init__(self) -> None:
        self.parts = ["<4s"]  # the encapsulation header
        self.offset = 0

    def field(self, code: str, size: int, count: int = 1) -> "_Layout":
        padding = -self.offset % size
        if padding:
            self.parts.append(f"{padding}x")
        self.parts.append(f"{count}{code}")
        self.offset += padding + size * count
        return self

    def string(self, encoded_length: int) -> "_Layout":
        """uint32 length (with the NUL), then the bytes and a NUL (``struct``'s ``s`` pads with zeros)."""
        self.field("I", 4)
        self.parts.append(f"{encoded_length + 1}s")
        self.offset += encoded_length + 1
        return self

    def raw(self, length: int) -> "_Layout":
        """``length`` bytes as they are (the elements of a ``uint8[]``, no alignment)."""
        self.parts.append(f"{length}s")
        self.offset += length
        return self

    def doubles(self, count: int) -> "_Layout":
        """A ``float64[]`` sequence: uint32 count, then the values (aligned to 8 when there are any)."""
        self.field("I", 4)
        return self.field("d", 8, count) if count else self

    def build(self) -> struct.Struct:
        return struct.Struct("".join(self.parts))


def _header(layout: _Layout, frame_length: int) -> _Layout:
    """``std_msgs/Header``: stamp (int32 sec, uint32 nanosec), frame_id."""
    return layout.field("i", 4).field("I", 4).string(frame_length)


@functools.lru_cache(maxsize=256)
def _odometry_struct(frame_length: int, child_length: int) -> struct.Struct:
    # pose: position 3d, orientation 4d, covariance 36d; twist: linear 3d, angular 3d, covariance 36d
    return _header(_Layout(), frame_length).string(child_length).field("d", 8, 85).build()


@functools.lru_cache(maxsize=256)
def _header_then_doubles_struct(frame_length: int, count: int) -> struct.Struct:
    return _header(_Layout(), frame_length).field("d", 8, count).build()


@functools.lru_cache(maxsize=256)
def _joint_state_struct(frame_length: int, name_lengths: tuple[int, ...], counts: tuple[int, int, int]) -> struct.Struct:
    layout = _header(_Layout(), frame_length).field("I", 4)
    for length in name_lengths:
        layout.string(length)
    for count in counts:
        layout.doubles(count)
    return layout.build()


@functools.lru_cache(maxsize=64)
def _float64_array_struct(count: int, label_lengths: tuple[int, ...] = ()) -> struct.Struct:
    # std_msgs/MultiArrayLayout: dim (label, size, stride each), data_offset; then data
    layout = _Layout().field("I", 4)
    for length in label_lengths:
        layout.string(length).field("I", 4, 2)
    return layout.field("I", 4).doubles(count).build()


@functools.lru_cache(maxsize=256)
def _nav_sat_fix_struct(frame_length: int) -> struct.Struct:
    # status: int8 status, uint16 service; latitude, longitude, altitude, covariance 9d; uint8 covariance type
    return (_header(_Layout(), frame_length).field("b", 1).field("H", 2).field("d", 8, 12).field("B", 1)
            .build())


@functools.lru_cache(maxsize=64)
def _point_cloud2_struct(frame_length: int, name_lengths: tuple[int, ...], data_length: int) -> struct.Struct:
    # height, width; fields: name, offset, datatype, count; is_bigendian; point_step, row_step; data; is_dense
    layout = _header(_Layout(), frame_length).field("I", 4, 2).field("I", 4)
    for length in name_lengths:
        layout.string(length).field("I", 4).field("B", 1).field("I", 4)
    return layout.field("?", 1).field("I", 4, 2).field("I", 4).raw(data_length).field("?", 1).build()


@functools.lru_cache(maxsize=64)
def _pose_array_struct(frame_length: int, count: int) -> struct.Struct:
    # poses: uint32 count, then per pose position 3d and orientation 4d
    return _header(_Layout(), frame_length).field("I", 4).field("d", 8, 7 * count).build()


_CLOCK = _Layout().field("i", 4).field("I", 4).build()


def _stamp(stamp_ns: int) -> tuple[int, int]:
    return divmod(int(stamp_ns), 1_000_000_000)


def _packed(what: str, layout: struct.Struct, *values) -> bytes:
    try:
        return layout.pack(CDR_LE_HEADER, *values)
    except struct.error as error:
        raise ValueError(f"{what}: {error}") from None


def encode_odometry(stamp_ns: int, frame_id: str, child_frame_id: str, position, orientation_wxyz,
                    pose_covariance, linear, angular, twist_covariance) -> bytes:
    """``nav_msgs/Odometry`` as CDR bytes (quaternion given ``(w, x, y, z)``; covariances 36 values)."""
    frame, child = frame_id.encode(), child_frame_id.encode()
    w, x, y, z = orientation_wxyz
    sec, nanosec = _stamp(stamp_ns)
    return _packed("odometry", _odometry_struct(len(frame), len(child)), sec, nanosec, len(frame) + 1, frame,
                   len(child) + 1, child, *position, x, y, z, w, *_exactly(36, pose_covariance, "pose covariance"),
                   *linear, *angular, *_exactly(36, twist_covariance, "twist covariance"))


def odometry_encoder(frame_id: str, child_frame_id: str, pose_covariance, twist_covariance):
    """``encode(stamp_ns, position, orientation_wxyz, linear, angular)``: :func:`encode_odometry` for fixed frames
    and covariances, those encoded and checked once (the physics node's odometry, every period). The same
    bytes; a vector of another length raises ``ValueError``."""
    frame, child = frame_id.encode(), child_frame_id.encode()
    pack = _odometry_struct(len(frame), len(child)).pack
    head = (len(frame) + 1, frame, len(child) + 1, child)
    pose = tuple(_exactly(36, pose_covariance, "pose covariance"))
    twist = tuple(_exactly(36, twist_covariance, "twist covariance"))

    def encode(stamp_ns: int, position, orientation_wxyz, linear, angular) -> bytes:
        sec, nanosec = _stamp(stamp_ns)
        (px, py, pz), (w, x, y, z), (vx, vy, vz), (ax, ay, az) = position, orientation_wxyz, linear, angular
        try:
            return pack(CDR_LE_HEADER, sec, nanosec, *head, px, py, pz, x, y, z, w, *pose, vx, vy, vz, ax, ay, az, *twist)
        except struct.error as error:
            raise ValueError(f"odometry: {error}") from None
    return encode


def encode_imu(stamp_ns: int, frame_id: str, orientation_wxyz, orientation_covariance, angular_velocity,
               angular_velocity_covariance, linear_acceleration, linear_acceleration_covariance) -> bytes:
    """``sensor_msgs/Imu`` as CDR bytes (quaternion given ``(w, x, y, z)``; covariances 9 values)."""
    frame = frame_id.encode()
    w, x, y, z = orientation_wxyz
    sec, nanosec = _stamp(stamp_ns)
    values = (x, y, z, w, *_exactly(9, orientation_covariance, "orientation covariance"),
              *_exactly(3, angular_velocity, "angular velocity"),
              *_exactly(9, angular_velocity_covariance, "angular velocity covariance"),
              *_exactly(3, linear_acceleration, "linear acceleration"),
              *_exactly(9, linear_acceleration_covariance, "linear acceleration covariance"))
    return _packed("imu", _header_then_doubles_struct(len(frame), 37), sec, nanosec, len(frame) + 1, frame, *values)


def imu_encoder(frame_id: str):
    """``encode(stamp_ns, orientation_wxyz, orientation_covariance, angular_velocity, angular_velocity_covariance,
    linear_acceleration, linear_acceleration_covariance)``: :func:`encode_imu` for a fixed frame, encoded once
    (the physics node's ground-truth IMU and the IMU node's output, every period). The same bytes; a vector or
    covariance of another length raises ``ValueError``."""
    frame = frame_id.encode()
    pack = _header_then_doubles_struct(len(frame), 37).pack
    head = (len(frame) + 1, frame)

    def encode(stamp_ns: int, orientation_wxyz, orientation_covariance, angular_velocity, angular_velocity_covariance,
               linear_acceleration, linear_acceleration_covariance) -> bytes:
        sec, nanosec = _stamp(stamp_ns)
        (w, x, y, z), (gx, gy, gz), (fx, fy, fz) = orientation_wxyz, angular_velocity, linear_acceleration
        try:
            return pack(CDR_LE_HEADER, sec, nanosec, *head, x, y, z, w,
                        *_exactly(9, orientation_covariance, "orientation covariance"), gx, gy, gz,
                        *_exactly(9, angular_velocity_covariance, "angular velocity covariance"), fx, fy, fz,
                        *_exactly(9, linear_acceleration_covariance, "linear acceleration covariance"))
        except struct.error as error:
            raise ValueError(f"imu: {error}") from None
    return encode


def encode_joint_state(stamp_ns: int, frame_id: str, names, position, velocity, effort) -> bytes:
    """``sensor_msgs/JointState`` as CDR bytes."""
    frame = frame_id.encode()
    encoded_names = [name.encode() for name in names]
    layout = _joint_state_struct(len(frame), tuple(map(len, encoded_names)), (len(position), len(velocity), len(effort)))
    name_fields = [value for name in encoded_names for value in (len(name) + 1, name)]
    sec, nanosec = _stamp(stamp_ns)
    return _packed("joint state", layout, sec, nanosec, len(frame) + 1, frame, len(encoded_names), *name_fields,
                   *_sequence(position), *_sequence(velocity), *_sequence(effort))


def joint_state_encoder(frame_id: str, names, counts: tuple[int, int, int]):
    """``encode(stamp_ns, position, velocity, effort)``: :func:`encode_joint_state` for a fixed frame, joint
    names and sequence lengths ``counts``, with those parts encoded once (a message every lockstep period:
    the physics node's ``rotors``). The same bytes; other lengths raise ``ValueError``."""
    frame = frame_id.encode()
    encoded_names = [name.encode() for name in names]
    layout = _joint_state_struct(len(frame), tuple(map(len, encoded_names)), tuple(counts))
    head = (len(frame) + 1, frame, len(encoded_names), *(v for name in encoded_names for v in (len(name) + 1, name)))

    def encode(stamp_ns: int, position, velocity, effort) -> bytes:
        sec, nanosec = _stamp(stamp_ns)
        return _packed("joint state", layout, sec, nanosec, *head, *_sequence(position), *_sequence(velocity),
                       *_sequence(effort))
    return encode


def encode_clock(stamp_ns: int) -> bytes:
    """``rosgraph_msgs/Clock`` as CDR bytes."""
    return _packed("clock", _CLOCK, *_stamp(stamp_ns))


def encode_float64_array(values, dims=()) -> bytes:
    """``std_msgs/Float64MultiArray`` as CDR bytes: ``dims`` (label, size, stride) each, empty by
    default (no dimensions), data offset 0."""
    labels = [str(label).encode() for label, _, _ in dims]
    dim_values = [v for label, (_, size, stride) in zip(labels, dims) for v in (len(label) + 1, label, size, stride)]
    return _packed("float64 array", _float64_array_struct(len(values), tuple(map(len, labels))), len(labels),
                   *dim_values, 0, *_sequence(values))


def float64_array_encoder(count: int):
    """``encode(values)``: :func:`encode_float64_array` of ``count`` values and no dimensions, its layout built
    once (a flight controller's motor commands, every period). The same bytes; another count raises
    ``ValueError``."""
    pack = _float64_array_struct(count, ()).pack

    def encode(values) -> bytes:
        if len(values) != count:
            raise ValueError(f"float64 array: expected {count} values, got {len(values)}")
        try:
            return pack(CDR_LE_HEADER, 0, 0, count, *values)
        except struct.error as error:
            raise ValueError(f"float64 array: {error}") from None
    return encode


@functools.lru_cache(maxsize=64)
def _header_struct(frame_length: int) -> struct.Struct:
    return _header(_Layout(), frame_length).build()


def encode_header(stamp_ns: int, frame_id: str) -> bytes:
    """``std_msgs/Header`` as CDR bytes (a lockstep participant's progress stamps)."""
    frame = frame_id.encode()
    sec, nanosec = _stamp(stamp_ns)
    return _packed("header", _header_struct(len(frame)), sec, nanosec, len(frame) + 1, frame)


def encode_fluid_pressure(stamp_ns: int, frame_id: str, fluid_pressure: float, variance: float) -> bytes:
    """``sensor_msgs/FluidPressure`` (Pa) as CDR bytes."""
    frame = frame_id.encode()
    sec, nanosec = _stamp(stamp_ns)
    return _packed("fluid pressure", _header_then_doubles_struct(len(frame), 2), sec, nanosec, len(frame) + 1, frame,
                   fluid_pressure, variance)


def encode_magnetic_field(stamp_ns: int, frame_id: str, field, covariance) -> bytes:
    """``sensor_msgs/MagneticField`` (T) as CDR bytes."""
    frame = frame_id.encode()
    sec, nanosec = _stamp(stamp_ns)
    return _packed("magnetic field", _header_then_doubles_struct(len(frame), 12), sec, nanosec, len(frame) + 1,
                   frame, *_exactly(3, field, "magnetic field"), *_exactly(9, covariance, "covariance"))


def encode_twist_stamped(stamp_ns: int, frame_id: str, linear, angular) -> bytes:
    """``geometry_msgs/TwistStamped`` as CDR bytes."""
    frame = frame_id.encode()
    sec, nanosec = _stamp(stamp_ns)
    return _packed("twist", _header_then_doubles_struct(len(frame), 6), sec, nanosec, len(frame) + 1, frame,
                   *_exactly(3, linear, "linear"), *_exactly(3, angular, "angular"))


def encode_pose_stamped(stamp_ns: int, frame_id: str, position, orientation_wxyz) -> bytes:
    """``geometry_msgs/PoseStamped`` as CDR bytes (quaternion given ``(w, x, y, z)``)."""
    frame = frame_id.encode()
    w, x, y, z = _exactly(4, orientation_wxyz, "orientation")
    sec, nanosec = _stamp(stamp_ns)
    return _packed("pose", _header_then_doubles_struct(len(frame), 7), sec, nanosec, len(frame) + 1, frame,
                   *_exactly(3, position, "position"), x, y, z, w)


def encode_vector3_stamped(stamp_ns: int, frame_id: str, vector) -> bytes:
    """``geometry_msgs/Vector3Stamped`` as CDR bytes."""
    frame = frame_id.encode()
    sec, nanosec = _stamp(stamp_ns)
    return _packed("vector3", _header_then_doubles_struct(len(frame), 3), sec, nanosec, len(frame) + 1, frame,
                   *_exactly(3, vector, "vector"))


def encode_nav_sat_fix(stamp_ns: int, frame_id: str, status: int, service: int, latitude: float, longitude: float,
                       altitude: float, covariance, covariance_type: int) -> bytes:
    """``sensor_msgs/NavSatFix`` as CDR bytes."""
    frame = frame_id.encode()
    sec, nanosec = _stamp(stamp_ns)
    return _packed("navsat fix", _nav_sat_fix_struct(len(frame)), sec, nanosec, len(frame) + 1, frame, status,
                   service, latitude, longitude, altitude, *_exactly(9, covariance, "position covariance"),
                   covariance_type)


def encode_pose_array(stamp_ns: int, frame_id: str, positions, orientations_wxyz) -> bytes:
    """``geometry_msgs/PoseArray`` as CDR bytes (one position and one ``(w, x, y, z)`` quaternion per pose)."""
    frame = frame_id.encode()
    if len(positions) != len(orientations_wxyz):
        raise ValueError(f"pose array: {len(positions)} positions for {len(orientations_wxyz)} orientations")
    values = [v for p, (w, x, y, z) in zip(positions, orientations_wxyz) for v in (*_exactly(3, p, "position"), x, y, z, w)]
    sec, nanosec = _stamp(stamp_ns)
    return _packed("pose array", _pose_array_struct(len(frame), len(positions)), sec, nanosec, len(frame) + 1, frame,
                   len(positions), *values)


def encode_point_cloud2(stamp_ns: int, frame_id: str, height: int, width: int, fields, is_bigendian: bool,
                        point_step: int, row_step: int, data: bytes, is_dense: bool) -> bytes:
    """``sensor_msgs/PointCloud2`` as CDR bytes; ``fields``: (name, offset, datatype, count) each."""
    frame = frame_id.encode()
    names = [str(f[0]).encode() for f in fields]
    layout = _point_cloud2_struct(len(frame), tuple(map(len, names)), len(data))
    field_values = [v for name, (_, offset, datatype, count) in zip(names, fields)
                    for v in (len(name) + 1, name, offset, datatype, count)]
    sec, nanosec = _stamp(stamp_ns)
    return _packed("point cloud", layout, sec, nanosec, len(frame) + 1, frame, height, width, len(names), *field_values,
                   is_bigendian, point_step, row_step, len(data), bytes(data), is_dense)


@functools.lru_cache(maxsize=256)
def _diagnostic_array_struct(frame_length: int, statuses: tuple[tuple[int, ...], ...]) -> struct.Struct:
    # status[]: per status uint8 level, strings name, message, hardware_id, then values[]: key, value strings
    layout = _header(_Layout(), frame_length).field("I", 4)
    for name, message, hardware_id, *pairs in statuses:
        layout.field("B", 1).string(name).string(message).string(hardware_id).field("I", 4)
        for length in pairs:
            layout.string(length)
    return layout.build()


def encode_diagnostic_array(stamp_ns: int, frame_id: str, statuses) -> bytes:
    """``diagnostic_msgs/DiagnosticArray`` as CDR bytes; ``statuses``: (level, name, message, hardware_id,
    ((key, value), ...)) each, ``level`` an int or rclpy's one byte (``DiagnosticStatus.OK``). The padding after each status's ``level`` byte is zero here; rclpy leaves
    it as its buffer held it, so the same diagnostics would differ in three bytes between two runs."""
    frame = frame_id.encode()
    encoded = [(level[0] if isinstance(level, (bytes, bytearray)) else int(level), *(str(text).encode() for text in (name, message, hardware_id)),
                tuple(str(text).encode() for pair in values for text in pair))
               for level, name, message, hardware_id, values in statuses]
    layout = _diagnostic_array_struct(len(frame), tuple((len(n), len(m), len(h), *map(len, kv))
                                                        for _, n, m, h, kv in encoded))
    fields = []
    for level, name, message, hardware_id, texts in encoded:
        fields += [level, *(v for text in (name, message, hardware_id) for v in (len(text) + 1, text)), len(texts) // 2]
        fields += [v for text in texts for v in (len(text) + 1, text)]
    sec, nanosec = _stamp(stamp_ns)
    return _packed("diagnostic array", layout, sec, nanosec, len(frame) + 1, frame, len(encoded), *fields)


@functools.lru_cache(maxsize=64)
def _battery_state_struct(frame_length: int, cells: tuple[int, int], texts: tuple[int, int]) -> struct.Struct:
    # 7 float32, uint8 status, health, technology, bool present, float32[] voltages, temperatures, 2 strings
    layout = _header(_Layout(), frame_length).field("f", 4, 7).field("B", 1, 3).field("?", 1)
    for count in cells:
        layout.field("I", 4)
        if count:
            layout.field("f", 4, count)
    return layout.string(texts[0]).string(texts[1]).build()


def encode_battery_state_of(message) -> bytes:
    """``sensor_msgs/BatteryState`` as CDR bytes, from a typed one (rclpy's, or any with its fields). The
    padding after ``location`` is zero here; rclpy leaves it as its buffer held it (issue 32)."""
    stamp, m = message.header.stamp, message
    frame, location, serial = (text.encode() for text in (m.header.frame_id, m.location, m.serial_number))
    layout = _battery_state_struct(len(frame), (len(m.cell_voltage), len(m.cell_temperature)),
                                   (len(location), len(serial)))
    return _packed("battery state", layout, stamp.sec, stamp.nanosec, len(frame) + 1, frame, m.voltage, m.temperature,
                   m.current, m.charge, m.capacity, m.design_capacity, m.percentage, m.power_supply_status,
                   m.power_supply_health, m.power_supply_technology, bool(m.present), *_sequence(m.cell_voltage),
                   *_sequence(m.cell_temperature), len(location) + 1, location, len(serial) + 1, serial)


def encode_diagnostics_of(message) -> bytes:
    """:func:`encode_diagnostic_array` of a typed ``DiagnosticArray`` (rclpy's, or any with its fields)."""
    stamp = message.header.stamp
    return encode_diagnostic_array(
        stamp.sec * 1_000_000_000 + stamp.nanosec, message.header.frame_id,
        [(s.level, s.name, s.message, s.hardware_id, tuple((kv.key, kv.value) for kv in s.values))
         for s in message.status])


def _exactly(count: int, values, what: str):
    if len(values) != count:
        raise ValueError(f"{what}: expected {count} values, got {len(values)}")
    return values


def _sequence(values) -> tuple:
    return (len(values), *values)


@functools.lru_cache(maxsize=64)
def _image_head_struct(frame_length: int, encoding_length: int) -> struct.Struct:
    # height, width; encoding; uint8 is_bigendian; uint32 step; data: uint32 count (the bytes follow, unaligned)
    return _header(_Layout(), frame_length).field("I", 4, 2).string(encoding_length).field("B", 1).field("I", 4, 2).build()


def encode_image(stamp_ns: int, frame_id: str, height: int, width: int, encoding: str, is_bigendian: bool, step: int,
                 data) -> bytes:
    """``sensor_msgs/Image`` as CDR bytes; ``data``: anything with the buffer protocol (bytes, a C-contiguous numpy
    array), copied once. The three padding bytes after ``is_bigendian`` are zero here; rclpy leaves them as its
    buffer held them (issue 32)."""
    frame, coding = frame_id.encode(), encoding.encode()
    pixels = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else data
    sec, nanosec = _stamp(stamp_ns)
    head = _packed("image", _image_head_struct(len(frame), len(coding)), sec, nanosec, len(frame) + 1, frame, height,
                   width, len(coding) + 1, coding, int(bool(is_bigendian)), step, len(pixels))
    return b"".join((head, pixels))


def encode_image_array(stamp_ns: int, frame_id: str, array, encoding: str) -> bytes:
    """:func:`encode_image` of a numpy image ``array`` (rows first, as numpy lays it out; little-endian)."""
    import numpy as np  # noqa: PLC0415 - the other encoders need no numpy

    array = np.ascontiguousarray(array)
    if array.ndim < 2:
        raise ValueError(f"image: expected rows and columns, got shape {array.shape}")
    return encode_image(stamp_ns, frame_id, array.shape[0], array.shape[1], encoding,
                        array.dtype.byteorder == ">", array.strides[0], array)


@functools.lru_cache(maxsize=64)
def _camera_info_struct(frame_length: int, model_length: int, d_count: int) -> struct.Struct:
    # height, width; distortion_model; d[]; k[9], r[9], p[12]; binning x, y; roi: x/y offset, height, width, do_rectify
    return (_header(_Layout(), frame_length).field("I", 4, 2).string(model_length).doubles(d_count).field("d", 8, 30)
            .field("I", 4, 2).field("I", 4, 4).field("?", 1).build())


def encode_camera_info_of(message) -> bytes:
    """``sensor_msgs/CameraInfo`` as CDR bytes, from a typed one (rclpy's, or any with its fields). The padding
    before ``k`` (when ``d`` leaves it unaligned) is zero here."""
    stamp, m = message.header.stamp, message
    frame, model = m.header.frame_id.encode(), m.distortion_model.encode()
    roi = m.roi
    return _packed("camera info", _camera_info_struct(len(frame), len(model), len(m.d)), stamp.sec, stamp.nanosec,
                   len(frame) + 1, frame, m.height, m.width, len(model) + 1, model, *_sequence(m.d),
                   *_exactly(9, m.k, "k"), *_exactly(9, m.r, "r"), *_exactly(12, m.p, "p"), m.binning_x, m.binning_y,
                   roi.x_offset, roi.y_offset, roi.height, roi.width, bool(roi.do_rectify))


@functools.lru_cache(maxsize=64)
def _range_struct(frame_length: int) -> struct.Struct:
    # uint8 radiation_type; float32 field_of_view, min_range, max_range, range, variance
    return _header(_Layout(), frame_length).field("B", 1).field("f", 4, 5).build()


def encode_range(stamp_ns: int, frame_id: str, radiation_type: int, field_of_view: float, min_range: float,
                 max_range: float, range_m: float, variance: float) -> bytes:
    """``sensor_msgs/Range`` as CDR bytes; the padding after ``radiation_type`` is zero here (rclpy: whatever its
    buffer held)."""
    frame = frame_id.encode()
    sec, nanosec = _stamp(stamp_ns)
    kind = radiation_type[0] if isinstance(radiation_type, (bytes, bytearray)) else int(radiation_type)
    return _packed("range", _range_struct(len(frame)), sec, nanosec, len(frame) + 1, frame, kind, field_of_view,
                   min_range, max_range, range_m, variance)
