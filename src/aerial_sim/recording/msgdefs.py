"""Message definitions (schema text and type hash) for ROS 2 types, without a ROS install.

A rosbag2 MCAP file stores, for each message type, the ``ros2msg`` schema: the
type's ``.msg`` text followed by the text of every type it uses, each after a
line of 80 ``=`` and a ``MSG: pkg/Type`` line (the layout rosbag2's
``LocalMessageDefinitionSource`` writes and Foxglove, ``ros2 bag`` and the
``rosbags`` library parse). The type hash (``RIHS01_...``, REP-2011) goes in the
channel metadata and in ``metadata.yaml``.

Where the text comes from:

1. the interface package's installed ``share/<pkg>/msg/<Type>.msg`` and
   ``<Type>.json`` (type hashes), found on ``AMENT_PREFIX_PATH`` or under the
   Python prefix. The ROS 2 interface wheels from PyPI install exactly these
   files, like a ROS install does, so the bag carries the definitions the
   publishers were built from, comments included;
2. otherwise the ``rosbags`` library's bundled ROS 2 Kilted type store (the
   type's definition regenerated from rosbags' own copy of the interfaces).
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

SEPARATOR = "=" * 80
PRIMITIVES = frozenset(
    "bool byte char float32 float64 int8 uint8 int16 uint16 int32 uint32 int64 uint64 string wstring".split()
)


class UnknownMessageType(LookupError):
    """No definition for a message type was found (neither installed files nor rosbags' store)."""


@dataclass(frozen=True)
class MessageDefinition:
    """A message type's schema for a bag: ``ros2msg`` text and its RIHS01 hash."""

    msgtype: str  # 'sensor_msgs/msg/Image'
    text: str
    type_hash: str
    encoding: str = "ros2msg"


def split_type(msgtype: str) -> tuple[str, str, str]:
    """``'sensor_msgs/msg/Image'`` (or ``'sensor_msgs/Image'``) -> ``('sensor_msgs', 'msg', 'Image')``."""
    parts = msgtype.split("/")
    if len(parts) == 2:
        return parts[0], "msg", parts[1]
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    raise UnknownMessageType(f"not a ROS 2 message type name: {msgtype!r}")


def share_prefixes() -> list[Path]:
    """Install prefixes to search for ``share/<pkg>/msg`` files, most specific first."""
    prefixes = [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    prefixes.append(Path(sys.prefix))
    return prefixes


def _interface_file(pkg: str, kind: str, name: str, suffix: str) -> Path | None:
    for prefix in share_prefixes():
        candidate = prefix / "share" / pkg / kind / f"{name}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def dependencies(msg_text: str, package: str) -> list[str]:
    """Message types used by the fields of ``msg_text`` (``pkg/msg/Type``), in order of first use."""
    found: list[str] = []
    for line in msg_text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        type_token = line.split()[0]  # constants ('uint8 FOO=1') always have primitive types
        base = re.sub(r"\[.*\]$", "", type_token).split("<=")[0]
        if base in PRIMITIVES:
            continue
        if "/" in base:
            pkg, _, name = split_type(base)
        else:
            pkg, name = ("std_msgs", "Header") if base == "Header" else (package, base)
        full = f"{pkg}/msg/{name}"
        if full not in found:
            found.append(full)
    return found


def _from_installed_files(msgtype: str) -> MessageDefinition | None:
    pkg, kind, name = split_type(msgtype)
    main = _interface_file(pkg, kind, name, ".msg")
    if main is None:
        return None
    texts: dict[str, str] = {}
    pending = [f"{pkg}/{kind}/{name}"]
    while pending:
        current = pending.pop(0)
        if current in texts:
            continue
        c_pkg, c_kind, c_name = split_type(current)
        path = _interface_file(c_pkg, c_kind, c_name, ".msg")
        if path is None:
            return None  # an incomplete tree: let the fallback provide a consistent one
        texts[current] = path.read_text()
        pending += [dep for dep in dependencies(texts[current], c_pkg) if dep not in texts]
    root = f"{pkg}/{kind}/{name}"
    parts = [texts.pop(root).rstrip("\n")]
    for dep, text in texts.items():
        d_pkg, _, d_name = split_type(dep)
        parts.append(f"{SEPARATOR}\nMSG: {d_pkg}/{d_name}\n{text.rstrip(chr(10))}")
    type_hash = _installed_hash(pkg, kind, name, root)
    if type_hash is None:
        type_hash = _rosbags_hash(root) or ""
    return MessageDefinition(root, "\n".join(parts) + "\n", type_hash)


def _installed_hash(pkg: str, kind: str, name: str, full: str) -> str | None:
    path = _interface_file(pkg, kind, name, ".json")
    if path is None:
        return None
    try:
        hashes = json.loads(path.read_text()).get("type_hashes", [])
    except (OSError, ValueError):
        return None
    return next((h["hash_string"] for h in hashes if h.get("type_name") == full), None)


@functools.lru_cache(maxsize=1)
def _rosbags_store():
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_KILTED)


def _rosbags_hash(msgtype: str) -> str | None:
    store = _rosbags_store()
    return store.hash_rihs01(msgtype) if msgtype in store.fielddefs else None


@functools.lru_cache(maxsize=None)
def message_definition(msgtype: str) -> MessageDefinition:
    """The ``ros2msg`` schema and type hash of ``msgtype`` (see the module docstring for sources)."""
    pkg, kind, name = split_type(msgtype)
    full = f"{pkg}/{kind}/{name}"
    installed = _from_installed_files(full)
    if installed is not None:
        return installed
    store = _rosbags_store()
    if full not in store.fielddefs:
        raise UnknownMessageType(f"no definition found for {full} (not installed, not in rosbags' Kilted store)")
    text, _ = store.generate_msgdef(full, ros_version=2)
    return MessageDefinition(full, text, store.hash_rihs01(full))
