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
import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from aerial_sim.airsim import wire
from aerial_sim.airsim.api_flight import FlightMethods
from aerial_sim.airsim.api_images import ImageMethods
from aerial_sim.airsim.api_sensors import SensorMethods, stamp_ns
from aerial_sim.airsim.api_simulation import SimulationMethods
from aerial_sim.airsim.flight import GuidanceParams
from aerial_sim.airsim.graph import Graph, VehicleLink
from aerial_sim.airsim.camera_rig import CameraRig
from aerial_sim.airsim.ned import world_to_enu
from aerial_sim.airsim.settings import AirSimSettings
from aerial_sim.airsim.rpc import RpcError
from aerial_sim.airsim.wire import RpcFault
from aerial_sim.environment.geodesy import HomePoint, enu_to_geodetic
from aerial_sim.physics.contact import GroundPlane

#: AirSim's server and minimum-client versions: 4/1 satisfies airsim 1.8.1 and cosysairsim 3.5.0 silently.
SERVER_VERSION = 4
MIN_CLIENT_VERSION = 1


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
    #: moveByManual: largest horizontal speed (m/s, the controller's) and climb rate (m/s) full sticks ask for.
    manual_max_speed_m_s: float = 8.0
    manual_max_climb_m_s: float = 3.0
    #: simContinueForFrames: simulated seconds per frame (one control period of the physics node).
    frame_period_s: float = 0.004
    #: At start-up the first calls (but the connection handshake) wait up to this long for every
    #: vehicle's first ground truth: the physics node may come up after the server, and AirSim
    #: itself always has a state to report. Afterwards a missing state is an error at once.
    state_wait_s: float = 10.0


class AirSimApi(FlightMethods, SensorMethods, ImageMethods, SimulationMethods):
    """The method table of an AirSim server (module docstring)."""

    def __init__(self, graph: Graph, cameras: CameraRig | None, params: ApiParams = ApiParams(),
                 scene_colliders: list | None = None, logger: logging.Logger | None = None,
                 settings: AirSimSettings | None = None, named_sensors=None):
        self.graph = graph
        self.cameras = cameras
        self.params = params
        #: The AirSim settings file's content (None: AirSim's defaults) and its named lidars/rangefinders
        #: (:class:`aerial_sim.airsim.sensors.NamedSensors`).
        self.settings = settings
        self.named_sensors = named_sensors
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
        self._started = False  # the first client's first call has set the vehicles up (armed, wind, poses)
        self._fresh_after: float | None = None  # after a reconnection: state older than this is stale
        self._holds: dict[str, tuple] = {}  # ComputerVision mode: pose each vehicle is held at
        self._hold_tasks: dict[str, asyncio.Task] = {}
        self._spawn: dict[str, tuple] = {}  # (position, orientation) each vehicle started at

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
        """The state streams were dropped (no client): the next call waits for fresh state, as at start-up
        (state stamped before the simulation time of now is stale: it was received for a former client)."""
        self._first_state_awaited = False
        self._fresh_after = self.graph.clock.now_s

    async def _await_first_state(self) -> None:
        """Wait (``state_wait_s`` at most) until every vehicle has ground truth newer than the last client's
        leaving; at start-up then set the vehicles up as AirSim starts them (:meth:`_start_vehicles`)."""
        deadline = time.monotonic() + self.params.state_wait_s
        fresh_after = self._fresh_after

        def stale(link) -> bool:
            state = link.kinematics
            return state is None or (fresh_after is not None and state.time_s < fresh_after - 1e-6)

        while time.monotonic() < deadline and any(stale(v) for v in self.graph.vehicles.values()):
            await asyncio.sleep(0.02)
        self._first_state_awaited = True
        self._fresh_after = None
        if not self._started and all(v.kinematics is not None for v in self.graph.vehicles.values()):
            self._started = True
            await self._start_vehicles()

    async def _start_vehicles(self, reset: bool = False) -> None:
        """AirSim's start (and reset): simple_flight vehicles armed (DefaultVehicleState "Armed"), ComputerVision
        vehicles held where they are; the settings file's wind blowing. The settings' spawn poses are the
        physics node's (its ``airsim_settings``): vehicles start there and ``reset`` puts them back there."""
        settings = self.settings
        if settings is not None and any(settings.wind_ned) and not reset:
            self.graph.set_wind(world_to_enu(settings.wind_ned))
        for link in list(self.graph.vehicles.values()):
            if link.name not in self._spawn:
                state = link.kinematics
                self._spawn[link.name] = (tuple(state.position), tuple(state.orientation))
            position, orientation = self._spawn[link.name]
            if self.computer_vision:
                self.hold_kinematic(link, position, orientation)
            elif self.default_armed(link):
                await self._arm_default(link)

    async def _arm_default(self, link: VehicleLink) -> None:
        answer = await link.arm(True)
        if not answer.success:
            self.log.warning(f"{link.name}: could not arm it as AirSim starts it ({answer.message})")

    def default_armed(self, link: VehicleLink) -> bool:
        """Whether ``link`` starts (and resets) armed: AirSim's DefaultVehicleState of its settings."""
        if self.computer_vision:
            return False
        names = list(self.graph.vehicles)
        index = names.index(link.name)
        if self.settings is None or index >= len(self.settings.vehicles):
            return True
        return self.settings.vehicles[index].default_armed

    @property
    def computer_vision(self) -> bool:
        return self.settings is not None and self.settings.computer_vision

    def hold_kinematic(self, link: VehicleLink, position=None, orientation=None) -> None:
        """ComputerVision mode: keep ``link`` at a pose (its current one by default) against gravity, by
        putting it back there every command period (a kinematic camera vehicle, as AirSim's)."""
        state = link.kinematics
        pose = (tuple(position if position is not None else state.position),
                tuple(orientation if orientation is not None else state.orientation))
        self._holds[link.name] = pose
        task = self._hold_tasks.get(link.name)
        if task is None or task.done():
            async def keep():
                def step() -> bool:
                    link.teleport(*self._holds[link.name])
                    return False

                return await self._every_period(math.inf, step)

            self._hold_tasks[link.name] = asyncio.ensure_future(keep())

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
        return stamp_ns(self.graph.clock.now_s or 0.0)

    def _geo(self, position_enu) -> dict:
        return wire.geo_point(*enu_to_geodetic(*position_enu, self.params.home))

    def _controlled(self, link: VehicleLink, armed: bool = True) -> None:
        if not self._api_control.get(link.name, False):
            raise RpcFault(f"vehicle '{link.name}' is not under API control: call enableApiControl(True) first")
        if self.computer_vision:
            raise RpcFault(f"vehicle '{link.name}' is a ComputerVision vehicle (SimMode ComputerVision): it does "
                           "not fly; move it with simSetVehiclePose")
        if armed and link.controller_mode == "disarmed":
            # AirSim's simple_flight would wait for ever with its motors off; say why instead.
            raise RpcFault(f"vehicle '{link.name}' is disarmed: call armDisarm(True) first")

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



def _arity(method) -> tuple[int, int]:
    parameters = list(inspect.signature(method).parameters.values())
    required = sum(1 for p in parameters if p.default is inspect.Parameter.empty)
    return required, len(parameters)
