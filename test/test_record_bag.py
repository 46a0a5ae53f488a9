"""Pure tests of the bag writer, message definitions and recorder helpers (no ROS graph, fast)."""

from __future__ import annotations

import ast
import errno
import functools
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from aerial_sim.cdr.decode import cdr_header_stamp_ns
from aerial_sim.config import ParamsError
from aerial_sim.recording.bag import BagWriter, BagWriterParams
from aerial_sim.recording.bag_recovery import mcap_is_complete, recover
from aerial_sim.recording.msgdefs import dependencies, message_definition
from aerial_sim.recording.recorder import TopicSelection, has_header, split_patterns
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


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_compressed_chunks_read_back_with_rosbags_mcap_and_the_report(tmp_path, compression):
    from mcap.reader import make_reader
    from rosbags.highlevel import AnyReader

    sizes = {}
    for name in ("none", compression):
        with BagWriter(tmp_path / name, BagWriterParams(compression=name, chunk_size_bytes=16_384)) as writer:
            writer.add_topic("/drone1/ground_truth/odom", "nav_msgs/msg/Odometry")
            for k in range(300):
                writer.write("/drone1/ground_truth/odom", cdr_odometry(k * 0.004, 0.01 * k), k * 4_000_000)
        sizes[name] = sum(p.stat().st_size for p in (tmp_path / name).glob("*.mcap"))
    assert sizes[compression] < 0.5 * sizes["none"]  # the covariances are zeros: chunks shrink
    mcap_file = next((tmp_path / compression).glob("*.mcap"))
    with open(mcap_file, "rb") as stream:
        reader = make_reader(stream)
        assert {c.compression for c in reader.get_summary().chunk_indexes} == {compression}
        assert sum(1 for _ in reader.iter_messages()) == 300
    with AnyReader([tmp_path / compression]) as bag:
        xs = [bag.deserialize(raw, c.msgtype).pose.pose.position.x for c, _, raw in bag.messages()]
    assert xs == pytest.approx([0.01 * k for k in range(300)])
    assert summarize(tmp_path / compression).distance_m("/drone1/ground_truth/odom") == pytest.approx(2.99)


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


