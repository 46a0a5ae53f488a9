"""Filling and checking message fields that are not stamps or frames: covariances, finite values."""

from __future__ import annotations

import math


def diagonal_covariance(variance: float) -> tuple[float, ...]:
    """A row-major 3x3 covariance with ``variance`` on its diagonal (sensor_msgs' ``*_covariance``)."""
    return (variance, 0.0, 0.0, 0.0, variance, 0.0, 0.0, 0.0, variance)


def is_finite_sequence(values) -> bool:
    """True when every element of ``values`` is a finite float."""
    return all(map(math.isfinite, values))
