"""Subscriptions whose callbacks get the few fields a node reads, decoded from the CDR bytes
(:mod:`aerial_sim.cdr`) once per message and process, instead of rclpy's message objects; a fleet
process's ground truth may come from its row of ``/swarm/state`` (:mod:`aerial_sim.nodes.ros.swarm_link`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from rclpy.node import Node
from rclpy.qos import QoSProfile

from aerial_sim.cdr.decode import (ImuFields, JointStateFields, OdometryFields, decode_imu, decode_joint_state,
                                   decode_odometry)
from aerial_sim.nodes.ros.shared_subscriptions import SHARED_READERS
from aerial_sim.nodes.ros.swarm_link import SWARM_TRUTH

if TYPE_CHECKING:
    from aerial_sim.nodes.ros.clocks import InputStampClock


def subscribe_decoded(node: Node, message_type: type, decode: Callable[[bytes], Any], topic: str,
                      callback: Callable[[Any], None], qos: QoSProfile, clock: "InputStampClock | None" = None,
                      shared: bool = False):
    """A raw (CDR bytes) subscription whose ``callback`` gets ``decode(bytes)``: the few fields a node
    reads, without rclpy building the message object (:mod:`aerial_sim.cdr`; a quarter of a 250 Hz
    subscriber's CPU). Bytes ``decode`` refuses raise ``ValueError`` out of the callback, which the
    node's :class:`InputGuard` reports (topic, type, reason) and drops, as any bad message. With
    ``clock``, each message's stamp sets the node's sim time first (:class:`InputStampClock`). ``shared``: the
    process's nodes that read this stream so share one subscription (:mod:`aerial_sim.nodes.ros.shared_subscriptions`;
    for nodes that keep their subscription for good)."""
    decode = _decoded_once(decode)
    if shared:
        return SHARED_READERS.subscribe(node, message_type, decode, topic, callback, qos, clock)
    if clock is None:
        def on_bytes(data: bytes) -> None:
            callback(decode(data))
    else:
        def on_bytes(data: bytes) -> None:
            fields = decode(data)
            clock.advance(fields.stamp_sec * 1_000_000_000 + fields.stamp_nanosec)
            callback(fields)
    return node.create_subscription(message_type, topic, on_bytes, qos, raw=True)


class LastDecoded:
    """``decode`` that remembers its last bytes and fields: a message read by several nodes of one
    process (the barometer, magnetometer and GPS of a vehicle each get their own copy of its
    odometry) is decoded once. Equal bytes are the same message, whoever reads it."""

    def __init__(self, decode: Callable[[bytes], Any]):
        self.decode = decode
        self.last: tuple[bytes | None, Any] = (None, None)

    def __call__(self, data: bytes) -> Any:
        last_data, fields = self.last
        if data != last_data:
            fields = self.decode(data)  # a ValueError leaves the memory as it was
            self.last = (data, fields)
        return fields


_DECODED_ONCE: dict[Callable[[bytes], Any], LastDecoded] = {}


def _decoded_once(decode: Callable[[bytes], Any]) -> LastDecoded:
    """The process's one :class:`LastDecoded` for ``decode`` (executor callbacks run one at a time)."""
    if decode not in _DECODED_ONCE:
        _DECODED_ONCE[decode] = LastDecoded(decode)
    return _DECODED_ONCE[decode]


def subscribe_odometry(node: Node, topic: str, callback: Callable[[OdometryFields], None], qos: QoSProfile,
                       clock: "InputStampClock | None" = None, shared: bool = False):
    """Subscribe to nav_msgs/Odometry; ``callback`` gets :class:`aerial_sim.cdr.decode.OdometryFields` (``shared``: as
    :func:`subscribe_decoded`'s)."""
    from nav_msgs.msg import Odometry  # noqa: PLC0415 - not every node reads odometry

    if SWARM_TRUTH.route(node, topic, callback, clock):
        return SWARM_TRUTH.subscription  # a fleet process's row of /swarm/state (swarm_link)
    return subscribe_decoded(node, Odometry, decode_odometry, topic, callback, qos, clock, shared)


def subscribe_imu(node: Node, topic: str, callback: Callable[[ImuFields], None], qos: QoSProfile,
                  clock: "InputStampClock | None" = None):
    """Subscribe to sensor_msgs/Imu; ``callback`` gets :class:`aerial_sim.cdr.decode.ImuFields`."""
    from sensor_msgs.msg import Imu  # noqa: PLC0415

    if SWARM_TRUTH.route(node, topic, callback, clock):
        return SWARM_TRUTH.subscription
    return subscribe_decoded(node, Imu, decode_imu, topic, callback, qos, clock)


def subscribe_joint_state(node: Node, topic: str, callback: Callable[[JointStateFields], None], qos: QoSProfile):
    """Subscribe to sensor_msgs/JointState; ``callback`` gets :class:`aerial_sim.cdr.decode.JointStateFields`."""
    from sensor_msgs.msg import JointState  # noqa: PLC0415

    return subscribe_decoded(node, JointState, decode_joint_state, topic, callback, qos)
