"""What a reading process costs: one publisher, four readers in four processes or in one.

    tools/dev.sh bench shared_process [--rate 2000] [--seconds 10] [--reliable]

Publishes a raw nav_msgs/Odometry (CDR bytes, as the physics node does) at ``--rate`` Hz for
``--seconds`` s, read by four raw subscriptions: first one in each of four processes, then all
four in one process (as ``aerial_sim.nodes.sensors`` hosts the IMU, barometer, magnetometer and
GPS). Prints the publisher's CPU per message and the readers' CPU per message, side by side.
Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import os
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
TOPIC = "/shared_process_bench"
SETTLE_S = 4.0  # discovery before the first message


def qos(reliable: bool):
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT)


def publish(rate_hz: float, seconds: float, reliable: bool) -> None:
    """Child process: publish for ``seconds``, then print CPU seconds and the message count."""
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.serialization import serialize_message

    from aerial_sim.nodes.ros.transport import use_transport_profile

    use_transport_profile()
    rclpy.init()
    node = rclpy.create_node("shared_process_publisher")
    publisher = node.create_publisher(Odometry, TOPIC, qos(reliable))
    data = serialize_message(Odometry())
    time.sleep(SETTLE_S)
    cpu0, start, count = time.process_time(), time.monotonic(), 0
    while time.monotonic() - start < seconds:
        publisher.publish(data)
        count += 1
        delay = start + count / rate_hz - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    print(f"{time.process_time() - cpu0} {count}", flush=True)


def read(readers: int, seconds: float, reliable: bool) -> None:
    """Child process: ``readers`` raw subscriptions in one executor; print CPU seconds and messages taken."""
    import rclpy

    from aerial_sim.nodes.ros.executors import make_executor
    from aerial_sim.nodes.ros.transport import use_transport_profile

    use_transport_profile()
    rclpy.init()
    taken = [0]

    def on_message(_data: bytes) -> None:
        taken[0] += 1

    from nav_msgs.msg import Odometry

    nodes = [rclpy.create_node(f"shared_process_reader_{os.getpid()}_{i}") for i in range(readers)]
    executor = make_executor(nodes[0].context)
    for node in nodes:
        node.create_subscription(Odometry, TOPIC, on_message, qos(reliable), raw=True)
        executor.add_node(node)
    cpu0, end = time.process_time(), time.monotonic() + seconds
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.1)
    print(f"{time.process_time() - cpu0} {taken[0]}", flush=True)


def run_layout(processes: int, readers_each: int, args) -> tuple[float, float, int]:
    """(publisher CPU µs per message, readers' CPU µs per message, messages taken in all)."""
    common = ["--seconds", str(args.seconds), *(["--reliable"] if args.reliable else [])]
    listen_s = str(args.seconds + SETTLE_S + 2.0)
    children = [subprocess.Popen([sys.executable, __file__, "--role", "read", "--readers", str(readers_each),
                                  "--seconds", listen_s, *(["--reliable"] if args.reliable else [])],
                                 stdout=subprocess.PIPE, text=True) for _ in range(processes)]
    publisher = subprocess.run([sys.executable, __file__, "--role", "publish", "--rate", str(args.rate), *common],
                               stdout=subprocess.PIPE, text=True, check=True)
    publisher_cpu, sent = map(float, publisher.stdout.split())
    reader_cpu, taken = 0.0, 0
    for child in children:
        cpu, count = child.communicate()[0].split()
        reader_cpu, taken = reader_cpu + float(cpu), taken + int(count)
    return publisher_cpu / sent * 1e6, reader_cpu / sent * 1e6, taken


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=2000.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--reliable", action="store_true", help="reliable QoS (lockstep); default best effort")
    parser.add_argument("--role", choices=("bench", "publish", "read"), default="bench", help=argparse.SUPPRESS)
    parser.add_argument("--readers", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "publish":
        publish(args.rate, args.seconds, args.reliable)
        return 0
    if args.role == "read":
        read(args.readers, args.seconds, args.reliable)
        return 0
    print(f"raw Odometry at {args.rate:g} Hz for {args.seconds:g} s, {'reliable' if args.reliable else 'best effort'}, "
          f"four readers; CPU per message sent (us)")
    print(f"{'layout':28s} {'publisher':>10s} {'readers':>10s} {'total':>10s} {'taken':>8s}")
    for label, processes, each in (("4 processes x 1 reader", 4, 1), ("1 process x 4 readers", 1, 4)):
        sender, readers, taken = run_layout(processes, each, args)
        print(f"{label:28s} {sender:10.1f} {readers:10.1f} {sender + readers:10.1f} {taken:8d}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
