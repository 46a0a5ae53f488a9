"""PX4 flight modes and their HEARTBEAT encoding (pure).

PX4 puts its mode in HEARTBEAT ``custom_mode`` as ``main_mode << 16 | sub_mode << 24``
(``px4_custom_mode.h``: a 32-bit union of a reserved 16-bit half, the main mode byte and the
sub-mode byte) with ``MAV_MODE_FLAG_CUSTOM_MODE_ENABLED`` set in ``base_mode``. Clients
(MAVSDK, QGroundControl, MAVROS, pymavlink's ``mode_mapping_px4``) decode it the same way, and
set a mode with ``MAV_CMD_DO_SET_MODE`` (param1 base mode, param2 main mode, param3 sub-mode) or
the older ``SET_MODE`` message.
"""

from __future__ import annotations

import enum

# PX4_CUSTOM_MAIN_MODE
MAIN_MANUAL, MAIN_ALTCTL, MAIN_POSCTL, MAIN_AUTO, MAIN_ACRO, MAIN_OFFBOARD, MAIN_STABILIZED = 1, 2, 3, 4, 5, 6, 7
# PX4_CUSTOM_SUB_MODE_AUTO
SUB_READY, SUB_TAKEOFF, SUB_LOITER, SUB_MISSION, SUB_RTL, SUB_LAND = 1, 2, 3, 4, 5, 6

MAV_MODE_FLAG_CUSTOM_MODE_ENABLED = 1
MAV_MODE_FLAG_AUTO_ENABLED = 4
MAV_MODE_FLAG_GUIDED_ENABLED = 8
MAV_MODE_FLAG_STABILIZE_ENABLED = 16
MAV_MODE_FLAG_MANUAL_INPUT_ENABLED = 64
MAV_MODE_FLAG_SAFETY_ARMED = 128


class FlightMode(str, enum.Enum):
    """The PX4 multicopter modes this autopilot flies (names as QGroundControl shows them)."""

    MANUAL = "Manual"
    ACRO = "Acro"
    STABILIZED = "Stabilized"
    ALTCTL = "Altitude"
    POSCTL = "Position"
    HOLD = "Hold"  # AUTO.LOITER
    MISSION = "Mission"  # AUTO.MISSION
    RTL = "Return"  # AUTO.RTL
    LAND = "Land"  # AUTO.LAND
    TAKEOFF = "Takeoff"  # AUTO.TAKEOFF
    OFFBOARD = "Offboard"


_ENCODING = {
    FlightMode.MANUAL: (MAIN_MANUAL, 0),
    FlightMode.ACRO: (MAIN_ACRO, 0),
    FlightMode.STABILIZED: (MAIN_STABILIZED, 0),
    FlightMode.ALTCTL: (MAIN_ALTCTL, 0),
    FlightMode.POSCTL: (MAIN_POSCTL, 0),
    FlightMode.HOLD: (MAIN_AUTO, SUB_LOITER),
    FlightMode.MISSION: (MAIN_AUTO, SUB_MISSION),
    FlightMode.RTL: (MAIN_AUTO, SUB_RTL),
    FlightMode.LAND: (MAIN_AUTO, SUB_LAND),
    FlightMode.TAKEOFF: (MAIN_AUTO, SUB_TAKEOFF),
    FlightMode.OFFBOARD: (MAIN_OFFBOARD, 0),
}
_DECODING = {value: mode for mode, value in _ENCODING.items()}
#: Modes the sticks fly (MANUAL_CONTROL is used in these, ignored in the others).
STICK_MODES = (FlightMode.MANUAL, FlightMode.ACRO, FlightMode.STABILIZED, FlightMode.ALTCTL, FlightMode.POSCTL)
AUTO_MODES = (FlightMode.HOLD, FlightMode.MISSION, FlightMode.RTL, FlightMode.LAND, FlightMode.TAKEOFF)


class UnknownMode(ValueError):
    """A (main, sub) mode pair that is not a PX4 multicopter mode this autopilot flies."""


def custom_mode(mode: FlightMode) -> int:
    """HEARTBEAT ``custom_mode`` of ``mode``: main mode in bits 16-23, sub-mode in bits 24-31."""
    main, sub = _ENCODING[mode]
    return (main << 16) | (sub << 24)


def base_mode(mode: FlightMode, armed: bool) -> int:
    """HEARTBEAT ``base_mode`` flags as PX4's commander sets them for ``mode``."""
    flags = MAV_MODE_FLAG_CUSTOM_MODE_ENABLED
    if mode == FlightMode.ACRO:
        flags |= MAV_MODE_FLAG_MANUAL_INPUT_ENABLED  # rates only: PX4 sets no STABILIZE flag in Acro
    elif mode in STICK_MODES:  # Manual is stabilized on a multicopter (PX4 sets STABILIZE for rotary wings)
        flags |= MAV_MODE_FLAG_MANUAL_INPUT_ENABLED | MAV_MODE_FLAG_STABILIZE_ENABLED
    else:
        flags |= MAV_MODE_FLAG_AUTO_ENABLED | MAV_MODE_FLAG_GUIDED_ENABLED | MAV_MODE_FLAG_STABILIZE_ENABLED
    if armed:
        flags |= MAV_MODE_FLAG_SAFETY_ARMED
    return flags


def decode(main_mode: float, sub_mode: float = 0.0) -> FlightMode:
    """The mode a ``DO_SET_MODE`` (param2, param3) or ``SET_MODE`` asks for; :class:`UnknownMode` if none."""
    try:
        main, sub = int(main_mode), int(sub_mode)
    except (TypeError, ValueError, OverflowError):
        raise UnknownMode(f"mode ({main_mode!r}, {sub_mode!r}) is not a number") from None
    if main != MAIN_AUTO:
        sub = 0  # PX4 ignores the sub-mode outside AUTO
    elif sub == SUB_READY:
        sub = SUB_LOITER
    mode = _DECODING.get((main, sub))
    if mode is None:
        raise UnknownMode(f"PX4 mode main={main} sub={sub} is not one this autopilot flies "
                          f"(supported: {', '.join(m.value for m in FlightMode)})")
    return mode


def decode_custom_mode(value: int) -> FlightMode:
    """The mode of a HEARTBEAT/``SET_MODE`` ``custom_mode`` word."""
    return decode((value >> 16) & 0xFF, (value >> 24) & 0xFF)
