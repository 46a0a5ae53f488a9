"""Rebuild the summary section (index) of an MCAP file from its raw records, in place.

An MCAP file (https://mcap.dev/spec) is a data section (a Header, then Chunk
records, each followed by one MessageIndex record per channel it holds, then
DataEnd) and a summary section (Schema, Channel, Statistics and ChunkIndex
records, their SummaryOffsets) that the Footer points to. Readers that find no
summary fall back to scanning the data section, and some refuse such a file:
rosbags reads unindexed messages only in log-time order, and ``ros2 bag``'s MCAP
storage plugin wants the summary. A recorder killed outright, or stopped by a
full disk, leaves the data section without its summary.

:func:`repair_mcap` walks the data section record by record (opcode, uint64
length, body), keeps every complete Chunk whose data decompresses (so a file cut
in the middle of a record, or ending in a damaged chunk, loses only that record),
drops whatever follows the last good chunk, writes that chunk's MessageIndex
records again (they may be cut short), and appends DataEnd, a summary built from
the chunks' contents and a Footer: the same records the ``mcap`` library's
``Writer.finish`` writes. It needs only the few kilobytes of the summary beyond
the kept data; if even that does not fit, it ends the file with a footer and no
summary (readers then scan it; the bag writer keeps log times in order for
that). Record classes and chunk decompression are the ``mcap`` library's.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable

MCAP_MAGIC = b"\x89MCAP0\r\n"
OP_HEADER, OP_FOOTER, OP_SCHEMA, OP_CHANNEL, OP_MESSAGE = 0x01, 0x02, 0x03, 0x04, 0x05
OP_CHUNK, OP_MESSAGE_INDEX, OP_DATA_END = 0x06, 0x07, 0x0F
#: Opcode, uint64 length, then the Footer body (summary_start, summary_offset_start, summary_crc).
FOOTER_SIZE = 1 + 8 + 8 + 8 + 4
FileOpener = Callable[[Path, str], BinaryIO]


class McapRepairError(OSError):
    """The file is not an MCAP file (no magic, no header): nothing to rebuild."""


@dataclass
class _ChunkFacts:
    """One complete, readable chunk of the data section and what it holds."""

    offset: int
    length: int  # the whole record: opcode, length field, body
    start_ns: int
    end_ns: int
    compression: str
    compressed_size: int
    uncompressed_size: int
    index_offsets: dict[int, int] = field(default_factory=dict)  # channel -> its MessageIndex record in the file
    index_length: int = 0
    entries: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # channel -> (log time, offset in chunk)


@dataclass
class McapScan:
    """What the data section of an MCAP file holds, read record by record."""

    data_end: int  # where the kept data ends (after the last good chunk's message indexes, or the header)
    chunks: list[_ChunkFacts]
    schemas: dict[int, object]
    channels: dict[int, object]

    @property
    def message_count(self) -> int:
        return sum(len(e) for chunk in self.chunks for e in chunk.entries.values())

    def channel_counts(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for chunk in self.chunks:
            for channel, entries in chunk.entries.items():
                counts[channel] = counts.get(channel, 0) + len(entries)
        return counts


def footer_summary_start(path: str | Path) -> int | None:
    """The Footer's ``summary_start`` (0: the file has no summary), or None when the file does not end
    with a Footer and the closing magic (it was never finished)."""
    path = Path(path)
    size = path.stat().st_size
    if size < len(MCAP_MAGIC) * 2 + FOOTER_SIZE:
        return None
    with open(path, "rb") as stream:
        stream.seek(size - len(MCAP_MAGIC) - FOOTER_SIZE)
        tail = stream.read()
    if tail[-len(MCAP_MAGIC):] != MCAP_MAGIC or tail[0] != OP_FOOTER or struct.unpack_from("<Q", tail, 1)[0] != 20:
        return None
    return struct.unpack_from("<Q", tail, 9)[0]


def needs_repair(path: str | Path) -> bool:
    """True when the file is unfinished, or finished without a summary although it holds chunks."""
    start = footer_summary_start(path)
    if start is None:
        return True
    return start == 0 and bool(scan_mcap(path).chunks)


def _chunk_entries(chunk_record) -> tuple[dict[int, list[tuple[int, int]]], list, list]:
    """Messages (channel -> (log time, offset)), schemas and channels inside one chunk."""
    from mcap.data_stream import ReadDataStream
    from mcap.records import Channel, Schema
    from mcap.stream_reader import get_chunk_data_stream

    stream, size = get_chunk_data_stream(chunk_record, validate_crc=True)
    data = stream.read(size)
    entries: dict[int, list[tuple[int, int]]] = {}
    schemas, channels = [], []
    offset = 0
    while offset + 9 <= size:
        opcode, length = struct.unpack_from("<BQ", data, offset)
        body = offset + 9
        if body + length > size:
            raise ValueError("record runs past the end of its chunk")
        if opcode == OP_MESSAGE:
            channel, _sequence, log_time = struct.unpack_from("<HIQ", data, body)
            entries.setdefault(channel, []).append((log_time, offset))
        elif opcode in (OP_SCHEMA, OP_CHANNEL):
            reader = ReadDataStream(io.BytesIO(data[body : body + length]))
            (schemas if opcode == OP_SCHEMA else channels).append(
                Schema.read(reader) if opcode == OP_SCHEMA else Channel.read(reader)
            )
        offset = body + length
    return entries, schemas, channels


def scan_mcap(path: str | Path, limit: int | None = None) -> McapScan:
    """Read the data section of ``path`` (up to byte ``limit``) and keep what is whole.

    Stops at DataEnd or the Footer, at a record cut short, and at a chunk that does
    not decompress or fails its CRC (nothing after a damaged chunk is trusted).
    """
    from mcap.data_stream import ReadDataStream
    from mcap.records import Chunk

    path = Path(path)
    size = path.stat().st_size if limit is None else min(limit, path.stat().st_size)
    chunks: list[_ChunkFacts] = []
    schemas: dict[int, object] = {}
    channels: dict[int, object] = {}
    with open(path, "rb") as stream:
        if stream.read(len(MCAP_MAGIC)) != MCAP_MAGIC:
            raise McapRepairError(f"{path}: not an MCAP file")
        offset = len(MCAP_MAGIC)
        data_end = 0
        while offset + 9 <= size:
            stream.seek(offset)
            opcode, length = struct.unpack("<BQ", stream.read(9))
            end = offset + 9 + length
            if opcode in (OP_DATA_END, OP_FOOTER) or end > size:
                break
            if opcode == OP_HEADER:
                data_end = end
            elif opcode == OP_CHUNK:
                try:
                    record = Chunk.read(ReadDataStream(io.BytesIO(stream.read(length))))
                    entries, chunk_schemas, chunk_channels = _chunk_entries(record)
                except Exception:  # noqa: BLE001 - a damaged chunk: the data ends before it
                    break
                chunks.append(_ChunkFacts(offset, end - offset, record.message_start_time, record.message_end_time,
                                          record.compression, len(record.data), record.uncompressed_size,
                                          entries=entries))  # fmt: skip
                schemas.update((s.id, s) for s in chunk_schemas)
                channels.update((c.id, c) for c in chunk_channels)
                data_end = end
            elif opcode == OP_MESSAGE_INDEX and chunks and length >= 6:
                (channel,) = struct.unpack("<H", stream.read(2))
                chunk = chunks[-1]
                chunk.index_offsets[channel] = offset
                chunk.index_length = end - (chunk.offset + chunk.length)
                data_end = end
            elif opcode in (OP_SCHEMA, OP_CHANNEL) and not chunks:
                data_end = end  # unchunked file start: kept, though only chunked data is indexed
            offset = end
    if data_end == 0:
        raise McapRepairError(f"{path}: no complete MCAP header")
    return McapScan(data_end, chunks, schemas, channels)


def _index_complete(chunk: _ChunkFacts) -> bool:
    return set(chunk.index_offsets) >= set(chunk.entries)


def summary_bytes(scan: McapScan, summary_start: int) -> tuple[bytes, int]:
    """The summary section for ``scan`` placed at ``summary_start``, and where its offsets begin."""
    from mcap.data_stream import RecordBuilder
    from mcap.records import ChunkIndex, Statistics, SummaryOffset

    builder = RecordBuilder()
    offsets = []

    def group(opcode: int, records) -> None:
        start = builder.count
        for record in records:
            record.write(builder)
        if builder.count > start:
            offsets.append(SummaryOffset(group_opcode=opcode, group_start=summary_start + start,
                                         group_length=builder.count - start))  # fmt: skip

    counts = scan.channel_counts()
    with_messages = [c for c in scan.chunks if c.entries]
    group(OP_SCHEMA, [scan.schemas[k] for k in sorted(scan.schemas)])
    group(OP_CHANNEL, [scan.channels[k] for k in sorted(scan.channels)])
    group(0x0B, [Statistics(
        message_count=scan.message_count, schema_count=len(scan.schemas), channel_count=len(scan.channels),
        attachment_count=0, metadata_count=0, chunk_count=len(scan.chunks),
        message_start_time=min((c.start_ns for c in with_messages), default=0),
        message_end_time=max((c.end_ns for c in with_messages), default=0),
        channel_message_counts=dict(sorted(counts.items())),
    )])  # fmt: skip
    group(0x08, [ChunkIndex(
        message_start_time=c.start_ns, message_end_time=c.end_ns, chunk_start_offset=c.offset,
        chunk_length=c.length, message_index_offsets=dict(c.index_offsets), message_index_length=c.index_length,
        compression=c.compression, compressed_size=c.compressed_size, uncompressed_size=c.uncompressed_size,
    ) for c in scan.chunks])  # fmt: skip
    offset_start = summary_start + builder.count
    for record in offsets:
        record.write(builder)
    return bytes(builder.end()), offset_start


def _message_indexes(chunk: _ChunkFacts, at: int) -> bytes:
    """MessageIndex records for ``chunk`` placed at file offset ``at`` (sets its index fields)."""
    from mcap.data_stream import RecordBuilder
    from mcap.records import MessageIndex

    builder = RecordBuilder()
    chunk.index_offsets = {}
    for channel in sorted(chunk.entries):
        chunk.index_offsets[channel] = at + builder.count
        MessageIndex(channel_id=channel, records=sorted(chunk.entries[channel])).write(builder)
    chunk.index_length = builder.count
    return bytes(builder.end())


def end_bytes(summary: bytes, summary_start: int, summary_offset_start: int) -> bytes:
    """DataEnd, the summary, a Footer pointing at it and the closing magic."""
    from mcap.data_stream import RecordBuilder
    from mcap.records import DataEnd, Footer

    head = RecordBuilder()
    DataEnd(data_section_crc=0).write(head)
    tail = RecordBuilder()
    Footer(summary_start=summary_start if summary else 0, summary_offset_start=summary_offset_start if summary else 0,
           summary_crc=0).write(tail)  # fmt: skip
    return bytes(head.end()) + summary + bytes(tail.end()) + MCAP_MAGIC


def repair_mcap(path: str | Path, limit: int | None = None, open_file: FileOpener = open) -> int:
    """Give ``path`` a summary rebuilt from its records, in place; returns the messages it keeps.

    ``limit``: treat the file as ending there (the bag writer passes the end of its
    last complete chunk). Cuts the file after its last good chunk, rewrites that
    chunk's message indexes if they are incomplete, then appends DataEnd, the
    summary and the Footer. If that fails for want of space, ends the file with a
    bare Footer (no summary) and raises the ``OSError``; if even that fails, the
    error propagates with the file cut back to its good data.
    """
    path = Path(path)
    scan = scan_mcap(path, limit)
    cut = scan.data_end
    extra = b""
    if scan.chunks and not _index_complete(scan.chunks[-1]):
        last = scan.chunks[-1]
        cut = last.offset + last.length
        extra = _message_indexes(last, cut)
    summary_start = cut + len(extra) + 13  # after DataEnd (opcode, length, uint32 crc)
    summary, offset_start = summary_bytes(scan, summary_start)
    try:
        _write_at(path, cut, extra + end_bytes(summary, summary_start, offset_start), open_file)
    except OSError:
        _write_at(path, cut, extra + end_bytes(b"", 0, 0), open_file)  # readable by scanning, at least
        raise
    return scan.message_count


def _write_at(path: Path, offset: int, data: bytes, open_file: FileOpener) -> None:
    """Cut ``path`` to ``offset`` and append ``data``; a failed write leaves the descriptor closed."""
    stream = open_file(path, "r+b")
    try:
        stream.truncate(offset)
        stream.seek(offset)
        stream.write(data)
        stream.flush()
    finally:
        try:
            stream.close()
        except OSError:
            pass  # the buffer it could not flush: the caller cuts the file again
