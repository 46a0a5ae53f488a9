"""Honest run summaries (issue 11): streams below their configured sim-time rate are flagged, misses counted.

Pure tests: stamps in, flags out; one bag written with the bag writer and summarized (no ROS graph).
"""

from __future__ import annotations

import numpy as np
import pytest

from aerial_sim.config import ParamsError
from aerial_sim.recording.bag import BagWriter
from aerial_sim.recording.rates import (
    CONFIGURED_KEY,
    LOST_KEY,
    agreed_rate,
    configured_rate_hz,
    encode_table,
    parse_rate_table,
    rate_from_table,
    stream_health,
)
from aerial_sim.recording.recorder import RecorderParams
from aerial_sim.recording.summary import summarize
from conftest import requires_ros
from test_record_bag import cdr_odometry

NS = 1_000_000_000


def frame_stamps(rate_hz: float, seconds: float, start_s: float = 0.0) -> list[int]:
    return [int(round((start_s + k / rate_hz) * NS)) for k in range(int(seconds * rate_hz) + 1)]


def test_a_camera_rendering_every_third_frame_is_flagged_low_with_its_missed_frames():
    every_frame = frame_stamps(30.0, 10.0)  # 301 instants k/30 s
    delivered = every_frame[::3]  # what a camera that keeps up with 10 Hz of sim time stamps
    health = stream_health("/drone1/camera/color/image_raw", delivered, configured_hz=30.0)
    assert health.low
    assert health.delivered_hz == pytest.approx(10.0)
    assert health.gap_missed == len(every_frame) - len(delivered)  # 200 frames never rendered
    assert health.flag() == "LOW: 10.0 Hz of 30 Hz configured; 200 missed (200 in stamp gaps)"


def test_a_stream_at_its_rate_is_not_flagged_whatever_when_it_started_or_how_often_it_was_resent():
    stamps = frame_stamps(200.0, 5.0, start_s=3.7)  # the recording began 3.7 s into the run
    resent = stamps + stamps[100:140]  # lockstep re-sends a period's message while it waits
    health = stream_health("/drone1/imu/data", resent, configured_hz=200.0)
    assert not health.low and health.missed == 0 and health.flag() == ""
    assert health.samples == len(stamps)
    silent = stream_health("/drone1/gps/fix", [], configured_hz=50.0)  # a publisher that never delivered
    assert silent.low and silent.flag() == "LOW: 0 messages of 50 Hz configured"


def test_a_short_gap_is_counted_but_only_a_rate_short_by_more_than_5_percent_is_low():
    stamps = frame_stamps(250.0, 10.0)
    del stamps[1000:1060]  # 0.24 s of odometry lost: 60 of 2501 samples, 2.4 % of the rate
    health = stream_health("/drone1/ground_truth/odom", stamps, configured_hz=250.0, lost=7)
    assert not health.low
    assert health.gap_missed == 60 and health.lost == 7 and health.missed == 67
    assert health.flag() == "67 missed (60 in stamp gaps, 7 lost in transport)"


def test_unstamped_streams_count_every_message_received_in_sim_time():
    # motor_commands have no header: receive times, quantized to the 4 ms /clock, repeat.
    received = np.arange(0, 5 * NS, 4_000_000)  # 1250 control periods
    every_other = received[::2].tolist()  # a controller skipping every second period
    health = stream_health("/drone1/motor_commands", every_other + every_other[:10], 250.0, stamped=False)
    assert health.samples == len(every_other) + 10  # equal receive times are still distinct messages
    assert health.low and health.delivered_hz == pytest.approx(127.0, rel=0.01)
    assert health.gap_missed == pytest.approx(625 - 10, abs=2)


def test_a_streams_configured_rate_is_its_publishers_rate_parameter():
    physics = {"rate_hz": 1000.0, "publish_rate_hz": 250.0, "ground_truth_rate_hz": 0.0}
    assert configured_rate_hz("/clock", physics) == 250.0  # not the 1000 Hz step rate
    assert configured_rate_hz("/drone1/ground_truth/odom", physics) == 250.0
    assert configured_rate_hz("/drone1/ground_truth/odom", {**physics, "ground_truth_rate_hz": 125.0}) == 125.0
    assert configured_rate_hz("/clock", {**physics, "ground_truth_rate_hz": 125.0}) == 250.0
    # A fleet's ground truth in one message comes at the ground-truth rate too.
    assert configured_rate_hz("/swarm/state", {**physics, "ground_truth_rate_hz": 50.0}) == 50.0
    assert configured_rate_hz("/drone3/rotors", {**physics, "ground_truth_rate_hz": 50.0}) == 50.0
    # The controllers' one message per /swarm/state: no parameter of theirs says that rate.
    assert configured_rate_hz("/swarm/motor_commands", {"rate_hz": 250.0}) is None
    assert configured_rate_hz("/drone1/camera/color/image_raw", {"rate_hz": 30}) == 30.0  # an integer parameter
    assert configured_rate_hz("/drone1/lidar/points", {"rotations_per_second": 10.0}) == 10.0
    assert configured_rate_hz("/drone1/camera/depth/image_raw", {"rate_hz": None}) is None  # depth noise
    assert agreed_rate([30.0, 30.0]) == 30.0 and agreed_rate([30.0, 15.0]) is None and agreed_rate([None]) is None


