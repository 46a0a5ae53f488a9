"""A recorded topic's subscription: the QoS that matches its publishers (:func:`matching_qos`) and a raw
subscription on the recorder's unspun reader that counts the messages the middleware reports lost
(:func:`subscribe_raw`), where that is safe (:func:`counts_transport_losses`)."""

from __future__ import annotations

import importlib
import os
from typing import Callable

from rclpy.event_handler import SubscriptionEventCallbacks, UnsupportedEventTypeError
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from aerial_sim.recording.bag import qos_profile_dict
from aerial_sim.nodes.ros.raw_take import not_called


def policy_name(policy) -> str:
    return getattr(policy, "name", str(policy)).lower()


def matching_qos(publishers, depth: int) -> tuple[QoSProfile, list[dict]]:
    """The QoS to subscribe with (best effort if any publisher is best effort, else reliable; transient-local
    if every publisher is latched) and the publishers' offered profiles, as the bag's metadata lists them."""
    offered = []
    best_effort, all_latched = False, True
    for info in publishers:
        profile = info.qos_profile
        reliability = policy_name(profile.reliability)
        durability = policy_name(profile.durability)
        best_effort |= reliability == "best_effort"
        all_latched &= durability == "transient_local"
        offered.append(qos_profile_dict(reliability, durability, policy_name(profile.history), profile.depth))
    qos = QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=ReliabilityPolicy.BEST_EFFORT if best_effort else ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if all_latched else DurabilityPolicy.VOLATILE,
    )
    return qos, offered


def message_class(msgtype: str):
    """The Python class of ``pkg/msg/Type`` (rclpy needs it for the type support, even raw)."""
    package, kind, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.{kind}"), name)


#: Middlewares whose message-lost event can deadlock its reader: rmw_fastrtps's ``rmw_take_event`` locks the
#: event's mutex, then the DataReader's (``get_sample_lost_status``), while its receive thread holds the
#: DataReader's mutex and calls ``on_sample_lost``, which locks the event's: an AB-BA inversion
#: (ros2/rmw_fastrtps pull request 890, fixed after the Kilted wheels this project installs). Seen here on
#: 2026-11-27: a recorder whose main thread sat in ``get_sample_lost_status`` for ever holding the GIL, deaf
#: to SIGINT, SIGTERM and its launcher's death (issue 34's recorder that hung, and its nodes that ignored
#: both signals until SIGKILL, under load, where samples are lost).
MESSAGE_LOST_DEADLOCKS = ("rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp")


def counts_transport_losses(rmw: str | None = None) -> bool:
    """Whether the recorder asks the middleware ``rmw`` (default: this process's) for message-lost events.
    Not under Fast DDS (:data:`MESSAGE_LOST_DEADLOCKS`): a stamped stream's losses still show as stamp gaps
    in the run report; an unstamped stream's go uncounted."""
    if rmw is None:
        rmw = os.environ.get("RMW_IMPLEMENTATION") or "rmw_fastrtps_cpp"
    return rmw not in MESSAGE_LOST_DEADLOCKS


def subscribe_raw(node: Node, reader: Node, message_type, topic: str, qos: QoSProfile,
                  on_lost: Callable[[object], None]):
    """A raw subscription of the unspun ``reader`` (the taker thread drains it) whose event handler, counting
    the messages the middleware reports lost (``on_lost(info)``), is spun with ``node`` (where the middleware
    counts them safely: :func:`counts_transport_losses`)."""
    subscription = None
    if counts_transport_losses():
        try:
            subscription = reader.create_subscription(message_type, topic, not_called, qos, raw=True,
                                                      event_callbacks=SubscriptionEventCallbacks(message_lost=on_lost))
        except UnsupportedEventTypeError:  # a middleware without the event: no transport-loss count
            pass
    if subscription is None:
        subscription = reader.create_subscription(message_type, topic, not_called, qos, raw=True)
    for handler in subscription.event_handlers:
        reader.remove_waitable(handler)
        node.add_waitable(handler)
    return subscription


def hand_back_loss_handlers(node: Node, reader: Node, subscriptions) -> None:
    """Before ``reader`` is destroyed: its subscriptions' event handlers go back from ``node`` to it."""
    for subscription in subscriptions:
        for handler in subscription.event_handlers:
            node.remove_waitable(handler)
            reader.add_waitable(handler)
