"""Reading a topic without a callback per message: a second node no executor spins, whose raw
(CDR bytes) subscriptions the owner empties when it wants (the recorder, the web viewer, the physics node)."""

from __future__ import annotations

import time
from typing import Iterator, Sequence

from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
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


def waiting_cdr(handle, message_type) -> Iterator[bytes]:
    """The CDR bytes of each message waiting on a raw subscription, oldest first, until none is left:
    :func:`take_raw`'s take for loops run every period, given the subscription's ``handle`` and
    ``msg_type`` looked up once (each is a Python property). A middleware error (the subscription
    destroyed while stopping) ends it as an empty queue does."""
    while True:
        try:
            with handle:
                taken = handle.take_message(message_type, True)
        except Exception:  # noqa: BLE001 - destroyed while stopping, or a middleware error: nothing to take
            return
        if taken is None:
            return
        yield taken[0]


def not_called(_message) -> None:
    """The callback of a subscription no executor spins (:func:`unspun_reader_node`)."""


class ArrivalWait:
    """A reader thread's wait on the middleware for its raw subscriptions (those of an
    :func:`unspun_reader_node`): it blocks until one of them holds a message, and says which do, so the
    thread neither polls nor tries to take from the empty ones. :meth:`wake` ends a wait early (a stop).

    The subscriptions' handles are looked up once per list of subscriptions (the same list object, as
    the recorder keeps it between discovery rounds), not at every wait: each ``Subscription.handle`` is
    a Python property, and a recorder asks some 20 of them per round."""

    def __init__(self, context):
        self._context = context
        self.guard = _rclpy.GuardCondition(context.handle)
        self._wait_set = None
        self._size = -1
        self._subscriptions = None
        self._handles: list = []
        self._index: dict[int, int] = {}  # handle pointer -> index in the subscriptions

    def wake(self) -> None:
        try:
            self.guard.trigger_guard_condition()
        except Exception:  # noqa: BLE001 - destroyed while stopping: the waiter's timeout ends it
            pass

    def ready(self, subscriptions: Sequence, timeout_s: float) -> list[int]:
        """Indices of ``subscriptions`` with a message waiting (in their order), after waiting at most
        ``timeout_s`` for one (0: only look); empty when none came. Where the middleware cannot be asked
        (the context is going away) it sleeps a little and answers every index, as a poll would. Pass the
        same list object while the subscriptions stay the same (a new one is looked up again)."""
        try:
            if subscriptions is not self._subscriptions or len(subscriptions) != len(self._handles):
                self._handles = [subscription.handle for subscription in subscriptions]
                self._index = {handle.pointer: index for index, handle in enumerate(self._handles)}
                self._subscriptions = subscriptions
            if self._size != len(subscriptions):
                self._wait_set = _rclpy.WaitSet(len(subscriptions), 1, 0, 0, 0, 0, self._context.handle)
                self._size = len(subscriptions)
            wait_set = self._wait_set
            wait_set.clear_entities()
            for handle in self._handles:
                wait_set.add_subscription(handle)
            wait_set.add_guard_condition(self.guard)
            wait_set.wait(int(timeout_s * 1e9))
            ready = wait_set.get_ready_entities("subscription")
        except Exception:  # noqa: BLE001 - stopping, or a subscription destroyed meanwhile
            time.sleep(min(timeout_s, 0.01))
            return list(range(len(subscriptions)))
        index = self._index
        return sorted(index[pointer] for pointer in ready if pointer in index)
