"""Reading ground-truth messages straight from CDR bytes (aerial_sim.cdr.decode): the same values rclpy
deserializes, for either byte order, and a ValueError (never a crash) for bytes that are not one.

The reference is rclpy's own ``serialize_message``; big-endian bytes come from a small CDR writer
here, checked first to write exactly rclpy's little-endian bytes.
"""

from __future__ import annotations

import math
import random
import struct

import pytest
from conftest import requires_ros

from aerial_sim.cdr.decode import (
    OdometryFields,
    cdr_header_stamp_ns,
    decode_image,
    decode_imu,
    decode_joint_state,
    decode_odometry,
)
from aerial_sim.cdr.encode import (
    encode_clock,
    encode_float64_array,
    encode_fluid_pressure,
    encode_header,
    encode_imu,
    encode_joint_state,
    joint_state_encoder,
    encode_magnetic_field,
    encode_nav_sat_fix,
    encode_odometry,
    encode_twist_stamped,
    encode_vector3_stamped,
    float64_array_encoder,
    imu_encoder,
    odometry_encoder,
)
from aerial_sim.sensors.truth import truth_from_odometry


class CdrWriter:
    """XCDR1 bytes of a plain ROS message, in either byte order (alignment from the payload start)."""

    def __init__(self, order: str):
        self.order = order
        self.payload = bytearray()
        self.padding: list[int] = []  # payload offsets of alignment bytes (rclpy leaves them uninitialised)

    def align(self, size: int) -> None:
        count = -len(self.payload) % size
        self.padding += range(len(self.payload), len(self.payload) + count)
        self.payload += b"\0" * count

    def u32(self, value: int) -> None:
        self.align(4)
        self.payload += struct.pack(self.order + "I", value)

    def header(self, sec: int, nanosec: int, frame_id: str) -> None:
        self.align(4)
        self.payload += struct.pack(self.order + "iI", sec, nanosec)
        self.string(frame_id)

    def string(self, text: str) -> None:
        data = text.encode() + b"\0"
        self.u32(len(data))
        self.payload += data

    def doubles(self, values) -> None:
        if values:
            self.align(8)
            self.payload += struct.pack(f"{self.order}{len(values)}d", *values)

    def bytes(self) -> bytes:
        return (b"\0\1" if self.order == "<" else b"\0\0") + b"\0\0" + bytes(self.payload)

    def matches(self, data: bytes) -> bool:
        """True when ``data`` starts with what this writer wrote, alignment bytes aside (rclpy's
        bytes may go on after the message: a few bytes of whatever the buffer held, 12 seen)."""
        payload = bytearray(data[4:4 + len(self.payload)])
        for offset in self.padding:
            payload[offset] = 0
        return data[:4] == self.bytes()[:4] and payload == self.payload and len(data) - len(self.bytes()) <= 16


def random_text(rng: random.Random, length: int) -> str:
    return "".join(rng.choice("abcxyz_/019") for _ in range(length))


def random_odometry(rng: random.Random, frame_length: int, child_length: int):
    from nav_msgs.msg import Odometry

    message = Odometry()
    message.header.stamp.sec, message.header.stamp.nanosec = rng.randrange(-2**31, 2**31), rng.randrange(10**9)
    message.header.frame_id = random_text(rng, frame_length)
    message.child_frame_id = random_text(rng, child_length)
    pose, twist = message.pose, message.twist
    p, q, v, w = pose.pose.position, pose.pose.orientation, twist.twist.linear, twist.twist.angular
    p.x, p.y, p.z, q.x, q.y, q.z, q.w, v.x, v.y, v.z, w.x, w.y, w.z = (rng.uniform(-1e3, 1e3) for _ in range(13))
    pose.covariance = [rng.random() for _ in range(36)]
    twist.covariance = [rng.random() for _ in range(36)]
    return message


def odometry_writer(message, order: str) -> CdrWriter:
    writer = CdrWriter(order)
    writer.header(message.header.stamp.sec, message.header.stamp.nanosec, message.header.frame_id)
    writer.string(message.child_frame_id)
    p, q = message.pose.pose.position, message.pose.pose.orientation
    v, w = message.twist.twist.linear, message.twist.twist.angular
    writer.doubles([p.x, p.y, p.z, q.x, q.y, q.z, q.w, *message.pose.covariance])
    writer.doubles([v.x, v.y, v.z, w.x, w.y, w.z, *message.twist.covariance])
    return writer


def random_imu(rng: random.Random, frame_length: int):
    from sensor_msgs.msg import Imu

    message = Imu()
    message.header.stamp.sec, message.header.stamp.nanosec = rng.randrange(2**31), rng.randrange(10**9)
    message.header.frame_id = random_text(rng, frame_length)
    for vector in (message.orientation, message.angular_velocity, message.linear_acceleration):
        for axis in "xyz":
            setattr(vector, axis, rng.uniform(-50.0, 50.0))
    message.orientation.w = rng.uniform(-1.0, 1.0)
    message.orientation_covariance = [rng.random() for _ in range(9)]
    message.angular_velocity_covariance = [rng.random() for _ in range(9)]
    message.linear_acceleration_covariance = [rng.random() for _ in range(9)]
    return message


