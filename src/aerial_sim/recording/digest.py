"""What a bag holds, independent of when it was received: per-topic content digests and dropped samples.

Two runs of the same lockstep simulation should publish the same messages.
Their bags differ in file bytes (chunking, receive times, metadata), so they
are compared by content instead:

- **digest** of a topic: SHA-256 over the sorted set of SHA-256s of its
  distinct serialized payloads (CDR bytes, which include ``header.stamp``).
  Receive times and arrival order do not enter, nor do re-sends of an
  identical message (lockstep re-publishes a period's state while it waits);
  any changed value or stamp does. The bag's digest combines the topics'.
- **drops** of a periodic stream: samples missing between the first and the
  last recorded one, from gaps in ``header.stamp`` longer than 1.5 nominal
  periods (the median stamp interval), for sensor and ground-truth message
  types. A late start or an early stop of the recording is not a drop.

- **shared messages** of two bags (:func:`shared_messages`): per stamped topic,
  the stamps both bags hold and how many of those carry identical payloads.
  While lockstep does not hold the recorder, two runs' bags can start at
  different sim times; on the span both recorded, a deterministic run's
  messages are bit-identical.

With ``until_ns`` (``aerial_sim batch`` passes the end of the run: the disarm's stamp, where the
mission's ``track.csv`` ends), messages stamped later are left out of the digest and the counts:
what the graph publishes while it is being stopped after the run depends on how long stopping
takes in wall time (issue 32: three identical runs' bags held 7,991 / 8,061 / 7,960 odometry
messages, so their digests differed). A ``MarkerArray`` counts by its first marker's stamp. A
topic whose messages carry no stamp (``motor_commands``' Float64MultiArray, a String) is counted but
left out of such a digest: its log time is the newest ``/clock`` the recorder had received, so which
of its messages fall before the end depends on arrival order, not on the simulation.

``/rosout`` and ``/parameter_events`` are left out: their content is logging
with wall-clock stamps, not data. ``/diagnostics`` is counted but not digested: its
content is wall-clock figures (CPU load, real-time factor).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from aerial_sim.cdr.decode import cdr_header_stamp_ns
from aerial_sim.recording.reader import open_bag, read_once

EXCLUDED_TOPICS = ("/rosout", "/parameter_events")
#: Counted, never digested: their content is wall-clock figures (CPU load, real-time factor, rates).
WALL_CLOCK_TOPICS = ("/diagnostics",)
#: Types published at a fixed rate by a sensor or the physics node, whose stamp gaps are drops.
PERIODIC_TYPES = {
    "nav_msgs/msg/Odometry",
    "sensor_msgs/msg/Imu",
    "sensor_msgs/msg/JointState",
    "sensor_msgs/msg/FluidPressure",
    "sensor_msgs/msg/MagneticField",
    "sensor_msgs/msg/NavSatFix",
    "sensor_msgs/msg/Image",
    "sensor_msgs/msg/CameraInfo",
    "geometry_msgs/msg/TwistStamped",
    "geometry_msgs/msg/WrenchStamped",
}
#: A stream needs this many stamps before its period is trusted.
MIN_SAMPLES_FOR_PERIOD = 10


@dataclass
class TopicContent:
    topic: str
    msgtype: str
    count: int
    digest: str
    drops: int
    in_digest: bool = True  # False: unstamped, and the digest ends with the run (module doc)


@dataclass
class BagContent:
    topics: dict[str, TopicContent] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        """One digest over every topic's (name, digest)."""
        combined = hashlib.sha256()
        for topic in sorted(t for t in self.topics if self.topics[t].in_digest):
            combined.update(f"{topic}\0{self.topics[topic].digest}\n".encode())
        return combined.hexdigest()

    @property
    def drops(self) -> int:
        return sum(t.drops for t in self.topics.values())

    @property
    def messages(self) -> int:
        return sum(t.count for t in self.topics.values())


def bag_content(path: str | Path, exclude: tuple[str, ...] = EXCLUDED_TOPICS, until_ns: int | None = None) -> BagContent:
    """Read the bag at ``path`` (bag dir or run dir) once and digest it per topic (up to ``until_ns``: module doc)."""
    collector = ContentCollector(exclude, until_ns)
    read_once(path, [collector])
    return collector.result()


