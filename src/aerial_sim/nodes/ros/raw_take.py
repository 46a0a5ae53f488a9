"""Reading a topic without a callback per message: a second node no executor spins, whose raw
(CDR bytes) subscriptions the owner empties when it wants (the recorder, the web viewer, the physics node)."""

from __future__ import annotations

from rclpy.node import Node


def unspun_reader_node(node: Node, suffix: str) -> Node:
    """A second node in ``node``'s process, ``<name>_<suffix>`` in its namespace, that no executor
    spins: what its subscriptions receive waits in their queues until the owner takes it
    (:func:`take_raw`), with no callback and no wake-up per message. Subscribe it to resolved
    (absolute) names: it has none of the process's remappings."""
    return Node(f"{node.get_name()}_{suffix}", namespace=node.get_namespace(), context=node.context,
                use_global_arguments=False, start_parameter_services=False, enable_rosout=False)


def take_raw(subscription) -> bytes | None:
    """The next message's CDR bytes from a raw subscription of an :func:`unspun_reader_node`, or None
    when none is waiting."""
    taken = take_raw_with_info(subscription)
    return None if taken is None else taken[0]


def take_raw_with_info(subscription) -> tuple[bytes, dict] | None:
    """:func:`take_raw` with the middleware's message info (``received_timestamp``: wall ns, ...)."""
    try:
        with subscription.handle:
            return subscription.handle.take_message(subscription.msg_type, True)
    except Exception:  # noqa: BLE001 - destroyed while stopping, or a middleware error: nothing to take
        return None


def not_called(_message) -> None:
    """The callback of a subscription no executor spins (:func:`unspun_reader_node`)."""
