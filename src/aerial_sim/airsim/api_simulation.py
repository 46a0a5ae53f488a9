"""AirSim's simulation-control and world methods: reset, pause, continue, teleport, wind, vehicles,
settings, scene objects, line of sight, and the drawing calls accepted without effect (AIRSIM_API.md).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time

import numpy as np

from aerial_sim.airsim import wire
from aerial_sim.airsim.graph import VehicleLink
from aerial_sim.airsim.ned import orientation_to_enu, orientation_to_ned, world_to_enu, world_to_ned
from aerial_sim.airsim.wire import RpcFault
from aerial_sim.config import ParamsError
from aerial_sim.control.geometry import yaw_of
from aerial_sim.environment.geodesy import geodetic_to_enu
from aerial_sim.physics.rotation import quat_normalize
from aerial_sim.vehicles.spawn import VehicleSpawn, vehicle_types


#: AirSim's WeatherParameter.Fog, and the fog density (1/m) its value 1 becomes here.
WEATHER_FOG = 7
FOG_DENSITY_AT_FULL_PER_M = 0.05


class SimulationMethods:
    """AirSim's simulation-control and world methods, mixed into :class:`~aerial_sim.airsim.api.AirSimApi`
    (whose state they use)."""

    # -- simulation control -------------------------------------------------------------------
    async def rpc_reset(self):
        """Every vehicle back to its start, API control off, in its default state (AirSim's reset: armed,
        unless the settings say DefaultVehicleState Inactive); sim time goes on. Answered once every vehicle's
        state shows it back at its start, as AirSim's reset returns with the vehicles moved: the physics node
        answers the reset when it has queued it, and a client reading the state right after (hello_drone, at a
        load of 39) read where the vehicle was falling before."""
        for name in list(self._tasks):
            self._cancel(name)
        before = {name: link.pose_set for name, link in self.graph.vehicles.items()}
        answer = await self.graph.reset()
        if not answer.success:
            raise RpcFault(answer.message)
        for name, link in list(self.graph.vehicles.items()):
            await self._wait_for_pose(link, before.get(name), what="reset")
        for link in self.graph.vehicles.values():
            await link.reset_controller()
            self._api_control[link.name] = False
        self._collisions.clear()
        self._rc.clear()
        if self._started:
            await self._start_vehicles(reset=True)

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
            orientation = _orientation_enu(orientation_ned)
        before = link.pose_set
        link.teleport(position, orientation)
        if self.computer_vision:
            self.hold_kinematic(link, position, orientation)
        elif self._flying(link):
            link.send_pose(position, yaw_of(orientation))  # hold where it was put, not where it was
        await self._wait_for_pose(link, before, (position, orientation))

    async def _wait_for_pose(self, link: VehicleLink, before, wanted=None, what: str = "simSetVehiclePose") -> None:
        """Until the vehicle's state shows the teleport (``wanted``: the position and orientation asked for) or
        reset (None: wherever the physics node put it), as AirSim's setPose and reset return with the physics
        body already moved: the physics node says at which sim time and where it applied it
        (``set_pose/applied``, newer than ``before``), then a state that shows it arrives
        (:func:`shows_teleport`). No race with the wall clock: a loaded machine only makes the answer later,
        and the vehicle cannot have left the pose unseen (after it, physics moves it: a disarmed vehicle
        falls, as in AirSim). A teleport the physics node refused (its log says why) ends the wait after
        ``state_wait_s`` of wall time with one log line."""
        deadline = time.monotonic() + self.params.state_wait_s
        applied = None  # (sim time, position, orientation)
        while time.monotonic() < deadline:
            if applied is None:
                answer = link.pose_set
                if (answer is not None and answer is not before
                        and (wanted is None or math.dist(answer[1], wanted[0]) < 1e-6)):
                    applied = (answer[0], *(wanted or answer[1:]))
            if applied is not None:
                state = link.kinematics
                if state is not None and shows_teleport(state, *applied):
                    return
            await asyncio.sleep(0.005)
        self.log.warning(f"{what}: {link.name}'s state did not show the new pose within "
                         f"{self.params.state_wait_s:g} s (refused by the physics node? its log says why)")

    async def rpc_simSetWind(self, wind):
        self.graph.set_wind(world_to_enu(wire.parse_vector3r(wind, "wind")))

    async def rpc_listVehicles(self):
        return list(self.graph.vehicles)

    async def rpc_simAddVehicle(self, vehicle_name, vehicle_type, pose, pawn_path=""):
        """A new vehicle in the running simulation, flown by its own flight controller (AirSim's
        ``createVehicleAtRuntime``); answered once it has state, armed as simple_flight starts. A name in
        use, an unknown type or a pose that is not finite is refused with the reason."""
        name = wire.text(vehicle_name, "vehicle_name")
        kind = wire.text(vehicle_type, "vehicle_type")
        if wire.text(pawn_path, "pawn_path"):
            self._once("simAddVehicle pawn_path", "simAddVehicle: pawn_path ignored (no Unreal pawns here)")
        if name in self.graph.vehicles:
            raise RpcFault(f"simAddVehicle: a vehicle named '{name}' exists (have: {', '.join(self.graph.vehicles)})")
        if self.computer_vision:
            raise RpcFault("simAddVehicle: SimMode ComputerVision adds no flying vehicles")
        config = self._vehicle_config(kind)
        position_ned, orientation_ned = wire.parse_pose(pose, "pose", allow_nan=False)
        orientation = _orientation_enu(orientation_ned)
        try:
            spawn = VehicleSpawn(name, config, tuple(world_to_enu(position_ned)), yaw_of(orientation))
        except ParamsError as error:
            raise RpcFault(f"simAddVehicle: {error}") from None
        answer = await self.graph.add_vehicle(spawn)
        if not answer.success:
            raise RpcFault(f"simAddVehicle: {answer.message}")
        link = self.graph.vehicles[name]
        deadline = time.monotonic() + self.params.state_wait_s
        while link.kinematics is None and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        state = self.kinematics(link)
        self._spawn[name] = (tuple(state.position), tuple(state.orientation))
        if self.default_armed(link):
            await self._arm_default(link)
        self.log.info(f"simAddVehicle: {answer.message}")
        return True

    #: AirSim's multirotor vehicle types (``VehicleType``, any case): simple_flight is a quadrotor X, which the
    #: built-in controller flies; PX4 and ArduCopter vehicles are flown the same way (no autopilot starts).
    AIRSIM_VEHICLE_TYPES = {"simpleflight": "quad_x", "": "quad_x", "px4multirotor": "quad_x", "arducopter": "quad_x"}

    def _vehicle_config(self, kind: str) -> str:
        """The vehicle config (config/vehicles/) an AirSim ``vehicle_type`` is flown as; ours by name too."""
        lowered = kind.lower()
        if lowered in self.AIRSIM_VEHICLE_TYPES:
            if lowered in ("px4multirotor", "arducopter"):
                self._once(f"simAddVehicle {lowered}", f"simAddVehicle: {kind} is flown by aerial_sim's flight "
                           "controller (no autopilot is started for it)")
            return self.AIRSIM_VEHICLE_TYPES[lowered]
        if kind in vehicle_types():
            return kind
        raise RpcFault(f"simAddVehicle: unknown vehicle_type '{kind}' (SimpleFlight, PX4Multirotor, ArduCopter, "
                       f"or one of aerial_sim's vehicle configs: {', '.join(vehicle_types())})")

    async def rpc_getSettingsString(self):
        if self.settings is not None:
            from aerial_sim.airsim.settings import settings_json

            return settings_json(self.settings)
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
        from aerial_sim.world.ray_caster import ray_caster_of

        hits = ray_caster_of(self._cameras().scene).cast(a[None, :], ((b - a) / length)[None, :], normals=False)
        return bool(hits.distance[0] >= length - 1e-6)

    async def rpc_simGetWorldExtents(self):
        scene = self._cameras().scene
        from aerial_sim.world.ray_caster import ray_caster_of

        bounds = ray_caster_of(scene).bounds
        if bounds is not None:
            low, high = bounds
        else:
            low, high = np.array([-100.0, -100.0, 0.0]), np.array([100.0, 100.0, 100.0])
        return [self._geo(low), self._geo(high)]

    def _scene_objects(self):
        return self.cameras.scene.objects if self.cameras is not None else ()

    async def rpc_simSetTimeOfDay(self, is_enabled, start_datetime="", is_start_datetime_dst=False,
                                  celestial_clock_speed=1.0, update_interval_secs=60.0, move_sun=True):
        """Place every camera's sun for ``start_datetime`` ("%Y-%m-%d %H:%M:%S", local solar time at the home
        point; empty: now) at the home point (:mod:`aerial_sim.world.lighting`); the sun then stays there
        (the celestial clock does not run). ``is_enabled=False`` or ``move_sun=False`` leaves it as it is."""
        from datetime import datetime, timedelta, timezone

        from aerial_sim.config import ParamsError
        from aerial_sim.world.lighting import parse_time_of_day

        if not (bool(is_enabled) and bool(move_sun)) or self.cameras is None:
            return
        text = wire.text(start_datetime, "start_datetime") if start_datetime else ""
        try:
            if text:
                moment = parse_time_of_day(text, self.params.home.longitude)
                if bool(is_start_datetime_dst):
                    moment -= timedelta(hours=1)
            else:
                moment = datetime.now(timezone.utc)
        except ParamsError as error:
            raise RpcFault(f"start_datetime: {error}") from None
        self.cameras.set_time_of_day(moment)
        if float(celestial_clock_speed) != 0.0:
            self._once("time_of_day", "simSetTimeOfDay: the sun is placed for start_datetime and stays there "
                                      "(the celestial clock does not run)")

    # -- accepted without effect (nothing to draw, no weather) ---------------------------------
    async def rpc_simSetTraceLine(self, color_rgba, thickness=1.0, vehicle_name=""):
        self.vehicle(vehicle_name)

    async def rpc_simEnableWeather(self, enable):
        """Weather on: the fog of simSetWeatherParameter shows; off: the scene's own fog again."""
        self._weather = bool(enable)
        self._apply_fog()

    async def rpc_simSetWeatherParameter(self, param, val):
        """Fog (WeatherParameter 7), 0..1, becomes distance fog of density val x FOG_DENSITY_AT_FULL_PER_M
        (1 - exp(-k d): at full fog half the light is lost in 14 m); the other parameters (rain, snow, dust,
        leaves) are not simulated (one log line)."""
        value = float(val)
        if not (math.isfinite(value) and 0.0 <= value <= 1.0):
            raise RpcFault(f"val: a weather intensity is 0..1, got {val!r}")
        if int(param) == WEATHER_FOG:
            self._fog = value
            self._apply_fog()
        else:
            self._once("weather", "simSetWeatherParameter: only Fog (7) is simulated; rain, snow, dust and "
                                  "leaves have no effect")

    def _apply_fog(self) -> None:
        if self.cameras is None:
            return
        fog = getattr(self, "_fog", 0.0)
        on = getattr(self, "_weather", False) and fog > 0
        self.cameras.set_fog(fog * FOG_DENSITY_AT_FULL_PER_M if on else None)

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


def _orientation_enu(orientation_ned) -> tuple[float, float, float, float]:
    """A wire pose's orientation (FRD -> NED) as the graph's (FLU -> ENU); a zero quaternion is a fault."""
    try:
        return orientation_to_enu(quat_normalize(orientation_ned))
    except ValueError:
        raise RpcFault("pose.orientation is a zero quaternion") from None


def shows_teleport(state, applied_at: float, position, orientation) -> bool:
    """Whether a vehicle state shows a teleport the physics node applied at sim time ``applied_at``.

    A state stamped later does (physics stepped from the teleport). One stamped ``applied_at`` itself may
    be the state sent before the teleport or the one re-sent after it while paused (time does not move):
    it shows the teleport only if it holds its pose."""
    if state.time_s > applied_at + 1e-9:
        return True
    if state.time_s < applied_at - 1e-9:
        return False
    aligned = abs(sum(a * b for a, b in zip(state.orientation, orientation)))  # q and -q: one rotation
    return math.dist(state.position, position) < 1e-6 and aligned > 1.0 - 1e-9