class ContentCollector:
    """:func:`bag_content` as a consumer of :func:`aerial_sim.recording.reader.read_once` (one pass shared with others)."""

    def __init__(self, exclude: tuple[str, ...] = EXCLUDED_TOPICS, until_ns: int | None = None):
        self.exclude = exclude
        self.until_ns = until_ns
        self.stamped: dict[str, bool] = {}
        self.hashes: dict[str, set[bytes]] = {}
        self.counts: dict[str, int] = {}
        self.stamps: dict[str, list[int]] = {}
        self.types: dict[str, str] = {}
        self.unstamped: set[str] = set()

    def begin(self, reader) -> None:
        self.reader = reader
        for connection in reader.connections:
            if connection.topic not in self.exclude:
                self.types[connection.topic] = connection.msgtype
                self.stamped[connection.topic] = begins_with_stamp(connection)
                self.hashes.setdefault(connection.topic, set())
                self.counts.setdefault(connection.topic, 0)

    def messages_of(self, connection, times_ns: list[int], payloads: list[bytes]) -> bool:
        """A topic's messages at once (:mod:`aerial_sim.recording.topic_reader`), as :meth:`message` takes each one, the
        stamps read with :func:`~aerial_sim.recording.cdr_columns.header_stamps_ns`; False (nothing taken) for the
        types whose bytes are re-serialized or whose stamp is an element's, and for a payload shorter than a stamp."""
        from aerial_sim.recording.cdr_columns import header_stamps_ns

        topic, msgtype = connection.topic, connection.msgtype
        if topic in self.exclude:
            return True
        if msgtype in UNZEROED_PADDING_TYPES or msgtype in FIRST_ELEMENT_STAMPED_TYPES:
            return False
        cut = self.until_ns is not None and self.stamped.get(topic)
        periodic = msgtype in PERIODIC_TYPES
        stamps = header_stamps_ns(payloads) if cut or periodic else None
        if (cut or periodic) and stamps is None:
            return False
        if self.until_ns is not None and not cut and payloads:
            self.unstamped.add(topic)
        until = self.until_ns if cut else None
        hashes, sha256, kept = self.hashes[topic], hashlib.sha256, []
        for index, data in enumerate(payloads):
            if until is not None and stamps[index] > until:
                continue  # after the end of the run (module doc)
            hashes.add(sha256(data).digest())
            kept.append(index)
        self.counts[topic] += len(kept)
        if periodic:
            self.stamps.setdefault(topic, []).extend(stamps[i] for i in kept)
        return True

    def message(self, connection, t_ns: int, raw, decode) -> None:
        topic = connection.topic
        if topic in self.exclude:
            return
        data = bytes(raw)
        if connection.msgtype in UNZEROED_PADDING_TYPES:
            data = canonical_bytes(self.reader, connection.msgtype, data, decode())
        if self.until_ns is not None:
            stamp = message_stamp_ns(connection.msgtype, data) if self.stamped.get(topic) else None
            if stamp is None:
                self.unstamped.add(topic)
            elif stamp > self.until_ns:
                return  # after the end of the run (module doc)
        self.counts[topic] += 1
        self.hashes[topic].add(hashlib.sha256(data).digest())
        if connection.msgtype in PERIODIC_TYPES:
            stamp = cdr_header_stamp_ns(data)
            if stamp is not None:
                self.stamps.setdefault(topic, []).append(stamp)

    def result(self) -> BagContent:
        content = BagContent()
        for topic in sorted(self.types):
            digest = hashlib.sha256(b"".join(sorted(self.hashes[topic]))).hexdigest()
            content.topics[topic] = TopicContent(topic, self.types[topic], self.counts[topic], digest,
                                                 missing_samples(self.stamps.get(topic, [])),
                                                 in_digest=topic not in self.unstamped and topic not in WALL_CLOCK_TOPICS)
        return content


#: Stamped types without a std_msgs/Header (the stamp leads their CDR payload all the same).
STAMP_FIRST_TYPES = {"rosgraph_msgs/msg/Clock", "std_msgs/msg/Header"}


@dataclass(frozen=True)
class SharedTopic:
    topic: str
    shared: int  # stamps present in both bags
    identical: int  # of those, stamps whose messages are byte-identical in both


