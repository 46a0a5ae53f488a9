"""Lidar speed: rays per second of the core (per preset and scene, vehicle still and flying while turning),
then the lidar node's CPU at VLP-16 (~300 k points/s) and OS1-64 (~1.3 M points/s) beside the physics
node (and the flight controller flying a mission) in real time.

Goals (issue 12): VLP-16 node at <= 0.3 core; OS1-64 at its full rate (10 sweeps per simulated second)
in real time on this 2-core machine. Run: ``tools/dev.sh bench lidar [--no-node] [--seconds S]``.
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

import aerial_sim.nodes  # noqa: E402,F401  one BLAS thread, as in the node processes (set before numpy loads)
from _node_rate import child_pid, cpu_seconds  # noqa: E402

from aerial_sim.sensors.params import load_preset  # noqa: E402
from aerial_sim.sensors.quaternions import quat_from_rpy
from aerial_sim.sensors.truth import TruthSample
from aerial_sim.sensors.lidar import LidarModel, LidarParams, LidarSweeper  # noqa: E402
from aerial_sim.world.scene import load_scene  # noqa: E402

PRESETS = ("velodyne_vlp16", "ouster_os1_64", "livox_mid360")
SCENES = {"corridor": (4.0, 0.0, 3.0), "urban": (0.0, 0.0, 3.0)}  # start positions with plenty in view


def time_sweeps(params: LidarParams, scene_name: str, moving: bool, sweeps: int = 10) -> float:
    """Seconds of compute per sweep (best of 3 runs), ground truth fed at 250 Hz; moving = 10 m/s and 1 rad/s yaw."""
    scene = load_scene(scene_name)
    start = SCENES[scene_name]
    best = float("inf")
    for _ in range(3):
        sweeper = LidarSweeper(LidarModel(params, scene))
        samples = []
        for k in range(int(sweeps * params.sweep_period_s * 250) + 26):
            t = k / 250.0
            speed, yaw_rate = (10.0, 1.0) if moving else (0.0, 0.0)
            samples.append(TruthSample(t, position=(start[0] + speed * t, start[1], start[2]),
                                       orientation=quat_from_rpy(0.0, 0.0, yaw_rate * t)))  # fmt: skip
        sweeper.push(samples[0])  # builds the ray caster
        begin, done = time.perf_counter(), 0
        for sample in samples[1:]:
            done += len(sweeper.push(sample))
        best = min(best, (time.perf_counter() - begin) / done)
    return best


def core_table() -> None:
    print("lidar core: compute per sweep (best of 3 runs of 10 sweeps, truth pushed at 250 Hz, "
          "moving = 10 m/s with 1 rad/s yaw)")  # fmt: skip
    print(f"{'preset':<16} {'beams/sweep':>11} {'scene':<9} {'still ms':>9} {'moving ms':>10} {'Mrays/s':>8} "
          f"{'share of real time':>19}")  # fmt: skip
    for preset in PRESETS:
        params = load_preset(LidarParams, preset)
        beams = params.points_per_sweep
        for scene in SCENES:
            still, moving = time_sweeps(params, scene, False), time_sweeps(params, scene, True)
            print(f"{preset:<16} {beams:>11} {scene:<9} {still * 1e3:>9.1f} {moving * 1e3:>10.1f} "
                  f"{beams / moving / 1e6:>8.2f} {moving / params.sweep_period_s:>18.0%}")  # fmt: skip


def node_run(preset: str, seconds: float) -> None:
    """physics + flight controller flying square_5m + lidar in real time (urban); the lidar process's CPU."""
    import rclpy
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import PointCloud2

    from aerial_sim.nodes.ros.transport import use_transport_profile

    from _domain import private_domain

    private_domain()
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ["PYTHONPATH"] = str(REPO / "src")
    folder = Path(tempfile.mkdtemp())
    launch_file = folder / "lidar_bench.launch.yaml"
    launch_file.write_text(
        "launch:\n"
        f"  - include: {{file: {REPO}/launch/physics.launch.yaml, arg: [{{name: scene, value: urban}}]}}\n"
        f"  - include: {{file: {REPO}/launch/control.launch.yaml, arg: [{{name: mission, value: square_5m}}, "
        f"{{name: output_dir, value: {folder}/mission}}]}}\n"
        f"  - include: {{file: {REPO}/launch/lidar.launch.yaml, arg: [{{name: scene, value: urban}}, "
        f"{{name: lidar_preset, value: {preset}}}, {{name: use_distance, value: 'false'}}]}}\n"
    )
    graph = subprocess.Popen([sys.executable, "-m", "aerial_sim", "launch", str(launch_file)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    use_transport_profile()
    rclpy.init()
    node = Node("lidar_benchmark")
    raw: list[bytes] = []
    node.create_subscription(PointCloud2, "/drone1/lidar/points", raw.append,
                             QoSProfile(depth=20, reliability=ReliabilityPolicy.BEST_EFFORT), raw=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(raw) < 5 and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.1)
        lidar_pid = child_pid(graph.pid, "aerial_sim.nodes.lidar")
        physics_pid = child_pid(graph.pid, "aerial_sim.nodes.physics")
        cpu_start, physics_start = cpu_seconds(lidar_pid), cpu_seconds(physics_pid)
        wall_start, count_start = time.monotonic(), len(raw)
        while time.monotonic() - wall_start < seconds:
            rclpy.spin_once(node, timeout_sec=0.1)
        wall = time.monotonic() - wall_start
        cpu = (cpu_seconds(lidar_pid) - cpu_start) / wall
        physics_cpu = (cpu_seconds(physics_pid) - physics_start) / wall
        clouds = [deserialize_message(data, PointCloud2) for data in raw[count_start:]]
        stamps = [c.header.stamp.sec + 1e-9 * c.header.stamp.nanosec for c in clouds]
        sim = stamps[-1] - stamps[0] if len(stamps) > 1 else float("nan")
        per_sim_s = (len(stamps) - 1) / sim if len(stamps) > 1 else 0.0
        points = sum(c.width * c.height for c in clouds) / max(len(clouds), 1)
        print(f"  {preset:<16} {per_sim_s:5.1f} sweeps per simulated s ({len(stamps) / wall:4.1f} per wall s, "
              f"real-time factor {sim / wall:4.2f}), {points:,.0f} points a sweep, lidar CPU {cpu:.2f} core, "
              f"physics CPU {physics_cpu:.2f} core")  # fmt: skip
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
        os.killpg(graph.pid, signal.SIGINT)
        try:
            graph.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(graph.pid, signal.SIGKILL)


def main(argv: list[str]) -> int:
    seconds = float(argv[argv.index("--seconds") + 1]) if "--seconds" in argv else 10.0
    core_table()
    if "--no-node" not in argv:
        print(f"lidar node beside physics + flight controller (square_5m, urban), real time, {seconds:g} s; "
              "goals: VLP-16 <= 0.3 core, OS1-64 at 10 sweeps per simulated s")  # fmt: skip
        for preset in ("velodyne_vlp16", "ouster_os1_64"):
            node_run(preset, seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