def imu_writer(message, order: str) -> CdrWriter:
    writer = CdrWriter(order)
    writer.header(message.header.stamp.sec, message.header.stamp.nanosec, message.header.frame_id)
    q = message.orientation
    writer.doubles([q.x, q.y, q.z, q.w, *message.orientation_covariance])
    for vector, covariance in ((message.angular_velocity, message.angular_velocity_covariance),
                               (message.linear_acceleration, message.linear_acceleration_covariance)):
        writer.doubles([vector.x, vector.y, vector.z, *covariance])
    return writer


def random_joint_state(rng: random.Random, frame_length: int):
    from sensor_msgs.msg import JointState

    message = JointState()
    message.header.stamp.sec, message.header.stamp.nanosec = rng.randrange(2**31), rng.randrange(10**9)
    message.header.frame_id = random_text(rng, frame_length)
    count = rng.randrange(6)
    message.name = [random_text(rng, rng.randrange(7)) for _ in range(count)]
    message.position = [rng.uniform(-5.0, 5.0) for _ in range(rng.choice((0, count)))]
    message.velocity = [rng.uniform(0.0, 2000.0) for _ in range(count)]
    message.effort = [rng.uniform(0.0, 20.0) for _ in range(rng.choice((0, count)))]
    return message


def joint_state_writer(message, order: str) -> CdrWriter:
    writer = CdrWriter(order)
    writer.header(message.header.stamp.sec, message.header.stamp.nanosec, message.header.frame_id)
    writer.u32(len(message.name))
    for name in message.name:
        writer.string(name)
    for values in (message.position, message.velocity, message.effort):
        writer.u32(len(values))
        writer.doubles(list(values))
    return writer


def expected_odometry(message) -> OdometryFields:
    return OdometryFields.from_message(message)


@requires_ros
@pytest.mark.parametrize("order", ["<", ">"])
def test_odometry_decodes_to_rclpys_values_for_every_string_alignment_and_both_byte_orders(order):
    from rclpy.serialization import deserialize_message, serialize_message
    from nav_msgs.msg import Odometry

    rng = random.Random(11)
    for frame_length in range(10):
        for child_length in range(10):
            message = random_odometry(rng, frame_length, child_length)
            data = serialize_message(message)
            assert odometry_writer(message, "<").matches(data)  # the writer writes what rclpy writes
            if order == ">":
                data = odometry_writer(message, ">").bytes()
            decoded = decode_odometry(data)
            assert decoded == expected_odometry(deserialize_message(serialize_message(message), Odometry))
            assert decoded.stamp_ns == message.header.stamp.sec * 10**9 + message.header.stamp.nanosec
            assert cdr_header_stamp_ns(data) == decoded.stamp_ns


@requires_ros
@pytest.mark.parametrize("order", ["<", ">"])
def test_imu_and_joint_state_decode_to_rclpys_values_in_both_byte_orders(order):
    from rclpy.serialization import serialize_message

    rng = random.Random(14)
    for frame_length in range(10):
        imu = random_imu(rng, frame_length)
        data = serialize_message(imu)
        assert imu_writer(imu, "<").matches(data)
        decoded = decode_imu(imu_writer(imu, order).bytes() if order == ">" else data)
        q = imu.orientation
        assert decoded.time_s == imu.header.stamp.sec + imu.header.stamp.nanosec * 1e-9
        assert decoded.frame_id == imu.header.frame_id
        assert decoded.orientation_wxyz == (q.w, q.x, q.y, q.z)
        assert decoded.angular_velocity == (imu.angular_velocity.x, imu.angular_velocity.y, imu.angular_velocity.z)
        assert decoded.linear_acceleration == (imu.linear_acceleration.x, imu.linear_acceleration.y,
                                               imu.linear_acceleration.z)
        assert decoded.orientation_covariance == tuple(imu.orientation_covariance)
        assert decoded.angular_velocity_covariance == tuple(imu.angular_velocity_covariance)
        assert decoded.linear_acceleration_covariance == tuple(imu.linear_acceleration_covariance)

        joints = random_joint_state(rng, frame_length)
        data = serialize_message(joints)
        assert joint_state_writer(joints, "<").matches(data)
        decoded = decode_joint_state(joint_state_writer(joints, order).bytes() if order == ">" else data)
        assert (decoded.stamp_sec, decoded.stamp_nanosec) == (joints.header.stamp.sec, joints.header.stamp.nanosec)
        assert decoded.name == tuple(joints.name)
        assert decoded.position == tuple(joints.position)
        assert decoded.velocity == tuple(joints.velocity)
        assert decoded.effort == tuple(joints.effort)


