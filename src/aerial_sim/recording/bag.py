"""rosbag2 bag writer: MCAP files of serialized (CDR) messages plus ``metadata.yaml``.

The container is written with the ``mcap`` library (Foxglove's reference
implementation of the MCAP format, the default rosbag2 storage since Iron); this
module adds what makes the files a rosbag2 bag, following rosbag2's
``rosbag2_storage_mcap`` plugin and bag format version 9:

- profile ``ros2``; one schema per message type (``ros2msg`` text, see
  :mod:`aerial_sim.recording.msgdefs`); one channel per topic with message
  encoding ``cdr`` and metadata ``offered_qos_profiles`` (YAML) and
  ``topic_type_hash`` (RIHS01);
- a ``rosbag2`` metadata record holding the serialized bag metadata;
- ``metadata.yaml`` beside the files (``rosbag2_bagfile_information``).

Robustness: chunks are flushed to disk at least every ``flush_period_s`` and
``metadata.yaml`` is rewritten (atomically) at a flush at least every :data:`METADATA_PERIOD_S`,
so a recorder that is killed outright leaves a bag readable up to its last flush (and
``aerial_sim record --recover`` makes its metadata count every message on disk); :meth:`BagWriter.close`
(called on SIGINT/SIGTERM) finishes the MCAP summary and writes the final
metadata. A write error (a full disk: ``ENOSPC``) stops recording cleanly: the
current file is cut back to its last complete chunk and closed with a footer (a
valid MCAP file with its summary and index rebuilt from the chunks on disk by
:func:`aerial_sim.recording.mcap_index.repair_mcap`, so every reader takes it as it is),
and ``metadata.yaml`` counts exactly the messages on disk. A small reserve file (``.space_reserve``, deleted at the end)
keeps room on a full disk for that footer and the metadata. With ``max_bag_size_bytes``
the bag is split into ``<name>_0.mcap``, ``<name>_1.mcap`` ... each a complete
MCAP file, all listed in ``metadata.yaml``.

Log times never go backwards within a bag: a message stamped before the one
written last (a simulation reset sending ``/clock`` back, a message stamped with
its header before the first ``/clock``) is logged at the last log time, with its
own time kept as the publish time. So even a file whose index is lost reads back
in order by scanning (rosbags refuses unindexed messages out of log-time order).

Deterministic files (``deterministic=True``, what a lockstep recorder asks for; issue 32): two runs
that publish the same messages give byte-identical files. Everything that arrival order or wall
time chose is taken from the messages instead: messages are held (:meth:`BagWriter.hold`) and
written in the order of (log time, topic, bytes) once the recorder's clock has passed them by a
window (:meth:`BagWriter.release`); a stamped message is logged at its stamp; a stamped message
identical to one already logged at that time on its topic (a lockstep re-send) is written once;
channels and schemas are registered, and get their ids, at their first message; chunks end at
``chunk_size_bytes`` or when the log time crosses a multiple of ``flush_period_s`` (simulated
seconds, so a killed recorder still loses at most that much), never on a wall-clock flush; and
``metadata.yaml`` lists topics and QoS profiles sorted, with no wall-clock field (the recorder
writes its wall-clock span beside the bag: :data:`WALL_CLOCK_FILE`). A message that arrives after
its place was written (:attr:`BagWriter.late`, which the recorder reports when it closes) is written
where it arrives: its content is in the bag, but that file's bytes may differ from another run's. (The
lockstep launch's own latched message, the scene markers logged at 0, is not such a case: the start gate
holds the clock until it is sent, and the recorder takes part only once it has it; doc/lockstep.md.)

Every message is written as a DDS transport between processes delivers it: its CDR bytes padded with
zero bytes to a multiple of 4 (:func:`transport_padded`). A reader in the writer's own process (a node
container, :mod:`aerial_sim.nodes.container`) gets them without that padding; padded here, a bag's bytes
do not depend on which nodes shared a process.

This module does not import rclpy: QoS profiles arrive as plain dicts.
"""

from __future__ import annotations

