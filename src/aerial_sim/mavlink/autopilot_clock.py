"""The autopilot's boot clock mapped to ROS time, so a state is stamped when the autopilot measured it (pure).

A MAVLink autopilot stamps what it reports with its own clock, ``time_boot_ms`` (or ``time_usec``) since it
booted. A ROS message made from it should carry the time of that measurement on the ROS clock (wall or
``/clock``), not the time the driver happened to read the frame: the receipt time adds the link's latency and
its jitter (queues, radio bursts, a busy host) to every stamp. The two clocks differ by an offset

    t_ros = t_boot + offset

and each received frame gives a sample ``t_receipt - t_boot = offset + latency``. On a wall clock the
latency is never negative and the smallest sample is the best (offset plus the link's minimum latency:
microseconds on loopback, about a frame's transmission time on a serial link). On ``/clock`` (a node with
``use_sim_time``) the node's own clock is updated by its executor and can lag behind simulation time when the
host is loaded, so samples scatter both ways around the true offset (measured beside the test graph at load 17:
10 % of them 68-416 ms low, 20 % within 4 ms of it, the rest late by up to 0.2 s and more). A minimum or a low
quantile would then stamp everything tens of milliseconds early. :class:`AutopilotClock` takes the densest
part of the samples of the last ``window_s`` (20 s) of boot time instead: the offset is the lower end of the
shortest interval that holds ``densest_fraction`` of them (half: the "shorth"). On a clean link that interval
starts at the fastest frame (latency's density is highest at its minimum), so the offset is the minimum's; on
a lagging clock it is the cluster of frames read while the clock was current, not the tails. Across the window it follows a
drifting crystal (a 100 ppm drift moves the offset 2 ms in 20 s). It is recomputed every ``update_period_s``
(0.2 s): between, the stamps follow ``time_boot_ms`` at exactly one offset.

MAVROS solves the same problem with the TIMESYNC exchange (``mavros/src/lib/uas_timesync.cpp`` maps
``time_boot_ms * 1e6 + offset_ns`` to a ROS stamp, the offset filtered from TIMESYNC round trips halved,
and stamps with the receipt time until it has one). The one-way samples here need nothing from the autopilot
beyond the stamps it already sends (ArduPilot, PX4 and aerial_sim's own autopilot alike), no traffic of their
own and no symmetric-path assumption.

What it does with what should not happen:

- a sample more than ``tolerance_s`` above the mapping (a late frame: a radio burst, a starved reader) is not
  learned from and the frame is stamped by the mapping; one more than ``tolerance_s`` below it (a frame that
  arrived before it was measured: garbage, or a clock that stepped) is not learned from and the frame is
  stamped with its receipt time;
- the autopilot's clock going back by more than ``tolerance_s`` (a reboot; or ``time_boot_ms`` wrapping after
  49.7 days) starts a new mapping once ``REBOOT_CONFIRM`` consecutive samples agree on it (those frames are
  stamped with their receipt times);
- any other lasting disagreement (the ROS clock stepped, ``/clock`` restarted, a driver on wall time in front
  of an autopilot on simulation time away from real time) starts a new mapping once it has held for
  ``reset_after_s`` of boot time;
- non-finite or negative times, and a ROS clock still at zero (``use_sim_time`` before the first ``/clock``),
  are not samples; such a frame is stamped with its receipt time.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import deque
from dataclasses import dataclass

from aerial_sim.config import require, require_positive

#: Consecutive samples on a new timeline after the autopilot's clock went back that confirm a reboot.
REBOOT_CONFIRM = 3
#: Until the window holds this many samples, the offset is recomputed with each.
MIN_SAMPLES = 50


@dataclass(frozen=True)
class AutopilotClockParams:
    """How the autopilot's boot time is mapped to ROS time (defaults here only)."""

    #: The offset is the lower end of the shortest interval that holds this fraction of the recent samples.
    densest_fraction: float = 0.5
    #: Samples of this much boot time are kept, s: long enough that a few seconds of a starved reader are a
    #: minority of them, short enough that a 100 ppm drift moves the offset only 2 ms across it.
    window_s: float = 20.0
    #: The offset is recomputed this often (boot time), s; between, stamps follow time_boot_ms at one offset.
    update_period_s: float = 0.2
    #: A sample further than this from the mapping does not belong to it, s.
    tolerance_s: float = 0.5
    #: A disagreement that lasts this long (boot time) replaces the mapping, s.
    reset_after_s: float = 5.0

    def __post_init__(self):
        require(0.0 < self.densest_fraction <= 1.0, f"densest_fraction must be in (0, 1], got {self.densest_fraction}")
        require_positive(self, "window_s", "update_period_s", "tolerance_s", "reset_after_s")


