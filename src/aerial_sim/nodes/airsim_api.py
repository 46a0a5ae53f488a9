"""AirSim API node: AirSim's msgpack-rpc server in front of the ROS graph.

A thin adapter around :class:`aerial_sim.airsim.api.AirSimApi`: an asyncio
loop in its own thread serves ``host:port`` (127.0.0.1:41451 by default;
anything but loopback is logged as a warning) with
:class:`aerial_sim.airsim.rpc.MsgpackRpcServer`; this node keeps the latest
message of every topic the API reads and turns the API's commands into the
graph's public inputs.

Per vehicle (namespace = vehicle name; :class:`aerial_sim.nodes._vehicle_link.RosVehicleLink`):
- reads ``ground_truth/odom``, ``ground_truth/imu``, ``rotors``, ``imu/data``,
  ``air_pressure``, ``magnetic_field``, ``gps/fix``, ``gps/vel``,
  ``lidar/points``, ``distance/range`` and the flight controller's mode from
  ``/diagnostics``;
- writes ``cmd_pose``, ``cmd_vel``, ``cmd_attitude``, ``cmd_rates``,
  ``cmd_motors`` and ``set_pose`` (teleport, physics node; ``set_pose/applied`` says
  from which sim time the state shows it); calls the
  controller's ``arm``, ``takeoff``, ``land`` and ``reset`` services.

World: ``/clock``; the physics node's ``/physics/pause`` (SetBool),
``/physics/reset`` (Trigger), ``/physics/continue_for`` (Float64, s) and
``/physics/wind`` (Vector3Stamped, ENU). Images are rendered here, from the
scene file, at the pose of the newest ground truth (one worker thread).

``simAddVehicle``: the physics node's ``/physics/add_vehicle`` adds the vehicle, then this node starts
``launch/vehicle.launch.yaml`` for it (its flight controller and sensors, a child process that ends with
this node, :mod:`aerial_sim.nodes.ros.child_launch`) and answers once the new vehicle's state arrives and
its controller answers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Vector3Stamped
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParametersAtomically
from rclpy.clock import Clock as WallClock
from rclpy.clock import ClockType
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from std_msgs.msg import Float64
from std_srvs.srv import SetBool, Trigger

from aerial_sim.airsim.api import AirSimApi, ApiParams
from aerial_sim.airsim.flight import GuidanceParams
from aerial_sim.airsim.graph import ServiceAnswer, SimClock
from aerial_sim.airsim.camera_rig import CameraRig
from aerial_sim.airsim.rpc import MsgpackRpcServer
from aerial_sim.airsim.sensors import NamedSensors
from aerial_sim.airsim.settings import usable_settings
from aerial_sim.cdr.decode import decode_clock
from aerial_sim.cdr.encode import encode_vector3_stamped
from aerial_sim.config import require, require_positive
from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.nodes._vehicle_link import RosVehicleLink
from aerial_sim.nodes.ros.child_launch import ChildLaunch
from aerial_sim.nodes.ros.clocks import InputStampClock
from aerial_sim.nodes.ros.event_loop_thread import EventLoopThread
from aerial_sim.nodes.ros.parameters import declare_params
from aerial_sim.nodes.ros.qos import COMMAND_QOS, stream_qos
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.services import SERVICE_QOS
from aerial_sim.vehicles.fleet import require_served_vehicles, served_vehicles
from aerial_sim.world.camera import CameraParams
from aerial_sim.world.lens import LensParams

#: Wall-clock limit on one service call to the graph (a missing controller must not hang a client forever).
SERVICE_TIMEOUT_S = 10.0
#: simAddVehicle: wall seconds for the new vehicle's controller and state to come up (processes start).
ADD_VEHICLE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class AirSimApiNodeParams:
    """ROS parameters of the AirSim API node (defaults here only)."""

    host: str = "127.0.0.1"
    port: int = 41451
    vehicle_names: tuple[str, ...] = ("drone1",)
    vehicle_types: tuple[str, ...] = ("quad_x",)
    #: Scene to render images from ('' = no images).
    scene: str = "empty"
    #: A request bigger than this closes the client's connection.
    max_request_bytes: int = 16 * 1024 * 1024
    lockstep: bool = False
    guidance: GuidanceParams = field(default_factory=GuidanceParams)
    #: AirSim settings file: a path, ``auto`` (AirSim's search order: ~/Documents/AirSim/settings.json if
    #: present) or ``none`` (doc/airsim_settings.md).
    settings: str = "none"
    #: Serve every vehicle of a fleet (config/fleets/<name>.yaml or a path; ``none`` = none) or drone1..N
    #: (``vehicles`` > 1) instead of ``vehicle_names`` (the physics node's selection).
    fleet: str = "none"
    vehicles: int = 0

    def __post_init__(self):
        require(0 <= self.port <= 65535, f"port must be in 0..65535, got {self.port}")
        require_served_vehicles(self.vehicle_names, self.vehicle_types, self.vehicles)
        require_positive(self, "max_request_bytes")

    def fleet_vehicles(self) -> list[tuple[str, str]]:
        """(ROS name, vehicle type) of every vehicle served, the first one AirSim's default vehicle."""
        return served_vehicles(self.vehicle_names, self.vehicle_types, self.fleet, self.vehicles)


