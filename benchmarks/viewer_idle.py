"""What the web viewer and depth_to_points cost with and without a browser connected.

    tools/dev.sh bench viewer_idle [--seconds 8] [--before /path/to/other/checkout/src]

Starts ``web_viewer`` (scene urban) and ``depth_to_points`` (stride 2, as viewer.launch.yaml) in their own
processes and feeds them what the default graph does: odometry at 100 Hz, the colour, depth and
segmentation images (460 x 320, the camera's default) and ``camera_info`` at 30 Hz. For ``--seconds``
with no browser, then ``--seconds`` with one (a minimal viser client: the websocket and its first camera
message, what a browser tab sends), it prints each process's CPU (cores = CPU s per wall s).
``--before``: also run the nodes from another checkout's ``src`` (a before/after comparison on one
loaded machine: the rows are measured one after the other, close in time). Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "src")]

import numpy as np  # noqa: E402

from _node_rate import cpu_seconds, start_node, stop_node  # noqa: E402

WIDTH, HEIGHT = 460, 320


def messages():
    """One odometry message and the camera's four messages, built once and republished."""
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import CameraInfo, Image

    rng = np.random.default_rng(0)
    odom = Odometry()
    odom.header.frame_id, odom.child_frame_id = "map", "drone1/base_link"
    odom.pose.pose.position.z, odom.pose.pose.orientation.w = 2.0, 1.0
    color = Image(height=HEIGHT, width=WIDTH, encoding="rgb8", step=3 * WIDTH)
    color.data = rng.integers(0, 255, (HEIGHT, WIDTH, 3), dtype=np.uint8).tobytes()
    depth = Image(height=HEIGHT, width=WIDTH, encoding="32FC1", step=4 * WIDTH)
    depth.data = rng.uniform(0.5, 30.0, (HEIGHT, WIDTH)).astype(np.float32).tobytes()
    segmentation = Image(height=HEIGHT, width=WIDTH, encoding="mono16", step=2 * WIDTH)
    segmentation.data = rng.integers(0, 40, (HEIGHT, WIDTH), dtype=np.uint16).tobytes()
    f = (WIDTH / 2) / np.tan(np.radians(45))
    info = CameraInfo(height=HEIGHT, width=WIDTH, k=[f, 0.0, (WIDTH - 1) / 2, 0.0, f, (HEIGHT - 1) / 2, 0.0, 0.0, 1.0])
    return odom, {"camera/color/image_raw": color, "camera/depth/image_raw": depth,
                  "camera/segmentation/image_raw": segmentation, "camera/depth/camera_info": info}  # fmt: skip


def browser(url: str):
    """A minimal viser client: the websocket with viser's subprotocol and a first camera message."""
    import msgspec
    import viser
    from viser._messages import ViewerCameraMessage
    from websockets.sync.client import connect

    connection = connect(url.replace("http://", "ws://"), subprotocols=[f"viser-v{viser.__version__}"],
                         max_size=None, open_timeout=10)  # fmt: skip
    camera = ViewerCameraMessage(wxyz=(1.0, 0.0, 0.0, 0.0), position=(0.0, 0.0, 5.0), fov=1.0, near=0.01, far=100.0,
                                 image_height=480, image_width=640, look_at=(0.0, 0.0, 0.0),
                                 up_direction=(0.0, 0.0, 1.0))  # fmt: skip
    connection.send(msgspec.msgpack.encode(camera.as_serializable_dict()))
    return connection


def feed(node, publishers, odom, camera, seconds: float, executor) -> None:
    """Odometry at 100 Hz, the camera messages at 30 Hz (stamped in a made-up sim time), for ``seconds``."""
    start = time.monotonic()
    tick = 0
    while (now := time.monotonic()) - start < seconds:
        t = now - start
        stamp_sec, stamp_ns = int(t), int((t % 1) * 1e9)
        odom.header.stamp.sec, odom.header.stamp.nanosec = stamp_sec, stamp_ns
        publishers["ground_truth/odom"].publish(odom)
        if tick % 3 == 0:  # every third 100 Hz tick: ~33 Hz
            for topic, msg in camera.items():
                msg.header.stamp.sec, msg.header.stamp.nanosec = stamp_sec, stamp_ns
                publishers[topic].publish(msg)
        tick += 1
        executor.spin_once(timeout_sec=max(0.0, start + tick / 100.0 - time.monotonic()))


def measure_source(label: str, source: Path | None, seconds: float) -> dict[str, dict[str, float]]:
    import rclpy
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import CameraInfo, Image

    from aerial_sim.nodes.ros.qos import LOCKSTEP_QOS
    from aerial_sim.viewer.web import free_port

    port = free_port()
    viewer = start_node("web_viewer", "-p", "scene:=urban", "-p", f"viewer.port:={port}", source=source)
    points = start_node("depth_to_points", "-p", "stride:=2", source=source)
    context = rclpy.context.Context()
    rclpy.init(context=context)
    node = rclpy.node.Node("viewer_idle_bench", context=context)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)
    odom, camera = messages()
    types = {"ground_truth/odom": Odometry, "camera/depth/camera_info": CameraInfo}
    publishers = {topic: node.create_publisher(types.get(topic, Image), f"/drone1/{topic}", LOCKSTEP_QOS)
                  for topic in ["ground_truth/odom", *camera]}  # fmt: skip
    results = {}
    tab = None
    try:
        pids = {"web_viewer": viewer.pid, "depth_to_points": points.pid}  # start_node runs python itself
        deadline = time.monotonic() + 60
        while not all(p.get_subscription_count() for p in publishers.values()) and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        feed(node, publishers, odom, camera, 3.0, executor)  # warm-up
        for phase in ("no browser", "browser"):
            if phase == "browser":
                tab = browser(f"http://127.0.0.1:{port}")
                feed(node, publishers, odom, camera, 2.0, executor)  # it subscribes, clouds start
            before = {name: cpu_seconds(pid) for name, pid in pids.items()}
            start = time.monotonic()
            feed(node, publishers, odom, camera, seconds, executor)
            wall = time.monotonic() - start
            results[f"{label}, {phase}"] = {name: (cpu_seconds(pid) - before[name]) / wall for name, pid in pids.items()}
    finally:
        if tab is not None:
            tab.close()
        stop_node(viewer)
        stop_node(points)
        node.destroy_node()
        rclpy.shutdown(context=context)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--before", type=Path, default=None, help="another checkout's src, measured first")
    options = parser.parse_args()
    results = {}
    if options.before is not None:
        results.update(measure_source("before", options.before, options.seconds))
    results.update(measure_source("this checkout", None, options.seconds))
    width = max(len(name) for name in results) + 2
    print(f"\nCPU (cores) per node; odometry 100 Hz, images {WIDTH}x{HEIGHT} + camera_info at 30 Hz")
    print(f"{'':<{width}}{'web_viewer':>12}{'depth_to_points':>17}")
    for name, cores in results.items():
        print(f"{name:<{width}}{cores['web_viewer']:>12.3f}{cores['depth_to_points']:>17.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
