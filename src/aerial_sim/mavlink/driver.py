"""The other direction: the flight controller's topic contract served by commanding a MAVLink autopilot (pure).

:class:`AutopilotDriver` keeps what a PX4 (or ArduPilot) autopilot reports and turns the built-in
flight controller's requests into MAVLink, so the ``mavlink_vehicle`` node can stand in for the
built-in controller in front of a real vehicle or its SITL:

==================  ==============================================================================
contract            MAVLink (PX4 conventions; ArduPilot's where noted)
==================  ==============================================================================
``arm`` (SetBool)   COMMAND_LONG ARM_DISARM, answered by its COMMAND_ACK
``takeoff``         NAV_TAKEOFF to ``takeoff_altitude`` above where it is (param7 AMSL; ArduPilot:
                    GUIDED first, param7 relative)
``land``            NAV_LAND (ArduPilot: LAND mode)
``cmd_pose``        SET_POSITION_TARGET_LOCAL_NED position + yaw, streamed; Offboard (ArduPilot:
                    GUIDED) requested once setpoints flow, as PX4 requires
``cmd_vel``         velocity + yaw rate (``map`` -> LOCAL_NED, body frame -> BODY_NED); a stream: older
                    than ``command_timeout_s`` -> hold the position reached
``cmd_attitude``    SET_ATTITUDE_TARGET quaternion + thrust (throttle form only)
``cmd_rates``       SET_ATTITUDE_TARGET body rates + thrust (throttle form only)
odometry            LOCAL_POSITION_NED + ATTITUDE_QUATERNION -> map ENU / base_link FLU, stamped with the
                    position's ``time_boot_ms`` mapped to ROS time (:mod:`aerial_sim.mavlink.autopilot_clock`)
``/diagnostics``    armed, mode (the built-in controller's mode names), autopilot mode
==================  ==============================================================================

Every conversion goes through :mod:`aerial_sim.airsim.ned`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from pymavlink.dialects.v20 import common as mav

from aerial_sim.airsim.ned import (body_to_frd, heading_to_enu, heading_to_ned, orientation_to_enu,
                                   orientation_to_ned, world_to_enu, world_to_ned)
from aerial_sim.config import require, require_positive
from aerial_sim.mavlink import modes
from aerial_sim.mavlink.autopilot_clock import AutopilotClock, AutopilotClockParams

POSITION_AND_YAW = 0b100111111000  # use x, y, z and yaw
VELOCITY_AND_YAW_RATE = 0b010111000111  # use vx, vy, vz and yaw rate
ARDUPILOT_GUIDED, ARDUPILOT_LAND = 4, 9
#: The messages the estimate is made of: their time_boot_ms teach the mapping of the autopilot's clock.
STAMPED = ("LOCAL_POSITION_NED", "ATTITUDE_QUATERNION")


@dataclass(frozen=True)
class DriverParams:
    """How the driver talks to the autopilot (defaults here only)."""

    conventions: Literal["px4", "ardupilot"] = "px4"
    #: System and component id of the autopilot commanded.
    target_system: int = 1
    target_component: int = 1
    #: Takeoff climbs this far above where it was requested, m (the built-in controller's default).
    takeoff_altitude: float = 2.0
    #: A velocity or attitude stream older than this falls back to holding position, s.
    command_timeout_s: float = 0.5
    #: Setpoints are re-sent at this rate (PX4 needs > 2 Hz in Offboard), Hz.
    setpoint_rate_hz: float = 20.0
    #: A command without COMMAND_ACK within this time failed, s.
    ack_timeout_s: float = 3.0
    #: How the autopilot's ``time_boot_ms`` is mapped to ROS time for the stamps.
    clock: AutopilotClockParams = field(default_factory=AutopilotClockParams)

    def __post_init__(self):
        require(self.conventions in ("px4", "ardupilot"), f"conventions must be px4 or ardupilot, got {self.conventions!r}")
        require(1 <= self.target_system <= 255, f"target_system must be in 1..255, got {self.target_system}")
        require_positive(self, "takeoff_altitude", "command_timeout_s", "setpoint_rate_hz", "ack_timeout_s")


@dataclass(frozen=True)
class Estimate:
    """The autopilot's state estimate in aerial_sim's frames (map ENU, base_link FLU)."""

    #: When the autopilot measured the position, on the ROS clock (its ``time_boot_ms`` mapped), s.
    time_s: float
    position: tuple[float, float, float]
    velocity_world: tuple[float, float, float]
    orientation: tuple[float, float, float, float]
    angular_velocity_body: tuple[float, float, float]


class DriverRejected(ValueError):
    """A request the driver refuses before sending anything (the message says why)."""


class AutopilotDriver:
    """State of the commanded autopilot and the messages that carry each request (no I/O here)."""

    def __init__(self, params: DriverParams):
        self.params = params
        self.heartbeat = None
        self.armed = False
        self.flight_mode: modes.FlightMode | str | None = None
        self.landed_state = mav.MAV_LANDED_STATE_UNDEFINED
        self.last_statustext: tuple[float, str] | None = None  # (receive time, text): why a command was refused
        self.amsl_m: float | None = None
        self._position = self._velocity = None
        self._orientation = self._rates = None
        self.last_position_time_s = -math.inf
        #: The autopilot's clock mapped to ROS time, and the ROS time of the newest position.
        self.clock = AutopilotClock(params.clock)
        self.position_stamp_s = math.nan
        self.setpoint: tuple[str, object] | None = None  # ("position", msg) / ("velocity", msg) / ...
        self.setpoint_time_s = -math.inf
        self._mode_requested_s = -math.inf

    # -- from the autopilot ----------------------------------------------------------------
    def receive(self, message, time_s: float, ros_time_s: float = math.nan) -> None:
        """Take in one frame received at ``time_s`` (the caller's monotonic clock, for timeouts) and
        ``ros_time_s`` (the ROS clock, for the stamps; NaN: stamps are receipt times)."""
        if message.get_srcSystem() != self.params.target_system:
            return
        kind = message.get_type()
        stamp_s = ros_time_s
        if kind in STAMPED and message.get_srcComponent() == self.params.target_component:
            stamp_s = self.clock.stamp(message.time_boot_ms / 1000.0, ros_time_s)
        if kind == "HEARTBEAT" and message.get_srcComponent() == self.params.target_component:
            self.heartbeat = message
            self.armed = bool(message.base_mode & modes.MAV_MODE_FLAG_SAFETY_ARMED)
            if self.params.conventions == "px4":
                try:
                    self.flight_mode = modes.decode_custom_mode(int(message.custom_mode))
                except modes.UnknownMode:
                    self.flight_mode = f"custom {message.custom_mode}"
            else:
                self.flight_mode = f"ArduPilot mode {message.custom_mode}"
        elif kind == "LOCAL_POSITION_NED":
            self._position = world_to_enu((message.x, message.y, message.z))
            self._velocity = world_to_enu((message.vx, message.vy, message.vz))
            self.last_position_time_s = time_s
            self.position_stamp_s = stamp_s
        elif kind == "ATTITUDE_QUATERNION":
            q = (message.q1, message.q2, message.q3, message.q4)
            if all(math.isfinite(c) for c in q) and sum(c * c for c in q) > 0.5:
                self._orientation = orientation_to_enu(q)
                self._rates = body_to_frd((message.rollspeed, message.pitchspeed, message.yawspeed))
        elif kind == "EXTENDED_SYS_STATE":
            self.landed_state = message.landed_state
        elif kind == "GLOBAL_POSITION_INT":
            self.amsl_m = message.alt / 1000.0
        elif kind == "STATUSTEXT":
            self.last_statustext = (time_s, str(message.text))

    def system_status(self) -> str:
        """The autopilot's MAV_STATE from its HEARTBEAT, e.g. ``standby`` once it can be armed (``unknown`` before)."""
        if self.heartbeat is None:
            return "unknown"
        state = mav.enums["MAV_STATE"].get(int(self.heartbeat.system_status))
        return state.name.removeprefix("MAV_STATE_").lower() if state is not None else str(self.heartbeat.system_status)

    def reason_since(self, time_s: float) -> str:
        """The autopilot's last STATUSTEXT if it came at or after ``time_s`` (PX4 says why it refused there)."""
        if self.last_statustext is None or self.last_statustext[0] < time_s:
            return ""
        return self.last_statustext[1]

    def estimate(self) -> Estimate | None:
        """The newest estimate, stamped when the autopilot measured its position (None before both a
        position and an attitude arrived)."""
        if self._position is None or self._orientation is None:
            return None
        return Estimate(self.position_stamp_s, self._position, self._velocity, self._orientation, self._rates)

    def controller_mode(self) -> str:
        """The built-in controller's mode name for what the autopilot is doing (for /diagnostics)."""
        if not self.armed:
            return "disarmed"
        if self.landed_state == mav.MAV_LANDED_STATE_ON_GROUND:
            return "idle"
        if self.landed_state == mav.MAV_LANDED_STATE_TAKEOFF or self.flight_mode == modes.FlightMode.TAKEOFF:
            return "takeoff"
        if self.landed_state == mav.MAV_LANDED_STATE_LANDING or self.flight_mode == modes.FlightMode.LAND:
            return "landing"
        if self.flight_mode == modes.FlightMode.OFFBOARD and self.setpoint is not None:
            return {"velocity": "velocity", "attitude": "attitude", "rates": "rates"}.get(self.setpoint[0], "hold")
        return "hold"

    # -- requests -> messages --------------------------------------------------------------
    def _command(self, command: int, *params: float):
        p = list(params) + [0.0] * (7 - len(params))
        return mav.MAVLink_command_long_message(self.params.target_system, self.params.target_component, command, 0, *p)

    def _set_mode(self, mode: modes.FlightMode):
        main = modes.custom_mode(mode)
        return self._command(mav.MAV_CMD_DO_SET_MODE, modes.MAV_MODE_FLAG_CUSTOM_MODE_ENABLED, (main >> 16) & 0xFF,
                             (main >> 24) & 0xFF)

    def _ardupilot_mode(self, number: int):
        return self._command(mav.MAV_CMD_DO_SET_MODE, modes.MAV_MODE_FLAG_CUSTOM_MODE_ENABLED, number)

    def arm_messages(self, arm: bool) -> list:
        return [self._command(mav.MAV_CMD_COMPONENT_ARM_DISARM, 1.0 if arm else 0.0)]

    def takeoff_messages(self) -> list:
        if not self.armed:
            raise DriverRejected("takeoff refused: not armed (call arm first)")
        self.setpoint = None
        if self.params.conventions == "ardupilot":
            return [self._ardupilot_mode(ARDUPILOT_GUIDED),
                    self._command(mav.MAV_CMD_NAV_TAKEOFF, 0, 0, 0, math.nan, 0, 0, self.params.takeoff_altitude)]
        if self.amsl_m is None:
            raise DriverRejected("takeoff refused: no GLOBAL_POSITION_INT from the autopilot yet")
        return [self._command(mav.MAV_CMD_NAV_TAKEOFF, 0, 0, 0, math.nan, math.nan, math.nan,
                              self.amsl_m + self.params.takeoff_altitude)]

    def land_messages(self) -> list:
        self.setpoint = None
        if self.params.conventions == "ardupilot":
            return [self._ardupilot_mode(ARDUPILOT_LAND)]
        return [self._command(mav.MAV_CMD_NAV_LAND, 0, 0, 0, math.nan, math.nan, math.nan, math.nan)]

    def _require_flyable(self, what: str, values) -> None:
        if not all(math.isfinite(float(v)) for v in values):
            raise DriverRejected(f"{what} refused: non-finite value in {list(values)}")
        if not self.armed:
            raise DriverRejected(f"{what} refused: not armed")

    def pose(self, time_s: float, position, yaw: float) -> None:
        """``cmd_pose``: hold ``position`` (map ENU) with heading ``yaw`` (ENU rad)."""
        self._require_flyable("cmd_pose", [*position, yaw])
        n, e, d = world_to_ned(position)
        self._stream(time_s, "position", mav.MAVLink_set_position_target_local_ned_message(
            0, self.params.target_system, self.params.target_component, mav.MAV_FRAME_LOCAL_NED, POSITION_AND_YAW,
            n, e, d, 0, 0, 0, 0, 0, 0, heading_to_ned(yaw), 0))

    def velocity(self, time_s: float, linear, yaw_rate: float, body_frame: bool) -> None:
        """``cmd_vel``: ``linear`` in map ENU (or base_link FLU when ``body_frame``), ``yaw_rate`` ENU rad/s."""
        self._require_flyable("cmd_vel", [*linear, yaw_rate])
        if body_frame:
            frame, (vx, vy, vz) = mav.MAV_FRAME_BODY_NED, body_to_frd(linear)
        else:
            frame, (vx, vy, vz) = mav.MAV_FRAME_LOCAL_NED, world_to_ned(linear)
        self._stream(time_s, "velocity", mav.MAVLink_set_position_target_local_ned_message(
            0, self.params.target_system, self.params.target_component, frame, VELOCITY_AND_YAW_RATE,
            0, 0, 0, vx, vy, vz, 0, 0, 0, 0, -yaw_rate))

    def attitude(self, time_s: float, orientation, throttle: float) -> None:
        self._require_flyable("cmd_attitude", [*orientation, throttle])
        if not 0.0 <= throttle <= 1.0:
            raise DriverRejected(f"cmd_attitude refused: throttle {throttle} outside [0, 1]")
        q = orientation_to_ned(orientation)
        self._stream(time_s, "attitude", mav.MAVLink_set_attitude_target_message(
            0, self.params.target_system, self.params.target_component, 0b111, q, 0, 0, 0, throttle, [0, 0, 0]))

    def rates(self, time_s: float, rates_body, throttle: float) -> None:
        self._require_flyable("cmd_rates", [*rates_body, throttle])
        if not 0.0 <= throttle <= 1.0:
            raise DriverRejected(f"cmd_rates refused: throttle {throttle} outside [0, 1]")
        p, q, r = body_to_frd(rates_body)
        self._stream(time_s, "rates", mav.MAVLink_set_attitude_target_message(
            0, self.params.target_system, self.params.target_component, 1 << 7, [1, 0, 0, 0], p, q, r, throttle,
            [0, 0, 0]))

    def _stream(self, time_s: float, kind: str, message) -> None:
        self.setpoint = (kind, message)
        self.setpoint_time_s = time_s

    def due_messages(self, time_s: float) -> list:
        """What to send on each setpoint tick: the setpoint in force (a stale stream becomes a hold of the
        position reached), and the Offboard/GUIDED request once setpoints flow."""
        if self.setpoint is None or not self.armed:
            return []
        kind, message = self.setpoint
        if kind != "position" and time_s - self.setpoint_time_s > self.params.command_timeout_s:
            if self._position is None:
                return []
            yaw = heading_to_enu(0.0) if self._orientation is None else _yaw(self._orientation)
            self.pose(time_s, self._position, yaw)
            kind, message = self.setpoint
        out = [message]
        in_mode = (self.flight_mode == modes.FlightMode.OFFBOARD if self.params.conventions == "px4"
                   else self.heartbeat is not None and self.heartbeat.custom_mode == ARDUPILOT_GUIDED)
        if not in_mode and time_s - self._mode_requested_s >= 1.0:  # asked again each second until it is
            self._mode_requested_s = time_s
            out.append(self._ardupilot_mode(ARDUPILOT_GUIDED) if self.params.conventions == "ardupilot"
                       else self._set_mode(modes.FlightMode.OFFBOARD))
        return out


def _yaw(q) -> float:
    w, x, y, z = q
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