class FullDiskFile:
    """A file on a disk with room for ``capacity`` bytes: a write past it stores what fits, then fails with ENOSPC
    (as write(2) does on a full disk). Cutting the file back frees the room again. With ``shared``, the
    disk's room is shared with the other files of the same folder (the bag writer's reserve among them),
    so deleting one of them frees room, as on a real disk."""

    def __init__(self, stream, capacity: int, shared: bool = False):
        self.stream, self.capacity, self.shared = stream, capacity, shared

    def _others(self) -> int:
        if not self.shared:
            return 0
        here = Path(self.stream.name)
        return sum(p.stat().st_size for p in here.parent.iterdir() if p.is_file() and p != here)

    def write(self, data) -> int:
        room = self.capacity - self._others() - self.stream.tell()
        if len(data) > room:
            self.stream.write(bytes(data[: max(room, 0)]))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.stream.write(data)

    def __getattr__(self, name):
        return getattr(self.stream, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stream.close()


def full_disk(capacity: int, shared: bool = False):
    """A ``BagWriter``/``recover`` file opener whose files live on a disk with ``capacity`` bytes free
    (for each file, or with ``shared`` for the whole folder)."""
    return lambda path, mode: FullDiskFile(open(path, mode), capacity, shared)


def read_xs(bag_dir) -> list[float]:
    from rosbags.highlevel import AnyReader

    with AnyReader([bag_dir]) as reader:
        return [reader.deserialize(raw, c.msgtype).pose.pose.position.x for c, _, raw in reader.messages()]


def test_full_disk_stops_recording_and_keeps_a_readable_bag(tmp_path):
    """ENOSPC mid-recording: recording stops, the bag reads back as it is (no --recover) with the messages written
    before the error, metadata.yaml counts exactly those, and the error is one line naming the file and errno."""
    bag = tmp_path / "bag"
    from aerial_sim.recording.bag import RESERVE_BYTES

    writer = BagWriter(bag, BagWriterParams(chunk_size_bytes=10_000),
                       open_file=full_disk(100_000 + RESERVE_BYTES, shared=True))
    writer.add_topic("/odom", "nav_msgs/msg/Odometry")
    accepted = 0
    for k in range(900):
        if not writer.write("/odom", cdr_odometry(k * 0.01, 0.1 * k), k * 10_000_000):
            break
        accepted += 1
    info = writer.close()
    assert 0 < accepted < 900
    assert info.error.count("\n") == 0 and str(bag / "bag_0.mcap") in info.error
    assert "[Errno 28]" in info.error and "ENOSPC" in info.error
    assert mcap_is_complete(bag / "bag_0.mcap") and not (bag / ".space_reserve").exists()
    xs = read_xs(bag)
    assert xs == [0.1 * k for k in range(len(xs))]  # the first messages, in order
    assert accepted - 30 <= len(xs) <= accepted  # at most the chunk being built is lost
    metadata = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert metadata["message_count"] == len(xs) == info.message_count
    assert metadata["topics_with_message_count"][0]["message_count"] == len(xs)
    assert metadata["files"][0]["message_count"] == len(xs)
    assert "ENOSPC" in metadata["custom_data"]["error"]
    assert recover(bag) == {}  # nothing left to repair


def unfinished_bag(tmp_path, messages: int = 400):
    """A bag as a SIGKILLed recorder leaves it: chunks on disk, no footer, metadata.yaml from the start."""
    bag = tmp_path / "bag"
    writer = BagWriter(bag, BagWriterParams(chunk_size_bytes=10_000))
    writer.add_topic("/odom", "nav_msgs/msg/Odometry")
    for k in range(messages):
        writer.write("/odom", cdr_odometry(k * 0.01, 0.1 * k), k * 10_000_000)
    writer._stream.flush()
    size = (bag / "bag_0.mcap").stat().st_size
    with open(bag / "bag_0.mcap", "r+b") as stream:
        stream.truncate(size - 100)  # the last record cut short
    return bag, size - 100


def test_recover_repairs_a_killed_recorders_bag_in_place(tmp_path):
    bag, size = unfinished_bag(tmp_path)
    assert (bag / ".space_reserve").is_file()  # left behind by the killed recorder
    used = sum(p.stat().st_size for p in bag.iterdir())
    # On a disk left exactly full: the reserve it deletes first makes room for the rebuilt index.
    kept = recover(bag, open_file=full_disk(used, shared=True))
    from aerial_sim.recording.mcap_index import footer_summary_start

    assert footer_summary_start(bag / "bag_0.mcap") > 0  # indexed again, not just closed
    xs = read_xs(bag)
    assert kept == {"bag_0.mcap": len(xs)} and 300 < len(xs) <= 400
    assert xs == [0.1 * k for k in range(len(xs))]
    metadata = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert metadata["message_count"] == len(xs) == metadata["topics_with_message_count"][0]["message_count"]


def test_recover_command_recovers_a_lockstep_runs_log_bag_beside_its_bag(tmp_path, capsys):
    """A killed lockstep recorder leaves two unfinished bags in the run folder: bag/ and log_bag/."""
    from aerial_sim.cli.record import recover_command

    bag, _ = unfinished_bag(tmp_path)
    (tmp_path / "first").mkdir()
    log_bag, _ = unfinished_bag(tmp_path / "first")
    log_bag.rename(tmp_path / "log_bag")
    for name in ("bag_0.mcap", ".space_reserve", "metadata.yaml"):
        (tmp_path / "log_bag" / name).rename(tmp_path / "log_bag" / name.replace("bag_0", "log_bag_0"))
    assert recover_command(str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "recovered bag/bag_0.mcap" in out and "recovered log_bag/log_bag_0.mcap" in out, out
    assert mcap_is_complete(bag / "bag_0.mcap") and mcap_is_complete(tmp_path / "log_bag" / "log_bag_0.mcap")
    assert len(read_xs(tmp_path / "log_bag")) > 300


def test_recover_on_a_full_disk_says_so_in_one_line(tmp_path):
    from aerial_sim.recording.bag import BagWriteError
    from aerial_sim.recording.bag_recovery import last_record_end

    bag, _ = unfinished_bag(tmp_path)
    capacity = last_record_end(bag / "bag_0.mcap") + 10  # no room for the 50-byte footer
    with pytest.raises(BagWriteError) as caught:
        recover(bag, open_file=full_disk(capacity))
    message = str(caught.value)
    assert "\n" not in message and str(bag / "bag_0.mcap") in message and "[Errno 28]" in message
    kept = recover(bag)  # once there is room again, the same bag is repaired
    assert kept["bag_0.mcap"] == len(read_xs(bag)) > 300


def test_recover_command_on_a_full_disk_prints_one_line_without_traceback(tmp_path):
    """The real command in its own process, with the file size limited (writes fail like on a full disk)."""
    bag, _ = unfinished_bag(tmp_path)
    limit = 1000  # far below the file: the footer cannot be written

    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    result = subprocess.run(
        [sys.executable, "-m", "aerial_sim", "record", "--recover", str(tmp_path)],
        capture_output=True, text=True, timeout=120, preexec_fn=limit_file_size,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("aerial_sim record --recover: cannot recover the bag: cannot write ")
    assert str(bag / "bag_0.mcap") in lines[0] and "[Errno 27]" in lines[0]


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


def test_aerial_sim_record_leaves_out_what_a_launch_leaves_out_unless_asked():
    """`aerial_sim record -o runs/flight1` (README) records what sim.launch.yaml's recorder records: not the
    camera's on-demand labels, which it then rendered at half its rate (color 14.6 Hz, not 27.2) and whose
    normals the export refused; `--all` and named topics take them."""
    from aerial_sim.cli.record import build_parser, ros_arguments
    from aerial_sim.recording.recorder import DEFAULT_EXCLUDE, ON_DEMAND_EXCLUDE

    def exclude(*argv):
        args = ros_arguments(build_parser().parse_args(list(argv)))
        found = [arg for arg in args if arg.startswith("exclude:=")]
        return found[0].removeprefix("exclude:=").strip("'") if found else DEFAULT_EXCLUDE

    launch = yaml.safe_load((SRC.parent / "launch" / "record.launch.yaml").read_text())["launch"]
    (launch_default,) = [entry["arg"]["default"] for entry in launch if entry.get("arg", {}).get("name") == "exclude"]
    assert exclude("-o", "runs/flight1") == ON_DEMAND_EXCLUDE == launch_default
    default = TopicSelection((), split_patterns(ON_DEMAND_EXCLUDE))
    assert default.wants("/drone1/camera/color/image_raw") and not default.wants("/drone1/camera/normals/image_raw")
    assert exclude("--all") == DEFAULT_EXCLUDE
    assert exclude("/drone1/camera/*") == DEFAULT_EXCLUDE
    assert exclude("-x", "/clock") == "/clock"


def test_recording_core_does_not_import_rclpy():
    for path in (SRC / "aerial_sim" / "recording").glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert "rclpy" not in imported, path.name


def test_real_time_factor_span_leaves_out_the_wait_before_the_start_and_the_messages_after_the_stop():
    from aerial_sim.recording.recorder import WallSpan

    span, s = WallSpan(), 1_000_000_000
    for wall in range(0, 4 * s, s // 4):  # 4 s of /clock repeating t = 0 (lockstep settling)
        span.observe(0, wall)
    for k in range(1, 13):  # then 12 s simulated in 12 s of wall clock
        span.observe(k * s, 4 * s + k * s)
    for wall in (17 * s, 19 * s):  # log lines after the simulation stopped, still at t = 12 s
        span.observe(12 * s, wall)
    assert (span.start_ns, span.end_ns) == (int(3.75 * s), 16 * s)
    assert 12 * s / (span.end_ns - span.start_ns) == pytest.approx(12 / 12.25)


def test_log_times_never_go_back_so_even_an_unindexed_file_reads_in_order(tmp_path):
    """Messages stamped out of order (a reset sending /clock back, a log line stamped 0 before the first
    /clock) are logged at the time logged last, their own time kept as publish time: a file ended with a
    bare footer (no index) still reads with rosbags, which refuses unindexed messages out of log-time order."""
    from mcap.reader import make_reader
    from rosbags.highlevel import AnyReader

    from aerial_sim.recording.mcap_index import end_bytes, scan_mcap

    bag = tmp_path / "bag"
    stamps = [3_000_000_000, 3_004_000_000, 0, 3_008_000_000, 1_000_000_000, 3_012_000_000]
    with BagWriter(bag, BagWriterParams(chunk_size_bytes=2_000)) as writer:
        writer.add_topic("/odom", "nav_msgs/msg/Odometry")
        for k, t_ns in enumerate(stamps):
            writer.write("/odom", cdr_odometry(t_ns * 1e-9, float(k)), t_ns)
    path = bag / "bag_0.mcap"
    with open(path, "rb") as stream:
        messages = list(make_reader(stream).iter_messages(log_time_order=False))
    logs = [m.log_time for _, _, m in messages]
    assert logs == sorted(logs) and logs[2] == 3_004_000_000 and logs[4] == 3_008_000_000
    assert [m.publish_time for _, _, m in messages] == stamps  # the receipt times themselves, kept
    scan = scan_mcap(path)
    with open(path, "r+b") as stream:  # the index lost: data, then a bare footer
        stream.truncate(scan.data_end)
        stream.seek(scan.data_end)
        stream.write(end_bytes(b"", 0, 0))
    with AnyReader([bag]) as reader:
        xs = [reader.deserialize(raw, c.msgtype).pose.pose.position.x for c, _, raw in reader.messages()]
    assert xs == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


@pytest.mark.parametrize("cut_at", ["mid_chunk", "mid_message_index", "after_footer_without_summary"])
def test_recover_rebuilds_the_index_of_a_file_cut_anywhere(tmp_path, cut_at):
    """A file cut in the middle of a chunk or of its message indexes, or closed with a footer but no summary
    (how a full disk used to leave it), gets its summary back: the mcap library's indexed reader, rosbags
    and the run report read every message kept, in order, and the statistics count them."""
    from mcap.reader import make_reader

    from aerial_sim.recording.mcap_index import OP_CHUNK, OP_MESSAGE_INDEX, end_bytes, footer_summary_start, scan_mcap

    bag, _ = unfinished_bag(tmp_path, messages=600)
    path = bag / "bag_0.mcap"
    scan = scan_mcap(path)
    last = scan.chunks[-2]  # (unfinished_bag cut the very last one's index short)
    assert last.index_offsets  # the scan found its message index
    cut = {
        "mid_chunk": last.offset + last.length // 2,
        "mid_message_index": last.offset + last.length + 20,
        "after_footer_without_summary": scan.data_end,
    }[cut_at]
    with open(path, "r+b") as stream:
        stream.truncate(cut)
        if cut_at == "after_footer_without_summary":
            stream.seek(cut)
            stream.write(end_bytes(b"", 0, 0))
    kept = recover(bag)
    assert footer_summary_start(path) > 0
    with open(path, "rb") as stream:
        reader = make_reader(stream)
        summary = reader.get_summary()
        indexed = [m.log_time for _, _, m in reader.iter_messages()]
    assert summary.statistics.message_count == len(indexed) == kept["bag_0.mcap"]
    xs = read_xs(bag)
    expected = {"mid_chunk": len(scan.chunks) - 2, "mid_message_index": len(scan.chunks) - 1,
                "after_footer_without_summary": len(scan.chunks)}[cut_at]  # fmt: skip
    assert len(summary.chunk_indexes) == expected
    assert xs == [0.1 * k for k in range(len(xs))] and len(xs) == len(indexed) > 300
    assert recover(bag) == {}  # indexed now: nothing more to do
    assert summarize(bag).topics[0].count == len(xs)
    assert OP_CHUNK == 0x06 and OP_MESSAGE_INDEX == 0x07


def _deterministic_bag(folder: Path, arrivals, qos_orders) -> dict[str, str]:
    """Feed ``arrivals`` (topic, data, stamp_ns or None, clock_ns) to a deterministic writer the way
    the lockstep recorder does, with a wall-clock flush between every few messages; sha256 per file."""
    import hashlib

    from aerial_sim.recording.bag import qos_profile_dict

    params = BagWriterParams(chunk_size_bytes=3_000, max_bag_size_bytes=30_000, compression="lz4",
                             flush_period_s=0.05)
    with BagWriter(folder, params, deterministic=True) as writer:
        for topic, qos in qos_orders:
            writer.add_topic(topic, "nav_msgs/msg/Odometry" if "odom" in topic else "std_msgs/msg/Float64MultiArray",
                             [qos_profile_dict(*profile) for profile in qos])
        for index, (topic, data, stamp_ns, clock_ns) in enumerate(arrivals):
            assert writer.hold(topic, data, clock_ns if stamp_ns is None else stamp_ns, stamp_ns is not None)
            writer.release(clock_ns - 30_000_000)
            if index % 7 == 0:
                writer.maybe_flush(force=True)  # wall time: must not cut a chunk
        assert writer.late == 0
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(folder.iterdir())}


def test_deterministic_bags_are_byte_identical_whatever_the_arrival_order(tmp_path):
    """Issue 32: the same messages, arriving in another order across topics, with lockstep re-sends and
    wall-clock flushes at other moments, and QoS profiles discovered in another order, give the same
    files byte for byte; the bag reads back in stamp order with the re-sends written once."""
    import random

    from rosbags.highlevel import AnyReader

    odom, other, commands = "/drone1/ground_truth/odom", "/drone2/ground_truth/odom", "/drone1/motor_commands"
    messages = []
    for k in range(300):
        clock_ns = k * 4_000_000
        messages.append((odom, cdr_odometry(k * 0.004, 0.01 * k), clock_ns, clock_ns))
        messages.append((other, cdr_odometry(k * 0.004, -0.01 * k), clock_ns, clock_ns))
        if k % 50 == 0:  # a lockstep re-send of the period's state
            messages.append((odom, cdr_odometry(k * 0.004, 0.01 * k), clock_ns, clock_ns))
    commands_cdr = bytes([0, 1, 0, 0]) + bytes(12)  # an empty Float64MultiArray: unstamped, logged at its clock
    messages += [(commands, commands_cdr, None, k * 20_000_000) for k in range(60)]
    rng = random.Random(3)
    reliable, best_effort = ("reliable", "volatile", "keep_last", 10), ("best_effort", "volatile", "keep_last", 5)
    bags = []
    for run in range(2):
        # Another interleaving of the topics (each topic's own order kept, as DDS keeps it per writer),
        # every message within 20 ms of sim time of its own clock.
        arrivals = sorted(messages, key=lambda m: (m[3] + rng.randrange(0, 20_000_000), m[0]))
        qos = [(odom, [reliable, best_effort][:: 1 - 2 * run]), (other, [reliable]), (commands, [reliable])]
        bags.append(_deterministic_bag(tmp_path / f"run{run}" / "bag", arrivals, qos[:: 1 - 2 * run]))
    assert bags[0] == bags[1] and len(bags[0]) >= 3, bags  # metadata.yaml and at least two split files
    with AnyReader([tmp_path / "run0" / "bag"]) as reader:
        read = [(connection.topic, t_ns) for connection, t_ns, _ in reader.messages()]
    assert [t for _, t in read] == sorted(t for _, t in read)
    assert sum(topic == odom for topic, _ in read) == 300  # the re-sends once
    assert sum(topic == commands for topic, _ in read) == 60


def test_first_difference_names_the_record_and_the_field_where_two_bags_part(tmp_path):
    """test_lockstep_graph's failure message: where two bags that should be identical first differ (the
    metadata field, or the chunk, message, topic, sequence and byte), not only that their hashes do."""
    from aerial_sim.recording.bag_compare import first_difference

    odom, commands = "/drone1/ground_truth/odom", "/drone1/motor_commands"
    reliable = [("reliable", "volatile", "keep_last", 10)]

    def messages(x_at_100: float, commands_at: int):
        odometry = [(odom, cdr_odometry(k * 0.004, x_at_100 if k == 100 else 0.0), k * 4_000_000, k * 4_000_000)
                    for k in range(200)]
        return odometry + [(commands, bytes([0, 1, 0, 0]) + bytes(12), None, commands_at)]

    for name, arrivals in (("same", messages(0.0, 400_000_000)), ("data", messages(1.0, 400_000_000)),
                           ("logged", messages(0.0, 404_000_000)), ("base", messages(0.0, 400_000_000))):
        _deterministic_bag(tmp_path / name / "bag", sorted(arrivals, key=lambda m: m[3]), [(odom, reliable), (commands, reliable)])
    base = tmp_path / "base" / "bag"
    assert first_difference(base, tmp_path / "same" / "bag") is None
    data = first_difference(base, tmp_path / "data" / "bag")
    assert data.startswith("bag_") and f"{odom} seq 100 log 400000000" in data and "first differing at byte" in data, data
    logged = first_difference(base, tmp_path / "logged" / "bag")
    assert "message_end_time 400000000 vs 404000000" in logged and "Float64MultiArray vs Message" in logged, logged
    metadata = (tmp_path / "same" / "bag" / "metadata.yaml")
    metadata.write_text(metadata.read_text().replace("writer: aerial_sim", "writer: another"))
    assert first_difference(base, tmp_path / "same" / "bag") == (
        "metadata.yaml: /rosbag2_bagfile_information/custom_data/writer: 'aerial_sim' vs 'another'")


def test_the_next_runs_bags_record_the_same_topics_and_start_with_each_latched_topics_last_message(tmp_path):
    """RunBags.take_over (a warm run's new bag, /recorder/new_bag): the topics go on, a latched topic's last
    message comes first (what a new subscriber would get), the configured rates carry over, and each bag
    closes with its own counts and wall-clock file."""
    from aerial_sim.recording.bag import WALL_CLOCK_FILE
    from aerial_sim.recording.rates import CONFIGURED_KEY
    from aerial_sim.recording.recorder import RecorderParams
    from aerial_sim.recording.run_bags import RunBags

    lines: list[str] = []
    params = RecorderParams(write_report=False)
    first = RunBags(params, tmp_path / "run0", deterministic=False, say=lines.append)
    first.add_topic("/scene", "nav_msgs/msg/Odometry", [], latched=True, header_first=True, stamped=True)
    first.add_topic("/odom", "nav_msgs/msg/Odometry", [], latched=False, header_first=True, stamped=True)
    first.writer.custom_data[CONFIGURED_KEY] = '{"/odom": 100.0}'
    for k in range(5):
        first.write("/odom", cdr_odometry(k * 0.01, k), now_ns=k * 10_000_000, received_ns=1_000 + k)
    first.write("/scene", cdr_odometry(0.0, 7.0), now_ns=0, received_ns=2_000)
    second = RunBags(params, tmp_path / "run1", deterministic=False, say=lines.append)
    first.close(clock_ns=40_000_000)
    second.take_over(first)
    second.write("/odom", cdr_odometry(0.0, 0.0), now_ns=0, received_ns=3_000)
    second.close(clock_ns=0)

    def counts(run: str) -> dict:
        info = yaml.safe_load((tmp_path / run / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        return {entry["topic_metadata"]["name"]: entry["message_count"] for entry in info["topics_with_message_count"]}

    assert counts("run0") == {"/scene": 1, "/odom": 5}
    assert counts("run1") == {"/scene": 1, "/odom": 1}
    assert CONFIGURED_KEY in (tmp_path / "run1" / "bag" / "metadata.yaml").read_text()
    assert all((tmp_path / run / WALL_CLOCK_FILE).exists() for run in ("run0", "run1"))  # beside each bag
    assert [line.split(":")[0] for line in lines] == ["[recorder] bag closed"] * 2


def test_a_recording_started_mid_run_starts_at_the_first_sim_time_not_at_0(tmp_path):
    """`aerial_sim record` against a graph at t = 120 s: the latched messages that arrive before the first
    /clock (class names, old /rosout lines) are logged at that /clock, so the bag starts there (they were
    logged at 0: starting_time 0 and a duration of 140 s for 12 s of recording)."""
    from rosbags.highlevel import AnyReader

    from aerial_sim.recording.recorder import RecorderParams
    from aerial_sim.recording.run_bags import RunBags

    bags = RunBags(RecorderParams(write_report=False), tmp_path / "mid", deterministic=False, say=lambda line: None)
    bags.add_topic("/names", "std_msgs/msg/Float64MultiArray", [], latched=True, header_first=False, stamped=False)
    bags.add_topic("/odom", "nav_msgs/msg/Odometry", [], latched=False, header_first=True, stamped=True)
    bags.write("/names", bytes([0, 1, 0, 0]) + bytes(12), now_ns=0, received_ns=1_000)
    bags.write("/odom", cdr_odometry(0.0, 1.0), now_ns=0, received_ns=1_500)  # stamped 0: a start-up line's time
    bags.clock(120_000_000_000, sent_ns=0)
    for k in range(3):
        bags.write("/odom", cdr_odometry(120.0 + k * 0.01, 1.0), now_ns=120_000_000_000 + k * 10_000_000,
                   received_ns=2_000 + k)
    bags.close(clock_ns=120_020_000_000)
    with AnyReader([tmp_path / "mid" / "bag"]) as reader:
        logged = [(connection.topic, t_ns) for connection, t_ns, _ in reader.messages()]
    assert logged[:2] == [("/names", 120_000_000_000), ("/odom", 120_000_000_000)], logged
    info = yaml.safe_load((tmp_path / "mid" / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info["starting_time"]["nanoseconds_since_epoch"] == 120_000_000_000
    assert info["duration"]["nanoseconds"] == 20_000_000
    assert bags.latched["/names"][1] == 120_000_000_000  # a warm run's next bag starts with it at that time


def test_a_recording_whose_clock_never_comes_writes_at_0_instead_of_holding_everything(tmp_path, monkeypatch):
    """use_sim_time without a /clock: what arrives is held for the first sim time only up to a limit (one line
    says so), then written at 0 as before, so memory does not grow with the recording."""
    from rosbags.highlevel import AnyReader

    from aerial_sim.recording import run_bags
    from aerial_sim.recording.recorder import RecorderParams

    monkeypatch.setattr(run_bags, "BEFORE_TIME_LIMIT_BYTES", 10_000)
    said = []
    bags = run_bags.RunBags(RecorderParams(write_report=False), tmp_path / "noclock", deterministic=False,
                            say=said.append)
    bags.add_topic("/odom", "nav_msgs/msg/Odometry", [], latched=False, header_first=False, stamped=False)
    odometry = cdr_odometry(0.0, 1.0)
    count = 3 * 10_000 // len(odometry)
    for k in range(count):
        bags.write("/odom", odometry, now_ns=0, received_ns=1_000 + k)
    assert bags._before_time == [] and len(said) == 1 and "no /clock" in said[0]
    bags.close(clock_ns=0)
    with AnyReader([tmp_path / "noclock" / "bag"]) as reader:
        assert [t_ns for _, t_ns, _ in reader.messages()] == [0] * count


def test_a_latched_topics_first_message_is_logged_at_the_start_whenever_its_publisher_came_up(tmp_path):
    """Deterministic files: the scene markers (latched, unstamped; from a node outside the start gate, as a
    viewer launched on its own against a running graph) sent before the first /clock in one run and after
    /clock 4 ms in another give the same bag, the markers at 0;
    a later message on the topic is logged at the /clock in force when it was sent (ci: the composed run's
    markers came before /clock 4 ms, the other run's after it)."""
    from types import SimpleNamespace

    from rosbags.highlevel import AnyReader

    from aerial_sim.recording.recorder import RecorderParams
    from aerial_sim.recording.run_bags import RunBags

    markers, commands = "/scene_markers", "/drone1/motor_commands"
    unstamped = bytes([0, 1, 0, 0]) + bytes(12)
    files = []
    for run, markers_sent_ns in ((0, 100), (1, 320)):
        folder = tmp_path / f"run{run}"
        bags = RunBags(RecorderParams(write_report=False), folder, deterministic=True, say=lambda line: None,
                       participants=SimpleNamespace(topics=set(), latest={}, observe=lambda topic, stamp: None))
        bags.add_topic(markers, "std_msgs/msg/Float64MultiArray", [], latched=True, header_first=False, stamped=False)
        bags.add_topic(commands, "std_msgs/msg/Float64MultiArray", [], latched=False, header_first=False, stamped=False)
        arrivals = [(200, 0), (300, 4_000_000), (350, None), (markers_sent_ns, "markers"), (390, "again"), (400, 8_000_000)]
        for sent_ns, what in sorted(arrivals, key=lambda arrival: arrival[0]):  # in the order sent
            if isinstance(what, int):
                bags.clock(what, sent_ns)
                bags.release(what)
            else:
                topic = commands if what is None else markers
                bags.write(topic, unstamped, now_ns=0, received_ns=sent_ns, sent_ns=sent_ns)
        bags.close(clock_ns=8_000_000)
        with AnyReader([folder / "bag"]) as reader:
            logged = [(connection.topic, t_ns) for connection, t_ns, _ in reader.messages()]
        assert logged == [(markers, 0), (commands, 4_000_000), (markers, 4_000_000)], logged
        files.append({path.name: path.read_bytes() for path in (folder / "bag").iterdir()})
    assert files[0] == files[1]


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_appending_to_the_chunk_gives_the_mcap_librarys_file_byte_for_byte(tmp_path, compression):
    """recording/mcap_append: a message appended in one struct pack makes the file the library's own
    add_message makes (chunks cut by size, two channels, a log time that goes back, the summary)."""
    import io

    from mcap.writer import CompressionType, Writer

    from aerial_sim.recording.mcap_append import chunk_appender

    files = []
    for fast in (False, True):
        stream = io.BytesIO()
        writer = Writer(stream, chunk_size=4096, compression=CompressionType[compression.upper()])
        writer.start(profile="ros2", library="test")
        schema = writer.register_schema("nav_msgs/msg/Odometry", "ros2msg", b"x")
        channels = [writer.register_channel(f"/t{i}", "cdr", schema) for i in range(2)]
        append = chunk_appender(writer) if fast else writer.add_message
        assert append is not None
        for k in range(400):
            log_ns = 10_000_000 + k * 4_000_000 - (6_000_000 if k % 37 == 0 else 0)
            append(channels[k % 2], log_ns, cdr_odometry(k * 0.004, 0.01 * k), log_ns + 7, k)
        writer.finish()
        files.append(stream.getvalue())
    assert files[0] == files[1] and files[0].count(b"MCAP") >= 2
