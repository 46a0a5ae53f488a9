"""Where two bags that should be identical first differ: one line naming the file, the record and the field.

Two lockstep runs of the same seed and inputs record byte-identical bags (:mod:`aerial_sim.recording.bag`,
deterministic files). When they do not, a hash of each file says only *that* they differ;
:func:`first_difference` says *where*: the first ``metadata.yaml`` field that differs (by its path in the
mapping), or the first MCAP record that differs, read record by record with the ``mcap`` library's
:class:`~mcap.stream_reader.StreamReader` (each chunk's own fields, its start and end log times and size,
then the schemas, channels and messages inside it, in file order; a message by its topic, sequence number,
log and publish time and the first differing byte of its data), with the record before it in each file
for context. The ``rosbag2`` metadata record's serialized YAML is compared field by field as well.

No rclpy here; reading the files is all it does.
"""

from __future__ import annotations

from itertools import zip_longest
from pathlib import Path
from typing import Any, Iterator

#: The longest value shown for a differing field (characters).
SHOWN = 120


def first_difference(first: str | Path, second: str | Path) -> str | None:
    """One line saying where the bag folders ``first`` and ``second`` first differ, or None where every
    file in them is the same, byte for byte."""
    first, second = Path(first), Path(second)
    names = [sorted(p.name for p in folder.iterdir() if p.is_file()) for folder in (first, second)]
    if names[0] != names[1]:
        return f"the bags hold different files: {names[0]} vs {names[1]}"
    for name in names[0]:
        a, b = (first / name).read_bytes(), (second / name).read_bytes()
        if a == b:
            continue
        if name.endswith(".yaml"):
            return f"{name}: {_yaml_difference(a, b)}"
        if name.endswith(".mcap"):
            return f"{name}: {_mcap_difference(a, b)}"
        return f"{name}: {_bytes_difference(a, b)}"
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else text[:SHOWN] + "..."


def _bytes_difference(a: bytes, b: bytes) -> str:
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"{len(a)} vs {len(b)} bytes, first differing at byte {at}: {a[at:at + 16].hex()} vs {b[at:at + 16].hex()}"


def _yaml_difference(a: bytes | str, b: bytes | str) -> str:
    import yaml

    try:
        loaded = [yaml.safe_load(text) for text in (a, b)]
    except yaml.YAMLError as error:
        return f"not YAML ({error}); {_bytes_difference(_encoded(a), _encoded(b))}"
    path = _value_difference(loaded[0], loaded[1], "")
    return path if path is not None else f"the same mapping, written differently: {_bytes_difference(_encoded(a), _encoded(b))}"


def _encoded(text: bytes | str) -> bytes:
    return text if isinstance(text, bytes) else text.encode()


def _value_difference(a: Any, b: Any, path: str) -> str | None:
    """The first path at which two loaded YAML values differ, with both values; None when equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            only = sorted(set(a) ^ set(b), key=str)
            return (f"{path or '/'}: keys {_shown(list(a))} vs {_shown(list(b))}"
                    + (f" (only in one: {_shown(only)})" if only else " (another order)"))
        for key in a:
            found = _value_difference(a[key], b[key], f"{path}/{key}")
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for index, (x, y) in enumerate(zip(a, b)):
            found = _value_difference(x, y, f"{path}[{index}]")
            if found is not None:
                return found
        if len(a) != len(b):
            return f"{path}: {len(a)} vs {len(b)} items"
        return None
    if a != b or type(a) is not type(b):
        return f"{path}: {_shown(a)} vs {_shown(b)}"
    return None


def _records(data: bytes) -> Iterator[tuple[str, Any]]:
    """(where, record) for every record of an MCAP file in file order, each chunk's records after it."""
    from io import BytesIO

    from mcap.records import Chunk
    from mcap.stream_reader import StreamReader, breakup_chunk

    chunk_number = 0
    for number, record in enumerate(StreamReader(BytesIO(data), emit_chunks=True).records):
        if isinstance(record, Chunk):
            yield f"record {number} (chunk {chunk_number})", record
            for inner, inside in enumerate(breakup_chunk(record)):
                yield f"chunk {chunk_number} record {inner}", inside
            chunk_number += 1
        else:
            yield f"record {number}", record


