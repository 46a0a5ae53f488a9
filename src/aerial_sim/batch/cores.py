"""Disjoint sets of CPU cores for the runs a local batch launches at once (``run.pin_cpus``)."""

from __future__ import annotations

import math
import os
import threading
from typing import Iterable


class CorePool:
    """Hands out ``per_run`` cores at a time, none to two runs at once while there are enough.

    :meth:`acquire` returns ``()`` when too few cores are free: that run is not pinned and
    shares the machine (more workers than core sets, or a machine without affinity).
    """

    def __init__(self, cpus_per_run: float, cores: Iterable[int] | None = None):
        if cores is None:
            cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else ()
        self._free = sorted(cores)
        self.per_run = max(1, math.ceil(cpus_per_run - 1e-9))
        self._lock = threading.Lock()

    def acquire(self) -> tuple[int, ...]:
        with self._lock:
            if len(self._free) < self.per_run:
                return ()
            taken, self._free = tuple(self._free[:self.per_run]), self._free[self.per_run:]
            return taken

    def release(self, cores: tuple[int, ...]) -> None:
        with self._lock:
            self._free = sorted(set(self._free) | set(cores))
