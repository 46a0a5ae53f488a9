"""Fleets: which vehicles a simulation has, where they start and which sensors each carries.

A fleet comes from a file (``config/fleets/<name>.yaml`` or a path) or is a grid of
N identical vehicles named ``drone1 .. droneN`` (:func:`grid_fleet`). The physics
node, the multi-vehicle sensor and controller processes and the swarm mission all
read the same selection (:class:`FleetSelection`: ``fleet`` or ``vehicles``), so a
launch file needs no loop to give every vehicle its nodes and it works the same
under ``ros2 launch``.

File format::

    defaults:                        # optional: applied to every entry
      type: quad_x
      sensors: [imu, barometer, magnetometer, gps]
    vehicles:
      - {name: drone1, position: [0, 0, 0]}
      - {name: scout, type: hexa_x, position: [4, 2, 0], yaw_deg: 90, sensors: [imu, gps, camera]}

A bad entry is one :class:`ParamsError` naming the file, the entry and the field,
e.g. ``demo.yaml: vehicles[2] 'scout'.type: vehicle 'hexa' not found (available: hexa_x, quad_x)``.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from aerial_sim.config import ParamsError, require
from aerial_sim.paths import resolve_config
from aerial_sim.vehicles.multirotor import _with_location, load_vehicle

Vector3 = tuple[float, float, float]

#: Sensors a vehicle may carry (one node each in the vehicle's namespace).
SENSORS = ("imu", "barometer", "magnetometer", "gps", "camera")
DEFAULT_SENSORS = ("imu", "barometer", "magnetometer", "gps")
#: A ROS 2 name token: the vehicle name is its namespace and frame prefix.
NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def require_vehicle_names(names, parameter: str = "vehicle_names") -> None:
    """Each name must be a ROS name token (it becomes a namespace and frame prefix): ParamsError naming it."""
    for index, name in enumerate(names):
        require(isinstance(name, str) and bool(NAME_PATTERN.match(name)),
                f"{parameter}[{index}]: {name!r} is not a valid ROS name (a letter, then letters, digits or _)")


#: Grid fleets: spacing (m) and the most rows across the street (y) before adding columns (x).
GRID_SPACING_M = 2.0
GRID_MAX_ROWS = 8
#: Two vehicles may not start closer than this (m, centre to centre).
MIN_START_DISTANCE_M = 0.5


@dataclass(frozen=True)
class FleetVehicle:
    """One vehicle of a fleet (map ENU, metres)."""

    name: str = ""
    #: Vehicle file under config/vehicles/ (quad_x, hexa_x) or a path.
    type: str = "quad_x"
    position: Vector3 = (0.0, 0.0, 0.0)
    yaw_deg: float = 0.0
    sensors: tuple[str, ...] = DEFAULT_SENSORS

    def __post_init__(self):
        require(bool(NAME_PATTERN.match(self.name)),
                f"name: {self.name!r} is not a valid ROS name (a letter, then letters, digits or _)")
        require(all(math.isfinite(v) for v in self.position), f"position: must be finite, got {self.position!r}")
        require(math.isfinite(self.yaw_deg), f"yaw_deg: must be finite, got {self.yaw_deg!r}")
        for sensor in self.sensors:
            require(sensor in SENSORS, f"sensors: unknown {sensor!r} (known: {', '.join(SENSORS)})")

    @property
    def yaw_rad(self) -> float:
        return math.radians(self.yaw_deg)


@dataclass(frozen=True)
class FleetSelection:
    """Which fleet: a file (``fleet``) or a grid of ``vehicles`` quads; neither = no fleet."""

    #: Fleet under config/fleets/ or a YAML path; empty or ``none`` (launch files' word) = none.
    fleet: str = ""
    #: Number of vehicles drone1..N on a grid (used when ``fleet`` is empty); 0 = none.
    vehicles: int = 0
    #: Vehicle file for a grid fleet.
    vehicle_type: str = "quad_x"

    def __post_init__(self):
        require(self.vehicles >= 0, f"vehicles must be >= 0, got {self.vehicles!r}")

    @property
    def fleet_file(self) -> str:
        """``fleet``, or '' when it is empty or ``none``."""
        return "" if self.fleet.strip() in ("", "none") else self.fleet

    @property
    def given(self) -> bool:
        return bool(self.fleet_file) or self.vehicles > 0

    def load(self) -> tuple[FleetVehicle, ...]:
        """The selected fleet (ParamsError when none is selected or it is invalid)."""
        if self.fleet_file:
            return load_fleet(self.fleet_file)
        require(self.vehicles > 0, "no fleet selected: give fleet:=NAME or vehicles:=N")
        return grid_fleet(self.vehicles, self.vehicle_type)


def require_served_vehicles(names, types, vehicles: int) -> None:
    """The checks of a node's ``vehicle_names`` / ``vehicle_types`` / ``vehicles`` parameters (ParamsError)."""
    require(len(names) > 0, "vehicle_names must name at least one vehicle")
    require_vehicle_names(names)
    require(len(types) == len(names), "vehicle_types needs one entry per vehicle")
    require(vehicles >= 0, f"vehicles must be >= 0, got {vehicles}")


