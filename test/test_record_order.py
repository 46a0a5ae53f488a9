"""Cross-process: the recorder writes what it takes in batches in the order it arrived.

The recorder takes the messages of every recorded topic together, every ``take_period_s``
(one thread's round instead of an executor callback per message). Each message must still get
the sim time of the ``/clock`` received just before it, as ``ros2 bag record --use-sim-time``
gives it, however the topics interleave within one batch.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO, rclpy_available, requires_ros, spin_until
from record_fixtures import stop

pytestmark = [pytest.mark.ros, requires_ros]

if rclpy_available():
    from aerial_sim.nodes.ros.transport import use_transport_profile

    use_transport_profile()

PROBES = ("/order_probe/a", "/order_probe/b")
ROUNDS = 40


def test_interleaved_topics_taken_together_keep_the_clock_received_before_each(ros_node, tmp_path):
    from rclpy.duration import Duration
    from rosbags.highlevel import AnyReader
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import Header

    from aerial_sim.nodes.ros.qos import LOCKSTEP_QOS

    log = open(tmp_path / "recorder.log", "w")
    recorder = subprocess.Popen(
        [sys.executable, "-m", "aerial_sim.nodes.recorder", "--ros-args", "-p", "use_sim_time:=true",
         "-p", f"output_dir:={tmp_path / 'run'}", "-p", f"topics:=/clock {' '.join(PROBES)}",
         "-p", "take_period_s:=0.1", "-p", "write_report:=false"],
        stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
    try:
        clock = ros_node.create_publisher(Clock, "/clock", LOCKSTEP_QOS)
        probes = [ros_node.create_publisher(Header, topic, LOCKSTEP_QOS) for topic in PROBES]
        publishers = [clock, *probes]
        assert spin_until(ros_node, lambda: all(p.get_subscription_count() for p in publishers), 30.0), \
            (tmp_path / "recorder.log").read_text()
        spin_until(ros_node, lambda: False, 1.0)  # both directions matched
        for k in range(1, ROUNDS + 1):  # all within a few ms: a batch or two of the recorder's
            clock_message = Clock()
            clock_message.clock.sec = k
            clock.publish(clock_message)
            probes[k % 2].publish(Header(frame_id=str(k)))  # each probe message names the /clock before it
        # Every message in the recorder's reader (reliable: acknowledged) before it is stopped; it takes what
        # arrived once more as it closes. (With a fixed second here, a recorder held up 2 s as the messages
        # came was stopped without 15 of them.)
        assert all(p.wait_for_all_acked(Duration(seconds=30)) for p in publishers), \
            (tmp_path / "recorder.log").read_text()
    finally:
        stop(recorder)
        log.close()
    with AnyReader([tmp_path / "run" / "bag"]) as reader:
        stamped = [(c.topic, int(reader.deserialize(raw, c.msgtype).frame_id), t)
                   for c, t, raw in reader.messages() if c.topic in PROBES]
    assert len(stamped) == ROUNDS, (tmp_path / "recorder.log").read_text()
    assert "while stopping" not in (tmp_path / "recorder.log").read_text()  # it stops as cleanly as it records
    for topic, k, log_time_ns in stamped:
        assert log_time_ns == k * 1_000_000_000, f"{topic} message {k} stamped {log_time_ns} ns, not {k} s"
