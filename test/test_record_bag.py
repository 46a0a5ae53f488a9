"""Pure tests of the bag writer, message definitions and recorder helpers (no ROS graph, fast)."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml

from aerial_sim.config import ParamsError
from aerial_sim.recording.bag import BagWriter, BagWriterParams, mcap_is_complete, recover
from aerial_sim.recording.msgdefs import dependencies, message_definition
from aerial_sim.recording.recorder import TopicSelection, cdr_header_stamp_ns, has_header, split_patterns
from aerial_sim.recording.summary import summarize, write_run_report

SRC = Path(__file__).resolve().parents[1] / "src"


@functools.lru_cache(maxsize=1)
def kilted_store():
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_KILTED)


def cdr_odometry(t_s: float, x: float) -> bytes:
    """A little-endian CDR nav_msgs/Odometry, built with rosbags' serializer (no rclpy needed)."""
    store = kilted_store()
    Odometry = store.types["nav_msgs/msg/Odometry"]
    Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    Pose, PoseCov = store.types["geometry_msgs/msg/Pose"], store.types["geometry_msgs/msg/PoseWithCovariance"]
    Point, Quat = store.types["geometry_msgs/msg/Point"], store.types["geometry_msgs/msg/Quaternion"]
    Twist, TwistCov = store.types["geometry_msgs/msg/Twist"], store.types["geometry_msgs/msg/TwistWithCovariance"]
    Vec = store.types["geometry_msgs/msg/Vector3"]
    ns = int(round(t_s * 1e9))
    msg = Odometry(
        header=Header(stamp=Time(sec=ns // 10**9, nanosec=ns % 10**9), frame_id="map"),
        child_frame_id="drone1/base_link",
        pose=PoseCov(pose=Pose(position=Point(x=x, y=0.0, z=1.0), orientation=Quat(x=0.0, y=0.0, z=0.0, w=1.0)),
                     covariance=np.zeros(36)),
        twist=TwistCov(twist=Twist(linear=Vec(x=1.0, y=0.0, z=0.0), angular=Vec(x=0.0, y=0.0, z=0.0)),
                       covariance=np.zeros(36)),
    )  # fmt: skip
    return bytes(store.serialize_cdr(msg, "nav_msgs/msg/Odometry"))


@pytest.mark.parametrize(
    "msgtype",
    ["nav_msgs/msg/Odometry", "sensor_msgs/msg/Image", "sensor_msgs/msg/CameraInfo",
     "visualization_msgs/msg/MarkerArray", "sensor_msgs/msg/PointCloud2", "rosgraph_msgs/msg/Clock"],
)  # fmt: skip
def test_message_definition_parses_back_to_the_published_type_hash(msgtype):
    """The schema text we store is complete: rosbags rebuilds the type from it with the same RIHS01 hash."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    definition = message_definition(msgtype)
    store = get_typestore(Stores.EMPTY)
    store.register(get_types_from_msg(definition.text, msgtype))
    assert definition.type_hash.startswith("RIHS01_")
    assert store.hash_rihs01(msgtype) == definition.type_hash


def test_dependencies_resolve_relative_and_header_types():
    text = "Header header\nPoint32[] points\nuint8 KIND=3\nstring<=8 name\ngeometry_msgs/Vector3 v # note\n"
    assert dependencies(text, "sensor_msgs") == [
        "std_msgs/msg/Header", "sensor_msgs/msg/Point32", "geometry_msgs/msg/Vector3",
    ]  # fmt: skip


def test_written_bag_reads_back_with_rosbags_and_splits(tmp_path):
    from rosbags.highlevel import AnyReader

    params = BagWriterParams(max_bag_size_bytes=40_000)
    with BagWriter(tmp_path / "bag", params) as writer:
        writer.add_topic("/drone1/ground_truth/odom", "nav_msgs/msg/Odometry")
        for k in range(400):
            assert writer.write("/drone1/ground_truth/odom", cdr_odometry(k * 0.01, 0.5 * k), k * 10_000_000)
    info = yaml.safe_load((tmp_path / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert len(info["files"]) >= 3 and sum(f["message_count"] for f in info["files"]) == 400
    assert all(mcap_is_complete(tmp_path / "bag" / f["path"]) for f in info["files"])
    xs = []
    with AnyReader([tmp_path / "bag"]) as reader:
        for connection, t_ns, raw in reader.messages():
            xs.append(reader.deserialize(raw, connection.msgtype).pose.pose.position.x)
    assert xs == [0.5 * k for k in range(400)]
    summary = summarize(tmp_path / "bag")
    assert summary.distance_m("/drone1/ground_truth/odom") == pytest.approx(0.5 * 399)
    assert summary.topics[0].rate_hz == pytest.approx(100.0)


def test_run_report_leaves_the_missions_summary_alone(tmp_path):
    """The mission node writes summary.txt in the run folder; the recorder's report goes beside it."""
    mission_text = "mission square_5m\nHausdorff distance: 0.41 m\n"
    (tmp_path / "summary.txt").write_text(mission_text)
    with BagWriter(tmp_path / "bag") as writer:
        writer.add_topic("/drone1/ground_truth/odom", "nav_msgs/msg/Odometry")
        for k in range(50):
            writer.write("/drone1/ground_truth/odom", cdr_odometry(k * 0.01, 0.1 * k), k * 10_000_000)
    text, plot = write_run_report(tmp_path / "bag", tmp_path)
    assert (tmp_path / "summary.txt").read_text() == mission_text
    assert text == tmp_path / "recording.txt" and "distance flown" in text.read_text()
    assert plot.is_file()


def test_existing_non_empty_output_is_refused(tmp_path):
    (tmp_path / "bag").mkdir()
    (tmp_path / "bag" / "old.mcap").write_bytes(b"x")
    with pytest.raises(ParamsError, match="not empty"):
        BagWriter(tmp_path / "bag")


def test_full_disk_stops_recording_and_keeps_what_was_written(tmp_path):
    """A file-size limit (as a full disk) makes writes fail: recording stops, the bag stays recoverable."""
    script = textwrap.dedent(
        f"""
        import resource, signal, sys
        sys.path.insert(0, {str(SRC)!r}); sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_record_bag import cdr_odometry
        from aerial_sim.recording.bag import BagWriter, BagWriterParams
        data = [cdr_odometry(k * 0.01, float(k)) for k in range(2000)]
        writer = BagWriter({str(tmp_path / "bag")!r}, BagWriterParams(chunk_size_bytes=20_000))
        writer.add_topic("/odom", "nav_msgs/msg/Odometry")
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
        written = 0
        for k, payload in enumerate(data):
            if not writer.write("/odom", payload, k * 10_000_000):
                break
            written += 1
        info = writer.close()
        print(written, info.error)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    written, error = result.stdout.split(" ", 1)
    assert 0 < int(written) < 2000 and "recording stopped" in error
    metadata = yaml.safe_load((tmp_path / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert "recording stopped" in metadata["custom_data"]["error"]
    kept = recover(tmp_path / "bag")
    assert 0 < kept["bag_0.mcap"] <= int(written)
    assert summarize(tmp_path / "bag").topics[0].count == kept["bag_0.mcap"]


def test_header_stamp_is_read_from_cdr_without_deserializing():
    data = cdr_odometry(12.345678901, 1.0)
    assert cdr_header_stamp_ns(data) == 12_345_678_901
    assert has_header(message_definition("nav_msgs/msg/Odometry"))
    assert not has_header(message_definition("rosgraph_msgs/msg/Clock"))


def test_topic_selection():
    assert split_patterns("drone1/imu/data, /clock  /drone1/camera/*") == ("/drone1/imu/data", "/clock", "/drone1/camera/*")
    named = TopicSelection(split_patterns("/clock /drone1/camera/*"))
    assert named.wants("/clock") and named.wants("/drone1/camera/depth/image_raw")
    assert not named.wants("/drone1/imu/data")
    everything = TopicSelection((), split_patterns("/parameter_events"))
    assert everything.wants("/drone1/imu/data") and not everything.wants("/parameter_events")
    assert not everything.wants("/_hidden/topic")


def test_recording_core_does_not_import_rclpy():
    for path in (SRC / "aerial_sim" / "recording").glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert "rclpy" not in imported, path.name
