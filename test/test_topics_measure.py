"""`aerial_sim topics` measuring and formatting, without a ROS graph.

The live check (a launched talker listed with its rate) is in test_launcher_process.py,
which already has the talker running.
"""

from __future__ import annotations

import fnmatch
import subprocess
import sys

import numpy as np
import pytest

from aerial_sim.cli.topics import ClockMeter, RateMeter, TopicRow, format_table, in_namespace, message_class


def test_rate_is_arrivals_over_their_own_span_whatever_the_window():
    rng = np.random.default_rng(7)
    period_s = 1.0 / 250.0
    # 250 Hz with 0.5 ms arrival jitter, first message 1.3 s into the window.
    arrivals = 1.3 + np.arange(500) * period_s + rng.normal(0.0, 5e-4, 500)
    meter = RateMeter()
    for t in np.sort(arrivals):
        meter.record(float(t))
    # Span error is two jitter draws: std sqrt(2)*0.5 ms over ~2 s, i.e. ~0.04 % of the rate.
    assert meter.rate_hz() == pytest.approx(250.0, rel=2e-3)


def test_fewer_than_two_arrivals_give_no_rate():
    meter = RateMeter()
    assert meter.rate_hz() is None
    meter.record(1.0)
    assert meter.rate_hz() is None and meter.count == 1


def test_clock_speed_is_sim_seconds_per_wall_second():
    clock = ClockMeter()
    for wall in np.arange(0.0, 2.0, 0.01):
        clock.record(100.0 + wall, 5.0 + 4.0 * wall)
    assert clock.speed() == pytest.approx(4.0)
    assert ClockMeter().speed() is None


def test_table_shows_wall_rates_and_per_sim_second_rates_when_clock_known():
    imu, silent, latched = RateMeter(), RateMeter(), RateMeter()
    for i in range(201):
        imu.record(i / 200.0)  # 200 Hz of wall time
    latched.record(0.5)
    rows = [
        TopicRow("/drone1/imu/data", ["sensor_msgs/msg/Imu"], 1, imu),
        TopicRow("/drone1/custom", ["my_pkg/msg/Thing"], 2, None),
        TopicRow("/drone1/motor_commands", ["std_msgs/msg/Float64MultiArray"], 0, silent),
        TopicRow("/robot_description", ["std_msgs/msg/String"], 1, latched),
    ]
    lines = format_table(rows, sim_speed=2.0).splitlines()
    assert lines[0].split() == ["topic", "type", "pubs", "Hz", "(wall)", "Hz", "(sim)"]
    by_topic = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert by_topic["/drone1/imu/data"] == ["sensor_msgs/msg/Imu", "1", "200.0", "100.0"]
    assert by_topic["/drone1/custom"] == ["my_pkg/msg/Thing", "2", "?", "?"]
    assert by_topic["/drone1/motor_commands"][-2:] == ["0", "0"]
    assert by_topic["/robot_description"][-4:] == ["1", "msg", "1", "msg"]
    assert [line.split()[0] for line in lines[1:]] == sorted(by_topic)
    assert "(sim)" not in format_table(rows, sim_speed=None)


def test_namespace_filter_matches_whole_segments():
    assert in_namespace("/drone1/imu/data", "drone1") and in_namespace("/drone1/imu/data", "/drone1/")
    assert not in_namespace("/drone10/imu/data", "drone1")
    assert in_namespace("/clock", None) and in_namespace("/clock", "/")


def test_message_class_imports_installed_types_only():
    from std_msgs.msg import String

    assert message_class("std_msgs/msg/String") is String
    assert message_class("no_such_pkg/msg/Thing") is None
    assert message_class("std_msgs/msg/NoSuchType") is None
    assert message_class("not a type") is None


def test_an_empty_graph_is_reported_with_exit_status_1():
    options = ["--namespace", "/nobody_here", "--discovery", "0", "--duration", "0.3"]
    done = subprocess.run(
        [sys.executable, "-m", "aerial_sim", "topics", *options], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no topics found under /nobody_here" in done.stderr


def test_a_stream_below_its_configured_sim_time_rate_is_flagged_low():
    camera, imu, silent = RateMeter(), RateMeter(), RateMeter()
    for i in range(21):
        camera.record(i / 5.0)  # 5 Hz of wall time = 10 Hz of sim time at half speed
    for i in range(201):
        imu.record(i / 100.0)  # 100 Hz of wall time = 200 Hz of sim time
    rows = [
        TopicRow("/drone1/camera/color/image_raw", ["sensor_msgs/msg/Image"], 1, camera, configured_hz=30.0),
        TopicRow("/drone1/imu/data", ["sensor_msgs/msg/Imu"], 1, imu, configured_hz=200.0),
        TopicRow("/drone1/gps/fix", ["sensor_msgs/msg/NavSatFix"], 1, silent, configured_hz=50.0),
        TopicRow("/drone1/cmd_pose", ["geometry_msgs/msg/PoseStamped"], 1, RateMeter()),
    ]
    lines = format_table(rows, sim_speed=0.5).splitlines()
    assert lines[0].split()[-1] == "configured"
    by_topic = {line.split()[0]: line for line in lines[1:]}
    assert by_topic["/drone1/camera/color/image_raw"].endswith("30  LOW: 10.0 Hz of 30 Hz configured")
    assert by_topic["/drone1/imu/data"].endswith("200.0         200")  # at its rate: no flag
    assert by_topic["/drone1/gps/fix"].endswith("LOW: nothing received, 50 Hz configured")
    assert "LOW" not in by_topic["/drone1/cmd_pose"]


def test_topics_made_only_for_a_subscriber_are_listed_unmeasured():
    """`aerial_sim topics` subscribed to the camera's label topics, so the camera rendered them all and the
    table showed it at 15.9 of 30 Hz (a recording of the same graph without them: 30.0 Hz). Now they are
    listed with '-' (their configured rate kept, no LOW), and the camera's own images are still measured."""
    from aerial_sim.cli.topics import on_demand_patterns

    patterns = on_demand_patterns()
    assert "/*/camera/normals/image_raw" in patterns and "/*/camera/depth/points" in patterns
    assert not any(fnmatch.fnmatchcase("/drone1/camera/color/image_raw", p) for p in patterns)
    assert "/parameter_events" not in patterns  # not made on demand: measured as before
    meter = RateMeter()
    for k in range(31):
        meter.record(k / 30)
    rows = [TopicRow("/drone1/camera/color/image_raw", ["sensor_msgs/msg/Image"], 1, meter, configured_hz=30.0),
            TopicRow("/drone1/camera/normals/image_raw", ["sensor_msgs/msg/Image"], 1, None, configured_hz=30.0,
                     measured=False)]
    lines = format_table(rows, sim_speed=1.0).splitlines()
    normals = next(line for line in lines if "normals" in line).split()
    assert normals[-3:] == ["-", "-", "30"], normals
    assert "30.0" in next(line for line in lines if "color" in line)
