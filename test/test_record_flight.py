"""Cross-process: record a synthetic flight with `aerial_sim record`, read it back with rosbags, export it.

One recording (about 12 s of odometry, IMU, barometer, GPS and three 460x320
camera streams at 30 Hz) is shared by the checks below, to keep the suite's
cross-process time small.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml
from PIL import Image as PilImage

from conftest import rclpy_available, requires_ros
from record_fixtures import (
    ALTITUDE_M,
    FLIGHT_TOPICS,
    RADIUS_M,
    RATE_RAD_S,
    FlightPublisher,
    circle_pose,
    start_recorder,
    stop,
)

pytestmark = [pytest.mark.ros, requires_ros]
FLIGHT_S = 12.0
COLOR = "/drone1/camera/color/image_raw"

if rclpy_available():
    from aerial_sim.nodes.ros.transport import use_transport_profile

    use_transport_profile()  # the nodes' Fast DDS profile, also for this test's image publisher


@pytest.fixture(scope="module")
def recorded_flight(tmp_path_factory):
    import rclpy
    from rclpy.node import Node

    tmp = tmp_path_factory.mktemp("flight")
    run_dir = tmp / "run"
    # The synthetic publisher has no rate parameters: the rates come from the command line, the colour
    # camera's deliberately twice what is published.
    rates = ",".join(f"{t}={60.0 if t == COLOR else hz:g}" for t, (_, hz) in FLIGHT_TOPICS.items())
    recorder = start_recorder(run_dir, "--all", "--expected-rates", rates, log_path=tmp / "recorder.log")
    context = rclpy.context.Context()
    rclpy.init(context=context)
    node = Node("flight_publisher", context=context)
    try:
        flight = FlightPublisher(node)
        assert flight.wait_for_subscribers(20.0), (tmp / "recorder.log").read_text()
        import time

        started = time.monotonic()
        flown_s = flight.run(FLIGHT_S)
        flight.real_time_factor = flown_s / (time.monotonic() - started)  # below 1 when the publisher lags (load)
        time.sleep(1.0)  # let the last messages reach the recorder
        code = stop(recorder)
    finally:
        stop(recorder)
        node.destroy_node()
        rclpy.shutdown(context=context)
    log = (tmp / "recorder.log").read_text()
    assert code == 0, log
    return run_dir, dict(flight.counts, real_time_factor=flight.real_time_factor), log


def read_bag(bag_dir):
    from rosbags.highlevel import AnyReader

    types, counts, stamps, log_times = {}, {}, {}, {}
    with AnyReader([bag_dir]) as reader:
        for connection in reader.connections:
            types[connection.topic] = connection.msgtype
        for connection, t_ns, raw in reader.messages():
            msg = reader.deserialize(raw, connection.msgtype)
            topic = connection.topic
            counts[topic] = counts.get(topic, 0) + 1
            log_times.setdefault(topic, []).append(t_ns)
            if hasattr(msg, "header"):
                stamps.setdefault(topic, []).append(msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec)
    return types, counts, stamps, log_times


def test_every_topic_is_recorded_with_its_type_and_count(recorded_flight):
    run_dir, published, log = recorded_flight
    types, counts, stamps, log_times = read_bag(run_dir / "bag")
    report = (run_dir / "recording.txt").read_text().splitlines()
    for topic, (msgtype, hz) in FLIGHT_TOPICS.items():
        assert types.get(topic) == msgtype, f"{topic} missing or wrong type in {types}"
        # Best effort: a busy machine may drop some. Each stream is published at its exact rate, so a drop
        # is a gap in the stamps, and the run report must count every one; more than a tenth is a failure.
        recorded, in_span = counts[topic], round((stamps[topic][-1] - stamps[topic][0]) * hz / 1e9) + 1
        assert published[topic] - 2 <= in_span <= published[topic], f"{topic}: first or last message missing"
        assert recorded >= 0.9 * published[topic], f"{topic}: recorded {recorded} of {published[topic]}\n{log}"
        row = next(line for line in report if line.strip().startswith(topic))
        if in_span > recorded and topic != COLOR:  # (the colour camera's configured rate is not its own)
            assert f"{in_span - recorded} in stamp gaps" in row, (topic, in_span - recorded, row)
        assert np.all(np.diff(stamps[topic]) > 0), f"{topic}: header stamps not increasing"
        assert np.all(np.diff(log_times[topic]) >= 0), f"{topic}: bag times go backwards"
    assert types["/clock"] == "rosgraph_msgs/msg/Clock"
    # Receive times are sim time from /clock: within one second of the published stamps.
    odom = "/drone1/ground_truth/odom"
    assert abs(log_times[odom][-1] - stamps[odom][-1]) < 1e9


def test_metadata_lists_files_and_counts(recorded_flight):
    run_dir, published, _ = recorded_flight
    info = yaml.safe_load((run_dir / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info["storage_identifier"] == "mcap" and info["version"] == 9
    assert all((run_dir / "bag" / name).is_file() for name in info["relative_file_paths"])
    by_topic = {t["topic_metadata"]["name"]: t for t in info["topics_with_message_count"]}
    image = by_topic["/drone1/camera/color/image_raw"]
    assert image["topic_metadata"]["type_description_hash"].startswith("RIHS01_")
    assert image["topic_metadata"]["offered_qos_profiles"][0]["reliability"] == "best_effort"
    assert info["message_count"] == sum(t["message_count"] for t in by_topic.values())


def test_run_summary_reports_the_distance_flown(recorded_flight):
    run_dir, published, _ = recorded_flight
    text = (run_dir / "recording.txt").read_text()
    expected = RADIUS_M * RATE_RAD_S * (published["/drone1/ground_truth/odom"] - 1) / 250.0
    line = next(l for l in text.splitlines() if l.startswith("distance flown (/drone1/ground_truth/odom)"))
    distance = float(line.split(":")[1].split()[0])
    assert distance == pytest.approx(expected, rel=0.02)
    rtf = float(next(l for l in text.splitlines() if l.startswith("real-time factor")).split(":")[1])
    # The publisher paces itself to real time; a loaded machine slows it, and the summary must say so.
    assert rtf == pytest.approx(published["real_time_factor"], rel=0.05)
    plot = np.asarray(PilImage.open(run_dir / "trajectory.png").convert("L"))
    assert plot.shape[0] > 200 and plot.std() > 5  # a drawn figure, not a blank canvas


def test_run_summary_flags_a_stream_below_its_configured_rate(recorded_flight):
    run_dir, _, _ = recorded_flight
    info = yaml.safe_load((run_dir / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    configured = json.loads(info["custom_data"]["configured_rates_hz"])  # stored for any later report
    assert configured[COLOR] == 60.0 and configured["/drone1/imu/data"] == 200.0
    text = (run_dir / "recording.txt").read_text()
    color_row = next(line for line in text.splitlines() if line.strip().startswith(COLOR))
    assert "LOW: " in color_row and "Hz of 60 Hz configured" in color_row
    assert any(line.startswith("LOW: ") and COLOR in line for line in text.splitlines())
    assert any(line.startswith("messages known missed: ") for line in text.splitlines())


def test_export_gives_images_with_poses(recorded_flight, tmp_path):
    from aerial_sim.cli.export import main as export_main
    from aerial_sim.recording.export import iter_frames

    run_dir, published, _ = recorded_flight
    assert export_main([str(run_dir), str(tmp_path), "--no-progress"]) == 0
    depth_topic = "/drone1/camera/depth/image_raw"
    frames = list(iter_frames(tmp_path, depth_topic))
    # Every recorded image, once (best effort: a loaded machine drops some in transport, which the report's
    # test above counts; ci of 2026-11-27 recorded 350 of 361).
    metadata = yaml.safe_load((run_dir / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    recorded = {entry["topic_metadata"]["name"]: entry["message_count"] for entry in metadata["topics_with_message_count"]}
    assert len(frames) == recorded[depth_topic] >= 0.9 * published[depth_topic]
    folder = tmp_path / "images" / "drone1" / "camera" / "depth" / "image_raw"
    first = frames[0]
    depth_png = np.asarray(PilImage.open(folder / first["png"]))
    depth_npy = np.load(folder / first["npy"])
    assert depth_png.dtype == np.uint16 and depth_png.shape == (320, 460)
    assert depth_npy.dtype == np.float32 and depth_npy.shape == (320, 460)
    assert np.all(depth_png[:, :5] == 0)  # no return stays 0
    assert np.abs(depth_png[:, 5:] / 1000.0 - depth_npy[:, 5:]).max() <= 0.0005 + 1e-6
    color = np.asarray(PilImage.open(tmp_path / "images/drone1/camera/color/image_raw" / "000000.png"))
    assert color.shape == (320, 460, 3) and color[0, 100, 0] == 100 and color[0, 100, 2] == 200
    segmentation = np.asarray(PilImage.open(tmp_path / "images/drone1/camera/segmentation/image_raw/000000.png"))
    assert segmentation.dtype == np.uint16 and segmentation.max() == 1000
    # A ground-truth pose for every image, matching the circle at the image's stamp.
    for row in frames:
        assert row["x"] != "nan" and float(row["pose_dt_s"]) < 0.01
        (x, y, z), (qw, _, _, qz) = circle_pose(int(row["stamp_ns"]) * 1e-9)
        assert math.dist((float(row["x"]), float(row["y"]), float(row["z"])), (x, y, z)) < 1e-3
        assert abs(abs(float(row["qw"]) * qw + float(row["qz"]) * qz) - 1.0) < 1e-6
    imu = np.genfromtxt(tmp_path / "sensors/drone1/imu/data.csv", delimiter=",", names=True)
    assert imu["linear_accelerationz"].mean() == pytest.approx(9.80665)
    assert np.all(imu["orientation_covariance8"] == 0)
    calibration = yaml.safe_load((tmp_path / "camera_info/drone1/camera/depth/camera_info.yaml").read_text())
    assert calibration["width"] == 460 and calibration["k"][0] == pytest.approx(230.0)
    assert float(frames[0]["z"]) == pytest.approx(ALTITUDE_M)
