"""Cross-process: the web viewer node as a user starts and stops it (its printed URL, its shutdown output)."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import REPO, requires_ros

pytestmark = [pytest.mark.ros, requires_ros]


#: How the node runs: as a node executable (which skips interpreter teardown, see nodes/_process.py), or
#: imported by other code, whose interpreter tears down normally (third-party finalisers run then).
AS_EXECUTABLE = [sys.executable, "-m", "aerial_sim.nodes.web_viewer"]
AS_LIBRARY = [sys.executable, "-c", "import sys; from aerial_sim.nodes.web_viewer import main; sys.exit(main())"]


def start_viewer(tmp_path, port: int, *params: str, command=AS_EXECUTABLE):
    log = open(tmp_path / "viewer.log", "w")
    args = ["-p", "scene:=empty", "-p", f"viewer.port:={port}", "-p", "viewer.update_rate_hz:=30.0"]
    for param in params:
        args += ["-p", param]
    process = subprocess.Popen(
        [*command, "--ros-args", "-r", "__ns:=/drone1", *args],
        stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True,
    )  # fmt: skip
    return process, log


def printed_url(tmp_path, process, timeout_s: float = 60.0) -> str:
    deadline = time.monotonic() + timeout_s
    while not (match := re.search(r"open (http://\S+) in a browser", (tmp_path / "viewer.log").read_text())):
        assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "viewer.log").read_text()
        time.sleep(0.2)
    return match.group(1)


def stop_viewer(process, log, sig=signal.SIGINT) -> int:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    log.close()
    return process.returncode


def listening(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    with socket.socket() as probe:
        probe.settimeout(2.0)
        return probe.connect_ex((host, int(port))) == 0


def test_printed_url_is_where_the_viewer_listens_when_its_port_is_taken(tmp_path):
    from aerial_sim.viewer.web import free_port

    taken = socket.socket()
    taken.bind(("127.0.0.1", free_port()))
    taken.listen()
    port = taken.getsockname()[1]
    process, log = start_viewer(tmp_path, port)
    try:
        url = printed_url(tmp_path, process)
        assert url != f"http://127.0.0.1:{port}", "printed the port that another program holds"
        assert listening(url), (url, (tmp_path / "viewer.log").read_text())
    finally:
        stop_viewer(process, log)
        taken.close()


@pytest.mark.parametrize("command", [AS_EXECUTABLE, AS_LIBRARY], ids=["executable", "library"])
def test_stopping_the_viewer_while_it_shows_images_is_quiet(tmp_path, ros_node, command):
    """Ctrl-C while images stream in: exit 0 and no traceback or 'Exception ignored' (imageio's PillowPlugin)."""
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image

    from aerial_sim.viewer.web import free_port

    process, log = start_viewer(tmp_path, free_port(), command=command)
    publishers = {
        topic: ros_node.create_publisher(Image, f"/drone1/{topic}", qos_profile_sensor_data)
        for topic in ("camera/color/image_raw", "camera/depth/image_raw")
    }
    rng = np.random.default_rng(0)
    try:
        printed_url(tmp_path, process)
        for k in range(150):  # 5 s of 30 Hz images; the viewer stops in the middle of them
            for topic, publisher in publishers.items():
                msg = Image(height=120, width=160, encoding="rgb8", step=480)
                if "depth" in topic:
                    msg.encoding, msg.step = "32FC1", 640
                    msg.data = rng.uniform(0.5, 20.0, (120, 160)).astype(np.float32).tobytes()
                else:
                    msg.data = rng.integers(0, 255, (120, 160, 3), dtype=np.uint8).tobytes()
                publisher.publish(msg)
            if k == 90:
                process.send_signal(signal.SIGINT)
            time.sleep(1 / 30)
    finally:
        code = stop_viewer(process, log)
    output = (tmp_path / "viewer.log").read_text()
    assert code == 0, output
    assert "Traceback" not in output and "Exception ignored" not in output and "Error" not in output, output
