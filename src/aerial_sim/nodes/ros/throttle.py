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


class WarningsByText:
    """Each distinct warning text logged at most once per ``period_s`` of wall time (a client sending the
    same bad request again and again must not flood the log; a different problem still shows at once)."""

    #: Texts remembered at most (the memory is cleared past it: a client cannot grow it without bound).
    MAX_TEXTS = 1000

    def __init__(self, node: Node, period_s: float):
        self._logger = node.get_logger()
        self._period_s = period_s
        self._logged_at: dict[str, float] = {}

    def __call__(self, text: str) -> None:
        now = time.monotonic()
        if now - self._logged_at.get(text, -math.inf) >= self._period_s:
            if len(self._logged_at) >= self.MAX_TEXTS:
                self._logged_at.clear()
            self._logged_at[text] = now
            self._logger.warning(text)
