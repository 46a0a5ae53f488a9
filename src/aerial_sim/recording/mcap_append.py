"""Appending one message to an ``mcap`` library ``Writer``'s open chunk with one ``struct`` pack.

What ``mcap.writer.Writer.add_message`` does for a chunked file (MCAP specification, "Message" record:
opcode ``0x05``, uint64 record length, then uint16 channel id, uint32 sequence, uint64 log time, uint64
publish time and the data; the chunk's message index gets ``(log time, offset in the chunk)``; the
summary's statistics and the chunk's start and end times follow the message's log time), without the
library's per-message ``Message`` dataclass and its six ``struct`` packs, seeks and writes: 12 us a
700-byte message there, 5 us here, on the development machine. A lockstep recorder of the smoke graph
writes some 2,000 messages a simulated second.

The library stays the writer of everything else (the header, schemas, channels, the chunk records,
their compression, the indexes, the summary and the footer); this only appends to the chunk the way it
would. It reads the writer's private state, so it checks that state's shape once
(:func:`chunk_appender`) and answers ``None`` where the library differs (another version, no
chunking): the caller then uses ``add_message`` itself. ``test/test_bag.py`` checks that both give
the same file, byte for byte.
"""

from __future__ import annotations

import itertools
import struct
from typing import Callable

_MESSAGE_OPCODE = 0x05
#: Opcode, record length, channel id, sequence, log time, publish time.
_MESSAGE_HEAD = struct.Struct("<BQHIQQ")
_MESSAGE_FIELDS_BYTES = 2 + 4 + 8 + 8

#: ``append(channel_id, log_time_ns, data, publish_time_ns, sequence)``.
Append = Callable[[int, int, bytes, int, int], None]


def chunk_appender(writer) -> Append | None:
    """An ``append`` equal to ``writer.add_message`` for ``writer`` (an ``mcap.writer.Writer`` already
    started, chunked), or None where its private state is not the one this was written for."""
    try:
        from mcap.records import MessageIndex
        from mcap.opcode import Opcode

        statistics = writer._Writer__statistics
        builder = writer._Writer__chunk_builder
        chunk_size = writer._Writer__chunk_size
        finalize_chunk = writer._Writer__finalize_chunk
        records = builder.record_writer
        counts = statistics.channel_message_counts
        ok = (builder is not None and isinstance(chunk_size, int) and hasattr(records, "_buffer")
              and all(hasattr(builder, name) for name in ("message_indices", "num_messages", "message_start_time",
                                                            "message_end_time"))
              and all(hasattr(statistics, name) for name in ("message_count", "message_start_time",
                                                               "message_end_time")))
    except (AttributeError, ImportError):
        return None
    if not ok:
        return None
    indices = builder.message_indices
    pack = _MESSAGE_HEAD.pack

    class PackedMessageIndex(MessageIndex):
        """The library's ``MessageIndex`` whose ``write`` packs its (log time, offset) pairs in one ``struct``
        pack instead of two packs and writes a pair (what the writer does for each channel at each chunk's end):
        the same bytes."""

        def write(self, stream) -> None:
            records = self.records
            stream.start_record(Opcode.MESSAGE_INDEX)
            stream.write2(self.channel_id)
            stream.write4(len(records) * 16)
            stream.write(struct.pack(f"<{2 * len(records)}Q", *itertools.chain.from_iterable(records)))
            stream.finish_record()

    def append(channel_id: int, log_time: int, data: bytes, publish_time: int, sequence: int) -> None:
        if statistics.message_count == 0:
            statistics.message_start_time = log_time
        elif log_time < statistics.message_start_time:
            statistics.message_start_time = log_time
        if log_time > statistics.message_end_time:
            statistics.message_end_time = log_time
        counts[channel_id] += 1
        statistics.message_count += 1
        if builder.num_messages == 0:
            builder.message_start_time = log_time
        elif log_time < builder.message_start_time:
            builder.message_start_time = log_time
        if log_time > builder.message_end_time:
            builder.message_end_time = log_time
        buffer = records._buffer  # the builder's reset() puts a new one in place after each chunk
        index = indices.get(channel_id)
        if not index:
            index = indices[channel_id] = PackedMessageIndex(channel_id=channel_id, records=[])
        index.records.append((log_time, buffer.tell()))
        builder.num_messages += 1
        buffer.write(pack(_MESSAGE_OPCODE, _MESSAGE_FIELDS_BYTES + len(data), channel_id, sequence, log_time,
                          publish_time))
        buffer.write(data)
        if buffer.tell() > chunk_size:
            finalize_chunk()

    return append
