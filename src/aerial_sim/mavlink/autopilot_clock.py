"""The autopilot's boot clock mapped to ROS time, so a state is stamped when the autopilot measured it (pure).

A MAVLink autopilot stamps what it reports with its own clock, ``time_boot_ms`` (or ``time_usec``) since it
booted. A ROS message made from it should carry the time of that measurement on the ROS clock (wall or
``/clock``), not the time the driver happened to read the frame: the receipt time adds the link's latency and
its jitter (queues, radio bursts, a busy host) to every stamp. The two clocks differ by an offset

    t_ros = t_boot + offset

that each received frame bounds from above: it was measured before it arrived, so
``offset <= t_receipt - t_boot`` (the latency is never negative). :class:`AutopilotClock` keeps the lower
envelope of these samples, the frame that came fastest fixing it, which converges on ``offset`` plus the
link's smallest latency (microseconds on loopback UDP, about one frame's transmission time on a serial
link). Clocks of real hardware drift apart by tens of ppm, so the envelope may rise by ``max_drift`` seconds
per second of boot time since it was last confirmed; a faster frame lowers it at once.

MAVROS solves the same problem with the TIMESYNC exchange (``mavros/src/lib/uas_timesync.cpp`` maps
``time_boot_ms * 1e6 + offset_ns`` to a ROS stamp, the offset filtered from TIMESYNC round trips halved,
and stamps with the receipt time until it has one). The one-way envelope here needs nothing from the
autopilot beyond the stamps it already sends (ArduPilot, PX4 and aerial_sim's own autopilot alike) and has no
symmetric-path assumption; its error is the link's minimum latency rather than half the round trip's
asymmetry (the two agree to within a millisecond on USB, UDP and loopback).

What it does with what should not happen:

- a sample that disagrees with the envelope by more than ``tolerance_s`` is not used (garbage, a latency
  spike, a jump of either clock), and its message is stamped with its receipt time;
- the autopilot's clock going back by more than ``tolerance_s`` (a reboot; or ``time_boot_ms`` wrapping after
  49.7 days) starts a new mapping once ``REBOOT_CONFIRM`` consecutive samples agree on it;
- any other lasting disagreement (the ROS clock stepped, ``/clock`` restarted, the clocks drift apart faster
  than ``max_drift``, e.g. a driver on wall time in front of an autopilot on simulation time away from real
  time) starts a new mapping once it has held for ``reset_after_s`` of boot time;
- non-finite or negative times, and a ROS clock still at zero (``use_sim_time`` before the first ``/clock``),
  are not samples; such a message is stamped with its receipt time.

No stamp is ever later than its message's receipt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aerial_sim.config import require_non_negative, require_positive

#: Consecutive samples on a new timeline after the autopilot's clock went back that confirm a reboot.
REBOOT_CONFIRM = 3


@dataclass(frozen=True)
class AutopilotClockParams:
    """How the autopilot's boot time is mapped to ROS time (defaults here only)."""

    #: The envelope may rise this fast, s per s of boot time: 1000 ppm, twenty times a poor crystal's drift.
    max_drift: float = 1e-3
    #: A sample further than this from the envelope does not belong to the current mapping, s.
    tolerance_s: float = 0.5
    #: A disagreement that lasts this long (boot time) replaces the mapping, s.
    reset_after_s: float = 2.0

    def __post_init__(self):
        require_non_negative(self, "max_drift")
        require_positive(self, "tolerance_s", "reset_after_s")


@dataclass
class _Candidate:
    """Consecutive samples that disagree with the mapping in force but agree with each other."""

    offset_s: float
    first_boot_s: float
    last_boot_s: float
    count: int
    reboot: bool


class AutopilotClock:
    """Maps autopilot boot times to ROS times (:meth:`stamp`), learning the offset from every stamped frame."""

    def __init__(self, params: AutopilotClockParams | None = None):
        self.params = params or AutopilotClockParams()
        #: ROS time minus boot time (None until the first sample): the lower envelope, as of ``_boot_s``.
        self.offset_s: float | None = None
        self._boot_s = -math.inf
        self._candidate: _Candidate | None = None
        #: How many times the mapping was replaced (a reboot, a clock step), for the node's log line.
        self.resets = 0

    def stamp(self, boot_s: float, receipt_s: float) -> float:
        """The ROS time at which a frame stamped ``boot_s`` (autopilot boot time, s) was measured, given that it
        was received at ``receipt_s`` (ROS time, s); learns from the pair. Never later than ``receipt_s``."""
        if not (math.isfinite(boot_s) and math.isfinite(receipt_s)) or boot_s < 0.0 or receipt_s <= 0.0:
            return receipt_s
        sample = receipt_s - boot_s
        if self.offset_s is None:
            self._adopt(sample, boot_s)
            return receipt_s
        p = self.params
        envelope = self.offset_s + p.max_drift * max(boot_s - self._boot_s, 0.0)
        went_back = boot_s < self._boot_s - p.tolerance_s
        if not went_back and self.offset_s - p.tolerance_s <= sample <= envelope + p.tolerance_s:
            self._candidate = None
            self.offset_s, self._boot_s = min(envelope, sample), max(boot_s, self._boot_s)
            return min(boot_s + self.offset_s, receipt_s)
        self._disagree(sample, boot_s, went_back)
        return receipt_s

    def _disagree(self, sample: float, boot_s: float, went_back: bool) -> None:
        p, c = self.params, self._candidate
        if c is None or not (c.last_boot_s - p.tolerance_s <= boot_s and abs(sample - c.offset_s) <= p.tolerance_s):
            self._candidate = _Candidate(sample, boot_s, boot_s, 1, went_back)
            return
        c.offset_s, c.last_boot_s, c.count = min(c.offset_s, sample), max(c.last_boot_s, boot_s), c.count + 1
        if (c.reboot and c.count >= REBOOT_CONFIRM) or c.last_boot_s - c.first_boot_s >= p.reset_after_s:
            self.resets += 1
            self._adopt(c.offset_s, c.last_boot_s)

    def _adopt(self, offset_s: float, boot_s: float) -> None:
        self.offset_s, self._boot_s, self._candidate = offset_s, boot_s, None
