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

from conftest import REPO, fast_dds_transport_line, requires_ros

pytestmark = [pytest.mark.ros, requires_ros]


#: How the node runs: as a node executable (which skips interpreter teardown, see nodes/ros/process.py), or
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


def stop_viewer(process, log, sig=signal.SIGINT, already_signalled=False) -> int:
    """Stop the viewer with one signal (a second Ctrl-C on a slow stop is not what the tests check) and wait."""
    if process.poll() is None and not already_signalled:
        process.send_signal(sig)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    log.close()
    return process.returncode


def browser(url: str):
    """A minimal viser client (what a browser tab does): the websocket with viser's subprotocol and
    the first camera message (msgpack), after which the server counts it as a connected client.
    (Built by hand: importing viser here costs seconds on a loaded machine.)"""
    from importlib.metadata import version

    import msgspec
    from websockets.sync.client import connect

    connection = connect(url.replace("http://", "ws://"), subprotocols=[f"viser-v{version('viser')}"],
                         max_size=None, open_timeout=10, close_timeout=1)  # fmt: skip
    camera = {"type": "ViewerCameraMessage", "wxyz": [1.0, 0.0, 0.0, 0.0], "position": [0.0, 0.0, 5.0], "fov": 1.0,
              "near": 0.01, "far": 100.0, "image_height": 480, "image_width": 640, "look_at": [0.0, 0.0, 0.0],
              "up_direction": [0.0, 0.0, 1.0]}  # fmt: skip
    connection.send(msgspec.msgpack.encode(camera))
    return connection


def subscribers_become(ros_node, topic: str, count: int, timeout_s: float = 10.0) -> int:
    """The number of subscribers to ``topic`` once it is ``count`` (or at the timeout)."""
    deadline = time.monotonic() + timeout_s
    while (seen := ros_node.count_subscribers(topic)) != count and time.monotonic() < deadline:
        time.sleep(0.1)
    return seen


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
    """Ctrl-C while images stream in to a browser: exit 0 and no traceback or 'Exception ignored' (imageio's
    PillowPlugin). Before that: the images and clouds are subscribed only while a browser is connected
    (odometry always), again when one comes back."""
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image

    from aerial_sim.viewer.web import free_port

    process, log = start_viewer(tmp_path, free_port(), command=command)
    publishers = {
        topic: ros_node.create_publisher(Image, f"/drone1/{topic}", qos_profile_sensor_data)
        for topic in ("camera/color/image_raw", "camera/depth/image_raw")
    }
    rng = np.random.default_rng(0)
    color, cloud = "/drone1/camera/color/image_raw", "/drone1/camera/depth/points"
    tab, interrupted = None, False
    try:
        url = printed_url(tmp_path, process)
        assert subscribers_become(ros_node, "/drone1/ground_truth/odom", 1) == 1  # the viewer is discovered
        # No browser yet: none (once the viewer the test before stopped has left the graph, slowly when busy).
        assert subscribers_become(ros_node, color, 0) == 0 and subscribers_become(ros_node, cloud, 0) == 0
        tab = browser(url)
        assert subscribers_become(ros_node, color, 1) == 1 and subscribers_become(ros_node, cloud, 1) == 1
        tab.close()
        assert subscribers_become(ros_node, color, 0) == 0, "the last browser left: images still subscribed"
        tab = browser(url)
        assert subscribers_become(ros_node, color, 1) == 1, "a browser came back: images not subscribed again"
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
                interrupted = True
                tab.close()  # the tab goes with it (left open, it made the stop seconds slower here)
            time.sleep(1 / 30)
    finally:
        code = stop_viewer(process, log, already_signalled=interrupted)
        if tab is not None:
            tab.close()
    output = (tmp_path / "viewer.log").read_text()
    assert code == 0, output
    ours = "\n".join(line for line in output.splitlines() if not fast_dds_transport_line(line))
    assert "Traceback" not in ours and "Exception ignored" not in ours and "Error" not in ours, output