def served_vehicles(names, types, fleet: str, vehicles: int) -> list[tuple[str, str]]:
    """(name, vehicle type) of every vehicle a node serves: the fleet selection the physics node makes
    (``fleet``, or drone1..N for ``vehicles`` > 1, of ``types[0]``), else ``names`` with their ``types``."""
    selection = FleetSelection(fleet=fleet, vehicles=vehicles if vehicles > 1 else 0, vehicle_type=types[0])
    if selection.given:
        return [(vehicle.name, vehicle.type) for vehicle in selection.load()]
    return list(zip(names, types))


def grid_fleet(count: int, vehicle_type: str = "quad_x", sensors: tuple[str, ...] = DEFAULT_SENSORS,
               spacing_m: float = GRID_SPACING_M) -> tuple[FleetVehicle, ...]:
    """``drone1`` to ``droneN`` on the ground, :data:`GRID_MAX_ROWS` rows across y centred on y = 0,
    columns toward +x (east: down the street of the urban scene) from x = 0."""
    require(count > 0, f"vehicles must be > 0, got {count}")
    rows = min(GRID_MAX_ROWS, math.ceil(math.sqrt(count)))
    fleet = []
    for index in range(count):
        column, row = divmod(index, rows)
        y = (row - (rows - 1) / 2.0) * spacing_m
        fleet.append(FleetVehicle(name=f"drone{index + 1}", type=vehicle_type, position=(column * spacing_m, y, 0.0),
                                  sensors=tuple(sensors)))
    check_fleet(fleet, "grid fleet")
    return tuple(fleet)


def load_fleet(name_or_path: str) -> tuple[FleetVehicle, ...]:
    """Load ``config/fleets/<name>.yaml`` or a YAML path; every error names the entry and field."""
    path = Path(resolve_config(name_or_path, "fleets"))
    where = path.name
    if not path.is_file():
        available = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise ParamsError(f"fleet '{name_or_path}': {path} not found (available: {', '.join(available) or 'none'})")
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise ParamsError(f"{where}: not valid YAML: {error}") from error
    if not isinstance(document, dict):
        raise ParamsError(f"{where}: expected a mapping with 'vehicles', got {type(document).__name__}")
    unknown = sorted(set(document) - {"defaults", "vehicles", "description"})
    if unknown:
        raise ParamsError(f"{where}: unknown key '{unknown[0]}' (known: defaults, description, vehicles)")
    defaults = document.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise ParamsError(f"{where}: defaults: expected a mapping")
    entries = document.get("vehicles")
    if not isinstance(entries, list) or not entries:
        raise ParamsError(f"{where}: vehicles: expected a non-empty list of vehicles")
    fleet = [_entry(where, index, raw, defaults) for index, raw in enumerate(entries)]
    check_fleet(fleet, where)
    return tuple(fleet)


def _entry(where: str, index: int, raw, defaults: dict) -> FleetVehicle:
    label = f"{where}: vehicles[{index}]"
    if not isinstance(raw, dict):
        raise ParamsError(f"{label}: expected a mapping, got {raw!r}")
    if isinstance(raw.get("name"), str):
        label += f" '{raw['name']}'"
    values = {**defaults, **raw}
    if "name" not in values:
        raise ParamsError(f"{label}: name: required")
    vehicle = _with_location(FleetVehicle, values, label)
    try:
        load_vehicle(vehicle.type)
    except ParamsError as error:
        raise ParamsError(f"{label}.type: {error}") from None
    return vehicle


def check_fleet(fleet, where: str) -> None:
    """Names unique and starting points apart (the error names both entries)."""
    seen: dict[str, int] = {}
    for index, vehicle in enumerate(fleet):
        if vehicle.name in seen:
            raise ParamsError(f"{where}: vehicles[{index}] '{vehicle.name}'.name: already used by vehicles[{seen[vehicle.name]}]")
        seen[vehicle.name] = index
    cells: dict[tuple[int, int, int], list[int]] = {}  # grid of MIN_START_DISTANCE_M cells: near-linear
    for index, vehicle in enumerate(fleet):
        cell = tuple(math.floor(v / MIN_START_DISTANCE_M) for v in vehicle.position)
        for offset in itertools.product((-1, 0, 1), repeat=3):
            for other_index in cells.get(tuple(c + o for c, o in zip(cell, offset)), ()):
                other = fleet[other_index]
                if math.dist(vehicle.position, other.position) < MIN_START_DISTANCE_M:
                    raise ParamsError(
                        f"{where}: vehicles[{index}] '{vehicle.name}'.position: {vehicle.position} is within "
                        f"{MIN_START_DISTANCE_M:g} m of vehicles[{other_index}] '{other.name}'"
                    )
        cells.setdefault(cell, []).append(index)


def with_sensors(fleet, sensors) -> tuple[FleetVehicle, ...]:
    """The fleet with every vehicle carrying ``sensors`` (e.g. a grid fleet's sensors from launch arguments)."""
    return tuple(replace(vehicle, sensors=tuple(sensors)) for vehicle in fleet)
