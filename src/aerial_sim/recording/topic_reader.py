"""A bag's messages topic by topic, read straight from its MCAP file: what a run's post-processing reads.

:func:`aerial_sim.recording.reader.read_once` hands every message, in log-time order, to consumers
through ``rosbags``' ``AnyReader``; opening that reader parses ``metadata.yaml`` and every topic's QoS
profiles with a YAML parser (about 0.3 CPU s for a 19-topic bag) before the first message.
:func:`read_by_topic` reads the same messages from the MCAP file with the ``mcap`` library's
records (the summary's channels and schemas, each chunk decompressed once, its records walked), and
hands them to the consumers one topic at a time, each topic's messages in the order ``read_once``
gives them (log time, then chunk, then place in the chunk, as ``rosbags`` merges its chunks), the
topics in the order of their first message. A consumer may take a topic whole:
``messages_of(connection, times_ns, payloads)`` returning True (a whole-topic computation, such as
:func:`aerial_sim.recording.cdr_columns.topic_columns`); otherwise it gets each message through
``message(connection, t_ns, raw, decode)`` as from ``read_once``. ``decode()`` deserializes with a
``rosbags`` type store built from the bag's own schemas.

Only what this reads the same as ``read_once`` is read here: a bag of one indexed MCAP file whose
chunks are all listed in its summary, of at most :data:`MAX_BYTES_HELD` uncompressed (its messages are
held in memory while they are handed out: a camera run's bag is streamed as before). Any other bag (split into several files, no summary, a
recorder killed before the index: :func:`~aerial_sim.recording.mcap_index.needs_repair`) goes to
``read_once`` (which recovers it first); :func:`read_by_topic` says which it used.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aerial_sim.recording.mcap_index import OP_CHUNK, OP_MESSAGE, needs_repair
from aerial_sim.recording.reader import find_bag, read_once

#: Largest bag (uncompressed chunks) read whole into memory; a larger one (a camera's) is streamed by ``read_once``.
MAX_BYTES_HELD = 256 * 1024 * 1024
#: Type stores kept for the next bag with the same schemas (a kept post-processing process reads many).
TYPESTORES_KEPT = 8
_TYPESTORES: dict[tuple, object] = {}
_RECORD = struct.Struct("<BQ")
_MESSAGE = struct.Struct("<HIQ")
#: Channel id, sequence, log time, publish time: the message's payload follows.
MESSAGE_PREFIX = 22


@dataclass(frozen=True)
class MessageDefinition:
    data: str
    format: str = "msg"


@dataclass(frozen=True)
class Connection:
    """What consumers ask of ``rosbags``' connections: the topic, its type and its definition."""

    id: int
    topic: str
    msgtype: str
    msgdef: MessageDefinition


class TopicReader:
    """The ``reader`` consumers' ``begin`` gets: ``connections``, ``message_count``, ``deserialize``, ``typestore``."""

    def __init__(self, connections: list[Connection], message_count: int):
        self.connections = connections
        self.message_count = message_count
        self._typestore = None

    @property
    def typestore(self):
        """A ``rosbags`` type store of the bag's schemas; the same object for a bag with the same schemas as one
        read before in this process (parsing and registering them costs about 0.2 CPU s)."""
        if self._typestore is None:
            from rosbags.typesys import Stores, get_types_from_msg, get_typestore

            key = tuple(sorted({(c.msgtype, c.msgdef.data) for c in self.connections}))
            self._typestore = _TYPESTORES.get(key)
            if self._typestore is None:
                typestore = get_typestore(Stores.EMPTY)
                for msgtype, definition in key:
                    if msgtype not in typestore.fielddefs:
                        typestore.register(get_types_from_msg(definition, msgtype))
                if len(_TYPESTORES) >= TYPESTORES_KEPT:
                    _TYPESTORES.pop(next(iter(_TYPESTORES)))
                self._typestore = _TYPESTORES[key] = typestore
        return self._typestore

    def deserialize(self, raw: bytes, msgtype: str):
        return self.typestore.deserialize_cdr(raw, msgtype)


