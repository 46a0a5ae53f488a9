"""AirSim's flight methods: API control, arming, tasks, takeoff/land/hover, moves to positions and along
paths, velocity, yaw, attitude, rate, throttle, motor and RC commands (AIRSIM_API.md).

Long commands run as one flight task per vehicle (:mod:`aerial_sim.airsim.api` says how they end).
"""

from __future__ import annotations

import asyncio
import math
from typing import Callable

import numpy as np

from aerial_sim.airsim import flight, wire
from aerial_sim.airsim.flight import FORWARD_ONLY, PathFollower, yaw_rate_command
from aerial_sim.airsim.graph import VehicleLink
from aerial_sim.airsim.ned import body_to_flu, euler_to_quaternion, heading_to_enu, orientation_to_enu, world_to_enu
from aerial_sim.airsim.wire import RpcFault
from aerial_sim.control.geometry import wrap_angle, yaw_of
from aerial_sim.environment.geodesy import geodetic_to_enu

FLYING_MODES = {"takeoff", "hold", "velocity", "landing", "attitude", "rates", "motors"}
TAKEOFF_TIMEOUT_DEFAULT_S = 20.0


class FlightMethods:
    """AirSim's flight methods, mixed into :class:`~aerial_sim.airsim.api.AirSimApi`
    (whose state they use)."""

    # -- API control, arming, tasks ----------------------------------------------------------
    async def rpc_enableApiControl(self, is_enabled, vehicle_name=""):
        link = self.vehicle(vehicle_name)
        self._api_control[link.name] = wire.flag(is_enabled, "is_enabled")
        if not self._api_control[link.name]:
            self._cancel(link.name)

    async def rpc_isApiControlEnabled(self, vehicle_name=""):
        return self._api_control.get(self.vehicle(vehicle_name).name, False)

    async def rpc_armDisarm(self, arm, vehicle_name=""):
        """AirSim's simple_flight: False (not an error) without API control; disarming in the air stops
        the motors (the vehicle falls), as simple_flight's disarm does in any state."""
        link = self.vehicle(vehicle_name)
        arm = wire.flag(arm, "arm")
        if not self._api_control.get(link.name, False):
            self.log.warning(f"armDisarm({arm}) on {link.name}: API control is not enabled "
                             "(enableApiControl(True) first); answered False")
            return False
        if self.computer_vision:
            return False  # a ComputerVision vehicle has no motors
        if not arm:
            self._cancel(link.name)
        if not arm and self._flying(link):
            answer = await link.kill()
        else:
            answer = await link.arm(arm)
        if not answer.success:
            self.log.warning(f"armDisarm({arm}) on {link.name}: {answer.message}")
        return answer.success

    async def rpc_cancelLastTask(self, vehicle_name=""):
        self._cancel(self.vehicle(vehicle_name).name)

    def _cancel(self, name: str) -> None:
        task = self._tasks.pop(name, None)
        if task is not None and not task.done():
            task.cancel()

    async def _run(self, link: VehicleLink, body, manual: bool = False) -> bool:
        """Run flight task ``body`` (a coroutine) for ``link``, cancelling the previous one; its bool result.
        ``manual``: a moveByManual task (moveByRC feeds it instead of replacing it)."""
        self._cancel(link.name)
        task = asyncio.ensure_future(body)
        task.manual = manual
        self._tasks[link.name] = task
        try:
            return bool(await asyncio.shield(task))
        except asyncio.CancelledError:
            if task.cancelled():
                return False  # replaced by a newer command, or cancelLastTask
            raise  # our own request was cancelled (client gone): the flight task goes on
        finally:
            if self._tasks.get(link.name) is task and task.done():
                self._tasks.pop(link.name, None)

    async def _every_period(self, duration_s: float, step: Callable[[], bool]) -> bool:
        """Call ``step`` once per command period until it returns True (-> True) or ``duration_s`` passes (-> False)."""
        clock = self.graph.clock
        start = await clock.started()
        period = self.params.guidance.command_period_s
        while True:
            if step():
                return True
            if clock.now_s - start >= duration_s - 1e-9:
                return False
            await clock.sleep(min(period, max(duration_s - (clock.now_s - start), 1e-6)))

    # -- takeoff, land, hover -----------------------------------------------------------------
    async def rpc_takeoff(self, timeout_sec=TAKEOFF_TIMEOUT_DEFAULT_S, vehicle_name=""):
        link = self.vehicle(vehicle_name)
        timeout = wire.duration(timeout_sec, "timeout_sec")
        self._controlled(link)
        if self._flying(link):
            return True
        answer = await link.takeoff()
        if not answer.success:
            raise RpcFault(answer.message)
        state = self.kinematics(link)
        x, y, z = state.position
        target = (x, y, z + self.params.guidance.takeoff_height_m)
        yaw = yaw_of(state.orientation)

        def climbed() -> bool:
            link.send_pose(target, yaw)
            now = link.kinematics
            return abs(now.position[2] - target[2]) < self.params.guidance.goal_tolerance_m and abs(now.velocity_world[2]) < 0.3

        return await self._run(link, self._every_period(timeout, climbed))

    async def rpc_land(self, timeout_sec=60.0, vehicle_name=""):
        link = self.vehicle(vehicle_name)
        timeout = wire.duration(timeout_sec, "timeout_sec")
        self._controlled(link)
        if not self._flying(link):
            return True
        self._cancel(link.name)
        answer = await link.land()
        if not answer.success:
            raise RpcFault(answer.message)
        return await self._run(link, self._every_period(timeout, lambda: not self._flying(link)))

    async def rpc_hover(self, vehicle_name=""):
        link = self.vehicle(vehicle_name)
        self._controlled(link)
        self._cancel(link.name)
        state = self.kinematics(link)
        link.send_pose(state.position, yaw_of(state.orientation))
        return True

    def _flying(self, link: VehicleLink) -> bool:
        if link.controller_mode is not None:
            return link.controller_mode in FLYING_MODES
        state = link.kinematics
        if state is None:
            return False
        resting_height = 0.5 * link.vehicle.body_box_m[2] + 0.1
        return state.position[2] > resting_height or math.hypot(*state.velocity_world) > 0.2

    # -- moves: positions and paths ------------------------------------------------------------
    async def rpc_moveToPosition(self, x, y, z, velocity, timeout_sec=3e38, drivetrain=0, yaw_mode=None,
                                 lookahead=-1, adaptive_lookahead=1, vehicle_name=""):
        goal = world_to_enu([wire.number(v, n) for v, n in ((x, "x"), (y, "y"), (z, "z"))])
        return await self._follow(vehicle_name, [goal], velocity, timeout_sec, drivetrain, yaw_mode, lookahead)

    async def rpc_moveOnPath(self, path, velocity, timeout_sec=3e38, drivetrain=0, yaw_mode=None, lookahead=-1,
                             adaptive_lookahead=1, vehicle_name=""):
        if not isinstance(path, (list, tuple)) or not path:
            raise RpcFault(f"path must be a non-empty list of Vector3r, got {wire._show(path)}")
        points = [world_to_enu(wire.parse_vector3r(p, f"path[{i}]")) for i, p in enumerate(path)]
        return await self._follow(vehicle_name, points, velocity, timeout_sec, drivetrain, yaw_mode, lookahead,
                                  bool(wire.number(adaptive_lookahead, "adaptive_lookahead")))

    async def rpc_moveToZ(self, z, velocity, timeout_sec=3e38, yaw_mode=None, lookahead=-1, adaptive_lookahead=1,
                          vehicle_name=""):
        link = self.vehicle(vehicle_name)
        east, north, _ = self.kinematics(link).position
        goal = (east, north, -wire.number(z, "z"))
        return await self._follow(vehicle_name, [goal], velocity, timeout_sec, 0, yaw_mode, lookahead)

    async def rpc_moveToGPS(self, latitude, longitude, altitude, velocity, timeout_sec=3e38, drivetrain=0,
                            yaw_mode=None, lookahead=-1, adaptive_lookahead=1, vehicle_name=""):
        geodetic = [wire.number(v, n) for v, n in ((latitude, "latitude"), (longitude, "longitude"), (altitude, "altitude"))]
        goal = geodetic_to_enu(*geodetic, self.params.home)
        return await self._follow(vehicle_name, [goal], velocity, timeout_sec, drivetrain, yaw_mode, lookahead)

    async def rpc_goHome(self, timeout_sec=3e38, vehicle_name=""):
        """Back above the home point (map origin) at the current altitude, at 0.5 m/s, as AirSim's goHome."""
        link = self.vehicle(vehicle_name)
        goal = (0.0, 0.0, self.kinematics(link).position[2])
        return await self._follow(vehicle_name, [goal], 0.5, timeout_sec, 0, {"is_rate": False, "yaw_or_rate": 0.0}, -1)

    async def _follow(self, vehicle_name, points, velocity, timeout_sec, drivetrain, yaw_mode, lookahead,
                      adaptive: bool = True) -> bool:
        link = self.vehicle(vehicle_name)
        speed = wire.number(velocity, "velocity")
        if speed <= 0:
            raise RpcFault(f"velocity must be > 0 m/s, got {speed:g}")
        timeout = wire.duration(timeout_sec, "timeout_sec")
        drive, yaw_spec = self._yaw_spec(drivetrain, yaw_mode)
        carrot = wire.number(lookahead, "lookahead")
        try:
            flight.check_lookahead(self.params.guidance, speed, carrot)
        except ValueError as error:
            raise RpcFault(str(error)) from None
        self._controlled(link)
        state = self.kinematics(link)
        follower = PathFollower(state.position, points, speed, carrot, self.params.guidance, adaptive)
        final_yaw = [yaw_of(state.orientation)]

        def step() -> bool:
            now = link.kinematics
            velocity_world, done = follower.command(now.position)
            yaw = yaw_of(now.orientation)
            if done:
                if drive != FORWARD_ONLY and not yaw_spec[0]:
                    final_yaw[0] = yaw_spec[1]
                else:
                    final_yaw[0] = yaw
                link.send_pose(tuple(follower.goal), final_yaw[0])
                return True
            rate = yaw_rate_command(self.params.guidance, yaw, *yaw_spec, drive, velocity_world)
            link.send_velocity(tuple(velocity_world), rate)
            return False

        return await self._run(link, self._every_period(timeout, step))

    def _yaw_spec(self, drivetrain, yaw_mode) -> tuple[int, tuple[bool, float]]:
        """(drivetrain, (is_rate, ENU yaw or rate in rad)) from the client's values (NED, degrees)."""
        drive = wire.integer(drivetrain, "drivetrain")
        if drive not in (0, 1):
            raise RpcFault(f"drivetrain must be 0 (MaxDegreeOfFreedom) or 1 (ForwardOnly), got {drive}")
        is_rate, value = wire.parse_yaw_mode(yaw_mode if yaw_mode is not None else {})
        if drive == FORWARD_ONLY and is_rate:
            raise RpcFault("Yaw cannot be specified as rate if drivetrain is ForwardOnly")
        radians = math.radians(value)
        if drive == FORWARD_ONLY:
            return drive, (False, -radians)  # an offset: clockwise (NED) is negative in ENU
        return drive, (True, -radians) if is_rate else (False, heading_to_enu(radians))

    # -- moves: velocities ---------------------------------------------------------------------
    async def rpc_moveByVelocity(self, vx, vy, vz, duration, drivetrain=0, yaw_mode=None, vehicle_name=""):
        velocity = world_to_enu([wire.number(v, n) for v, n in ((vx, "vx"), (vy, "vy"), (vz, "vz"))])
        return await self._velocity_task(vehicle_name, velocity, None, duration, drivetrain, yaw_mode)

    async def rpc_moveByVelocityZ(self, vx, vy, z, duration, drivetrain=0, yaw_mode=None, vehicle_name=""):
        velocity = world_to_enu((wire.number(vx, "vx"), wire.number(vy, "vy"), 0.0))
        return await self._velocity_task(vehicle_name, velocity, -wire.number(z, "z"), duration, drivetrain, yaw_mode)

    async def rpc_moveByVelocityBodyFrame(self, vx, vy, vz, duration, drivetrain=0, yaw_mode=None, vehicle_name=""):
        north, east = self._body_to_world(vehicle_name, vx, vy)
        velocity = world_to_enu((north, east, wire.number(vz, "vz")))
        return await self._velocity_task(vehicle_name, velocity, None, duration, drivetrain, yaw_mode)

    async def rpc_moveByVelocityZBodyFrame(self, vx, vy, z, duration, drivetrain=0, yaw_mode=None, vehicle_name=""):
        north, east = self._body_to_world(vehicle_name, vx, vy)
        velocity = world_to_enu((north, east, 0.0))
        return await self._velocity_task(vehicle_name, velocity, -wire.number(z, "z"), duration, drivetrain, yaw_mode)

    def _body_to_world(self, vehicle_name, vx, vy) -> tuple[float, float]:
        state = self.kinematics(self.vehicle(vehicle_name))
        yaw_ned = math.pi / 2.0 - yaw_of(state.orientation)
        return flight.world_velocity_from_heading(wire.number(vx, "vx"), wire.number(vy, "vy"), yaw_ned)

    async def _velocity_task(self, vehicle_name, velocity, altitude, duration, drivetrain, yaw_mode) -> bool:
        link = self.vehicle(vehicle_name)
        seconds = wire.duration(duration)
        drive, yaw_spec = self._yaw_spec(drivetrain, yaw_mode)
        self._controlled(link)
        hold = [yaw_of(self.kinematics(link).orientation)]
        guidance = self.params.guidance

        def step() -> bool:
            now = link.kinematics
            command = list(velocity)
            if altitude is not None:
                command[2] = guidance.altitude_gain * (altitude - now.position[2])
            rate = yaw_rate_command(guidance, yaw_of(now.orientation), *yaw_spec, drive, command, hold[0])
            link.send_velocity(tuple(command), rate)
            return False

        await self._run(link, self._every_period(seconds, step))
        return True

    async def rpc_moveByManual(self, vx_max, vy_max, z_min, duration, drivetrain=0, yaw_mode=None, vehicle_name=""):
        """Fly the latest moveByRC sticks for ``duration`` (AirSim's moveByManual; moveByRC does not end it).

        Sticks in [-1, 1] (the Python client's RCData): pitch -> forward speed up to ``vx_max``, roll ->
        right speed up to ``vy_max`` (both capped at the controller's ``manual_max_speed_m_s``), throttle ->
        climb rate up to ``manual_max_climb_m_s`` (0 holds the altitude, as AirSim's throttle 0 does), yaw
        -> turns the YawMode heading (or adds to its rate) at up to ``rc_max_yaw_rate_rad_s``. ``z_min`` (NED) is the highest point allowed: no climbing above altitude ``-z_min``
        (-1e6: no limit). Sticks not valid (``is_valid`` false, or none sent yet): hold still."""
        link = self.vehicle(vehicle_name)
        limits = [min(abs(wire.number(v, n)), self.params.manual_max_speed_m_s)
                  for v, n in ((vx_max, "vx_max"), (vy_max, "vy_max"))]
        ceiling = -wire.number(z_min, "z_min")
        seconds = wire.duration(duration)
        drive, yaw_spec = self._yaw_spec(drivetrain, yaw_mode)
        self._controlled(link)
        guidance = self.params.guidance
        hold = [None]
        yaw_offset = [0.0]

        def step() -> bool:
            rc = self._rc.get(link.name)
            now = link.kinematics
            yaw = yaw_of(now.orientation)
            if rc is None or not rc["is_valid"]:
                hold[0] = hold[0] or (tuple(now.position), yaw)
                link.send_pose(*hold[0])
                return False
            hold[0] = None
            sticks = [min(max(rc[k], -1.0), 1.0) for k in ("pitch", "roll", "throttle", "yaw")]
            north, east = flight.world_velocity_from_heading(sticks[0] * limits[0], sticks[1] * limits[1],
                                                             math.pi / 2 - yaw)
            climb = sticks[2] * self.params.manual_max_climb_m_s
            if now.position[2] >= ceiling:
                climb = min(climb, guidance.altitude_gain * (ceiling - now.position[2]))
            command = (east, north, climb)
            stick_rate = -sticks[3] * self.params.rc_max_yaw_rate_rad_s  # yaw right (NED) turns clockwise
            if yaw_spec[0]:  # a yaw rate: the stick adds to it
                rate = yaw_rate_command(guidance, yaw, *yaw_spec, drive, command, yaw) + stick_rate
            else:  # a heading (or ForwardOnly's offset): the stick moves it, as AirSim adds it to yaw_or_rate
                yaw_offset[0] += stick_rate * guidance.command_period_s
                rate = yaw_rate_command(guidance, yaw, False, yaw_spec[1] + yaw_offset[0], drive, command, yaw)
            link.send_velocity(command, rate)
            return False

        async def body() -> bool:
            await self._every_period(seconds, step)
            return True  # the duration is over (AirSim: waiter.isTimeout()); a cancelled task answers False

        return await self._run(link, body(), manual=True)

    # -- moves: yaw ----------------------------------------------------------------------------
    async def rpc_rotateToYaw(self, yaw, timeout_sec=3e38, margin=5.0, vehicle_name=""):
        link = self.vehicle(vehicle_name)
        target = heading_to_enu(math.radians(wire.number(yaw, "yaw")))
        timeout = wire.duration(timeout_sec, "timeout_sec")
        tolerance = math.radians(abs(wire.number(margin, "margin")))
        self._controlled(link)
        position = self.kinematics(link).position

        def step() -> bool:
            link.send_pose(position, target)
            now = link.kinematics
            return abs(wrap_angle(yaw_of(now.orientation) - target)) <= tolerance and abs(now.angular_velocity_body[2]) < 0.2

        return await self._run(link, self._every_period(timeout, step))

    async def rpc_rotateByYawRate(self, yaw_rate, duration, vehicle_name=""):
        link = self.vehicle(vehicle_name)
        rate = -math.radians(wire.number(yaw_rate, "yaw_rate"))
        seconds = wire.duration(duration)
        self._controlled(link)
        anchor = np.asarray(self.kinematics(link).position)
        gain = self.params.guidance.approach_gain

        def step() -> bool:
            hold = gain * (anchor - np.asarray(link.kinematics.position))
            link.send_velocity(tuple(hold), rate)
            return False

        await self._run(link, self._every_period(seconds, step))
        return True

    # -- moves: attitude, rates, throttle, motors ----------------------------------------------
    async def rpc_moveByRollPitchYawZ(self, roll, pitch, yaw, z, duration, vehicle_name=""):
        return await self._attitude_task(vehicle_name, roll, pitch, yaw, False, duration, altitude=z)

    async def rpc_moveByRollPitchYawThrottle(self, roll, pitch, yaw, throttle, duration, vehicle_name=""):
        return await self._attitude_task(vehicle_name, roll, pitch, yaw, False, duration, throttle=throttle)

    async def rpc_moveByRollPitchYawrateThrottle(self, roll, pitch, yaw_rate, throttle, duration, vehicle_name=""):
        return await self._attitude_task(vehicle_name, roll, pitch, yaw_rate, True, duration, throttle=throttle)

    async def rpc_moveByRollPitchYawrateZ(self, roll, pitch, yaw_rate, z, duration, vehicle_name=""):
        return await self._attitude_task(vehicle_name, roll, pitch, yaw_rate, True, duration, altitude=z)

    async def _attitude_task(self, vehicle_name, roll, pitch, yaw, yaw_is_rate, duration, altitude=None,
                             throttle=None) -> bool:
        """Hold roll/pitch (and yaw, or turn at a yaw rate) as the server receives them (NED/FRD, rad)."""
        link = self.vehicle(vehicle_name)
        angles = [wire.number(v, n) for v, n in ((roll, "roll"), (pitch, "pitch"), (yaw, "yaw"))]
        up, thrust = self._vertical(altitude, throttle)
        seconds = wire.duration(duration)
        self._controlled(link)
        yaw_ned = [math.pi / 2 - yaw_of(self.kinematics(link).orientation)] if yaw_is_rate else [angles[2]]
        period = self.params.guidance.command_period_s

        def step() -> bool:
            if yaw_is_rate:
                yaw_ned[0] += angles[2] * period
            attitude = orientation_to_enu(euler_to_quaternion(angles[0], angles[1], yaw_ned[0]))
            link.send_attitude(attitude, up, thrust)
            return False

        await self._run(link, self._every_period(seconds, step))
        return True

    async def rpc_moveByAngleRatesZ(self, roll_rate, pitch_rate, yaw_rate, z, duration, vehicle_name=""):
        return await self._rates_task(vehicle_name, (roll_rate, pitch_rate, yaw_rate), duration, altitude=z)

    async def rpc_moveByAngleRatesThrottle(self, roll_rate, pitch_rate, yaw_rate, throttle, duration, vehicle_name=""):
        return await self._rates_task(vehicle_name, (roll_rate, pitch_rate, yaw_rate), duration, throttle=throttle)

    async def _rates_task(self, vehicle_name, rates, duration, altitude=None, throttle=None) -> bool:
        link = self.vehicle(vehicle_name)
        rates_frd = [wire.number(v, n) for v, n in zip(rates, ("roll_rate", "pitch_rate", "yaw_rate"))]
        up, thrust = self._vertical(altitude, throttle)
        seconds = wire.duration(duration)
        self._controlled(link)
        rates_flu = body_to_flu(rates_frd)

        def step() -> bool:
            link.send_rates(rates_flu, up, thrust)
            return False

        await self._run(link, self._every_period(seconds, step))
        return True

    def _vertical(self, altitude, throttle) -> tuple[float | None, float | None]:
        if altitude is not None:
            return -wire.number(altitude, "z"), None
        value = wire.number(throttle, "throttle")
        if not 0.0 <= value <= 1.0:
            raise RpcFault(f"throttle must be in [0, 1], got {value:g}")
        return None, value

    async def rpc_moveByMotorPWMs(self, front_right_pwm, rear_left_pwm, front_left_pwm, rear_right_pwm, duration,
                                  vehicle_name=""):
        """Motor inputs u in [0, 1] in the quad-X order (front-right, rear-left, front-left, rear-right)."""
        link = self.vehicle(vehicle_name)
        names = ("front_right_pwm", "rear_left_pwm", "front_left_pwm", "rear_right_pwm")
        values = [wire.number(v, n) for v, n in zip((front_right_pwm, rear_left_pwm, front_left_pwm, rear_right_pwm), names)]
        for value, name in zip(values, names):
            if not 0.0 <= value <= 1.0:
                raise RpcFault(f"{name} must be in [0, 1], got {value:g}")
        rotor_count = len(link.vehicle.rotors)
        if rotor_count != 4:
            raise RpcFault(f"moveByMotorPWMs drives 4 rotors; '{link.name}' has {rotor_count}")
        seconds = wire.duration(duration)
        self._controlled(link)

        def step() -> bool:
            link.send_motors(values)
            return False

        await self._run(link, self._every_period(seconds, step))
        return True

    async def rpc_moveByRC(self, rcdata, vehicle_name=""):
        """RC sticks, as simple_flight takes them: a running moveByManual reads them (and goes on); without one
        they fly the vehicle directly (roll/pitch -> tilt, yaw -> yaw rate, throttle -> collective) until the
        next command. API control is not needed (a remote control is not the API); sticks that are not
        valid, or a disarmed vehicle, fly nothing."""
        link = self.vehicle(vehicle_name)
        rc = wire.parse_rc_data(rcdata)
        self._rc[link.name] = rc
        running = self._tasks.get(link.name)
        if running is not None and not running.done() and getattr(running, "manual", False):
            return
        if not rc["is_valid"] or self.computer_vision or link.controller_mode == "disarmed":
            return
        p = self.params
        yaw_ned = [math.pi / 2 - yaw_of(self.kinematics(link).orientation)]

        async def hold_sticks():
            def step() -> bool:
                yaw_ned[0] += rc["yaw"] * p.rc_max_yaw_rate_rad_s * p.guidance.command_period_s
                attitude = euler_to_quaternion(rc["roll"] * p.rc_max_tilt_rad, -rc["pitch"] * p.rc_max_tilt_rad, yaw_ned[0])
                link.send_attitude(orientation_to_enu(attitude), None, min(max(rc["throttle"], 0.0), 1.0))
                return False

            return await self._every_period(math.inf, step)

        self._cancel(link.name)
        self._tasks[link.name] = asyncio.ensure_future(hold_sticks())
