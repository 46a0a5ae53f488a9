"""CDR bytes of a typed message with its padding zeroed, for messages aerial_sim has no encoder of its
own for (:mod:`aerial_sim.cdr` writes the high-rate ones that way).

rclpy's serializer leaves the alignment bytes as its buffer held them: a ``visualization_msgs/MarkerArray``
of the same markers serialized in two processes differs in the bytes after each ``Marker.frame_locked``
and ``ns`` (measured: 29 of 30 serializations differed from the zero-padded bytes). Published so, two
identical lockstep runs' bags differ there (issue 32). Re-serialized by rosbags (the project's bag reader,
zero padding), the bytes follow from the message alone.
"""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def _typestore():
    from rosbags.typesys import Stores, get_typestore  # noqa: PLC0415 - only for the few messages sent this way

    return get_typestore(Stores.ROS2_KILTED)


def zero_padded_bytes(message) -> bytes:
    """``message`` (an rclpy message) as little-endian CDR bytes whose padding bytes are zero."""
    from rclpy.serialization import serialize_message  # noqa: PLC0415

    kind = type(message)
    type_name = f"{kind.__module__.split('.')[0]}/msg/{kind.__name__}"
    store = _typestore()
    return bytes(store.serialize_cdr(store.deserialize_cdr(serialize_message(message), type_name), type_name))
