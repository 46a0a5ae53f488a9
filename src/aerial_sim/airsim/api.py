"""AirSim's RPC methods on top of a :class:`~aerial_sim.airsim.graph.Graph` (pure Python, no ROS).

Every public ``rpc_<wireName>`` coroutine is one method of the wire contract
(AIRSIM_API.md). :meth:`AirSimApi.dispatch` checks the argument count against
the coroutine's signature (trailing arguments are optional, so airsim's
3-argument and cosys's 2-argument ``simGetImages`` both fit), calls it and
turns a refusal into rpclib's error text, which both Python clients raise as
``RPCError``:

- unknown method:  ``rpclib: server could not find function 'X' with argument count N.``
- refused call:    ``rpclib: function 'X' (called with N arg(s)) threw an exception.
  The exception contained this information: <why>.``

Frames: the client's NED/FRD values are converted once, here, with
:mod:`aerial_sim.airsim.ned`; the graph is ENU/FLU. Times are nanoseconds of
simulation time. Positions are in ``map`` (origin at the home point), so a
vehicle spawned away from the origin does not start at (0, 0, 0) as it would
in AirSim's per-vehicle frame.

Long commands (``*Async`` on the client) run as one flight task per vehicle:
a new command cancels the running one (which then answers ``False``), as does
``cancelLastTask``; a finished task answers ``True`` (goal reached or duration
over) or ``False`` (timeout). Flight tasks continue when the client that
started them disconnects, as in AirSim.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import math
import re
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from aerial_sim.airsim import flight, wire
from aerial_sim.airsim.flight import FORWARD_ONLY, GuidanceParams, PathFollower, yaw_rate_command
from aerial_sim.airsim.graph import Graph, VehicleLink
from aerial_sim.airsim.images import CameraRig
from aerial_sim.airsim.ned import (
    body_covariance_to_frd,
    body_to_flu,
    body_to_frd,
    euler_to_quaternion,
    heading_to_enu,
    orientation_to_enu,
    orientation_to_ned,
    world_to_enu,
    world_to_ned,
)
from aerial_sim.airsim.rpc import ContainsPrepacked, RpcError
from aerial_sim.airsim.wire import RpcFault
from aerial_sim.control.geometry import wrap_angle, yaw_of
from aerial_sim.environment.atmosphere import standard_atmosphere
from aerial_sim.environment.geodesy import HomePoint, enu_to_geodetic, geodetic_to_enu
from aerial_sim.environment.gravity import normal_gravity
from aerial_sim.physics.contact import GroundPlane
from aerial_sim.physics.rotation import quat_normalize

#: AirSim's server and minimum-client versions: 4/1 satisfies airsim 1.8.1 and cosysairsim 3.5.0 silently.
SERVER_VERSION = 4
MIN_CLIENT_VERSION = 1
LANDED, FLYING = 0, 1
FLYING_MODES = {"takeoff", "hold", "velocity", "landing", "attitude", "rates", "motors"}
TESLA_TO_GAUSS = 1e4
STANDARD_SEA_LEVEL_PA = 101325.0
TAKEOFF_TIMEOUT_DEFAULT_S = 20.0


#: What a client calls to connect (confirmConnection): answered at once, before any vehicle state.
HANDSHAKE_METHODS = frozenset({"ping", "getServerVersion", "getMinRequiredClientVersion"})


@dataclass(frozen=True)
class ApiParams:
    """Settings of the API core (defaults here only)."""

    guidance: GuidanceParams = GuidanceParams()
    home: HomePoint = HomePoint()
    #: Largest tilt (rad) and yaw rate (rad/s) a full RC stick asks for (moveByRC).
    rc_max_tilt_rad: float = 0.61
    rc_max_yaw_rate_rad_s: float = 1.5
    #: simContinueForFrames: simulated seconds per frame (one control period of the physics node).
    frame_period_s: float = 0.004
    #: At start-up the first calls (but the connection handshake) wait up to this long for every
    #: vehicle's first ground truth: the physics node may come up after the server, and AirSim
    #: itself always has a state to report. Afterwards a missing state is an error at once.
    state_wait_s: float = 10.0


class AirSimApi:
    """The method table of an AirSim server (module docstring)."""

    def __init__(self, graph: Graph, cameras: CameraRig | None, params: ApiParams = ApiParams(),
                 scene_colliders: list | None = None, logger: logging.Logger | None = None):
        self.graph = graph
        self.cameras = cameras
        self.params = params
        self.log = logger or logging.getLogger("airsim_api")
        self.colliders = [("ground", 1, GroundPlane())] + [
            (getattr(c, "name", "object"), (cameras.object_ids.get(getattr(c, "name", ""), -1) if cameras else -1), c)
            for c in (scene_colliders or [])
        ]
        # Broad phase for all objects at once: their axis-aligned bounds (the ground's reach to -inf).
        self._bounds_low = np.array([c[2].bounds[0] for c in self.colliders], float)
        self._bounds_high = np.array([c[2].bounds[1] for c in self.colliders], float)
        self._methods = {name[4:]: getattr(self, name) for name in dir(self) if name.startswith("rpc_")}
        self._arity = {name: _arity(method) for name, method in self._methods.items()}
        self._api_control: dict[str, bool] = {}
        self._tasks: dict[str, asyncio.Task] = {}
        self._collisions: dict[str, dict] = {}
        self._rc: dict[str, dict] = {}
        self._state_cache: dict[str, tuple] = {}
        self._warned: set[str] = set()
        self.render_executor = None  # an Executor for image rendering (None: render in the loop)
        self._first_state_awaited = False

    @property
    def method_names(self) -> list[str]:
        return sorted(self._methods)

    async def dispatch(self, method: str, params: list) -> Any:
        handler = self._methods.get(method)
        count = len(params)
        if handler is None:
            raise RpcError(f"rpclib: server could not find function '{method}' with argument count {count}.")
        low, high = self._arity[method]
        if not self._first_state_awaited and method not in HANDSHAKE_METHODS:
            await self._await_first_state()
        try:
            if not low <= count <= high:
                expected = f"{low}" if low == high else f"{low} to {high}"
                raise RpcFault(f"Function '{method}' was called with an invalid number of arguments. "
                               f"Expected: {expected}, got: {count}")
            return await handler(*params)
        except RpcFault as fault:
            raise RpcError(f"rpclib: function '{method}' (called with {count} arg(s)) threw an exception. "
                           f"The exception contained this information: {fault}.") from None

    def await_state_again(self) -> None:
        """The state streams were dropped (no client): the next call waits for fresh state, as at start-up."""
        self._first_state_awaited = False

    async def _await_first_state(self) -> None:
        """Start-up only: wait (``state_wait_s`` at most, once) until every vehicle has ground truth."""
        deadline = time.monotonic() + self.params.state_wait_s
        while time.monotonic() < deadline and any(v.kinematics is None for v in self.graph.vehicles.values()):
            await asyncio.sleep(0.02)
        self._first_state_awaited = True

    # -- helpers ------------------------------------------------------------------------------
    def vehicle(self, vehicle_name: Any) -> VehicleLink:
        name = wire.text(vehicle_name, "vehicle_name")
        vehicles = self.graph.vehicles
        if name == "":
            return next(iter(vehicles.values()))
        if name not in vehicles:
            raise RpcFault(f"no vehicle named '{name}' (have: {', '.join(vehicles)})")
        return vehicles[name]

    def kinematics(self, link: VehicleLink):
        if link.kinematics is None:
            raise RpcFault(f"no ground truth received yet for '{link.name}' (is the physics node running?)")
        return link.kinematics

    def now_ns(self) -> int:
        return _ns(self.graph.clock.now_s or 0.0)

    def _geo(self, position_enu) -> dict:
        return wire.geo_point(*enu_to_geodetic(*position_enu, self.params.home))

    def _controlled(self, link: VehicleLink) -> None:
        if not self._api_control.get(link.name, False):
            raise RpcFault(f"vehicle '{link.name}' is not under API control: call enableApiControl(True) first")

    def _once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.log.warning(message)

    # -- connection --------------------------------------------------------------------------
    async def rpc_ping(self):
        return True

    async def rpc_getServerVersion(self):
        return SERVER_VERSION

    async def rpc_getMinRequiredClientVersion(self):
        return MIN_CLIENT_VERSION

    # -- API control, arming, tasks ----------------------------------------------------------
    async def rpc_enableApiControl(self, is_enabled, vehicle_name=""):
        link = self.vehicle(vehicle_name)
        self._api_control[link.name] = wire.flag(is_enabled, "is_enabled")
        if not self._api_control[link.name]:
            self._cancel(link.name)

    async def rpc_isApiControlEnabled(self, vehicle_name=""):
        return self._api_control.get(self.vehicle(vehicle_name).name, False)

    async def rpc_armDisarm(self, arm, vehicle_name=""):
        link = self.vehicle(vehicle_name)
        self._controlled(link)
        answer = await link.arm(wire.flag(arm, "arm"))
        if not answer.success:
            self.log.warning(f"armDisarm({arm}) on {link.name}: {answer.message}")
        return answer.success

    async def rpc_cancelLastTask(self, vehicle_name=""):
        self._cancel(self.vehicle(vehicle_name).name)

    def _cancel(self, name: str) -> None:
        task = self._tasks.pop(name, None)
        if task is not None and not task.done():
            task.cancel()

    async def _run(self, link: VehicleLink, body) -> bool:
        """Run flight task ``body`` (a coroutine) for ``link``, cancelling the previous one; its bool result."""
        self._cancel(link.name)
        task = asyncio.ensure_future(body)
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
        return await self._follow(vehicle_name, points, velocity, timeout_sec, drivetrain, yaw_mode, lookahead)

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

    async def _follow(self, vehicle_name, points, velocity, timeout_sec, drivetrain, yaw_mode, lookahead) -> bool:
        link = self.vehicle(vehicle_name)
        speed = wire.number(velocity, "velocity")
        if speed <= 0:
            raise RpcFault(f"velocity must be > 0 m/s, got {speed:g}")
        timeout = wire.duration(timeout_sec, "timeout_sec")
        drive, yaw_spec = self._yaw_spec(drivetrain, yaw_mode)
        carrot = wire.number(lookahead, "lookahead")
        self._controlled(link)
        state = self.kinematics(link)
        follower = PathFollower(state.position, points, speed, carrot, self.params.guidance)
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
        """Fly the last moveByRC sticks as velocities: pitch -> forward up to vx_max, roll -> right up to vy_max."""
        link = self.vehicle(vehicle_name)
        limits = (wire.number(vx_max, "vx_max"), wire.number(vy_max, "vy_max"))
        floor = -wire.number(z_min, "z_min")
        seconds = wire.duration(duration)
        drive, yaw_spec = self._yaw_spec(drivetrain, yaw_mode)
        self._controlled(link)
        guidance = self.params.guidance

        def step() -> bool:
            rc = self._rc.get(link.name, {})
            now = link.kinematics
            yaw = yaw_of(now.orientation)
            north, east = flight.world_velocity_from_heading(rc.get("pitch", 0.0) * limits[0],
                                                             rc.get("roll", 0.0) * limits[1], math.pi / 2 - yaw)
            climb = (rc.get("throttle", 0.5) - 0.5) * 2.0 * guidance.approach_gain
            if now.position[2] < floor:
                climb = max(climb, guidance.altitude_gain * (floor - now.position[2]))
            command = (east, north, climb)
            rate = yaw_rate_command(guidance, yaw, *yaw_spec, drive, command, yaw)
            link.send_velocity(command, rate - rc.get("yaw", 0.0) * self.params.rc_max_yaw_rate_rad_s)
            return False

        await self._run(link, self._every_period(seconds, step))
        return True

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
        """RC sticks: roll/pitch -> tilt, yaw -> yaw rate, throttle -> collective, held until the next command."""
        link = self.vehicle(vehicle_name)
        rc = wire.parse_rc_data(rcdata)
        self._controlled(link)
        self._rc[link.name] = rc
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

    # -- state ----------------------------------------------------------------------------------
    async def rpc_getMultirotorState(self, vehicle_name=""):
        link = self.vehicle(vehicle_name)
        state = self.kinematics(link)
        rc = self._rc.get(link.name)
        # Ground truth changes 250 times a second; clients poll faster: answer from a cache per snapshot.
        key = (id(state), link.controller_mode, id(rc))
        cached = self._state_cache.get(link.name)
        if cached is not None and cached[0] == key and cached[1] is state:
            return cached[2]
        answer = {
            "collision": self._collision(link),
            "kinematics_estimated": _kinematics(state),
            "gps_location": self._geo(state.position),
            "timestamp": _ns(state.time_s),
            "landed_state": FLYING if self._flying(link) else LANDED,
            "rc_data": wire.rc_data(**({k: rc[k] for k in ("roll", "pitch", "yaw", "throttle")} | {"is_valid": True})
                                    if rc else {}),
        }
        self._state_cache[link.name] = (key, state, answer)
        return answer

    async def rpc_simGetGroundTruthKinematics(self, vehicle_name=""):
        return _kinematics(self.kinematics(self.vehicle(vehicle_name)))

    async def rpc_simGetVehiclePose(self, vehicle_name=""):
        state = self.kinematics(self.vehicle(vehicle_name))
        return wire.pose(world_to_ned(state.position), orientation_to_ned(state.orientation))

    async def rpc_simGetCollisionInfo(self, vehicle_name=""):
        return self._collision(self.vehicle(vehicle_name))

    async def rpc_getHomeGeoPoint(self, vehicle_name=""):
        self.vehicle(vehicle_name)
        home = self.params.home
        return wire.geo_point(home.latitude, home.longitude, home.altitude)

    async def rpc_getRotorStates(self, vehicle_name=""):
        link = self.vehicle(vehicle_name)
        if link.rotors is None:
            raise RpcFault(f"no rotor states received yet for '{link.name}' (topic {link.name}/rotors)")
        rotors = []
        for rotor, speed, thrust in zip(link.vehicle.rotors, link.rotors.speeds_rad_s, link.rotors.thrusts_n):
            torque_per_newton = rotor.max_torque_nm() / rotor.max_thrust_n()
            rotors.append({"thrust": float(thrust), "torque_scaler": float(-rotor.turning_direction * thrust * torque_per_newton),
                           "speed": float(speed)})
        return {"rotors": rotors, "timestamp": _ns(link.rotors.time_s)}

    async def rpc_simGetGroundTruthEnvironment(self, vehicle_name=""):
        state = self.kinematics(self.vehicle(vehicle_name))
        altitude = self.params.home.altitude + state.position[2]
        try:
            air = standard_atmosphere(altitude)
        except ValueError as error:
            raise RpcFault(str(error)) from None
        return {
            "position": wire.vector3r(world_to_ned(state.position)),
            "geo_point": self._geo(state.position),
            "gravity": wire.vector3r((0.0, 0.0, normal_gravity(self.params.home.latitude, altitude))),
            "air_pressure": air.pressure_pa,
            "temperature": air.temperature_k,
            "air_density": air.density_kg_m3,
        }

    def _collision(self, link: VehicleLink) -> dict:
        """Deepest contact of the body box with the ground or a scene object at the current pose (latched)."""
        state = link.kinematics
        latched = self._collisions.get(link.name, wire.collision_info())
        if state is None:
            return latched
        half = tuple(0.5 * s for s in link.vehicle.body_box_m)
        reach = math.hypot(*half)
        position = np.asarray(state.position)
        near = np.all((position + reach >= self._bounds_low) & (position - reach <= self._bounds_high), axis=1)
        deepest = None
        for index in np.flatnonzero(near):
            name, object_id, collider = self.colliders[index]
            contact = collider.contact(state.position, state.orientation, half)
            if contact is not None and (deepest is None or contact.depth_m > deepest[2].depth_m):
                deepest = (name, object_id, contact)
        if deepest is None:
            latched = dict(latched, has_collided=False)
        else:
            name, object_id, contact = deepest
            latched = wire.collision_info(True, contact.depth_m, _ns(state.time_s), world_to_ned(contact.normal),
                                          world_to_ned(contact.point), world_to_ned(state.position), name, object_id)
        self._collisions[link.name] = latched
        return latched

    # -- sensors --------------------------------------------------------------------------------
    async def rpc_getImuData(self, imu_name="", vehicle_name=""):
        imu = self._reading(self.vehicle(vehicle_name), "imu", "IMU", "imu/data")
        return {
            "time_stamp": _ns(imu.time_s),
            "orientation": wire.quaternionr(orientation_to_ned(imu.orientation)),
            "angular_velocity": wire.vector3r(body_to_frd(imu.angular_velocity)),
            "linear_acceleration": wire.vector3r(body_to_frd(imu.linear_acceleration)),
        }

    async def rpc_getBarometerData(self, barometer_name="", vehicle_name=""):
        reading = self._reading(self.vehicle(vehicle_name), "pressure", "barometer", "air_pressure")
        return {
            "time_stamp": _ns(reading.time_s),
            "altitude": pressure_altitude(reading.pressure_pa),
            "pressure": reading.pressure_pa,
            "qnh": STANDARD_SEA_LEVEL_PA / 100.0,
        }

    async def rpc_getMagnetometerData(self, magnetometer_name="", vehicle_name=""):
        reading = self._reading(self.vehicle(vehicle_name), "magnetic", "magnetometer", "magnetic_field")
        return {
            "time_stamp": _ns(reading.time_s),
            "magnetic_field_body": wire.vector3r([v * TESLA_TO_GAUSS for v in body_to_frd(reading.field_tesla)]),
            "magnetic_field_covariance": [c * TESLA_TO_GAUSS**2 for c in body_covariance_to_frd(reading.covariance)],
        }

    async def rpc_getGpsData(self, gps_name="", vehicle_name=""):
        gps = self._reading(self.vehicle(vehicle_name), "gps", "GPS", "gps/fix")
        fix_type = 0 if not gps.has_fix else (3 if gps.eph_m <= 3.0 else 2)
        stamp = _ns(gps.time_s)
        return {
            "time_stamp": stamp,
            "gnss": {
                "geo_point": wire.geo_point(gps.latitude, gps.longitude, gps.altitude),
                "eph": gps.eph_m,
                "epv": gps.epv_m,
                "velocity": wire.vector3r(world_to_ned(gps.velocity_enu)),
                "fix_type": fix_type,
                "time_utc": stamp // 1000,
            },
            "is_valid": gps.has_fix,
        }

    async def rpc_getDistanceSensorData(self, distance_sensor_name="", vehicle_name=""):
        link = self.vehicle(vehicle_name)
        reading = self._reading(link, "distance", "distance sensor", "distance/range")
        return {
            "time_stamp": _ns(reading.time_s),
            "distance": reading.distance_m,
            "min_distance": reading.min_m,
            "max_distance": reading.max_m,
            "relative_pose": wire.pose((0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)),
        }

    async def rpc_getLidarData(self, lidar_name="", vehicle_name=""):
        link = self.vehicle(vehicle_name)
        lidar = self._reading(link, "lidar", "lidar", "lidar/points")
        points = np.asarray(lidar.points, np.float32).reshape(-1, 3).copy()
        points[:, 1:] *= -1.0  # sensor FLU -> FRD
        state = self.kinematics(link)
        segmentation = [int(v) for v in np.asarray(lidar.segmentation).ravel()]
        return {
            "time_stamp": _ns(lidar.time_s),
            "point_cloud": points.ravel().tolist(),
            "pose": wire.pose(world_to_ned(state.position), orientation_to_ned(state.orientation)),
            "segmentation": segmentation,
            "groundtruth": [str(v) for v in segmentation],  # cosysairsim's name for the same labels
        }

    def _reading(self, link: VehicleLink, attribute: str, sensor: str, topic: str):
        reading = getattr(link, attribute)
        if reading is None:
            raise RpcFault(f"no {sensor} data for '{link.name}': nothing received on {link.name}/{topic} "
                           f"(is the {sensor} node running?)")
        return reading

    # -- images --------------------------------------------------------------------------------
    async def rpc_simGetImages(self, requests, vehicle_name="", external=False):
        if not isinstance(requests, (list, tuple)):
            raise RpcFault(f"requests must be a list of ImageRequest, got {wire._show(requests)}")
        parsed = [wire.parse_image_request(r, f"requests[{i}]") for i, r in enumerate(requests)]
        return ContainsPrepacked(await self._render(vehicle_name, parsed))

    async def rpc_simGetImage(self, camera_name, image_type, vehicle_name="", external=False):
        request = (wire.text(str(camera_name) if isinstance(camera_name, int) else camera_name, "camera_name"),
                   wire.integer(image_type, "image_type"), False, True)
        (response,) = await self._render(vehicle_name, [request])
        return response["image_data_uint8"]

    async def _render(self, vehicle_name, requests) -> list[dict]:
        link = self.vehicle(vehicle_name)
        cameras = self._cameras()
        if not requests:
            return []
        state = self.kinematics(link)
        job = lambda: cameras.render(link.name, requests, state.position, state.orientation, _ns(state.time_s))  # noqa: E731
        if self.render_executor is None:
            return job()
        return await asyncio.get_running_loop().run_in_executor(self.render_executor, job)

    def _cameras(self) -> CameraRig:
        if self.cameras is None:
            raise RpcFault("this server renders no images (started without a scene)")
        return self.cameras

    async def rpc_simGetCameraInfo(self, camera_name, vehicle_name="", external=False):
        link = self.vehicle(vehicle_name)
        state = self.kinematics(link)
        return self._cameras().camera_info(link.name, wire.text(camera_name, "camera_name"), state.position, state.orientation)

    async def rpc_simSetCameraPose(self, camera_name, pose, vehicle_name="", external=False):
        link = self.vehicle(vehicle_name)
        position, orientation = wire.parse_pose(pose, "pose")
        self._cameras().set_pose(link.name, wire.text(camera_name, "camera_name"), position, orientation)

    async def rpc_simSetCameraFov(self, camera_name, fov_degrees, vehicle_name="", external=False):
        link = self.vehicle(vehicle_name)
        self._cameras().set_fov(link.name, wire.text(camera_name, "camera_name"), wire.number(fov_degrees, "fov_degrees"))

    async def rpc_simGetDistortionParams(self, camera_name, vehicle_name="", external=False):
        self.vehicle(vehicle_name)
        self._cameras().canonical(wire.text(camera_name, "camera_name"))
        return [0.0, 0.0, 0.0, 0.0, 0.0]  # K1, K2, K3, P1, P2: an ideal pinhole

    async def rpc_simSetDistortionParam(self, camera_name, param_name, value, vehicle_name="", external=False):
        if wire.number(value, "value") != 0.0:
            raise RpcFault("aerial_sim cameras are ideal pinholes: distortion parameters stay 0")

    # -- simulation control -------------------------------------------------------------------
    async def rpc_reset(self):
        """Every vehicle back to its start, disarmed, API control off (AirSim's reset); sim time goes on."""
        for name in list(self._tasks):
            self._cancel(name)
        answer = await self.graph.reset()
        if not answer.success:
            raise RpcFault(answer.message)
        for link in self.graph.vehicles.values():
            await link.reset_controller()
            self._api_control[link.name] = False
        self._collisions.clear()
        self._rc.clear()

    async def rpc_simPause(self, is_paused):
        answer = await self.graph.pause(wire.flag(is_paused, "is_paused"))
        if not answer.success:
            raise RpcFault(answer.message)

    async def rpc_simIsPaused(self):
        return bool(self.graph.paused)

    async def rpc_simContinueForTime(self, seconds):
        await self.graph.continue_for(wire.duration(seconds, "seconds"))

    async def rpc_simContinueForFrames(self, frames):
        count = wire.integer(frames, "frames")
        if count < 0:
            raise RpcFault(f"frames must be >= 0, got {count}")
        await self.graph.continue_for(count * self.params.frame_period_s)

    async def rpc_simSetVehiclePose(self, pose, ignore_collision, vehicle_name=""):
        link = self.vehicle(vehicle_name)
        position_ned, orientation_ned = wire.parse_pose(pose, "pose")
        wire.flag(ignore_collision, "ignore_collision")
        state = self.kinematics(link)
        current_ned = world_to_ned(state.position)
        position = world_to_enu([c if math.isnan(n) else n for n, c in zip(position_ned, current_ned)])
        if any(math.isnan(c) for c in orientation_ned):
            orientation = state.orientation
        else:
            try:
                orientation = orientation_to_enu(quat_normalize(orientation_ned))
            except ValueError:
                raise RpcFault("pose.orientation is a zero quaternion") from None
        link.teleport(position, orientation)
        if self._flying(link):
            link.send_pose(position, yaw_of(orientation))  # hold where it was put, not where it was
        await self._wait_for_pose(link, position)

    async def _wait_for_pose(self, link: VehicleLink, position, wall_timeout_s: float = 2.0) -> None:
        """Until ground truth shows the teleported position (or a short wall-clock timeout)."""
        deadline = time.monotonic() + wall_timeout_s
        while time.monotonic() < deadline:
            now = link.kinematics
            if now is not None and math.dist(now.position, position) < 0.05:
                return
            await asyncio.sleep(0.005)

    async def rpc_simSetWind(self, wind):
        self.graph.set_wind(world_to_enu(wire.parse_vector3r(wind, "wind")))

    async def rpc_listVehicles(self):
        return list(self.graph.vehicles)

    async def rpc_simAddVehicle(self, vehicle_name, vehicle_type, pose, pawn_path=""):
        self._once("simAddVehicle", "simAddVehicle: vehicles are fixed by the physics node's vehicle_names; refused")
        return False

    async def rpc_getSettingsString(self):
        vehicles = {name: {"VehicleType": "SimpleFlight"} for name in self.graph.vehicles}
        return json.dumps({"SettingsVersion": 1.2, "SimMode": "Multirotor", "Vehicles": vehicles,
                           "OriginGeopoint": {"Latitude": self.params.home.latitude,
                                              "Longitude": self.params.home.longitude,
                                              "Altitude": self.params.home.altitude}})

    # -- world ---------------------------------------------------------------------------------
    async def rpc_simListSceneObjects(self, name_regex=".*"):
        try:
            pattern = re.compile(wire.text(name_regex, "name_regex"))
        except re.error as error:
            raise RpcFault(f"name_regex is not a valid regular expression: {error}") from None
        names = ["ground"] + [obj.name for obj in self._scene_objects()]
        return [name for name in names if pattern.fullmatch(name)]

    async def rpc_simGetObjectPose(self, object_name, ned=True):
        name = wire.text(object_name, "object_name")
        for obj in self._scene_objects():
            if obj.name == name:
                return wire.pose(world_to_ned(obj.position), orientation_to_ned(obj.quaternion))
        if name in self.graph.vehicles and self.graph.vehicles[name].kinematics is not None:
            return await self.rpc_simGetVehiclePose(name)
        return wire.nan_pose()

    async def rpc_simSetObjectPose(self, object_name, pose, teleport=True):
        wire.parse_pose(pose, "pose")
        self._once("simSetObjectPose", "simSetObjectPose: scene objects are static in aerial_sim (they collide in "
                   "the physics node); refused")
        return False

    async def rpc_simGetObjectScale(self, object_name):
        name = wire.text(object_name, "object_name")
        for obj in self._scene_objects():
            if obj.name == name:
                return wire.vector3r((obj.scale,) * 3)
        return wire.vector3r((math.nan,) * 3)

    async def rpc_simSetSegmentationObjectID(self, mesh_name, object_id, is_name_regex=False):
        return self._cameras().set_segmentation_id(wire.text(mesh_name, "mesh_name"), wire.integer(object_id, "object_id"),
                                                   wire.flag(is_name_regex, "is_name_regex"))

    async def rpc_simGetSegmentationObjectID(self, mesh_name):
        name = wire.text(mesh_name, "mesh_name")
        ids = self._cameras().object_ids
        return int(ids.get(name, -1))

    async def rpc_simTestLineOfSightToPoint(self, point, vehicle_name=""):
        state = self.kinematics(self.vehicle(vehicle_name))
        target = geodetic_to_enu(*wire.parse_geo_point(point, "point"), self.params.home)
        return self._clear_line(state.position, target)

    async def rpc_simTestLineOfSightBetweenPoints(self, point1, point2):
        home = self.params.home
        a = geodetic_to_enu(*wire.parse_geo_point(point1, "point1"), home)
        b = geodetic_to_enu(*wire.parse_geo_point(point2, "point2"), home)
        return self._clear_line(a, b)

    def _clear_line(self, a, b) -> bool:
        a, b = np.asarray(a, float), np.asarray(b, float)
        length = float(np.linalg.norm(b - a))
        if length < 1e-9:
            return True
        from aerial_sim.world.geometry import ray_caster_of

        hits = ray_caster_of(self._cameras().scene).cast(a[None, :], ((b - a) / length)[None, :], normals=False)
        return bool(hits.distance[0] >= length - 1e-6)

    async def rpc_simGetWorldExtents(self):
        scene = self._cameras().scene
        from aerial_sim.world.geometry import ray_caster_of

        bounds = ray_caster_of(scene).bounds
        if bounds is not None:
            low, high = bounds
        else:
            low, high = np.array([-100.0, -100.0, 0.0]), np.array([100.0, 100.0, 100.0])
        return [self._geo(low), self._geo(high)]

    def _scene_objects(self):
        return self.cameras.scene.objects if self.cameras is not None else ()

    # -- accepted without effect (nothing to draw, no weather) ---------------------------------
    async def rpc_simSetTraceLine(self, color_rgba, thickness=1.0, vehicle_name=""):
        self.vehicle(vehicle_name)

    async def rpc_simEnableWeather(self, enable):
        self._once("weather", "weather is not simulated: simEnableWeather/simSetWeatherParameter have no effect")

    async def rpc_simSetWeatherParameter(self, param, val):
        await self.rpc_simEnableWeather(True)

    async def rpc_simPrintLogMessage(self, message, message_param="", severity=0):
        self.log.info(f"client: {wire.text(message, 'message')} {wire.text(message_param, 'message_param')}")

    async def rpc_simFlushPersistentMarkers(self):
        pass

    async def rpc_simPlotPoints(self, points, color_rgba=None, size=10.0, duration=-1.0, is_persistent=False):
        self._once("plot", "there is no Unreal viewport: simPlot* calls are accepted and draw nothing")

    async def rpc_simPlotLineStrip(self, points, color_rgba=None, thickness=5.0, duration=-1.0, is_persistent=False):
        await self.rpc_simPlotPoints(points)

    async def rpc_simPlotLineList(self, points, color_rgba=None, thickness=5.0, duration=-1.0, is_persistent=False):
        await self.rpc_simPlotPoints(points)

    async def rpc_simPlotArrows(self, points_start, points_end, color_rgba=None, thickness=5.0, arrow_size=2.0,
                                duration=-1.0, is_persistent=False):
        await self.rpc_simPlotPoints(points_start)

    async def rpc_simPlotStrings(self, strings, positions, scale=5, color_rgba=None, duration=-1.0):
        await self.rpc_simPlotPoints(positions)

    async def rpc_simPlotTransforms(self, poses, scale=5.0, thickness=5.0, duration=-1.0, is_persistent=False):
        await self.rpc_simPlotPoints(poses)

    async def rpc_simPlotTransformsWithNames(self, poses, names, tf_scale=5.0, tf_thickness=5.0, text_scale=10.0,
                                             text_color_rgba=None, duration=-1.0):
        await self.rpc_simPlotPoints(poses)


# -- module helpers -------------------------------------------------------------------------------


def _ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


def _kinematics(state) -> dict:
    return wire.kinematics_state(
        world_to_ned(state.position),
        orientation_to_ned(state.orientation),
        world_to_ned(state.velocity_world),
        body_to_frd(state.angular_velocity_body),
        world_to_ned(state.linear_acceleration_world),
        body_to_frd(state.angular_acceleration_body),
    )


def pressure_altitude(pressure_pa: float) -> float:
    """Altitude (m) of ``pressure_pa`` in the 1976 standard atmosphere's troposphere (AirSim's barometer altitude)."""
    if pressure_pa <= 0 or not math.isfinite(pressure_pa):
        return math.nan
    return 44330.769 * (1.0 - (pressure_pa / STANDARD_SEA_LEVEL_PA) ** 0.190263)


def _arity(method) -> tuple[int, int]:
    parameters = list(inspect.signature(method).parameters.values())
    required = sum(1 for p in parameters if p.default is inspect.Parameter.empty)
    return required, len(parameters)
