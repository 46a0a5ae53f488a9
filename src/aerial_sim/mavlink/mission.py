"""Mission items and the MAVLink mission protocol's server side (pure).

The protocol (mavlink.io "Mission Protocol", as PX4's ``MavlinkMissionManager`` serves it):

- upload: client MISSION_COUNT(n) -> autopilot MISSION_REQUEST_INT(0) -> client MISSION_ITEM_INT(0)
  -> ... -> autopilot MISSION_ACK(ACCEPTED); a request not answered is sent again
  (``retry_s``, ``retries`` times) before the transfer is given up with MISSION_ACK(ERROR);
- download: client MISSION_REQUEST_LIST -> autopilot MISSION_COUNT(n) -> client
  MISSION_REQUEST_INT(i) -> autopilot MISSION_ITEM_INT(i) ... -> client MISSION_ACK;
- MISSION_CLEAR_ALL -> MISSION_ACK; MISSION_SET_CURRENT -> MISSION_CURRENT.

An item this autopilot cannot fly ends the upload with the MISSION_ACK error the protocol names for
it (unsupported command or frame, the invalid parameter) and the stored mission is left as it was.
The legacy float messages (MISSION_ITEM, MISSION_REQUEST) are answered in kind.

One :class:`MissionServer` holds one plan type (``mission_type``: the mission, the geofence or the
rally points, each with its own item rules); :func:`plan_type` says which store a message is for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pymavlink.dialects.v20 import common as mav

SUPPORTED_NAV = {
    mav.MAV_CMD_NAV_WAYPOINT: "waypoint",
    mav.MAV_CMD_NAV_TAKEOFF: "takeoff",
    mav.MAV_CMD_NAV_LAND: "land",
    mav.MAV_CMD_NAV_RETURN_TO_LAUNCH: "return to launch",
    mav.MAV_CMD_NAV_LOITER_TIME: "loiter time",
    mav.MAV_CMD_NAV_LOITER_UNLIM: "loiter",
    mav.MAV_CMD_NAV_DELAY: "delay",
    mav.MAV_CMD_DO_CHANGE_SPEED: "change speed",
    mav.MAV_CMD_DO_JUMP: "jump",
}
#: Items done at once, in the air or on the ground (no flight of their own, no MISSION_ITEM_REACHED for a jump).
DO_COMMANDS = (mav.MAV_CMD_DO_CHANGE_SPEED, mav.MAV_CMD_DO_JUMP)
#: Items that carry a position (x = latitude, y = longitude, z = altitude).
POSITIONED = (mav.MAV_CMD_NAV_WAYPOINT, mav.MAV_CMD_NAV_TAKEOFF, mav.MAV_CMD_NAV_LAND,
              mav.MAV_CMD_NAV_LOITER_TIME, mav.MAV_CMD_NAV_LOITER_UNLIM)
#: Of those, the ones where latitude = longitude = 0 means "where the vehicle is" (PX4 does the same).
HERE_ALLOWED = (mav.MAV_CMD_NAV_TAKEOFF, mav.MAV_CMD_NAV_LAND)
GLOBAL_FRAMES = {
    mav.MAV_FRAME_GLOBAL: False, mav.MAV_FRAME_GLOBAL_INT: False,  # altitude AMSL
    mav.MAV_FRAME_GLOBAL_RELATIVE_ALT: True, mav.MAV_FRAME_GLOBAL_RELATIVE_ALT_INT: True,  # above home
}
MAX_ITEMS = 500


@dataclass(frozen=True)
class MissionItem:
    """One item as stored: latitude/longitude in degrees (float), altitude in m in ``frame``."""

    seq: int
    frame: int
    command: int
    autocontinue: int
    param1: float
    param2: float
    param3: float
    param4: float
    latitude: float
    longitude: float
    altitude: float

    @property
    def relative_altitude(self) -> bool:
        return GLOBAL_FRAMES.get(self.frame, True)

    @property
    def has_position(self) -> bool:
        return self.command in POSITIONED and not (self.latitude == 0.0 and self.longitude == 0.0)


class ItemRejected(ValueError):
    def __init__(self, result: int, why: str):
        super().__init__(why)
        self.result = result


def plan_type(message) -> int:
    """The MAV_MISSION_TYPE a mission-protocol message is for (MISSION when the field is absent: MAVLink 1)."""
    return int(getattr(message, "mission_type", mav.MAV_MISSION_TYPE_MISSION))


def item_from_message(message, validate_item=None) -> MissionItem:
    """A MISSION_ITEM_INT or MISSION_ITEM -> :class:`MissionItem`, or :class:`ItemRejected` saying why
    (``validate_item``: the plan type's rules, the mission's by default)."""
    is_int = message.get_type() == "MISSION_ITEM_INT"
    lat = message.x / 1e7 if is_int else float(message.x)
    lon = message.y / 1e7 if is_int else float(message.y)
    item = MissionItem(int(message.seq), int(message.frame), int(message.command), int(message.autocontinue),
                       float(message.param1), float(message.param2), float(message.param3), float(message.param4),
                       float(lat), float(lon), float(message.z))
    (validate_item or validate)(item)
    return item


def validate_position(item: MissionItem, here_allowed: bool = False) -> None:
    """A global frame and a latitude/longitude in range, not 0, 0 unless ``here_allowed`` (ItemRejected otherwise)."""
    if item.frame not in GLOBAL_FRAMES:
        raise ItemRejected(mav.MAV_MISSION_UNSUPPORTED_FRAME,
                           f"item {item.seq}: frame {item.frame} is not a global frame (0, 3, 5 or 6)")
    if not (math.isfinite(item.latitude) and -90.0 <= item.latitude <= 90.0):
        raise ItemRejected(mav.MAV_MISSION_INVALID_PARAM5_X, f"item {item.seq}: latitude {item.latitude} is out of range")
    if not (math.isfinite(item.longitude) and -180.0 <= item.longitude <= 180.0):
        raise ItemRejected(mav.MAV_MISSION_INVALID_PARAM6_Y, f"item {item.seq}: longitude {item.longitude} is out of range")
    if item.latitude == 0.0 and item.longitude == 0.0 and not here_allowed:
        raise ItemRejected(mav.MAV_MISSION_INVALID_PARAM5_X, f"item {item.seq}: no position (latitude = longitude = 0)")


def validate_altitude(item: MissionItem, kind: str = "item") -> None:
    """An altitude between -1 km and 20 km (ItemRejected otherwise)."""
    if not (math.isfinite(item.altitude) and -1000.0 <= item.altitude <= 20000.0):
        raise ItemRejected(mav.MAV_MISSION_INVALID_PARAM7, f"{kind} {item.seq}: altitude {item.altitude} is out of range")


def validate_rally_point(item: MissionItem) -> None:
    """A rally point: MAV_CMD_NAV_RALLY_POINT at a global position (the altitude too)."""
    if item.command != mav.MAV_CMD_NAV_RALLY_POINT:
        raise ItemRejected(mav.MAV_MISSION_UNSUPPORTED,
                           f"rally item {item.seq}: command {item.command} is not NAV_RALLY_POINT (5100)")
    validate_position(item)
    validate_altitude(item, "rally item")


def validate(item: MissionItem) -> None:
    command = item.command
    if command not in SUPPORTED_NAV:
        raise ItemRejected(mav.MAV_MISSION_UNSUPPORTED, f"item {item.seq}: command {command} is not supported "
                           f"(supported: {', '.join(f'{c} {n}' for c, n in SUPPORTED_NAV.items())})")
    if command in POSITIONED:
        validate_position(item, here_allowed=command in HERE_ALLOWED)
        if command != mav.MAV_CMD_NAV_LAND:
            validate_altitude(item)
    if command in (mav.MAV_CMD_NAV_WAYPOINT, mav.MAV_CMD_NAV_LOITER_TIME, mav.MAV_CMD_NAV_DELAY):
        if math.isfinite(item.param1) and not 0.0 <= item.param1 <= 86400.0:
            raise ItemRejected(mav.MAV_MISSION_INVALID_PARAM1, f"item {item.seq}: time {item.param1} s is out of range")
    if command == mav.MAV_CMD_NAV_DELAY and not (math.isfinite(item.param1) and item.param1 >= 0.0):
        raise ItemRejected(mav.MAV_MISSION_INVALID_PARAM1, f"item {item.seq}: delay {item.param1} s is not a time")
    if command == mav.MAV_CMD_DO_CHANGE_SPEED and math.isfinite(item.param2) and item.param2 > 100.0:
        raise ItemRejected(mav.MAV_MISSION_INVALID_PARAM2, f"item {item.seq}: speed {item.param2} m/s is out of range")
    if command == mav.MAV_CMD_DO_JUMP:
        if not (math.isfinite(item.param1) and item.param1 >= 0 and item.param1 == int(item.param1)
                and int(item.param1) != item.seq):
            raise ItemRejected(mav.MAV_MISSION_INVALID_PARAM1,
                               f"item {item.seq}: jump target {item.param1} is not another item's number")
        if not (math.isfinite(item.param2) and item.param2 >= -1 and item.param2 == int(item.param2)):
            raise ItemRejected(mav.MAV_MISSION_INVALID_PARAM2,
                               f"item {item.seq}: jump repeat count {item.param2} is not a whole number >= -1")


def check_jumps(items: list[MissionItem]) -> None:
    """Every DO_JUMP of a complete mission lands on an item of it (ItemRejected otherwise)."""
    for item in items:
        if item.command == mav.MAV_CMD_DO_JUMP and int(item.param1) >= len(items):
            raise ItemRejected(mav.MAV_MISSION_INVALID_PARAM1, f"item {item.seq}: jump target {int(item.param1)} "
                               f"is past the mission's {len(items)} items")


class MissionServer:
    """The stored mission and the transfer under way, for one vehicle.

    Methods take the received message and return the messages to send back (pymavlink message
    objects); ``time_s`` is any monotonic clock, used for retries.
    """

    def __init__(self, target: tuple[int, int] = (0, 0), retry_s: float = 0.5, retries: int = 5,
                 mission_type: int = mav.MAV_MISSION_TYPE_MISSION, validate_item=validate, check_items=None):
        self.mission_type = mission_type
        self.validate_item = validate_item
        self.check_items = check_items if check_items is not None else (
            check_jumps if mission_type == mav.MAV_MISSION_TYPE_MISSION else (lambda items: None))
        self.items: list[MissionItem] = []
        self.current = 0
        self.retry_s, self.retries = retry_s, retries
        self.target = target  # (system, component) of the client under transfer
        self.upload: list[MissionItem] | None = None
        self._upload_count = 0
        self._upload_float = False
        self._last_request_s = 0.0
        self._tries = 0
        self.last_error: str | None = None
        self.changed = False  # set when a new mission replaced the old one (the autopilot restarts it)
        self.version = 0  # counts the plans stored (a user of the plan rebuilds what it derived when it moves)

    # -- upload --------------------------------------------------------------
    def on_count(self, message, time_s: float) -> list:
        self.target = (message.get_srcSystem(), message.get_srcComponent())
        count = int(message.count)
        if count > MAX_ITEMS:
            return [self._ack(mav.MAV_MISSION_NO_SPACE, why=f"{count} items: at most {MAX_ITEMS}")]
        if count == 0:
            self._replace([])
            return [self._ack(mav.MAV_MISSION_ACCEPTED)]
        self.upload, self._upload_count, self._tries = [], count, 0
        self._upload_float = False
        return [self._request(0, time_s)]

    def on_item(self, message, time_s: float) -> list:
        if self.upload is None:
            return []  # PX4 ignores items outside a transfer (a late retransmission)
        self._upload_float = message.get_type() == "MISSION_ITEM"
        expected = len(self.upload)
        if message.seq != expected:
            if message.seq < expected:
                return [self._request(expected, time_s)]  # a duplicate: ask again for the one we need
            return self._fail(mav.MAV_MISSION_INVALID_SEQUENCE, f"item {message.seq} arrived, {expected} expected")
        try:
            item = item_from_message(message, self.validate_item)
        except ItemRejected as error:
            return self._fail(error.result, str(error))
        self.upload.append(item)
        self._tries = 0
        if len(self.upload) < self._upload_count:
            return [self._request(len(self.upload), time_s)]
        items, self.upload = self.upload, None
        try:
            self.check_items(items)
        except ItemRejected as error:
            return self._fail(error.result, str(error))
        self._replace(items)
        return [self._ack(mav.MAV_MISSION_ACCEPTED)]

    def tick(self, time_s: float) -> list:
        """Retransmit the pending request, or give up after ``retries``."""
        if self.upload is None or time_s - self._last_request_s < self.retry_s:
            return []
        if self._tries >= self.retries:
            return self._fail(mav.MAV_MISSION_OPERATION_CANCELLED,
                              f"upload abandoned: item {len(self.upload)} not received after {self.retries} requests")
        return [self._request(len(self.upload), time_s)]

    def _request(self, seq: int, time_s: float):
        self._last_request_s = time_s
        self._tries += 1
        if self._upload_float:
            return mav.MAVLink_mission_request_message(*self.target, seq, self.mission_type)
        return mav.MAVLink_mission_request_int_message(*self.target, seq, self.mission_type)

    def _fail(self, result: int, why: str) -> list:
        self.upload = None
        return [self._ack(result, why=why)]

    def _replace(self, items: list[MissionItem]) -> None:
        self.items = items
        self.version += 1
        self.current = 0
        self.changed = True

    def _ack(self, result: int, mission_type: int | None = None, why: str | None = None):
        self.last_error = why
        return mav.MAVLink_mission_ack_message(*self.target, result,
                                               self.mission_type if mission_type is None else mission_type)

    # -- download, clear, current ----------------------------------------------
    def on_request_list(self, message) -> list:
        self.target = (message.get_srcSystem(), message.get_srcComponent())
        return [mav.MAVLink_mission_count_message(*self.target, len(self.items), self.mission_type)]

    def on_request(self, message) -> list:
        """MISSION_REQUEST_INT / MISSION_REQUEST for item ``seq`` of the stored mission."""
        self.target = (message.get_srcSystem(), message.get_srcComponent())
        if self.upload is not None:
            return []
        seq = int(message.seq)
        if not 0 <= seq < len(self.items):
            return [self._ack(mav.MAV_MISSION_INVALID_SEQUENCE, why=f"item {seq} requested, the mission has "
                              f"{len(self.items)}")]
        item = self.items[seq]
        current = int(seq == self.current)
        if message.get_type() == "MISSION_REQUEST":
            return [mav.MAVLink_mission_item_message(
                *self.target, seq, item.frame, item.command, current, item.autocontinue, item.param1, item.param2,
                item.param3, item.param4, item.latitude, item.longitude, item.altitude, self.mission_type)]
        return [mav.MAVLink_mission_item_int_message(
            *self.target, seq, item.frame, item.command, current, item.autocontinue, item.param1, item.param2,
            item.param3, item.param4, int(round(item.latitude * 1e7)), int(round(item.longitude * 1e7)), item.altitude,
            self.mission_type)]

    def on_clear(self, message) -> list:
        self.target = (message.get_srcSystem(), message.get_srcComponent())
        self.upload = None
        self._replace([])
        return [self._ack(mav.MAV_MISSION_ACCEPTED, plan_type(message))]

    def set_current(self, seq: int) -> bool:
        if not 0 <= seq < len(self.items):
            self.last_error = f"MISSION_SET_CURRENT {seq}: the mission has {len(self.items)} items"
            return False
        self.current = seq
        return True
