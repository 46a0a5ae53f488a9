"""AirSim API node: AirSim's msgpack-rpc server in front of the ROS graph.

A thin adapter around :class:`aerial_sim.airsim.api.AirSimApi`: an asyncio
loop in its own thread serves ``host:port`` (127.0.0.1:41451 by default;
anything but loopback is logged as a warning) with
:class:`aerial_sim.airsim.rpc.MsgpackRpcServer`; this node keeps the latest
message of every topic the API reads and turns the API's commands into the
graph's public inputs.

Per vehicle (namespace = vehicle name):
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
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PoseStamped, TwistStamped, Vector3Stamped
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParametersAtomically
from rclpy.clock import Clock as WallClock
from rclpy.clock import ClockType
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import BatteryState, FluidPressure, MagneticField, NavSatFix, NavSatStatus, PointCloud2, Range
from std_msgs.msg import Float64, Float64MultiArray
from std_srvs.srv import SetBool, Trigger

from aerial_sim.airsim.api import AirSimApi, ApiParams
from aerial_sim.airsim.flight import GuidanceParams
from aerial_sim.airsim.graph import (
    BatteryReading,
    GpsReading,
    ImuReading,
    KinematicsReading,
    LidarReading,
    MagneticReading,
    PressureReading,
    RangeReading,
    RotorReading,
    ServiceAnswer,
    SimClock,
)
from aerial_sim.airsim.camera_rig import CameraRig
from aerial_sim.airsim.rpc import MsgpackRpcServer
from aerial_sim.airsim.sensors import NamedSensors
from aerial_sim.airsim.settings import usable_settings
from aerial_sim.cdr.decode import ImuFields, JointStateFields, OdometryFields, decode_clock
from aerial_sim.cdr.encode import (encode_float64_array, encode_pose_stamped, encode_twist_stamped,
                                   encode_vector3_stamped)
from aerial_sim.config import require, require_positive
from aerial_sim.control.geometry import quat_from_yaw, quat_to_matrix
from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.environment.gravity import normal_gravity
from aerial_sim.nodes.ros.child_launch import ChildLaunch
from aerial_sim.nodes.ros.clocks import InputStampClock
from aerial_sim.nodes.ros.event_loop_thread import EventLoopThread
from aerial_sim.nodes.ros.message_fields import is_finite_sequence
from aerial_sim.nodes.ros.parameters import declare_params
from aerial_sim.nodes.ros.qos import COMMAND_QOS, stream_qos
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.services import SERVICE_QOS
from aerial_sim.nodes.ros.stamps import from_stamp, to_stamp_ns
from aerial_sim.nodes.ros.subscriptions import subscribe_imu, subscribe_joint_state, subscribe_odometry
from aerial_sim.sensors.truth import truth_from_odometry
from aerial_sim.vehicles.fleet import require_served_vehicles, served_vehicles
from aerial_sim.vehicles.multirotor import load_vehicle
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


class RosVehicleLink:
    """:class:`aerial_sim.airsim.graph.VehicleLink` on one vehicle's topics and services."""

    def __init__(self, node: "AirSimApiNode", name: str, vehicle_type: str, lockstep: bool,
                 namespace: str | None = None):
        self.node = node
        self.name = name  # what AirSim clients call it (a settings file's vehicle name, or the ROS name)
        self.namespace = namespace or name
        self.vehicle = load_vehicle(vehicle_type)
        self.kinematics = self.imu = self.pressure = self.magnetic = self.gps = None
        self.rotors = self.lidar = self.distance = self.battery = None
        self.controller_mode = None
        #: Whether the controller's last ``/diagnostics`` said OK: it has the vehicle's state, so it can arm.
        self.controller_has_state = False
        self._specific_force = (0.0, 0.0, 0.0)
        self._gps_velocity = (0.0, 0.0, 0.0)
        ns = f"/{self.namespace}"
        self.lockstep = lockstep
        self.subscriptions: list = []  # the state streams, held only while a client is connected
        self.live = False  # the streams are subscribed: a callback still queued after unsubscribing is dropped
        pub = node.create_publisher
        self.pose_pub = pub(PoseStamped, f"{ns}/cmd_pose", COMMAND_QOS)
        self.vel_pub = pub(TwistStamped, f"{ns}/cmd_vel", COMMAND_QOS)
        self.attitude_pub = pub(PoseStamped, f"{ns}/cmd_attitude", COMMAND_QOS)
        self.rates_pub = pub(TwistStamped, f"{ns}/cmd_rates", COMMAND_QOS)
        self.motors_pub = pub(Float64MultiArray, f"{ns}/cmd_motors", COMMAND_QOS)
        self.teleport_pub = pub(PoseStamped, f"{ns}/set_pose", COMMAND_QOS)
        self.pose_set = None
        node.create_subscription(PoseStamped, f"{ns}/set_pose/applied", self.on_pose_set, COMMAND_QOS)
        self.arm_client = node.create_client(SetBool, f"{ns}/arm", qos_profile=SERVICE_QOS)
        self.takeoff_client = node.create_client(Trigger, f"{ns}/takeoff", qos_profile=SERVICE_QOS)
        self.land_client = node.create_client(Trigger, f"{ns}/land", qos_profile=SERVICE_QOS)
        self.reset_client = node.create_client(Trigger, f"{ns}/reset", qos_profile=SERVICE_QOS)
        self.kill_client = node.create_client(Trigger, f"{ns}/kill", qos_profile=SERVICE_QOS)
        self.body_frame = f"{self.namespace}/base_link"

    def subscribe_streams(self) -> None:
        """Read the vehicle's state streams (a client connected; executor thread)."""
        node, ns, qos = self.node, f"/{self.namespace}", stream_qos(self.lockstep)
        sub = node.create_subscription
        self.live = True
        self.subscriptions = [
            subscribe_odometry(node, f"{ns}/ground_truth/odom", self.on_odom, qos),
            subscribe_imu(node, f"{ns}/ground_truth/imu", self.on_truth_imu, qos),
            subscribe_joint_state(node, f"{ns}/rotors", self.on_rotors, qos),
            subscribe_imu(node, f"{ns}/imu/data", self.on_imu, qos),
            sub(FluidPressure, f"{ns}/air_pressure", self.on_pressure, qos),
            sub(MagneticField, f"{ns}/magnetic_field", self.on_magnetic, qos),
            sub(NavSatFix, f"{ns}/gps/fix", self.on_gps, qos),
            sub(TwistStamped, f"{ns}/gps/vel", self.on_gps_velocity, qos),
            sub(PointCloud2, f"{ns}/lidar/points", self.on_lidar, qos),
            sub(Range, f"{ns}/distance/range", self.on_range, qos),
            sub(BatteryState, f"{ns}/battery", self.on_battery, qos),
        ]

    def unsubscribe_streams(self) -> None:
        """Stop reading the state streams and forget the last readings (the last client left): the
        next client waits for fresh ones instead of being answered from stale state."""
        self.live = False
        for subscription in self.subscriptions:
            self.node.destroy_subscription(subscription)
        self.subscriptions = []
        self.kinematics = self.imu = self.pressure = self.magnetic = self.gps = None
        self.rotors = self.lidar = self.distance = self.battery = None

    # -- state in (executor thread; each reading is replaced whole, so readers never see half of one) --
    def on_odom(self, odom: OdometryFields) -> None:
        truth = truth_from_odometry(odom)
        if truth is None or sum(q * q for q in truth.orientation) < 0.5:
            self.node.get_logger().warning(f"{self.name}/ground_truth/odom with NaN or a zero quaternion: ignored",
                                           throttle_duration_sec=5)
            return
        rotation = quat_to_matrix(truth.orientation)
        gravity = normal_gravity(self.node.home.latitude, self.node.home.altitude + truth.position[2])
        accel = rotation @ np.asarray(self._specific_force) - np.array([0.0, 0.0, gravity])
        previous = self.kinematics
        angular_accel = (0.0, 0.0, 0.0)
        if previous is not None and 0.0 < truth.time_s - previous.time_s < 0.1:
            dt = truth.time_s - previous.time_s
            angular_accel = tuple((a - b) / dt for a, b in zip(truth.angular_velocity_body, previous.angular_velocity_body))
        if not self.live:
            return  # delivered after the last client left: the next client must not be answered from it
        self.kinematics = KinematicsReading(truth.time_s, tuple(truth.position), tuple(truth.orientation),
                                            truth.velocity_world, tuple(truth.angular_velocity_body),
                                            tuple(float(a) for a in accel), angular_accel)

    def on_truth_imu(self, imu: ImuFields) -> None:
        if is_finite_sequence(imu.linear_acceleration):
            self._specific_force = imu.linear_acceleration

    def on_rotors(self, rotors: JointStateFields) -> None:
        if len(rotors.velocity) == len(rotors.effort) and is_finite_sequence(rotors.velocity + rotors.effort):
            self.rotors = RotorReading(rotors.time_s, rotors.velocity, rotors.effort)

    def on_imu(self, imu: ImuFields) -> None:
        if not is_finite_sequence(imu.orientation_wxyz + imu.angular_velocity + imu.linear_acceleration):
            return
        orientation = imu.orientation_wxyz
        if imu.orientation_covariance[0] == -1.0 or sum(c * c for c in orientation) < 0.5:
            truth = self.kinematics  # an IMU without orientation (MPU-6000): AirSim reports the estimate
            orientation = truth.orientation if truth is not None else (1.0, 0.0, 0.0, 0.0)
        self.imu = ImuReading(imu.time_s, orientation, imu.angular_velocity, imu.linear_acceleration)

    def on_pressure(self, message: FluidPressure) -> None:
        if math.isfinite(message.fluid_pressure):
            self.pressure = PressureReading(from_stamp(message.header.stamp), message.fluid_pressure)

    def on_magnetic(self, message: MagneticField) -> None:
        f = message.magnetic_field
        if is_finite_sequence((f.x, f.y, f.z)):
            self.magnetic = MagneticReading(from_stamp(message.header.stamp), (f.x, f.y, f.z),
                                            tuple(message.magnetic_field_covariance))

    def on_gps(self, message: NavSatFix) -> None:
        values = (message.latitude, message.longitude, message.altitude)
        cov = message.position_covariance
        if not is_finite_sequence(values):
            return
        self.gps = GpsReading(from_stamp(message.header.stamp), *values, math.sqrt(max(cov[0], 0.0)),
                              math.sqrt(max(cov[8], 0.0)), message.status.status >= NavSatStatus.STATUS_FIX,
                              self._gps_velocity)

    def on_gps_velocity(self, message: TwistStamped) -> None:
        v = message.twist.linear
        if is_finite_sequence((v.x, v.y, v.z)):
            self._gps_velocity = (v.x, v.y, v.z)

    def on_lidar(self, message: PointCloud2) -> None:
        try:
            points, segmentation = point_cloud_xyz(message)
        except ValueError as error:
            self.node.get_logger().warning(f"{self.name}/lidar/points unusable ({error}); ignored", throttle_duration_sec=5)
            return
        self.lidar = LidarReading(from_stamp(message.header.stamp), points, segmentation)

    def on_range(self, message: Range) -> None:
        if is_finite_sequence((message.min_range, message.max_range)) and not math.isnan(message.range):
            self.distance = RangeReading(from_stamp(message.header.stamp), message.range, message.min_range,
                                         message.max_range)

    def on_battery(self, message: BatteryState) -> None:
        values = (message.voltage, message.current, message.percentage, message.capacity)
        if not (is_finite_sequence(values) and message.voltage >= 0 and 0.0 <= message.percentage <= 1.0
                and message.capacity > 0):
            self.node.get_logger().warning(f"{self.name}/battery with a voltage, current, percentage or capacity out of "
                                           f"range ({values}): ignored", throttle_duration_sec=5)
            return
        self.battery = BatteryReading(from_stamp(message.header.stamp), message.voltage, -message.current,
                                      message.percentage, message.capacity * 1000.0, max(len(message.cell_voltage), 1))

    def on_pose_set(self, message: PoseStamped) -> None:
        p, q = message.pose.position, message.pose.orientation
        self.pose_set = (from_stamp(message.header.stamp), (p.x, p.y, p.z), (q.w, q.x, q.y, q.z))

    def on_diagnostics(self, status) -> None:
        self.controller_has_state = status.level == DiagnosticStatus.OK
        for value in status.values:
            if value.key == "mode":
                self.controller_mode = value.value

    # -- commands out (event-loop thread; rclpy publishers are thread-safe) --
    # Commands go out as CDR bytes with zero padding (aerial_sim.cdr): rclpy leaves the bytes after a
    # frame id such as drone1/base_link, and in Float64MultiArray, as its buffer held them (issue 32).
    def _stamp_ns(self) -> int:
        return to_stamp_ns(self.node.clock.now_s or 0.0)

    def send_pose(self, position, yaw) -> None:
        self.pose_pub.publish(encode_pose_stamped(self._stamp_ns(), "map", [float(v) for v in position],
                                                      quat_from_yaw(float(yaw))))

    def send_velocity(self, velocity_world, yaw_rate) -> None:
        self.vel_pub.publish(encode_twist_stamped(self._stamp_ns(), "map", [float(v) for v in velocity_world],
                                                      (0.0, 0.0, float(yaw_rate))))

    def send_attitude(self, orientation, altitude, throttle) -> None:
        frame = "map" if altitude is not None else self.body_frame
        self.attitude_pub.publish(encode_pose_stamped(
            self._stamp_ns(), frame, (0.0, 0.0, float(altitude if altitude is not None else throttle)),
            [float(c) for c in orientation]))

    def send_rates(self, rates_body, altitude, throttle) -> None:
        frame = "map" if altitude is not None else self.body_frame
        self.rates_pub.publish(encode_twist_stamped(
            self._stamp_ns(), frame, (0.0, 0.0, float(altitude if altitude is not None else throttle)),
            [float(v) for v in rates_body]))

    def send_motors(self, controls) -> None:
        self.motors_pub.publish(encode_float64_array([float(u) for u in controls]))

    def teleport(self, position, orientation) -> None:
        self.teleport_pub.publish(encode_pose_stamped(self._stamp_ns(), "map", [float(v) for v in position],
                                                          [float(c) for c in orientation]))

    async def arm(self, arm: bool) -> ServiceAnswer:
        return await self.node.call(self.arm_client, SetBool.Request(data=bool(arm)))

    async def takeoff(self) -> ServiceAnswer:
        return await self.node.call(self.takeoff_client, Trigger.Request())

    async def land(self) -> ServiceAnswer:
        return await self.node.call(self.land_client, Trigger.Request())

    async def reset_controller(self) -> ServiceAnswer:
        return await self.node.call(self.reset_client, Trigger.Request())

    async def kill(self) -> ServiceAnswer:
        return await self.node.call(self.kill_client, Trigger.Request())


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