import errno
import heapq
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable, Literal, Mapping, Sequence

import yaml

from aerial_sim.config import ParamsError, require, require_non_negative, require_positive
from aerial_sim.recording.mcap_append import chunk_appender
from aerial_sim.recording.mcap_index import McapRepairError, repair_mcap
from aerial_sim.recording.msgdefs import message_definition

_SAFE_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
#: The YAML text of each QoS value dumped so far, by ``repr`` (which tells key order and types apart, as the text
#: does). The recorder adds the same few profiles to every topic of every bag: PyYAML's emitter took 0.5 ms a dump,
#: two a topic, about 40 at a graph's start and again at each warm run's new bag.
_QOS_TEXT: dict[tuple[bool, str], str] = {}
_QOS_TEXT_MAX = 256


def _qos_text(value: Any, sort_keys: bool) -> str:
    """``yaml.safe_dump(value, sort_keys=sort_keys)``, kept for the next equal ``value``."""
    key = (sort_keys, repr(value))
    text = _QOS_TEXT.get(key)
    if text is None:
        if len(_QOS_TEXT) >= _QOS_TEXT_MAX:
            _QOS_TEXT.clear()
        text = _QOS_TEXT[key] = yaml.safe_dump(value, sort_keys=sort_keys)
    return text

BAG_FORMAT_VERSION = 9
MAX_TIME_NS = 2**63 - 1
MCAP_MAGIC = b"\x89MCAP0\r\n"
#: Space set aside beside the bag, freed when a write fails, for the closing footer and metadata.yaml.
RESERVE_NAME = ".space_reserve"
RESERVE_BYTES = 256 * 1024
#: The recorder's wall-clock span of a run (``wall_start_ns``, ``wall_end_ns``), written beside the bag
#: folder, not in it: a deterministic bag holds nothing that wall time chose (module doc).
WALL_CLOCK_FILE = "recording_wall_clock.yaml"
#: How the writer opens files (``open`` unless a test injects another): ``open_file(path, mode)``.
FileOpener = Callable[[Path, str], BinaryIO]


class BagWriteError(OSError):
    """Writing the bag failed (for example the disk is full); recording has stopped."""


def describe_os_error(error: OSError, path: str | Path | None = None) -> str:
    """``cannot write PATH: [Errno 28] No space left on device (ENOSPC)``: one line for a failed write."""
    where = getattr(error, "filename", None) or path
    code = error.errno
    reason = error.strerror or str(error) or type(error).__name__
    name = f" ({errno.errorcode[code]})" if code in errno.errorcode else ""
    return f"cannot write {where}: [Errno {code}] {reason}{name}" if code else f"cannot write {where}: {reason}"


def transport_padded(data: bytes) -> bytes:
    """CDR ``data`` padded with zero bytes to a multiple of 4, as DDS delivers a serialized payload
    between processes (its RTPS submessages are 4-byte aligned; DDSI-RTPS 2.5, 9.4.2.11). In process,
    Fast DDS hands the reader the writer's exact bytes: ``std_msgs/Header`` of frame ``''`` is 13 bytes
    there and 16 from another process (module doc)."""
    extra = -len(data) % 4
    return data if not extra else bytes(data) + bytes(extra)


#: The longest wall time between two rewrites of ``metadata.yaml`` while recording (s; each flush also
#: rewrote it: 5-6 ms of YAML each, twice a second for a lockstep run's two bags). A killed recorder's
#: ``metadata.yaml`` is valid but counts only what was on disk when it was last written (``aerial_sim
#: record --recover`` counts the rest); a closed bag's is exact.
METADATA_PERIOD_S = 10.0


