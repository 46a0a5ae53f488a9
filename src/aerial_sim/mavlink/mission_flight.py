"""Mission mode: the mission protocol's messages routed to the store, and the stored mission flown item by item.

The store and its upload/download handshakes are :class:`aerial_sim.mavlink.mission.MissionServer`;
this module flies what it holds, as PX4's Mission mode does: on the ground (armed) it takes off first
to the first item's or MIS_TAKEOFF_ALT altitude; a waypoint is reached within its acceptance radius
(param2, else NAV_ACC_RAD) and held param1 seconds; loiter-time items hold, loiter-unlimited holds for
good, delays wait, DO_CHANGE_SPEED changes the cruise speed, DO_JUMP goes back (or on) to item param1
param2 times (-1: for ever) and then past itself, counted afresh each time the mission is started or
replaced, as PX4 counts them; land and RTL items end the flight.
Each item reached is reported in MISSION_ITEM_REACHED and the progress in MISSION_CURRENT; at the end
the vehicle holds at the last position.
"""

from __future__ import annotations

import math

from pymavlink.dialects.v20 import common as mav

from aerial_sim.airsim.ned import heading_to_enu
from aerial_sim.airsim.flight import heading
from aerial_sim.mavlink.commander import ACCEPTED, DENIED, Refused
from aerial_sim.mavlink.mission import DO_COMMANDS, MissionItem, plan_type
from aerial_sim.mavlink.modes import FlightMode


