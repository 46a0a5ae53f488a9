"""The time behaviour of a sensor's output: a first-order lag (:class:`FirstOrderFilter`, the GPS fix
quality settling) and a fixed latency (:class:`DelayLine`, the GPS delay).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from aerial_sim.sensors.truth import TIME_EPSILON_S

class FirstOrderFilter:
    """First-order low-pass ``y <- y + (1 - exp(-dt / tau)) (x - y)``, exact for a held input.

    Used for the GPS error estimates decaying from their initial to their final
    value (AirSim paper sec. 3.4.4): ``y(t) = final + (initial - final) exp(-t / tau)``.
    """

    def __init__(self, tau_s: float, initial):
        self.tau_s = tau_s
        self.initial = initial
        self.reset()

    def reset(self) -> None:
        self.value = self.initial

    def step(self, dt: float, target):
        self.value = self.value + (1.0 - math.exp(-dt / self.tau_s)) * (target - self.value)
        return self.value


class DelayLine:
    """Fixed latency: an item pushed at ``time_s`` comes out at ``time_s + latency_s``."""

    def __init__(self, latency_s: float):
        self.latency_s = latency_s
        self._queue: deque[tuple[float, Any]] = deque()

    def reset(self) -> None:
        self._queue.clear()

    def push(self, time_s: float, item: Any) -> None:
        self._queue.append((time_s + self.latency_s, item))

    def pop_ready(self, now_s: float) -> list[tuple[float, Any]]:
        """Items due at or before ``now_s``, each as (release time, item), oldest first."""
        ready = []
        while self._queue and self._queue[0][0] <= now_s + TIME_EPSILON_S:
            ready.append(self._queue.popleft())
        return ready