@requires_ros
def test_nan_is_passed_on_and_the_truth_of_decoded_odometry_equals_the_typed_messages():
    from rclpy.serialization import serialize_message

    rng = random.Random(3)
    message = random_odometry(rng, 3, 16)
    message.pose.pose.orientation.w, message.pose.pose.orientation.x = 0.8, 0.6
    message.pose.pose.orientation.y = message.pose.pose.orientation.z = 0.0
    message.pose.pose.position.x = message.pose.pose.position.y = 5.0
    message.twist.twist.linear.x = 7.5
    message.twist.twist.angular.z = 1.25
    decoded = decode_odometry(serialize_message(message))
    assert truth_from_odometry(decoded) == truth_from_odometry(message)  # the models' inputs, bit for bit
    message.twist.twist.linear.y = math.nan
    decoded = decode_odometry(serialize_message(message))
    assert math.isnan(decoded.linear_velocity[1])
    assert truth_from_odometry(decoded) is None


@requires_ros
def test_every_truncation_and_a_foreign_encapsulation_raise_value_error():
    from sensor_msgs.msg import JointState

    rng = random.Random(5)
    rotors = JointState(name=["rotor_0", "rotor_1"], position=[0.5, 1.5], velocity=[800.0, 810.0], effort=[4.0, 4.1])
    cases = [
        (decode_odometry, odometry_writer(random_odometry(rng, 5, 16), "<").bytes()),
        (decode_imu, imu_writer(random_imu(rng, 8), ">").bytes()),
        (decode_joint_state, joint_state_writer(rotors, "<").bytes()),
    ]
    for decode, data in cases:
        decode(data)
        for length in range(len(data)):
            with pytest.raises(ValueError):
                decode(data[:length])
        for encapsulation in (b"\x00\x02", b"\x00\x03", b"\x00\x07", b"\x01\x01", b"\xff\xff"):
            with pytest.raises(ValueError, match="encapsulation"):
                decode(encapsulation + data[2:])
    odometry = cases[0][1]
    too_long = odometry[:12] + struct.pack("<I", 10**6) + odometry[16:]
    with pytest.raises(ValueError, match="past the end"):
        decode_odometry(too_long)
    with pytest.raises(ValueError):  # a frame id that is no UTF-8
        decode_odometry(odometry[:16] + b"\xff" + odometry[17:])


@requires_ros
def test_a_stream_whose_frames_change_decodes_each_message_by_its_own_frames_and_refuses_a_bad_one():
    """The decoders keep the last message's layout (its frame ids' bytes): a message with other frame ids, the
    other byte order, a bad string or a truncated body after a good one is read (or refused) on its own."""
    rng = random.Random(8)
    odometries = [odometry_writer(random_odometry(rng, frame, child), order).bytes()
                  for frame, child, order in ((3, 16, "<"), (3, 16, "<"), (4, 1, "<"), (4, 1, ">"), (0, 0, "<"))]
    imus = [imu_writer(random_imu(rng, frame), order).bytes() for frame, order in ((8, "<"), (8, "<"), (2, ">"), (9, "<"))]
    for decode, stream in ((decode_odometry, odometries), (decode_imu, imus)):
        expected = [decode(data) for data in stream]
        for _ in range(3):  # each message after each other one
            for index in rng.sample(range(len(stream)), len(stream)):
                assert decode(stream[index]) == expected[index]
                with pytest.raises(ValueError):
                    decode(stream[index][:-1])
                with pytest.raises(ValueError):
                    decode(stream[index][:16] + b"\xff" + stream[index][17:])


def test_kept_odometry_imu_and_command_encoders_write_the_same_bytes_and_refuse_wrong_sizes():
    rng = random.Random(9)
    covariance36, covariance9 = [rng.uniform(-1, 1) for _ in range(36)], [rng.uniform(-1, 1) for _ in range(9)]
    odometry, imu = odometry_encoder("map", "drone1/base_link", covariance36, covariance36), imu_encoder("drone1/imu_link")
    for _ in range(50):
        stamp = rng.randrange(2**40)
        v = [rng.uniform(-1e3, 1e3) for _ in range(16)]
        assert odometry(stamp, v[0:3], v[3:7], v[7:10], v[10:13]) == encode_odometry(
            stamp, "map", "drone1/base_link", v[0:3], v[3:7], covariance36, v[7:10], v[10:13], covariance36)
        assert imu(stamp, v[3:7], covariance9, v[0:3], covariance9, v[7:10], covariance9) == encode_imu(
            stamp, "drone1/imu_link", v[3:7], covariance9, v[0:3], covariance9, v[7:10], covariance9)
    with pytest.raises(ValueError):
        odometry(5, (0.0, 0.0), (1.0, 0.0, 0.0, 0.0), (0.0,) * 3, (0.0,) * 3)
    with pytest.raises(ValueError, match="orientation covariance"):
        imu(5, (1.0, 0.0, 0.0, 0.0), [0.0] * 8, (0.0,) * 3, [0.0] * 9, (0.0,) * 3, [0.0] * 9)
    with pytest.raises(ValueError, match="twist covariance"):
        odometry_encoder("map", "base_link", covariance36, covariance36[:35])
    commands = float64_array_encoder(6)
    for _ in range(20):
        controls = tuple(rng.uniform(0.0, 1.0) for _ in range(6))
        assert commands(controls) == encode_float64_array(controls)
    with pytest.raises(ValueError, match="expected 6"):
        commands((0.5,) * 4)