def test_expected_rates_name_streams_whose_publisher_has_no_rate_parameter():
    table = parse_rate_table("/*/camera/depth/image_raw=30, /drone2/imu/data=100")
    assert rate_from_table("/drone1/camera/depth/image_raw", table) == 30.0
    assert rate_from_table("/drone2/imu/data", table) == 100.0 and rate_from_table("/drone1/imu/data", table) is None
    assert parse_rate_table("none") == {}
    with pytest.raises(ParamsError, match="TOPIC=HZ"):
        RecorderParams(expected_rates="/drone1/imu/data")
    for bad in ("0", "inf", "nan", "fast"):
        with pytest.raises(ParamsError, match="must be a"):
            RecorderParams(expected_rates=f"/drone1/imu/data={bad}")
    # a publisher answering an infinite or NaN rate parameter leaves its stream unrated
    assert configured_rate_hz("/drone1/imu/data", {"rate_hz": float("inf")}) is None
    assert configured_rate_hz("/drone1/imu/data", {"rate_hz": float("nan"), "publish_rate_hz": 50.0}) == 50.0


def test_run_report_flags_a_stream_below_the_rate_the_recorder_stored(tmp_path):
    topic = "/drone1/ground_truth/odom"
    with BagWriter(tmp_path / "bag") as writer:
        writer.add_topic(topic, "nav_msgs/msg/Odometry")
        writer.custom_data[CONFIGURED_KEY] = encode_table({topic: 250.0})
        writer.custom_data[LOST_KEY] = encode_table({topic: 3})
        for k in range(0, 500, 2):  # stamps 8 ms apart: 125 Hz delivered of 250 configured
            writer.write(topic, cdr_odometry(k / 250.0, 0.01 * k), k * 4_000_000)
    summary = summarize(tmp_path / "bag")
    assert [h.topic for h in summary.low_streams] == [topic]
    assert summary.missed == 249 + 3
    report = summary.text()  # what write_run_report puts in recording.txt
    assert f"LOW: 1 of 1 rated streams below 95% of their configured sim-time rate: {topic} (125.0 Hz of 250 Hz)" in report
    assert "messages known missed: 252 (249 in stamp gaps, 3 lost in transport)" in report
    odometry_row = next(line for line in report.splitlines() if line.strip().startswith(topic))
    assert odometry_row.endswith("LOW: 125.0 Hz of 250 Hz configured; 252 missed (249 in stamp gaps, 3 lost in transport)")


@pytest.mark.parametrize("bad", [0.0, -0.002, float("nan"), float("inf"), 1e9, 0.5])
def test_a_take_period_that_is_not_a_short_positive_wait_is_refused_in_one_line(bad):
    """The recorder writes what arrived every take_period_s; a lockstep clock waits for those rounds."""
    with pytest.raises(ParamsError, match="take_period_s"):
        RecorderParams(take_period_s=bad)
    assert RecorderParams(take_period_s=0.1).take_period_s == 0.1


@requires_ros
@pytest.mark.ros
def test_the_recorder_asks_fast_dds_for_no_message_lost_events(ros_node):
    """Fast DDS's message-lost event deadlocks a reader under loss (its take locks the event, then the reader;
    its receive thread the other way round): a recorder stuck there ignored every stop signal, found here on
    2026-11-27. Under it the recorder's subscriptions carry no such event; another middleware's do."""
    from rclpy.event_handler import QoSSubscriptionEventType
    from rclpy.qos import QoSProfile
    from std_msgs.msg import String

    from aerial_sim.nodes._recorder.subscriptions import counts_transport_losses, subscribe_raw

    assert not counts_transport_losses("rmw_fastrtps_cpp") and counts_transport_losses("rmw_cyclonedds_cpp")
    subscription = subscribe_raw(ros_node, ros_node, String, "/message_lost_probe", QoSProfile(depth=5), on_lost=print)
    try:
        events = {handler.event_type for handler in subscription.event_handlers}
        assert QoSSubscriptionEventType.RCL_SUBSCRIPTION_MESSAGE_LOST not in events, events
    finally:
        ros_node.destroy_subscription(subscription)
