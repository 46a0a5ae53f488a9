"""Shared by the node benchmarks: run a node in its own process, feed it, count what comes back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from _domain import private_domain

REPO = Path(__file__).resolve().parents[1]


def start_node(module: str, *ros_args: str, source: Path | None = None) -> subprocess.Popen:
    """``python -m aerial_sim.nodes.<module>`` in namespace /drone1, lockstep (reliable) QoS.

    ``source``: another checkout's ``src`` to run the node from (a before/after comparison)."""
    env = dict(os.environ, PYTHONPATH=str(source or REPO / "src"), AERIAL_SIM_SHARE=str(REPO),
               ROS_DOMAIN_ID=private_domain(), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    command = [sys.executable, "-m", f"aerial_sim.nodes.{module}", "--ros-args", "-r", "__ns:=/drone1",
               "-p", "lockstep:=true", *ros_args]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_node(process: subprocess.Popen) -> None:
    """Ctrl-C the node; kill it if it has not exited after 10 s."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def measure(node, publishers, make_messages, output_topic: str, output_type, seconds: float,
            rate_hz: float | None) -> tuple[float, float]:
    """Publish ``make_messages(i)`` (one per publisher) at ``rate_hz`` (None: flat out) for ``seconds``;
    return (published rate, received rate) in Hz."""
    import rclpy

    from aerial_sim.nodes.ros.qos import LOCKSTEP_QOS

    received = []
    node.create_subscription(output_type, output_topic, lambda m: received.append(time.monotonic()), LOCKSTEP_QOS)
    executor = rclpy.executors.SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (all(p.get_subscription_count() for p in publishers)
                                                and node.count_publishers(output_topic)):
        executor.spin_once(timeout_sec=0.05)
    settle = time.monotonic() + 1.5  # let DDS finish matching both directions
    while time.monotonic() < settle:
        executor.spin_once(timeout_sec=0.05)
    start = time.monotonic()
    sent = 0
    while time.monotonic() - start < seconds:
        for publisher, message in zip(publishers, make_messages(sent)):
            publisher.publish(message)
        sent += 1
        executor.spin_once(timeout_sec=0.0)
        if rate_hz:
            due = start + sent / rate_hz
            while (pause := due - time.monotonic()) > 0:
                executor.spin_once(timeout_sec=pause)
    end = time.monotonic()
    drain = end + 1.0
    while time.monotonic() < drain:
        executor.spin_once(timeout_sec=0.05)
    in_window = [t for t in received if t <= end + 0.2]
    return sent / (end - start), len(in_window) / (end - start)


def child_pid(parent: int, module: str) -> int:
    """Pid of the process running ``module`` in the session of ``parent`` (a launch started with
    ``start_new_session``), so other users' nodes on a shared machine are never picked."""
    for _ in range(50):
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and entry.name != str(parent):
                try:
                    command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                    session = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[3])
                except (OSError, IndexError, ValueError):
                    continue
                if module in command and session == parent:
                    return int(entry.name)
        time.sleep(0.2)
    raise RuntimeError(f"no process runs {module}")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
