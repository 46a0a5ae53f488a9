"""The hand-off of published CDR bytes to a recorder in the same process (issue 34): a tap per topic.

A writer that sends CDR bytes (:func:`aerial_sim.nodes.ros.raw_publish.raw_sender`) registers with
:func:`writer` and, before each DDS write, hands its bytes to the tap's ``sink`` when one is set. A recorder
in the process that finds a topic whose every publisher in the graph is such a writer (``writers``) sets the
sink and takes that topic from it instead of from its DDS reader: no delivery to that reader's queue to take
from, no take. The data goes one way, writer to recorder; readers elsewhere get every message through DDS
as before. No rclpy here: the registry is plain Python, shared by the threads of one process.
"""

from __future__ import annotations

import threading
from typing import Callable

_lock = threading.Lock()


class Tap:
    """One topic's tap: how many writers of this process send through it, and the recorder's ``sink(topic,
    data)`` (None: nobody takes the bytes; the writers only publish)."""

    __slots__ = ("topic", "writers", "sink")

    def __init__(self, topic: str):
        self.topic = topic
        self.writers = 0
        self.sink: Callable[[str, bytes], None] | None = None


_taps: dict[str, Tap] = {}


def writer(topic: str) -> Tap:
    """Register one more writer of ``topic`` (a resolved name) in this process; every message it publishes
    from then on must go through the returned tap."""
    with _lock:
        tap = _taps.get(topic)
        if tap is None:
            tap = _taps[topic] = Tap(topic)
        tap.writers += 1
        return tap


def find(topic: str) -> Tap | None:
    """The tap of ``topic`` when a writer of this process registered one."""
    return _taps.get(topic)
