"""Geofence: the fence plan (MAV_MISSION_TYPE_FENCE) as PX4 stores and checks it (pure).

Items (MAVLink ``MAV_CMD_NAV_FENCE_*``, uploaded with the mission protocol):

- NAV_FENCE_POLYGON_VERTEX_INCLUSION (5001) / _EXCLUSION (5002): one item per vertex, param1 = the
  polygon's vertex count (at least 3), the polygon's vertices consecutive;
- NAV_FENCE_CIRCLE_INCLUSION (5003) / _EXCLUSION (5004): centre, param1 = radius (m);
- NAV_FENCE_RETURN_POINT (5000): accepted and kept, not flown to (PX4 skips it too).

The check follows PX4's ``navigator/geofence.cpp`` (``checkPointAgainstAllGeofences``,
``isInsidePolygonOrCircle``, ``checkPointAgainstPolygonCircle``): the vehicle is inside when it is inside
*every* inclusion area and outside *every* exclusion area, nearer home than GF_MAX_HOR_DIST and less
than GF_MAX_VER_DIST above home (each limit off at 0). When the fence is loaded an area is dropped,
with PX4's critical message, if home is not inside it or (armed and flying, GF_ACTION not 0) the
vehicle is not (``checkHomeRequirementsForGeofence``, ``checkCurrentPositionRequirementsForGeofence``).
Polygons use the crossing-number test (PX4: PNPOLY, W. R. Franklin) on east/north metres about the
home point instead of raw degrees, circles the distance in the same plane.

What a breach does is GF_ACTION's (PX4 ``geofence_result``): 0 nothing, 1 a warning, 2 Hold, 3 Return,
4 flight termination (not simulated here: Land), 5 Land (:class:`aerial_sim.mavlink.failsafes.Failsafes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from pymavlink.dialects.v20 import common as mav

from aerial_sim.mavlink.mission import ItemRejected, MissionItem, validate_position

POLYGON_INCLUSION = mav.MAV_CMD_NAV_FENCE_POLYGON_VERTEX_INCLUSION
POLYGON_EXCLUSION = mav.MAV_CMD_NAV_FENCE_POLYGON_VERTEX_EXCLUSION
CIRCLE_INCLUSION = mav.MAV_CMD_NAV_FENCE_CIRCLE_INCLUSION
CIRCLE_EXCLUSION = mav.MAV_CMD_NAV_FENCE_CIRCLE_EXCLUSION
RETURN_POINT = mav.MAV_CMD_NAV_FENCE_RETURN_POINT
POLYGONS = (POLYGON_INCLUSION, POLYGON_EXCLUSION)
CIRCLES = (CIRCLE_INCLUSION, CIRCLE_EXCLUSION)
INCLUSIONS = (POLYGON_INCLUSION, CIRCLE_INCLUSION)
#: GF_ACTION values (PX4 geofence_result_s::GF_ACTION_*)
ACTION_NONE, ACTION_WARN, ACTION_HOLD, ACTION_RTL, ACTION_TERMINATE, ACTION_LAND = range(6)


def validate_fence_item(item: MissionItem) -> None:
    """One fence item on its own (ItemRejected saying why)."""
    if item.command not in (*POLYGONS, *CIRCLES, RETURN_POINT):
        raise ItemRejected(mav.MAV_MISSION_UNSUPPORTED, f"fence item {item.seq}: command {item.command} is not a "
                           "fence item (5000 return point, 5001/5002 polygon vertex, 5003/5004 circle)")
    validate_position(item)
    if item.command in POLYGONS and not (math.isfinite(item.param1) and item.param1 >= 3
                                         and item.param1 == int(item.param1)):
        raise ItemRejected(mav.MAV_MISSION_INVALID_PARAM1,
                           f"fence item {item.seq}: vertex count {item.param1} (param1) must be a whole number >= 3")
    if item.command in CIRCLES and not (math.isfinite(item.param1) and 0.0 < item.param1 <= 100_000.0):
        raise ItemRejected(mav.MAV_MISSION_INVALID_PARAM1,
                           f"fence item {item.seq}: circle radius {item.param1} m (param1) must be in (0, 100 km]")


def check_fence_items(items: list[MissionItem]) -> None:
    """A complete fence: each polygon's vertices consecutive, as many as each of them says."""
    index = 0
    while index < len(items):
        item = items[index]
        if item.command in POLYGONS:
            count = int(item.param1)
            vertices = items[index:index + count]
            if len(vertices) < count or any(v.command != item.command or int(v.param1) != count for v in vertices):
                raise ItemRejected(mav.MAV_MISSION_INVALID_PARAM1, f"fence item {item.seq}: a polygon of {count} "
                                   "vertices needs that many consecutive vertex items of the same kind")
            index += count
        else:
            index += 1