def point_cloud_xyz(message: PointCloud2) -> tuple[np.ndarray, np.ndarray]:
    """(N x 3 float32 x y z, N segmentation ids or zeros) of a PointCloud2 with float32 x, y, z fields."""
    offsets = {f.name: (f.offset, f.datatype) for f in message.fields}
    float32 = 7  # sensor_msgs/PointField.FLOAT32
    for axis in "xyz":
        if axis not in offsets or offsets[axis][1] != float32:
            raise ValueError(f"no float32 field '{axis}'")
    count = message.width * message.height
    if message.point_step <= 0 or len(message.data) < count * message.point_step:
        raise ValueError(f"{len(message.data)} bytes cannot hold {count} points of {message.point_step} bytes")
    raw = np.frombuffer(bytes(message.data), np.uint8)[: count * message.point_step].reshape(count, message.point_step)
    order = ">" if message.is_bigendian else "<"
    xyz = np.stack([raw[:, offsets[a][0]: offsets[a][0] + 4].copy().view(f"{order}f4").ravel() for a in "xyz"], axis=1)
    segmentation = np.zeros(count, np.int64)
    if "segmentation_id" in offsets:
        offset, datatype = offsets["segmentation_id"]
        kinds = {1: "i1", 2: "u1", 3: "i2", 4: "u2", 5: "i4", 6: "u4", 7: "f4", 8: "f8"}
        size = int(kinds[datatype][1:]) if datatype in kinds else 0
        if size:
            segmentation = raw[:, offset: offset + size].copy().view(f"{order}{kinds[datatype]}").ravel().astype(np.int64)
    return xyz.astype(np.float32), segmentation


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