def test_the_header_stamp_reader_stays_lenient():
    stamp = struct.pack("<iI", 12, 345_678_901)
    assert cdr_header_stamp_ns(b"\x00\x01\x00\x00" + stamp) == 12_345_678_901
    assert cdr_header_stamp_ns(b"\x00\x01\x00\x00" + stamp[:7]) is None


@requires_ros
def test_a_raw_subscription_reports_undecodable_bytes_through_the_input_guard(ros_node):
    from rclpy.serialization import serialize_message

    from aerial_sim.nodes.ros.input_guard import InputGuard
    from aerial_sim.nodes.ros.qos import stream_qos
    from aerial_sim.nodes.ros.subscriptions import subscribe_odometry

    received, warnings = [], []
    subscription = subscribe_odometry(ros_node, "/drone1/ground_truth/odom", received.append, stream_qos())
    guard = InputGuard(ros_node)
    guard.report = lambda topic, type_name, error: warnings.append((topic, type_name, str(error)))
    guard.guard_all()
    good = serialize_message(random_odometry(random.Random(1), 3, 16))
    subscription.callback(good[:100])
    subscription.callback(good)
    assert received == [decode_odometry(good)]
    assert len(warnings) == 1 and warnings[0][:2] == ("/drone1/ground_truth/odom", "Odometry")
    assert "truncated" in warnings[0][2]


# --------------------------------------------------------------------------- writing


def stamp_ns(header) -> int:
    return header.stamp.sec * 10**9 + header.stamp.nanosec


def ours_and_rclpys(encoded: bytes, writer: CdrWriter, message) -> None:
    """Our bytes are the checked writer's (zero padding) and rclpy's alignment bytes aside; they read back equal."""
    from rclpy.serialization import deserialize_message, serialize_message

    assert encoded == writer.bytes()
    assert writer.matches(serialize_message(message))
    assert deserialize_message(encoded, type(message)) == message


@requires_ros
def test_encoded_odometry_imu_and_joint_states_are_rclpys_bytes_for_every_string_alignment():
    rng = random.Random(21)
    for frame_length in range(10):
        for child_length in range(10):
            m = random_odometry(rng, frame_length, child_length)
            p, q, v, w = m.pose.pose.position, m.pose.pose.orientation, m.twist.twist.linear, m.twist.twist.angular
            encoded = encode_odometry(stamp_ns(m.header), m.header.frame_id, m.child_frame_id, (p.x, p.y, p.z),
                                      (q.w, q.x, q.y, q.z), m.pose.covariance, (v.x, v.y, v.z), (w.x, w.y, w.z),
                                      m.twist.covariance)
            ours_and_rclpys(encoded, odometry_writer(m, "<"), m)
        imu = random_imu(rng, frame_length)
        q, g, a = imu.orientation, imu.angular_velocity, imu.linear_acceleration
        encoded = encode_imu(stamp_ns(imu.header), imu.header.frame_id, (q.w, q.x, q.y, q.z), imu.orientation_covariance,
                             (g.x, g.y, g.z), imu.angular_velocity_covariance, (a.x, a.y, a.z),
                             imu.linear_acceleration_covariance)
        ours_and_rclpys(encoded, imu_writer(imu, "<"), imu)
        for _ in range(4):  # 0..5 names of 0..6 characters, position and effort empty or full
            joints = random_joint_state(rng, frame_length)
            encoded = encode_joint_state(stamp_ns(joints.header), joints.header.frame_id, joints.name,
                                         joints.position, joints.velocity, joints.effort)
            ours_and_rclpys(encoded, joint_state_writer(joints, "<"), joints)
            counts = (len(joints.position), len(joints.velocity), len(joints.effort))
            encoder = joint_state_encoder(joints.header.frame_id, joints.name, counts)  # the physics node's rotors
            assert encoder(stamp_ns(joints.header), joints.position, joints.velocity, joints.effort) == encoded


