"""Cross-process: a recorder whose disk fills up stops recording with one ERROR and leaves a readable bag.

The disk is a real 20 MiB tmpfs mounted for the test (root can mount one); where
mounting is not allowed, the recorder runs with a 20 MiB file-size limit
(``RLIMIT_FSIZE``: writes past it fail with EFBIG instead of ENOSPC, through the
same code path). Read back with rosbags and ``aerial_sim export`` as they are,
without ``--recover``.
"""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
import time

import pytest

from conftest import rclpy_available, requires_ros
from record_fixtures import REPO, FlightPublisher, stop

pytestmark = [pytest.mark.ros, requires_ros]

if rclpy_available():
    from aerial_sim.nodes.ros.transport import use_transport_profile

    use_transport_profile()

DISK_MIB = 20
TOPICS = {
    "/drone1/ground_truth/odom": ("nav_msgs/msg/Odometry", 250.0),
    "/drone1/camera/depth/image_raw": ("sensor_msgs/msg/Image", 30.0),  # 589 kB frames: 17 MB/s
}


@pytest.fixture
def small_disk(tmp_path):
    """A folder on a 20 MiB disk, and the limit to give the recorder where none could be mounted."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MIB}m", "tmpfs", str(disk)],
                             capture_output=True).returncode == 0  # fmt: skip
    yield disk, (None if mounted else DISK_MIB * 1024 * 1024)
    if mounted:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_full_disk_stops_the_recording_with_one_error_and_a_bag_every_reader_takes(tmp_path, small_disk):
    import rclpy
    from rclpy.node import Node
    from rosbags.highlevel import AnyReader

    disk, file_limit = small_disk

    def limit_file_size():
        if file_limit:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    run_dir = disk / "run"
    log_path = tmp_path / "recorder.log"
    with open(log_path, "w") as log:
        recorder = subprocess.Popen(
            [sys.executable, "-m", "aerial_sim", "record", "-o", str(run_dir), "--all", "--compression", "none",
             "--no-report"],
            stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True, preexec_fn=limit_file_size,
        )  # fmt: skip
    context = rclpy.context.Context()
    rclpy.init(context=context)
    node = Node("filling_flight", context=context)
    try:
        flight = FlightPublisher(node, topics=TOPICS)
        assert flight.wait_for_subscribers(20.0), log_path.read_text()
        flight.run(2.5)  # ~40 MB offered to a 20 MiB disk
        time.sleep(1.0)
        assert recorder.poll() is None, log_path.read_text()  # still running: the graph goes on
        assert all(p.get_subscription_count() > 0 for p in flight.pubs.values())
    finally:
        code = stop(recorder)
        node.destroy_node()
        rclpy.shutdown(context=context)
    text = log_path.read_text()
    assert code == 0, text
    errors = [line for line in text.splitlines() if "ERROR" in line]
    assert len(errors) == 1, text
    assert "recording stopped: cannot write" in errors[0] and ("ENOSPC" in errors[0] or "EFBIG" in errors[0])
    bag = run_dir / "bag"
    from aerial_sim.recording.mcap_index import footer_summary_start

    assert footer_summary_start(bag / "bag_0.mcap") > 0  # indexed as it is (the reserve made room for it)
    with AnyReader([bag]) as reader:
        counts, last_ns = {}, -1
        for connection, t_ns, raw in reader.messages():
            reader.deserialize(raw, connection.msgtype)
            counts[connection.topic] = counts.get(connection.topic, 0) + 1
            assert t_ns >= last_ns
            last_ns = t_ns
    # 20 MiB hold some 30 depth frames and the odometry of their second or so.
    assert counts["/drone1/camera/depth/image_raw"] >= 15 and counts["/drone1/ground_truth/odom"] >= 100, counts
    out = tmp_path / "dataset"
    exported = subprocess.run([sys.executable, "-m", "aerial_sim", "export", str(run_dir), str(out), "--no-progress"],
                              capture_output=True, text=True, cwd=REPO, timeout=120)  # fmt: skip
    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert len(list(out.rglob("*.npy")) + list(out.rglob("*.png"))) >= counts["/drone1/camera/depth/image_raw"]
