"""Shared helpers for the recording/export/viewer tests: a synthetic flight published at realistic rates.

The vehicle flies a horizontal circle (radius R, angular rate W) at 2 m
altitude, so the distance flown over T seconds is R*W*T exactly, and the
camera streams carry images whose content is known (depth = a ramp).
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RADIUS_M = 3.0
RATE_RAD_S = 0.5
ALTITUDE_M = 2.0
IMAGE_W, IMAGE_H = 460, 320  # the depth camera's default resolution (world/camera.py)

# topic -> (type, rate Hz)
FLIGHT_TOPICS = {
    "/drone1/ground_truth/odom": ("nav_msgs/msg/Odometry", 250.0),
    "/drone1/imu/data": ("sensor_msgs/msg/Imu", 200.0),
    "/drone1/air_pressure": ("sensor_msgs/msg/FluidPressure", 50.0),
    "/drone1/gps/fix": ("sensor_msgs/msg/NavSatFix", 10.0),
    "/drone1/camera/depth/image_raw": ("sensor_msgs/msg/Image", 30.0),
    "/drone1/camera/depth/camera_info": ("sensor_msgs/msg/CameraInfo", 30.0),
    "/drone1/camera/color/image_raw": ("sensor_msgs/msg/Image", 30.0),
    "/drone1/camera/segmentation/image_raw": ("sensor_msgs/msg/Image", 30.0),
}


def stamp(seconds: float):
    from builtin_interfaces.msg import Time

    ns = int(round(seconds * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def circle_pose(t: float) -> tuple[tuple[float, float, float], tuple[float, float, float, float]]:
    """Position (ENU) and orientation (w, x, y, z; yaw along the velocity) on the test circle."""
    angle = RATE_RAD_S * t
    yaw = angle + math.pi / 2
    return (
        (RADIUS_M * math.cos(angle), RADIUS_M * math.sin(angle), ALTITUDE_M),
        (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)),
    )


class FlightPublisher:
    """Publishes /clock and FLIGHT_TOPICS from an rclpy node, sim time = wall time since start."""

    def __init__(self, node, image_size=(IMAGE_W, IMAGE_H), topics=FLIGHT_TOPICS):
        from nav_msgs.msg import Odometry
        from rclpy.qos import qos_profile_sensor_data
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import CameraInfo, FluidPressure, Image, Imu, NavSatFix

        classes = {
            "nav_msgs/msg/Odometry": Odometry, "sensor_msgs/msg/Imu": Imu,
            "sensor_msgs/msg/FluidPressure": FluidPressure, "sensor_msgs/msg/NavSatFix": NavSatFix,
            "sensor_msgs/msg/Image": Image, "sensor_msgs/msg/CameraInfo": CameraInfo,
        }  # fmt: skip
        self.node = node
        self.topics = dict(topics)
        self.clock_pub = node.create_publisher(Clock, "/clock", qos_profile_sensor_data)
        self.pubs = {t: node.create_publisher(classes[m], t, qos_profile_sensor_data) for t, (m, _) in self.topics.items()}
        self.counts = {t: 0 for t in self.topics}
        self.width, self.height = image_size
        ramp = np.linspace(0.5, 20.0, self.width, dtype=np.float32)
        self.depth = np.tile(ramp, (self.height, 1))
        self.depth[:, :5] = 0.0  # no return
        self.Clock, self.Image, self.CameraInfo = Clock, Image, CameraInfo
        self.Odometry, self.Imu, self.FluidPressure, self.NavSatFix = Odometry, Imu, FluidPressure, NavSatFix
        self._images = self._make_images()

    def wait_for_subscribers(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(p.get_subscription_count() > 0 for p in self.pubs.values()):
                return True
            time.sleep(0.1)
        return False

    def _make_images(self):
        Image = self.Image
        w, h = self.width, self.height
        depth = Image(height=h, width=w, encoding="32FC1", is_bigendian=0, step=4 * w)
        depth.data = self.depth.tobytes()
        color = Image(height=h, width=w, encoding="rgb8", is_bigendian=0, step=3 * w)
        rgb = np.zeros((h, w, 3), np.uint8)
        rgb[..., 0] = np.arange(w, dtype=np.uint8)[None, :]
        rgb[..., 2] = 200
        color.data = rgb.tobytes()
        segmentation = Image(height=h, width=w, encoding="mono16", is_bigendian=0, step=2 * w)
        ids = np.full((h, w), 7, np.uint16)
        ids[h // 2 :] = 1000
        segmentation.data = ids.tobytes()
        return {"depth": depth, "color": color, "segmentation": segmentation}

    def _message(self, topic: str, t: float):
        kind = self.topics[topic][0]
        header_frame = "drone1/base_link"
        (x, y, z), (qw, qx, qy, qz) = circle_pose(t)
        if kind == "nav_msgs/msg/Odometry":
            msg = self.Odometry()
            msg.header.frame_id, msg.child_frame_id = "map", "drone1/base_link"
            p, q = msg.pose.pose.position, msg.pose.pose.orientation
            p.x, p.y, p.z = x, y, z
            q.w, q.x, q.y, q.z = qw, qx, qy, qz
            msg.twist.twist.linear.x = RADIUS_M * RATE_RAD_S
            msg.twist.twist.angular.z = RATE_RAD_S
        elif kind == "sensor_msgs/msg/Imu":
            msg = self.Imu()
            msg.linear_acceleration.z = 9.80665
            msg.linear_acceleration.y = RADIUS_M * RATE_RAD_S**2
            msg.angular_velocity.z = RATE_RAD_S
            header_frame = "drone1/imu_link"
        elif kind == "sensor_msgs/msg/FluidPressure":
            msg = self.FluidPressure(fluid_pressure=101300.0, variance=0.24**2)
        elif kind == "sensor_msgs/msg/NavSatFix":
            msg = self.NavSatFix(latitude=47.641468, longitude=-122.140165, altitude=124.0)
        elif kind == "sensor_msgs/msg/CameraInfo":
            f = (self.width / 2) / math.tan(math.radians(45))
            msg = self.CameraInfo(width=self.width, height=self.height, distortion_model="plumb_bob")
            msg.k = [f, 0.0, (self.width - 1) / 2, 0.0, f, (self.height - 1) / 2, 0.0, 0.0, 1.0]
            msg.d = [0.0] * 5
            header_frame = "drone1/camera_depth_optical_frame"
        else:
            msg = self._images[topic.split("/")[-2]]
            header_frame = "drone1/camera_depth_optical_frame"
        msg.header.stamp = stamp(t)
        msg.header.frame_id = msg.header.frame_id or header_frame
        return msg

    def run(self, duration_s: float, clock_hz: float = 250.0, at: tuple[float, Callable[[], None]] | None = None,
            until: Callable[[], bool] | None = None) -> float:
        """Publish for ``duration_s`` (wall = sim time, or later where this process falls behind: it then
        publishes as fast as it can); returns the last sim time published. ``at = (t_s, action)``: ``action()``
        once sim time ``t_s`` is published (a loaded machine's wall time says nothing about how far the
        flight got), and the rest of the flight in real time from then on: a publisher that had fallen behind
        does not catch up in one burst right after the action. ``until``: the flight ends early, once
        ``until()`` is true (asked every tick, after the action if there is one)."""
        Clock = self.Clock
        next_due = {t: 0.0 for t in self.topics}
        start = time.monotonic()
        t = 0.0
        tick = 1.0 / clock_hz
        step = 0
        while True:
            t = step * tick
            if t > duration_s:
                break
            delay = start + t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.clock_pub.publish(Clock(clock=stamp(t)))
            for topic, (_, rate) in self.topics.items():
                if t + 1e-9 >= next_due[topic]:
                    # Stamped at its own sample instant, as the sensor nodes' resamplers do: a 200 Hz stream
                    # on this 250 Hz clock stamped at the tick had 8 ms intervals, 600 'stamp gaps' at 5 ms.
                    sample_t = self.counts[topic] / rate
                    self.pubs[topic].publish(self._message(topic, sample_t))
                    self.counts[topic] += 1
                    next_due[topic] = (self.counts[topic]) / rate
            if at is not None and t + 1e-9 >= at[0]:
                at[1]()
                at = None
                start = time.monotonic() - t  # the next message a tick from now, not all those overdue at once
            elif at is None and until is not None and until():
                return t
            step += 1
        return t - tick


def start_recorder(run_dir: Path, *args: str, log_path: Path) -> subprocess.Popen:
    """``python -m aerial_sim record -o run_dir ARGS`` as its own process group."""
    log = open(log_path, "w")
    return subprocess.Popen(
        [sys.executable, "-m", "aerial_sim", "record", "-o", str(run_dir), *args],
        stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True,
    )  # fmt: skip


def stop(process: subprocess.Popen, sig=signal.SIGINT, timeout_s: float = 30.0) -> int:
    if process.poll() is None:
        os.killpg(process.pid, sig)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return process.returncode