def test_depth_to_points_takes_depth_images_only_while_someone_listens(ros_node):
    """No subscriber to camera/depth/points (the viewer without a browser, the recorder's default exclude):
    depth_to_points does not even subscribe to the depth images; a listener: it gets a cloud per image."""
    import rclpy
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import CameraInfo, Image, PointCloud2

    from aerial_sim.nodes.depth_to_points import DepthToPoints

    node = DepthToPoints(context=ros_node.context)
    executor = rclpy.executors.SingleThreadedExecutor(context=ros_node.context)
    executor.add_node(node)
    executor.add_node(ros_node)

    def spin_until(condition, timeout_s: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while not condition() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.02)
        return bool(condition())

    depth = Image(height=48, width=64, encoding="32FC1", step=256)
    depth.data = np.full((48, 64), 5.0, dtype=np.float32).tobytes()
    info = CameraInfo(height=48, width=64, k=[60.0, 0.0, 32.0, 0.0, 60.0, 24.0, 0.0, 0.0, 1.0])
    images = ros_node.create_publisher(Image, "camera/depth/image_raw", qos_profile_sensor_data)
    infos = ros_node.create_publisher(CameraInfo, "camera/depth/camera_info", qos_profile_sensor_data)
    try:
        assert spin_until(lambda: ros_node.count_subscribers("camera/depth/camera_info") == 1)
        spin_until(lambda: False, 1.0)  # two listener polls
        assert ros_node.count_subscribers("camera/depth/image_raw") == 0, "depth images taken with nobody listening"
        received = []
        ros_node.create_subscription(PointCloud2, "camera/depth/points", received.append, qos_profile_sensor_data)
        assert spin_until(lambda: images.get_subscription_count() == 1), "a listener came: depth not subscribed"

        def publish_until_a_cloud() -> bool:
            infos.publish(info)
            images.publish(depth)
            return bool(received)

        assert spin_until(publish_until_a_cloud), "the listener got no cloud"
        assert received[0].width == 48 * 64
    finally:
        executor.shutdown()
        node.destroy_node()


def test_an_idle_viewer_takes_only_the_newest_ground_truth_per_tick_and_a_browser_gets_every_message(ros_node):
    """No browser: of the 250 ground-truth messages of a simulated second the viewer takes one per tick of
    its 30 Hz timer, the newest (the last of the second among them); a browser connects: every message."""
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.parameter import Parameter
    from rclpy.qos import qos_profile_sensor_data

    from aerial_sim.nodes.web_viewer import WebViewerNode
    from aerial_sim.viewer.web import free_port

    port = free_port()
    node = WebViewerNode(context=ros_node.context, parameter_overrides=[
        Parameter("viewer.port", value=port), Parameter("viewer.update_rate_hz", value=30.0)])
    executor = rclpy.executors.SingleThreadedExecutor(context=ros_node.context)
    executor.add_node(node)
    odometry = ros_node.create_publisher(Odometry, "ground_truth/odom", qos_profile_sensor_data)
    tab = None

    def spin_until(condition, timeout_s: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while not condition() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.01)
        return bool(condition())

    def publish_second(first_ms: int, watched: bool = False) -> tuple[list[int], float]:
        """250 Hz of ground truth for one simulated second; the stamps (ms) the viewer took, and the wall
        seconds the publishing took. ``watched``: up to 4 more spins per message that wait for nothing
        (timeout 0), until the viewer took it. One spin per message, each 30 Hz tick run by one left a message
        more queued, and on a busy machine, where the loop takes seconds, more than the reader's 5 (ci24: 146
        of 250 taken; the same with this process held to a tenth of a core by SIGSTOP/SIGCONT). Spins that
        wait for nothing take no message an idle viewer's ticks would not: it still gets the newest per tick."""
        node.poses.clear()
        start = time.monotonic()
        for ms in range(first_ms, first_ms + 1000, 4):
            message = Odometry()
            message.header.stamp.sec, message.header.stamp.nanosec = divmod(ms * 1_000_000, 1_000_000_000)
            message.pose.pose.orientation.w = 1.0
            odometry.publish(message)
            executor.spin_once(timeout_sec=0.001)
            for _ in range(4 if watched else 0):
                if node.poses and round(node.poses[-1][0] * 1000) >= ms:
                    break
                executor.spin_once(timeout_sec=0.0)
        took_s = time.monotonic() - start
        spin_until(lambda: False, 0.3)
        return [round(t * 1000) for t, _, _ in node.poses], took_s

    try:
        assert spin_until(lambda: odometry.get_subscription_count() == 1)
        spin_until(lambda: False, 0.5)  # matched both ways
        taken, took_s = publish_second(0)
        ticks = (took_s + 0.3) * 30.0
        assert 1 <= len(taken) <= ticks + 2, (taken, took_s)  # one per tick at most, not one per message
        assert taken == sorted(taken) and taken[-1] == 996, taken  # the newest: the second's last message
        tab = browser(f"http://127.0.0.1:{port}")
        assert spin_until(lambda: node.viewer.has_clients() and odometry.get_subscription_count() == 1)
        spin_until(lambda: False, 1.0)  # the new subscription is matched
        taken, _ = publish_second(1000, watched=True)
        assert len(taken) >= 200, taken
    finally:
        if tab is not None:
            tab.close()
        executor.shutdown()
        node.destroy_node()