@requires_ros
def test_encoded_sensor_clock_and_command_messages_read_back_as_rclpys():
    from rclpy.serialization import deserialize_message, serialize_message
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import FluidPressure, MagneticField, NavSatFix
    from geometry_msgs.msg import TwistStamped, Vector3Stamped
    from std_msgs.msg import Float64MultiArray, Header

    rng = random.Random(8)
    for frame_length in range(10):
        frame = random_text(rng, frame_length)
        stamp = rng.randrange(2**31) * 10**9 + rng.randrange(10**9)
        pressure = FluidPressure(fluid_pressure=rng.uniform(9e4, 1.1e5), variance=rng.random())
        magnetic = MagneticField(magnetic_field_covariance=[rng.random() for _ in range(9)])
        magnetic.magnetic_field.x, magnetic.magnetic_field.y, magnetic.magnetic_field.z = (rng.uniform(-1e-4, 1e-4)
                                                                                           for _ in range(3))
        fix = NavSatFix(latitude=rng.uniform(-90, 90), longitude=rng.uniform(-180, 180), altitude=rng.uniform(-10, 9e3),
                        position_covariance=[rng.random() for _ in range(9)], position_covariance_type=2)
        fix.status.status, fix.status.service = rng.choice((-1, 0, 2)), 1
        twist = TwistStamped()
        linear, angular = twist.twist.linear, twist.twist.angular
        linear.x, linear.y, linear.z, angular.x, angular.y, angular.z = (rng.uniform(-20, 20) for _ in range(6))
        wind = Vector3Stamped()
        wind.vector.x, wind.vector.y, wind.vector.z = (rng.uniform(-30, 30) for _ in range(3))
        for message in (pressure, magnetic, fix, twist, wind):
            message.header.frame_id = frame
            message.header.stamp.sec, message.header.stamp.nanosec = divmod(stamp, 10**9)
        f = magnetic.magnetic_field
        encoded = [
            (encode_fluid_pressure(stamp, frame, pressure.fluid_pressure, pressure.variance), pressure),
            (encode_magnetic_field(stamp, frame, (f.x, f.y, f.z), magnetic.magnetic_field_covariance), magnetic),
            (encode_nav_sat_fix(stamp, frame, fix.status.status, fix.status.service, fix.latitude, fix.longitude,
                                fix.altitude, fix.position_covariance, fix.position_covariance_type), fix),
            (encode_twist_stamped(stamp, frame, (linear.x, linear.y, linear.z), (angular.x, angular.y, angular.z)),
             twist),
            (encode_vector3_stamped(stamp, frame, (wind.vector.x, wind.vector.y, wind.vector.z)), wind),
            (encode_clock(stamp), Clock(clock=pressure.header.stamp)),
            (encode_header(stamp, frame), Header(stamp=pressure.header.stamp, frame_id=frame)),
            (encode_float64_array([rng.random() for _ in range(frame_length)]), None),
        ]
        encoded[-1] = (encoded[-1][0], deserialize_message(encoded[-1][0], Float64MultiArray))
        assert len(encoded[-1][1].data) == frame_length and not encoded[-1][1].layout.dim
        for data, message in encoded:
            assert deserialize_message(data, type(message)) == message
            assert len(data) <= len(serialize_message(message)) <= len(data) + 16  # rclpy may append a few bytes


@requires_ros
def test_encoders_pass_nan_and_infinity_on_and_refuse_wrong_sizes_with_value_error():
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import Imu

    special = (math.nan, math.inf, -0.0)
    data = encode_imu(5, "imu_link", (1.0, 0.0, 0.0, 0.0), [0.0] * 9, special, [0.0] * 9, (1e308, -1e308, 0.0), [0.0] * 9)
    decoded = deserialize_message(data, Imu)
    assert math.isnan(decoded.angular_velocity.x) and decoded.angular_velocity.y == math.inf
    assert math.copysign(1.0, decoded.angular_velocity.z) == -1.0 and decoded.linear_acceleration.x == 1e308
    assert decode_imu(data).angular_velocity[1] == math.inf
    with pytest.raises(ValueError, match="orientation covariance"):
        encode_imu(5, "imu_link", (1.0, 0.0, 0.0, 0.0), [0.0] * 8, (0.0,) * 3, [0.0] * 9, (0.0,) * 3, [0.0] * 9)
    with pytest.raises(ValueError, match="odometry"):
        encode_odometry(5, "map", "base_link", (0.0, 0.0), (1.0, 0.0, 0.0, 0.0), [0.0] * 36, (0.0,) * 3, (0.0,) * 3,
                        [0.0] * 36)
    with pytest.raises(ValueError, match="joint state"):
        encode_joint_state(5, "", ["rotor_0"], [], [1.0], ["not a number"])


