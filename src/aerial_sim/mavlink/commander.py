"""Arming, takeoff and mode switching with PX4's commander rules (what may switch when, and what it starts).

PX4's ``commander`` module owns the armed state and the flight mode; so does :class:`Commander` for one
:class:`~aerial_sim.mavlink.autopilot.Autopilot`: it arms through the flight controller's ``arm``
service (refused until the vehicle reports, as PX4 refuses before its preflight checks pass; home is
set where it arms), takes off to the command's AMSL altitude or MIS_TAKEOFF_ALT, and enters a mode only
when PX4 would (Offboard needs a fresh setpoint stream, Mission an uploaded mission, Return a vehicle in
the air), then starts what the mode does.
"""

from __future__ import annotations

import math

from pymavlink.dialects.v20 import common as mav

from aerial_sim.airsim.flight import heading
from aerial_sim.mavlink import modes
from aerial_sim.mavlink.modes import FlightMode

ACCEPTED, TEMPORARILY_REJECTED, DENIED, UNSUPPORTED, FAILED = (
    mav.MAV_RESULT_ACCEPTED, mav.MAV_RESULT_TEMPORARILY_REJECTED, mav.MAV_RESULT_DENIED, mav.MAV_RESULT_UNSUPPORTED,
    mav.MAV_RESULT_FAILED)


class Refused(Exception):
    """A request refused with a MAV_RESULT and a reason (logged once, sent as STATUSTEXT)."""

    def __init__(self, result: int, why: str):
        super().__init__(why)
        self.result = result


class Commander:
    """Armed state, home and mode switches of one autopilot."""

    def __init__(self, autopilot):
        self.ap = autopilot
        self._last_controller_mode: str | None = None

    def follow_controller(self) -> None:
        """Armed state and landing from the controller's own mode (it disarms at touchdown by itself)."""
        ap = self.ap
        mode = ap.link.controller_mode
        if mode == self._last_controller_mode:
            return
        self._last_controller_mode = mode
        if mode == "disarmed" and ap.armed:
            ap.armed = False
            ap.logger.info(f"sysid {ap.system_id}: disarmed (mode {ap.mode.value})")
        elif mode not in (None, "disarmed"):
            ap.armed = True

    def set_home_here(self) -> None:
        state = self.ap.state
        if state is not None:
            self.ap.home_enu = tuple(state.position)
            self.ap.home_yaw = heading(state.orientation)

    async def arm(self, arm: float, force: float) -> int:
        ap = self.ap
        if arm not in (0.0, 1.0):
            raise Refused(DENIED, f"ARM_DISARM param1 must be 0 or 1, got {arm}")
        if arm == 1.0:
            if not ap.ready:
                raise Refused(TEMPORARILY_REJECTED, "arming refused: no vehicle state yet")
            if ap.mode in (FlightMode.MISSION, FlightMode.RTL, FlightMode.LAND) and not ap.flying:
                ap.mode = FlightMode.HOLD  # PX4 arms in these only to start them; MAVSDK switches to Hold first
        answer = await ap.link.arm(arm == 1.0)
        if not answer.success:
            raise Refused(TEMPORARILY_REJECTED if arm == 1.0 else DENIED, answer.message)
        ap.armed = arm == 1.0
        if ap.armed:
            self.set_home_here()  # PX4 sets home where the vehicle arms
            if ap.battery.charge <= 0:
                ap.battery.reset()
        ap.logger.info(f"sysid {ap.system_id}: {answer.message}")
        return ACCEPTED

    async def takeoff(self, altitude_amsl: float) -> int:
        ap = self.ap
        state = ap.state
        if state is None:
            raise Refused(TEMPORARILY_REJECTED, "takeoff refused: no vehicle state yet")
        if not ap.armed:
            raise Refused(TEMPORARILY_REJECTED, "takeoff refused: not armed (arm first)")
        if ap.flying and ap.link.controller_mode != "landing":
            raise Refused(TEMPORARILY_REJECTED, "takeoff refused: already flying")
        if math.isfinite(altitude_amsl):
            target_z = ap.relative_z(altitude_amsl, relative=False)
            if not -1.0 <= target_z - state.position[2] <= 500.0:
                raise Refused(DENIED, f"takeoff altitude {altitude_amsl:g} m AMSL is {target_z - state.position[2]:+.1f} m "
                              "from the vehicle (PX4 takes param7 as AMSL; home is "
                              f"{ap.home_point.altitude:g} m)")
        else:
            target_z = ap.relative_z(ap.parameters["MIS_TAKEOFF_ALT"], relative=True)
        target_z = max(target_z, state.position[2] + 0.5)
        answer = await ap.link.takeoff()
        if not answer.success:
            raise Refused(TEMPORARILY_REJECTED, answer.message)
        ap.guidance.begin_takeoff(target_z)
        ap.mode = FlightMode.TAKEOFF
        return ACCEPTED

    async def set_mode(self, wanted: FlightMode) -> int:
        ap = self.ap
        if ap.state is None:
            raise Refused(TEMPORARILY_REJECTED, "mode change refused: no vehicle state yet")
        if wanted == ap.mode and wanted not in (FlightMode.MISSION,):
            return ACCEPTED
        if wanted == FlightMode.OFFBOARD and not ap.offboard.streaming:
            raise Refused(DENIED, "Offboard refused: no setpoint stream (send setpoints before switching)")
        if wanted == FlightMode.MISSION and not ap.mission.items:
            raise Refused(DENIED, "Mission refused: no mission uploaded")
        if wanted == FlightMode.RTL and not ap.flying:
            raise Refused(TEMPORARILY_REJECTED, "Return refused: not flying")
        if wanted == FlightMode.TAKEOFF:
            return await self.takeoff(math.nan)
        if wanted == FlightMode.LAND and ap.flying and ap.link.controller_mode != "landing":
            answer = await ap.link.land()
            if not answer.success:
                raise Refused(TEMPORARILY_REJECTED, answer.message)
        self.enter(wanted)
        return ACCEPTED

    async def set_mode_or_hold(self, mode: FlightMode) -> None:
        """Switch to ``mode``; Hold if that is refused (failsafe actions)."""
        try:
            await self.set_mode(mode)
        except Refused as refusal:
            self.ap.logger.warning(f"sysid {self.ap.system_id}: {mode.value}: {refusal}")
            self.enter(FlightMode.HOLD)

    def enter(self, wanted: FlightMode) -> None:
        """Switch mode (already accepted) and start what it does."""
        ap = self.ap
        previous, ap.mode = ap.mode, wanted
        ap.guidance.stop()
        ap.rtl.reset(wanted == FlightMode.RTL)
        ap.mission_flight.reset(wanted == FlightMode.MISSION)
        ap.manual.reset()
        if wanted in (FlightMode.HOLD, *modes.STICK_MODES) and ap.flying and ap.link.controller_mode != "landing":
            ap.guidance.hold_here()
        if previous != wanted:
            ap.logger.info(f"sysid {ap.system_id}: mode {previous.value} -> {wanted.value}")
