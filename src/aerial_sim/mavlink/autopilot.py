"""One vehicle's flight controller as a PX4-style MAVLink autopilot (pure: no ROS).

:class:`Autopilot` answers a MAVLink client the way PX4 does and flies the vehicle through the
same :class:`aerial_sim.airsim.graph.VehicleLink` as the AirSim server (the flight controller's
public ``arm``/``takeoff``/``land`` services and ``cmd_pose``/``cmd_vel``/``cmd_attitude``/
``cmd_rates`` topics), so it adds PX4's modes on top of the built-in controller:

==============  =====================================================================================
PX4 mode        what the vehicle does here (module)
==============  =====================================================================================
Takeoff         ``takeoff`` service, then ``cmd_pose`` straight up to MIS_TAKEOFF_ALT (or the
                command's altitude); Hold when within ``takeoff_tolerance_m`` (:mod:`~aerial_sim.mavlink.commander`)
Hold            hold where it is (``cmd_pose``); a DO_REPOSITION flies there first (carrot path
                at MPC_XY_CRUISE on ``cmd_vel``, as the AirSim API's moveToPosition) (:mod:`~aerial_sim.mavlink.guidance`)
Mission         the stored mission item by item (waypoint, takeoff, land, RTL, loiter time, delay,
                change speed); on the ground it takes off first; Hold at the end (:mod:`~aerial_sim.mavlink.mission_flight`)
Return          climb to RTL_RETURN_ALT, fly to home or the nearest rally point, descend to
                RTL_DESCEND_ALT, land (:mod:`~aerial_sim.mavlink.return_to_launch`)
Land            ``land`` service (the controller disarms at touchdown)
Offboard        the last SET_POSITION_TARGET_* / SET_ATTITUDE_TARGET, re-sent every tick; entering
                needs setpoints younger than COM_OF_LOSS_T; losing them -> COM_OBL_RC_ACT
                (:mod:`~aerial_sim.mavlink.offboard`, :mod:`~aerial_sim.mavlink.failsafes`); a geofence breach ->
                GF_ACTION (:mod:`~aerial_sim.mavlink.geofence`)
Position        MANUAL_CONTROL sticks as velocity (x/y: MPC_VEL_MANUAL, z: climb/descent, r: yaw
                rate) in the heading frame; centred sticks or stick loss -> hold (:mod:`~aerial_sim.mavlink.manual_control`)
Altitude        sticks as tilt, yaw rate and climb rate on ``cmd_attitude`` with an altitude: centred
                throttle holds the altitude, the horizontal position is not held
Stabilized,     sticks as tilt (MPC_MAN_TILT_MAX), yaw rate and collective thrust on ``cmd_attitude``
Manual          with a throttle (a multicopter's Manual is Stabilized, as in PX4)
Acro            sticks as body rates (MC_ACRO_*_MAX) and collective thrust on ``cmd_rates``
==============  =====================================================================================

The class itself holds the vehicle's shared state (mode, armed, home, time) and composes the parts,
each in the module named for its concern: :mod:`~aerial_sim.mavlink.commands` (COMMAND_LONG/INT, SET_MODE),
:mod:`~aerial_sim.mavlink.commander` (arming, mode switches), :mod:`~aerial_sim.mavlink.parameter_protocol`, :mod:`~aerial_sim.mavlink.telemetry` (the
streams and HEARTBEAT), and the modes above. All coordinates crossing the wire are converted in
:mod:`aerial_sim.airsim.ned` (the project's one ENU<->NED module); geodetic ones with
:mod:`aerial_sim.environment.geodesy` about the home point.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Callable

from pymavlink.dialects.v20 import common as mav

from aerial_sim.config import require, require_positive
from aerial_sim.control.controller import STANDARD_GRAVITY_M_S2
from aerial_sim.control.mixer import SEA_LEVEL_DENSITY_KG_M3
from aerial_sim.environment.geodesy import HomePoint, geodetic_to_enu
from aerial_sim.mavlink import modes
from aerial_sim.physics.battery import Battery, BatteryParams, rotor_shaft_power
from aerial_sim.mavlink.commander import Commander
from aerial_sim.mavlink.commands import Commands
from aerial_sim.mavlink.failsafes import Failsafes
from aerial_sim.mavlink.file_transfer import reply_payload
from aerial_sim.mavlink.guidance import Guidance
from aerial_sim.mavlink.manual_control import ManualControl
from aerial_sim.mavlink.geofence import check_fence_items, validate_fence_item
from aerial_sim.mavlink.mission import MissionServer, validate_rally_point
from aerial_sim.mavlink.mission_flight import MissionFlight
from aerial_sim.mavlink.modes import FlightMode
from aerial_sim.mavlink.offboard import Offboard
from aerial_sim.mavlink.parameter_protocol import ParameterProtocol
from aerial_sim.mavlink.parameters import ParameterTable
from aerial_sim.mavlink.return_to_launch import ReturnToLaunch
from aerial_sim.mavlink.telemetry import Telemetry, TelemetryRates

def _hover_thrust(vehicle) -> dict[str, float]:
    """MPC_THR_HOVER as PX4's hover thrust estimator would find it: weight over the largest collective thrust
    (the flight controller's throttle is a fraction of it), when the vehicle gives one inside PX4's range."""
    try:
        hover = vehicle.hover_controls(SEA_LEVEL_DENSITY_KG_M3, STANDARD_GRAVITY_M_S2)[0]
    except (AttributeError, IndexError, ZeroDivisionError):
        return {}
    return {"MPC_THR_HOVER": hover} if 0.1 <= hover <= 0.8 else {}


FLYING_CONTROLLER_MODES = ("takeoff", "hold", "velocity", "landing", "attitude", "rates", "motors")


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
        self.parameters = ParameterTable({"MAV_SYS_ID": system_id, "MAV_TYPE": self.mav_type,
                                          **_hover_thrust(link.vehicle), **(parameters or {})})
        capacity = self.parameters["BAT1_CAPACITY"]
        self.battery = Battery(BatteryParams(**{**self.params.battery.__dict__,
                                                "cells": int(self.parameters["BAT1_N_CELLS"]),
                                                "capacity_mah": capacity if capacity > 0 else
                                                self.params.battery.capacity_mah}))
        self.mission = MissionServer()
        self.fence_plan = MissionServer(mission_type=mav.MAV_MISSION_TYPE_FENCE, validate_item=validate_fence_item,
                                        check_items=check_fence_items)
        self.rally_plan = MissionServer(mission_type=mav.MAV_MISSION_TYPE_RALLY, validate_item=validate_rally_point)
        #: The stores of the mission protocol by MAV_MISSION_TYPE.
        self.plans = {mav.MAV_MISSION_TYPE_MISSION: self.mission, mav.MAV_MISSION_TYPE_FENCE: self.fence_plan,
                      mav.MAV_MISSION_TYPE_RALLY: self.rally_plan}
        # the shared state every part reads and the commander changes
        self.mode = FlightMode.HOLD
        self.armed = False
        self.home_enu: tuple[float, float, float] | None = None
        self.home_yaw = 0.0
        self.now = 0.0
        self.speed_m_s: float | None = None  # DO_CHANGE_SPEED in force (None: MPC_XY_CRUISE)
        self.errors = 0  # malformed frames and refused requests, for tests and diagnostics
        self._last_tick: float | None = None
        self._tasks: set[asyncio.Task] = set()
        # the parts
        self.telemetry = Telemetry(self)
        self.commander = Commander(self)
        self.commands = Commands(self)
        self.parameter_protocol = ParameterProtocol(self)
        self.guidance = Guidance(self)
        self.offboard = Offboard(self)
        self.manual = ManualControl(self)
        self.rtl = ReturnToLaunch(self)
        self.mission_flight = MissionFlight(self)
        self.failsafes = Failsafes(self)
        self._handlers = {}
        for part in (self.telemetry, self.commands, self.parameter_protocol, self.offboard, self.manual,
                     self.mission_flight):
            self._handlers.update(part.handlers())
        self._handlers["FILE_TRANSFER_PROTOCOL"] = self._on_file_transfer
        self._guides = {FlightMode.TAKEOFF: self._guide_takeoff, FlightMode.HOLD: self.guidance.follow,
                        FlightMode.OFFBOARD: self.offboard.guide, FlightMode.RTL: self.rtl.guide,
                        FlightMode.MISSION: self.mission_flight.guide,
                        **{mode: self.manual.guide for mode in modes.STICK_MODES}}

    # -- state ------------------------------------------------------------------------------
    @property
    def state(self):
        return self.link.kinematics

    @property
    def pack(self):
        """The battery the telemetry reports: the physics' pack (the link's ``battery`` stream) when the physics
        flies on one, else this autopilot's own model of it on the ``rotors`` stream (an ideal supply in the
        physics: the figures a PX4 SITL's simulated battery would show)."""
        reading = getattr(self.link, "battery", None)
        return reading if reading is not None else self.battery.state

    @property
    def cells(self) -> int:
        reading = getattr(self.link, "battery", None)
        return reading.cells if reading is not None else self.battery.params.cells

    @property
    def ready(self) -> bool:
        """Armable: the vehicle's state is here and its flight controller has reported (it reports only once it
        has odometry itself), as PX4 arms only after its preflight checks pass."""
        return self.state is not None and self.link.controller_mode is not None

    @property
    def flying(self) -> bool:
        mode = self.link.controller_mode
        return mode in FLYING_CONTROLLER_MODES if mode is not None else False

    @property
    def home_z(self) -> float:
        return self.home_enu[2] if self.home_enu else 0.0

    def relative_z(self, altitude: float, relative: bool) -> float:
        """A MAVLink altitude (AMSL, or above home) -> map z."""
        return self.home_z + altitude if relative else altitude - self.home_point.altitude

    def global_to_enu(self, lat: float, lon: float, altitude: float, relative: bool):
        e, n, _ = geodetic_to_enu(lat, lon, self.home_point.altitude, self.home_point)
        return (e, n, self.relative_z(altitude, relative))

    # -- the wire ---------------------------------------------------------------------------
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
        handler = self._handlers.get(kind)
        if handler is None:
            return
        try:
            handler(message)
        except Exception as error:  # a request must never stop the autopilot
            self.errors += 1
            self.logger.warning(f"sysid {self.system_id}: {kind} could not be handled ({type(error).__name__}: {error})")

    def _on_file_transfer(self, message) -> None:
        """MAVLink FTP: no files here, said at once (:mod:`~aerial_sim.mavlink.file_transfer`)."""
        payload = reply_payload(message.payload)
        if payload is not None:
            self.send(mav.MAVLink_file_transfer_protocol_message(0, message.get_srcSystem(), message.get_srcComponent(),
                                                               payload))

    def send(self, message) -> None:
        try:
            self.transmit(message.pack(self.mav))
        except Exception as error:
            self.logger.warning(f"sysid {self.system_id}: {message.get_type()} not sent ({error})")

    def statustext(self, severity: int, text: str) -> None:
        self.send(mav.MAVLink_statustext_message(severity, text[:50].encode(), 0, 0))

    def spawn(self, coroutine) -> None:
        """Run ``coroutine`` on the event loop, keeping a reference until it is done."""
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def heartbeat(self) -> None:
        """Send HEARTBEAT (called on a wall-clock timer at 1 Hz: a paused simulation still answers)."""
        self.send(self.telemetry.heartbeat())

    def _heartbeat(self):
        return self.telemetry.heartbeat()

    # -- the tick ---------------------------------------------------------------------------
    def tick(self, now_s: float) -> None:
        """Advance modes and send the telemetry due (every 1 / tick_hz of sim time). Never raises."""
        dt = 0.0 if self._last_tick is None or now_s < self._last_tick else now_s - self._last_tick
        self._last_tick = now_s
        self.now = now_s
        try:
            self.commander.follow_controller()
            if self.home_enu is None:
                self.commander.set_home_here()
            rotors = self.link.rotors
            if rotors is not None and dt > 0 and getattr(self.link, "battery", None) is None:
                self.battery.step(dt, rotor_shaft_power(self.link.vehicle.rotors, rotors.speeds_rad_s))
            self.failsafes.check_fence()
            if self.state is not None and self.mode in self._guides:
                self._guides[self.mode]()
            self.mission_flight.tick(now_s)
            self.telemetry.stream(now_s)
        except Exception as error:
            self.errors += 1
            self.logger.warning(f"sysid {self.system_id}: tick failed ({type(error).__name__}: {error})")

    def _guide_takeoff(self) -> None:
        if self.guidance.takeoff_z is not None and self.guidance.climbed():
            self.guidance.takeoff_z = None
            self.commander.enter(FlightMode.HOLD)