def read_by_topic(path: str | Path, consumers) -> bool:
    """Hand the bag's messages to ``consumers`` topic by topic (module doc); False: it went to ``read_once``."""
    bag = find_bag(path)
    files = sorted(bag.glob("*.mcap"))
    if len(files) != 1 or needs_repair(files[0]):
        read_once(bag, consumers)
        return False
    loaded = _load(files[0])
    if loaded is None:
        read_once(bag, consumers)
        return False
    connections, topics = loaded
    reader = TopicReader(list(connections.values()), sum(len(t[0]) for t in topics.values()))
    for consumer in consumers:
        consumer.begin(reader)
    deserialize = reader.deserialize
    firsts = sorted((first, channel) for channel, (_, _, first) in topics.items())
    for _, channel in firsts:
        connection = connections[channel]
        times, payloads, _ = topics[channel]
        per_message = [c for c in consumers if not (hasattr(c, "messages_of") and c.messages_of(connection, times, payloads))]
        if not per_message:
            continue
        msgtype = connection.msgtype
        for t_ns, raw in zip(times, payloads):
            decoded = []

            def decode(raw=raw, decoded=decoded):
                if not decoded:
                    decoded.append(deserialize(raw, msgtype))
                return decoded[0]

            for consumer in per_message:
                consumer.message(connection, t_ns, raw, decode)
    return True


def _load(path: Path):
    """({channel id: Connection}, {channel id: (log times, payloads, first message's order key)}), or None."""
    from mcap.data_stream import ReadDataStream
    from mcap.exceptions import McapError
    from mcap.reader import make_reader
    from mcap.records import Chunk
    from mcap.stream_reader import get_chunk_data_stream

    with open(path, "rb") as stream:
        try:
            summary = make_reader(stream).get_summary()
        except (McapError, ValueError, struct.error):
            return None
        if summary is None or not summary.chunk_indexes or any(c.message_encoding != "cdr" for c in summary.channels.values()):
            return None
        if sum(c.uncompressed_size for c in summary.chunk_indexes) > MAX_BYTES_HELD:
            return None
        connections = {}
        for channel in summary.channels.values():
            schema = summary.schemas.get(channel.schema_id)
            if schema is None:
                return None
            connections[channel.id] = Connection(channel.id, channel.topic, schema.name,
                                                 MessageDefinition(schema.data.decode(errors="replace")))
        times: dict[int, list[int]] = {}
        payloads: dict[int, list[bytes]] = {}
        order: dict[int, list[int]] = {}
        sequence = 0
        for index in sorted(summary.chunk_indexes, key=lambda c: c.chunk_start_offset):
            stream.seek(index.chunk_start_offset)
            opcode, length = _RECORD.unpack(stream.read(_RECORD.size))
            if opcode != OP_CHUNK:
                return None
            try:
                chunk = Chunk.read(ReadDataStream(io.BytesIO(stream.read(length))))
                data_stream, size = get_chunk_data_stream(chunk, validate_crc=True)
                data = data_stream.read(size)
            except Exception:  # noqa: BLE001 - a chunk the reader cannot take: read_once decides
                return None
            offset = 0
            while offset + _RECORD.size <= size:
                opcode, length = _RECORD.unpack_from(data, offset)
                body = offset + _RECORD.size
                if opcode == OP_MESSAGE:
                    channel, _, log_time = _MESSAGE.unpack_from(data, body)
                    if channel not in connections:
                        return None
                    times.setdefault(channel, []).append(log_time)
                    payloads.setdefault(channel, []).append(data[body + MESSAGE_PREFIX : body + length])
                    order.setdefault(channel, []).append(sequence)
                    sequence += 1
                offset = body + length
    topics = {}
    for channel, channel_times in times.items():
        stamps = np.asarray(channel_times, dtype=np.int64)
        rank = np.argsort(stamps, kind="stable")  # file order (chunk, then place) breaks ties, as rosbags' merge
        sorted_times = stamps[rank].tolist()
        channel_payloads = payloads[channel]
        topics[channel] = (sorted_times, [channel_payloads[i] for i in rank.tolist()],
                           (sorted_times[0], order[channel][int(rank[0])]))
    return connections, topics


__all__ = ["Connection", "TopicReader", "read_by_topic"]
