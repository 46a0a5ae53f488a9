"""Pure tests of the export conversions: image decoding, depth scaling, pose interpolation, CSV flattening."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from aerial_sim.recording.export import (
    ExportError,
    depth_to_png_mm,
    flatten_message,
    image_to_array,
    interpolate_poses,
    quaternion_slerp,
    topic_path,
)


def image(encoding, width, height, step, data, big_endian=0):
    return SimpleNamespace(encoding=encoding, width=width, height=height, step=step, is_bigendian=big_endian,
                           data=np.frombuffer(data, dtype=np.uint8))  # fmt: skip


def test_bgr_with_row_padding_becomes_rgb():
    rows = []
    for r in range(2):
        row = bytes([10 * r + 1, 10 * r + 2, 10 * r + 3] * 3) + b"\xff\xff"  # 3 px + 2 padding bytes
        rows.append(row)
    array = image_to_array(image("bgr8", 3, 2, 11, b"".join(rows)))
    assert array.shape == (2, 3, 3)
    assert array[1, 2].tolist() == [13, 12, 11]


def test_big_endian_float_depth():
    values = np.array([[1.5, 2.25]], dtype=">f4")
    array = image_to_array(image("32FC1", 2, 1, 8, values.tobytes(), big_endian=1))
    assert array.dtype == np.float32 and array.tolist() == [[1.5, 2.25]]


def test_unknown_encoding_and_short_data_are_errors():
    with pytest.raises(ExportError, match="encoding"):
        image_to_array(image("yuv422", 2, 2, 4, bytes(8)))
    with pytest.raises(ExportError, match="too short"):
        image_to_array(image("mono8", 4, 4, 4, bytes(10)))


def test_depth_png_is_millimetres_with_zero_for_no_return():
    depth = np.array([[0.0, 1.2344, np.nan, np.inf, -1.0, 70.0]], dtype=np.float32)
    assert depth_to_png_mm(depth).tolist() == [[0, 1234, 0, 0, 0, 65535]]


def yaw_quaternion(yaw):
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


def test_pose_interpolation_is_linear_in_position_and_slerp_in_orientation():
    t = np.array([0.0, 1.0])
    poses = np.array([[0, 0, 0, *yaw_quaternion(0.0)], [2, 4, 6, *yaw_quaternion(math.pi / 2)]])
    out, dt = interpolate_poses(t, poses, np.array([0.25, 0.5, -1.0, 3.0]))
    assert out[0, :3] == pytest.approx([0.5, 1.0, 1.5])
    assert out[1, 3:] == pytest.approx(yaw_quaternion(math.pi / 4))  # halfway in angle, not in components
    assert out[2] == pytest.approx(poses[0]) and out[3] == pytest.approx(poses[1])  # clamped outside
    assert dt == pytest.approx([0.25, 0.5, 1.0, 2.0])


def test_slerp_takes_the_short_way_round():
    q0 = yaw_quaternion(math.radians(170))[None]
    q1 = -yaw_quaternion(math.radians(-170))[None]  # same rotation as +190 deg, written with the other sign
    mid = quaternion_slerp(q0, q1, np.array([0.5]))[0]
    yaw = 2 * math.atan2(mid[3], mid[0])
    assert abs(math.remainder(yaw - math.pi, 2 * math.pi)) < 1e-9  # 180 deg, not 0 deg


def test_flatten_message_spreads_small_arrays_and_skips_blobs():
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    JointState = store.types["sensor_msgs/msg/JointState"]
    Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    msg = JointState(header=Header(stamp=Time(sec=3, nanosec=5), frame_id=""), name=["rotor_0", "rotor_1"],
                     position=np.zeros(0), velocity=np.array([100.0, -100.0]), effort=np.array([2.0, 2.5]))  # fmt: skip
    row = flatten_message(msg)
    assert row["header.stamp.sec"] == 3 and row["name.1"] == "rotor_1" and row["effort.1"] == 2.5
    blob = store.types["sensor_msgs/msg/Image"](header=msg.header, height=10, width=10, encoding="mono8",
                                                is_bigendian=0, step=10, data=np.zeros(100, np.uint8))  # fmt: skip
    assert "data.0" not in flatten_message(blob) and flatten_message(blob)["width"] == 10


def test_topic_path():
    assert topic_path("/drone1/camera/color/image_raw").as_posix() == "drone1/camera/color/image_raw"


def test_each_class_flattens_into_the_same_columns_as_a_walk_of_its_fields():
    """The export's flatten compiled per class gives the walk's columns, in its order, for nested messages,
    fixed and variable arrays, arrays of messages and numpy scalars (a CSV's header is the first row's keys)."""
    from rosbags.typesys import Stores, get_typestore

    from aerial_sim.recording.export import flatten_fields

    store = get_typestore(Stores.ROS2_KILTED)
    Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    header = Header(stamp=Time(sec=3, nanosec=np.uint32(5)), frame_id="map")
    Vector3 = store.types["geometry_msgs/msg/Vector3"]
    Quaternion = store.types["geometry_msgs/msg/Quaternion"]
    imu = store.types["sensor_msgs/msg/Imu"](
        header=header, orientation=Quaternion(x=0.0, y=0.0, z=0.0, w=1.0), orientation_covariance=np.arange(9.0),
        angular_velocity=Vector3(x=1.0, y=np.float64(2.0), z=3.0), angular_velocity_covariance=np.zeros(9),
        linear_acceleration=Vector3(x=0.0, y=0.0, z=9.8), linear_acceleration_covariance=np.ones(9))
    KeyValue, Status = store.types["diagnostic_msgs/msg/KeyValue"], store.types["diagnostic_msgs/msg/DiagnosticStatus"]
    status = Status(level=b"\x00", name="physics", message="ok", hardware_id="", values=[KeyValue(key="a", value="1")])
    diagnostics = store.types["diagnostic_msgs/msg/DiagnosticArray"](header=header, status=[status, status])
    for msg in (imu, diagnostics, diagnostics):  # the second diagnostics: the compiled function, kept
        row = flatten_message(msg, row={"bag_time_ns": 1})
        walked = flatten_fields(msg, "", {"bag_time_ns": 1})
        assert list(row) == list(walked) and row == walked
    assert row["status.1.values.0.key"] == "a" and type(flatten_message(imu)["header.stamp.nanosec"]) is int