@requires_ros
def test_point_clouds_pose_arrays_and_multi_arrays_with_dimensions_are_rclpys_messages_both_ways():
    """The three layouts the fleet's one-message link uses (/swarm/state, /swarm/poses, /swarm/motor_commands)."""
    from geometry_msgs.msg import Pose, PoseArray
    from rclpy.serialization import deserialize_message, serialize_message
    from sensor_msgs.msg import PointCloud2, PointField
    from std_msgs.msg import Float64MultiArray, MultiArrayDimension

    from aerial_sim.cdr.decode import decode_float64_array, decode_point_cloud2
    from aerial_sim.cdr.encode import encode_float64_array, encode_point_cloud2, encode_pose_array

    rng = random.Random(14)
    for frame_length in range(6):
        frame = random_text(rng, frame_length)
        stamp = rng.randrange(2**31) * 10**9 + rng.randrange(10**9)
        names = [random_text(rng, rng.randrange(1, 6)) for _ in range(rng.randrange(4))]
        fields = [(name, 8 * i, rng.choice((2, 7, 8)), 1) for i, name in enumerate(names)]
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        cloud = PointCloud2(height=1, width=len(data), is_bigendian=rng.random() < 0.5, point_step=rng.randrange(99),
                            row_step=rng.randrange(999), data=data, is_dense=rng.random() < 0.5,
                            fields=[PointField(name=n, offset=o, datatype=d, count=c) for n, o, d, c in fields])
        cloud.header.frame_id = frame
        cloud.header.stamp.sec, cloud.header.stamp.nanosec = divmod(stamp, 10**9)
        encoded = encode_point_cloud2(stamp, frame, 1, len(data), fields, cloud.is_bigendian, cloud.point_step,
                                      cloud.row_step, data, cloud.is_dense)
        assert deserialize_message(encoded, PointCloud2) == cloud
        assert decode_point_cloud2(serialize_message(cloud)) == decode_point_cloud2(encoded)
        assert decode_point_cloud2(encoded).fields == tuple(fields) and decode_point_cloud2(encoded).data == data

        positions = [[rng.uniform(-9, 9) for _ in range(3)] for _ in range(frame_length)]
        orientations = [[rng.uniform(-1, 1) for _ in range(4)] for _ in range(frame_length)]
        poses = PoseArray(poses=[Pose() for _ in positions])
        poses.header = cloud.header
        for pose, (x, y, z), (w, qx, qy, qz) in zip(poses.poses, positions, orientations):
            pose.position.x, pose.position.y, pose.position.z = x, y, z
            pose.orientation.w, pose.orientation.x, pose.orientation.y, pose.orientation.z = w, qx, qy, qz
        assert deserialize_message(encode_pose_array(stamp, frame, positions, orientations), PoseArray) == poses

        dims = tuple((random_text(rng, rng.randrange(6)), rng.randrange(9), rng.randrange(99)) for _ in range(frame_length % 3))
        values = tuple(rng.uniform(-1, 1) for _ in range(frame_length))
        array = Float64MultiArray(data=values)
        array.layout.dim = [MultiArrayDimension(label=label, size=size, stride=stride) for label, size, stride in dims]
        encoded = encode_float64_array(values, dims)
        assert deserialize_message(encoded, Float64MultiArray) == array
        assert decode_float64_array(serialize_message(array)) == decode_float64_array(encoded) == (dims, 0, values)
    cut_cloud = encode_point_cloud2(1, "map", 1, 3, [], False, 1, 3, b"abc", True)[:-2]
    with pytest.raises(ValueError, match="run past the end"):
        decode_point_cloud2(cut_cloud)
    with pytest.raises(ValueError, match="data"):
        decode_float64_array(encode_float64_array([1.0, 2.0], (("a", 2, 2),))[:-3])


def test_encoded_diagnostics_are_the_reference_serializers_bytes_with_zero_padding():
    """/diagnostics as CDR bytes: rosbags' serializer (zero padding) gives the same bytes for every string
    length, so the same diagnostics are the same bytes in two lockstep runs' bags (issue 32: rclpy left
    the three bytes after a status's level as its buffer held them)."""
    from rosbags.typesys import Stores, get_typestore

    from aerial_sim.cdr.encode import encode_diagnostic_array

    store = get_typestore(Stores.ROS2_KILTED)
    types = store.types
    rng = random.Random(32)
    for frame_length in range(5):
        statuses = [(rng.randrange(4), random_text(rng, rng.randrange(6)), random_text(rng, rng.randrange(6)),
                     random_text(rng, rng.randrange(6)),
                     tuple((random_text(rng, rng.randrange(5)), random_text(rng, rng.randrange(5)))
                           for _ in range(rng.randrange(4))))
                    for _ in range(rng.randrange(4))]
        frame, stamp = random_text(rng, frame_length), rng.randrange(2**31) * 10**9 + rng.randrange(10**9)
        message = types["diagnostic_msgs/msg/DiagnosticArray"](
            header=types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](*divmod(stamp, 10**9)),
                                                frame_id=frame),
            status=[types["diagnostic_msgs/msg/DiagnosticStatus"](
                level=level, name=name, message=text, hardware_id=hardware,
                values=[types["diagnostic_msgs/msg/KeyValue"](key=k, value=v) for k, v in values])
                for level, name, text, hardware, values in statuses])
        encoded = encode_diagnostic_array(stamp, frame, statuses)
        assert encoded == bytes(store.serialize_cdr(message, "diagnostic_msgs/msg/DiagnosticArray"))
    assert encode_diagnostic_array(0, "", [(b"\x02", "n", "m", "h", ())])[24] == 2  # rclpy's byte level


