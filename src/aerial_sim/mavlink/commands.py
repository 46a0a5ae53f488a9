"""The autopilot's command protocol: COMMAND_LONG / COMMAND_INT answered by COMMAND_ACK, and SET_MODE.

Commands run one at a time in the order they came (an asyncio lock: arming, takeoff, landing and some mode
switches wait for the flight controller's services). A refused command is acknowledged with the MAV_RESULT
PX4 gives (DENIED for a bad argument, TEMPORARILY_REJECTED for the wrong moment, UNSUPPORTED for an unknown
command), logged once and explained in a STATUSTEXT, as PX4 does.

Arming, takeoff and landing (:data:`LONG_RUNNING`) are answered once the flight controller's service has, which can
take seconds. A copy of a command still running (the same command, parameters and sender: a client's retry, whatever
its ``confirmation``) starts nothing; a copy of one of these is answered MAV_RESULT_IN_PROGRESS (progress 255:
unknown) at once, and the command IN_PROGRESS again every :data:`IN_PROGRESS_PERIOD_S` until its final ACK: the
command protocol's long-running commands (mavlink.io, services/command, "Reporting Progress"). MAVSDK waits 0.5 s
for an answer and re-sends a command three times, then gives up; after an IN_PROGRESS it waits 3 s
(``MavlinkCommandSender``: ``DEFAULT_TIMEOUT_S``, ``DEFAULT_RETRIES``, ``receive_command_ack``). Only a client that
re-sends is told IN_PROGRESS: MAVROS sends a command once and takes the first COMMAND_ACK as the answer
(``CommandPlugin::handle_command_ack``), as do simple pymavlink scripts; PX4 itself answers arming at once. Other
commands are never answered IN_PROGRESS: MAVSDK's mode switches for missions and manual control take it for a
result (``MissionImpl::report_flight_mode_change``: Busy). A copy arriving just after a retried command's final
answer is answered with that result again.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass

from pymavlink.dialects.v20 import common as mav

from aerial_sim.airsim.ned import heading_to_enu
from aerial_sim.mavlink import modes
from aerial_sim.mavlink.commander import (ACCEPTED, DENIED, FAILED, TEMPORARILY_REJECTED, UNSUPPORTED,
                                          Refused)
from aerial_sim.mavlink.modes import FlightMode, UnknownMode
from aerial_sim.mavlink.telemetry import STREAMS

#: A goto or setpoint farther than this from the vehicle is refused, m.
MAX_GOTO_DISTANCE_M = 10_000.0
#: Commands whose answer waits on the flight controller's services and whose clients wait through IN_PROGRESS
#: (MAVSDK's Action plugin drops IN_PROGRESS results: ``ActionImpl::command_result_callback``).
LONG_RUNNING = frozenset({mav.MAV_CMD_COMPONENT_ARM_DISARM, mav.MAV_CMD_NAV_TAKEOFF, mav.MAV_CMD_NAV_LAND})
#: A retried long-running command is said IN_PROGRESS again this often until its final answer (MAVSDK re-sends
#: 3 s after the last one), wall time, s.
IN_PROGRESS_PERIOD_S = 1.0
#: A copy of a retried command arriving this soon after its final answer gets that answer again (wall time), s.
RECENT_S = 1.0
#: COMMAND_ACK.progress when it is not known (the MAVLink spec: UINT8_MAX).
PROGRESS_UNKNOWN = 255


@dataclass
class _InFlight:
    """One command being run (or lately answered, ``result`` set), keyed by sender, command and parameters."""

    retried: bool = False  # a copy came while it ran
    result: int | None = None
    answered_at: float = 0.0


def _command_key(message, command: int, p: list[float], frame: int | None) -> tuple:
    """What makes two COMMAND_LONG/INT the same request (NaN parameters compare equal here)."""
    params = tuple(None if math.isnan(v) else float(v) for v in p)
    return (message.get_srcSystem(), message.get_srcComponent(), command, frame, params)


class Commands:
    """COMMAND_LONG / COMMAND_INT / SET_MODE of one :class:`~aerial_sim.mavlink.autopilot.Autopilot`."""

    def __init__(self, autopilot):
        self.ap = autopilot
        self._lock: asyncio.Lock | None = None
        self._in_flight: dict[tuple, _InFlight] = {}
        self.runs = 0  # commands started (copies answered from one in flight are not counted), for tests

    def handlers(self) -> dict:
        return {"COMMAND_LONG": self.on_command_long, "COMMAND_INT": self.on_command_int,
                "SET_MODE": self.on_set_mode}

    def on_command_long(self, message) -> None:
        params = [message.param1, message.param2, message.param3, message.param4, message.param5, message.param6,
                  message.param7]
        self._receive(message, int(message.command), params, None)

    def on_command_int(self, message) -> None:
        params = [message.param1, message.param2, message.param3, message.param4, message.x / 1e7, message.y / 1e7,
                  message.z]
        self._receive(message, int(message.command), params, int(message.frame))

    def _receive(self, message, command: int, p: list[float], frame: int | None) -> None:
        """Start a command, or answer a copy of one in flight (a retry) without running it again."""
        key = _command_key(message, command, p, frame)
        now = time.monotonic()
        known = self._in_flight.get(key)
        if known is not None:
            if known.result is None:  # still running: a retry
                known.retried = True
                if command in LONG_RUNNING:
                    self._ack(message, command, mav.MAV_RESULT_IN_PROGRESS, PROGRESS_UNKNOWN)
                return  # otherwise its final answer answers this copy too
            if now - known.answered_at < RECENT_S:
                self._ack(message, command, known.result)  # a retry that crossed the final answer on the wire
                return
        # A new request: answers kept for late retries are forgotten once their sender asks something else.
        self._in_flight = {k: v for k, v in self._in_flight.items()
                           if v.result is None or (k[:2] != key[:2] and now - v.answered_at < RECENT_S)}
        self._in_flight[key] = _InFlight()
        self.runs += 1
        self.ap.spawn(self._command(message, command, p, frame, key))

    def _ack(self, message, command: int, result: int, progress: int = 0) -> None:
        self.ap.send(mav.MAVLink_command_ack_message(command, result, progress, 0, message.get_srcSystem(),
                                                    message.get_srcComponent()))

    async def _command(self, message, command: int, p: list[float], frame: int | None, key: tuple) -> None:
        """Run the command (``_in_turn`` sends the final ACK); IN_PROGRESS every period once a client has retried it."""
        entry = self._in_flight[key]
        running = asyncio.ensure_future(self._in_turn(message, command, p, frame, key))
        try:
            # "Not done" only before _in_turn has sent the final ACK (one thread): never an IN_PROGRESS after it.
            while not (await asyncio.wait({running}, timeout=IN_PROGRESS_PERIOD_S))[0]:
                if entry.retried and command in LONG_RUNNING:
                    self._ack(message, command, mav.MAV_RESULT_IN_PROGRESS, PROGRESS_UNKNOWN)
        finally:
            if not running.done():  # cancelled: the server is closing
                running.cancel()
                self._in_flight.pop(key, None)

    async def _in_turn(self, message, command: int, p: list[float], frame: int | None, key: tuple) -> None:
        """Run one command after those before it and send its final ACK; a refusal is logged once and said in a
        STATUSTEXT."""
        ap = self.ap
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # one at a time, in the order they came
            why = None
            try:
                result = await self._run(command, p, frame)
            except Refused as refusal:
                result, why = refusal.result, str(refusal)
            except Exception as error:
                result, why = FAILED, f"{type(error).__name__}: {error}"
            if why:
                ap.errors += 1
                name = mav.enums["MAV_CMD"][command].name if command in mav.enums["MAV_CMD"] else str(command)
                ap.logger.warning(f"sysid {ap.system_id}: {name} refused: {why}")
                ap.statustext(mav.MAV_SEVERITY_WARNING, why)
            entry = self._in_flight.get(key)
            if entry is not None and entry.retried:  # kept a while for another copy already on the wire
                entry.result, entry.answered_at = result, time.monotonic()
            else:
                self._in_flight.pop(key, None)
            self._ack(message, command, result)

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
