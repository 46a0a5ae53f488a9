"""The depth noise node across processes: ideal depth + segmentation pairs in, image_raw out."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO, requires_ros, spin_until

pytestmark = [requires_ros, pytest.mark.ros]

HEIGHT, WIDTH = 120, 160


def image(stamp_s: int, encoding: str, pixels: np.ndarray, frame: str = "drone1/camera_depth_optical_frame"):
    from sensor_msgs.msg import Image

    message = Image(height=pixels.shape[0], width=pixels.shape[1], encoding=encoding, is_bigendian=False,
                    step=pixels.shape[1] * pixels.itemsize)
    message.header.stamp.sec = stamp_s
    message.header.frame_id = frame
    message.data = pixels.tobytes()
    return message


def test_node_pairs_frames_by_stamp_and_publishes_noisy_depth_with_the_same_header(ros_node, tmp_path):
    from sensor_msgs.msg import Image

    from aerial_sim.nodes.ros.qos import LOCKSTEP_QOS

    log = open(tmp_path / "depth_noise.log", "w")
    node = subprocess.Popen(
        [sys.executable, "-m", "aerial_sim.nodes.depth_noise", "--ros-args", "-r", "__ns:=/drone1",
         "-p", "lockstep:=true", "-p", "seed:=4", "-p", "fill_rate_error:=0.02", "-p", "use_sim_time:=true"],
        stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
    )
    try:
        # In lockstep its output enters the graph only once both inputs are connected: the physics
        # node, which waits to read every output, then cannot start before depth noise reads the camera.
        output_published = lambda: ros_node.count_publishers("/drone1/camera/depth/image_raw") > 0
        node_up = lambda: ros_node.count_subscribers("/drone1/camera/segmentation/image_raw") > 0
        assert spin_until(ros_node, node_up, timeout_s=20), (tmp_path / "depth_noise.log").read_text()
        depth_pub = ros_node.create_publisher(Image, "/drone1/camera/depth/image_ideal", LOCKSTEP_QOS)
        assert not spin_until(ros_node, output_published, timeout_s=1.5)
        seg_pub = ros_node.create_publisher(Image, "/drone1/camera/segmentation/image_raw", LOCKSTEP_QOS)
        received = []
        ros_node.create_subscription(Image, "/drone1/camera/depth/image_raw", received.append, LOCKSTEP_QOS)
        connected = lambda: (depth_pub.get_subscription_count() and seg_pub.get_subscription_count()
                             and ros_node.count_publishers("/drone1/camera/depth/image_raw"))
        assert spin_until(ros_node, connected, timeout_s=20), (tmp_path / "depth_noise.log").read_text()

        depth = np.full((HEIGHT, WIDTH), 4.0, np.float32)
        segmentation = np.full((HEIGHT, WIDTH), 7, np.uint16)  # not in any table: default m = 0.63
        depth_pub.publish(image(1, "32FC1", depth))
        seg_pub.publish(image(1, "mono16", segmentation))
        seg_pub.publish(image(2, "mono16", segmentation))  # partner arrives second this time
        depth_pub.publish(image(2, "32FC1", depth))
        seg_pub.publish(image(3, "mono16", segmentation[:, :10]))  # size mismatch: warned and skipped
        depth_pub.publish(image(3, "32FC1", depth))
        depth_pub.publish(image(4, "32FC1", depth))  # a partner that never comes: nothing published
        assert spin_until(ros_node, lambda: len(received) >= 2, timeout_s=10)
        spin_until(ros_node, lambda: False, timeout_s=1.0)
        assert node.poll() is None, "the node died on a bad pair"
        # Sim time from the stamps it is given (InputStampClock), not from a /clock subscription of its own.
        assert ros_node.count_subscribers("/clock") == 0

        assert [m.header.stamp.sec for m in received] == [1, 2]
        for message in received:
            assert message.header.frame_id == "drone1/camera_depth_optical_frame"
            assert (message.encoding, message.height, message.width) == ("32FC1", HEIGHT, WIDTH)
            noisy = np.frombuffer(message.data, np.float32).reshape(HEIGHT, WIDTH)
            valid = noisy > 0
            assert 0.01 < 1.0 - valid.mean() < 0.03  # 2 % fill-rate error
            std = np.std(noisy[valid] - 4.0)
            assert std == pytest.approx(0.005 * np.exp(0.63 * 4.0), rel=0.1)
        assert not np.array_equal(received[0].data, received[1].data)
        assert "not in the material table" in (tmp_path / "depth_noise.log").read_text()
    finally:
        node.terminate()
        node.wait(timeout=10)
        log.close()