@requires_ros
def test_encoded_battery_states_read_back_as_rclpys_with_zero_padding():
    """The physics node's battery (battery:=true) as CDR bytes: rclpy reads back the message it would have
    sent, and the bytes are rclpy's own but for padding, which is zero here (rclpy leaves the bytes after
    ``location`` as its buffer held them)."""
    from rclpy.serialization import deserialize_message, serialize_message
    from sensor_msgs.msg import BatteryState

    from aerial_sim.cdr.encode import encode_battery_state_of

    rng = random.Random(32)
    for frame_length in range(5):
        cells = rng.randrange(7)
        message = BatteryState(voltage=rng.uniform(10, 17), temperature=-1.5, current=-rng.uniform(0, 40),
                               charge=rng.random(), capacity=5.0, design_capacity=5.0, percentage=rng.random(),
                               power_supply_status=2, power_supply_health=1, power_supply_technology=3,
                               present=True, cell_voltage=[rng.uniform(3, 4.2) for _ in range(cells)],
                               cell_temperature=[25.0] * cells, location=random_text(rng, rng.randrange(4)),
                               serial_number=random_text(rng, rng.randrange(4)))
        message.header.frame_id = random_text(rng, frame_length)
        message.header.stamp.sec, message.header.stamp.nanosec = rng.randrange(2**31), rng.randrange(10**9)
        encoded, theirs = encode_battery_state_of(message), serialize_message(message)
        assert deserialize_message(encoded, BatteryState) == deserialize_message(theirs, BatteryState)
        assert len(encoded) <= len(theirs) and all(ours in (0, byte) for ours, byte in zip(encoded, theirs))


@requires_ros
def test_zero_padded_bytes_of_a_marker_array_read_back_equal_and_repeat_in_any_process():
    """The scene markers' one latched message: rclpy's bytes carry what its buffer held after each
    Marker.frame_locked; these are the message alone (issue 32), the same in every process."""
    import subprocess
    import sys

    from rclpy.serialization import deserialize_message
    from visualization_msgs.msg import Marker, MarkerArray

    from aerial_sim.nodes.ros.zero_padding import zero_padded_bytes

    script = ("from visualization_msgs.msg import Marker, MarkerArray\n"
              "from aerial_sim.nodes.ros.zero_padding import zero_padded_bytes\n"
              "m = MarkerArray(markers=[Marker(ns='scene', id=i, type=1, text='x' * i) for i in range(5)])\n"
              "for k in m.markers: k.header.frame_id = 'map'\n"
              "print(zero_padded_bytes(m).hex())\n")
    markers = MarkerArray(markers=[Marker(ns="scene", id=i, type=1, text="x" * i) for i in range(5)])
    for marker in markers.markers:
        marker.header.frame_id = "map"
    ours = zero_padded_bytes(markers)
    assert deserialize_message(ours, MarkerArray) == markers
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60)
    assert bytes.fromhex(other.stdout.strip()) == ours


