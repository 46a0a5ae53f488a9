"""One vehicle's flight controller as a PX4-style MAVLink autopilot (pure: no ROS).

:class:`Autopilot` answers a MAVLink client the way PX4 does and flies the vehicle through the
same :class:`aerial_sim.airsim.graph.VehicleLink` as the AirSim server (the flight controller's
public ``arm``/``takeoff``/``land`` services and ``cmd_pose``/``cmd_vel``/``cmd_attitude``/
``cmd_rates`` topics), so it adds PX4's modes on top of the built-in controller:

==============  =====================================================================================
PX4 mode        what the vehicle does here
==============  =====================================================================================
Takeoff         ``takeoff`` service, then ``cmd_pose`` straight up to MIS_TAKEOFF_ALT (or the
                command's altitude); Hold when within ``takeoff_tolerance_m``
Hold            hold where it is (``cmd_pose``); a DO_REPOSITION flies there first (carrot path
                at MPC_XY_CRUISE on ``cmd_vel``, as the AirSim API's moveToPosition)
Mission         the stored mission item by item (waypoint, takeoff, land, RTL, loiter time, delay,
                change speed); on the ground it takes off first; Hold at the end
Return          climb to RTL_RETURN_ALT above home, fly home, descend to RTL_DESCEND_ALT, land
Land            ``land`` service (the controller disarms at touchdown)
Offboard        the last SET_POSITION_TARGET_* / SET_ATTITUDE_TARGET, re-sent every tick; entering
                needs setpoints younger than COM_OF_LOSS_T; losing them -> COM_OBL_RC_ACT
Position etc.   MANUAL_CONTROL sticks as velocity (x/y: MPC_VEL_MANUAL, z: climb/descent, r: yaw
                rate) in the heading frame; centred sticks or stick loss -> hold
==============  =====================================================================================

All coordinates crossing the wire are converted in :mod:`aerial_sim.airsim.ned` (the project's one
ENU<->NED module); geodetic ones with :mod:`aerial_sim.environment.geodesy` about the home point.
Times are simulation time (``time_boot_ms`` = sim time), as PX4 SITL in lockstep reports them.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from typing import Callable

from pymavlink.dialects.v20 import common as mav

from aerial_sim.airsim.flight import (MAX_DEGREE_OF_FREEDOM, GuidanceParams, PathFollower, heading,
                                      world_velocity_from_heading, yaw_rate_command)
from aerial_sim.airsim.ned import (body_to_flu, body_to_frd, heading_to_enu, heading_to_ned, orientation_to_enu,
                                   orientation_to_ned, quaternion_to_euler, world_to_enu, world_to_ned)
from aerial_sim.config import require, require_non_negative, require_positive
from aerial_sim.environment.geodesy import HomePoint, enu_to_geodetic, geodetic_to_enu
from aerial_sim.mavlink import modes
from aerial_sim.mavlink.battery import Battery, BatteryParams, rotor_shaft_power
from aerial_sim.mavlink.mission import MissionItem, MissionServer
from aerial_sim.mavlink.modes import FlightMode, UnknownMode
from aerial_sim.mavlink.parameters import SPECS, ParameterTable, ParamRejected, from_wire, param_id_text, to_wire

ACCEPTED, TEMPORARILY_REJECTED, DENIED, UNSUPPORTED, FAILED = (
    mav.MAV_RESULT_ACCEPTED, mav.MAV_RESULT_TEMPORARILY_REJECTED, mav.MAV_RESULT_DENIED, mav.MAV_RESULT_UNSUPPORTED,
    mav.MAV_RESULT_FAILED)
FLYING_CONTROLLER_MODES = ("takeoff", "hold", "velocity", "landing", "attitude", "rates", "motors")
#: PX4 version reported in AUTOPILOT_VERSION (the conventions followed): 1.15.0, release.
PX4_VERSION = (1 << 24) | (15 << 16) | (0 << 8) | 255
CAPABILITIES = (mav.MAV_PROTOCOL_CAPABILITY_MISSION_FLOAT | mav.MAV_PROTOCOL_CAPABILITY_PARAM_FLOAT
                | mav.MAV_PROTOCOL_CAPABILITY_MISSION_INT | mav.MAV_PROTOCOL_CAPABILITY_COMMAND_INT
                | mav.MAV_PROTOCOL_CAPABILITY_PARAM_ENCODE_BYTEWISE
                | mav.MAV_PROTOCOL_CAPABILITY_SET_ATTITUDE_TARGET
                | mav.MAV_PROTOCOL_CAPABILITY_SET_POSITION_TARGET_LOCAL_NED
                | mav.MAV_PROTOCOL_CAPABILITY_SET_POSITION_TARGET_GLOBAL_INT | mav.MAV_PROTOCOL_CAPABILITY_MAVLINK2)
SENSORS = (mav.MAV_SYS_STATUS_SENSOR_3D_GYRO | mav.MAV_SYS_STATUS_SENSOR_3D_ACCEL | mav.MAV_SYS_STATUS_SENSOR_3D_MAG
           | mav.MAV_SYS_STATUS_SENSOR_ABSOLUTE_PRESSURE | mav.MAV_SYS_STATUS_SENSOR_GPS
           | mav.MAV_SYS_STATUS_SENSOR_ANGULAR_RATE_CONTROL | mav.MAV_SYS_STATUS_SENSOR_ATTITUDE_STABILIZATION
           | mav.MAV_SYS_STATUS_SENSOR_YAW_POSITION | mav.MAV_SYS_STATUS_SENSOR_Z_ALTITUDE_CONTROL
           | mav.MAV_SYS_STATUS_SENSOR_XY_POSITION_CONTROL | mav.MAV_SYS_STATUS_SENSOR_MOTOR_OUTPUTS
           | mav.MAV_SYS_STATUS_AHRS | mav.MAV_SYS_STATUS_SENSOR_BATTERY | mav.MAV_SYS_STATUS_PREARM_CHECK)
# SET_POSITION_TARGET type_mask bits (POSITION_TARGET_TYPEMASK)
IGNORE_POSITION, IGNORE_VELOCITY, IGNORE_ACCELERATION = 0b111, 0b111000, 0b111000000
IGNORE_YAW, IGNORE_YAW_RATE = 1 << 10, 1 << 11
# SET_ATTITUDE_TARGET type_mask bits (ATTITUDE_TARGET_TYPEMASK)
IGNORE_BODY_RATES, IGNORE_THRUST, IGNORE_ATTITUDE = 0b111, 1 << 6, 1 << 7


@dataclass(frozen=True)
class TelemetryRates:
    """Default streaming rates (Hz of simulation time): PX4's "onboard" profile (the 14540 link), except
    LOCAL_POSITION_NED at 50 Hz (PX4: 30) and SYS_STATUS at 2 Hz. SET_MESSAGE_INTERVAL changes them per
    message at run time, up to ``tick_hz``."""

    attitude: float = 100.0
    attitude_quaternion: float = 50.0
    local_position_ned: float = 50.0
    global_position_int: float = 50.0
    gps_raw_int: float = 5.0
    sys_status: float = 2.0
    extended_sys_state: float = 5.0
    altitude: float = 10.0
    vfr_hud: float = 10.0
    battery_status: float = 1.0
    home_position: float = 0.5
    system_time: float = 1.0
    mission_current: float = 1.0

    def __post_init__(self):
        require_non_negative(self, *self.__dataclass_fields__)


@dataclass(frozen=True)
class AutopilotParams:
    """The autopilot's behaviour outside PX4's own parameters (defaults here only)."""

    #: Guidance and telemetry tick (simulation time): setpoints re-sent, modes advanced and streams sent
    #: at this rate (the highest stream rate).
    tick_hz: float = 100.0
    #: Takeoff is over (mode Hold) within this distance of its altitude, m.
    takeoff_tolerance_m: float = 0.3
    #: RTL reaches home (and a goto its goal) within this horizontal distance, m.
    arrive_tolerance_m: float = 0.5
    #: MANUAL_CONTROL axes within this fraction of centre count as centred.
    stick_deadband: float = 0.05
    rates: TelemetryRates = field(default_factory=TelemetryRates)
    battery: BatteryParams = field(default_factory=BatteryParams)

    def __post_init__(self):
        require_positive(self, "tick_hz", "takeoff_tolerance_m", "arrive_tolerance_m")
        require(0.0 <= self.stick_deadband < 0.5, "stick_deadband must be in [0, 0.5)")


#: Message id -> (TelemetryRates field, builder method name).
STREAMS = {
    mav.MAVLINK_MSG_ID_ATTITUDE: ("attitude", "_attitude"),
    mav.MAVLINK_MSG_ID_ATTITUDE_QUATERNION: ("attitude_quaternion", "_attitude_quaternion"),
    mav.MAVLINK_MSG_ID_LOCAL_POSITION_NED: ("local_position_ned", "_local_position"),
    mav.MAVLINK_MSG_ID_GLOBAL_POSITION_INT: ("global_position_int", "_global_position"),
    mav.MAVLINK_MSG_ID_GPS_RAW_INT: ("gps_raw_int", "_gps_raw"),
    mav.MAVLINK_MSG_ID_SYS_STATUS: ("sys_status", "_sys_status"),
    mav.MAVLINK_MSG_ID_EXTENDED_SYS_STATE: ("extended_sys_state", "_extended_sys_state"),
    mav.MAVLINK_MSG_ID_ALTITUDE: ("altitude", "_altitude"),
    mav.MAVLINK_MSG_ID_VFR_HUD: ("vfr_hud", "_vfr_hud"),
    mav.MAVLINK_MSG_ID_BATTERY_STATUS: ("battery_status", "_battery_status"),
    mav.MAVLINK_MSG_ID_HOME_POSITION: ("home_position", "_home_position"),
    mav.MAVLINK_MSG_ID_SYSTEM_TIME: ("system_time", "_system_time"),
    mav.MAVLINK_MSG_ID_MISSION_CURRENT: ("mission_current", "_mission_current"),
}
#: Messages REQUEST_MESSAGE can ask for besides the streams.
ON_REQUEST = {mav.MAVLINK_MSG_ID_AUTOPILOT_VERSION: "_autopilot_version", mav.MAVLINK_MSG_ID_HEARTBEAT: "_heartbeat"}


class Refused(Exception):
    """A command refused with a MAV_RESULT and a reason (logged once, sent as STATUSTEXT)."""

    def __init__(self, result: int, why: str):
        super().__init__(why)
        self.result = result


class Autopilot:
    """PX4's MAVLink face for one vehicle.

    ``link``: the vehicle's :class:`~aerial_sim.airsim.graph.VehicleLink`; ``transmit(bytes)`` sends a
    packed frame to every client of this vehicle; ``logger``: ``info``/``warning`` callables.
    :meth:`receive` takes each decoded message (in the event loop's thread); :meth:`tick` runs the
    guidance and the telemetry, called every ``1 / tick_hz`` of simulation time.
    """

    def __init__(self, link, home: HomePoint, system_id: int, transmit: Callable[[bytes], None], logger,
                 params: AutopilotParams | None = None, parameters: dict[str, float] | None = None):
        self.link = link
        self.home_point = home
        self.system_id = system_id
        self.params = params or AutopilotParams()
        self.transmit = transmit
        self.logger = logger
        self.mav = mav.MAVLink(None, srcSystem=system_id, srcComponent=mav.MAV_COMP_ID_AUTOPILOT1)
        rotors = getattr(link.vehicle, "rotors", ())
        self.mav_type = mav.MAV_TYPE_HEXAROTOR if len(rotors) == 6 else (
            mav.MAV_TYPE_OCTOROTOR if len(rotors) == 8 else mav.MAV_TYPE_QUADROTOR)
        self.parameters = ParameterTable({"MAV_SYS_ID": system_id, "MAV_TYPE": self.mav_type, **(parameters or {})})
        self.battery = Battery(BatteryParams(**{**self.params.battery.__dict__,
                                                "cells": int(self.parameters["BAT1_N_CELLS"]),
                                                "capacity_mah": self.parameters["BAT1_CAPACITY"]
                                                if self.parameters["BAT1_CAPACITY"] > 0 else
                                                self.params.battery.capacity_mah}))
        self.mission = MissionServer()
        self.guidance = GuidanceParams()
        self.mode = FlightMode.HOLD
        self.armed = False
        self.home_enu: tuple[float, float, float] | None = None
        self.home_yaw = 0.0
        self._last_controller_mode: str | None = None
        self._rates = {msg_id: getattr(self.params.rates, name) for msg_id, (name, _) in STREAMS.items()}
        self._next_due: dict[int, float] = {}
        self._now = 0.0
        self._last_tick: float | None = None
        self._tasks: set[asyncio.Task] = set()
        self._command_lock: asyncio.Lock | None = None
        self.speed_m_s: float | None = None  # DO_CHANGE_SPEED in force (None: MPC_XY_CRUISE)
        # guidance state
        self._takeoff_z: float | None = None
        self._goto: tuple[PathFollower, float | None] | None = None
        self._goto_goal: tuple[tuple[float, float, float], float | None] | None = None
        self._rtl_phase: str | None = None
        self._mission_phase: str | None = None
        self._mission_wait_until = 0.0
        self._mission_state = mav.MISSION_STATE_NO_MISSION
        self._reached_sent: int | None = None
        self._offboard: tuple[str, tuple] | None = None
        self._offboard_time = -math.inf
        self._manual: tuple[float, float, float, float] | None = None
        self._manual_time = -math.inf
        self._manual_holding = False
        self.errors = 0  # malformed frames and refused requests, for tests and diagnostics

    # -- state ------------------------------------------------------------------------------
    @property
    def state(self):
        return self.link.kinematics

    @property
    def ready(self) -> bool:
        """Armable: the vehicle's state is here and its flight controller has reported (it reports only once it
        has odometry itself), as PX4 arms only after its preflight checks pass."""
        return self.state is not None and self.link.controller_mode is not None

    @property
    def flying(self) -> bool:
        mode = self.link.controller_mode
        return mode in FLYING_CONTROLLER_MODES if mode is not None else False

    def _follow_controller(self) -> None:
        """Armed state and landing from the controller's own mode (it disarms at touchdown by itself)."""
        mode = self.link.controller_mode
        if mode == self._last_controller_mode:
            return
        self._last_controller_mode = mode
        if mode == "disarmed" and self.armed:
            self.armed = False
            self.logger.info(f"sysid {self.system_id}: disarmed (mode {self.mode.value})")
        elif mode not in (None, "disarmed"):
            self.armed = True

    def _position(self):
        state = self.state
        return None if state is None else tuple(state.position)

    def _relative_z(self, altitude: float, relative: bool) -> float:
        """A MAVLink altitude (AMSL, or above home) -> map z."""
        home_z = self.home_enu[2] if self.home_enu else 0.0
        if relative:
            return home_z + altitude
        return altitude - self.home_point.altitude

    def _global_to_enu(self, lat: float, lon: float, altitude: float, relative: bool):
        e, n, _ = geodetic_to_enu(lat, lon, self.home_point.altitude, self.home_point)
        return (e, n, self._relative_z(altitude, relative))

    # -- receiving --------------------------------------------------------------------------
    def receive(self, message) -> None:
        """One decoded message from a client (event-loop thread). Never raises."""
        kind = message.get_type()
        if kind == "BAD_DATA":
            self.errors += 1
            reason = getattr(message, "reason", "unparseable bytes")
            self.logger.warning(f"sysid {self.system_id}: malformed MAVLink frame dropped ({reason})")
            return
        target = getattr(message, "target_system", getattr(message, "target", None))
        if target not in (None, 0, self.system_id):
            self.errors += 1
            self.logger.warning(f"sysid {self.system_id}: {kind} for system {target} ignored (this is system "
                                f"{self.system_id})")
            return
        handler = getattr(self, f"_on_{kind.lower()}", None)
        if handler is None:
            return
        try:
            handler(message)
        except Exception as error:  # a request must never stop the autopilot
            self.errors += 1
            self.logger.warning(f"sysid {self.system_id}: {kind} could not be handled ({type(error).__name__}: {error})")

    def send(self, message) -> None:
        try:
            self.transmit(message.pack(self.mav))
        except Exception as error:
            self.logger.warning(f"sysid {self.system_id}: {message.get_type()} not sent ({error})")

    def statustext(self, severity: int, text: str) -> None:
        self.send(mav.MAVLink_statustext_message(severity, text[:50].encode(), 0, 0))

    def _spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- commands ---------------------------------------------------------------------------
    def _on_command_long(self, message) -> None:
        params = [message.param1, message.param2, message.param3, message.param4, message.param5, message.param6,
                  message.param7]
        self._spawn(self._command(message, int(message.command), params, None))

    def _on_command_int(self, message) -> None:
        params = [message.param1, message.param2, message.param3, message.param4, message.x / 1e7, message.y / 1e7,
                  message.z]
        self._spawn(self._command(message, int(message.command), params, int(message.frame)))

    async def _command(self, message, command: int, p: list[float], frame: int | None) -> None:
        if self._command_lock is None:
            self._command_lock = asyncio.Lock()
        async with self._command_lock:  # one at a time, in the order they came
            try:
                result = await self._run_command(command, p, frame)
                why = None
            except Refused as refusal:
                result, why = refusal.result, str(refusal)
            except Exception as error:
                result, why = FAILED, f"{type(error).__name__}: {error}"
            if why:
                self.errors += 1
                name = mav.enums["MAV_CMD"][command].name if command in mav.enums["MAV_CMD"] else str(command)
                self.logger.warning(f"sysid {self.system_id}: {name} refused: {why}")
                self.statustext(mav.MAV_SEVERITY_WARNING, why)
            self.send(mav.MAVLink_command_ack_message(command, result, 0, 0, message.get_srcSystem(),
                                                      message.get_srcComponent()))

    async def _run_command(self, command: int, p: list[float], frame: int | None) -> int:
        if command == mav.MAV_CMD_COMPONENT_ARM_DISARM:
            return await self._arm(p[0], p[1])
        if command == mav.MAV_CMD_NAV_TAKEOFF:
            return await self._takeoff(p[6])
        if command == mav.MAV_CMD_NAV_LAND:
            return await self._set_mode(FlightMode.LAND)
        if command == mav.MAV_CMD_NAV_RETURN_TO_LAUNCH:
            return await self._set_mode(FlightMode.RTL)
        if command == mav.MAV_CMD_DO_SET_MODE:
            if not int(p[0]) & modes.MAV_MODE_FLAG_CUSTOM_MODE_ENABLED:
                raise Refused(DENIED, f"DO_SET_MODE base mode {p[0]:g}: only custom (PX4) modes are supported")
            try:
                wanted = modes.decode(p[1], p[2])
            except UnknownMode as error:
                raise Refused(DENIED, str(error)) from None
            return await self._set_mode(wanted)
        if command == mav.MAV_CMD_NAV_LOITER_UNLIM:
            return await self._set_mode(FlightMode.HOLD)
        if command == mav.MAV_CMD_DO_REPOSITION:
            return self._reposition(p, frame)
        if command == mav.MAV_CMD_DO_CHANGE_SPEED:
            return self._change_speed(p[1])
        if command == mav.MAV_CMD_SET_MESSAGE_INTERVAL:
            return self._set_interval(p[0], p[1])
        if command == mav.MAV_CMD_REQUEST_MESSAGE:
            return self._request_message(p[0])
        if command == mav.MAV_CMD_REQUEST_AUTOPILOT_CAPABILITIES:
            return self._request_message(mav.MAVLINK_MSG_ID_AUTOPILOT_VERSION)
        if command == mav.MAV_CMD_GET_HOME_POSITION:
            return self._request_message(mav.MAVLINK_MSG_ID_HOME_POSITION)
        if command == mav.MAV_CMD_MISSION_START:
            if not self.mission.items:
                raise Refused(DENIED, "MISSION_START: no mission uploaded")
            first = p[0]
            if math.isfinite(first) and first >= 0 and not self.mission.set_current(int(first)):
                raise Refused(DENIED, self.mission.last_error)
            return await self._set_mode(FlightMode.MISSION)
        if command == mav.MAV_CMD_DO_SET_MISSION_CURRENT:
            return self._set_mission_current(p[0])
        if command == mav.MAV_CMD_DO_SET_HOME:
            return self._set_home(p, frame)
        raise Refused(UNSUPPORTED, f"command {command} is not supported")

    async def _arm(self, arm: float, force: float) -> int:
        if arm not in (0.0, 1.0):
            raise Refused(DENIED, f"ARM_DISARM param1 must be 0 or 1, got {arm}")
        if arm == 1.0:
            if not self.ready:
                raise Refused(TEMPORARILY_REJECTED, "arming refused: no vehicle state yet")
            if self.mode in (FlightMode.MISSION, FlightMode.RTL, FlightMode.LAND) and not self.flying:
                self.mode = FlightMode.HOLD  # PX4 arms in these only to start them; MAVSDK switches to Hold first
        answer = await self.link.arm(arm == 1.0)
        if not answer.success:
            raise Refused(TEMPORARILY_REJECTED if arm == 1.0 else DENIED, answer.message)
        self.armed = arm == 1.0
        if self.armed:
            self._set_home_here()  # PX4 sets home where the vehicle arms
            self.battery.reset() if self.battery.charge <= 0 else None
        self.logger.info(f"sysid {self.system_id}: {answer.message}")
        return ACCEPTED

    async def _takeoff(self, altitude_amsl: float) -> int:
        state = self.state
        if state is None:
            raise Refused(TEMPORARILY_REJECTED, "takeoff refused: no vehicle state yet")
        if not self.armed:
            raise Refused(TEMPORARILY_REJECTED, "takeoff refused: not armed (arm first)")
        if self.flying and self.link.controller_mode != "landing":
            raise Refused(TEMPORARILY_REJECTED, "takeoff refused: already flying")
        if math.isfinite(altitude_amsl):
            target_z = self._relative_z(altitude_amsl, relative=False)
            if not -1.0 <= target_z - state.position[2] <= 500.0:
                raise Refused(DENIED, f"takeoff altitude {altitude_amsl:g} m AMSL is {target_z - state.position[2]:+.1f} m "
                              "from the vehicle (PX4 takes param7 as AMSL; home is "
                              f"{self.home_point.altitude:g} m)")
            target_z = max(target_z, state.position[2] + 0.5)
        else:
            target_z = self._relative_z(self.parameters["MIS_TAKEOFF_ALT"], relative=True)
            target_z = max(target_z, state.position[2] + 0.5)
        answer = await self.link.takeoff()
        if not answer.success:
            raise Refused(TEMPORARILY_REJECTED, answer.message)
        self._begin_takeoff(target_z)
        self.mode = FlightMode.TAKEOFF
        return ACCEPTED

    def _begin_takeoff(self, target_z: float) -> None:
        x, y, _ = self.state.position
        self._takeoff_z = target_z
        self._goto = None
        self.link.send_pose((x, y, target_z), heading(self.state.orientation))

    async def _set_mode(self, wanted: FlightMode) -> int:
        state = self.state
        if state is None:
            raise Refused(TEMPORARILY_REJECTED, "mode change refused: no vehicle state yet")
        if wanted == self.mode and wanted not in (FlightMode.MISSION,):
            return ACCEPTED
        if wanted == FlightMode.OFFBOARD:
            age = self._now - self._offboard_time
            if self._offboard is None or age > self.parameters["COM_OF_LOSS_T"]:
                raise Refused(DENIED, "Offboard refused: no setpoint stream (send setpoints before switching)")
        if wanted == FlightMode.MISSION and not self.mission.items:
            raise Refused(DENIED, "Mission refused: no mission uploaded")
        if wanted == FlightMode.RTL and not self.flying:
            raise Refused(TEMPORARILY_REJECTED, "Return refused: not flying")
        if wanted == FlightMode.TAKEOFF:
            return await self._takeoff(math.nan)
        if wanted == FlightMode.LAND and self.flying and self.link.controller_mode != "landing":
            answer = await self.link.land()
            if not answer.success:
                raise Refused(TEMPORARILY_REJECTED, answer.message)
        self._enter(wanted)
        return ACCEPTED

    def _enter(self, wanted: FlightMode) -> None:
        """Switch mode (already accepted) and start what it does."""
        previous, self.mode = self.mode, wanted
        self._goto = None
        self._takeoff_z = None
        self._rtl_phase = "climb" if wanted == FlightMode.RTL else None
        if wanted == FlightMode.MISSION:
            if self.mission.current >= len(self.mission.items):
                self.mission.current = 0
            self._mission_phase = "start"
            self._reached_sent = None
        else:
            self._mission_phase = None
        if wanted in (FlightMode.HOLD, *modes.STICK_MODES) and self.flying and self.link.controller_mode != "landing":
            self._hold_here()
        if previous != wanted:
            self.logger.info(f"sysid {self.system_id}: mode {previous.value} -> {wanted.value}")

    def _hold_here(self) -> None:
        state = self.state
        if state is not None:
            self.link.send_pose(tuple(state.position), heading(state.orientation))

    def _reposition(self, p: list[float], frame: int | None) -> int:
        lat, lon, alt = p[4], p[5], p[6]
        if not (math.isfinite(lat) and math.isfinite(lon) and -90 <= lat <= 90 and -180 <= lon <= 180):
            raise Refused(DENIED, f"DO_REPOSITION: latitude/longitude ({lat}, {lon}) out of range")
        if not self.flying:
            raise Refused(TEMPORARILY_REJECTED, "DO_REPOSITION refused: not flying (take off first)")
        relative = frame in (mav.MAV_FRAME_GLOBAL_RELATIVE_ALT, mav.MAV_FRAME_GLOBAL_RELATIVE_ALT_INT)
        state = self.state
        goal = list(self._global_to_enu(lat, lon, alt if math.isfinite(alt) else 0.0, relative))
        if not math.isfinite(alt):
            goal[2] = state.position[2]
        if math.dist(goal, state.position) > 10_000.0:
            raise Refused(DENIED, f"DO_REPOSITION: goal {math.dist(goal, state.position):.0f} m away (limit 10 km)")
        if goal[2] < self._relative_z(0.0, True) - 0.5:
            raise Refused(DENIED, f"DO_REPOSITION: altitude {alt:g} m is below home")
        if math.isfinite(p[0]) and p[0] > 0:
            self.speed_m_s = min(p[0], self.parameters["MPC_XY_VEL_MAX"])
        yaw = heading_to_enu(p[3]) if math.isfinite(p[3]) else None
        self._enter(FlightMode.HOLD)
        self._fly_to(tuple(goal), yaw)
        return ACCEPTED

    def _fly_to(self, goal, yaw: float | None) -> None:
        state = self.state
        speed = self.speed_m_s or self.parameters["MPC_XY_CRUISE"]
        self._goto = (PathFollower(state.position, [goal], speed, -1.0, self.guidance), yaw)

    def _change_speed(self, speed: float) -> int:
        if speed == -1.0 or speed == -2.0:
            self.speed_m_s = None if speed == -2.0 else self.speed_m_s
            return ACCEPTED
        if not (math.isfinite(speed) and 0.0 < speed <= self.parameters["MPC_XY_VEL_MAX"]):
            raise Refused(DENIED, f"DO_CHANGE_SPEED: {speed} m/s is outside (0, MPC_XY_VEL_MAX = "
                          f"{self.parameters['MPC_XY_VEL_MAX']:g}]")
        self.speed_m_s = float(speed)
        if self._goto is not None:
            self._goto[0].speed = self.speed_m_s
        return ACCEPTED

    def _set_interval(self, message_id: float, interval_us: float) -> int:
        msg_id = int(message_id) if math.isfinite(message_id) else -1
        if msg_id not in STREAMS:
            raise Refused(UNSUPPORTED, f"SET_MESSAGE_INTERVAL: message {message_id:g} is not streamed here")
        if not math.isfinite(interval_us) or interval_us < -1:
            raise Refused(DENIED, f"SET_MESSAGE_INTERVAL: interval {interval_us} us is not valid")
        if interval_us == 0:
            self._rates[msg_id] = getattr(self.params.rates, STREAMS[msg_id][0])
        elif interval_us == -1:
            self._rates[msg_id] = 0.0
        else:
            self._rates[msg_id] = min(1e6 / interval_us, self.params.tick_hz)
        self._next_due.pop(msg_id, None)
        return ACCEPTED

    def _request_message(self, message_id: float) -> int:
        msg_id = int(message_id) if math.isfinite(message_id) else -1
        builder = STREAMS[msg_id][1] if msg_id in STREAMS else ON_REQUEST.get(msg_id)
        if builder is None:
            raise Refused(UNSUPPORTED, f"REQUEST_MESSAGE: message {message_id:g} is not available")
        message = getattr(self, builder)()
        if message is None:
            raise Refused(TEMPORARILY_REJECTED, f"REQUEST_MESSAGE {msg_id}: no data yet")
        self._spawn(self._send_soon(message))  # after the COMMAND_ACK, as PX4 does
        return ACCEPTED

    async def _send_soon(self, message) -> None:
        await asyncio.sleep(0)
        self.send(message)

    def _set_mission_current(self, seq: float) -> int:
        if not (math.isfinite(seq) and self.mission.set_current(int(seq))):
            raise Refused(DENIED, self.mission.last_error or f"mission item {seq} does not exist")
        if self.mode == FlightMode.MISSION:
            self._mission_phase = "start"
        self.send(self._mission_current())
        return ACCEPTED

    def _set_home(self, p: list[float], frame: int | None) -> int:
        if p[0] == 1.0:
            self._set_home_here()
        else:
            lat, lon, alt = p[4], p[5], p[6]
            if not all(math.isfinite(v) for v in (lat, lon, alt)) or not (-90 <= lat <= 90 and -180 <= lon <= 180):
                raise Refused(DENIED, f"DO_SET_HOME: ({lat}, {lon}, {alt}) is not a position")
            self.home_enu = self._global_to_enu(lat, lon, alt, relative=False)
        self.send(self._home_position())
        return ACCEPTED

    def _set_home_here(self) -> None:
        state = self.state
        if state is not None:
            self.home_enu = tuple(state.position)
            self.home_yaw = heading(state.orientation)

    # -- other requests ---------------------------------------------------------------------
    def _on_set_mode(self, message) -> None:
        if not message.base_mode & modes.MAV_MODE_FLAG_CUSTOM_MODE_ENABLED:
            self.logger.warning(f"sysid {self.system_id}: SET_MODE without a custom mode ignored")
            return
        try:
            wanted = modes.decode_custom_mode(int(message.custom_mode))
        except UnknownMode as error:
            self.errors += 1
            self.logger.warning(f"sysid {self.system_id}: SET_MODE refused: {error}")
            return

        async def run():
            try:
                await self._set_mode(wanted)
            except Refused as refusal:
                self.logger.warning(f"sysid {self.system_id}: SET_MODE refused: {refusal}")
                self.statustext(mav.MAV_SEVERITY_WARNING, str(refusal))

        self._spawn(run())

    def _on_timesync(self, message) -> None:
        if message.tc1 == 0:
            self.send(mav.MAVLink_timesync_message(int(self._now * 1e9), message.ts1))

    def _on_param_request_list(self, message) -> None:
        for index in range(len(SPECS)):
            self.send(self._param_value(index))

    def _on_param_request_read(self, message) -> None:
        name = param_id_text(message.param_id)
        index = message.param_index
        try:
            if index < 0 or name:
                index = self.parameters.index(name)
            elif index >= len(SPECS):
                raise ParamRejected(f"no parameter with index {index}")
        except ParamRejected as error:
            self.errors += 1
            self.logger.warning(f"sysid {self.system_id}: PARAM_REQUEST_READ: {error}")
            return
        self.send(self._param_value(index))

    def _on_param_set(self, message) -> None:
        name = param_id_text(message.param_id)
        try:
            index = self.parameters.index(name)
            value = from_wire(SPECS[index], message.param_value, message.param_type)
            self.parameters.set(name, value, read_only=("MAV_SYS_ID", "MAV_TYPE", "BAT1_N_CELLS", "BAT1_CAPACITY"))
        except ParamRejected as error:
            self.errors += 1
            self.logger.warning(f"sysid {self.system_id}: PARAM_SET refused: {error}")
            self.statustext(mav.MAV_SEVERITY_WARNING, f"param: {error}")
            if name in {s.name for s in SPECS}:
                self.send(self._param_value(self.parameters.index(name)))  # the value still in force
            return
        self.send(self._param_value(index))

    def _param_value(self, index: int):
        spec = SPECS[index]
        return mav.MAVLink_param_value_message(spec.name.encode(), to_wire(spec, self.parameters.values[index]),
                                               spec.mav_type, len(SPECS), index)

    def _on_mission_count(self, message) -> None:
        self._mission_reply(self.mission.on_count(message, self._now))

    def _on_mission_item_int(self, message) -> None:
        self._mission_reply(self.mission.on_item(message, self._now))

    _on_mission_item = _on_mission_item_int

    def _on_mission_request_list(self, message) -> None:
        self._mission_reply(self.mission.on_request_list(message))

    def _on_mission_request_int(self, message) -> None:
        self._mission_reply(self.mission.on_request(message))

    _on_mission_request = _on_mission_request_int

    def _on_mission_clear_all(self, message) -> None:
        self._mission_reply(self.mission.on_clear(message))

    def _on_mission_set_current(self, message) -> None:
        if not self.mission.set_current(int(message.seq)):
            self.errors += 1
            self.logger.warning(f"sysid {self.system_id}: {self.mission.last_error}")
            self.statustext(mav.MAV_SEVERITY_WARNING, self.mission.last_error)
        elif self.mode == FlightMode.MISSION:
            self._mission_phase = "start"
        self.send(self._mission_current())

    def _mission_reply(self, replies: list) -> None:
        if self.mission.last_error:
            self.errors += 1
            self.logger.warning(f"sysid {self.system_id}: mission: {self.mission.last_error}")
            self.mission.last_error = None
        for reply in replies:
            self.send(reply)
        if self.mission.changed:
            self.mission.changed = False
            self._reached_sent = None
            if self.mode == FlightMode.MISSION:
                if self.mission.items:
                    self._mission_phase = "start"
                else:
                    self._enter(FlightMode.HOLD)
            self.logger.info(f"sysid {self.system_id}: mission of {len(self.mission.items)} items stored")

    # -- offboard and sticks ----------------------------------------------------------------
    def _on_set_position_target_local_ned(self, message) -> None:
        self._position_target(message, message.x, message.y, message.z, int(message.coordinate_frame), local=True)

    def _on_set_position_target_global_int(self, message) -> None:
        self._position_target(message, message.lat_int / 1e7, message.lon_int / 1e7, message.alt,
                              int(message.coordinate_frame), local=False)

    def _position_target(self, message, x, y, z, frame: int, local: bool) -> None:
        mask = int(message.type_mask)
        values = [x, y, z, message.vx, message.vy, message.vz, message.yaw, message.yaw_rate]
        use_position = mask & IGNORE_POSITION != IGNORE_POSITION
        use_velocity = mask & IGNORE_VELOCITY != IGNORE_VELOCITY
        used = (values[:3] if use_position else []) + (values[3:6] if use_velocity else [])
        if not use_position and not use_velocity:
            return self._refuse_setpoint("acceleration/force-only setpoints are not supported")
        if not all(math.isfinite(v) for v in used):
            return self._refuse_setpoint(f"non-finite value in {used}")
        state = self.state
        if state is None:
            return
        yaw = None if mask & IGNORE_YAW or not math.isfinite(message.yaw) else heading_to_enu(message.yaw)
        yaw_rate = 0.0 if mask & IGNORE_YAW_RATE or not math.isfinite(message.yaw_rate) else -message.yaw_rate
        body = frame in (mav.MAV_FRAME_BODY_NED, mav.MAV_FRAME_BODY_OFFSET_NED, mav.MAV_FRAME_BODY_FRD)
        if local and frame not in (mav.MAV_FRAME_LOCAL_NED, mav.MAV_FRAME_LOCAL_OFFSET_NED, mav.MAV_FRAME_BODY_NED,
                                   mav.MAV_FRAME_BODY_OFFSET_NED, mav.MAV_FRAME_BODY_FRD, mav.MAV_FRAME_LOCAL_FRD):
            return self._refuse_setpoint(f"frame {frame} is not a local frame")
        yaw_ned = heading_to_ned(heading(state.orientation))
        if use_position:
            if local:
                north, east, down = x, y, z
                if body:
                    north, east = world_velocity_from_heading(x, y, yaw_ned)
                if frame != mav.MAV_FRAME_LOCAL_NED:  # offsets from the vehicle
                    n0, e0, d0 = world_to_ned(state.position)
                    north, east, down = n0 + north, e0 + east, d0 + down
                position = world_to_enu((north, east, down))
            else:
                if not (-90 <= x <= 90 and -180 <= y <= 180):
                    return self._refuse_setpoint(f"latitude/longitude ({x}, {y}) out of range")
                relative = frame in (mav.MAV_FRAME_GLOBAL_RELATIVE_ALT, mav.MAV_FRAME_GLOBAL_RELATIVE_ALT_INT)
                position = self._global_to_enu(x, y, z, relative)
            if math.dist(position, state.position) > 10_000.0:
                return self._refuse_setpoint("position more than 10 km away")
            setpoint = ("pose", (position, yaw if yaw is not None else heading(state.orientation)))
        else:
            vn, ve, vd = message.vx, message.vy, message.vz
            if body:
                vn, ve = world_velocity_from_heading(vn, ve, yaw_ned)
            velocity = world_to_enu((vn, ve, vd))
            if math.sqrt(sum(v * v for v in velocity)) > 100.0:
                return self._refuse_setpoint("velocity above 100 m/s")
            setpoint = ("velocity", (velocity, yaw, yaw_rate))
        self._offboard = setpoint
        self._offboard_time = self._now
        if self.mode == FlightMode.OFFBOARD:
            self._fly_offboard()

    def _on_set_attitude_target(self, message) -> None:
        mask = int(message.type_mask)
        thrust = float(message.thrust)
        if mask & IGNORE_THRUST or not (math.isfinite(thrust) and 0.0 <= thrust <= 1.0):
            return self._refuse_setpoint(f"thrust {thrust} must be in [0, 1]")
        if not mask & IGNORE_ATTITUDE:
            q = tuple(float(c) for c in message.q)
            norm = math.sqrt(sum(c * c for c in q))
            if not (all(math.isfinite(c) for c in q) and 0.9 < norm < 1.1):
                return self._refuse_setpoint(f"attitude {q} is not a unit quaternion")
            setpoint = ("attitude", (orientation_to_enu(tuple(c / norm for c in q)), thrust))
        else:
            rates = (message.body_roll_rate, message.body_pitch_rate, message.body_yaw_rate)
            if not all(math.isfinite(r) for r in rates):
                return self._refuse_setpoint(f"body rates {rates} not finite")
            setpoint = ("rates", (body_to_flu(rates), thrust))
        self._offboard = setpoint
        self._offboard_time = self._now
        if self.mode == FlightMode.OFFBOARD:
            self._fly_offboard()

    def _refuse_setpoint(self, why: str) -> None:
        self.errors += 1
        self.logger.warning(f"sysid {self.system_id}: offboard setpoint refused: {why}")

    def _fly_offboard(self) -> None:
        kind, values = self._offboard
        link = self.link
        if kind == "pose":
            link.send_pose(*values)
        elif kind == "velocity":
            velocity, yaw, yaw_rate = values
            if yaw is not None and self.state is not None:
                yaw_rate = yaw_rate_command(self.guidance, heading(self.state.orientation), False, yaw,
                                            MAX_DEGREE_OF_FREEDOM)
            link.send_velocity(velocity, yaw_rate)
        elif kind == "attitude":
            link.send_attitude(values[0], None, values[1])
        elif kind == "rates":
            link.send_rates(values[0], None, values[1])

    def _on_manual_control(self, message) -> None:
        axes = (message.x / 1000.0, message.y / 1000.0, message.z / 1000.0, message.r / 1000.0)
        if not all(math.isfinite(a) for a in axes) or not (-1.0 <= axes[0] <= 1.0 and -1.0 <= axes[1] <= 1.0
                                                           and -1.0 <= axes[3] <= 1.0 and 0.0 <= axes[2] <= 1.0):
            self.errors += 1
            self.logger.warning(f"sysid {self.system_id}: MANUAL_CONTROL {axes} outside x,y,r in [-1000, 1000], "
                                "z in [0, 1000]: ignored")
            return
        self._manual = axes
        self._manual_time = self._now

    def _fly_sticks(self) -> None:
        state = self.state
        if state is None or not self.armed:
            return
        if self._manual is None or self._now - self._manual_time > self.parameters["COM_RC_LOSS_T"]:
            if not self._manual_holding and self.flying:
                self._hold_here()
            self._manual_holding = True
            return
        pitch, roll, throttle, yaw = self._manual
        band = self.params.stick_deadband
        climb = (throttle - 0.5) * 2.0
        pitch, roll, climb, yaw = (0.0 if abs(a) < band else a for a in (pitch, roll, climb, yaw))
        if pitch == roll == climb == yaw == 0.0:
            if not self._manual_holding and self.flying:
                self._hold_here()
            self._manual_holding = True
            return
        if not self.flying and climb <= 0.0:
            return  # on the ground: only raising the throttle takes off
        self._manual_holding = False
        speed = self.parameters["MPC_VEL_MANUAL"]
        north, east = world_velocity_from_heading(pitch * speed, roll * speed, heading_to_ned(heading(state.orientation)))
        vz = climb * (self.parameters["MPC_Z_VEL_MAX_UP"] if climb > 0 else self.parameters["MPC_Z_VEL_MAX_DN"])
        self.link.send_velocity(world_to_enu((north, east, -vz)), -math.radians(self.parameters["MPC_MAN_Y_MAX"]) * yaw)

    # -- the guidance tick ------------------------------------------------------------------
    def tick(self, now_s: float) -> None:
        """Advance modes and send the telemetry due (every 1 / tick_hz of sim time). Never raises."""
        dt = 0.0 if self._last_tick is None or now_s < self._last_tick else now_s - self._last_tick
        self._last_tick = now_s
        self._now = now_s
        try:
            self._follow_controller()
            if self.home_enu is None:
                self._set_home_here()
            rotors = self.link.rotors
            if rotors is not None and dt > 0:
                self.battery.step(dt, rotor_shaft_power(self.link.vehicle.rotors, rotors.speeds_rad_s))
            self._guide()
            for reply in self.mission.tick(now_s):
                self.send(reply)
            self._mission_reply([])
            self._stream(now_s)
        except Exception as error:
            self.errors += 1
            self.logger.warning(f"sysid {self.system_id}: tick failed ({type(error).__name__}: {error})")

    def _guide(self) -> None:
        state = self.state
        if state is None:
            return
        mode = self.mode
        if mode == FlightMode.TAKEOFF and self._takeoff_z is not None:
            if abs(state.position[2] - self._takeoff_z) <= self.params.takeoff_tolerance_m:
                self._takeoff_z = None
                self._enter(FlightMode.HOLD)
        elif mode == FlightMode.HOLD:
            self._follow_goto()
        elif mode == FlightMode.OFFBOARD:
            if self._now - self._offboard_time > self.parameters["COM_OF_LOSS_T"]:
                self._offboard_lost()
            else:
                self._fly_offboard()
        elif mode in modes.STICK_MODES:
            self._fly_sticks()
        elif mode == FlightMode.RTL:
            self._guide_rtl()
        elif mode == FlightMode.MISSION:
            self._guide_mission()

    def _follow_goto(self) -> bool:
        """Fly the goto under way; True once the goal is reached (or when there is none)."""
        if self._goto is None:
            return True
        follower, yaw = self._goto
        state = self.state
        velocity, reached = follower.command(state.position)
        goal = tuple(float(c) for c in follower.goal)
        if reached or math.dist(goal, state.position) <= min(self.params.arrive_tolerance_m, 0.3):
            self._goto = None
            self.link.send_pose(goal, yaw if yaw is not None else heading(state.orientation))
            return True
        rate = 0.0 if yaw is None else yaw_rate_command(self.guidance, heading(state.orientation), False, yaw,
                                                        MAX_DEGREE_OF_FREEDOM)
        self.link.send_velocity(tuple(float(v) for v in velocity), rate)
        return False

    def _offboard_lost(self) -> None:
        action = int(self.parameters["COM_OBL_RC_ACT"])
        fallback = {3: FlightMode.RTL, 4: FlightMode.LAND}.get(action, FlightMode.HOLD)
        self.logger.warning(f"sysid {self.system_id}: offboard setpoints lost for more than "
                            f"{self.parameters['COM_OF_LOSS_T']:g} s: failsafe -> {fallback.value}")
        self.statustext(mav.MAV_SEVERITY_CRITICAL, f"Failsafe: offboard lost, {fallback.value}")
        self._offboard = None
        if fallback == FlightMode.LAND and self.flying:
            self._spawn(self._set_mode_quietly(FlightMode.LAND))
        elif fallback == FlightMode.RTL and self.flying:
            self._enter(FlightMode.RTL)
        else:
            self._enter(FlightMode.HOLD)

    async def _set_mode_quietly(self, mode: FlightMode) -> None:
        try:
            await self._set_mode(mode)
        except Refused as refusal:
            self.logger.warning(f"sysid {self.system_id}: {mode.value}: {refusal}")
            self._enter(FlightMode.HOLD)

    def _guide_rtl(self) -> None:
        state = self.state
        home = self.home_enu or (0.0, 0.0, 0.0)
        x, y, z = state.position
        if self._rtl_phase == "climb":
            return_z = home[2] + self.parameters["RTL_RETURN_ALT"]
            if math.hypot(x - home[0], y - home[1]) <= self.params.arrive_tolerance_m:
                return_z = max(z, home[2] + min(self.parameters["RTL_DESCEND_ALT"], self.parameters["RTL_RETURN_ALT"]))
            self._rtl_phase = "climbing"
            if z < return_z - 0.3:
                self._fly_to((x, y, return_z), None)
            else:
                self._goto = None
        elif self._rtl_phase == "climbing":
            if self._follow_goto():
                self._rtl_phase = "return"
                self._fly_to((home[0], home[1], state.position[2]), None)
        elif self._rtl_phase == "return":
            if self._follow_goto():
                descend_z = home[2] + self.parameters["RTL_DESCEND_ALT"]
                self._rtl_phase = "descend"
                if state.position[2] > descend_z + 0.3:
                    self._fly_to((home[0], home[1], descend_z), None)
        elif self._rtl_phase == "descend":
            if self._follow_goto():
                self._rtl_phase = "wait"
                self._rtl_wait_until = self._now + max(self.parameters["RTL_LAND_DELAY"], 0.0)
        elif self._rtl_phase == "wait":
            if self.parameters["RTL_LAND_DELAY"] >= 0 and self._now >= self._rtl_wait_until:
                self._rtl_phase = "land"
                self._spawn(self._land_service())

    async def _land_service(self) -> None:
        answer = await self.link.land()
        if not answer.success:
            self.logger.warning(f"sysid {self.system_id}: land refused by the controller: {answer.message}")

    # -- missions ---------------------------------------------------------------------------
    def _guide_mission(self) -> None:
        items = self.mission.items
        if not items:
            self._enter(FlightMode.HOLD)
            return
        index = self.mission.current
        if index >= len(items):
            return  # finished: holding at the last position
        item = items[index]
        state = self.state
        phase = self._mission_phase
        if phase == "start":
            self._mission_state = mav.MISSION_STATE_ACTIVE
            self.send(self._mission_current())
            if not self.flying and item.command not in (mav.MAV_CMD_DO_CHANGE_SPEED,):
                if not self.armed:
                    return  # PX4 waits for arming in Mission mode
                # On the ground: take off first (PX4's implicit takeoff to the item's or MIS_TAKEOFF_ALT altitude).
                altitude = item.altitude if item.command in (mav.MAV_CMD_NAV_TAKEOFF, mav.MAV_CMD_NAV_WAYPOINT) else math.nan
                target_z = self._item_z(item) if math.isfinite(altitude) else math.nan
                minimum = self._relative_z(self.parameters["MIS_TAKEOFF_ALT"], True)
                self._mission_phase = "taking off"
                self._spawn(self._mission_takeoff(max(target_z, minimum) if math.isfinite(target_z) else minimum))
                return
            self._start_item(item)
        elif phase == "taking off":
            pass  # the takeoff service call is under way
        elif phase == "fly to land":
            if self._follow_goto():
                self._mission_phase = "landing"
                self._spawn(self._land_service())
        elif phase == "climb":
            if abs(state.position[2] - self._takeoff_z) <= self.params.takeoff_tolerance_m:
                self._takeoff_z = None
                self._mission_phase = "start" if item.command != mav.MAV_CMD_NAV_TAKEOFF else None
                if item.command == mav.MAV_CMD_NAV_TAKEOFF:
                    self._item_done(item)
        elif phase == "fly":
            acceptance = item.param2 if item.command == mav.MAV_CMD_NAV_WAYPOINT and item.param2 > 0 else \
                self.parameters["NAV_ACC_RAD"]
            done = self._follow_goto()
            goal = self._goto_target
            if done or (goal is not None and math.dist(goal, state.position) <= acceptance
                        and item.command == mav.MAV_CMD_NAV_WAYPOINT and item.param1 <= 0):
                if not done:
                    self._goto = None
                wait = item.param1 if item.command in (mav.MAV_CMD_NAV_WAYPOINT, mav.MAV_CMD_NAV_LOITER_TIME) else 0.0
                self.send(mav.MAVLink_mission_item_reached_message(item.seq))
                self._reached_sent = item.seq
                if item.command == mav.MAV_CMD_NAV_LOITER_UNLIM:
                    self._mission_phase = "loiter"
                elif math.isfinite(wait) and wait > 0:
                    if not done:
                        self.link.send_pose(goal, heading(state.orientation))
                    self._mission_phase, self._mission_wait_until = "wait", self._now + wait
                else:
                    self._next_item()
        elif phase == "wait":
            if self._now >= self._mission_wait_until:
                self._next_item()
        elif phase == "landing":
            if not self.armed or self.link.controller_mode == "disarmed":
                self._item_done(item)
        elif phase == "rtl":
            self._guide_rtl()
            if self._rtl_phase == "land" and self.link.controller_mode == "disarmed":
                self._item_done(item)

    async def _mission_takeoff(self, target_z: float) -> None:
        answer = await self.link.takeoff()
        if self.mode != FlightMode.MISSION:
            return
        if not answer.success:
            self.logger.warning(f"sysid {self.system_id}: mission takeoff refused: {answer.message}; holding")
            self._enter(FlightMode.HOLD)
            return
        self._begin_takeoff(target_z)
        self._mission_phase = "climb"

    def _item_z(self, item: MissionItem) -> float:
        return self._relative_z(item.altitude, item.relative_altitude)

    @property
    def _goto_target(self):
        return None if self._goto is None else tuple(float(c) for c in self._goto[0].goal)

    def _start_item(self, item: MissionItem) -> None:
        state = self.state
        command = item.command
        if command == mav.MAV_CMD_DO_CHANGE_SPEED:
            if math.isfinite(item.param2) and item.param2 > 0:
                self.speed_m_s = min(item.param2, self.parameters["MPC_XY_VEL_MAX"])
            self._next_item(reached=False)
        elif command == mav.MAV_CMD_NAV_DELAY:
            self._mission_phase, self._mission_wait_until = "wait", self._now + max(item.param1, 0.0)
        elif command == mav.MAV_CMD_NAV_TAKEOFF:
            x, y, _ = state.position
            self._takeoff_z = max(self._item_z(item), state.position[2])
            self.link.send_pose((x, y, self._takeoff_z), heading(state.orientation))
            self._mission_phase = "climb"
        elif command == mav.MAV_CMD_NAV_LAND:
            if item.has_position:
                e, n, _ = self._global_to_enu(item.latitude, item.longitude, 0.0, True)
                if math.hypot(e - state.position[0], n - state.position[1]) > self.params.arrive_tolerance_m:
                    self._fly_to((e, n, state.position[2]), None)
                    self._mission_phase = "fly to land"
                    return
            self._mission_phase = "landing"
            self._spawn(self._land_service())
        elif command == mav.MAV_CMD_NAV_RETURN_TO_LAUNCH:
            self._rtl_phase = "climb"
            self._mission_phase = "rtl"
        else:  # waypoint, loiter time, loiter unlimited
            if item.has_position:
                goal = self._global_to_enu(item.latitude, item.longitude, item.altitude, item.relative_altitude)
            else:
                goal = tuple(state.position)
            yaw = heading_to_enu(math.radians(item.param4)) if (command == mav.MAV_CMD_NAV_WAYPOINT
                                                               and math.isfinite(item.param4)) else None
            self._fly_to(goal, yaw)
            self._mission_phase = "fly"

    def _item_done(self, item: MissionItem) -> None:
        self.send(mav.MAVLink_mission_item_reached_message(item.seq))
        self._reached_sent = item.seq
        self._next_item(reached=False)

    def _next_item(self, reached: bool = True) -> None:
        self.mission.current += 1
        if self.mission.current >= len(self.mission.items):
            self._mission_state = mav.MISSION_STATE_COMPLETE
            self.mission.current = len(self.mission.items) - 1
            self._mission_phase = "done"
            self.logger.info(f"sysid {self.system_id}: mission complete")
            if self.flying:
                self._hold_here()
            self.send(self._mission_current())
            self.mission.current = len(self.mission.items)  # nothing left to fly
            return
        self._mission_phase = "start"

    # -- telemetry --------------------------------------------------------------------------
    def _stream(self, now_s: float) -> None:
        slack = 0.5 / self.params.tick_hz  # a message due before the next tick goes now (rates up to tick_hz exact)
        for msg_id, rate in self._rates.items():
            if rate <= 0.0:
                continue
            due = self._next_due.get(msg_id)
            if due is not None and now_s + slack < due:
                continue
            period = 1.0 / rate
            self._next_due[msg_id] = now_s + period if due is None or now_s - due > period else due + period
            message = getattr(self, STREAMS[msg_id][1])()
            if message is not None:
                self.send(message)

    def heartbeat(self) -> None:
        """Send HEARTBEAT (called on a wall-clock timer at 1 Hz: a paused simulation still answers)."""
        self.send(self._heartbeat())

    def _heartbeat(self):
        if not self.ready:
            status = mav.MAV_STATE_BOOT
        else:
            status = mav.MAV_STATE_ACTIVE if self.armed else mav.MAV_STATE_STANDBY
        return mav.MAVLink_heartbeat_message(self.mav_type, mav.MAV_AUTOPILOT_PX4, modes.base_mode(self.mode, self.armed),
                                             modes.custom_mode(self.mode), status, 3)

    def _ms(self) -> int:
        return int(self._now * 1000.0) & 0xFFFFFFFF

    def _attitude(self):
        state = self.state
        if state is None:
            return None
        roll, pitch, yaw = quaternion_to_euler(orientation_to_ned(state.orientation))
        p, q, r = body_to_frd(state.angular_velocity_body)
        return mav.MAVLink_attitude_message(self._ms(), roll, pitch, yaw, p, q, r)

    def _attitude_quaternion(self):
        state = self.state
        if state is None:
            return None
        w, x, y, z = orientation_to_ned(state.orientation)
        p, q, r = body_to_frd(state.angular_velocity_body)
        return mav.MAVLink_attitude_quaternion_message(self._ms(), w, x, y, z, p, q, r, [0.0, 0.0, 0.0, 0.0])

    def _local_position(self):
        state = self.state
        if state is None:
            return None
        n, e, d = world_to_ned(state.position)
        vn, ve, vd = world_to_ned(state.velocity_world)
        return mav.MAVLink_local_position_ned_message(self._ms(), n, e, d, vn, ve, vd)

    def _geodetic(self):
        state = self.state
        lat, lon, alt = enu_to_geodetic(*state.position, self.home_point)
        return lat, lon, alt

    def _global_position(self):
        state = self.state
        if state is None:
            return None
        lat, lon, alt = self._geodetic()
        if not all(math.isfinite(v) for v in (lat, lon, alt)):
            return None
        home_z = self.home_enu[2] if self.home_enu else 0.0
        vn, ve, vd = world_to_ned(state.velocity_world)
        hdg = math.degrees(heading_to_ned(heading(state.orientation))) % 360.0
        return mav.MAVLink_global_position_int_message(
            self._ms(), int(round(lat * 1e7)), int(round(lon * 1e7)), int(round(alt * 1000)),
            int(round((state.position[2] - home_z) * 1000)), _i16(vn * 100), _i16(ve * 100), _i16(vd * 100),
            int(round(hdg * 100)) % 36000)

    def _gps_raw(self):
        gps = self.link.gps
        state = self.state
        if gps is not None:
            lat, lon, alt, fix = gps.latitude, gps.longitude, gps.altitude, 3 if gps.has_fix else 1
            eph, epv = gps.eph_m, gps.epv_m
            v = gps.velocity_enu
        elif state is not None:
            lat, lon, alt = self._geodetic()
            fix, eph, epv, v = 3, 0.5, 0.8, state.velocity_world
        else:
            return None
        if not all(math.isfinite(c) for c in (lat, lon, alt)):
            return None
        speed = math.hypot(v[0], v[1])
        cog = (math.degrees(math.atan2(v[0], v[1])) % 360.0) if speed > 0.2 else 0.0
        return mav.MAVLink_gps_raw_int_message(
            int(self._now * 1e6), fix, int(round(lat * 1e7)), int(round(lon * 1e7)), int(round(alt * 1000)),
            _u16(eph * 100), _u16(epv * 100), _u16(speed * 100), int(round(cog * 100)) % 36000, 12,
            int(round(alt * 1000)), int(eph * 1000), int(epv * 1000), 100, 0, 0)

    def _sys_status(self):
        battery = self.battery.state
        healthy = SENSORS if self.ready else SENSORS & ~(mav.MAV_SYS_STATUS_SENSOR_GPS
                                                                     | mav.MAV_SYS_STATUS_PREARM_CHECK)
        return mav.MAVLink_sys_status_message(SENSORS, SENSORS, healthy, 0, int(battery.voltage_v * 1000),
                                              int(battery.current_a * 100), battery.remaining_percent, 0, 0, 0, 0, 0,
                                              0, 0, 0, 0)

    def _landed_state(self) -> int:
        controller = self.link.controller_mode
        if controller in (None, "disarmed", "idle"):
            return mav.MAV_LANDED_STATE_ON_GROUND
        if controller == "landing":
            return mav.MAV_LANDED_STATE_LANDING
        if self.mode == FlightMode.TAKEOFF or controller == "takeoff":
            return mav.MAV_LANDED_STATE_TAKEOFF
        return mav.MAV_LANDED_STATE_IN_AIR

    def _extended_sys_state(self):
        return mav.MAVLink_extended_sys_state_message(mav.MAV_VTOL_STATE_UNDEFINED, self._landed_state())

    def _altitude(self):
        state = self.state
        if state is None:
            return None
        amsl = self.home_point.altitude + state.position[2]
        home_z = self.home_enu[2] if self.home_enu else 0.0
        relative = state.position[2] - home_z
        bottom = self.link.distance.distance_m if self.link.distance is not None else math.nan
        return mav.MAVLink_altitude_message(int(self._now * 1e6), amsl, amsl, state.position[2], relative, math.nan,
                                            bottom if math.isfinite(bottom) else -1.0)

    def _vfr_hud(self):
        state = self.state
        if state is None:
            return None
        v = state.velocity_world
        speed = math.hypot(v[0], v[1])
        hdg = int(math.degrees(heading_to_ned(heading(state.orientation))) % 360)
        rotors = self.link.rotors
        throttle = 0
        if rotors is not None and self.link.vehicle.rotors:
            top = [r.max_speed_rpm * 2 * math.pi / 60 for r in self.link.vehicle.rotors]
            throttle = int(round(100 * sum(abs(s) / m for s, m in zip(rotors.speeds_rad_s, top)) / len(top)))
        return mav.MAVLink_vfr_hud_message(speed, speed, hdg, max(0, min(throttle, 100)),
                                           self.home_point.altitude + state.position[2], v[2])

    def _battery_status(self):
        battery = self.battery.state
        cells = self.battery.params.cells
        per_cell = int(battery.voltage_v / cells * 1000)
        voltages = [per_cell] * min(cells, 10) + [65535] * (10 - min(cells, 10))
        return mav.MAVLink_battery_status_message(
            0, mav.MAV_BATTERY_FUNCTION_ALL, mav.MAV_BATTERY_TYPE_LIPO, 32767, voltages, int(battery.current_a * 100),
            int(battery.consumed_mah), -1, battery.remaining_percent, 0, mav.MAV_BATTERY_CHARGE_STATE_OK
            if battery.charge > 0.15 else mav.MAV_BATTERY_CHARGE_STATE_LOW, [0, 0, 0, 0], 0, 0)

    def _home_position(self):
        if self.home_enu is None:
            return None
        lat, lon, alt = enu_to_geodetic(*self.home_enu, self.home_point)
        n, e, d = world_to_ned(self.home_enu)
        yaw = heading_to_ned(self.home_yaw)
        q = [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]
        return mav.MAVLink_home_position_message(int(round(lat * 1e7)), int(round(lon * 1e7)), int(round(alt * 1000)),
                                                 n, e, d, q, 0.0, 0.0, 0.0, int(self._now * 1e6))

    def _system_time(self):
        return mav.MAVLink_system_time_message(0, self._ms())

    def _mission_current(self):
        total = len(self.mission.items)
        state = self._mission_state if total else mav.MISSION_STATE_NO_MISSION
        if total and self.mode != FlightMode.MISSION and state == mav.MISSION_STATE_ACTIVE:
            state = mav.MISSION_STATE_PAUSED
        if total and state == mav.MISSION_STATE_NO_MISSION:
            state = mav.MISSION_STATE_NOT_STARTED
        seq = min(self.mission.current, max(total - 1, 0))
        return mav.MAVLink_mission_current_message(seq, total, state, int(self.mode == FlightMode.MISSION))

    def _autopilot_version(self):
        uid = 0x4145_5249_414C_0000 + self.system_id  # "AERIAL" + system id
        return mav.MAVLink_autopilot_version_message(CAPABILITIES, PX4_VERSION, 0, 0, 0, [0] * 8, [0] * 8, [0] * 8,
                                                     0, 0, uid, [0] * 18)


def _i16(value: float) -> int:
    return int(max(-32767, min(32767, round(value))))


def _u16(value: float) -> int:
    return int(max(0, min(65534, round(value))))


