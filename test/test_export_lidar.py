"""Exporting lidar scans: a bag holding real sweeps of a moving vehicle becomes one .npy and one .ply per scan,
every field intact, with the ground-truth pose at the scan's first and last firing (no ROS graph, fast)."""

from __future__ import annotations

import csv
import functools

import numpy as np
import pytest
import yaml

from aerial_sim.recording.bag import BagWriter
from aerial_sim.recording.export import export_bag
from aerial_sim.sensors.truth import TruthSample
from aerial_sim.sensors.lidar import LidarModel, LidarParams, LidarSweeper
from aerial_sim.sensors.pointcloud import LIDAR_POINT_DTYPE, point_fields
from aerial_sim.world.scene import load_scene

SPEED_M_S = 5.0  # the vehicle flies along +x from x = 2 m at 3 m height


@functools.lru_cache(maxsize=1)
def store():
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_KILTED)


def header(t_ns: int, frame_id: str):
    types = store().types
    return types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=t_ns // 10**9, nanosec=t_ns % 10**9),
                                        frame_id=frame_id)  # fmt: skip


def cdr_odometry(t_ns: int, x: float) -> bytes:
    types = store().types
    vector, point = types["geometry_msgs/msg/Vector3"], types["geometry_msgs/msg/Point"]
    pose = types["geometry_msgs/msg/Pose"](position=point(x=x, y=0.0, z=3.0),
                                           orientation=types["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0))
    twist = types["geometry_msgs/msg/Twist"](linear=vector(x=SPEED_M_S, y=0.0, z=0.0), angular=vector(x=0.0, y=0.0, z=0.0))
    msg = types["nav_msgs/msg/Odometry"](
        header=header(t_ns, "map"), child_frame_id="drone1/base_link",
        pose=types["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=np.zeros(36)),
        twist=types["geometry_msgs/msg/TwistWithCovariance"](twist=twist, covariance=np.zeros(36)),
    )  # fmt: skip
    return bytes(store().serialize_cdr(msg, "nav_msgs/msg/Odometry"))


def cdr_cloud(points: np.ndarray, t_ns: int) -> bytes:
    types = store().types
    field = types["sensor_msgs/msg/PointField"]
    height, width = points.shape
    msg = types["sensor_msgs/msg/PointCloud2"](
        header=header(t_ns, "drone1/lidar_link"), height=height, width=width,
        fields=[field(name=n, offset=o, datatype=d, count=c) for n, o, d, c in point_fields(LIDAR_POINT_DTYPE)],
        is_bigendian=False, point_step=24, row_step=24 * width,
        data=np.frombuffer(points.tobytes(), np.uint8), is_dense=height == 1,
    )  # fmt: skip
    return bytes(store().serialize_cdr(msg, "sensor_msgs/msg/PointCloud2"))


@pytest.mark.parametrize("no_return", ["drop", "nan"])
def test_each_scan_exports_as_npy_and_ply_with_its_start_and_end_pose(tmp_path, no_return):
    from plyfile import PlyData

    params = LidarParams(channels=8, points_per_second=28_800, vertical_fov_upper_deg=10.0, vertical_fov_lower_deg=-10.0,
                         range_noise_std_m=0.01, no_return=no_return)  # fmt: skip
    sweeper = LidarSweeper(LidarModel(params, load_scene("corridor")))
    scans = []
    with BagWriter(tmp_path / "bag") as writer:
        writer.add_topic("/drone1/ground_truth/odom", "nav_msgs/msg/Odometry")
        writer.add_topic("/drone1/lidar/points", "sensor_msgs/msg/PointCloud2")
        for k in range(101):  # 0.4 s at 250 Hz
            t_ns = k * 4_000_000
            x = 2.0 + SPEED_M_S * t_ns * 1e-9
            writer.write("/drone1/ground_truth/odom", cdr_odometry(t_ns, x), t_ns)
            for scan in sweeper.push(TruthSample(t_ns * 1e-9, position=(x, 0.0, 3.0))):
                scans.append(scan)
                stamp = round(scan.start_time_s * 1e9)
                writer.write("/drone1/lidar/points", cdr_cloud(scan.points, stamp), t_ns)
    assert len(scans) == 4  # sweeps starting at 0.0, 0.1, 0.2, 0.3 s

    result = export_bag(tmp_path / "bag", tmp_path / "out", progress=False)
    assert result.clouds == {"/drone1/lidar/points": 4}
    assert "/drone1/lidar/points" not in result.sensors  # not flattened into a CSV
    directory = tmp_path / "out" / "clouds" / "drone1" / "lidar" / "points"
    with open(directory / "scans.csv", newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert len(rows) == 4
    for row, scan in zip(rows, scans):
        points = np.load(directory / row["npy"])
        assert points.shape == scan.points.shape and points.dtype.names == LIDAR_POINT_DTYPE.names
        assert np.array_equal(points.tobytes(), scan.points.tobytes())  # bit for bit, NaN included
        vertices = PlyData.read(str(directory / row["ply"]))["vertex"].data
        assert len(vertices) == scan.points.size == int(row["points"])
        for name in LIDAR_POINT_DTYPE.names:
            assert np.array_equal(vertices[name], scan.points.reshape(-1)[name], equal_nan=True), name
        last_firing = float(np.max(scan.points["time"]))
        assert int(row["stamp_ns"]) == round(scan.start_time_s * 1e9)
        assert int(row["end_stamp_ns"]) == int(row["stamp_ns"]) + round(last_firing * 1e9)
        for prefix, t in (("start", scan.start_time_s), ("end", scan.start_time_s + last_firing)):
            assert float(row[f"{prefix}_x"]) == pytest.approx(2.0 + SPEED_M_S * t, abs=1e-6)  # interpolated between samples
            assert (float(row[f"{prefix}_z"]), float(row[f"{prefix}_qw"])) == (3.0, 1.0)
        assert row["frame_id"] == "drone1/lidar_link" and (int(row["height"]) == 1) == (no_return == "drop")
    manifest = yaml.safe_load((tmp_path / "out" / "dataset.yaml").read_text())
    assert manifest["clouds"]["/drone1/lidar/points"]["scans"] == 4
    assert manifest["clouds"]["/drone1/lidar/points"]["pose_topic"] == "/drone1/ground_truth/odom"


def cdr_image(array: np.ndarray, encoding: str, t_ns: int) -> bytes:
    height, width = array.shape[:2]
    msg = store().types["sensor_msgs/msg/Image"](
        header=header(t_ns, "drone1/camera_depth_optical_frame"), height=height, width=width, encoding=encoding,
        is_bigendian=0, step=array.nbytes // height, data=np.frombuffer(array.tobytes(), np.uint8))  # fmt: skip
    return bytes(store().serialize_cdr(msg, "sensor_msgs/msg/Image"))


def test_flow_and_normals_images_export_as_float_arrays(tmp_path):
    """`aerial_sim record` of every topic holds the camera's flow (32FC2) and normals (32FC3) images: the export
    writes them as float32 .npy, bit for bit, the normals also as an 8-bit normal map (it stopped at the first one:
    `unsupported image encoding '32FC3'`)."""
    from PIL import Image as PilImage

    rng = np.random.default_rng(4)
    flow = rng.normal(size=(3, 4, 2)).astype(np.float32)
    normals = rng.normal(size=(3, 4, 3)).astype(np.float32)
    normals /= np.linalg.norm(normals, axis=2, keepdims=True)
    normals[0, 0] = np.nan  # nothing seen there
    topics = {"/drone1/camera/flow/image_raw": (flow, "32FC2"), "/drone1/camera/normals/image_raw": (normals, "32FC3")}
    with BagWriter(tmp_path / "bag") as writer:
        writer.add_topic("/drone1/ground_truth/odom", "nav_msgs/msg/Odometry")
        writer.write("/drone1/ground_truth/odom", cdr_odometry(0, 2.0), 0)
        for topic, (array, encoding) in topics.items():
            writer.add_topic(topic, "sensor_msgs/msg/Image")
            writer.write(topic, cdr_image(array, encoding, 1_000_000), 1_000_000)
    result = export_bag(tmp_path / "bag", tmp_path / "out", progress=False)
    assert result.images == {topic: 1 for topic in topics}
    for topic, (array, encoding) in topics.items():
        directory = tmp_path / "out" / "images" / topic.strip("/")
        with open(directory / "frames.csv", newline="") as stream:
            (row,) = list(csv.DictReader(stream))
        assert row["encoding"] == encoding
        assert np.array_equal(np.load(directory / row["npy"]), array, equal_nan=True)
        if encoding == "32FC2":
            assert row["png"] == ""
        else:
            picture = np.asarray(PilImage.open(directory / row["png"]))
            assert picture.shape == (3, 4, 3) and picture.dtype == np.uint8
            assert picture[0, 0].tolist() == [0, 0, 0]
            assert np.allclose(picture[1:] / 127.5 - 1.0, normals[1:], atol=0.005)
