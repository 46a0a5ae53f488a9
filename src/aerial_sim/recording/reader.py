"""Open a recorded bag for reading with the ``rosbags`` library (no ROS install needed).

``rosbags`` reads rosbag2 directories (``metadata.yaml`` + MCAP files) and
deserializes CDR with the message definitions stored in the bag, so reading
back our own bags with it checks those definitions too.
"""

from __future__ import annotations

from pathlib import Path

from aerial_sim.recording.bag_recovery import recover
from aerial_sim.recording.mcap_index import needs_repair


class BagReadError(OSError):
    """The path is not a readable rosbag2 bag."""


def find_bag(path: str | Path) -> Path:
    """The bag directory at ``path``: the path itself, or a ``bag/`` folder inside a run folder."""
    path = Path(path)
    for candidate in (path, path / "bag"):
        if (candidate / "metadata.yaml").is_file():
            return candidate
    raise BagReadError(f"{path}: no rosbag2 bag here (no metadata.yaml)")


def open_bag(path: str | Path):
    """An opened ``rosbags.highlevel.AnyReader`` over the bag at ``path`` (use it as a context manager).

    A bag left by a killed recorder or a full disk (an MCAP file without its footer, or
    without its index) is first recovered in place with :func:`aerial_sim.recording.bag_recovery.recover`.
    """
    from rosbags.highlevel import AnyReader

    bag = find_bag(path)
    if any(needs_repair(p) for p in bag.glob("*.mcap")):
        recover(bag)
    return AnyReader([bag])


def stamp_ns(message, fallback_ns: int) -> int:
    """A message's ``header.stamp`` in nanoseconds, or ``fallback_ns`` when it has no header."""
    header = getattr(message, "header", None)
    if header is None:
        return int(fallback_ns)
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


def read_once(path: str | Path, consumers) -> None:
    """Read the bag at ``path`` once and hand every message to each of ``consumers``.

    A consumer has ``begin(reader)`` (the connections are known), ``message(connection,
    t_ns, raw, decode)`` (``decode()`` deserializes the message; the first call per message
    does the work, later consumers get the same object) and nothing else is asked of it.
    One pass instead of one per consumer: opening a bag parses its ``metadata.yaml`` and
    MCAP index, and iterating decompresses every chunk, each a sizeable part of a short
    run's post-processing.
    """
    with open_bag(path) as reader:
        for consumer in consumers:
            consumer.begin(reader)
        deserialize = reader.deserialize
        for connection, t_ns, raw in reader.messages():
            decoded = []

            def decode(raw=raw, msgtype=connection.msgtype, decoded=decoded):
                if not decoded:
                    decoded.append(deserialize(raw, msgtype))
                return decoded[0]

            for consumer in consumers:
                consumer.message(connection, t_ns, raw, decode)