@dataclass(frozen=True)
class BagWriterParams:
    """How a bag is written (rosbag2 MCAP storage options).

    ``chunk_size_bytes``: MCAP chunk size (rosbag2's default preset uses 786 kB-class
    chunks); ``compression``: chunk compression, ``none``, ``lz4`` or ``zstd`` (the
    recorder uses lz4: see :class:`aerial_sim.recording.recorder.RecorderParams`);
    ``max_bag_size_bytes``: split size, 0 = one file (a file is closed once
    it reaches the size, so it may pass it by up to one chunk);
    ``flush_period_s``: the most time between flushes to disk (bounds what a
    killed recorder loses).
    """

    chunk_size_bytes: int = 1_048_576
    compression: Literal["none", "zstd", "lz4"] = "none"
    max_bag_size_bytes: int = 0
    flush_period_s: float = 1.0

    def __post_init__(self) -> None:
        require(self.chunk_size_bytes > 0, f"chunk_size_bytes must be > 0, got {self.chunk_size_bytes}")
        require_non_negative(self, "max_bag_size_bytes")
        require_positive(self, "flush_period_s")

    @property
    def effective_chunk_size(self) -> int:
        """Chunk size actually used: at most a quarter of the split size, so files split near the limit."""
        if self.max_bag_size_bytes:
            return max(1024, min(self.chunk_size_bytes, self.max_bag_size_bytes // 4))
        return self.chunk_size_bytes


def qos_profile_dict(
    reliability: str = "reliable",
    durability: str = "volatile",
    history: str = "keep_last",
    depth: int = 10,
) -> dict[str, Any]:
    """One offered QoS profile in rosbag2's version-9 ``metadata.yaml`` layout."""
    infinite = {"sec": 9223372036, "nsec": 854775807}
    return {
        "history": history,
        "depth": int(depth),
        "reliability": reliability,
        "durability": durability,
        "deadline": dict(infinite),
        "lifespan": dict(infinite),
        "liveliness": "automatic",
        "liveliness_lease_duration": dict(infinite),
        "avoid_ros_namespace_conventions": False,
    }


@dataclass
class _Topic:
    name: str
    msgtype: str
    type_hash: str
    qos_yaml: str
    qos: list[dict[str, Any]]
    count: int = 0  # messages on disk (in complete chunks)
    sequence: int = 0  # messages accepted
    # Deterministic files: the log time last written and the payloads written at it (re-sends).
    last_ns: int = -1
    last_messages: tuple = ()


@dataclass
class _FileStats:
    path: str
    start_ns: int = MAX_TIME_NS
    end_ns: int = 0
    count: int = 0

    def add(self, t_ns: int) -> None:
        self.start_ns = min(self.start_ns, t_ns)
        self.end_ns = max(self.end_ns, t_ns)
        self.count += 1


@dataclass
class BagInfo:
    """What a closed (or still open) bag holds: totals per topic and per file."""

    path: Path
    files: list[str]
    message_count: int
    bytes_written: int
    start_ns: int
    end_ns: int
    topic_counts: dict[str, int] = field(default_factory=dict)
    error: str | None = None


class _CountingStream:
    """A file being written, with ``tell()`` from the bytes written through it instead of an lseek:
    :meth:`BagWriter.write` asks where the file ends three times a message."""

    def __init__(self, stream):
        self._stream = stream
        self._position = stream.tell()

    def write(self, data) -> int:
        written = self._stream.write(data)  # raises on a failed write (the file is then abandoned)
        self._position += len(data)
        return written

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        self._stream.close()


class BagWriter:
    """Write serialized messages into a rosbag2 (MCAP) bag directory.

    Usage: ``add_topic(name, type, qos)`` once per topic, ``write(name, cdr_bytes,
    t_ns)`` per message, ``maybe_flush(now)`` regularly, ``close()`` at the end.
    Time is passed in (nanoseconds): the recorder's clock, i.e. sim time.
    """

    def __init__(
        self,
        path: str | Path,
        params: BagWriterParams | None = None,
        distro: str = "kilted",
        open_file: FileOpener = open,
        deterministic: bool = False,
    ):
        self.params = params or BagWriterParams()
        self.deterministic = deterministic
        self._held: list[tuple[int, str, bytes, bool]] = []  # (log time, topic, data, stamped): not yet written
        self._released_ns = -1  # deterministic: everything logged at or before this has been written
        self._next_cut_ns = 0  # deterministic: the chunk ends before the first message at or after this
        #: Deterministic files: messages that arrived after their place in the file was written.
        self.late = 0
        #: Deterministic files: stamped re-sends left out (the same message at the same time on a topic).
        self.resends = 0
        self._open_file = open_file
        self.path = Path(path)
        if self.path.exists() and any(self.path.iterdir()):
            raise ParamsError(f"{self.path}: output directory exists and is not empty")
        self.path.mkdir(parents=True, exist_ok=True)
        self.distro = distro
        self._topics: dict[str, _Topic] = {}
        self._files: list[_FileStats] = []
        self._writer = None
        self._stream = None
        self._schema_ids: dict[str, int] = {}
        self._channel_ids: dict[str, int] = {}
        self._bytes_closed = 0
        self._good_offset = 0  # end of the last complete chunk of the current file (bytes known on disk)
        self._pending: list[tuple[_Topic, int]] = []  # accepted messages not yet in a complete chunk
        self._last_log_ns = 0  # log times written so far never exceed this: none goes back (module doc)
        self._last_flush = self._last_metadata = time.monotonic()
        self._closed = False
        self.error: str | None = None
        #: Free-form string pairs stored as ``custom_data`` in ``metadata.yaml`` (e.g. wall-clock times).
        self.custom_data: dict[str, str] = {}
        _reserve_space(self.path / RESERVE_NAME)
        self._open_next_file()
        self.write_metadata()

    # -- public API -------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def topics(self) -> dict[str, str]:
        """Topic name -> message type for every topic added so far."""
        return {t.name: t.msgtype for t in self._topics.values()}

    def add_topic(self, name: str, msgtype: str, offered_qos: Sequence[Mapping[str, Any]] = ()) -> None:
        """Declare a topic before writing to it (its schema comes from :func:`message_definition`)."""
        if name in self._topics:
            return
        definition = message_definition(msgtype)
        # One profile per distinct QoS, sorted: how many publishers discovery had found by then, and in
        # which order, is timing (a bag's bytes must not depend on it).
        distinct = {_qos_text(dict(q), sort_keys=True): dict(q) for q in offered_qos}
        qos = [distinct[key] for key in sorted(distinct)] or [qos_profile_dict()]
        qos_yaml = _qos_text(qos, sort_keys=False).strip()
        self._topics[name] = _Topic(name, definition.msgtype, definition.type_hash, qos_yaml, qos)
        if self._writer is not None and not self.deterministic:  # deterministic: at its first message
            self._register(self._topics[name])

    def write(self, topic: str, data: bytes, log_time_ns: int, publish_time_ns: int | None = None) -> bool:
        """Append one serialized message; returns False once recording has stopped (closed or disk error)."""
        if self._closed or self._writer is None:
            return False
        if len(data) & 3:
            data = transport_padded(data)
        entry = self._topics[topic]
        log_time_ns = int(log_time_ns)
        publish_ns = log_time_ns if publish_time_ns is None else int(publish_time_ns)
        if log_time_ns < self._last_log_ns:
            log_time_ns = self._last_log_ns
        self._last_log_ns = log_time_ns
        try:
            if self.params.max_bag_size_bytes and self._split_due(len(data)):
                self._finish_file()
                self._open_next_file()
            if self.deterministic and log_time_ns >= self._next_cut_ns:
                self._cut_chunk(log_time_ns)
            channel_id = self._channel_ids.get(topic)
            if channel_id is None:
                self._register(entry)
                channel_id = self._channel_ids[topic]
            stream = self._stream
            size_before = stream.tell()
            self._append(channel_id, log_time_ns, data, publish_ns, entry.sequence)
            entry.sequence += 1
            self._pending.append((entry, log_time_ns))
            if stream.tell() != size_before:  # a chunk (with this message) went to the file
                self._commit()
        except OSError as error:
            self._fail(error)
            return False
        return True

    def hold(self, topic: str, data: bytes, log_time_ns: int, stamped: bool = False) -> bool:
        """Deterministic files: keep a message until :meth:`release` passes its log time (module doc).
        ``stamped``: ``log_time_ns`` is the message's own stamp (a re-send of it is written once).
        A message logged at or before what was released already is written at once (:attr:`late`)."""
        if self._closed or self._writer is None:
            return False
        if len(data) & 3:
            data = transport_padded(data)
        if log_time_ns <= self._released_ns:
            if stamped and self._is_resend(topic, data, log_time_ns):
                return True
            self.late += 1
            return self.write(topic, data, log_time_ns)
        heapq.heappush(self._held, (int(log_time_ns), topic, data, stamped))
        return True

    def release(self, until_ns: int | None = None) -> bool:
        """Write the held messages logged at or before ``until_ns`` (None: all of them) in the order of
        (log time, topic, bytes); False once recording has stopped."""
        # A heap by (log time, topic, bytes): a round takes only what it releases, instead of sorting and
        # filtering the whole window (some 600 messages at 0.3 s) every take round. Entries equal in
        # those three are equal in the fourth (stamped is a topic's), so the order is the sort's.
        if until_ns is None:
            ready, self._held = sorted(self._held), []
        else:
            held = self._held
            if not held or held[0][0] > until_ns:
                return not self._closed and self._writer is not None
            ready = []
            while held and held[0][0] <= until_ns:
                ready.append(heapq.heappop(held))
            self._released_ns = max(self._released_ns, int(until_ns))
        ok = True
        for log_ns, topic, data, stamped in ready:
            if stamped and self._is_resend(topic, data, log_ns):
                continue
            ok = self.write(topic, data, log_ns) and ok
        if until_ns is None and ready:
            self._released_ns = max(self._released_ns, ready[-1][0])
        return ok

    def discard_held(self) -> int:
        """Deterministic files: drop the messages still held (the run's end: :meth:`release` first what
        is to be kept); returns how many."""
        dropped, self._held = len(self._held), []
        return dropped

    def _is_resend(self, topic: str, data: bytes, log_ns: int) -> bool:
        """True for a stamped message already written at ``log_ns`` on ``topic`` (counted in :attr:`resends`)."""
        entry = self._topics[topic]
        if entry.last_ns != log_ns:  # the first message at this log time (most are): nothing to compare
            entry.last_ns, entry.last_messages = log_ns, (bytes(data),)
            return False
        if data in entry.last_messages:  # the bytes themselves: one or two short messages
            self.resends += 1
            return True
        entry.last_messages += (bytes(data),)
        return False

    def _cut_chunk(self, log_time_ns: int) -> None:
        """Deterministic files: end the chunk at a multiple of ``flush_period_s`` of log time."""
        period_ns = max(1, round(self.params.flush_period_s * 1e9))
        self._next_cut_ns = (log_time_ns // period_ns + 1) * period_ns
        self._writer.flush()
        self._commit()

    def maybe_flush(self, force: bool = False) -> None:
        """Flush chunks and rewrite ``metadata.yaml`` if ``flush_period_s`` has passed (or ``force``)."""
        if self._closed or self._writer is None:
            return
        now = time.monotonic()
        if not force and now - self._last_flush < self.params.flush_period_s:
            return
        self._last_flush = now
        try:
            if not self.deterministic:  # deterministic files end chunks by log time (_cut_chunk)
                self._writer.flush()
                self._commit()
            if force or now - self._last_metadata >= METADATA_PERIOD_S:
                self.write_metadata()
        except OSError as error:
            self._fail(error)

    def info(self) -> BagInfo:
        """Totals so far: messages on disk plus those accepted into the chunk being built."""
        files = [f for f in self._files if f.count or len(self._files) == 1]
        times = [f.start_ns for f in files if f.count] + [t for _, t in self._pending]
        ends = [f.end_ns for f in files if f.count] + [t for _, t in self._pending]
        pending = Counter(entry.name for entry, _ in self._pending)
        return BagInfo(
            path=self.path,
            files=[f.path for f in files],
            message_count=sum(f.count for f in files) + len(self._pending),
            bytes_written=self._bytes_closed + (self._current_size() if not self._closed else 0),
            start_ns=min(times, default=0),
            end_ns=max(ends, default=0),
            topic_counts={t.name: t.count + pending[t.name] for t in self._topics.values()},
            error=self.error,
        )

    def close(self) -> BagInfo:
        """Finish the current MCAP file (summary, index, footer) and write the final ``metadata.yaml``."""
        if not self._closed:
            if self._held:
                self.release()
            if self._writer is not None:
                try:
                    self._finish_file()
                except OSError as error:
                    self._fail(error)
            self._closed = True
            _release_space(self.path / RESERVE_NAME)
            try:
                self.write_metadata()
            except OSError as error:
                self.error = self.error or f"metadata.yaml not written: {describe_os_error(error)}"
        return self.info()

    def __enter__(self) -> "BagWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- metadata ---------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        """The ``rosbag2_bagfile_information`` mapping for the bag as written so far."""
        info = self.info()
        files = [f for f in self._files if f.count or len(self._files) == 1]
        return {
            "version": BAG_FORMAT_VERSION,
            "storage_identifier": "mcap",
            "duration": {"nanoseconds": max(0, info.end_ns - info.start_ns)},
            "starting_time": {"nanoseconds_since_epoch": info.start_ns},
            "message_count": info.message_count,
            "topics_with_message_count": [
                {
                    "topic_metadata": {
                        "name": t.name,
                        "type": t.msgtype,
                        "serialization_format": "cdr",
                        "offered_qos_profiles": t.qos,
                        "type_description_hash": t.type_hash,
                    },
                    "message_count": t.count,
                }
                for t in sorted(self._topics.values(), key=lambda t: t.name)
            ],
            "compression_format": "",
            "compression_mode": "",
            "relative_file_paths": [f.path for f in files],
            "files": [
                {
                    "path": f.path,
                    "starting_time": {"nanoseconds_since_epoch": f.start_ns if f.count else 0},
                    "duration": {"nanoseconds": max(0, f.end_ns - f.start_ns) if f.count else 0},
                    "message_count": f.count,
                }
                for f in files
            ],
            "custom_data": {
                "writer": "aerial_sim",
                **{str(k): str(v) for k, v in self.custom_data.items()},
                **({"error": self.error} if self.error else {}),
            },
            "ros_distro": self.distro,
        }

    def write_metadata(self) -> None:
        """Write ``metadata.yaml`` atomically (temporary file + rename)."""
        self._last_metadata = time.monotonic()
        # libyaml's emitter where PyYAML has it: the pure-Python one cost the recorder a sixth of its CPU.
        text = yaml.dump({"rosbag2_bagfile_information": self.metadata()}, Dumper=_SAFE_DUMPER, sort_keys=False)
        temporary = self.path / "metadata.yaml.tmp"
        temporary.write_text(text)
        os.replace(temporary, self.path / "metadata.yaml")

    # -- internals --------------------------------------------------------
    def _current_size(self) -> int:
        return self._stream.tell() if self._stream is not None else 0

    def _split_due(self, size: int) -> bool:
        """True when ``size`` more bytes would pass the split size of a file that holds messages."""
        limit = self.params.max_bag_size_bytes
        has_messages = self._files[-1].count or self._pending
        return bool(limit and has_messages and self._current_size() + size > limit)

    def _commit(self) -> None:
        """Push the finished chunk to the file; its messages count as written from now on."""
        self._stream.flush()
        self._good_offset = self._stream.tell()
        pending = self._pending
        if pending:
            for entry, _ in pending:
                entry.count += 1
            times = [t_ns for _, t_ns in pending]  # the file's span and count, as _FileStats.add of each would set them
            stats = self._files[-1]
            stats.start_ns, stats.end_ns = min(stats.start_ns, *times), max(stats.end_ns, *times)
            stats.count += len(times)
            pending.clear()

    def _open_next_file(self) -> None:
        from mcap.writer import CompressionType, Writer

        name = f"{self.path.name}_{len(self._files)}.mcap"
        self._files.append(_FileStats(name))
        self._good_offset = 0
        self._stream = _CountingStream(self._open_file(self.path / name, "wb"))
        compression = {"none": CompressionType.NONE, "zstd": CompressionType.ZSTD, "lz4": CompressionType.LZ4}
        self._writer = Writer(
            self._stream, chunk_size=self.params.effective_chunk_size, compression=compression[self.params.compression]
        )
        self._writer.start(profile="ros2", library="aerial_sim recorder (mcap python)")
        self._append = chunk_appender(self._writer) or self._writer.add_message
        self._schema_ids.clear()
        self._channel_ids.clear()
        if not self.deterministic:  # deterministic: each at its first message (module doc)
            for topic in self._topics.values():
                self._register(topic)
        self._commit()  # the header is on disk: a file cut back to here is still an MCAP file

    def _register(self, topic: _Topic) -> None:
        if topic.msgtype not in self._schema_ids:
            definition = message_definition(topic.msgtype)
            self._schema_ids[topic.msgtype] = self._writer.register_schema(
                name=topic.msgtype, encoding=definition.encoding, data=definition.text.encode()
            )
        self._channel_ids[topic.name] = self._writer.register_channel(
            topic=topic.name,
            message_encoding="cdr",
            schema_id=self._schema_ids[topic.msgtype],
            metadata={"offered_qos_profiles": topic.qos_yaml, "topic_type_hash": topic.type_hash},
        )

    def _finish_file(self) -> None:
        """Last chunk, rosbag2 metadata record, summary and footer; then close the file."""
        if self.deterministic:  # topics without a message in this file: in the summary, in name order
            for name in sorted(set(self._topics) - set(self._channel_ids)):
                self._register(self._topics[name])
        serialized = yaml.safe_dump(self.metadata(), sort_keys=False)
        self._writer.add_metadata("rosbag2", {"serialized_metadata": serialized, "ROS_DISTRO": self.distro})
        self._writer.finish()
        self._commit()
        self._bytes_closed += self._good_offset
        stream, self._stream, self._writer = self._stream, None, None
        stream.close()

    def _fail(self, error: OSError) -> None:
        """A write failed (disk full...): stop recording, keep the complete chunks readable, count them."""
        path = self.path / self._files[-1].path
        self._pending.clear()  # the chunk being built never reached the disk
        self._writer = None
        _release_space(self.path / RESERVE_NAME)
        self._seal_current_file(path)
        kept = sum(f.count for f in self._files)
        self.error = f"recording stopped: {describe_os_error(error, path)}; the bag keeps the {kept} messages written"
        try:
            self.write_metadata()
        except OSError as metadata_error:
            self.error += f"; metadata.yaml not written: {describe_os_error(metadata_error)}"

    def _seal_current_file(self, path: Path) -> None:
        """Cut the failed file back to its last complete chunk and end it with its rebuilt summary and
        a footer (best effort: without room for the summary, a bare footer)."""
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                stream.close()  # may fail again flushing its buffer; the descriptor is closed regardless
            except OSError:
                pass
        if self._good_offset == 0:  # failed while starting the file: it holds nothing
            _remove_quietly(path)
            if len(self._files) > 1:
                self._files.pop()
            return
        try:
            repair_mcap(path, self._good_offset, self._open_file)
        except (OSError, McapRepairError):
            pass  # a bare footer, or none: `aerial_sim record --recover` finishes it
        self._bytes_closed += self._good_offset


def _reserve_space(path: Path) -> None:
    """Set ``RESERVE_BYTES`` of disk aside in ``path`` (freed by :func:`_release_space` when a write fails)."""
    with open(path, "wb") as stream:
        try:
            os.posix_fallocate(stream.fileno(), 0, RESERVE_BYTES)
        except (AttributeError, OSError):
            stream.write(bytes(RESERVE_BYTES))


def _release_space(path: Path) -> None:
    _remove_quietly(path)


def _remove_quietly(path: Path) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
