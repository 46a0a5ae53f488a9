"""What the in-process recorder's DDS subscription costs a composed graph per message, against handing the
published bytes straight to it (a "tap", issue 34; doc/scale.md "A tap for the in-process recorder").

    tools/dev.sh bench recorder_tap [--rounds 400] [--no-record]

One process, one DDS participant, as the node container runs the graph. The physics node's five streams
(``/clock``, odometry, IMU, wind, rotor speeds: its CDR bytes, lockstep QoS) are published by one node, 8
periods a round (40 messages; a smoke flight's recorder takes some 42 a round). A second node, standing for
the sensors and the controller, reads ``/clock``, odometry and the IMU in every variant (its takes are
counted in all of them alike). The variants, interleaved round by round:

- ``dds``: the recorder as today: a raw subscription per topic on an unspun reader node; each round one
  look at the wait set, then every message taken with its info (``take_message``), tupled and sorted by
  the receive stamp, as ``Recorder._take_arrived`` does;
- ``tap``: no recorder subscription; each publish also appends ``(time.time_ns(), n, topic, data)`` to a
  list under a lock, and each round swaps the list out under that lock and sorts it;
- ``bare``: the publishes and the other reader only (what neither variant can save).

Prints the process CPU (all threads: Fast DDS delivers in process in the writer's thread) per message of each,
as the median of the rounds, and ``dds - tap``: what a tap would save a message.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src")]

from _results import record, row  # noqa: E402

PERIODS = 8  # a round's periods (the recorder's take_period_s of 4 ms at about twice real time)


def streams():
    """The physics node's five messages of a period: (topic, message class, CDR bytes)."""
    from geometry_msgs.msg import Vector3Stamped
    from nav_msgs.msg import Odometry
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import Imu, JointState

    from aerial_sim.cdr.encode import (encode_clock, encode_imu, encode_joint_state, encode_odometry,
                                       encode_vector3_stamped)

    stamp = 12_345_000_000
    covariance36 = [1e-12 if i % 7 == 0 else 0.0 for i in range(36)]
    covariance9 = (1e-4, 0.0, 0.0, 0.0, 1e-4, 0.0, 0.0, 0.0, 1e-4)
    return [
        ("/clock", Clock, encode_clock(stamp)),
        ("/drone1/ground_truth/odom", Odometry,
         encode_odometry(stamp, "map", "drone1/base_link", (1.0, 2.0, 3.0), (1.0, 0.0, 0.0, 0.0), covariance36,
                         (0.1, 0.2, 0.3), (0.01, 0.02, 0.03), covariance36)),
        ("/drone1/ground_truth/imu", Imu,
         encode_imu(stamp, "drone1/imu_link", (1.0, 0.0, 0.0, 0.0), (-1.0,) + (0.0,) * 8, (0.01, 0.02, 0.03),
                    covariance9, (0.1, 0.0, 9.81), covariance9)),
        ("/drone1/ground_truth/wind", Vector3Stamped, encode_vector3_stamped(stamp, "map", (1.0, 0.5, 0.0))),
        ("/drone1/rotors", JointState,
         encode_joint_state(stamp, "drone1/base_link", [f"rotor_{i}" for i in range(4)], (0.0,) * 4, (800.0,) * 4,
                            (4.0,) * 4)),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=400, help="rounds of each variant (default 400)")
    parser.add_argument("--no-record", action="store_true", help="do not write doc/results/recorder_tap.json")
    options = parser.parse_args()
    if options.rounds < 10:
        print("--rounds must be at least 10", file=sys.stderr)
        return 2

    import rclpy
    from rclpy.node import Node

    from aerial_sim.nodes.ros.qos import stream_qos
    from aerial_sim.nodes.ros.raw_publish import raw_sender
    from aerial_sim.nodes.ros.raw_take import (ArrivalWait, not_called, take_raw, take_raw_with_info,
                                               unspun_reader_node)

    rclpy.init()
    qos = stream_qos(True)
    sender = Node("tap_bench_physics")
    other = unspun_reader_node(sender, "others")  # the sensors and the controller
    recorder = unspun_reader_node(sender, "recorder")
    messages = streams()
    sends = {}
    other_subscriptions, recorder_subscriptions = [], []
    for topic, message_type, data in messages:
        sends[topic] = raw_sender(sender.create_publisher(message_type, topic, qos))
        if topic in ("/clock", "/drone1/ground_truth/odom", "/drone1/ground_truth/imu"):
            other_subscriptions.append(other.create_subscription(message_type, topic, not_called, qos, raw=True))
    arrivals = ArrivalWait(sender.context)
    lock = threading.Lock()
    tapped: list = []
    count = iter(range(1 << 62))

    def drain_others():
        for subscription in other_subscriptions:
            while take_raw(subscription) is not None:
                pass

    def round_bare():
        for _ in range(PERIODS):
            for topic, _, data in messages:
                sends[topic](data)
        drain_others()

    def round_tap():
        nonlocal tapped
        for _ in range(PERIODS):
            for topic, _, data in messages:
                sends[topic](data)
                with lock:
                    tapped.append((time.time_ns(), next(count), topic, data))
        drain_others()
        with lock:
            began_ns = time.time_ns()
            arrived, tapped = tapped, []
        arrived.sort()
        return began_ns, arrived

    def round_dds():
        for _ in range(PERIODS):
            for topic, _, data in messages:
                sends[topic](data)
        drain_others()
        arrivals.ready(recorder_subscriptions, 0.0)
        arrived = []
        for subscription in recorder_subscriptions:
            handle, message_type = subscription.handle, subscription.msg_type
            with handle:
                while (taken := handle.take_message(message_type, True)) is not None:
                    data, info = taken
                    arrived.append((info["received_timestamp"], next(count), subscription.topic_name, data,
                                    info.get("source_timestamp") or 0))
        arrived.sort()
        return arrived

    try:
        for topic, message_type, _ in messages:
            recorder_subscriptions.append(recorder.create_subscription(message_type, topic, not_called, qos,
                                                                       raw=True))
        # Discovery: every reader matched before timing (the dds variant's reader gets every message).
        deadline = time.monotonic() + 10.0
        while len(round_dds()) != PERIODS * len(messages):
            if time.monotonic() > deadline:
                print("the recorder's reader did not get every message in 10 s: not timed", file=sys.stderr)
                return 1
            time.sleep(0.1)
        for _ in range(20):
            round_dds()
            round_tap()
            round_bare()
        cpu = {"dds": [], "deliver": [], "take": [], "tap": [], "bare": []}
        # The dds variant keeps its subscriptions throughout: the others publish to a reader that is not
        # taken from until the next dds round, as a recorder that is not there would not be published to.
        # So the tap and bare rounds run with the recorder's reader destroyed and made again between blocks.
        for block in range(options.rounds // 10):
            for _ in range(10):
                start = time.process_time_ns()
                round_dds()
                cpu["dds"].append(time.process_time_ns() - start)
                start = time.process_time_ns()
                round_bare()  # with the recorder's reader there: the publishes' delivery to it
                cpu["deliver"].append(time.process_time_ns() - start)
                start = time.process_time_ns()
                arrivals.ready(recorder_subscriptions, 0.0)  # the recorder's look and take of that round
                for subscription in recorder_subscriptions:
                    while take_raw_with_info(subscription) is not None:
                        pass
                cpu["take"].append(time.process_time_ns() - start)
            for subscription in recorder_subscriptions:
                recorder.destroy_subscription(subscription)
            recorder_subscriptions.clear()
            time.sleep(0.05)  # the unmatching
            for _ in range(10):
                start = time.process_time_ns()
                round_tap()
                cpu["tap"].append(time.process_time_ns() - start)
                start = time.process_time_ns()
                round_bare()
                cpu["bare"].append(time.process_time_ns() - start)
            for topic, message_type, _ in messages:
                recorder_subscriptions.append(recorder.create_subscription(message_type, topic, not_called, qos,
                                                                           raw=True))
            while len(round_dds()) != PERIODS * len(messages):  # matched again
                time.sleep(0.05)
    finally:
        recorder.destroy_node()
        other.destroy_node()
        sender.destroy_node()
        rclpy.shutdown()
    per_message = PERIODS * len(messages)
    us = {name: statistics.median(values) / per_message / 1000 for name, values in cpu.items()}
    print(f"process CPU per message (median of {len(cpu['dds'])} rounds of {per_message} messages):")
    for name in ("bare", "tap", "dds", "deliver"):
        print(f"  {name:<8}{us[name]:>7.2f} us")
    print(f"  take    {us['take']:>7.2f} us (the recorder's look and take alone, by take_raw_with_info)")
    saved = us["dds"] - us["tap"]
    print(f"  dds - tap: {saved:.2f} us a message ({saved * 42:.0f} us a round of 42)")
    if not options.no_record:
        record("recorder_tap", "The in-process recorder's DDS subscription against a direct hand-off",
               [row("publish + other reader only (bare)", round(us["bare"], 2), "us/message"),
                row("bare + hand-off to the recorder (tap)", round(us["tap"], 2), "us/message"),
                row("bare + the recorder's DDS reader, look and take (dds)", round(us["dds"], 2), "us/message"),
                row("bare with the recorder's reader matched, not taken from (deliver)", round(us["deliver"], 2),
                    "us/message"),
                row("the recorder's look and take alone (take)", round(us["take"], 2), "us/message"),
                row("dds - tap", round(saved, 2), "us/message")],
               notes="One process, the physics node's five streams, 8 periods a round; process CPU, median.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
