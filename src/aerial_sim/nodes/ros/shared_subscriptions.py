"""One middleware reader per stream and process: the nodes of a process that read the same topic the same
way share one raw subscription (:data:`SHARED_READERS`).

In a node container (:mod:`aerial_sim.nodes.container`, a batch run's default) a vehicle's ground-truth
odometry is read by five nodes: the flight controller, the mission runner, the barometer, the
magnetometer and the GPS. With a subscription each, every 4 ms period the middleware hands the same
bytes to five readers in the publishing (physics) thread, and the executor takes and dispatches
each in turn: about 13 us of the publisher's CPU and 15-30 us of the executor's per extra reader
(``benchmarks/batch_cpu.py``, issue 34). Here the first node that asks subscribes; the others' requests
become routes of that subscription: each message is decoded once (as before, ``subscribe_decoded``),
then every route gets it in the order the nodes asked, with its own clock advanced to the stamp first.

What each node sees is what its own subscription gave it: the same fields, at the same stamps, in
the same order. The graph differs in one way a user may notice: the process shows one subscriber of
the topic, not one per node. A node whose callback fails does not keep the others from the message;
the failures are raised together (``ValueError``) to the first node's input guard, which reports and
drops as for any bad message. With per-node callback timing on, each node is booked its own part. Only callers that pass ``shared=True`` share (a node that destroys and
recreates its subscription, as the web viewer does, keeps its own).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from rclpy.node import Node
from rclpy.qos import QoSProfile

from aerial_sim.nodes.ros import callback_cpu


class _Route:
    """One node's request: ``callback`` (with its ``clock``) for the shared reader's messages."""

    def __init__(self, node: Node, callback: Callable[[Any], None], clock) -> None:
        self.node, self.callback, self.clock = node, callback, clock

    def accounted(self, owner: Node) -> None:
        """With per-node callback timing on (:mod:`aerial_sim.nodes.ros.callback_cpu`): this route's CPU
        goes to its own node, out of the owner's (whose input guard times the whole message)."""
        entry = callback_cpu.account(self.node.get_fully_qualified_name())
        if entry is None or self.node is owner:
            return
        owner_entry = callback_cpu.account(owner.get_fully_qualified_name())
        callback, clock = self.callback, time.thread_time_ns

        def timed(fields) -> None:
            started = clock()
            try:
                callback(fields)
            finally:
                spent = clock() - started
                entry[0] += spent
                entry[1] += 1
                owner_entry[0] -= spent
        self.callback = timed


class _SharedReader:
    """A raw subscription and the routes it serves."""

    def __init__(self, decode: Callable[[bytes], Any]) -> None:
        self.decode = decode
        self.routes: list[_Route] = []
        self.owner: Node | None = None
        self.subscription = None

    def alive(self, node: Node) -> bool:
        """Whether ``node`` may join: the owner's subscription still exists, in ``node``'s context (a process
        that destroys its nodes and builds new ones, as tests do, starts over)."""
        return (self.owner is not None and self.owner.context is node.context
                and any(s is self.subscription for s in self.owner.subscriptions))

    def on_bytes(self, data: bytes) -> None:
        fields = self.decode(data)  # a ValueError here is the message's: the first node's guard reports it
        stamp_ns = None
        failures = []
        for route in self.routes:
            try:
                if route.clock is not None:
                    if stamp_ns is None:
                        stamp_ns = fields.stamp_sec * 1_000_000_000 + fields.stamp_nanosec
                    route.clock.advance(stamp_ns)
                route.callback(fields)
            except Exception as error:  # noqa: BLE001 - one node's failure is reported below, the rest go on
                failures.append(failure_line(route.node, error))
        if failures:
            raise ValueError(f"{len(failures)} node(s) could not use the message: {'; '.join(failures)}")


def failure_line(node: Node, error: Exception) -> str:
    """One node's part of a shared message's failure report: its fully qualified name (as the start gate and
    ``ros2 node list`` write it) and the error."""
    return f"{node.get_fully_qualified_name()}: {type(error).__name__}: {error}"


class SharedReaders:
    """The process's shared readers, by (resolved topic, message type, decoder, QoS)."""

    def __init__(self) -> None:
        self.readers: dict[tuple, _SharedReader] = {}

    def reset(self) -> None:
        self.readers.clear()

    def subscribe(self, node: Node, message_type: type, decode: Callable[[bytes], Any], topic: str,
                  callback: Callable[[Any], None], qos: QoSProfile, clock=None):
        """``callback`` gets ``decode(bytes)`` of every message on ``topic``, as from
        :func:`~aerial_sim.nodes.ros.subscriptions.subscribe_decoded`; the subscription is the process's
        one for that stream (made on the first node that asks, which owns it)."""
        resolved = node.resolve_topic_name(topic)
        key = (resolved, message_type, decode, _qos_key(qos))
        reader = self.readers.get(key)
        if reader is None or not reader.alive(node):
            reader = self.readers[key] = _SharedReader(decode)
            reader.owner = node
            reader.subscription = node.create_subscription(message_type, resolved, reader.on_bytes, qos, raw=True)
        route = _Route(node, callback, clock)
        route.accounted(reader.owner)
        reader.routes.append(route)
        return reader.subscription

    def connected_topics(self, node: Node) -> set[str]:
        """The topics ``node`` reads through a reader another node owns, once that reader has a publisher (a
        lockstep participant's inputs, :class:`~aerial_sim.nodes.ros.lockstep.ConnectedInputsPublisher`)."""
        return {key[0] for key, reader in self.readers.items()
                if reader.owner is not node and any(route.node is node for route in reader.routes)
                and reader.alive(node) and reader.subscription.get_publisher_count() > 0}


def _qos_key(qos: QoSProfile) -> tuple:
    return (qos.history, qos.depth, qos.reliability, qos.durability, qos.lifespan.nanoseconds, qos.deadline.nanoseconds,
            qos.liveliness, qos.liveliness_lease_duration.nanoseconds, qos.avoid_ros_namespace_conventions)


#: The process's shared readers.
SHARED_READERS = SharedReaders()