@dataclass(frozen=True)
class Area:
    """One inclusion or exclusion area on east/north metres: a polygon (vertices) or a circle (centre, radius)."""

    inclusion: bool
    vertices: tuple[tuple[float, float], ...] = ()
    centre: tuple[float, float] | None = None
    radius_m: float = 0.0

    def contains(self, east: float, north: float) -> bool:
        if self.centre is not None:
            return math.hypot(east - self.centre[0], north - self.centre[1]) < self.radius_m
        inside = False
        count = len(self.vertices)
        for i in range(count):  # crossing number: a ray to +east crosses the boundary an odd number of times
            (e1, n1), (e2, n2) = self.vertices[i], self.vertices[i - 1]
            if (n1 > north) != (n2 > north) and east < (e2 - e1) * (north - n1) / (n2 - n1) + e1:
                inside = not inside
        return inside

    def passes(self, east: float, north: float) -> bool:
        """PX4's checkPointAgainstPolygonCircle: inside an inclusion area, outside an exclusion area."""
        return self.contains(east, north) == self.inclusion


def areas_from_items(items: list[MissionItem], to_east_north: Callable[[float, float], tuple[float, float]]) -> list[Area]:
    """The areas of a checked fence (:func:`check_fence_items`); ``to_east_north(lat, lon)`` -> metres."""
    areas, index = [], 0
    while index < len(items):
        item = items[index]
        if item.command in POLYGONS:
            count = int(item.param1)
            vertices = tuple(to_east_north(v.latitude, v.longitude) for v in items[index:index + count])
            areas.append(Area(item.command == POLYGON_INCLUSION, vertices=vertices))
            index += count
            continue
        if item.command in CIRCLES:
            areas.append(Area(item.command == CIRCLE_INCLUSION, centre=to_east_north(item.latitude, item.longitude),
                              radius_m=item.param1))
        index += 1
    return areas


@dataclass(frozen=True)
class Geofence:
    """The fence in force: its areas and PX4's distance limits about home (0 = off)."""

    areas: tuple[Area, ...] = ()
    home: tuple[float, float, float] = (0.0, 0.0, 0.0)  # map ENU
    max_horizontal_m: float = 0.0  # GF_MAX_HOR_DIST
    max_vertical_m: float = 0.0  # GF_MAX_VER_DIST

    def inside(self, position) -> bool:
        """PX4's checkPointAgainstAllGeofences for a map ENU position."""
        east, north, up = position
        if self.max_horizontal_m > 0 and math.hypot(east - self.home[0], north - self.home[1]) >= self.max_horizontal_m:
            return False
        if self.max_vertical_m > 0 and up - self.home[2] >= self.max_vertical_m:
            return False
        return all(area.passes(east, north) for area in self.areas)


def load_areas(areas: list[Area], home, vehicle=None) -> tuple[list[Area], list[str]]:
    """Keep the areas home passes (and the flying ``vehicle`` position, when given); the reasons for each dropped."""
    kept, dropped = [], []
    for number, area in enumerate(areas):
        if not area.passes(home[0], home[1]):
            dropped.append(f"fence area {number}: Geofence invalid, doesn't contain Home position")
        elif vehicle is not None and not area.passes(vehicle[0], vehicle[1]):
            dropped.append(f"fence area {number}: Geofence invalid, doesn't contain current vehicle position")
        else:
            kept.append(area)
    return kept, dropped
