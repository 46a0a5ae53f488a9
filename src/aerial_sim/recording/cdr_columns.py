"""A topic's CDR messages read column by column with NumPy: every message of the topic at once.

A recorded topic's messages usually share one byte layout: the same frame ids, the same array
lengths, so every number sits at the same offset in every payload. :func:`topic_columns` finds
those offsets once, from the first payload and the message definition the bag stores
(the ``rosbags`` type store's field lists), by the OMG CDR rules (XCDR1, as
:mod:`aerial_sim.cdr` describes them: primitives aligned to their size counted after the
4-byte encapsulation header, a string as a uint32 length with its NUL then its bytes, a sequence
as a uint32 count then its elements, aligned once before the first), and reads each numeric
column for all the messages with one ``np.frombuffer`` over the payloads joined.

The columns and their values are those of :func:`aerial_sim.recording.export.flatten_message` on the
``rosbags``-deserialized message (nested fields ``a.b``, arrays up to
:data:`~aerial_sim.recording.export.MAX_ARRAY_COLUMNS` as ``a.0`` ..., then each struct's constants and
its ``__msgtype__``, which ``rosbags`` message classes hold as fields).
Nothing is assumed: every payload must have the first's length, the first's encapsulation, and the
first's bytes wherever the layout depends on them (string lengths and contents, sequence counts);
the first and the last message must flatten, through ``rosbags``, to the same text. Anything else
(another layout in one message, a type this does not read, a mismatch) returns None and the caller
decodes message by message. A smoke-sweep run's export (19 topics, 21,000 messages) went from
about 1.7 CPU s to a few tenths (``tools/dev.sh bench batch_cpu``).
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Sequence

import numpy as np

#: ROS primitive types -> NumPy type code (no byte order) and size.
PRIMITIVES = {
    "bool": "?", "byte": "u1", "char": "u1", "int8": "i1", "uint8": "u1", "int16": "i2", "uint16": "u2",
    "int32": "i4", "uint32": "u4", "int64": "i8", "uint64": "u8", "float32": "f4", "float64": "f8",
}  # fmt: skip
#: ``rosbags`` field node types (rosbags.typesys.store.Nodetype).
BASE, NAME, ARRAY, SEQUENCE = 1, 2, 3, 4
ENCAPSULATION = 4


class _Unreadable(ValueError):
    """The first payload does not fit the layout walked from the definition (or the definition is not read here)."""


class _Layout:
    """Columns (key, numeric (offset, type code) or a constant) and the layout-fixing byte ranges of one payload."""

    def __init__(self, fielddefs: dict, data: bytes, max_columns: int):
        self.fielddefs, self.data, self.max_columns = fielddefs, data, max_columns
        self.order = "<" if data[1] & 1 else ">"
        self.pos = ENCAPSULATION
        self.columns: list[tuple[str, Any, bool]] = []  # (key, (offset, code) | constant, numeric)
        self.fixed: list[tuple[int, int]] = [(1, 2)]  # the byte order

    def align(self, size: int) -> None:
        self.pos = ENCAPSULATION + -(-(self.pos - ENCAPSULATION) // size) * size

    def count(self) -> int:
        self.align(4)
        if self.pos + 4 > len(self.data):
            raise _Unreadable("count past the end")
        (value,) = struct.unpack_from(self.order + "I", self.data, self.pos)
        self.fixed.append((self.pos, self.pos + 4))
        self.pos += 4
        return value

    def string(self) -> str:
        length = self.count()
        end = self.pos + length
        if length == 0 or end > len(self.data):
            raise _Unreadable("string past the end")
        text = self.data[self.pos : end - 1].decode()
        self.fixed[-1] = (self.fixed[-1][0], end)  # the length and the bytes
        self.pos = end
        return text

    def primitive(self, name: str, key: str | None) -> None:
        code = PRIMITIVES[name]
        size = int(code[1:]) if code != "?" else 1
        self.align(size)
        if self.pos + size > len(self.data):
            raise _Unreadable("field past the end")
        if key is not None:
            self.columns.append((key, (self.pos, code), True))
        self.pos += size

    def struct(self, typename: str, prefix: str | None) -> None:
        if typename not in self.fielddefs:
            raise _Unreadable(f"no definition of {typename}")
        for name, (nodetype, detail) in self.fielddefs[typename][1]:
            key = None if prefix is None else prefix + name
            if nodetype == BASE:
                self.base(detail[0], key)
            elif nodetype == NAME:
                self.struct(detail, None if key is None else key + ".")
            elif nodetype in (ARRAY, SEQUENCE):
                element, length = detail
                count = length if nodetype == ARRAY else self.count()
                self.elements(element, count, key if key is not None and count <= self.max_columns else None)
            else:
                raise _Unreadable(f"field kind {nodetype}")
        if prefix is not None:  # a rosbags message class holds its constants, then its type name, as fields too
            for name, _, value in self.fielddefs[typename][0]:
                self.columns.append((prefix + name, value, False))
            self.columns.append((prefix + "__msgtype__", typename, False))

    def base(self, name: str, key: str | None) -> None:
        if name == "string":
            text = self.string()
            if key is not None:
                self.columns.append((key, text, False))
        elif name in PRIMITIVES:
            self.primitive(name, key)
        else:
            raise _Unreadable(f"type {name}")  # wstring, bounded types the walk does not know

    def elements(self, element: tuple, count: int, key: str | None) -> None:
        nodetype, detail = element
        if nodetype == BASE and detail[0] in PRIMITIVES:
            code = PRIMITIVES[detail[0]]
            size = int(code[1:]) if code != "?" else 1
            if count:
                self.align(size)
            for index in range(count):
                if key is not None:
                    self.columns.append((f"{key}.{index}", (self.pos + index * size, code), True))
            self.pos += count * size
            if self.pos > len(self.data):
                raise _Unreadable("array past the end")
        elif nodetype == BASE:
            for index in range(count):
                self.base(detail[0], None if key is None else f"{key}.{index}")
        elif nodetype == NAME:
            for index in range(count):
                self.struct(detail, None if key is None else f"{key}.{index}.")
        else:
            raise _Unreadable("array of arrays")


def topic_columns(fielddefs: dict, msgtype: str, payloads: Sequence[bytes], max_columns: int,
                  flatten: Callable[[bytes], dict[str, Any]]) -> tuple[list[str], list[list | tuple]] | None:
    """The flattened columns of every payload: (keys, one list of values per key), or None (module doc).

    ``fielddefs``: a ``rosbags`` type store's ``fielddefs`` holding ``msgtype``; ``flatten(payload)``: the
    reference (``rosbags`` deserialization, then ``flatten_message``), asked for the first and last payloads.
    """
    if not payloads:
        return None
    first = payloads[0]
    if len(first) < ENCAPSULATION or first[0] != 0 or first[1] not in (0, 1):
        return None
    try:
        layout = _Layout(fielddefs, first, max_columns)
        layout.struct(msgtype, "")
    except (_Unreadable, UnicodeDecodeError, struct.error, KeyError, TypeError, ValueError):
        return None
    size = len(first)
    if any(len(p) != size for p in payloads):
        return None
    blob = b"".join(payloads)
    rows = np.frombuffer(blob, np.uint8).reshape(len(payloads), size)
    fixed = np.concatenate([np.arange(a, b) for a, b in layout.fixed]) if layout.fixed else np.zeros(0, int)
    if len(payloads) > 1 and not (rows[1:, fixed] == rows[0, fixed]).all():
        return None
    numeric = [(key, spec) for key, spec, is_number in layout.columns if is_number]
    values: dict[str, list] = {}
    if numeric:
        dtype = np.dtype({"names": [f"c{i}" for i in range(len(numeric))],
                          "formats": [layout.order + code if code not in ("?", "u1", "i1") else code
                                      for _, (_, code) in numeric],
                          "offsets": [offset for _, (offset, _) in numeric], "itemsize": size})
        table = np.frombuffer(blob, dtype)
        for index, (key, _) in enumerate(numeric):
            values[key] = table[f"c{index}"]
    count = len(payloads)
    keys = [key for key, _, _ in layout.columns]
    columns = [values[key] if is_number else [spec] * count for key, spec, is_number in layout.columns]
    for row in {0, count - 1}:
        reference = flatten(payloads[row])
        if list(reference) != keys or [str(v) for v in reference.values()] != [str(c[row].item() if isinstance(c, np.ndarray) else c[row]) for c in columns]:
            return None
    return keys, columns


def column_text(column: np.ndarray | list) -> list[str]:
    """A column of :func:`topic_columns` as text, as the ``csv`` module writes each value (``repr`` of a float,
    ``str`` of the rest); where few distinct values repeat (a covariance's zeros) each is written once (told
    apart by its bits: -0.0 stays -0.0)."""
    if isinstance(column, list):
        return [value if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)
                for value in column]
    if column.dtype.kind != "f":
        return list(map(str, column.tolist()))
    if len(column) >= 8:
        unique, first, inverse = np.unique(column.view(f"u{column.itemsize}"), return_index=True, return_inverse=True)
        if len(unique) * 4 <= len(column):
            texts = list(map(repr, column[first].tolist()))
            return [texts[i] for i in inverse.tolist()]
    return list(map(repr, column.tolist()))



_STAMPS = {order: np.dtype({"names": ["sec", "nanosec"], "formats": [order + "i4", order + "u4"], "offsets": [4, 8],
                            "itemsize": 12}) for order in "<>"}


def header_stamps_ns(payloads: Sequence[bytes]) -> list[int] | None:
    """:func:`aerial_sim.cdr.decode.cdr_header_stamp_ns` of every payload at once (the low bit of the encapsulation's
    second byte giving each one's byte order, as there); None when one is shorter than a stamp."""
    if any(len(p) < ENCAPSULATION + 8 for p in payloads):
        return None
    heads = b"".join(p[: ENCAPSULATION + 8] for p in payloads)
    little = (np.frombuffer(heads, np.uint8)[1::12] & 1).astype(bool)
    stamps = []
    for order, chosen in (("<", little), (">", ~little)):
        table = np.frombuffer(heads, _STAMPS[order])
        stamps.append(table["sec"].astype(np.int64) * 1_000_000_000 + table["nanosec"].astype(np.int64))
    return np.where(little, stamps[0], stamps[1]).tolist()


__all__ = ["column_text", "header_stamps_ns", "topic_columns", "PRIMITIVES"]
