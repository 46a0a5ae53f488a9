"""Simulation time and ``builtin_interfaces/Time`` stamps, both ways."""

from __future__ import annotations

from builtin_interfaces.msg import Time


def stamp_from_fields(fields) -> Time:
    """``builtin_interfaces/Time`` of decoded fields (:mod:`aerial_sim.cdr`), to stamp an output with."""
    return Time(sec=fields.stamp_sec, nanosec=fields.stamp_nanosec)


def to_stamp(seconds: float) -> Time:
    """Simulation time in seconds -> ``builtin_interfaces/Time``."""
    nanoseconds = to_stamp_ns(seconds)
    return Time(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def to_stamp_ns(seconds: float) -> int:
    """Simulation time in seconds -> the stamp in whole nanoseconds (what :func:`to_stamp` holds)."""
    return int(round(seconds * 1e9))


def from_stamp(stamp: Time) -> float:
    """``builtin_interfaces/Time`` -> seconds."""
    return stamp.sec + stamp.nanosec * 1e-9
