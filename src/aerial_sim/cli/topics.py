"""``aerial_sim topics``: the live ROS graph's topics, types, publishers and rates.

For users without the ``ros2`` CLI: after a short discovery wait it subscribes to
every topic (raw, so nothing is deserialized, with best-effort QoS so sensor
streams are heard too) but those made only for a subscriber (:func:`on_demand_patterns`,
listed with rate ``-``; ``--all`` measures them too), counts arrivals for ``--duration`` seconds of wall-clock
time and prints one row per topic::

    topic                      type                        pubs  Hz (wall)  Hz (sim)
    /drone1/imu/data           sensor_msgs/msg/Imu            1      200.1     200.0

Rates are per second of real (wall-clock) time. When ``/clock`` is live, the
simulation's speed is measured from it and a ``Hz (sim)`` column gives the rate
per simulated second (wall rate / sim speed), which is what a node running on
sim time sees. Topics whose type cannot be imported here are listed with rate
``?``. Exit status 1 when no topic is found.

For periodic streams (:data:`aerial_sim.recording.rates.RATED_TYPES`) the
publishing node is asked for its rate parameter (``rate_hz`` ..., over its
standard ``get_parameters`` service, as the recorder does): a ``configured``
column shows it, and a stream measured below 95 % of it (per simulated second
when ``/clock`` runs, else per wall second) ends its row with
``LOW: 9.1 Hz of 30 Hz configured``.

The measuring helpers (:class:`RateMeter`, :func:`format_table`, ...) do not
import rclpy; only :func:`main` does.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

#: Arrivals kept per topic (enough for 2 kHz over the longest sensible duration).
MAX_SAMPLES = 100_000


@dataclass
class RateMeter:
    """Arrival times on one topic -> mean rate over the first-to-last span."""

    arrivals: list[float] = field(default_factory=list)

    def record(self, when: float) -> None:
        if len(self.arrivals) < MAX_SAMPLES:
            self.arrivals.append(when)

    @property
    def count(self) -> int:
        return len(self.arrivals)

    def rate_hz(self) -> float | None:
        """(n - 1) / (t_last - t_first): unbiased by when the window opened; None below 2 arrivals."""
        if self.count < 2 or self.arrivals[-1] <= self.arrivals[0]:
            return None
        return (self.count - 1) / (self.arrivals[-1] - self.arrivals[0])


@dataclass
class ClockMeter:
    """(wall, sim) pairs from ``/clock`` -> how fast simulated time runs."""

    samples: list[tuple[float, float]] = field(default_factory=list)

    def record(self, wall_s: float, sim_s: float) -> None:
        if len(self.samples) < MAX_SAMPLES:
            self.samples.append((wall_s, sim_s))

    def speed(self) -> float | None:
        """Simulated seconds per wall-clock second; None without two distinct samples."""
        if len(self.samples) < 2:
            return None
        (wall0, sim0), (wall1, sim1) = self.samples[0], self.samples[-1]
        if wall1 <= wall0:
            return None
        return (sim1 - sim0) / (wall1 - wall0)


@dataclass
class TopicRow:
    name: str
    types: list[str]
    publishers: int
    meter: RateMeter | None  # None: the type could not be imported here, or not measured (``measured``)
    configured_hz: float | None = None  # the publisher's configured rate, when it has one
    measured: bool = True  # False: made only for a subscriber, left unsubscribed (:func:`on_demand_patterns`)


def on_demand_patterns() -> tuple[str, ...]:
    """Topics a publisher makes only while something subscribes (the camera's label images and boxes, derived
    clouds): not subscribed to without ``--all``, since measuring them would make the camera render them all
    (about half its rate) and the other rates with it. The recorder leaves out the same by default."""
    from aerial_sim.recording.recorder import DEFAULT_EXCLUDE, ON_DEMAND_EXCLUDE, split_patterns

    return tuple(p for p in split_patterns(ON_DEMAND_EXCLUDE) if p not in split_patterns(DEFAULT_EXCLUDE))


def message_class(type_name: str) -> Any | None:
    """``'sensor_msgs/msg/Imu'`` -> ``sensor_msgs.msg.Imu``, or None when not importable."""
    parts = type_name.split("/")
    if len(parts) != 3 or not all(parts):
        return None
    package, kind, name = parts
    try:
        module = importlib.import_module(f"{package}.{kind}")
    except ImportError:
        return None
    return getattr(module, name, None)


def in_namespace(topic: str, namespace: str | None) -> bool:
    if not namespace or namespace.strip("/") == "":
        return True
    prefix = "/" + namespace.strip("/")
    return topic == prefix or topic.startswith(prefix + "/")


def format_rate(meter: RateMeter | None, divisor: float = 1.0, measured: bool = True) -> str:
    if not measured:
        return "-"
    if meter is None:
        return "?"
    rate = meter.rate_hz()
    if rate is None:
        return "0" if meter.count == 0 else f"{meter.count} msg"
    return f"{rate / divisor:.1f}"


def low_flag(row: TopicRow, sim_speed: float | None) -> str:
    """``LOW: 9.1 Hz of 30 Hz configured`` when the measured rate is short of the configured one, else ''.

    The configured rate is per simulated second: the measured wall rate is divided by
    the sim speed when it is known (else taken as it is: no /clock, wall time).
    """
    from aerial_sim.recording.rates import LOW_FRACTION

    rate = row.meter.rate_hz() if row.meter is not None else None
    if row.configured_hz is None or row.meter is None:
        return ""
    if rate is None:
        received = f"{row.meter.count} msg" if row.meter.count else "nothing received"
        return f"LOW: {received}, {row.configured_hz:g} Hz configured"
    if sim_speed:
        rate /= sim_speed
    return f"LOW: {rate:.1f} Hz of {row.configured_hz:g} Hz configured" if rate < LOW_FRACTION * row.configured_hz else ""


def format_table(rows: list[TopicRow], sim_speed: float | None) -> str:
    """The topic table; a ``Hz (sim)`` column only when sim speed is known, ``configured`` when any rate is."""
    header = ["topic", "type", "pubs", "Hz (wall)"]
    with_sim = sim_speed is not None and sim_speed > 0 and math.isfinite(sim_speed)
    with_configured = any(row.configured_hz is not None for row in rows)
    if with_sim:
        header.append("Hz (sim)")
    if with_configured:
        header += ["configured", ""]
    table = [header]
    for row in sorted(rows, key=lambda r: r.name):
        line = [row.name, ", ".join(row.types), str(row.publishers), format_rate(row.meter, measured=row.measured)]
        if with_sim:
            line.append(format_rate(row.meter, sim_speed, row.measured))
        if with_configured:
            line.append("" if row.configured_hz is None else f"{row.configured_hz:g}")
            line.append(low_flag(row, sim_speed if with_sim else None))
        table.append(line)
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    right = set(range(2, len(header) - 1)) if with_configured else set(range(2, len(header)))
    return "\n".join(
        "  ".join(cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip()
        for line in table
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="aerial_sim topics",
        description="List live topics with their types, publisher counts and measured rates (wall-clock Hz).",
    )
    parser.add_argument("--duration", type=float, default=3.0, help="seconds to measure rates for (default 3)")
    parser.add_argument("--namespace", default=None, help="only topics under this namespace, e.g. drone1")
    parser.add_argument("--discovery", type=float, default=1.0, help="seconds to wait for discovery first (default 1)")
    parser.add_argument("--all", action="store_true", help="also measure the topics made only for a subscriber (the "
                        "camera's labels: it then renders them, at about half its rate)")
    options = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not (options.duration > 0 and options.discovery >= 0):
        parser.error("--duration must be > 0 and --discovery >= 0")
    # Same discovery scope as processes started by `aerial_sim launch`.
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    try:
        import rclpy  # noqa: F401
    except ImportError:
        print("aerial_sim topics: rclpy is not installed", file=sys.stderr)
        return 2
    unmeasured = () if options.all else on_demand_patterns()
    rows, speed = _survey(options.duration, options.namespace, options.discovery, unmeasured=unmeasured)
    if not rows:
        where = f" under {options.namespace}" if options.namespace else ""
        domain = os.environ.get("ROS_DOMAIN_ID", "0")
        print(f"no topics found{where} (ROS_DOMAIN_ID={domain}); is the simulation running?", file=sys.stderr)
        return 1
    print(f"{len(rows)} topics; rates measured over {options.duration:g} s of wall-clock time")
    if speed is not None:
        print(f"/clock: simulated time runs at {speed:.2f}x real time; 'Hz (sim)' is per simulated second")
    print(format_table(rows, speed))
    if not all(row.measured for row in rows):
        print("- = not measured: made only while subscribed (the camera renders its labels for a listener); "
              "--all measures them, and the camera then slows")
    if any(low_flag(row, speed) for row in rows):
        print("LOW = under 95 % of the publisher's configured rate, as received by this one process; on a busy "
              "machine it can drop messages itself: the recorder's recording.txt counts from the stamps")
    return 0


def _survey(duration_s: float, namespace: str | None, discovery_s: float,
            skip: tuple[str, ...] = (), unmeasured: tuple[str, ...] = ()) -> tuple[list[TopicRow], float | None]:
    """Discover, subscribe, count for ``duration_s``; returns the rows and the sim speed. Topics in ``skip``
    are not subscribed (a benchmark leaves out streams that are made only for a listener); those matching a
    glob of ``unmeasured`` are listed but not subscribed."""
    import fnmatch

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    context = rclpy.context.Context()
    rclpy.init(args=[], context=context)
    node = Node(
        f"aerial_sim_topics_{os.getpid()}", context=context, enable_rosout=False, start_parameter_services=False
    )
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    qos = QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=100,
        reliability=ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.VOLATILE,
    )
    meters: dict[str, RateMeter | None] = {}
    types_of: dict[str, list[str]] = {}
    seen: set[str] = set()
    not_measured: set[str] = set()
    clock = ClockMeter()
    subscriptions = []

    def subscribe_new_topics() -> None:
        for name, types in node.get_topic_names_and_types():
            if name in seen:
                continue
            seen.add(name)
            if name == "/clock" and clock_class is not None:
                subscriptions.append(node.create_subscription(
                    clock_class,
                    "/clock",
                    lambda msg: clock.record(time.monotonic(), msg.clock.sec + msg.clock.nanosec * 1e-9),
                    qos,
                ))
            if not in_namespace(name, namespace) or name in skip:
                continue
            types_of[name] = list(types)
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in unmeasured):
                meters[name] = None
                not_measured.add(name)
                continue
            cls = message_class(types[0]) if types else None
            meters[name] = None if cls is None else RateMeter()
            if cls is not None:
                subscriptions.append(node.create_subscription(cls, name, _arrival_counter(meters[name]), qos, raw=True))

    clock_class = message_class("rosgraph_msgs/msg/Clock")
    from aerial_sim.recording.rates import RATED_TYPES as rated_types

    try:
        _spin_for(executor, discovery_s)
        # Keep looking while measuring: participants found late are still measured
        # (the rate is taken over each topic's own first-to-last arrival).
        deadline = time.monotonic() + duration_s
        while time.monotonic() < deadline:
            subscribe_new_topics()
            _spin_for(executor, min(0.25, max(0.0, deadline - time.monotonic())))
        own = node.get_name()
        rows = []
        publisher_nodes: dict[str, set[str]] = {}
        for name, types in types_of.items():
            infos = [info for info in node.get_publishers_info_by_topic(name) if info.node_name != own]
            subscribers = sum(1 for info in node.get_subscriptions_info_by_topic(name) if info.node_name != own)
            if infos or subscribers:  # not a topic only this command's own node uses
                rows.append(TopicRow(name=name, types=types, publishers=len(infos), meter=meters[name],
                                     measured=name not in not_measured))
                if types and types[0] in rated_types:
                    publisher_nodes[name] = {info.node_namespace.rstrip("/") + "/" + info.node_name for info in infos}
        for subscription in subscriptions:  # measuring is over; their traffic would starve the service replies
            node.destroy_subscription(subscription)
        rates = configured_rates(node, executor, publisher_nodes)
        for row in rows:
            row.configured_hz = rates.get(row.name)
        return rows, clock.speed()
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)


def configured_rates(node, executor, publisher_nodes: dict[str, set[str]], timeout_s: float = 5.0) -> dict[str, float]:
    """Topic -> configured rate, asked from each publishing node's ``get_parameters`` service (bounded wait).

    Waits up to ``timeout_s`` for the answers, re-asking every 0.5 s what is unanswered.
    A topic is rated when every publisher answers with the same rate
    (:func:`aerial_sim.recording.rates.configured_rate_hz`); nodes without a
    parameter service or without a rate parameter leave it unrated.
    """
    from rcl_interfaces.srv import GetParameters

    from aerial_sim.recording.rates import QUERIED_PARAMETERS, agreed_rate, configured_rate_hz, parameter_number

    wanted = sorted({n for nodes in publisher_nodes.values() for n in nodes if not n.endswith("_NODE_NAME_UNKNOWN_")})
    clients = {name: node.create_client(GetParameters, f"{name}/get_parameters") for name in wanted}
    asked: dict[str, dict[str, list]] = {name: {p: [] for p in QUERIED_PARAMETERS} for name in wanted}
    answers: dict[str, dict[str, float | None]] = {name: {} for name in wanted}
    deadline, next_send = time.monotonic() + timeout_s, 0.0
    while time.monotonic() < deadline and any(len(a) < len(QUERIED_PARAMETERS) for a in answers.values()):
        if time.monotonic() >= next_send:
            # (Re)send what is unanswered: a server that has just matched the request can still drop its
            # first responses (its response writer not matched yet), so a request may need a second try.
            for name, client in clients.items():
                if client.service_is_ready():
                    for parameter, futures in asked[name].items():
                        if parameter not in answers[name]:
                            # One name per request: a node answers nothing when any name asked is undeclared.
                            futures.append(client.call_async(GetParameters.Request(names=[parameter])))
            next_send = time.monotonic() + 0.5
        _spin_for(executor, 0.05)
        for name, by_parameter in asked.items():
            for parameter, futures in by_parameter.items():
                done = next((f for f in futures if f.done() and f.exception() is None), None)
                if done is not None and parameter not in answers[name]:
                    values = done.result().values
                    answers[name][parameter] = parameter_number(values[0]) if values else None
    parameters = {name: a for name, a in answers.items() if len(a) == len(QUERIED_PARAMETERS)}
    for client in clients.values():
        node.destroy_client(client)
    rates = {}
    for topic, nodes in publisher_nodes.items():
        if nodes and all(n in parameters for n in nodes):
            rate = agreed_rate(configured_rate_hz(topic, parameters[n]) for n in nodes)
            if rate is not None:
                rates[topic] = rate
    return rates


def _arrival_counter(meter: RateMeter):
    def on_message(_serialized: bytes) -> None:
        meter.record(time.monotonic())

    return on_message


#: The one timeout of every spin_once here (s). rclpy's executor hands the callbacks ready at one wait out over
#: the following spin_once calls only while their arguments stay equal: a timeout that changes from call to call
#: (the time left) makes it wait afresh each time and run the first ready subscription only, so on a busy
#: machine the topics subscribed first were counted and the others starved (test_sensors_nodes' feeder did that).
SPIN_S = 0.01


def _spin_for(executor, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while deadline - time.monotonic() > 0:
        executor.spin_once(timeout_sec=SPIN_S)
