"""Recorder throughput: MB/s and messages/s with three 460x320 camera streams at 30 Hz, and its CPU share.

    tools/dev.sh bench record [--seconds 10]

Starts `aerial_sim record` as its own process, publishes the synthetic flight of
test/record_fixtures.py (odometry 250 Hz, IMU 200 Hz, barometer 50 Hz, GPS
10 Hz, depth 32FC1 + colour rgb8 + segmentation mono16 + camera_info at 30 Hz)
from this process in real time, then reads the bag back and prints what was
recorded, the throughput, and the recorder's CPU time per wall second
(100 % = one core), from /proc.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "test")]
from _domain import private_domain  # noqa: E402

private_domain()
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("AERIAL_SIM_SHARE", str(REPO))
os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    options = parser.parse_args()

    from aerial_sim.nodes.ros.transport import use_transport_profile

    use_transport_profile()
    import rclpy
    from rclpy.node import Node
    from rosbags.highlevel import AnyReader

    from record_fixtures import FlightPublisher, start_recorder, stop

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        recorder = start_recorder(run_dir, "--all", "--no-report", log_path=Path(tmp) / "recorder.log")
        rclpy.init()
        node = Node("record_benchmark")
        flight = FlightPublisher(node)
        if not flight.wait_for_subscribers(30.0):
            print((Path(tmp) / "recorder.log").read_text())
            return 1
        cpu0, wall0 = cpu_seconds(recorder.pid), time.monotonic()
        flight.run(options.seconds)
        time.sleep(0.5)
        cpu1, wall1 = cpu_seconds(recorder.pid), time.monotonic()
        stop(recorder, signal.SIGINT)
        node.destroy_node()
        rclpy.shutdown()
        counts: dict[str, int] = {}
        with AnyReader([run_dir / "bag"]) as reader:
            for connection, _, _ in reader.messages():
                counts[connection.topic] = counts.get(connection.topic, 0) + 1
        size = sum(p.stat().st_size for p in (run_dir / "bag").glob("*.mcap"))

    wall = wall1 - wall0
    published = sum(flight.counts.values())
    recorded = sum(counts.get(t, 0) for t in flight.counts)
    print(f"published {published} msgs in {options.seconds:.0f} s (+ /clock at 250 Hz)")
    for topic, sent in flight.counts.items():
        got = counts.get(topic, 0)
        print(f"  {topic:<42} {got:>6}/{sent:<6} recorded ({100.0 * got / sent:5.1f} %)")
    print(f"bag size           {size / 1e6:8.1f} MB")
    print(f"throughput         {size / 1e6 / options.seconds:8.1f} MB/s, "
          f"{sum(counts.values()) / options.seconds:8.0f} msgs/s")  # fmt: skip
    print(f"recorded           {100.0 * recorded / published:8.2f} % of published messages")
    print(f"recorder CPU       {100.0 * (cpu1 - cpu0) / wall:8.1f} % of one core")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
