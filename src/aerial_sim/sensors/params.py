"""What every sensor model's params and node share: the rate and seed checks, the datasheet presets
(``config/sensors/<preset>.yaml``) and the ROS-side :class:`SensorNodeOptions`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from aerial_sim.config import load_yaml_params, require, require_positive
from aerial_sim.paths import resolve_config

P = TypeVar("P")


def check_rate_and_seed(params: Any) -> None:
    """Shared ``__post_init__`` checks: ``rate_hz`` > 0 and ``seed`` >= 0."""
    require_positive(params, "rate_hz")
    require(isinstance(params.seed, int) and params.seed >= 0, f"seed must be an integer >= 0, got {params.seed!r}")


def check_vector_non_negative(params: Any, *names: str) -> None:
    """Each named tuple field holds finite numbers >= 0."""
    for name in names:
        values = getattr(params, name)
        require(all(math.isfinite(v) and v >= 0 for v in values), f"{name} must hold numbers >= 0, got {values!r}")


@dataclass(frozen=True)
class SensorNodeOptions:
    """ROS-side options every sensor node has besides its model's params.

    ``preset``: a datasheet preset, ``config/sensors/<preset>.yaml`` or a path,
    whose values become the defaults of the model's parameters ('' = dataclass
    defaults). ``frame_id``: the sensor frame, prefixed with the node's namespace
    when relative. ``lockstep``: reliable QoS on every stream (no lost samples).
    ``interpolation``: how truth is resampled to the sensor's instants.
    """

    preset: str = ""
    frame_id: str = ""
    lockstep: bool = False
    interpolation: Literal["linear", "hold"] = "linear"
    #: An AirSim settings.json whose sensor noise keys of this vehicle's sensor of this kind override the
    #: preset (a path, ``auto`` = AirSim's search order, or ``none``; aerial_sim/airsim/sensor_noise.py).
    airsim_settings: str = "none"


def load_preset(cls: type[P], preset: str) -> P:
    """Load params ``cls`` from ``config/sensors/<preset>.yaml`` (or a path); '' gives the defaults."""
    if not preset:
        return cls()
    return load_yaml_params(cls, resolve_config(preset, "sensors"))