def _mcap_difference(a: bytes, b: bytes) -> str:
    from mcap.records import Channel, Chunk, Message, Metadata

    topics: list[dict[int, str]] = [{}, {}]
    previous: list[str] = ["the file's start", "the file's start"]
    try:
        for pair in zip_longest(_records(a), _records(b)):
            if pair[0] is None or pair[1] is None:
                longer, (where, record) = (1, pair[1]) if pair[0] is None else (0, pair[0])
                return (f"the {'first' if longer == 0 else 'second'} file goes on after the other ends: {where} "
                        f"{_described(record, topics[longer])}")
            (where, x), (where_b, y) = pair
            for side, record in ((0, x), (1, y)):
                if isinstance(record, Channel):
                    topics[side][record.id] = record.topic
            if isinstance(x, Chunk) and isinstance(y, Chunk):
                fields = ("message_start_time", "message_end_time", "uncompressed_size", "compression")
                differing = [f"{name} {getattr(x, name)} vs {getattr(y, name)}" for name in fields
                             if getattr(x, name) != getattr(y, name)]
                if differing:  # the records inside say why: compare those first
                    first_inside = _first_inside(x, y, topics)
                    return f"{where}: {', '.join(differing)}" + (f"; inside it, {first_inside}" if first_inside else "")
                continue  # its data is compared record by record below
            if x == y:
                previous = [f"{where} {_described(x, topics[0])}", f"{where_b} {_described(y, topics[1])}"]
                continue
            if isinstance(x, Metadata) and isinstance(y, Metadata) and x.name == y.name == "rosbag2":
                detail = _yaml_difference(x.metadata.get("serialized_metadata", ""),
                                          y.metadata.get("serialized_metadata", ""))
                return f"{where}: the rosbag2 metadata record differs at {detail}"
            detail = ""
            if isinstance(x, Message) and isinstance(y, Message):
                detail = "; " + _message_difference(x, y)
            return (f"{where} differs: {_described(x, topics[0])} vs {where_b} {_described(y, topics[1])}{detail} "
                    f"(after: {previous[0]} vs {previous[1]})")
    except Exception as error:  # noqa: BLE001 - a broken file is a difference too: say what the reader said
        return f"unreadable ({type(error).__name__}: {error}); {_bytes_difference(a, b)}"
    return f"every record is the same, the bytes not: {_bytes_difference(a, b)}"


def _first_inside(x, y, topics) -> str:
    from mcap.records import Channel, Message
    from mcap.stream_reader import breakup_chunk

    for index, pair in enumerate(zip_longest(breakup_chunk(x), breakup_chunk(y))):
        r, s = pair
        for side, record in ((0, r), (1, s)):
            if isinstance(record, Channel):
                topics[side][record.id] = record.topic
        if r != s:
            detail = _message_difference(r, s) if isinstance(r, Message) and isinstance(s, Message) else ""
            return (f"record {index}: {_described(r, topics[0])} vs {_described(s, topics[1])}"
                    + (f"; {detail}" if detail else ""))
    return ""


def _message_difference(x, y) -> str:
    fields = ("channel_id", "sequence", "log_time", "publish_time")
    differing = [f"{name} {getattr(x, name)} vs {getattr(y, name)}" for name in fields if getattr(x, name) != getattr(y, name)]
    if x.data != y.data:
        differing.append(f"data {_bytes_difference(bytes(x.data), bytes(y.data))}")
    return ", ".join(differing)


def _described(record, topics: dict[int, str]) -> str:
    from mcap.records import Channel, Chunk, Message, Metadata, Schema

    if record is None:
        return "(nothing: the file ended)"
    if isinstance(record, Message):
        return (f"Message {topics.get(record.channel_id, f'channel {record.channel_id}')} seq {record.sequence} "
                f"log {record.log_time} publish {record.publish_time} ({len(record.data)} bytes)")
    if isinstance(record, Chunk):
        return (f"Chunk log {record.message_start_time}-{record.message_end_time} "
                f"({record.uncompressed_size} bytes uncompressed)")
    if isinstance(record, Channel):
        return f"Channel {record.id} {record.topic}"
    if isinstance(record, Schema):
        return f"Schema {record.id} {record.name}"
    if isinstance(record, Metadata):
        return f"Metadata {record.name}"
    return _shown(record)
