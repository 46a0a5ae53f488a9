"""Real browser: headless Chromium loads the web viewer during a (synthetic) flight and shows scene and vehicle.

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


def screenshot(url: str, path, profile_dir) -> None:
    subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-unsafe-swiftshader", f"--user-data-dir={profile_dir}", "--window-size=1280,800",
         "--virtual-time-budget=8000", f"--screenshot={path}", url],
        capture_output=True, timeout=90, check=True,
    )  # fmt: skip


def test_browser_shows_scene_and_vehicle(ros_node, tmp_path):
    from nav_msgs.msg import Odometry
    from rclpy.qos import qos_profile_sensor_data

    from aerial_sim.viewer.web import free_port

    port = free_port()
    log = open(tmp_path / "viewer.log", "w")
    viewer = subprocess.Popen(
        [sys.executable, "-m", "aerial_sim.nodes.web_viewer", "--ros-args", "-r", "__ns:=/drone1",
         "-p", "scene:=urban", "-p", f"viewer.port:={port}", "-p", "viewer.update_rate_hz:=20.0"],
        stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
    )  # fmt: skip
    publisher = ros_node.create_publisher(Odometry, "/drone1/ground_truth/odom", qos_profile_sensor_data)
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
    finally:
        stop.set()
        flyer.join()
        viewer.terminate()
        viewer.wait(timeout=20)
        log.close()
    rgb = np.asarray(PilImage.open(shot).convert("RGB")).astype(int)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    assert rgb.shape[:2] == (800, 1280)
    vehicle = (r > 150) & (b > 130) & (g < 90)  # magenta body; nothing in the scene is magenta
    glass = (b > r + 40) & (b > 120)  # urban.yaml's glass towers (blue)
    trees = (g > r + 30) & (g > b + 30)  # the green tree crowns
    assert vehicle.sum() > 20, "vehicle not visible"
    assert glass.sum() > 2000 and trees.sum() > 50, "scene objects not visible"
    assert len(np.unique(rgb.reshape(-1, 3) // 16, axis=0)) > 50  # a rendered scene, not a blank page
