"""Real browser: headless Chromium loads the web viewer during a (synthetic) flight and shows scene, vehicle
and the latest lidar sweep.

Skips when /usr/bin/chromium is missing (Debian: ``apt-get install -y chromium``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from PIL import Image as PilImage

from conftest import REPO, requires_ros

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.ros,
    requires_ros,
    pytest.mark.skipif(not shutil.which("chromium"), reason="chromium not installed (apt-get install -y chromium)"),
]


def screenshot(url: str, path, profile_dir, attempts: int = 2) -> None:
    """Headless Chromium's screenshot of ``url``. Software WebGL (SwiftShader) at 1280x800: 7 s on a quiet
    machine, 30-110 s on a loaded one; once in a clean-clone CI (load 6-8, 2026-11-27) Chromium never
    returned within 240 s, where the same test took 17 s alone and 30 s beside four busy loops: a browser
    that hangs is tried once more with a fresh profile (the test is about what the viewer draws)."""
    for attempt in range(attempts):
        try:
            subprocess.run(
                [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--enable-unsafe-swiftshader", f"--user-data-dir={profile_dir}-{attempt}", "--window-size=1280,800",
                 "--virtual-time-budget=8000", f"--screenshot={path}", url],
                capture_output=True, timeout=150, check=True,
            )  # fmt: skip
            return
        except subprocess.TimeoutExpired:
            if attempt == attempts - 1:
                raise


def lidar_sweep(stamp):
    """A PointCloud2 in the lidar frame: a 7 x 7 m grid of points beyond the vehicle (seen from the chase camera)
    at world z = 5 m, which the viewer colours by height: pure green there (nothing else in the scene is)."""
    from sensor_msgs.msg import PointCloud2, PointField

    from aerial_sim.sensors.pointcloud import LIDAR_POINT_DTYPE, point_fields

    x, y = np.meshgrid(np.arange(1.0, 8.0, 0.3), np.arange(1.0, 8.0, 0.3))
    points = np.zeros(x.size, LIDAR_POINT_DTYPE)
    points["x"], points["y"], points["z"] = x.ravel(), y.ravel(), 5.0 - 3.1  # vehicle at z = 3, lidar 0.1 m above
    cloud = PointCloud2(height=1, width=len(points), is_bigendian=False, point_step=24, row_step=24 * len(points),
                        is_dense=True, fields=[PointField(name=n, offset=o, datatype=d, count=c)
                                               for n, o, d, c in point_fields(LIDAR_POINT_DTYPE)])  # fmt: skip
    cloud.header.stamp, cloud.header.frame_id = stamp, "drone1/lidar_link"
    cloud.data = points.tobytes()
    return cloud


def test_browser_shows_scene_and_vehicle(ros_node, tmp_path):
    from nav_msgs.msg import Odometry
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import PointCloud2

    from aerial_sim.viewer.web import free_port

    port = free_port()
    log = open(tmp_path / "viewer.log", "w")
    viewer = subprocess.Popen(
        [sys.executable, "-m", "aerial_sim.nodes.web_viewer", "--ros-args", "-r", "__ns:=/drone1",
         "-p", "scene:=urban", "-p", f"viewer.port:={port}", "-p", "viewer.update_rate_hz:=20.0"],
        stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
    )  # fmt: skip
    publisher = ros_node.create_publisher(Odometry, "/drone1/ground_truth/odom", qos_profile_sensor_data)
    lidar = ros_node.create_publisher(PointCloud2, "/drone1/lidar/points", qos_profile_sensor_data)
    stop = threading.Event()

    def fly():  # a slow 1 m circle around (4, -3, 3): the vehicle, and a trail behind it
        t0 = time.monotonic()
        while not stop.is_set():
            t = time.monotonic() - t0
            msg = Odometry()
            msg.header.frame_id = "map"
            msg.header.stamp.sec, msg.header.stamp.nanosec = int(t), int((t % 1) * 1e9)
            p = msg.pose.pose.position
            p.x, p.y, p.z = 4.0 + np.cos(t), -3.0 + np.sin(t), 3.0
            msg.pose.pose.orientation.w = 1.0
            publisher.publish(msg)
            if int(t * 50) % 10 == 0:  # a sweep every 0.2 s
                lidar.publish(lidar_sweep(msg.header.stamp))
            time.sleep(0.02)

    flyer = threading.Thread(target=fly, daemon=True)
    flyer.start()
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while f"open {url}" not in (tmp_path / "viewer.log").read_text():
            assert viewer.poll() is None and time.monotonic() < deadline, (tmp_path / "viewer.log").read_text()
            time.sleep(0.2)
        time.sleep(2.0)  # odometry reaches the viewer
        shot = tmp_path / "viewer.png"
        screenshot(url, shot, tmp_path / "chromium-profile")
        # The node notices browsers on its update tick: a headless session that skips through its virtual
        # time can come and go between two ticks (1 run in 3 of a clean-clone CI here), so look once more.
        time.sleep(1.0)
        if "a browser is connected" not in (tmp_path / "viewer.log").read_text():
            screenshot(url, shot, tmp_path / "chromium-profile")
    finally:
        stop.set()
        flyer.join()
        viewer.terminate()
        viewer.wait(timeout=20)
        log.close()
    assert "a browser is connected: subscribed to the images" in (tmp_path / "viewer.log").read_text()
    rgb = np.asarray(PilImage.open(shot).convert("RGB")).astype(int)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    assert rgb.shape[:2] == (800, 1280)
    vehicle = (r > 150) & (b > 130) & (g < 90)  # magenta body; nothing in the scene is magenta
    glass = (b > r + 40) & (b > 120)  # urban.yaml's glass towers (blue)
    trees = (g > r + 30) & (g > b + 30)  # the green tree crowns
    assert vehicle.sum() > 8, "vehicle not visible"  # a 0.3 m body seen from the chase camera: 19 px in one loaded run
    lidar_points = (g > 200) & (r < 80) & (b < 80)  # height-coloured sweep at z = 5 m: pure green
    assert lidar_points.sum() > 300, "lidar sweep not visible"
    assert glass.sum() > 2000 and trees.sum() > 50, "scene objects not visible"
    assert len(np.unique(rgb.reshape(-1, 3) // 16, axis=0)) > 50  # a rendered scene, not a blank page
