"""Random ROS messages of any type, for attacking a running graph (test_hardening.py).

:func:`random_message` walks a message class's fields (``get_fields_and_field_types``)
and fills each one from a seeded generator: numbers from a pool of hostile values (NaN,
±inf, 0, ±1e300, huge and tiny) or plain random ones, sequences of random length (also
empty and oversized), strings from frame names and garbage, nested messages recursively.
Every value is one the message type accepts, so the message can be published; what the
subscriber makes of it is the thing under test. The same seed gives the same messages.
"""

from __future__ import annotations

import importlib
import math
import random
import re

HOSTILE_FLOATS = (math.nan, math.inf, -math.inf, 0.0, -0.0, 1e300, -1e300, 1e9, -1e9, 1e-300, 1.0, -1.0, 0.5)
HOSTILE_STRINGS = ("", "map", "drone1/base_link", "base_link", "drone1/camera_depth_optical_frame", "no such frame",
                   "bad name!", "x" * 300, "rgb8", "32FC1", "16UC1", "mono8", "bgra8")
INTEGER_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "uint8": (0, 2**8 - 1),
    "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint64": (0, 2**64 - 1),
}
#: Longest random sequence; byte sequences (image data) can be longer.
MAX_SEQUENCE = 40
MAX_BYTES = 5000
_SEQUENCE = re.compile(r"^sequence<(.+?)(?:, *(\d+))?>$")
_ARRAY = re.compile(r"^(.+)\[(\d+)\]$")


def random_message(message_type, rng: random.Random, depth: int = 0):
    """A message of ``message_type`` with every field drawn at random (see the module doc)."""
    message = message_type()
    for name, field_type in message_type.get_fields_and_field_types().items():
        setattr(message, name, _value(field_type, rng, depth))
    return message


def _value(field_type: str, rng: random.Random, depth: int):
    sequence = _SEQUENCE.match(field_type)
    if sequence:
        element, bound = sequence.group(1), sequence.group(2)
        limit = MAX_BYTES if element in ("uint8", "byte", "char", "octet") else MAX_SEQUENCE
        if bound:
            limit = min(limit, int(bound))
        length = rng.choice((0, 1, rng.randint(0, limit), limit))
        return _elements(element, length, rng, depth)
    array = _ARRAY.match(field_type)
    if array:
        return _elements(array.group(1), int(array.group(2)), rng, depth)
    return _scalar(field_type, rng, depth)


def _elements(element: str, length: int, rng: random.Random, depth: int):
    if element == "uint8":
        return rng.randbytes(length)
    return [_scalar(element, rng, depth) for _ in range(length)]


def _scalar(field_type: str, rng: random.Random, depth: int):
    if field_type in ("double", "float"):
        value = rng.choice(HOSTILE_FLOATS) if rng.random() < 0.5 else rng.uniform(-100.0, 100.0)
        return value if field_type == "double" or not math.isfinite(value) or abs(value) < 3e38 else math.inf
    if field_type in INTEGER_RANGES:
        low, high = INTEGER_RANGES[field_type]
        return rng.choice((low, high, 0, 1, rng.randint(low, high)))
    if field_type in ("octet", "byte"):
        return bytes([rng.getrandbits(8)])
    if field_type == "char":
        return chr(rng.randint(0, 127))
    if field_type == "boolean":
        return rng.random() < 0.5
    if field_type.startswith(("string", "wstring")):
        return rng.choice(HOSTILE_STRINGS)
    if depth > 6:
        return _message_class(field_type)()
    return random_message(_message_class(field_type), rng, depth + 1)


def _message_class(field_type: str):
    """``geometry_msgs/Vector3`` -> the class."""
    package, name = field_type.split("/")[0], field_type.split("/")[-1]
    return getattr(importlib.import_module(f"{package}.msg"), name)


def message_class(type_name: str):
    """``sensor_msgs/msg/Imu`` (a graph type name) -> the class."""
    package, _, name = type_name.split("/")
    return getattr(importlib.import_module(f"{package}.msg"), name)


def mutated_message(message, rng: random.Random):
    """A copy of a real ``message`` with one numeric field (or array element) set to a hostile value.

    Real messages pass a subscriber's first checks, so a single bad value reaches deeper code
    than a fully random message does.
    """
    copy = type(message)()
    _copy_fields(message, copy)
    leaves = list(_numeric_leaves(copy))
    if leaves:
        owner, name, index = rng.choice(leaves)
        value = rng.choice(HOSTILE_FLOATS)
        if index is None:
            setattr(owner, name, value)
        else:
            getattr(owner, name)[index] = value
    return copy


def _copy_fields(source, target) -> None:
    for name, field_type in type(source).get_fields_and_field_types().items():
        value = getattr(source, name)
        if hasattr(value, "get_fields_and_field_types"):
            nested = type(value)()
            _copy_fields(value, nested)
            setattr(target, name, nested)
        elif isinstance(value, list) and value and hasattr(value[0], "get_fields_and_field_types"):
            setattr(target, name, [type(v)() for v in value])
            for original, fresh in zip(value, getattr(target, name)):
                _copy_fields(original, fresh)
        else:
            setattr(target, name, value.copy() if hasattr(value, "copy") else value)


def _numeric_leaves(message):
    """(owner, field name, index or None) of every float field and float-array element."""
    for name, field_type in type(message).get_fields_and_field_types().items():
        value = getattr(message, name)
        if field_type in ("double", "float"):
            yield message, name, None
        elif field_type.startswith(("double[", "sequence<double")) and len(value) > 0:
            for index in range(min(len(value), 64)):
                yield message, name, index
        elif hasattr(value, "get_fields_and_field_types"):
            yield from _numeric_leaves(value)
