"""Late camera frames in real time: how many frames the camera stamps after their due time, by how many
odometry messages its subscription keeps (issue 29's single late frames under load).

    tools/dev.sh bench camera_late_frames [--keep 5 25] [--scene urban] [--seconds 20] [--rounds 2]

Each run launches the physics node (real time, its start gate waiting for the camera) and the camera
(``camera.launch.yaml``, 460x320 at 30 Hz) with ``AERIAL_SIM_CAMERA_ODOM_KEEP`` set, reads
``camera/depth/camera_info`` for ``--seconds`` of wall time after the first frame, and counts:

- late-stamped frames: a stamp more than one odometry period (4 ms) after its due time k/30 s. The camera
  renders the first state at or after the due time, so a late stamp means the due state was no longer in
  its queue when it came to it (it was held up longer than the queue lasts);
- gaps: frames missing from what this probe received (late frames that passed a due time, or frames lost
  to this best-effort reader).

The keeps alternate, ``--rounds`` times each, so each meets the same load; the load average is printed
beside each run. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src")]
from _domain import private_domain  # noqa: E402

private_domain()
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("AERIAL_SIM_SHARE", str(REPO))
os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])

RATE_HZ = 30.0
ODOM_PERIOD_S = 0.004


def stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        try:
            os.killpg(process.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
    for process in processes:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def run(keep: int, scene: str, seconds: float) -> dict:
    import rclpy
    from rclpy.node import Node
    from sensor_msgs.msg import CameraInfo

    from aerial_sim.nodes.ros.qos import stream_qos

    environment = {**os.environ, "AERIAL_SIM_CAMERA_ODOM_KEEP": str(keep)}
    launch = [sys.executable, "-m", "aerial_sim", "launch"]
    processes = [subprocess.Popen([*launch, "physics.launch.yaml", "start_gate_nodes:=/drone1/camera"], cwd=REPO,
                                  env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True),
                 subprocess.Popen([*launch, "camera.launch.yaml", f"scene:={scene}"], cwd=REPO, env=environment,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)]
    context = rclpy.context.Context()
    rclpy.init(context=context)
    node = Node("late_frames_probe", context=context)
    stamps: list[float] = []
    node.create_subscription(CameraInfo, "/drone1/camera/depth/camera_info",
                             lambda m: stamps.append(m.header.stamp.sec + m.header.stamp.nanosec * 1e-9), stream_qos())
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)
    end = time.monotonic() + 120.0  # the scene's load, at most
    try:
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.05)
            if len(stamps) == 1:
                end = time.monotonic() + seconds
    finally:
        stop(processes)
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
    if len(stamps) != len(set(stamps)):
        raise SystemExit("the same stamp twice: another camera in this ROS domain")
    stamps = sorted(stamps)[1:]  # the first may have met a reader still connecting
    due = [math.floor(s * RATE_HZ + 1e-6) for s in stamps]
    late = sum(s - k / RATE_HZ > ODOM_PERIOD_S + 5e-4 for s, k in zip(stamps, due))
    gaps = sum(b - a - 1 for a, b in zip(due, due[1:]))
    return {"frames": len(stamps), "late": late, "gaps": gaps, "load": open("/proc/loadavg").read().split()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=int, nargs="+", default=[5, 25])
    parser.add_argument("--scene", default="urban")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args()
    totals = {keep: [0, 0, 0] for keep in options.keep}
    print(f"scene {options.scene}, {options.seconds:g} s of wall time a run, {os.cpu_count()} cores")
    for _ in range(options.rounds):
        for keep in options.keep:
            figures = run(keep, options.scene, options.seconds)
            print(f"keep {keep:3d}: {figures['frames']:4d} frames, late-stamped {figures['late']:3d}, "
                  f"gaps {figures['gaps']:3d}  (load {figures['load']})", flush=True)
            for index, name in enumerate(("frames", "late", "gaps")):
                totals[keep][index] += figures[name]
    for keep, (frames, late, gaps) in totals.items():
        print(f"keep {keep:3d} in all: {frames} frames, late-stamped {late} ({100 * late / max(frames, 1):.2f} %), "
              f"gaps {gaps}")


if __name__ == "__main__":
    main()
