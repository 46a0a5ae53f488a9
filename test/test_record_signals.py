"""Cross-process: a recorder stopped in the middle of a run leaves a bag that rosbags can read.

SIGINT (Ctrl-C) and SIGTERM (launch stop) close the bag properly, split files
included; SIGKILL leaves what was flushed, which `aerial_sim record --recover`
turns back into a readable bag.
"""

from __future__ import annotations

import signal
import threading

import pytest
import yaml

from conftest import rclpy_available, requires_ros
from record_fixtures import FlightPublisher, start_recorder, stop

pytestmark = [pytest.mark.ros, requires_ros]

if rclpy_available():
    from aerial_sim.nodes.ros.transport import use_transport_profile

    use_transport_profile()

SMALL_IMAGES = (160, 120)  # 77 kB depth frames: enough to fill 300 kB files quickly
TOPICS = {
    "/drone1/ground_truth/odom": ("nav_msgs/msg/Odometry", 250.0),
    "/drone1/camera/depth/image_raw": ("sensor_msgs/msg/Image", 30.0),
}


def fly_and_interrupt(tmp_path, sig, *recorder_args, kill_after_s=2.5):
    """Fly and send ``sig`` to the recorder once ``kill_after_s`` of the flight is published (sim time, not
    wall time: a loaded machine's publisher falls behind the wall clock, and a signal at 2.5 s of wall time
    then came after much less of the flight), then go on flying in real time until the recorder has closed
    its bag or exited: it stops while its topics still stream in. (A flight of a fixed 4 s instead ended
    before a recorder slowed down by a loaded machine had acted on the signal: the bag held all of it.)"""
    import rclpy
    from rclpy.node import Node

    run_dir = tmp_path / "run"
    recorder = start_recorder(run_dir, *recorder_args, log_path=tmp_path / "recorder.log")
    context = rclpy.context.Context()
    rclpy.init(context=context)
    node = Node("interrupted_flight", context=context)
    try:
        flight = FlightPublisher(node, image_size=SMALL_IMAGES, topics=TOPICS)
        # The recorder process starting (its imports, its subscriptions discovered): up to a minute at load 30.
        assert flight.wait_for_subscribers(60.0), (tmp_path / "recorder.log").read_text()
        killer = threading.Thread(target=stop, args=(recorder, sig))  # signal, then wait for the exit (30 s, then SIGKILL)
        log = tmp_path / "recorder.log"
        # Until the bag is closed (its report and plot follow) or the recorder has gone.
        closed = lambda: not killer.is_alive() or "bag closed" in log.read_text()  # noqa: E731
        flight.run(120.0, at=(kill_after_s, killer.start), until=closed)
        killer.join()
    finally:
        stop(recorder)
        node.destroy_node()
        rclpy.shutdown(context=context)
    return run_dir, recorder.returncode, (tmp_path / "recorder.log").read_text()


def read_counts(bag_dir):
    from rosbags.highlevel import AnyReader

    counts = {}
    with AnyReader([bag_dir]) as reader:
        for connection, _, raw in reader.messages():
            reader.deserialize(raw, connection.msgtype)
            counts[connection.topic] = counts.get(connection.topic, 0) + 1
    return counts


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_mid_run_closes_a_valid_split_bag(tmp_path, sig):
    # Plain chunks: the synthetic images compress to almost nothing with the default lz4, and this
    # checks splitting (compressed bags are read back in test_record_bag.py and test_record_flight.py).
    run_dir, code, log = fly_and_interrupt(tmp_path, sig, "--all", "--max-bag-size", "300000", "--compression", "none")
    assert code == 0, log
    info = yaml.safe_load((run_dir / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    files = info["relative_file_paths"]
    assert len(files) >= 3 and files[:2] == ["bag_0.mcap", "bag_1.mcap"], (files, log)  # the log says what was missed
    for name in files:
        size = (run_dir / "bag" / name).stat().st_size
        assert size <= 300000 + 100000, f"{name} is {size} bytes"  # split near the limit (+ one chunk's index)
    counts = read_counts(run_dir / "bag")
    recorded = {t["topic_metadata"]["name"]: t["message_count"] for t in info["topics_with_message_count"]}
    assert counts == {topic: n for topic, n in recorded.items() if n}
    # Stopped in the middle: what came before the signal (2.5 s of the flight) is in the bag, and the recorder
    # exited on the signal (code 0 above, not stop()'s SIGKILL 30 s later) while the flight still streamed in.
    assert counts.get("/drone1/ground_truth/odom", 0) > 250 * 1.5, (counts, log)
    assert (run_dir / "recording.txt").is_file() and (run_dir / "trajectory.png").is_file()


def test_killed_recorder_leaves_a_recoverable_bag(tmp_path):
    from aerial_sim.cli.record import main as record_main

    run_dir, code, log = fly_and_interrupt(tmp_path, signal.SIGKILL, "--all", kill_after_s=3.0)
    assert code == -signal.SIGKILL
    assert record_main(["--recover", str(run_dir)]) == 0
    counts = read_counts(run_dir / "bag")
    # Flushed at least once a second: at most about 1 s of the 3 s before the kill is lost.
    assert counts.get("/drone1/ground_truth/odom", 0) > 250 * 1.5, (counts, log)
    assert counts.get("/drone1/camera/depth/image_raw", 0) > 30 * 1.5, (counts, log)