#: Wall time for the last period's /clock and state to arrive after the physics node paused (it stops
#: at the end of the control period under way: 4 ms of sim time).
PAUSE_SETTLE_S = 0.05
#: Wall seconds between checks of whether any AirSim client is connected (the state streams follow).
STREAM_CHECK_S = 0.05


class AirSimApiNode(Node):
    """The graph side of the API (:class:`aerial_sim.airsim.graph.Graph`) and the server's event loop."""

    def __init__(self):
        super().__init__("airsim_api")
        self.params = params = declare_params(self, AirSimApiNodeParams)
        self.home = declare_params(self, HomePoint, prefix="home.")
        camera_params = declare_params(self, CameraParams, prefix="camera.")
        lens_params = declare_params(self, LensParams, prefix="camera.")  # the camera node's lens and noise
        self.clock = SimClock()
        self.paused = False
        self.settings = self._load_settings(params.settings)
        if self.settings is not None and self.settings.origin is not None:
            latitude, longitude, altitude = self.settings.origin
            self.home = dataclasses.replace(self.home, latitude=latitude, longitude=longitude, altitude=altitude)
        graph_vehicles = params.fleet_vehicles()
        airsim_names = [v.name for v in self.settings.vehicles] if self.settings is not None else []
        if len(airsim_names) > len(graph_vehicles):
            self.get_logger().warning(
                f"settings name {len(airsim_names)} vehicles, the launch has {len(graph_vehicles)}: "
                f"{', '.join(airsim_names[len(graph_vehicles):])} not served (launch with vehicles:={len(airsim_names)}; "
                "`aerial_sim airsim-settings FILE` prints the launch arguments)")
        self.vehicles = {}
        for index, (ros_name, kind) in enumerate(graph_vehicles):
            name = airsim_names[index] if index < len(airsim_names) else ros_name
            self.vehicles[name] = RosVehicleLink(self, name, kind, params.lockstep, namespace=ros_name)
        # Raw CDR bytes: rclpy's message object is most of what a 250 Hz subscription costs.
        self.create_subscription(Clock, "/clock", self.on_clock, stream_qos(params.lockstep), raw=True)
        self.sim_clock = InputStampClock(self)  # set from on_clock: one /clock subscription, not two
        self.create_subscription(DiagnosticArray, "/diagnostics", self.on_diagnostics, COMMAND_QOS)
        self.pause_client = self.create_client(SetBool, "/physics/pause", qos_profile=SERVICE_QOS)
        self.reset_client = self.create_client(Trigger, "/physics/reset", qos_profile=SERVICE_QOS)
        self.continue_pub = self.create_publisher(Float64, "/physics/continue_for", COMMAND_QOS)
        self.add_vehicle_client = self.create_client(SetParametersAtomically, "/physics/add_vehicle",
                                                     qos_profile=SERVICE_QOS)
        self._links_to_build: list[tuple] = []  # (spawn, asyncio future): built in the executor thread
        self.vehicle_hosts: dict[str, ChildLaunch] = {}  # the processes of vehicles added at run time
        self.wind_pub = self.create_publisher(Vector3Stamped, "/physics/wind", COMMAND_QOS)

        cameras, colliders, named_sensors = None, [], None
        if params.scene:
            from aerial_sim.world.colliders import scene_colliders
            from aerial_sim.world.scene import load_scene

            scene = load_scene(params.scene, home=self.home)
            cameras = CameraRig(scene, camera_params, self.settings, lens=lens_params)
            colliders = scene_colliders(scene)
            if self.settings is not None:
                try:
                    named_sensors = NamedSensors(scene, self.settings)
                except ValueError as error:
                    self.get_logger().error(f"settings: {error}; its named lidars and distance sensors are not served")
        self.api = AirSimApi(self, cameras, ApiParams(guidance=params.guidance, home=self.home),
                             scene_colliders=colliders, logger=_RosLogger(self), settings=self.settings,
                             named_sensors=named_sensors)
        self.api.render_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="airsim-render")
        self.serving = EventLoopThread(
            self, MsgpackRpcServer(self.api.dispatch, params.host, params.port, params.max_request_bytes,
                                   logger=_RosLogger(self)), "airsim-rpc",
            f"cannot serve AirSim clients on {params.host}:{params.port}: {{error}}; no AirSim server in this run "
            "(choose another port: airsim_port:=N)")
        self.loop, self.server = self.serving.loop, self.serving.server
        if self.server is None:
            return
        self.streams_subscribed = False
        self.create_timer(STREAM_CHECK_S, self._follow_clients, clock=WallClock(clock_type=ClockType.STEADY_TIME))
        if not _is_loopback(params.host):
            self.get_logger().warning(f"serving AirSim clients on {params.host}: reachable from other machines, "
                                      "with no authentication (AirSim has none)")
        self.get_logger().info(
            f"AirSim API on {params.host}:{self.server.port} for {', '.join(self.vehicles)} "
            f"({len(self.api.method_names)} methods; images: {params.scene or 'off'})"
        )

    def _load_settings(self, spec: str):
        """The AirSim settings file (``settings`` parameter), or None; a broken one is one error line and
        the server runs with AirSim's defaults (a file must never stop the simulation)."""
        found = usable_settings(spec, lambda error: self.get_logger().error(f"{error}; serving with AirSim's default settings"))
        if found is None:
            return None
        path, settings = found
        for warning in settings.warnings:
            self.get_logger().warning(f"settings {path}: {warning}")
        self.get_logger().info(f"AirSim settings from {path}: SimMode {settings.sim_mode}, vehicles "
                               f"{', '.join(settings.vehicle_names())}")
        return settings

    def _follow_clients(self) -> None:
        """Hold the vehicles' state subscriptions while at least one AirSim client is connected (about a
        tenth of a core of 250 Hz streams otherwise received for nobody; ``STREAM_CHECK_S`` timer); build
        the links of vehicles added since the last tick (entities are made in this, the executor's, thread)."""
        self._build_added_links()
        wanted = self.server is not None and self.server.connections > 0
        if wanted == self.streams_subscribed:
            return
        self.streams_subscribed = wanted
        if not wanted:
            self.loop.call_soon_threadsafe(self.api.await_state_again)
        for link in list(self.vehicles.values()):
            if wanted:
                link.subscribe_streams()
            else:
                link.unsubscribe_streams()
        self.get_logger().info("AirSim client connected: reading the vehicles' state" if wanted
                               else "no AirSim client connected: state streams left unread")

    # -- Graph ------------------------------------------------------------------------------
    def on_clock(self, data: bytes) -> None:
        """A /clock message (CDR bytes): the node's ROS time and :attr:`clock`; the event loop is woken
        only when a sleeper there is due (:meth:`SimClock.post`), not 250 times a second."""
        sec, nanosec = decode_clock(data)
        self.sim_clock.advance(sec * 1_000_000_000 + nanosec)
        if self.clock.post(sec + nanosec * 1e-9):
            self.loop.call_soon_threadsafe(self.clock.wake)

    def on_diagnostics(self, message: DiagnosticArray) -> None:
        for status in message.status:
            link = self.vehicles.get(status.hardware_id)
            if link is not None and status.name.endswith("flight control"):
                link.on_diagnostics(status)

    # -- simAddVehicle ---------------------------------------------------------------------------
    async def add_vehicle(self, spawn) -> ServiceAnswer:
        """Add ``spawn`` in the physics node, start its controller and sensors, and answer once its state
        arrives and its controller answers (:data:`ADD_VEHICLE_TIMEOUT_S`)."""
        if any(link.namespace == spawn.name for link in self.vehicles.values()):
            return ServiceAnswer(False, f"a vehicle named '{spawn.name}' exists")
        if self.params.lockstep:
            return ServiceAnswer(False, "not in lockstep (the clock would wait for a controller that starts in seconds)")

        def value(v) -> ParameterValue:
            if isinstance(v, str):
                return ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=v)
            if isinstance(v, list):
                return ParameterValue(type=ParameterType.PARAMETER_DOUBLE_ARRAY, double_array_value=[float(x) for x in v])
            return ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=float(v))

        request = SetParametersAtomically.Request(
            parameters=[Parameter(name=k, value=value(v)) for k, v in spawn.values().items()])
        answer = await self.call(self.add_vehicle_client, request,
                                 lambda r: ServiceAnswer(bool(r.result.successful), str(r.result.reason)))
        if not answer.success:
            return answer
        built = asyncio.get_running_loop().create_future()
        self._links_to_build.append((spawn, built))
        link = await built
        host = self.vehicle_hosts.get(spawn.name)
        deadline = time.monotonic() + ADD_VEHICLE_TIMEOUT_S
        while time.monotonic() < deadline:
            if host is None or host.exit_code is not None:
                code = host.exit_code if host is not None else "not started"
                return ServiceAnswer(False, f"{spawn.name} is in the world, but its controller and sensors ended "
                                            f"({code}): see the log above")
            # The arm service comes up before the controller's first odometry, and until then it refuses
            # to arm: answered once the controller says on /diagnostics that it has the state.
            if link.kinematics is not None and link.arm_client.service_is_ready() and link.controller_has_state:
                return ServiceAnswer(True, answer.message)
            await asyncio.sleep(0.05)
        return ServiceAnswer(False, f"{spawn.name} is in the world, but its controller did not come up within "
                                    f"{ADD_VEHICLE_TIMEOUT_S:g} s")

    def _build_added_links(self) -> None:
        """Executor thread: the link and processes of each vehicle the physics node has added."""
        while self._links_to_build:
            spawn, built = self._links_to_build.pop(0)
            link = RosVehicleLink(self, spawn.name, spawn.vehicle_type, self.params.lockstep)
            if self.streams_subscribed:
                link.subscribe_streams()
            try:
                self.vehicle_hosts[spawn.name] = ChildLaunch(
                    "vehicle.launch.yaml", [f"namespace:={spawn.name}", f"vehicle:={spawn.vehicle_type}",
                                            f"seed:={len(self.vehicles) * 1_000_000}"])
            except OSError as error:
                self.get_logger().error(f"{spawn.name}: cannot start its controller and sensors: {error}")
            host = self.vehicle_hosts.get(spawn.name)
            self.get_logger().info(f"simAddVehicle: {spawn.name} ({spawn.vehicle_type}) added; its controller "
                                   f"and sensors start (launch/vehicle.launch.yaml, pid "
                                   f"{host.process.pid if host is not None else 'none'})")
            self.loop.call_soon_threadsafe(self._link_added, built, link)

    def _link_added(self, built: asyncio.Future, link: RosVehicleLink) -> None:
        """Event-loop thread (which iterates the vehicles): the new link joins them."""
        self.vehicles[link.name] = link
        if not built.done():
            built.set_result(link)

    async def call(self, client, request, answer=None) -> ServiceAnswer:
        """Call a ROS service from the event loop; a missing or silent server is a failed answer, never a hang.
        ``answer(response)`` makes the ServiceAnswer (default: a std_srvs response's success and message)."""
        for _ in range(40):  # discovery may still be under way: up to 2 s
            if client.service_is_ready():
                break
            await asyncio.sleep(0.05)
        else:
            return ServiceAnswer(False, f"service {client.srv_name} is not available (is its node running?)")
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        ros_future = client.call_async(request)
        ros_future.add_done_callback(lambda f: loop.call_soon_threadsafe(_settle, done, f))
        try:
            response = await asyncio.wait_for(done, SERVICE_TIMEOUT_S)
        except asyncio.TimeoutError:
            return ServiceAnswer(False, f"service {client.srv_name} did not answer within {SERVICE_TIMEOUT_S:g} s")
        if answer is not None:
            return answer(response)
        return ServiceAnswer(bool(response.success), str(response.message))

    async def pause(self, paused: bool) -> ServiceAnswer:
        answer = await self.call(self.pause_client, SetBool.Request(data=paused))
        if answer.success:
            self.paused = paused
            if paused:  # the state a client reads next is the one the clock stopped at
                await asyncio.sleep(PAUSE_SETTLE_S)
                if self.clock.now_s is not None:
                    await self._states_caught_up(self.clock.now_s)
        return answer

    async def continue_for(self, seconds: float) -> None:
        # From what a client last read: the state can be ahead of the last /clock message to arrive.
        stamps = [link.kinematics.time_s for link in self.vehicles.values() if link.kinematics is not None]
        start = max([await self.clock.started(), *stamps])
        self.continue_pub.publish(Float64(data=float(seconds)))
        self.paused = True
        target = start + seconds - 1e-6
        try:
            await asyncio.wait_for(self.clock.wait_until(target), timeout=10.0 + 10.0 * seconds)
        except asyncio.TimeoutError:
            self.get_logger().warning(f"simContinueForTime({seconds:g}): the clock did not advance (physics node?)")
            return
        await self._states_caught_up(target)

    async def _states_caught_up(self, time_s: float, timeout_s: float = 1.0) -> None:
        """Wait (briefly) until every vehicle's state reaches ``time_s``: /clock can arrive before odometry,
        and a client reading the state right after simContinueForTime must see the advanced state."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            stamps = [link.kinematics.time_s for link in self.vehicles.values() if link.kinematics is not None]
            if len(stamps) == len(self.vehicles) and min(stamps) >= time_s:
                return
            await asyncio.sleep(0.002)

    async def reset(self) -> ServiceAnswer:
        answer = await self.call(self.reset_client, Trigger.Request())
        if answer.success:
            self.paused = False
        return answer

    def set_wind(self, wind_enu) -> None:
        self.wind_pub.publish(encode_vector3_stamped(0, "map", [float(v) for v in wind_enu]))

    def destroy_node(self):
        for host in self.vehicle_hosts.values():
            host.stop()
        self.serving.close()
        self.api.render_executor.shutdown(wait=False, cancel_futures=True)
        return super().destroy_node()


def _settle(done: asyncio.Future, ros_future) -> None:
    if done.done():
        return
    exception = ros_future.exception()
    if exception is not None:
        done.set_exception(exception)
    else:
        done.set_result(ros_future.result())


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _RosLogger:
    """The node's logger behind the ``logging``-style calls of the pure core (warnings throttled per text)."""

    def __init__(self, node: Node):
        self._logger = node.get_logger()

    def info(self, text: str) -> None:
        self._logger.info(text)

    def warning(self, text: str) -> None:
        self._logger.warning(text, throttle_duration_sec=2.0)

    def error(self, text: str) -> None:
        self._logger.error(text, throttle_duration_sec=2.0)


def main(args=None):
    return run_node(AirSimApiNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
