"""Configured against delivered sim-time rates of recorded streams, and the messages known to be missing.

A stream's **configured rate** is read from the node that publishes it, not
guessed from the data: its own ROS parameters (:func:`configured_rate_hz`), in
this order: ``ground_truth_rate_hz`` (physics: ground truth, rotors, ``/swarm/state``; when set),
``publish_rate_hz`` (physics: ``/clock`` and ground truth), ``rate_hz`` (IMU,
barometer, magnetometer, GPS, rangefinder, camera, flight controller, rotor
drag) and ``rotations_per_second`` (lidar). A node without such a parameter (the
depth-noise node follows its input) leaves the stream unrated unless the
recorder's ``expected_rates`` names it (:func:`parse_rate_table`). Only message
types published periodically are rated (:data:`RATED_TYPES`).

A stream's **delivered rate** is counted in simulated time: distinct
``header.stamp`` values (the sample instants; a lockstep re-send is not a new
sample) per second of their own span, (n - 1) / (last - first); for a type
without a header, messages per second of their sim-time receive span. Below :data:`LOW_FRACTION` of the
configured rate the stream is flagged ``LOW: 9.2 Hz of 30 Hz configured``.

**Known missed** messages of a rated stream: the samples a stream at its
configured period would have had between its first and last stamp and that are
not in the bag, from the stamp gaps (:func:`aerial_sim.recording.digest.missing_samples`
with the configured period; the median stamp interval when no rate is
configured), plus those the middleware reported lost on the way to the recorder
(DDS ``message_lost`` events: sequence-number gaps of a best-effort writer; not asked of Fast DDS,
whose event can deadlock the recorder: :mod:`aerial_sim.nodes._recorder.subscriptions`).
A late start or an early stop of the recording is not a miss.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np

from aerial_sim.recording.digest import PERIODIC_TYPES, missing_samples

#: Types published at a fixed rate, whose delivered rate is compared with the configured one.
RATED_TYPES = PERIODIC_TYPES | {
    "rosgraph_msgs/msg/Clock",
    "std_msgs/msg/Float64MultiArray",  # motor_commands
    "sensor_msgs/msg/PointCloud2",
    "sensor_msgs/msg/Range",
}
#: Publisher parameters that set a stream's rate, first found (and positive) wins.
RATE_PARAMETERS = ("publish_rate_hz", "rate_hz", "rotations_per_second")
GROUND_TRUTH_PARAMETER = "ground_truth_rate_hz"
#: Besides ``*/ground_truth/*``, what the physics node publishes at its ground-truth rate: each
#: vehicle's rotors and, with many vehicles, the whole fleet's ground truth in one message.
GROUND_TRUTH_SUFFIXES = ("/rotors", "/swarm/state")
#: Streams whose rate no parameter of their publisher gives: a fleet's commands answer each
#: ``/swarm/state`` message, at a rate the controllers' process does not know (unrated).
FOLLOWING_TOPICS = ("/swarm/motor_commands",)
#: Every parameter a publisher is asked for.
QUERIED_PARAMETERS = (GROUND_TRUTH_PARAMETER, *RATE_PARAMETERS)
#: A stream delivering less than this fraction of its configured rate is flagged LOW.
LOW_FRACTION = 0.95
#: ``custom_data`` keys of ``metadata.yaml`` (JSON objects topic -> number).
CONFIGURED_KEY = "configured_rates_hz"
LOST_KEY = "lost_messages"


def configured_rate_hz(topic: str, parameters: Mapping[str, float | None]) -> float | None:
    """The rate a node with ``parameters`` publishes ``topic`` at (see the module doc); None if it has none."""
    if topic in FOLLOWING_TOPICS:
        return None
    at_ground_truth_rate = "/ground_truth/" in topic or topic.endswith(GROUND_TRUTH_SUFFIXES)
    if at_ground_truth_rate and _positive(parameters.get(GROUND_TRUTH_PARAMETER)):
        return float(parameters[GROUND_TRUTH_PARAMETER])
    for name in RATE_PARAMETERS:
        if _positive(parameters.get(name)):
            return float(parameters[name])
    return None


def agreed_rate(rates: Iterable[float | None]) -> float | None:
    """One rate for a topic from all its publishers: their rate if they agree, else None (not rated)."""
    known = {round(r, 9) for r in rates if r is not None}
    return known.pop() if len(known) == 1 else None


def parse_rate_table(text: str) -> dict[str, float]:
    """``"/a/b=30, /*/imu/data=200"`` -> ``{'/a/b': 30.0, '/*/imu/data': 200.0}`` (topic or glob = Hz)."""
    table = {}
    for token in re.split(r"[\s,]+", text.strip()):
        if not token or token in ("none", "auto"):
            continue
        pattern, sep, value = token.rpartition("=")
        if not sep or not pattern:
            raise ValueError(f"expected_rates: '{token}' is not TOPIC=HZ")
        try:
            hz = float(value)
        except ValueError:
            raise ValueError(f"expected_rates: '{token}': the rate must be a number of Hz") from None
        if not (math.isfinite(hz) and hz > 0):
            raise ValueError(f"expected_rates: '{token}': the rate must be a finite number > 0 Hz")
        table["/" + pattern.lstrip("/")] = hz
    return table


def rate_from_table(topic: str, table: Mapping[str, float]) -> float | None:
    """The rate the table gives ``topic``: an exact name first, else the first matching glob."""
    if topic in table:
        return table[topic]
    return next((hz for pattern, hz in table.items() if fnmatch.fnmatchcase(topic, pattern)), None)


@dataclass(frozen=True)
class StreamHealth:
    """Delivered against configured rate of one stream, and its known missed messages."""

    topic: str
    samples: int  # distinct sample instants in the bag
    delivered_hz: float | None  # per simulated second; None below 2 samples
    configured_hz: float | None
    gap_missed: int  # samples missing between the first and last stamp
    lost: int = 0  # reported lost by the middleware

    @property
    def missed(self) -> int:
        return self.gap_missed + self.lost

    @property
    def low(self) -> bool:
        """Below ``LOW_FRACTION`` of the configured rate; a rated stream with under two samples is low too."""
        if self.configured_hz is None:
            return False
        return self.delivered_hz is None or self.delivered_hz < LOW_FRACTION * self.configured_hz

    def delivered_text(self) -> str:
        """``9.2 Hz``, or ``1 message`` / ``0 messages`` when there is no rate to give."""
        if self.delivered_hz is not None:
            return f"{self.delivered_hz:.1f} Hz"
        return f"{self.samples} message" + ("" if self.samples == 1 else "s")

    def flag(self) -> str:
        """``LOW: 9.2 Hz of 30 Hz configured; 675 missed`` ('' for a healthy stream)."""
        parts = []
        if self.low:
            parts.append(f"LOW: {self.delivered_text()} of {self.configured_hz:g} Hz configured")
        if self.missed:
            detail = []
            if self.gap_missed:
                detail.append(f"{self.gap_missed} in stamp gaps")
            if self.lost:
                detail.append(f"{self.lost} lost in transport")
            parts.append(f"{self.missed} missed ({', '.join(detail)})")
        return "; ".join(parts)


def stream_health(
    topic: str,
    times_ns: Iterable[int],
    configured_hz: float | None = None,
    lost: int = 0,
    stamped: bool = True,
) -> StreamHealth:
    """Health of one stream from its sample times in ns.

    ``stamped``: the times are the messages' own stamps (distinct stamps are the
    samples; gaps are counted at the configured period). Otherwise they are sim-time
    receive times, which the recorder's clock quantizes to ``/clock`` updates: every
    message is a sample, and the missed ones are those a stream at the configured rate
    would have had over the same span beyond the count (no rate, no count).
    """
    times = np.asarray(list(times_ns), dtype=np.int64)
    samples = np.unique(times) if stamped else np.sort(times)
    span_s = (int(samples[-1]) - int(samples[0])) * 1e-9 if len(samples) > 1 else 0.0
    delivered = (len(samples) - 1) / span_s if span_s > 0 else None
    if stamped:
        gaps = missing_samples(samples.tolist(), 1e9 / configured_hz if configured_hz else None)
    else:
        gaps = max(0, int(round(span_s * configured_hz)) + 1 - len(samples)) if configured_hz and span_s else 0
    return StreamHealth(topic, len(samples), delivered, configured_hz, gaps, int(lost))


def encode_table(table: Mapping[str, float | int]) -> str:
    """A topic -> number table as one ``custom_data`` string (JSON, sorted)."""
    return json.dumps(dict(sorted(table.items())))


def decode_table(text: str | None) -> dict[str, float]:
    """Inverse of :func:`encode_table`; an absent or unreadable entry is an empty table."""
    try:
        table = json.loads(text or "{}")
    except ValueError:
        return {}
    if not isinstance(table, dict):
        return {}
    return {str(k): float(v) for k, v in table.items() if isinstance(v, (int, float))}


def parameter_number(value) -> float | None:
    """A numeric ``rcl_interfaces/ParameterValue`` as a float; None when unset or not a number.

    ``value.type``: 2 = PARAMETER_INTEGER, 3 = PARAMETER_DOUBLE (rcl_interfaces/msg/ParameterType).
    """
    if value.type == 3:
        return float(value.double_value)
    if value.type == 2:
        return float(value.integer_value)
    return None


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
