"""The sim time in force when a message was sent: a log time for unstamped messages that two
identical lockstep runs agree on (issue 32).

A message without a stamp (``motor_commands``: ``std_msgs/Float64MultiArray``) has no time of its
own. Logged at the recorder's clock when it *arrived*, it races ``/clock``: DDS orders messages per
writer, not across writers, so the command a flight controller sent in answer to the state of time t
reaches the recorder before ``/clock`` t in one run and after ``/clock`` t + dt in another.

The rule here takes the time from when the message was *sent*: its log time is the stamp of the
newest ``/clock`` sent before it, both read from the middleware's source timestamps (the wall time
at which each writer handed its message over, one clock for every process of a host). That is the
sim time its sender's own clock said when it sent it, had ``/clock`` reached it at once, and it
follows from the graph's causality alone wherever lockstep orders the sends:

- a lockstep physics node sends ``/clock`` t first, then the state of time t (``nodes/physics.py``);
- a flight controller answers that state (so it sends after ``/clock`` t);
- the physics node takes the answer before it steps and sends ``/clock`` t + dt.

So the command for time t is logged at t in every run, whatever the arrival order. A message sent
at a moment lockstep does not fix (a node answering no one, a log line) still gets the sim time in
force when it was sent, which is then as repeatable as that moment is.

The recorder may receive the message before the ``/clock`` that was sent before it: such a message
waits (:meth:`SendClock.place` returns None) until a ``/clock`` sent after it arrives (``/clock`` is
one reliable writer: its messages arrive in the order they were sent), and :meth:`SendClock.tick`
hands it back with its time. A message sent before any ``/clock`` is logged at 0.

Needs the sender and the physics node on one host (one wall clock); a message without a source
timestamp (a middleware that gives none: 0) is the caller's to place by its arrival. No rclpy here.
"""

from __future__ import annotations

import bisect
from collections import deque
from typing import Any

#: ``/clock`` messages remembered (their send times and stamps): 20 s of a 250 Hz clock. A message sent
#: before the oldest is logged at the oldest stamp remembered (it arrived that late: the recorder's
#: ``order_window_s`` has written its place long before).
HISTORY = 5000


class SendClock:
    """Send times of ``/clock`` messages, and the messages waiting for the ``/clock`` sent after them."""

    def __init__(self, history: int = HISTORY):
        self._sent: deque[int] = deque(maxlen=history)  # source timestamps of /clock, in the order sent
        self._stamps: deque[int] = deque(maxlen=history)  # their stamps (ns)
        self._waiting: list[tuple[int, Any]] = []  # (source timestamp, item): sent after every /clock so far

    @property
    def waiting(self) -> int:
        """Messages waiting for a later ``/clock``."""
        return len(self._waiting)

    def stamp_at(self, sent_ns: int) -> int:
        """The stamp of the newest ``/clock`` sent before ``sent_ns`` (0 when none was)."""
        index = bisect.bisect_left(self._sent, sent_ns) - 1  # a /clock sent at the same ns is not before
        if index >= 0:
            return self._stamps[index]
        return self._stamps[0] if self._stamps and len(self._sent) == self._sent.maxlen else 0

    def place(self, sent_ns: int, item: Any) -> int | None:
        """The log time of a message sent at ``sent_ns`` (wall ns), or None: it was sent after the last
        ``/clock`` received so far, and :meth:`tick` hands ``item`` back once a later one arrives."""
        if self._sent and self._sent[-1] > sent_ns:
            return self.stamp_at(sent_ns)
        self._waiting.append((sent_ns, item))
        return None

    def tick(self, sent_ns: int, stamp_ns: int) -> list[tuple[int, Any]]:
        """A ``/clock`` stamped ``stamp_ns`` sent at ``sent_ns``; returns ``(log time, item)`` for each
        waiting message that was sent before it, in the order they were placed."""
        if self._sent and sent_ns < self._sent[-1]:
            sent_ns = self._sent[-1]  # the wall clock stepped back: keep the send times in order
        self._sent.append(sent_ns)
        self._stamps.append(stamp_ns)
        if not self._waiting:
            return []
        ready = [(self.stamp_at(sent), item) for sent, item in self._waiting if sent < sent_ns]
        if ready:
            self._waiting = [(sent, item) for sent, item in self._waiting if sent >= sent_ns]
        return ready

    def drain(self) -> list[tuple[int, Any]]:
        """Every waiting message (the run is ending: no later ``/clock`` will come), at the last stamp."""
        ready = [(self._stamps[-1] if self._stamps else 0, item) for _, item in self._waiting]
        self._waiting = []
        return ready