class MissionFlight:
    """Mission mode of one :class:`~aerial_sim.mavlink.autopilot.Autopilot` (``ap.mission`` is the store)."""

    def __init__(self, autopilot):
        self.ap = autopilot
        self.phase: str | None = None
        self.state = mav.MISSION_STATE_NO_MISSION
        self._wait_until = 0.0
        self.jumps_done: dict[int, int] = {}  # DO_JUMP item -> jumps taken

    def handlers(self) -> dict:
        now = lambda: self.ap.now  # noqa: E731
        return {"MISSION_COUNT": lambda m: self.route(m, lambda store: store.on_count(m, now())),
                "MISSION_ITEM_INT": lambda m: self.route(m, lambda store: store.on_item(m, now())),
                "MISSION_ITEM": lambda m: self.route(m, lambda store: store.on_item(m, now())),
                "MISSION_REQUEST_LIST": lambda m: self.route(m, lambda store: store.on_request_list(m)),
                "MISSION_REQUEST_INT": lambda m: self.route(m, lambda store: store.on_request(m)),
                "MISSION_REQUEST": lambda m: self.route(m, lambda store: store.on_request(m)),
                "MISSION_CLEAR_ALL": self.on_mission_clear_all,
                "MISSION_SET_CURRENT": self.on_mission_set_current}

    def route(self, message, call) -> None:
        """Hand a mission-protocol message to the store of its plan type (mission, fence, rally)."""
        ap = self.ap
        kind = plan_type(message)
        store = ap.plans.get(kind)
        if store is None:
            ap.errors += 1
            ap.logger.warning(f"sysid {ap.system_id}: {message.get_type()} for mission type {kind}: not supported "
                              "(0 mission, 1 fence, 2 rally)")
            ap.send(mav.MAVLink_mission_ack_message(message.get_srcSystem(), message.get_srcComponent(),
                                                    mav.MAV_MISSION_UNSUPPORTED, kind))
            return
        self.reply(call(store), store)

    def on_mission_clear_all(self, message) -> None:
        """MISSION_CLEAR_ALL: one plan type, or every one (MAV_MISSION_TYPE_ALL), answered by one MISSION_ACK."""
        if plan_type(message) != mav.MAV_MISSION_TYPE_ALL:
            self.route(message, lambda store: store.on_clear(message))
            return
        replies = []
        for store in self.ap.plans.values():
            replies = store.on_clear(message)
            self.reply([], store)
        self.reply(replies, self.ap.mission)

    # -- the protocol -----------------------------------------------------------------------
    def on_mission_set_current(self, message) -> None:
        ap = self.ap
        if not ap.mission.set_current(int(message.seq)):
            ap.errors += 1
            ap.logger.warning(f"sysid {ap.system_id}: {ap.mission.last_error}")
            ap.statustext(mav.MAV_SEVERITY_WARNING, ap.mission.last_error)
        elif ap.mode == FlightMode.MISSION:
            self.phase = "start"
        ap.send(ap.telemetry.mission_current())

    def reply(self, replies: list, store=None) -> None:
        """Send a store's answers; log its error once; act on a new plan (the mission flown restarts; a new
        fence or rally plan is used from the next tick)."""
        ap = self.ap
        store = store or ap.mission
        what = {mav.MAV_MISSION_TYPE_FENCE: "geofence", mav.MAV_MISSION_TYPE_RALLY: "rally plan"}.get(
            store.mission_type, "mission")
        if store.last_error:
            ap.errors += 1
            ap.logger.warning(f"sysid {ap.system_id}: {what}: {store.last_error}")
            store.last_error = None
        for reply in replies:
            ap.send(reply)
        if not store.changed:
            return
        store.changed = False
        ap.logger.info(f"sysid {ap.system_id}: {what} of {len(store.items)} items stored")
        if store is not ap.mission:
            return
        self.jumps_done.clear()
        if ap.mode == FlightMode.MISSION:
            if store.items:
                self.phase = "start"
            else:
                ap.commander.enter(FlightMode.HOLD)

    def tick(self, now_s: float) -> None:
        """The stores' timeouts and retries."""
        for store in self.ap.plans.values():
            self.reply(store.tick(now_s), store)

    async def start(self, first: float) -> int:
        """MAV_CMD_MISSION_START from item ``first`` (negative or NaN: the current one)."""
        store = self.ap.mission
        if not store.items:
            raise Refused(DENIED, "MISSION_START: no mission uploaded")
        if math.isfinite(first) and first >= 0 and not store.set_current(int(first)):
            raise Refused(DENIED, store.last_error)
        return await self.ap.commander.set_mode(FlightMode.MISSION)

    def set_current(self, seq: float) -> int:
        """MAV_CMD_DO_SET_MISSION_CURRENT."""
        store = self.ap.mission
        if not (math.isfinite(seq) and store.set_current(int(seq))):
            raise Refused(DENIED, store.last_error or f"mission item {seq} does not exist")
        if self.ap.mode == FlightMode.MISSION:
            self.phase = "start"
        self.ap.send(self.ap.telemetry.mission_current())
        return ACCEPTED

    def reset(self, start: bool) -> None:
        """Entering Mission (``start``: from the current item, or the first once finished) or leaving it."""
        if start:
            store = self.ap.mission
            if store.current >= len(store.items):
                store.current = 0
            if store.current == 0:
                self.jumps_done.clear()  # flown from the start: every jump counts again
            self.phase = "start"
        else:
            self.phase = None

    # -- flying it --------------------------------------------------------------------------
    def guide(self) -> None:
        ap = self.ap
        guidance = ap.guidance
        items = ap.mission.items
        if not items:
            ap.commander.enter(FlightMode.HOLD)
            return
        index = ap.mission.current
        if index >= len(items):
            return  # finished: holding at the last position
        item = items[index]
        state = ap.state
        phase = self.phase
        if phase == "start":
            self.state = mav.MISSION_STATE_ACTIVE
            ap.send(ap.telemetry.mission_current())
            if not ap.flying and item.command not in DO_COMMANDS:
                if not ap.armed:
                    return  # PX4 waits for arming in Mission mode
                # On the ground: take off first (PX4's implicit takeoff to the item's or MIS_TAKEOFF_ALT altitude).
                altitude = item.altitude if item.command in (mav.MAV_CMD_NAV_TAKEOFF, mav.MAV_CMD_NAV_WAYPOINT) else math.nan
                target_z = self._item_z(item) if math.isfinite(altitude) else math.nan
                minimum = ap.relative_z(ap.parameters["MIS_TAKEOFF_ALT"], True)
                self.phase = "taking off"
                ap.spawn(self._takeoff(max(target_z, minimum) if math.isfinite(target_z) else minimum))
                return
            self._start_item(item)
        elif phase == "taking off":
            pass  # the takeoff service call is under way
        elif phase == "fly to land":
            if guidance.follow():
                self.phase = "landing"
                ap.spawn(guidance.land())
        elif phase == "climb":
            if guidance.climbed():
                guidance.takeoff_z = None
                self.phase = "start" if item.command != mav.MAV_CMD_NAV_TAKEOFF else None
                if item.command == mav.MAV_CMD_NAV_TAKEOFF:
                    self._item_done(item)
        elif phase == "fly":
            self._fly(item)
        elif phase == "wait":
            if ap.now >= self._wait_until:
                self._next_item()
        elif phase == "landing":
            if not ap.armed or ap.link.controller_mode == "disarmed":
                self._item_done(item)
        elif phase == "rtl":
            ap.rtl.guide()
            if ap.rtl.landing and ap.link.controller_mode == "disarmed":
                self._item_done(item)

    def _fly(self, item: MissionItem) -> None:
        ap = self.ap
        state = ap.state
        acceptance = item.param2 if item.command == mav.MAV_CMD_NAV_WAYPOINT and item.param2 > 0 else \
            ap.parameters["NAV_ACC_RAD"]
        done = ap.guidance.follow()
        goal = ap.guidance.goal
        if done or (goal is not None and math.dist(goal, state.position) <= acceptance
                    and item.command == mav.MAV_CMD_NAV_WAYPOINT and item.param1 <= 0):
            if not done:
                ap.guidance.goto = None
            wait = item.param1 if item.command in (mav.MAV_CMD_NAV_WAYPOINT, mav.MAV_CMD_NAV_LOITER_TIME) else 0.0
            ap.send(mav.MAVLink_mission_item_reached_message(item.seq))
            if item.command == mav.MAV_CMD_NAV_LOITER_UNLIM:
                self.phase = "loiter"
            elif math.isfinite(wait) and wait > 0:
                if not done:
                    ap.link.send_pose(goal, heading(state.orientation))
                self.phase, self._wait_until = "wait", ap.now + wait
            else:
                self._next_item()

    async def _takeoff(self, target_z: float) -> None:
        ap = self.ap
        answer = await ap.link.takeoff()
        if ap.mode != FlightMode.MISSION:
            return
        if not answer.success:
            ap.logger.warning(f"sysid {ap.system_id}: mission takeoff refused: {answer.message}; holding")
            ap.commander.enter(FlightMode.HOLD)
            return
        ap.guidance.begin_takeoff(target_z)
        self.phase = "climb"

    def _item_z(self, item: MissionItem) -> float:
        return self.ap.relative_z(item.altitude, item.relative_altitude)

    def _start_item(self, item: MissionItem) -> None:
        ap = self.ap
        state = ap.state
        command = item.command
        if command == mav.MAV_CMD_DO_JUMP:
            self._jump(item)
        elif command == mav.MAV_CMD_DO_CHANGE_SPEED:
            if math.isfinite(item.param2) and item.param2 > 0:
                ap.speed_m_s = min(item.param2, ap.parameters["MPC_XY_VEL_MAX"])
            self._next_item()
        elif command == mav.MAV_CMD_NAV_DELAY:
            self.phase, self._wait_until = "wait", ap.now + max(item.param1, 0.0)
        elif command == mav.MAV_CMD_NAV_TAKEOFF:
            ap.guidance.begin_takeoff(max(self._item_z(item), state.position[2]))
            self.phase = "climb"
        elif command == mav.MAV_CMD_NAV_LAND:
            if item.has_position:
                e, n, _ = ap.global_to_enu(item.latitude, item.longitude, 0.0, True)
                if math.hypot(e - state.position[0], n - state.position[1]) > ap.params.arrive_tolerance_m:
                    ap.guidance.fly_to((e, n, state.position[2]), None)
                    self.phase = "fly to land"
                    return
            self.phase = "landing"
            ap.spawn(ap.guidance.land())
        elif command == mav.MAV_CMD_NAV_RETURN_TO_LAUNCH:
            ap.rtl.reset(True)
            self.phase = "rtl"
        else:  # waypoint, loiter time, loiter unlimited
            if item.has_position:
                goal = ap.global_to_enu(item.latitude, item.longitude, item.altitude, item.relative_altitude)
            else:
                goal = tuple(state.position)
            yaw = heading_to_enu(math.radians(item.param4)) if (command == mav.MAV_CMD_NAV_WAYPOINT
                                                               and math.isfinite(item.param4)) else None
            ap.guidance.fly_to(goal, yaw)
            self.phase = "fly"

    def _jump(self, item: MissionItem) -> None:
        """DO_JUMP: to item param1 while fewer than param2 jumps were taken (-1: always), else past it."""
        done = self.jumps_done.get(item.seq, 0)
        if item.param2 < 0 or done < item.param2:
            self.jumps_done[item.seq] = done + 1
            self.ap.mission.current = int(item.param1)
            self.phase = "start"
            self.ap.logger.info(f"sysid {self.ap.system_id}: mission item {item.seq}: jump to {int(item.param1)} "
                                f"({done + 1} of {'ever' if item.param2 < 0 else int(item.param2)})")
        else:
            self._next_item()

    def _item_done(self, item: MissionItem) -> None:
        self.ap.send(mav.MAVLink_mission_item_reached_message(item.seq))
        self._next_item()

    def _next_item(self) -> None:
        ap = self.ap
        store = ap.mission
        store.current += 1
        if store.current >= len(store.items):
            self.state = mav.MISSION_STATE_COMPLETE
            store.current = len(store.items) - 1
            self.phase = "done"
            ap.logger.info(f"sysid {ap.system_id}: mission complete")
            if ap.flying:
                ap.guidance.hold_here()
            ap.send(ap.telemetry.mission_current())
            store.current = len(store.items)  # nothing left to fly
            return
        self.phase = "start"
