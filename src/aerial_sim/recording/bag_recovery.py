"""Recovering a bag that its writer could not close (a killed recorder, a full disk): :func:`recover`
(cut each MCAP file back to its last complete chunk, rebuild its summary and ``metadata.yaml``) and the
checks it rests on (:func:`mcap_is_complete`, :func:`last_record_end`). What ``aerial_sim record
--recover`` and the bag reader run; the writing side is :mod:`aerial_sim.recording.bag`."""

from __future__ import annotations

import os
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from aerial_sim.recording.bag import (BAG_FORMAT_VERSION, MAX_TIME_NS, MCAP_MAGIC, RESERVE_NAME, BagWriteError,
                                      FileOpener, describe_os_error)
from aerial_sim.recording.mcap_index import McapRepairError, needs_repair, repair_mcap


def last_record_end(path: Path) -> int:
    """Offset just past the last complete data-section record of an MCAP file (0: not even a header).

    Records are opcode (1 byte), length (uint64 LE), body; the scan stops at a
    record cut short, at DataEnd and at the Footer.
    """
    size = path.stat().st_size
    with open(path, "rb") as stream:
        if stream.read(len(MCAP_MAGIC)) != MCAP_MAGIC:
            return 0
        offset = end = len(MCAP_MAGIC)
        while offset + 9 <= size:
            stream.seek(offset)
            opcode, length = struct.unpack("<BQ", stream.read(9))
            if opcode in (0x0F, 0x02) or offset + 9 + length > size:  # DataEnd, Footer, or cut short
                break
            offset = end = offset + 9 + length
    return end if end > len(MCAP_MAGIC) else 0


def mcap_is_complete(path: str | Path) -> bool:
    """True when an MCAP file ends with the footer magic (it was closed properly)."""
    path = Path(path)
    magic = b"\x89MCAP0\r\n"
    size = path.stat().st_size
    if size < 2 * len(magic):
        return False
    with open(path, "rb") as stream:
        stream.seek(size - len(magic))
        return stream.read() == magic


def recover(bag_dir: str | Path, open_file: FileOpener = open) -> dict[str, int]:
    """Make a bag left by a killed recorder (or a full disk) readable again (like ``ros2 bag reindex``).

    Each MCAP file without a footer, or with a footer but no summary, is cut back, in
    place, to its last complete chunk and given a summary (index, statistics,
    schemas, channels) rebuilt from its records
    (:func:`aerial_sim.recording.mcap_index.repair_mcap`), which needs no more than
    the few kB of that summary in free disk (a stale reserve file is deleted first);
    ``metadata.yaml`` is then rebuilt from the files. Returns the messages kept per
    repaired file; complete files are left untouched. A file that cannot be written
    raises :class:`BagWriteError` with a one-line message naming it and the errno.
    """
    bag_dir = Path(bag_dir)
    try:
        (bag_dir / RESERVE_NAME).unlink(missing_ok=True)  # a killed writer's stale reserve: room for the repair
    except OSError:
        pass
    kept: dict[str, int] = {}
    for path in sorted(bag_dir.glob("*.mcap")):
        try:
            if not needs_repair(path):
                continue
        except McapRepairError:
            path.unlink()  # not even a header: no messages in it
            kept[path.name] = 0
            continue
        try:
            kept[path.name] = repair_mcap(path, open_file=open_file)
        except McapRepairError:
            path.unlink()
            kept[path.name] = 0
        except OSError as error:
            raise BagWriteError(f"cannot recover the bag: {describe_os_error(error, path)}") from None
    try:
        rebuild_metadata(bag_dir)
    except OSError as error:
        raise BagWriteError(f"cannot recover the bag: {describe_os_error(error, bag_dir)}") from None
    return kept


def _scan_mcap(path: Path) -> tuple[dict[int, Any], dict[int, Any], int, dict[int, int], int, int]:
    """Schemas, channels, message count, count per channel, first and last log time of an MCAP file.

    Read from the summary when the file has one, else by reading every record.
    """
    from mcap.reader import make_reader
    from mcap.records import Channel, Message, Schema
    from mcap.stream_reader import StreamReader

    with open(path, "rb") as stream:
        summary = make_reader(stream).get_summary()
    if summary is not None and summary.statistics is not None:
        stats = summary.statistics
        return (summary.schemas, summary.channels, stats.message_count, dict(stats.channel_message_counts),
                stats.message_start_time, stats.message_end_time)  # fmt: skip
    schemas, channels, counts = {}, {}, Counter()
    start, end = MAX_TIME_NS, 0
    with open(path, "rb") as stream:
        for record in StreamReader(stream, skip_magic=False).records:
            if isinstance(record, Schema):
                schemas[record.id] = record
            elif isinstance(record, Channel):
                channels[record.id] = record
            elif isinstance(record, Message):
                counts[record.channel_id] += 1
                start, end = min(start, record.log_time), max(end, record.log_time)
    return schemas, channels, sum(counts.values()), dict(counts), start, end


def rebuild_metadata(bag_dir: str | Path) -> None:
    """Rewrite ``metadata.yaml`` from the (complete) MCAP files in ``bag_dir``."""
    bag_dir = Path(bag_dir)
    topics: dict[str, dict[str, Any]] = {}
    files = []
    for path in sorted(bag_dir.glob("*.mcap")):
        schemas, channels, count, channel_counts, first_ns, last_ns = _scan_mcap(path)
        files.append(
            {
                "path": path.name,
                "starting_time": {"nanoseconds_since_epoch": first_ns if count else 0},
                "duration": {"nanoseconds": (last_ns - first_ns) if count else 0},
                "message_count": count,
            }
        )
        for channel_id, channel in channels.items():
            schema = schemas.get(channel.schema_id)
            entry = topics.setdefault(
                channel.topic,
                {
                    "topic_metadata": {
                        "name": channel.topic,
                        "type": schema.name if schema else "",
                        "serialization_format": channel.message_encoding,
                        "offered_qos_profiles": yaml.safe_load(channel.metadata.get("offered_qos_profiles", "[]"))
                        or [],
                        "type_description_hash": channel.metadata.get("topic_type_hash", ""),
                    },
                    "message_count": 0,
                },
            )
            entry["message_count"] += channel_counts.get(channel_id, 0)
    counted = [f for f in files if f["message_count"]]
    start = min((f["starting_time"]["nanoseconds_since_epoch"] for f in counted), default=0)
    end = max(
        (f["starting_time"]["nanoseconds_since_epoch"] + f["duration"]["nanoseconds"] for f in counted), default=0
    )
    metadata = {
        "version": BAG_FORMAT_VERSION,
        "storage_identifier": "mcap",
        "duration": {"nanoseconds": end - start},
        "starting_time": {"nanoseconds_since_epoch": start},
        "message_count": sum(f["message_count"] for f in files),
        "topics_with_message_count": list(topics.values()),
        "compression_format": "",
        "compression_mode": "",
        "relative_file_paths": [f["path"] for f in files],
        "files": files,
        "custom_data": {"writer": "aerial_sim", "recovered": "true"},
        "ros_distro": "kilted",
    }
    text = yaml.safe_dump({"rosbag2_bagfile_information": metadata}, sort_keys=False)
    temporary = bag_dir / "metadata.yaml.tmp"
    temporary.write_text(text)
    os.replace(temporary, bag_dir / "metadata.yaml")
