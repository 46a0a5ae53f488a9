"""What a SIGSTOP shows of a load race: reliable messages sent to a stopped process, by transport.

    tools/dev.sh bench sigstop_delivery [--stops 0.05 0.5 2] [--messages 100]

Load races are reproduced here by holding a process of the graph up (SIGSTOP, then SIGCONT) at the
moment that matters. This measures whether that is a faithful stand-in for a process that a busy
machine does not schedule: a publisher sends ``--messages`` std_msgs/Header reliably (KEEP_LAST 200,
so none is dropped by a history) to a subscriber in another process, the first three before it is
held up and the rest while it is, and the subscriber counts what it received within 8 s. Held up:

- ``stop S``: SIGSTOP for S seconds, then SIGCONT;
- ``sigcont``: SIGCONT alone (a signal that stops nothing);
- ``starve S``: the subscriber pinned to CPU 1 in the idle scheduling class while a busy loop runs
  there for S seconds (it gets almost no CPU, as a nice 10 process on a machine at load 30 does).

Each over this project's transport profile (``config/fastdds.xml``: shared memory, then UDP) and over
its UDP transport alone. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src")]
from _domain import private_domain  # noqa: E402

private_domain()
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])

TOPIC = "/sigstop_delivery/probe"
LISTEN_S = 8.0


def qos():
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=200, reliability=ReliabilityPolicy.RELIABLE)


def subscriber() -> None:
    """The subscribing process: prints 'ready', then after LISTEN_S of wall time how many it received."""
    import rclpy
    from std_msgs.msg import Header

    from aerial_sim.nodes.ros.transport import use_transport_profile

    use_transport_profile()
    rclpy.init()
    node = rclpy.create_node("sigstop_delivery_sub")
    received: list[int] = []
    node.create_subscription(Header, TOPIC, lambda m: received.append(int(m.frame_id)), qos())
    print("ready", flush=True)
    end = time.monotonic() + LISTEN_S
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    print(len(received), flush=True)


def udp_only_profile() -> str:
    """config/fastdds.xml with its UDP transport alone (a temporary file)."""
    text = (REPO / "config" / "fastdds.xml").read_text()
    both = "<transport_id>aerial_sim_shm</transport_id>\n          <transport_id>aerial_sim_udp</transport_id>"
    assert both in text, "config/fastdds.xml no longer lists shm then udp"
    handle, path = tempfile.mkstemp(suffix=".xml")
    with os.fdopen(handle, "w") as stream:
        stream.write(text.replace(both, "<transport_id>aerial_sim_udp</transport_id>"))
    return path


def one_run(mode: str, seconds: float, messages: int, profile: str | None) -> int:
    """Messages the subscriber received of ``messages`` (see the module doc)."""
    import rclpy
    from std_msgs.msg import Header

    from aerial_sim.nodes.ros.transport import use_transport_profile

    environment = dict(os.environ)
    if profile:
        environment["FASTDDS_DEFAULT_PROFILES_FILE"] = profile
    command = [sys.executable, __file__, "--subscriber"]
    if mode == "starve":
        command = ["taskset", "-c", "1", "chrt", "--idle", "0", *command]
    sub = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=environment)
    context = rclpy.context.Context()
    try:
        assert sub.stdout.readline().strip() == "ready"
        if profile:
            os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = profile
        use_transport_profile()
        rclpy.init(context=context)
        node = rclpy.create_node("sigstop_delivery_pub", context=context)
        publisher = node.create_publisher(Header, TOPIC, qos())
        executor = rclpy.executors.SingleThreadedExecutor(context=context)
        executor.add_node(node)
        while publisher.get_subscription_count() == 0:
            executor.spin_once(timeout_sec=0.05)
        time.sleep(1.0)  # the subscriber's side matched too
        for k in range(3):
            publisher.publish(Header(frame_id=str(k)))
        time.sleep(0.5)
        if mode == "stop":
            os.kill(sub.pid, signal.SIGSTOP)
            threading.Timer(seconds, os.kill, (sub.pid, signal.SIGCONT)).start()
        elif mode == "sigcont":
            os.kill(sub.pid, signal.SIGCONT)
        elif mode == "starve":
            subprocess.Popen(["taskset", "-c", "1", sys.executable, "-c",
                              f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass"])
            time.sleep(0.05)
        for k in range(3, messages):
            publisher.publish(Header(frame_id=str(k)))
        return int(sub.stdout.readline().strip() or -1)
    finally:
        if context.ok():
            rclpy.shutdown(context=context)
        sub.kill()
        sub.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stops", type=float, nargs="+", default=[0.05, 0.5, 2.0])
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--subscriber", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.subscriber:
        subscriber()
        return
    udp = udp_only_profile()
    try:
        runs = [("none", 0.0), ("sigcont", 0.0)] + [("stop", s) for s in args.stops] + [("starve", max(args.stops))]
        print(f"{'held up':<12} {'shm + udp':>10} {'udp alone':>10}   (received of {args.messages}, load "
              f"{os.getloadavg()[0]:.1f})")
        for mode, seconds in runs:
            label = mode if mode in ("none", "sigcont") else f"{mode} {seconds:g} s"
            counts = [one_run(mode, seconds, args.messages, profile) for profile in (None, udp)]
            print(f"{label:<12} {counts[0]:>10} {counts[1]:>10}", flush=True)
    finally:
        os.unlink(udp)


if __name__ == "__main__":
    main()