@dataclass
class _Candidate:
    """Consecutive samples that disagree with the mapping in force but agree with each other."""

    samples: list[tuple[float, float]]  # (boot time, sample)
    reboot: bool

    def agrees(self, boot_s: float, sample: float, tolerance_s: float) -> bool:
        last_boot, first_sample = self.samples[-1][0], self.samples[0][1]
        return boot_s >= last_boot - tolerance_s and abs(sample - first_sample) <= tolerance_s


class AutopilotClock:
    """Maps autopilot boot times to ROS times (:meth:`stamp`), learning the offset from every stamped frame."""

    def __init__(self, params: AutopilotClockParams | None = None):
        self.params = params or AutopilotClockParams()
        #: ROS time minus boot time (None until the first sample).
        self.offset_s: float | None = None
        self._window: deque[tuple[float, float]] = deque()  # (boot time, sample), oldest first
        self._sorted: list[float] = []  # the window's samples, in order
        self._boot_s = -math.inf  # the newest boot time of the mapping
        self._updated_s = -math.inf  # the boot time the offset was last computed at
        self._candidate: _Candidate | None = None
        #: How many times the mapping was replaced (a reboot, a clock step), for the node's log line.
        self.resets = 0

    def stamp(self, boot_s: float, receipt_s: float) -> float:
        """The ROS time at which a frame stamped ``boot_s`` (autopilot boot time, s) was measured, given that it
        was received at ``receipt_s`` (ROS time, s); learns from the pair."""
        if not (math.isfinite(boot_s) and math.isfinite(receipt_s)) or boot_s < 0.0 or receipt_s <= 0.0:
            return receipt_s
        sample = receipt_s - boot_s
        if self.offset_s is None:
            self._adopt([(boot_s, sample)])
            return receipt_s
        tolerance = self.params.tolerance_s
        went_back = boot_s < self._boot_s - tolerance
        if not went_back and abs(sample - self.offset_s) <= tolerance:
            self._candidate = None
            self._learn(boot_s, sample)
            return boot_s + self.offset_s
        if self._disagree(boot_s, sample, went_back):
            return boot_s + self.offset_s
        if not went_back and sample > self.offset_s:  # a late frame: the mapping stands
            return boot_s + self.offset_s
        return receipt_s

    def _learn(self, boot_s: float, sample: float) -> None:
        self._window.append((boot_s, sample))
        insort(self._sorted, sample)
        self._boot_s = max(self._boot_s, boot_s)
        while self._window and self._window[0][0] < self._boot_s - self.params.window_s:
            _, old = self._window.popleft()
            del self._sorted[bisect_left(self._sorted, old)]
        if len(self._sorted) < MIN_SAMPLES or abs(boot_s - self._updated_s) >= self.params.update_period_s:
            self._update()

    def _update(self) -> None:
        self.offset_s = densest_start(self._sorted, self.params.densest_fraction)
        self._updated_s = self._boot_s

    def _disagree(self, boot_s: float, sample: float, went_back: bool) -> bool:
        """Keep a disagreeing sample as evidence for a new mapping; True when it adopted one."""
        p, c = self.params, self._candidate
        if c is None or not c.agrees(boot_s, sample, p.tolerance_s):
            self._candidate = _Candidate([(boot_s, sample)], went_back)
            return False
        c.samples.append((boot_s, sample))
        if (c.reboot and len(c.samples) >= REBOOT_CONFIRM) or c.samples[-1][0] - c.samples[0][0] >= p.reset_after_s:
            self.resets += 1
            self._adopt(c.samples)
            return True
        return False

    def _adopt(self, samples: list[tuple[float, float]]) -> None:
        self._window.clear()
        self._sorted.clear()
        self._boot_s, self._candidate = -math.inf, None
        for boot_s, sample in samples:
            self._learn(boot_s, sample)
        self._update()


def densest_start(ordered: list[float], fraction: float) -> float:
    """The lower end of the shortest interval holding ``fraction`` of the ``ordered`` values (the lowest such
    interval on a tie): where the values are densest (a "shorth", Andrews et al. 1972)."""
    k = int(fraction * (len(ordered) - 1))
    if k < 1:
        return ordered[0]
    widths = [high - low for low, high in zip(ordered, ordered[k:])]
    return ordered[widths.index(min(widths))]
