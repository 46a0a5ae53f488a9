"""Warnings for conditions checked on every message, logged at most once per period."""

from __future__ import annotations

import math
import time
from typing import Callable

from rclpy.node import Node


class ThrottledWarning:
    """A warning logged at most once per ``period_s`` of wall time, for conditions checked on every
    message. The time is checked before the text is built or rclpy's logger is called: rclpy's own
    ``throttle_duration_sec`` looks up the caller's frame and source file on every call, suppressed
    or not (about 70 us; half of an 80-vehicle flight-controller process's CPU once its odometry
    arrived slowly)."""

    def __init__(self, node: Node, period_s: float):
        self._logger = node.get_logger()
        self._period_s = period_s
        self._next_s = -math.inf

    def __call__(self, text: Callable[[], str]) -> None:
        """Log ``text()`` unless a warning went out less than ``period_s`` ago."""
        now = time.monotonic()
        if now >= self._next_s:
            self._next_s = now + self._period_s
            self._logger.warning(text())
