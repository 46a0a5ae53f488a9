"""The autopilot's command protocol: COMMAND_LONG / COMMAND_INT answered by COMMAND_ACK, and SET_MODE.

Commands run one at a time in the order they came (an asyncio lock: arming and takeoff wait for the
flight controller's services). A refused command is acknowledged with the MAV_RESULT PX4 gives
(DENIED for a bad argument, TEMPORARILY_REJECTED for the wrong moment, UNSUPPORTED for an unknown
command), logged once and explained in a STATUSTEXT, as PX4 does.
"""

from __future__ import annotations

import asyncio
import math

from pymavlink.dialects.v20 import common as mav

from aerial_sim.airsim.ned import heading_to_enu
from aerial_sim.mavlink import modes
from aerial_sim.mavlink.commander import (ACCEPTED, DENIED, FAILED, TEMPORARILY_REJECTED, UNSUPPORTED,
                                          Refused)
from aerial_sim.mavlink.modes import FlightMode, UnknownMode
from aerial_sim.mavlink.telemetry import STREAMS

#: A goto or setpoint farther than this from the vehicle is refused, m.
MAX_GOTO_DISTANCE_M = 10_000.0


class Commands:
    """COMMAND_LONG / COMMAND_INT / SET_MODE of one :class:`~aerial_sim.mavlink.autopilot.Autopilot`."""

    def __init__(self, autopilot):
        self.ap = autopilot
        self._lock: asyncio.Lock | None = None

    def handlers(self) -> dict:
        return {"COMMAND_LONG": self.on_command_long, "COMMAND_INT": self.on_command_int,
                "SET_MODE": self.on_set_mode}

    def on_command_long(self, message) -> None:
        params = [message.param1, message.param2, message.param3, message.param4, message.param5, message.param6,
                  message.param7]
        self.ap.spawn(self._command(message, int(message.command), params, None))

    def on_command_int(self, message) -> None:
        params = [message.param1, message.param2, message.param3, message.param4, message.x / 1e7, message.y / 1e7,
                  message.z]
        self.ap.spawn(self._command(message, int(message.command), params, int(message.frame)))

    async def _command(self, message, command: int, p: list[float], frame: int | None) -> None:
        ap = self.ap
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # one at a time, in the order they came
            try:
                result = await self._run(command, p, frame)
                why = None
            except Refused as refusal:
                result, why = refusal.result, str(refusal)
            except Exception as error:
                result, why = FAILED, f"{type(error).__name__}: {error}"
            if why:
                ap.errors += 1
                name = mav.enums["MAV_CMD"][command].name if command in mav.enums["MAV_CMD"] else str(command)
                ap.logger.warning(f"sysid {ap.system_id}: {name} refused: {why}")
                ap.statustext(mav.MAV_SEVERITY_WARNING, why)
            ap.send(mav.MAVLink_command_ack_message(command, result, 0, 0, message.get_srcSystem(),
                                                    message.get_srcComponent()))

    async def _run(self, command: int, p: list[float], frame: int | None) -> int:
        commander = self.ap.commander
        if command == mav.MAV_CMD_COMPONENT_ARM_DISARM:
            return await commander.arm(p[0], p[1])
        if command == mav.MAV_CMD_NAV_TAKEOFF:
            return await commander.takeoff(p[6])
        if command == mav.MAV_CMD_NAV_LAND:
            return await commander.set_mode(FlightMode.LAND)
        if command == mav.MAV_CMD_NAV_RETURN_TO_LAUNCH:
            return await commander.set_mode(FlightMode.RTL)
        if command == mav.MAV_CMD_DO_SET_MODE:
            if not int(p[0]) & modes.MAV_MODE_FLAG_CUSTOM_MODE_ENABLED:
                raise Refused(DENIED, f"DO_SET_MODE base mode {p[0]:g}: only custom (PX4) modes are supported")
            try:
                wanted = modes.decode(p[1], p[2])
            except UnknownMode as error:
                raise Refused(DENIED, str(error)) from None
            return await commander.set_mode(wanted)
        if command == mav.MAV_CMD_NAV_LOITER_UNLIM:
            return await commander.set_mode(FlightMode.HOLD)
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
            return await self.ap.mission_flight.start(p[0])
        if command == mav.MAV_CMD_DO_SET_MISSION_CURRENT:
            return self.ap.mission_flight.set_current(p[0])
        if command == mav.MAV_CMD_DO_SET_HOME:
            return self._set_home(p, frame)
        raise Refused(UNSUPPORTED, f"command {command} is not supported")

    def _reposition(self, p: list[float], frame: int | None) -> int:
        ap = self.ap
        lat, lon, alt = p[4], p[5], p[6]
        if not (math.isfinite(lat) and math.isfinite(lon) and -90 <= lat <= 90 and -180 <= lon <= 180):
            raise Refused(DENIED, f"DO_REPOSITION: latitude/longitude ({lat}, {lon}) out of range")
        if not ap.flying:
            raise Refused(TEMPORARILY_REJECTED, "DO_REPOSITION refused: not flying (take off first)")
        relative = frame in (mav.MAV_FRAME_GLOBAL_RELATIVE_ALT, mav.MAV_FRAME_GLOBAL_RELATIVE_ALT_INT)
        state = ap.state
        goal = list(ap.global_to_enu(lat, lon, alt if math.isfinite(alt) else 0.0, relative))
        if not math.isfinite(alt):
            goal[2] = state.position[2]
        if math.dist(goal, state.position) > MAX_GOTO_DISTANCE_M:
            raise Refused(DENIED, f"DO_REPOSITION: goal {math.dist(goal, state.position):.0f} m away (limit 10 km)")
        if goal[2] < ap.relative_z(0.0, True) - 0.5:
            raise Refused(DENIED, f"DO_REPOSITION: altitude {alt:g} m is below home")
        if math.isfinite(p[0]) and p[0] > 0:
            ap.speed_m_s = min(p[0], ap.parameters["MPC_XY_VEL_MAX"])
        yaw = heading_to_enu(p[3]) if math.isfinite(p[3]) else None
        ap.commander.enter(FlightMode.HOLD)
        ap.guidance.fly_to(tuple(goal), yaw)
        return ACCEPTED

    def _change_speed(self, speed: float) -> int:
        ap = self.ap
        if speed == -1.0 or speed == -2.0:
            ap.speed_m_s = None if speed == -2.0 else ap.speed_m_s
            return ACCEPTED
        if not (math.isfinite(speed) and 0.0 < speed <= ap.parameters["MPC_XY_VEL_MAX"]):
            raise Refused(DENIED, f"DO_CHANGE_SPEED: {speed} m/s is outside (0, MPC_XY_VEL_MAX = "
                          f"{ap.parameters['MPC_XY_VEL_MAX']:g}]")
        ap.speed_m_s = float(speed)
        ap.guidance.set_speed(ap.speed_m_s)
        return ACCEPTED

    def _set_interval(self, message_id: float, interval_us: float) -> int:
        msg_id = int(message_id) if math.isfinite(message_id) else -1
        if msg_id not in STREAMS:
            raise Refused(UNSUPPORTED, f"SET_MESSAGE_INTERVAL: message {message_id:g} is not streamed here")
        if not math.isfinite(interval_us) or interval_us < -1:
            raise Refused(DENIED, f"SET_MESSAGE_INTERVAL: interval {interval_us} us is not valid")
        self.ap.telemetry.set_interval(msg_id, interval_us)
        return ACCEPTED

    def _request_message(self, message_id: float) -> int:
        msg_id = int(message_id) if math.isfinite(message_id) else -1
        builder = self.ap.telemetry.builder(msg_id)
        if builder is None:
            raise Refused(UNSUPPORTED, f"REQUEST_MESSAGE: message {message_id:g} is not available")
        message = builder()
        if message is None:
            raise Refused(TEMPORARILY_REJECTED, f"REQUEST_MESSAGE {msg_id}: no data yet")
        self.ap.spawn(self._send_soon(message))  # after the COMMAND_ACK, as PX4 does
        return ACCEPTED

    async def _send_soon(self, message) -> None:
        await asyncio.sleep(0)
        self.ap.send(message)

    def _set_home(self, p: list[float], frame: int | None) -> int:
        ap = self.ap
        if p[0] == 1.0:
            ap.commander.set_home_here()
        else:
            lat, lon, alt = p[4], p[5], p[6]
            if not all(math.isfinite(v) for v in (lat, lon, alt)) or not (-90 <= lat <= 90 and -180 <= lon <= 180):
                raise Refused(DENIED, f"DO_SET_HOME: ({lat}, {lon}, {alt}) is not a position")
            ap.home_enu = ap.global_to_enu(lat, lon, alt, relative=False)
        ap.send(ap.telemetry.home_position())
        return ACCEPTED

    def on_set_mode(self, message) -> None:
        ap = self.ap
        if not message.base_mode & modes.MAV_MODE_FLAG_CUSTOM_MODE_ENABLED:
            ap.logger.warning(f"sysid {ap.system_id}: SET_MODE without a custom mode ignored")
            return
        try:
            wanted = modes.decode_custom_mode(int(message.custom_mode))
        except UnknownMode as error:
            ap.errors += 1
            ap.logger.warning(f"sysid {ap.system_id}: SET_MODE refused: {error}")
            return

        async def run():
            try:
                await ap.commander.set_mode(wanted)
            except Refused as refusal:
                ap.logger.warning(f"sysid {ap.system_id}: SET_MODE refused: {refusal}")
                ap.statustext(mav.MAV_SEVERITY_WARNING, str(refusal))

        ap.spawn(run())