@requires_ros
def test_encoded_images_camera_infos_ranges_and_poses_are_rclpys_messages_with_zero_padding():
    """The camera, depth noise and rangefinder outputs as CDR bytes, for every string alignment: rclpy reads
    back the message the node would have sent, and the bytes are rosbags' zero-padded serialization of it
    (rclpy leaves the 3 bytes after Image.is_bigendian and Range.radiation_type as its buffer held them, so
    identical lockstep runs' bags differed there: issue 32)."""
    import numpy as np
    from rclpy.serialization import deserialize_message, serialize_message
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import CameraInfo, Image, Range

    from aerial_sim.cdr.encode import encode_camera_info_of, encode_image_array, encode_pose_stamped, encode_range
    from aerial_sim.nodes.ros.zero_padding import zero_padded_bytes

    rng = random.Random(32)
    arrays = {"rgb8": np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3),
              "32FC1": np.array([[1.5, np.inf], [-np.inf, np.nan]], np.float32),
              "mono16": np.arange(12, dtype=np.uint16).reshape(3, 4)[:, ::2],  # not contiguous: copied in row order
              "32FC3": np.ones((1, 3, 3), np.float32)}
    for frame_length in range(5):
        frame, stamp = random_text(rng, frame_length), rng.randrange(2**31) * 10**9 + rng.randrange(10**9)
        for encoding, array in arrays.items():
            expected = Image(height=array.shape[0], width=array.shape[1], encoding=encoding, is_bigendian=0,
                             step=array.itemsize * int(np.prod(array.shape[1:])), data=np.ascontiguousarray(array).tobytes())
            expected.header.frame_id, (expected.header.stamp.sec, expected.header.stamp.nanosec) = frame, divmod(stamp, 10**9)
            encoded = encode_image_array(stamp, frame, array, encoding)
            assert deserialize_message(encoded, Image) == expected
            assert encoded == zero_padded_bytes(expected)
        info = CameraInfo(height=320, width=460, distortion_model=random_text(rng, frame_length),
                          d=[rng.random() for _ in range(frame_length)], k=[rng.random() for _ in range(9)],
                          r=[1.0, 0, 0, 0, 1, 0, 0, 0, 1], p=[rng.random() for _ in range(12)], binning_x=2)
        info.header.frame_id, (info.header.stamp.sec, info.header.stamp.nanosec) = frame, divmod(stamp, 10**9)
        info.roi.width, info.roi.do_rectify = 7, True
        encoded = encode_camera_info_of(info)
        assert deserialize_message(encoded, CameraInfo) == info
        assert encoded == zero_padded_bytes(info)
        for kind, reading in ((Range.ULTRASOUND, 3.25), (Range.INFRARED, math.inf), (Range.INFRARED, -math.inf)):
            expected = Range(radiation_type=kind, field_of_view=0.0349, min_range=0.1, max_range=12.0, range=reading,
                             variance=2.5e-5)
            expected.header.frame_id, (expected.header.stamp.sec, expected.header.stamp.nanosec) = frame, divmod(stamp, 10**9)
            encoded = encode_range(stamp, frame, kind, 0.0349, 0.1, 12.0, reading, 2.5e-5)
            assert deserialize_message(encoded, Range) == deserialize_message(serialize_message(expected), Range)
            assert encoded == zero_padded_bytes(expected)
        pose = PoseStamped()
        pose.header.frame_id, (pose.header.stamp.sec, pose.header.stamp.nanosec) = frame, divmod(stamp, 10**9)
        pose.pose.position.x, pose.pose.position.z, pose.pose.orientation.w, pose.pose.orientation.y = 1.5, -2.0, 0.6, 0.8
        encoded = encode_pose_stamped(stamp, frame, (1.5, 0.0, -2.0), (0.6, 0.0, 0.8, 0.0))  # the AirSim server's commands
        assert deserialize_message(encoded, PoseStamped) == pose and encoded == zero_padded_bytes(pose)
    with pytest.raises(ValueError, match="rows and columns"):
        encode_image_array(0, "x", np.zeros(4, np.float32), "32FC1")
    with pytest.raises(ValueError, match="k"):
        encode_camera_info_of(type("Info", (), {**{n: getattr(info, n) for n in ("header", "height", "width",
                              "distortion_model", "d", "r", "p", "binning_x", "binning_y", "roi")}, "k": [1.0] * 8})())


def image_writer(message, order: str) -> CdrWriter:
    writer = CdrWriter(order)
    writer.header(message.header.stamp.sec, message.header.stamp.nanosec, message.header.frame_id)
    writer.u32(message.height)
    writer.u32(message.width)
    writer.string(message.encoding)
    writer.payload += bytes([message.is_bigendian])
    writer.u32(message.step)
    writer.u32(len(message.data))
    writer.payload += bytes(message.data)
    return writer


@requires_ros
@pytest.mark.parametrize("order", ["<", ">"])
def test_images_decode_to_rclpys_fields_without_copying_the_pixels_and_bad_bytes_raise(order):
    """What depth noise reads of each image: every field rclpy's typed Image has, for every alignment of
    frame id and encoding; the pixels a view of the bytes received; every truncation a ValueError."""
    import numpy as np
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import Image

    rng = random.Random(29)
    for frame_length in range(5):
        for encoding in ("mono16", "32FC1", "rgb8", "bgra8", "16UC1x"[:frame_length + 1]):
            pixels = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40)))
            message = Image(height=rng.randrange(1, 9), width=rng.randrange(1, 9), encoding=encoding,
                            is_bigendian=rng.randrange(2), step=rng.randrange(64), data=pixels)
            message.header.frame_id = random_text(rng, frame_length)
            message.header.stamp.sec, message.header.stamp.nanosec = rng.randrange(2**31), rng.randrange(10**9)
            data = serialize_message(message)
            assert image_writer(message, "<").matches(data)
            writer = image_writer(message, order)
            decoded = decode_image(writer.bytes() if order == ">" else data)
            assert (decoded.stamp_sec, decoded.stamp_nanosec, decoded.frame_id) == (
                message.header.stamp.sec, message.header.stamp.nanosec, message.header.frame_id)
            assert decoded.stamp_ns == message.header.stamp.sec * 10**9 + message.header.stamp.nanosec
            assert (decoded.height, decoded.width, decoded.encoding, decoded.is_bigendian, decoded.step) == (
                message.height, message.width, encoding, bool(message.is_bigendian), message.step)
            assert bytes(decoded.data) == pixels and isinstance(decoded.data, memoryview)
    image = np.arange(6, dtype=np.float32).reshape(2, 3)
    data = writer.bytes()
    for length in range(len(data)):
        with pytest.raises(ValueError):
            decode_image(data[:length])
    from aerial_sim.cdr.encode import encode_image_array

    encoded = encode_image_array(7, "cam", image, "32FC1")
    view = decode_image(encoded).data
    assert np.frombuffer(view, np.float32).reshape(2, 3).tolist() == image.tolist()
    assert view.obj is encoded  # the received bytes themselves, not a copy