def shared_messages(bag_a: str | Path, bag_b: str | Path, exclude: tuple[str, ...] = EXCLUDED_TOPICS) -> dict[str, SharedTopic]:
    """Compare two bags stamp by stamp on every stamped topic both hold (see the module docstring)."""
    first, second = _payloads_by_stamp(bag_a, exclude), _payloads_by_stamp(bag_b, exclude)
    result = {}
    for topic in sorted(set(first) & set(second)):
        shared = set(first[topic]) & set(second[topic])
        identical = sum(first[topic][stamp] == second[topic][stamp] for stamp in shared)
        result[topic] = SharedTopic(topic, len(shared), identical)
    return result


def _payloads_by_stamp(path: str | Path, exclude: tuple[str, ...]) -> dict[str, dict[int, frozenset[bytes]]]:
    by_topic: dict[str, dict[int, set[bytes]]] = {}
    with open_bag(path) as reader:
        stamped = {c.topic for c in reader.connections if c.topic not in exclude and begins_with_stamp(c)}
        for connection, _, raw in reader.messages():
            if connection.topic in stamped:
                data = canonical_bytes(reader, connection.msgtype, bytes(raw))
                stamp = message_stamp_ns(connection.msgtype, data)
                if stamp is not None:
                    by_topic.setdefault(connection.topic, {}).setdefault(stamp, set()).add(hashlib.sha256(data).digest())
    return {topic: {stamp: frozenset(v) for stamp, v in stamps.items()} for topic, stamps in by_topic.items()}


#: Arrays whose elements begin with a Header: the first element's stamp is the message's.
FIRST_ELEMENT_STAMPED_TYPES = {"visualization_msgs/msg/MarkerArray"}
#: Types whose CDR has alignment padding after a bool that the C serializer leaves unwritten (a Marker's
#: ``frame_locked``): the same message arrives with different bytes there, so these are digested as
#: rosbags re-serializes them (padding zeroed).
UNZEROED_PADDING_TYPES = {"visualization_msgs/msg/MarkerArray", "visualization_msgs/msg/Marker"}


def canonical_bytes(reader, msgtype: str, data: bytes, decoded=None) -> bytes:
    """``data``, or its re-serialization with zeroed padding for :data:`UNZEROED_PADDING_TYPES`."""
    if msgtype not in UNZEROED_PADDING_TYPES:
        return data
    message = decoded if decoded is not None else reader.deserialize(data, msgtype)
    return bytes(reader.typestore.serialize_cdr(message, msgtype, little_endian=bool(data[1] & 1)))


def message_stamp_ns(msgtype: str, data: bytes) -> int | None:
    """The sim-time stamp of a message that :func:`begins_with_stamp` (ns), None for an empty array."""
    if msgtype in FIRST_ELEMENT_STAMPED_TYPES:
        if len(data) < 8 or int.from_bytes(data[4:8], "little" if data[1] & 1 else "big") == 0:
            return None
        return cdr_header_stamp_ns(data[:4] + data[8:])  # the sequence length, then the first element
    return cdr_header_stamp_ns(data)


def begins_with_stamp(connection) -> bool:
    """True when the message begins with a stamp: a ``std_msgs/Header`` first field, a Header itself, or a Clock
    (or an array of such messages, :data:`FIRST_ELEMENT_STAMPED_TYPES`)."""
    if connection.msgtype in STAMP_FIRST_TYPES | FIRST_ELEMENT_STAMPED_TYPES:
        return True
    definition = getattr(getattr(connection, "msgdef", None), "data", "") or ""
    for line in definition.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            return line.split()[0] in ("std_msgs/Header", "Header", "std_msgs/msg/Header")
    return False


def missing_samples(stamps_ns: list[int], period_ns: float | None = None) -> int:
    """Samples missing from a periodic stream: gaps over 1.5 periods, counted in periods.

    The period is ``period_ns`` when the stream's rate is known (its configured rate,
    :mod:`aerial_sim.recording.rates`), else the median stamp interval, trusted from
    ``MIN_SAMPLES_FOR_PERIOD`` stamps on.
    """
    unique = np.unique(np.asarray(stamps_ns, dtype=np.int64))
    if len(unique) < (2 if period_ns else MIN_SAMPLES_FOR_PERIOD):
        return 0
    gaps = np.diff(unique).astype(float)
    period = float(period_ns) if period_ns else float(np.median(gaps))
    if period <= 0:
        return 0
    long_gaps = gaps[gaps > 1.5 * period]
    return int(np.sum(np.rint(long_gaps / period) - 1))
