"""The autopilot's parameters, named and typed as PX4's, and their MAVLink wire encoding (pure).

Only parameters this autopilot honours are listed (a client that reads or sets one sees it take
effect); each has PX4's name, type, default and range. Values travel in PARAM_VALUE / PARAM_SET as a
float field: PX4 (and so MAVSDK and QGroundControl talking to PX4) puts an INT32 parameter's four bytes
into that float unchanged ("bytewise"), not its numeric value; :func:`to_wire` / :func:`from_wire` do
the same.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

MAV_PARAM_TYPE_INT32 = 6
MAV_PARAM_TYPE_REAL32 = 9


@dataclass(frozen=True)
class ParamSpec:
    name: str
    default: float
    minimum: float
    maximum: float
    integer: bool = False
    description: str = ""

    @property
    def mav_type(self) -> int:
        return MAV_PARAM_TYPE_INT32 if self.integer else MAV_PARAM_TYPE_REAL32


SPECS: tuple[ParamSpec, ...] = (
    ParamSpec("MAV_SYS_ID", 1, 1, 250, True, "system id (read-only here: set by the node's sysid_base)"),
    ParamSpec("MAV_TYPE", 2, 0, 50, True, "MAV_TYPE of the vehicle (2 quadrotor, 13 hexarotor)"),
    ParamSpec("MIS_TAKEOFF_ALT", 2.5, 0.5, 500.0, False, "takeoff altitude above home, m"),
    ParamSpec("MPC_XY_CRUISE", 5.0, 0.5, 20.0, False, "horizontal speed in missions, goto and RTL, m/s"),
    ParamSpec("MPC_XY_VEL_MAX", 12.0, 0.5, 20.0, False, "largest horizontal speed, m/s"),
    ParamSpec("MPC_Z_VEL_MAX_UP", 3.0, 0.5, 8.0, False, "largest climb rate (sticks, RTL climb), m/s"),
    ParamSpec("MPC_Z_VEL_MAX_DN", 1.5, 0.5, 4.0, False, "largest descent rate (sticks), m/s"),
    ParamSpec("MPC_VEL_MANUAL", 10.0, 1.0, 20.0, False, "horizontal speed at full stick in Position mode, m/s"),
    ParamSpec("MPC_MAN_Y_MAX", 150.0, 0.0, 400.0, False, "yaw rate at full stick, deg/s"),
    ParamSpec("MPC_MAN_TILT_MAX", 35.0, 0.0, 90.0, False, "tilt at full stick in Stabilized/Manual and Altitude, deg"),
    ParamSpec("MPC_MANTHR_MIN", 0.08, 0.0, 1.0, False, "thrust at zero throttle stick in the air (Stabilized, Acro)"),
    ParamSpec("MPC_THR_HOVER", 0.5, 0.1, 0.8, False, "hover thrust, centre throttle stick (set from the vehicle at start)"),
    ParamSpec("MPC_THR_MAX", 1.0, 0.0, 1.0, False, "thrust at full throttle stick (Stabilized, Acro)"),
    ParamSpec("MPC_HOLD_MAX_Z", 0.6, 0.0, 3.0, False, "Altitude mode locks the altitude below this vertical speed, m/s"),
    ParamSpec("MC_ACRO_R_MAX", 720.0, 0.0, 1800.0, False, "roll rate at full stick in Acro, deg/s"),
    ParamSpec("MC_ACRO_P_MAX", 720.0, 0.0, 1800.0, False, "pitch rate at full stick in Acro, deg/s"),
    ParamSpec("MC_ACRO_Y_MAX", 540.0, 0.0, 1800.0, False, "yaw rate at full stick in Acro, deg/s"),
    ParamSpec("NAV_ACC_RAD", 2.0, 0.05, 200.0, False, "mission waypoint acceptance radius when an item gives none, m"),
    ParamSpec("RTL_RETURN_ALT", 60.0, 0.0, 500.0, False, "RTL climbs to this altitude above home first, m"),
    ParamSpec("RTL_DESCEND_ALT", 30.0, 0.0, 500.0, False, "RTL descends to this altitude above home at home before landing, m"),
    ParamSpec("RTL_LAND_DELAY", 0.0, -1.0, 300.0, False, "RTL waits this long at home before landing (-1: never lands), s"),
    ParamSpec("COM_OF_LOSS_T", 1.0, 0.0, 60.0, False, "offboard setpoints older than this are lost, s"),
    ParamSpec("COM_OBL_RC_ACT", 0, 0, 7, True, "offboard loss action: 0 Position, 1 Altitude, 2 Manual, 3 Return, 4 Land, 5 Hold"),
    ParamSpec("COM_RC_LOSS_T", 0.5, 0.0, 35.0, False, "MANUAL_CONTROL older than this is lost (vehicle holds), s"),
    ParamSpec("COM_DISARM_LAND", 2.0, -1.0, 20.0, False, "stick modes: at rest with the throttle down this long is landed, then disarmed (-1: never); elsewhere the controller disarms at touchdown, s"),
    ParamSpec("GF_ACTION", 2, 0, 5, True, "geofence breach action: 0 none, 1 warning, 2 Hold, 3 Return, 4 terminate (lands here), 5 Land"),
    ParamSpec("GF_MAX_HOR_DIST", 0.0, 0.0, 10000.0, False, "geofence: largest horizontal distance from home (0: off), m"),
    ParamSpec("GF_MAX_VER_DIST", 0.0, 0.0, 10000.0, False, "geofence: largest height above home (0: off), m"),
    ParamSpec("BAT1_N_CELLS", 3, 1, 16, True, "battery cells in series (read at start)"),
    ParamSpec("BAT1_CAPACITY", 5000.0, -1.0, 100000.0, False, "battery capacity, mAh (read at start)"),
)
_BY_NAME = {spec.name: index for index, spec in enumerate(SPECS)}


class ParamRejected(ValueError):
    """A PARAM_SET or read the autopilot refuses; the message says why."""


class ParameterTable:
    """Current values of :data:`SPECS` (index = position in SPECS, as PX4 numbers its parameters)."""

    def __init__(self, overrides: dict[str, float] | None = None):
        self.values = [float(spec.default) for spec in SPECS]
        for name, value in (overrides or {}).items():
            self.values[self.index(name)] = float(value)

    def __len__(self) -> int:
        return len(SPECS)

    def __getitem__(self, name: str) -> float:
        return self.values[self.index(name)]

    @staticmethod
    def index(name: str) -> int:
        try:
            return _BY_NAME[name]
        except KeyError:
            raise ParamRejected(f"no parameter named {name!r}") from None

    def set(self, name: str, value: float, read_only: tuple[str, ...] = ()) -> float:
        """Set ``name`` to ``value`` (range-checked, rounded for integers); the value now in force."""
        index = self.index(name)
        spec = SPECS[index]
        if name in read_only:
            raise ParamRejected(f"{name} is read-only here")
        if not math.isfinite(value):
            raise ParamRejected(f"{name} = {value!r} is not a finite number")
        if spec.integer:
            value = float(round(value))
        if not spec.minimum <= value <= spec.maximum:
            raise ParamRejected(f"{name} = {value:g} is outside [{spec.minimum:g}, {spec.maximum:g}]")
        self.values[index] = float(value)
        return self.values[index]


def to_wire(spec: ParamSpec, value: float) -> float:
    """The float that carries ``value`` in PARAM_VALUE (an INT32's bytes reinterpreted, as PX4 sends them)."""
    if spec.integer:
        return struct.unpack("<f", struct.pack("<i", int(value)))[0]
    return float(value)


def from_wire(spec: ParamSpec, wire: float, wire_type: int) -> float:
    """The value a PARAM_SET carries (bytewise INT32 when the client says INT32 or the parameter is one)."""
    if wire_type == MAV_PARAM_TYPE_INT32 or (spec.integer and wire_type not in (MAV_PARAM_TYPE_REAL32,)):
        return float(struct.unpack("<i", struct.pack("<f", wire))[0])
    return float(wire)


def param_id_text(raw) -> str:
    """A PARAM_* message's 16-character id as text (NUL padding removed; bytes or str)."""
    if isinstance(raw, bytes):
        raw = raw.decode("ascii", errors="replace")
    return str(raw).split("\x00", 1)[0].strip()
