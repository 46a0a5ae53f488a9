"""A vehicle added to a running simulation (AirSim's ``simAddVehicle``): its name, type and start pose, checked.

The physics node's ``/physics/add_vehicle`` service and the AirSim server both build a
:class:`VehicleSpawn`; a request that cannot be flown is a :class:`~aerial_sim.config.ParamsError`
naming what was wrong (a name that is no ROS name, a type that is no vehicle config, a pose that is
not finite or outside the world), never a vehicle half added.

On the wire (``/physics/add_vehicle`` is ``rcl_interfaces/srv/SetParametersAtomically``, a standard
type that carries typed named values and answers ``successful`` with a ``reason``) the request is the
parameters ``name`` (string), ``type`` (string, a config under ``config/vehicles/``; default
``quad_x``), ``position`` (3 doubles, ``map`` ENU m; default the origin) and ``yaw`` (double, rad,
ENU; default 0).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from aerial_sim.config import ParamsError, require
from aerial_sim.paths import config_path
from aerial_sim.vehicles.fleet import NAME_PATTERN

#: A vehicle type is the bare name of a config under config/vehicles/ (no path: the request may come
#: from a network client, which must not make the simulation read any file it names).
TYPE_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")
#: The request's fields (anything else is an error naming it).
FIELDS = ("name", "type", "position", "yaw")


def vehicle_types() -> list[str]:
    """The vehicle configs a spawn may name (``config/vehicles/*.yaml``)."""
    return sorted(p.stem for p in Path(config_path("vehicles")).glob("*.yaml"))


@dataclass(frozen=True)
class VehicleSpawn:
    """One vehicle to add: ROS name, vehicle config, centre-of-mass position (``map`` ENU, m) and heading
    (ENU yaw, rad). It starts level and at rest, motors off; below the ground it starts on it."""

    name: str
    vehicle_type: str = "quad_x"
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    yaw: float = 0.0
    #: The farthest a vehicle may start from the origin (the physics node's ``max_position_m``).
    max_position_m: float = 100_000.0

    def __post_init__(self):
        require(isinstance(self.name, str) and bool(NAME_PATTERN.match(self.name)),
                f"name {self.name!r} is not a valid ROS name (a letter, then letters, digits or _)")
        require(isinstance(self.vehicle_type, str) and bool(TYPE_PATTERN.match(self.vehicle_type))
                and self.vehicle_type in vehicle_types(),
                f"type {self.vehicle_type!r} is no vehicle config (have: {', '.join(vehicle_types())})")
        require(len(self.position) == 3 and all(_finite(v) for v in self.position),
                f"position must be 3 finite numbers (map ENU, m), got {list(self.position)!r}")
        require(_finite(self.yaw), f"yaw must be a finite number (rad), got {self.yaw!r}")
        require(math.dist(self.position, (0.0, 0.0, 0.0)) <= self.max_position_m,
                f"position {list(self.position)} is farther than {self.max_position_m:g} m from the origin")

    @classmethod
    def from_values(cls, values: Mapping[str, Any], max_position_m: float = 100_000.0) -> "VehicleSpawn":
        """From named values (the service's parameters); an unknown or missing field is an error naming it."""
        unknown = sorted(set(values) - set(FIELDS))
        require(not unknown, f"unknown field(s) {', '.join(unknown)} (a spawn has {', '.join(FIELDS)})")
        require("name" in values, "name is missing")
        position = values.get("position", (0.0, 0.0, 0.0))
        require(isinstance(position, (list, tuple)), f"position must be 3 numbers, got {position!r}")
        try:
            return cls(name=values["name"], vehicle_type=values.get("type", "quad_x") or "quad_x",
                       position=tuple(float(v) for v in position), yaw=float(values.get("yaw", 0.0)),
                       max_position_m=max_position_m)
        except (TypeError, ValueError) as error:
            if isinstance(error, ParamsError):
                raise
            raise ParamsError(f"position and yaw must be numbers: {error}") from None

    def values(self) -> dict[str, Any]:
        """The named values :meth:`from_values` reads back."""
        return {"name": self.name, "type": self.vehicle_type, "position": list(self.position), "yaw": self.yaw}


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
