"""What a node's executor costs: CPU of a subscriber node process receiving 250 Hz odometry.

    tools/dev.sh bench executor [--seconds 10]

Runs the barometer node (it needs only ground_truth/odom, and its model is cheap, so the
executor's own per-message overhead dominates) twice, once with each executor
(``AERIAL_SIM_EXECUTOR=single|events``, :func:`aerial_sim.nodes.ros.executors.make_executor`), while
this process publishes 250 Hz odometry in real time; prints the node's CPU (cores) and its
output rate for both, side by side.

    tools/dev.sh bench executor --executors events --before OTHER_CHECKOUT/src

compares this checkout's node with another's (e.g. main's, before a change), interleaved.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "benchmarks")]

from _node_rate import start_node, stop_node  # noqa: E402
from graph import cpu_seconds  # noqa: E402


def run(executor: str, seconds: float, source: Path | None = None) -> tuple[float, float]:
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.node import Node
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import FluidPressure

    from aerial_sim.nodes.ros.qos import LOCKSTEP_QOS
    from aerial_sim.nodes.ros.stamps import to_stamp

    os.environ["AERIAL_SIM_EXECUTOR"] = executor
    process = start_node("barometer", source=source)
    context = rclpy.context.Context()
    rclpy.init(context=context)
    node = Node("executor_bench", context=context)
    odom_pub = node.create_publisher(Odometry, "/drone1/ground_truth/odom", LOCKSTEP_QOS)
    clock_pub = node.create_publisher(Clock, "/clock", LOCKSTEP_QOS)
    received = []
    node.create_subscription(FluidPressure, "/drone1/air_pressure", lambda m: received.append(1), LOCKSTEP_QOS)
    spinner = rclpy.executors.SingleThreadedExecutor(context=context)
    spinner.add_node(node)
    try:
        deadline = time.monotonic() + 30
        while odom_pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            spinner.spin_once(timeout_sec=0.05)
        time.sleep(1.0)
        message = Odometry()
        message.pose.pose.orientation.w = 1.0
        start_cpu, start = cpu_seconds(process.pid), time.monotonic()
        received.clear()
        k = 0
        while (now := time.monotonic()) - start < seconds:
            due = start + k / 250.0
            if now >= due:
                stamp = to_stamp(k / 250.0)
                message.header.stamp = stamp
                clock_pub.publish(Clock(clock=stamp))
                odom_pub.publish(message)
                k += 1
            spinner.spin_once(timeout_sec=max(0.0, min(0.002, due - now)))
        wall = time.monotonic() - start
        return (cpu_seconds(process.pid) - start_cpu) / wall, len(received) / wall
    finally:
        stop_node(process)
        node.destroy_node()
        rclpy.shutdown(context=context)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--executors", default="single,events", help="comma-separated: single, events")
    parser.add_argument("--before", type=Path, help="another checkout's src: its node runs too, interleaved")
    options = parser.parse_args()
    executors = options.executors.split(",")
    sources = [("this", None)] + ([("before", options.before.resolve())] if options.before else [])
    print(f"barometer node fed 250 Hz odometry for {options.seconds:g} s per executor")
    print(f"{'executor':<10}{'source':<8}{'cores':>8}{'out Hz':>9}")
    for _ in range(2):  # interleaved: drift hits every variant alike
        for executor in executors:
            for label, source in sources:
                cores, rate = run(executor, options.seconds, source)
                print(f"{executor:<10}{label:<8}{cores:>8.3f}{rate:>9.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
