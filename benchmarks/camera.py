"""Camera rendering speed: ms per frame for each image type and for all three together,
side by side with the NumPy reference path the compiled kernels replaced (``render(reference=True)``),
then the camera node's achieved rate running beside the physics node.

Figures are per frame, best of 3 runs of 10 frames, in wall time and in CPU time of the rendering
thread (the CPU figure is the one to trust on a shared machine: other processes do not inflate it).

Goal (issue 5): depth + segmentation + colour at 30 Hz real time (< 33 ms a frame)
at the seed-004 resolution, 460x320. Run: ``tools/dev.sh bench camera [scene ...]``
(``--no-node`` skips the node run).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NODE_SECONDS = 10.0

from _node_rate import child_pid, cpu_seconds  # noqa: E402

from _results import record, row  # noqa: E402
from aerial_sim.world.camera import CameraModel, CameraParams
from aerial_sim.world.ray_caster import ray_caster_of
from aerial_sim.world.scene import load_scene

POSES = {  # a view with plenty of geometry in each scene
    "empty": ((0.0, 0.0, 2.0), (1.0, 0.0, 0.0, 0.0)),
    "urban": ((0.0, 0.0, 2.0), (1.0, 0.0, 0.0, 0.0)),
    "corridor": ((5.9, 0.0, 1.5), (1.0, 0.0, 0.0, 0.0)),
}
CASES = {
    "depth": dict(depth=True, segmentation=False, color=False),
    "segmentation": dict(depth=False, segmentation=True, color=False),
    "color": dict(depth=False, segmentation=False, color=True),
    "all three": dict(depth=True, segmentation=True, color=True),
}


def time_ms(function, repeats: int) -> tuple[float, float]:
    """(wall ms, CPU ms of this thread) per call, each the best of 3 runs of ``repeats`` calls."""
    function()  # warm-up
    best_wall = best_cpu = float("inf")
    for _ in range(3):
        wall, cpu = time.perf_counter(), time.thread_time()
        for _ in range(repeats):
            function()
        best_wall = min(best_wall, (time.perf_counter() - wall) / repeats)
        best_cpu = min(best_cpu, (time.thread_time() - cpu) / repeats)
    return best_wall * 1e3, best_cpu * 1e3


def node_graph_rate(scene: str, seconds: float = NODE_SECONDS) -> None:
    """Launch physics + camera in real time on ``scene``; print the image rate and the camera's CPU share."""
    import rclpy
    from rclpy.node import Node
    from sensor_msgs.msg import Image

    from aerial_sim.nodes.ros.qos import stream_qos
    from aerial_sim.nodes.ros.transport import use_transport_profile

    from _domain import private_domain

    private_domain()
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ["PYTHONPATH"] = str(REPO / "src")
    launch_file = Path(tempfile.mkdtemp()) / "camera_bench.launch.yaml"
    launch_file.write_text(
        "launch:\n"
        f"  - include: {{file: {REPO}/launch/physics.launch.yaml, arg: [{{name: scene, value: {scene}}}, {{name: spawn_z, value: '2.0'}}]}}\n"
        f"  - include: {{file: {REPO}/launch/camera.launch.yaml, arg: [{{name: scene, value: {scene}}}]}}\n"
    )
    graph = subprocess.Popen([sys.executable, "-m", "aerial_sim", "launch", str(launch_file)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    use_transport_profile()
    rclpy.init()
    node = Node("camera_benchmark")
    stamps: list[float] = []
    node.create_subscription(Image, "/drone1/camera/color/image_raw",
                             lambda m: stamps.append(m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec), stream_qos())
    for topic in ("depth/image_ideal", "segmentation/image_raw"):  # the node renders only what is subscribed to
        node.create_subscription(Image, f"/drone1/camera/{topic}", lambda m: None, stream_qos())
    try:
        deadline = time.monotonic() + 30
        while len(stamps) < 5 and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.1)
        camera_pid = child_pid(graph.pid, "aerial_sim.nodes.camera")
        cpu_start, wall_start, count_start = cpu_seconds(camera_pid), time.monotonic(), len(stamps)
        sim_start = stamps[-1] if stamps else 0.0
        while time.monotonic() - wall_start < seconds:
            rclpy.spin_once(node, timeout_sec=0.1)
        wall = time.monotonic() - wall_start
        frames = len(stamps) - count_start
        sim = (stamps[-1] - sim_start) if frames else float("nan")
        cpu = (cpu_seconds(camera_pid) - cpu_start) / wall
        print(f"camera node beside physics ({scene}, 460x320, all three images, real time, {seconds:g} s):")
        print(f"  {frames / sim if frames else 0:.1f} frames per simulated second, {frames / wall:.1f} per wall second, "
              f"camera CPU {cpu:.2f} core = {1e3 * cpu * wall / max(frames, 1):.0f} ms a frame; "
              f"goal 30 Hz: {'met' if frames and frames / sim >= 28.5 else 'not met'}")
        print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
        os.killpg(graph.pid, signal.SIGINT)
        graph.wait(timeout=20)


def main(argv: list[str]) -> int:
    with_node = "--no-node" not in argv
    argv = [a for a in argv if a not in ("--no-node", "--no-record")]
    names = argv or ["empty", "urban", "corridor"]
    print("460x320 frame, ms wall / ms CPU (best of 3 runs of 10 frames); goal: all three < 33.3 ms (30 Hz)")
    print(f"{'scene':<10} {'triangles':>9} {'path':>9} " + " ".join(f"{case:>13}" for case in CASES) + "   Hz (all, CPU)")
    rows = []
    for name in names:
        scene = load_scene(name)
        camera = CameraModel(CameraParams(), scene)
        position, orientation = POSES.get(name, POSES["empty"])
        for path, reference in (("compiled", False), ("reference", True)):
            figures = {case: time_ms(lambda: camera.render(position, orientation, reference=reference, **flags), 10)
                       for case, flags in CASES.items()}
            print(f"{name:<10} {ray_caster_of(scene).triangle_count:>9} {path:>9} "
                  + " ".join(f"{figures[case][0]:>6.1f}/{figures[case][1]:<6.1f}" for case in CASES)
                  + f"   {1e3 / figures['all three'][1]:.0f}")
            rows += [row(f"{name} ({ray_caster_of(scene).triangle_count} triangles), {case}, {path}", round(figures[case][1], 1),
                         "ms CPU", f"{figures[case][0]:.1f} ms wall")
                     for case in CASES if path == "compiled" or case == "all three"]
    command = "tools/dev.sh bench camera " + " ".join(names) + ("" if with_node else " --no-node")
    record("camera", "Camera rendering, 460x320 frame (depth, segmentation, colour)", rows, command.replace(" empty urban corridor", ""),
           notes="Per frame, best of 3 runs of 10 frames, CPU time of the rendering thread (wall time beside it). "
                 "Goal: all three images in < 33.3 ms (30 Hz). 'reference' is the Embree + NumPy path the compiled kernels replaced.")
    if with_node:
        node_graph_rate("urban")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
