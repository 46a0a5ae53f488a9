"""Physics node: one per world, simulates every vehicle listed in its parameters.

A thin adapter around :class:`aerial_sim.physics.world.PhysicsWorld`:

- subscribes ``/<vehicle>/motor_commands`` (u_i in [0, 1]; with many vehicles also
  ``/swarm/motor_commands``, the same for a fleet in one message) and
  ``/<vehicle>/rotor_drag/wrench`` (external wrench in the body frame);
- steps the world at ``rate_hz`` (1000 Hz) in a pacing thread — real time,
  ``clock_speed`` times real time, as fast as possible (``clock_speed: 0``), or
  ``lockstep`` (each control period waits for one new command per vehicle and for
  the outputs of every lockstep participant, :class:`LockstepOutputs`);
- publishes ``/clock``, ``ground_truth/odom``, ``ground_truth/imu`` and
  ``rotors`` once per control period (``publish_rate_hz``, 250 Hz), not on
  every 1 ms step: consumers need 250 Hz, and publishing at the step rate would
  cost more than the physics itself;
- simulation control (what AirSim's API needs; standard interfaces only):
  services ``/physics/pause`` (std_srvs/SetBool: stop or restart the clock)
  and ``/physics/reset`` (std_srvs/Trigger: every vehicle back to its start,
  at rest; sim time goes on), topics ``/physics/continue_for``
  (std_msgs/Float64: run that many simulated seconds, whole control periods,
  then pause), ``/physics/wind`` (geometry_msgs/Vector3Stamped, ``map`` ENU
  m/s) and ``/<vehicle>/set_pose`` (geometry_msgs/PoseStamped in ``map``:
  teleport, at rest). These edits are queued and applied by the simulation
  thread between control periods, also while paused.

Inputs are bounded (README, "Robustness"): a wrench above ``max_external_force_n`` /
``max_external_torque_nm`` or a teleport beyond ``max_position_m`` is refused with a
warning. When a vehicle's motor commands stop for ``motor_command_timeout_s`` (sim
and wall time, after the first one; not in lockstep, which waits for them) its motors are cut
to zero — the failsafe — with an ERROR on ``/diagnostics`` until commands return.
A simulation that cannot go on (a state that is no longer finite, any exception in
the loop) says why on ``/diagnostics`` and in the log, and the node exits 1.

Many vehicles (:class:`SwarmOutputs`): the vehicles come from ``vehicle_names`` or a
fleet (``fleet`` file or ``vehicles`` count, :mod:`aerial_sim.vehicles.fleet`);
ground truth goes out at ``ground_truth_rate_hz`` per vehicle, lowered at start to
what the node can publish and still keep real time (it logs what it chose), never below
``ground_truth_min_rate_hz`` (50 Hz: the controllers' stable rate; a warning says when load
forces that floor); the
whole swarm's poses go out on ``/swarm/poses``, its ground truth in one message on
``/swarm/state`` and vehicle-to-vehicle collisions on ``<vehicle>/collisions``.
"""

from __future__ import annotations

import importlib
import math
import threading
import time
from dataclasses import dataclass, field, replace

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseArray, PoseStamped, TransformStamped, Vector3Stamped, WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.duration import Duration
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState, PointCloud2
from std_msgs.msg import Float64, Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger

from aerial_sim.cdr import (cdr_header_stamp_ns, decode_float64_array, encode_clock, encode_imu, encode_joint_state,
                            encode_odometry, encode_pose_array)
from aerial_sim.config import ParamsError, require, require_non_negative, require_positive
from aerial_sim.control.controller import STABLE_STATE_RATE_HZ
from aerial_sim.environment.atmosphere import MAX_ALTITUDE_M, MIN_ALTITUDE_M
from aerial_sim.environment.environment import EnvironmentParams
from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.physics.lockstep import LockstepGate, Participant, parse_participants
from aerial_sim.physics.rotation import rotate_inverse
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld, RunControl
from aerial_sim.rosnode.frames import make_tf_broadcaster
from aerial_sim.rosnode.lockstep import LOCKSTEP_ANNOUNCEMENTS_QOS, LOCKSTEP_PARTICIPANTS_TOPIC
from aerial_sim.rosnode.parameters import declare_params
from aerial_sim.rosnode.qos import COMMAND_QOS, LOCKSTEP_QOS, stream_qos
from aerial_sim.rosnode.raw_take import not_called, take_raw, unspun_reader_node
from aerial_sim.rosnode.run import run_node
from aerial_sim.rosnode.stamps import to_stamp
from aerial_sim.vehicles import swarm_messages
from aerial_sim.vehicles.fleet import FleetSelection, require_vehicle_names
from aerial_sim.vehicles.multirotor import load_vehicle
from aerial_sim.vehicles.swarm_messages import GROUND_TRUTH_VARIANCE, VECTOR_COVARIANCE


@dataclass(frozen=True)
class PhysicsNodeParams:
    """ROS parameters of the physics node (defaults here only)."""

    vehicle_names: tuple[str, ...] = ("drone1",)
    vehicle_types: tuple[str, ...] = ("quad_x",)
    #: x, y, z (ENU, m) of each vehicle in turn.
    initial_positions: tuple[float, ...] = (0.0, 0.0, 0.0)
    initial_yaws_rad: tuple[float, ...] = (0.0,)
    scene: str = "empty"
    rate_hz: float = 1000.0
    publish_rate_hz: float = 250.0
    clock_speed: float = 1.0
    lockstep: bool = False
    linear_drag_enabled: bool = True
    wrench_timeout_s: float = 0.5
    #: Lockstep: the first step waits until the subscribers to /clock and ground truth have not
    #: changed for this long (wall s), at most lockstep_settle_max_s: every node joins at t = 0.
    lockstep_settle_s: float = 1.5
    lockstep_settle_max_s: float = 20.0
    #: Lockstep: more outputs to wait for, besides those announced on /lockstep/participants:
    #: entries TOPIC@RATE_HZ[:FIRST_S[:LAG_S]] separated by spaces or commas (aerial_sim.physics.lockstep),
    #: e.g. a real driver's "/drone1/realsense/depth/image_rect_raw@30".
    lockstep_participants: str = ""
    #: Lockstep: how far (sim s) the clock may run ahead of a participant's due output before it
    #: waits for it. Each output must still come, in order and none lost (reliable, depth
    #: LOCKSTEP_QOS), and outputs depend only on their inputs, so bags are the same for any value;
    #: the slack lets sensors and the camera work while physics steps on instead of one after the
    #: other. 0 = wait at every due time. Motor commands are awaited every period regardless. Keep 0
    #: for a participant whose output feeds back into control (attitude_source: imu).
    lockstep_slack_s: float = 0.1
    #: Largest external force / torque a rotor_drag/wrench message may apply; larger ones are refused.
    max_external_force_n: float = 50.0
    max_external_torque_nm: float = 5.0
    #: Motor commands older than this, in sim and in wall time, cut the motors (failsafe); 0 disables.
    #: Not in lockstep (which waits for every command).
    motor_command_timeout_s: float = 1.0
    #: set_pose targets farther than this from the origin are refused, m.
    max_position_m: float = 100_000.0
    publish_tf: bool = True
    home: HomePoint = field(default_factory=HomePoint)
    wind_enu_m_s: tuple[float, float, float] = (0.0, 0.0, 0.0)
    #: A fleet file (config/fleets/) or a number of vehicles drone1..N on a grid; either one
    #: replaces vehicle_names, vehicle_types, initial_positions and initial_yaws_rad.
    fleet: str = ""
    vehicles: int = 0
    #: Ground truth (odom, imu, rotors, TF) per vehicle, Hz; 0 = publish_rate_hz. Lowered at start
    #: to what keeps real time (a whole number of control periods apart). /clock keeps publish_rate_hz.
    ground_truth_rate_hz: float = 0.0
    #: Never lower ground truth below this, Hz, whatever the load: the flight controllers act on
    #: the latest odometry, and the cascade (control.controller.STABLE_STATE_RATE_HZ) rings once
    #: that odometry plus the command's transport are about 60 ms old and loses the vehicle at 80.
    #: When load would need less, the node publishes at this rate and runs slower than real time.
    #: 0 disables the floor (no controller flies).
    ground_truth_min_rate_hz: float = STABLE_STATE_RATE_HZ
    #: Share of one core the node may spend (physics + publishing) when it chooses that rate.
    cpu_budget: float = 0.8
    #: Physics path: auto (scalar for one vehicle, batched arrays for more), scalar or batched.
    stepping: str = "auto"

    def __post_init__(self):
        require_non_negative(self, "ground_truth_rate_hz", "ground_truth_min_rate_hz")
        require(self.ground_truth_min_rate_hz <= self.publish_rate_hz,
                f"ground_truth_min_rate_hz ({self.ground_truth_min_rate_hz:g}) cannot exceed publish_rate_hz "
                f"({self.publish_rate_hz:g})")
        require(self.ground_truth_rate_hz == 0.0 or self.ground_truth_rate_hz >= self.ground_truth_min_rate_hz,
                f"ground_truth_rate_hz ({self.ground_truth_rate_hz:g}) is below ground_truth_min_rate_hz "
                f"({self.ground_truth_min_rate_hz:g}), the rate the flight controllers are stable at; "
                "set ground_truth_min_rate_hz lower too if no controller flies these vehicles")
        require(0.0 < self.cpu_budget <= 1.0, f"cpu_budget must be in (0, 1], got {self.cpu_budget!r}")
        require(self.vehicles >= 0, f"vehicles must be >= 0, got {self.vehicles!r}")
        require_positive(self, "rate_hz", "publish_rate_hz", "wrench_timeout_s", "max_external_force_n",
                         "max_external_torque_nm", "max_position_m")
        require_non_negative(self, "clock_speed", "motor_command_timeout_s", "lockstep_settle_s", "lockstep_settle_max_s")
        # A participant may lag by slack x publish_rate_hz ground-truth messages: half its queue at most.
        most = LOCKSTEP_QOS.depth / 2 / self.publish_rate_hz
        require(0.0 <= self.lockstep_slack_s <= most,
                f"lockstep_slack_s must be in [0, {most:g}] s (half of the {LOCKSTEP_QOS.depth} messages a lockstep "
                f"queue holds at publish_rate_hz {self.publish_rate_hz:g}), got {self.lockstep_slack_s!r}")
        count = len(self.vehicle_names)
        require(count > 0, "vehicle_names must name at least one vehicle")
        require_vehicle_names(self.vehicle_names)
        require(len(set(self.vehicle_names)) == count, f"vehicle_names must be unique, got {self.vehicle_names}")
        require(len(self.vehicle_types) == count, f"vehicle_types needs {count} entries (one per vehicle)")
        require(len(self.initial_positions) == 3 * count, f"initial_positions needs {3 * count} numbers (x, y, z per vehicle)")
        require(len(self.initial_yaws_rad) == count, f"initial_yaws_rad needs {count} entries (one per vehicle)")
        require(self.publish_rate_hz <= self.rate_hz, "publish_rate_hz cannot exceed rate_hz")
        parse_participants(self.lockstep_participants)  # a ParamsError names the bad entry

    @property
    def steps_per_period(self) -> int:
        return max(1, round(self.rate_hz / self.publish_rate_hz))

    def with_fleet(self) -> "PhysicsNodeParams":
        """These parameters with the vehicles of the selected fleet (unchanged without one)."""
        selection = FleetSelection(fleet=self.fleet, vehicles=self.vehicles,
                                   vehicle_type=self.vehicle_types[0] if self.vehicle_types else "quad_x")
        if not selection.given:
            return self
        fleet = selection.load()
        return replace(
            self,
            vehicle_names=tuple(v.name for v in fleet),
            vehicle_types=tuple(v.type for v in fleet),
            initial_positions=tuple(c for v in fleet for c in v.position),
            initial_yaws_rad=tuple(v.yaw_rad for v in fleet),
        )


class Wakeup(threading.Event):
    """The simulation thread's wake-up (a command, a world edit, a pause, a participant armed...). In
    lockstep it also triggers a guard condition, so the thread's wait on the middleware
    (:meth:`PhysicsNode._wait_for_lockstep_inputs`) ends for it too."""

    def __init__(self, context=None):
        super().__init__()
        self.guard = _rclpy.GuardCondition(context.handle) if context is not None else None

    def set(self) -> None:
        super().set()
        if self.guard is not None:
            try:
                self.guard.trigger_guard_condition()
            except Exception:  # noqa: BLE001 - destroyed while stopping: the event alone will do
                pass


def command_subscription(node: "PhysicsNode", topic: str, callback):
    """A raw motor-command subscription: ``callback`` called by the executor, or in lockstep none: the
    simulation thread takes the messages itself (``node.command_reader`` is spun by no executor)."""
    if node.command_reader is not None:
        return node.command_reader.create_subscription(Float64MultiArray, topic, not_called, COMMAND_QOS, raw=True)
    return node.create_subscription(Float64MultiArray, topic, callback, COMMAND_QOS, raw=True)


class SimulationDiverged(RuntimeError):
    """A vehicle's state stopped being finite: publishing it would spread NaN through the graph."""


class VehicleChannel:
    """The publishers, subscriptions and last inputs of one simulated vehicle."""

    def __init__(self, node: "PhysicsNode", name: str, rotor_count: int, lockstep: bool):
        self.name = name
        self.rotor_count = rotor_count
        self.frame = f"{name}/base_link"
        qos = stream_qos(lockstep)
        self.odom_pub = node.create_publisher(Odometry, f"/{name}/ground_truth/odom", qos)
        self.imu_pub = node.create_publisher(Imu, f"/{name}/ground_truth/imu", qos)
        self.rotors_pub = node.create_publisher(JointState, f"/{name}/rotors", qos)
        self.rotor_names = [f"rotor_{i}" for i in range(rotor_count)]
        self._readers_asked_at = -math.inf
        self._readers = (True, True, True)
        self.pending_controls: list[float] | None = None
        self.commands_received = 0
        self.command_received_at = -math.inf  # sim time of the last valid motor command
        self.command_received_wall = -math.inf  # and its time.monotonic()
        self.failsafe = False  # motors cut: commands stopped for motor_command_timeout_s
        self.wrench: tuple[tuple[float, float, float], tuple[float, float, float]] | None = None
        self.wrench_received_at = -math.inf
        self.command_subscription = command_subscription(node, f"/{name}/motor_commands", self.on_motor_commands)
        self.wrench_topic = f"/{name}/rotor_drag/wrench"
        self.wrench_subscription = node.create_subscription(WrenchStamped, self.wrench_topic, self.on_wrench,
                                                            stream_qos(lockstep))
        node.create_subscription(PoseStamped, f"/{name}/set_pose", self.on_set_pose, COMMAND_QOS)
        self._node = node

    #: How often (wall s) :meth:`readers` asks again (each question costs 1-3 us, per topic and vehicle).
    READERS_REFRESH_S = 0.5

    def readers(self) -> tuple[bool, bool, bool]:
        """Whether ground_truth/odom, ground_truth/imu and rotors have readers (asked at most every
        READERS_REFRESH_S: a reader that comes waits that long for its first message)."""
        now = time.monotonic()
        if now - self._readers_asked_at >= self.READERS_REFRESH_S:
            self._readers_asked_at = now
            self._readers = tuple(p.get_subscription_count() > 0 for p in (self.odom_pub, self.imu_pub, self.rotors_pub))
        return self._readers

    def on_motor_commands(self, data: bytes) -> None:
        """Raw: decoding the values alone costs a fraction of rclpy's message (on every lockstep period's
        critical path); bytes that are no Float64MultiArray raise ValueError, which InputGuard reports (in
        lockstep :meth:`PhysicsNode._take_commands`)."""
        _, _, values = decode_float64_array(data)
        self.accept_controls(list(values), "motor_commands")

    def accept_controls(self, controls: list[float], source: str) -> None:
        """A command from ``<vehicle>/motor_commands`` or the vehicle's row of ``/swarm/motor_commands``."""
        problem = motor_command_problem(controls, self.rotor_count)
        if problem:
            self._node.get_logger().warning(
                f"{self.name}: {source} rejected ({problem}); keeping the last valid command",
                throttle_duration_sec=2.0,
            )
            return
        with self._node.inputs_lock:
            self.pending_controls = controls
            self.commands_received += 1
            self.command_received_at = self._node.world.time_s
            self.command_received_wall = time.monotonic()
        if threading.current_thread() is not self._node.simulation_thread:  # it is looking already (lockstep)
            self._node.command_arrived.set()

    def on_wrench(self, message: WrenchStamped) -> None:
        force = (message.wrench.force.x, message.wrench.force.y, message.wrench.force.z)
        torque = (message.wrench.torque.x, message.wrench.torque.y, message.wrench.torque.z)
        problem = wrench_problem(force, torque, self._node.params)
        if problem:
            self._node.get_logger().warning(f"{self.name}/rotor_drag/wrench refused ({problem})",
                                            throttle_duration_sec=2.0)
            return
        with self._node.inputs_lock:
            self.wrench = (force, torque)
            self.wrench_received_at = self._node.world.time_s
        if self._node.lockstep_outputs is not None:  # stored first: a released clock applies this wrench
            stamp = message.header.stamp
            self._node.lockstep_outputs.observe(self.wrench_topic, stamp.sec * 1_000_000_000 + stamp.nanosec)


    def on_set_pose(self, message: PoseStamped) -> None:
        p, q = message.pose.position, message.pose.orientation
        position, orientation = (p.x, p.y, p.z), (q.w, q.x, q.y, q.z)
        norm = math.sqrt(sum(c * c for c in orientation))
        limit = self._node.params.max_position_m
        altitude = self._node.params.home.altitude + position[2]
        if (message.header.frame_id != "map" or not all(math.isfinite(v) for v in position + orientation)
                or norm < 0.5 or math.dist(position, (0.0, 0.0, 0.0)) > limit
                or not MIN_ALTITUDE_M <= altitude <= MAX_ALTITUDE_M - 1000.0):
            self._node.get_logger().warning(
                f"{self.name}/set_pose refused: needs frame 'map', finite values, a unit quaternion, "
                f"a position within max_position_m ({limit:g} m) of the origin and an altitude inside the "
                f"atmosphere model", throttle_duration_sec=2.0)
            return
        self._node.edit_world(lambda world: world.set_kinematics(
            self.name, position, orientation, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)))


def wrench_problem(force, torque, params: PhysicsNodeParams) -> str | None:
    """Why an external wrench is unusable (NaN/inf, or above the node's caps), or None when it is valid."""
    if not all(math.isfinite(v) for v in (*force, *torque)):
        return "NaN/inf"
    if math.hypot(*force) > params.max_external_force_n:
        return f"|force| {math.hypot(*force):.3g} N > max_external_force_n {params.max_external_force_n:g} N"
    if math.hypot(*torque) > params.max_external_torque_nm:
        return f"|torque| {math.hypot(*torque):.3g} N m > max_external_torque_nm {params.max_external_torque_nm:g} N m"
    return None


def motor_command_problem(controls: list[float], rotor_count: int) -> str | None:
    """Why a motor command is unusable, or None when it is valid."""
    if len(controls) != rotor_count:
        return f"expected {rotor_count} values, got {len(controls)}"
    for index, value in enumerate(controls):
        if not math.isfinite(value):
            return f"u[{index}] is {value}"
        if value < 0.0 or value > 1.0:
            return f"u[{index}] = {value:g} is outside [0, 1]"
    return None


class PhysicsNode(Node):
    def __init__(self):
        super().__init__("physics")
        self.params = declare_params(self, PhysicsNodeParams).with_fleet()
        self.world = build_world(self.params)
        self.inputs_lock = threading.Lock()
        self.command_arrived = Wakeup(self.context if self.params.lockstep else None)
        # Lockstep: the simulation thread takes the motor commands itself (_wait_for_lockstep_inputs).
        self.command_reader = unspun_reader_node(self, "commands") if self.params.lockstep else None
        self.lockstep_outputs: LockstepOutputs | None = None
        self.clock_pub = self.create_publisher(Clock, "/clock", stream_qos(self.params.lockstep))
        self.vehicles = [
            VehicleChannel(self, name, len(self.world.rotor_states(name)), self.params.lockstep)
            for name in self.params.vehicle_names
        ]
        self.tf_broadcaster = make_tf_broadcaster(self) if self.params.publish_tf else None
        self.run_control = RunControl()
        self._world_edits: list = []
        self.create_service(SetBool, "/physics/pause", self.on_pause)
        self.create_service(Trigger, "/physics/reset", self.on_reset)
        self.create_subscription(Float64, "/physics/continue_for", self.on_continue_for, COMMAND_QOS)
        self.create_subscription(Vector3Stamped, "/physics/wind", self.on_wind, COMMAND_QOS)
        self.diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", COMMAND_QOS)
        self.swarm = SwarmOutputs(self)
        if self.params.lockstep:
            self.lockstep_outputs = LockstepOutputs(self)
        self._published_at = time.monotonic()
        self._lockstep_wait_s = 0.05
        self._wait_set = None  # lockstep: (participant topics read, subscription handles, rclpy WaitSet)
        self.periods_done = 0
        self.exit_code = 0
        self.done = False  # set by the simulation thread when it cannot go on
        self._stop = threading.Event()
        self.simulation_thread = threading.Thread(target=self._run, name="physics-loop", daemon=True)
        self.simulation_thread.start()
        mode = "lockstep" if self.params.lockstep else (
            "as fast as possible" if self.params.clock_speed == 0 else f"clock_speed {self.params.clock_speed:g}"
        )
        self.get_logger().info(
            f"simulating {', '.join(self.params.vehicle_names)} at {self.params.rate_hz:g} Hz "
            f"({mode}), publishing at {self.params.publish_rate_hz:g} Hz, scene '{self.params.scene}'"
        )

    def destroy_node(self):
        self._stop.set()
        self.command_arrived.set()
        if threading.current_thread() is not self.simulation_thread:
            self.simulation_thread.join(timeout=2.0)
        if self.lockstep_outputs is not None:
            self.lockstep_outputs.reader.destroy_node()
        if self.command_reader is not None:
            self.command_reader.destroy_node()
        return super().destroy_node()

    # -- simulation control (executor thread; applied by the simulation thread) --

    def edit_world(self, edit) -> None:
        """Queue ``edit(world)`` for the simulation thread (it must not change the world mid-step)."""
        with self.inputs_lock:
            self._world_edits.append(edit)
        self.command_arrived.set()

    def on_pause(self, request, response):
        with self.inputs_lock:
            self.run_control.pause(request.data)
        self.command_arrived.set()
        response.success = True
        response.message = "paused" if request.data else "running"
        self.get_logger().info(f"simulation {response.message} at t = {self.world.time_s:.3f} s")
        return response

    def on_continue_for(self, message: Float64) -> None:
        seconds = message.data
        if not math.isfinite(seconds) or seconds < 0 or seconds > 86400.0:
            self.get_logger().warning(f"/physics/continue_for {seconds!r} refused: need 0..86400 s",
                                      throttle_duration_sec=2.0)
            return
        period_s = self.params.steps_per_period / self.params.rate_hz
        with self.inputs_lock:
            self.run_control.continue_for(math.ceil(seconds / period_s - 1e-9))
        self.command_arrived.set()

    def on_reset(self, request, response):
        def reset(world):
            for vehicle in self.vehicles:
                world.reset_vehicle(vehicle.name)
                vehicle.pending_controls, vehicle.wrench = None, None

        self.edit_world(reset)
        response.success, response.message = True, "every vehicle back at its start"
        self.get_logger().info("reset: every vehicle back at its start")
        return response

    def on_wind(self, message: Vector3Stamped) -> None:
        wind = (message.vector.x, message.vector.y, message.vector.z)
        if message.header.frame_id not in ("", "map") or not all(math.isfinite(v) and abs(v) < 200.0 for v in wind):
            self.get_logger().warning(f"/physics/wind refused: needs frame 'map' and |v| < 200 m/s, got {wind}",
                                      throttle_duration_sec=2.0)
            return
        self.edit_world(lambda world: world.set_wind(wind))

    def _apply_world_edits(self) -> bool:
        with self.inputs_lock:
            edits, self._world_edits = self._world_edits, []
        for edit in edits:
            try:
                edit(self.world)
            except ValueError as error:  # a request its checks let through and the world refuses: dropped
                self.get_logger().warning(f"world edit refused: {error}", throttle_duration_sec=2.0)
        return bool(edits)

    # -- the simulation loop (its own thread; callbacks run in the executor) --

    def _run(self) -> None:
        """Thread body: simulate until stopped; a crash ends the node with exit code 1."""
        try:
            self._simulate()
        except Exception as error:  # noqa: BLE001 - any failure must end the node visibly
            if not self.context.ok():
                return  # shutting down (Ctrl-C): publishers are gone, nothing is lost
            why = f"physics loop stopped at t = {self.world.time_s:.3f} s: {type(error).__name__}: {error}"
            self.get_logger().fatal(why)
            self._publish_status(DiagnosticStatus.ERROR, "physics", why)
            self._flush_diagnostics()  # the process ends next: let every subscriber have the ERROR
            self.exit_code = 1
            self.done = True  # run_node's spin loop ends the node from the main thread

    def _simulate(self) -> None:
        params = self.params
        period_s = params.steps_per_period / params.rate_hz
        if params.lockstep:
            self._await_settled_subscribers()
        wall_start = time.monotonic()
        self._publish_state()
        waiting_since = time.monotonic()
        was_paused = False
        while not self._stop.is_set() and self.context.ok():
            with self.inputs_lock:
                blocked = self.run_control.blocked
            if blocked:
                if self._apply_world_edits():
                    self._publish_state()  # a teleport or reset while paused is seen at once
                self.command_arrived.wait(timeout=0.05)
                self.command_arrived.clear()
                was_paused = True
                continue
            if was_paused:  # pace from here on: no catching up on the time spent paused
                was_paused = False
                if params.clock_speed > 0:
                    wall_start = time.monotonic() - self.periods_done * period_s / params.clock_speed
            if params.lockstep:
                if not self._lockstep_ready():
                    if time.monotonic() - self._published_at > 0.5:
                        # Re-send this period's state: a controller or sensor that joined late (DDS
                        # discovery) must still get it. Each answers a stamp once.
                        self._publish_state()
                    if time.monotonic() - waiting_since > 5.0:
                        self.get_logger().info(f"lockstep: waiting at t = {self.world.time_s:.3f} s for "
                                               f"{self._lockstep_awaited()}", throttle_duration_sec=5.0)
                    continue
                waiting_since = time.monotonic()
            elif params.clock_speed > 0:
                due = wall_start + (self.periods_done + 1) * period_s / params.clock_speed
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                elif delay < -0.25:
                    wall_start -= delay  # fell far behind (e.g. suspended): do not try to catch up
            self._apply_inputs()
            self.world.step(params.steps_per_period)
            with self.inputs_lock:
                self.run_control.stepped()
            self.periods_done += 1
            self.swarm.collect_collisions()
            self._publish_state()

    def _await_settled_subscribers(self) -> None:
        """Lockstep: hold the first step until the graph's subscribers to /clock and ground truth (at
        least one), and every topic's publisher and subscriber counts, have stopped changing for
        ``lockstep_settle_s`` and every known lockstep participant is being read (wall time; at
        most ``lockstep_settle_max_s``).

        Lockstep paces the clock by the controllers alone. A sensor or recorder that joins after
        the first steps misses them, and its noise stream and bag then start elsewhere than in
        another run of the same inputs; waiting for the graph to be complete keeps runs identical.
        """
        params = self.params
        publishers = [self.clock_pub] + [p for v in self.vehicles for p in (v.odom_pub, v.imu_pub, v.rotors_pub)]
        start = changed = time.monotonic()
        counts = last_graph = None
        while not self._stop.is_set() and self.context.ok():
            now = time.monotonic()
            current = [p.get_subscription_count() for p in publishers]
            graph = self._graph_snapshot()
            if (current, graph) != (counts, last_graph):
                counts, last_graph, changed = current, graph, now
            # Nobody yet is no graph yet: DDS discovery can take longer than lockstep_settle_s.
            settled = (now - changed >= params.lockstep_settle_s and any(current)
                       and self.lockstep_outputs.all_armed())
            if settled or now - start >= params.lockstep_settle_max_s:
                break
            # No state yet: a participant answers t = 0 once, and only a reader already there hears it.
            time.sleep(0.05)
        participants = " ".join(p.topic for p in self.lockstep_outputs.gate.participants()) or "none"
        self.get_logger().info(f"lockstep: starting with {counts[1] if counts else 0} subscribers to ground truth "
                               f"after {time.monotonic() - start:.1f} s; participants: {participants}")
        self.lockstep_outputs.started = True

    def _graph_snapshot(self) -> list[tuple[str, int, int]]:
        """Every topic in the graph with its publisher and subscriber counts.

        Lockstep starts once this stops changing too: nodes that subscribe to each other's outputs
        (depth noise to the camera, the recorder to every topic it discovers) must be connected
        before the first outputs go out, or one run's bag starts with frames another run's lacks.
        """
        return sorted((name, self.count_publishers(name), self.count_subscribers(name))
                      for name, _ in self.get_topic_names_and_types())

    def _lockstep_ready(self) -> bool:
        """Lockstep: true once every vehicle has a new command for this period and every
        participant has produced its output for the last due time up to now.

        A command or an output wakes this thread through the middleware (:meth:`_wait_for_lockstep_inputs`),
        and it takes both here; while a participant holds the clock it also looks every
        ``LockstepOutputs.POLL_S``."""
        self._wait_for_lockstep_inputs(self._lockstep_wait_s)
        self.command_arrived.clear()  # before looking: whatever arrives from now on wakes the next wait
        self._take_commands()
        self.lockstep_outputs.take_arrived()
        with self.inputs_lock:
            commands = all(v.pending_controls is not None for v in self.vehicles)
        if not commands:
            self._lockstep_wait_s = 0.05
            return False
        held = bool(self.lockstep_outputs.holdups(self._awaited_clock_ns()))
        self._lockstep_wait_s = LockstepOutputs.POLL_S if held else 0.05
        return not held and not self._stop.is_set()

    def _wait_for_lockstep_inputs(self, timeout_s: float) -> None:
        """Block until a motor command or a participant's output is waiting, or anything else wakes
        the simulation (:class:`Wakeup`), at most ``timeout_s``. The middleware wakes this thread
        directly: no executor callback and no handing over between threads on the critical path of
        every period (physics publishes, the controller answers, physics steps)."""
        outputs = len(self.lockstep_outputs.taken)
        if self._wait_set is None or self._wait_set[0] != outputs:  # a participant's topic joined
            handles = [v.command_subscription.handle for v in self.vehicles]
            handles += [s.handle for s in self.lockstep_outputs.taken.values()]
            if self.swarm.commands_subscription is not None:
                handles.append(self.swarm.commands_subscription.handle)
            self._wait_set = (outputs, handles, _rclpy.WaitSet(len(handles), 1, 0, 0, 0, 0, self.context.handle))
        _, handles, wait_set = self._wait_set
        try:
            wait_set.clear_entities()
            for handle in handles:
                wait_set.add_subscription(handle)
            wait_set.add_guard_condition(self.command_arrived.guard)
            wait_set.wait(int(timeout_s * 1e9))
        except Exception:  # noqa: BLE001 - the context is going away: the loop's own checks end it
            time.sleep(min(timeout_s, 0.01))

    def _take_commands(self) -> None:
        """Lockstep: hand every motor command waiting to its vehicle (simulation thread). A message
        that is no Float64MultiArray, or an unusable row, is dropped with one line, as InputGuard would."""
        readers = [(v.command_subscription, v.on_motor_commands) for v in self.vehicles]
        if self.swarm.commands_subscription is not None:
            readers.append((self.swarm.commands_subscription, self.swarm.on_commands))
        for subscription, handle in readers:
            while (data := take_raw(subscription)) is not None:
                try:
                    handle(data)
                except Exception as error:  # noqa: BLE001 - no message may stop the simulation
                    self.get_logger().warning(f"{subscription.topic_name}: message dropped "
                                              f"(Float64MultiArray: {type(error).__name__}: {error})",
                                              throttle_duration_sec=2.0)

    def _lockstep_awaited(self) -> str:
        """Who lockstep is waiting for, for the log."""
        with self.inputs_lock:
            waiting = [f"/{v.name}/motor_commands" for v in self.vehicles if v.pending_controls is None]
        waiting += [holdup.describe() + self.lockstep_outputs.why_silent(holdup.participant.topic)
                    for holdup in self.lockstep_outputs.holdups(self._awaited_clock_ns())]
        return ", ".join(waiting) or "nothing (released)"

    def _clock_ns(self) -> int:
        return int(round(self.world.time_s * 1e9))

    def _awaited_clock_ns(self) -> int:
        """The clock the participants' outputs must have caught up with: ``lockstep_slack_s`` behind."""
        return self._clock_ns() - int(round(self.params.lockstep_slack_s * 1e9))

    def _apply_inputs(self) -> None:
        self._apply_world_edits()
        now = self.world.time_s
        with self.inputs_lock:
            for vehicle in self.vehicles:
                if vehicle.pending_controls is not None:
                    self.world.set_controls(vehicle.name, vehicle.pending_controls)
                    vehicle.pending_controls = None
                    if vehicle.failsafe:
                        self._end_failsafe(vehicle)
                elif self._commands_stale(vehicle, now):
                    self._start_failsafe(vehicle)
                fresh = vehicle.wrench is not None and now - vehicle.wrench_received_at <= self.params.wrench_timeout_s
                force, torque = vehicle.wrench if fresh else ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
                self.world.set_external_wrench(vehicle.name, force, torque)
            self.command_arrived.clear()

    def _commands_stale(self, vehicle: VehicleChannel, now: float) -> bool:
        timeout = self.params.motor_command_timeout_s
        # Both clocks: sim time alone would fire when the simulation outruns a live controller
        # (clock_speed 0 or > 1), wall time alone when it runs slower than real time.
        return (not vehicle.failsafe and not self.params.lockstep and timeout > 0 and vehicle.commands_received > 0
                and now - vehicle.command_received_at > timeout
                and time.monotonic() - vehicle.command_received_wall > timeout)

    def _start_failsafe(self, vehicle: VehicleChannel) -> None:
        """Motor commands stopped (a dead or stuck flight controller): cut the motors and say so."""
        vehicle.failsafe = True
        self.world.set_controls(vehicle.name, [0.0] * vehicle.rotor_count)
        why = (f"{vehicle.name}: no motor_commands for {self.params.motor_command_timeout_s:g} s; "
               "failsafe: motors cut to zero")
        self.get_logger().error(why)
        self._publish_status(DiagnosticStatus.ERROR, f"physics: {vehicle.name} motor commands", why, vehicle.name)

    def _end_failsafe(self, vehicle: VehicleChannel) -> None:
        vehicle.failsafe = False
        why = f"{vehicle.name}: motor_commands again; failsafe over"
        self.get_logger().info(why)
        self._publish_status(DiagnosticStatus.OK, f"physics: {vehicle.name} motor commands", why, vehicle.name)

    def _publish_status(self, level, name: str, message: str, hardware_id: str = "physics") -> None:
        status = DiagnosticStatus(level=level, name=name, message=message, hardware_id=hardware_id)
        array = DiagnosticArray(status=[status])
        array.header.stamp = to_stamp(self.world.time_s)
        try:
            self.diagnostics_pub.publish(array)
        except Exception:  # noqa: BLE001 - the context may be going away; the log line was written
            pass

    def _flush_diagnostics(self, timeout_s: float = 2.0) -> None:
        """Wait (bounded) until the reliable /diagnostics subscribers have acknowledged what was sent."""
        try:
            self.diagnostics_pub.wait_for_all_acked(Duration(nanoseconds=int(timeout_s * 1e9)))
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass

    def _publish_state(self) -> None:
        """Ground truth first, ``/clock`` last: the controllers, which the next step waits for, start
        on their odometry while the rest goes out. Nodes driven by ground truth take their time
        from its stamps (:class:`~aerial_sim.rosnode.clocks.InputStampClock`), not from ``/clock``."""
        self._published_at = time.monotonic()
        stamp_ns = self._clock_ns()
        stamp = to_stamp(self.world.time_s)
        truths = PeriodTruths(self.world)
        due = self.swarm.publish(stamp, stamp_ns, self.periods_done, truths)
        self._publish_ground_truth(stamp, stamp_ns, due, truths=truths)
        self.clock_pub.publish(encode_clock(stamp_ns))

    def _publish_ground_truth(self, stamp, stamp_ns: int, vehicles, unread_too: bool = False,
                              truths: "PeriodTruths | None" = None) -> None:
        """Odometry, IMU, rotors and TF of ``vehicles`` (VehicleChannel objects).

        In a fleet a topic nobody reads is not built (unless ``unread_too``: the start-up cost probe):
        its sensors and controllers read ``/swarm/state``, and at 64 vehicles building and publishing
        every vehicle's three messages unread was a quarter of this node's CPU. A reader that comes
        later (a recorder, RViz) gets them within :attr:`VehicleChannel.READERS_REFRESH_S`. One
        vehicle's topics always go out, as do every vehicle's in lockstep (a bag's first messages must
        not depend on when discovery matched its recorder)."""
        transforms = []
        every = unread_too or self.params.lockstep or len(self.vehicles) == 1
        truths = truths if truths is not None else PeriodTruths(self.world)
        for vehicle in vehicles:
            truth = truths[vehicle.name]
            if not all(math.isfinite(v) for v in (*truth.position, *truth.velocity_world, *truth.orientation)):
                raise SimulationDiverged(f"{vehicle.name}: state is no longer finite (position {truth.position})")
            odom_read, imu_read, rotors_read = (True, True, True) if every else vehicle.readers()
            if odom_read:
                vehicle.odom_pub.publish(odometry_bytes(truth, stamp_ns, vehicle.frame))
            if imu_read:
                vehicle.imu_pub.publish(imu_bytes(truth, stamp_ns, vehicle.frame))
            if rotors_read:
                rotors = self.world.rotor_states(vehicle.name)
                vehicle.rotors_pub.publish(rotors_bytes(rotors, stamp_ns, vehicle.rotor_names))
            if self.tf_broadcaster is not None:
                transforms.append(transform_message(truth, stamp, vehicle.frame))
        if transforms:
            self.tf_broadcaster.sendTransform(transforms)


class PeriodTruths(dict):
    """Each vehicle's ground truth at this control period, computed once however many outputs read it
    (``/swarm/state`` and a due vehicle's own topics in the same period)."""

    def __init__(self, world: PhysicsWorld):
        super().__init__()
        self.world = world

    def __missing__(self, name: str):
        truth = self[name] = self.world.ground_truth(name)
        return truth


class LockstepOutputs:
    """Lockstep for the whole graph: the participants' outputs the clock waits for (issue 11;
    the rule is :mod:`aerial_sim.physics.lockstep`'s).

    Participants come from the ``lockstep_participants`` parameter (any node, e.g. a real
    driver that knows nothing of this simulator) and from entries announced on
    ``/lockstep/participants`` (std_msgs/String, latched; every simulated sensor, the camera,
    depth noise and rotor drag announce themselves when their ``lockstep`` is true). Each
    participant's topic is read with a raw subscription (its type from the graph, QoS
    matching its publishers): only the header stamp is decoded from the CDR bytes, so an
    image costs no deserialization. ``rotor_drag/wrench``, which the node reads anyway, is
    observed in its own callback, after the wrench is stored.

    The participants' topics are read by a second node, ``<physics>_lockstep_outputs``, that no
    executor spins: the simulation thread takes whatever has arrived when it looks
    (:meth:`take_arrived`), instead of an executor callback and a wake-up per output (425 a
    simulated second from the four sensors and the recorder).
    """

    #: How often topics not yet in the graph are looked for (wall s).
    CONNECT_PERIOD_S = 0.2
    #: How often the simulation thread looks again while a participant holds the clock (wall s).
    POLL_S = 0.001

    def __init__(self, node: "PhysicsNode"):
        self.node = node
        self.gate = LockstepGate(parse_participants(node.params.lockstep_participants))
        self.subscriptions: dict[str, object] = {v.wrench_topic: v.wrench_subscription for v in node.vehicles}
        self.own_topics = set(self.subscriptions)
        #: Set once the first state has gone out: a participant armed later owes only later stamps.
        self.started = False
        # Not spun by any executor (see the class doc); its own name, not launch's remapped one.
        self.reader = unspun_reader_node(node, "lockstep_outputs")
        self.taken: dict[str, object] = {}  # topic -> subscription of self.reader
        node.create_subscription(String, LOCKSTEP_PARTICIPANTS_TOPIC, self.on_announcement, LOCKSTEP_ANNOUNCEMENTS_QOS)
        node.create_timer(self.CONNECT_PERIOD_S, self.connect_pending)

    def observe(self, topic: str, stamp_ns: int) -> None:
        self.gate.observe(topic, stamp_ns)
        self.node.command_arrived.set()

    def holdups(self, clock_ns: int):
        return self.gate.holdups(clock_ns)

    def all_armed(self) -> bool:
        return all(self.gate.armed(p.topic) for p in self.gate.participants())

    def why_silent(self, topic: str) -> str:
        if self.gate.armed(topic):
            return ""
        return " [no header: unreadable]" if topic in self.subscriptions and self.subscriptions[topic] is None \
            else " [no publisher in the graph yet]"

    def on_announcement(self, message: String) -> None:
        try:
            participant = Participant.parse(message.data)
        except ParamsError as error:
            self.node.get_logger().warning(f"{LOCKSTEP_PARTICIPANTS_TOPIC}: entry refused: {error}",
                                           throttle_duration_sec=2.0)
            return
        if self.gate.add(participant):
            self.node.get_logger().info(f"lockstep: waiting for {participant.text()} from t = {self.node.world.time_s:.3f} s")
        self.connect_pending()

    def connect_pending(self) -> None:
        """Subscribe to every participant whose topic now has a publisher, and arm those whose
        publisher the subscription has matched (executor thread)."""
        participants = self.gate.participants()
        pending = [p.topic for p in participants if p.topic not in self.subscriptions]
        types = dict(self.node.get_topic_names_and_types()) if pending else {}
        for topic in pending:
            publishers = self.node.get_publishers_info_by_topic(topic) if types.get(topic) else []
            if publishers:
                self.subscriptions[topic] = self.subscribe(topic, types[topic][0], publishers)
        for participant in participants:
            subscription = self.subscriptions.get(participant.topic)
            if subscription is not None and not self.gate.armed(participant.topic) and subscription.get_publisher_count():
                self.gate.arm(participant.topic, self.node._clock_ns() if self.started else -1)
                self.node.command_arrived.set()

    def subscribe(self, topic: str, type_name: str, publishers):
        """A raw subscription to ``topic``; reliable when every publisher is (a best-effort
        reader would lose outputs the clock waits for), best effort otherwise (it matches any)."""
        package, _, name = type_name.partition("/msg/")
        try:
            message_type = getattr(importlib.import_module(f"{package}.msg"), name)
        except (ImportError, AttributeError, ValueError):
            self.node.get_logger().error(f"lockstep: {topic} has type {type_name}, which is not installed here: its "
                                         "stamps cannot be read and the clock will wait for it: leave it out")
            return None
        fields = list(message_type.get_fields_and_field_types().items())
        is_header = type_name == "std_msgs/msg/Header"  # its own stamp leads its bytes (the recorder's progress)
        if not is_header and (not fields or fields[0] != ("header", "std_msgs/Header")):
            self.node.get_logger().error(f"lockstep: {topic} ({type_name}) does not start with a std_msgs/Header: "
                                         "its stamps cannot be read and the clock will wait for it: leave it out")
            return None
        reliable = all(p.qos_profile.reliability == ReliabilityPolicy.RELIABLE for p in publishers)
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT)
        if not reliable:
            self.node.get_logger().warning(f"lockstep: {topic} is published best effort: an output lost on the way "
                                           "would hold the clock for good (publish it reliable)")
        self.node.get_logger().info(f"lockstep: reading stamps of {topic} ({type_name})")
        subscription = self.reader.create_subscription(message_type, topic, not_called, qos, raw=True)
        self.taken[topic] = subscription
        return subscription

    def take_arrived(self) -> None:
        """Observe the stamp of every participant output that has arrived (simulation thread)."""
        for topic, subscription in list(self.taken.items()):
            while (cdr := take_raw(subscription)) is not None:
                stamp_ns = cdr_header_stamp_ns(cdr)
                if stamp_ns is None:
                    self.node.get_logger().warning(f"{topic}: {len(cdr)} bytes, too short for a header: dropped",
                                                   throttle_duration_sec=2.0)
                    continue
                self.gate.observe(topic, stamp_ns)


class SwarmOutputs:
    """What the physics node publishes for many vehicles: paced ground truth, ``/swarm/poses``
    (PoseArray in ``map``, vehicle_names order) and ``/swarm/state`` (every vehicle's ground truth
    in one PointCloud2, :mod:`aerial_sim.vehicles.swarm_messages`), both only with more than one
    vehicle and in the ground-truth periods, and ``<vehicle>/collisions``.

    Ground truth goes to each vehicle every ``stride`` control periods, vehicles spread over
    the periods (vehicle i in periods ``p`` with ``(p + i) % stride == 0``) so the cost is even.
    At start the stride is the smallest that keeps physics plus publishing within
    ``cpu_budget`` of a core at ``clock_speed`` (CPU time measured on a copy of the world and on
    the cheapest of a few full publications), but never below ``ground_truth_min_rate_hz`` (the flight controllers act
    on the latest odometry and lose stability at low rates): when load would need less, the
    floor holds, one warning says so, and the node runs slower than real time. Lockstep always
    publishes every period (the controllers answer each stamp).

    Collisions are ``diagnostic_msgs/DiagnosticArray`` on ``<vehicle>/collisions``, one status
    per other party and control period (the deepest contact of the period): a standard message
    that carries the other party's name with the impact point, normal, penetration depth and
    closing speed as key-values (what AirSim's CollisionInfo holds), stamped with sim time.
    """

    #: Simulated periods stepped on a copy of the world to measure the physics cost.
    PROBE_PERIODS = 25
    #: Publications timed at start, in this thread's CPU time (the budget is CPU; wall time while
    #: the whole graph starts counted 4.7-8.7 ms for a ~0.3 ms publication, and one vehicle got
    #: 83 Hz ground truth in the default graph); the cheapest counts (the first is the dearest).
    PROBE_PUBLICATIONS = 5

    def __init__(self, node: "PhysicsNode"):
        self.node = node
        params = node.params
        self.period_hz = params.rate_hz / params.steps_per_period
        self.poses_pub = node.create_publisher(PoseArray, "/swarm/poses", stream_qos(params.lockstep))
        self.many = len(node.vehicles) > 1
        self.commands_subscription = None
        if self.many:  # one vehicle's ground truth is its own topics: no swarm topics (a bag would list them empty)
            self.state_pub = node.create_publisher(PointCloud2, "/swarm/state", stream_qos(params.lockstep))
            self.commands_subscription = command_subscription(node, "/swarm/motor_commands", self.on_commands)
        self.collision_pubs = {v.name: node.create_publisher(DiagnosticArray, f"/{v.name}/collisions", COMMAND_QOS)
                               for v in node.vehicles}
        self.pending: dict[tuple[str, str], object] = {}
        self.stride = 1 if params.lockstep else self.choose_stride()

    def choose_stride(self) -> int:
        """Control periods between two ground-truth messages of one vehicle (see the class doc)."""
        node, params = self.node, self.node.params
        requested = params.ground_truth_rate_hz or params.publish_rate_hz
        probe = hovering_copy(params)
        start = time.thread_time()
        for _ in range(self.PROBE_PERIODS):
            probe.step(params.steps_per_period)
        physics_s = (time.thread_time() - start) / self.PROBE_PERIODS * self.period_hz  # per simulated second
        stamp = to_stamp(node.world.time_s)
        timings = []
        for _ in range(self.PROBE_PUBLICATIONS):  # the t = 0 state, while the node is still being built
            start = time.thread_time()
            node._publish_ground_truth(stamp, node._clock_ns(), node.vehicles, unread_too=True)
            timings.append(time.thread_time() - start)
        publish_s = min(timings) / len(node.vehicles)  # per vehicle-message set
        budget = params.cpu_budget / params.clock_speed if params.clock_speed > 0 else math.inf
        count = len(node.vehicles)
        choice = ground_truth_stride(self.period_hz, requested, params.ground_truth_min_rate_hz,
                                     physics_s, publish_s, count, budget)
        chosen = self.period_hz / choice.stride
        node.get_logger().info(
            f"{count} vehicles, {'batched' if node.world.batched else 'scalar'} physics "
            f"({physics_s * 1e3:.0f} ms per simulated second); ground truth {chosen:g} Hz per vehicle "
            f"(asked {requested:g} Hz; one vehicle's messages cost {publish_s * 1e6:.0f} us, "
            f"budget {params.cpu_budget:g} core at clock_speed {params.clock_speed:g})"
        )
        if choice.floored:
            node.get_logger().warning(
                f"load forces the ground-truth floor: {chosen:g} Hz per vehicle (ground_truth_min_rate_hz "
                f"{params.ground_truth_min_rate_hz:g}, below which the flight controllers lose stability); "
                f"real time would need {self.period_hz / choice.needed_stride:g} Hz, so this node expects to run at "
                f"about {choice.expected_speed(budget):.2f}x the asked clock_speed"
            )
        return choice.stride

    def publish(self, stamp, stamp_ns: int, period: int, truths: "PeriodTruths") -> list:
        """Poses and swarm state (on ground-truth periods) and pending collisions; returns the vehicles
        due for ground truth."""
        self.publish_collisions(stamp)
        due = [v for i, v in enumerate(self.node.vehicles) if (period + i) % self.stride == 0]
        # One vehicle's poses are its ground truth: a second 250 Hz stream of the same would only cost.
        if self.many and (period % self.stride == 0 or self.stride == 1):
            self.publish_poses(stamp_ns)
            self.publish_swarm_state(stamp_ns, truths)
        return due

    def on_commands(self, data: bytes) -> None:
        """``/swarm/motor_commands``: each row to its vehicle, checked as that vehicle's own topic is."""
        vehicles = self.node.vehicles
        for index, controls in swarm_messages.decode_commands(data, len(vehicles)):
            vehicles[index].accept_controls(controls, "its row of /swarm/motor_commands")

    def publish_swarm_state(self, stamp_ns: int, truths: "PeriodTruths") -> None:
        """``/swarm/state``: every vehicle's ground truth, one row each (what the fleet's sensor and
        controller processes read instead of each vehicle's ground_truth topics, ``swarm_messages``)."""
        rows = [swarm_messages.state_row(truths[v.name]) for v in self.node.vehicles]
        self.state_pub.publish(swarm_messages.encode_state(stamp_ns, rows))

    def publish_poses(self, stamp_ns: int) -> None:
        positions, orientations = self.node.world.poses()
        self.poses_pub.publish(encode_pose_array(stamp_ns, "map", positions.tolist(), orientations.tolist()))

    def collect_collisions(self) -> None:
        """Keep the deepest contact of each (vehicle, other) pair since the last publication."""
        for record in self.node.world.take_collisions():
            key = (record.vehicle, record.other)
            kept = self.pending.get(key)
            if kept is None or record.depth_m > kept.depth_m:
                self.pending[key] = record

    def publish_collisions(self, stamp) -> None:
        by_vehicle: dict[str, list] = {}
        for (vehicle, _), record in self.pending.items():
            by_vehicle.setdefault(vehicle, []).append(record)
        self.pending = {}
        for vehicle, records in by_vehicle.items():
            message = DiagnosticArray()
            message.header.stamp = stamp
            message.status = [collision_status(record) for record in records]
            self.collision_pubs[vehicle].publish(message)


@dataclass(frozen=True)
class StrideChoice:
    """The ground-truth stride chosen for a load (see :func:`ground_truth_stride`)."""

    stride: int
    #: The stride real time would have needed (larger than ``stride`` when the floor held).
    needed_stride: int
    #: Core-seconds per simulated second at ``stride``.
    cost_s: float

    @property
    def floored(self) -> bool:
        return self.needed_stride > self.stride

    def expected_speed(self, budget_s: float) -> float:
        """Fraction of the asked clock speed the budget allows at this stride."""
        return min(1.0, budget_s / self.cost_s) if self.cost_s > 0 else 1.0


def ground_truth_stride(period_hz: float, requested_hz: float, floor_hz: float, physics_s: float,
                        publish_s: float, count: int, budget_s: float, max_stride: int = 10_000) -> StrideChoice:
    """Control periods between two ground-truth messages of one vehicle.

    Cost per simulated second: ``physics_s + count * publish_s * period_hz / stride`` core-seconds
    (``publish_s``: one vehicle's message set). The stride starts at the requested rate and grows
    until the cost fits ``budget_s`` (cpu_budget / clock_speed), but never past the floor
    ``floor_hz`` (0: none): ground truth is never published below the rate the flight controllers
    stay stable at, even when that costs real time.
    """

    def cost(stride: int) -> float:
        return physics_s + count * publish_s * period_hz / stride

    stride = max(1, round(period_hz / requested_hz))
    while stride < max_stride and cost(stride) > budget_s:
        stride += 1
    needed = stride
    if floor_hz > 0:
        stride = min(stride, max(1, math.floor(period_hz / floor_hz + 1e-9)))
    return StrideChoice(stride=stride, needed_stride=needed, cost_s=cost(stride))


def hovering_copy(params: PhysicsNodeParams) -> PhysicsWorld:
    """The node's vehicles hovering 10 m above their start points, no scene: the cost of flight."""
    lifted = tuple(v + 10.0 if i % 3 == 2 else v for i, v in enumerate(params.initial_positions))
    world = build_world(replace(params, scene="empty", initial_positions=lifted))
    for name in world.vehicle_names():
        vehicle = world.body(name).vehicle
        environment = world.environment
        world.set_controls(name, vehicle.hover_controls(environment.air_density(10.0), environment.gravity(10.0)),
                           spun_up=True)
    world.step(params.steps_per_period)  # builds the arrays
    return world


def collision_status(record) -> DiagnosticStatus:
    """One collision as a diagnostic status (AirSim CollisionInfo fields as key-values, SI units, map frame)."""
    def triple(values):
        return " ".join(f"{v:.6f}" for v in values)

    return DiagnosticStatus(
        level=DiagnosticStatus.WARN,
        name=f"{record.vehicle}/collision",
        message=f"collided with {record.other}",
        hardware_id=record.vehicle,
        values=[
            KeyValue(key="other", value=record.other),
            KeyValue(key="time_s", value=f"{record.time_s:.3f}"),
            KeyValue(key="impact_point", value=triple(record.point)),
            KeyValue(key="normal", value=triple(record.normal)),
            KeyValue(key="penetration_depth_m", value=f"{record.depth_m:.6f}"),
            KeyValue(key="closing_speed_m_s", value=f"{record.closing_speed_m_s:.4f}"),
            KeyValue(key="position", value=triple(record.position)),
        ],
    )


def build_world(params: PhysicsNodeParams) -> PhysicsWorld:
    """Create the world, its scene colliders and its vehicles from the node parameters."""
    environment = EnvironmentParams(home=params.home, wind_enu_m_s=params.wind_enu_m_s)
    world = PhysicsWorld(PhysicsParams(rate_hz=params.rate_hz, linear_drag_enabled=params.linear_drag_enabled,
                                       stepping=params.stepping), environment)
    for collider in scene_colliders(params.scene):
        world.add_collider(collider)
    for index, (name, kind) in enumerate(zip(params.vehicle_names, params.vehicle_types)):
        position = tuple(params.initial_positions[3 * index : 3 * index + 3])
        world.add_vehicle(name, load_vehicle(kind), position=position, yaw=params.initial_yaws_rad[index])
    return world


def scene_colliders(scene_name: str) -> list:
    """Colliders for every object of the scene (the ground plane is built into the world)."""
    if scene_name in ("", "empty", "none"):
        return []
    try:
        from aerial_sim.world.scene import load_scene
    except ImportError as error:
        raise ParamsError(f"scene '{scene_name}' needs the world module: {error}") from error
    return list(load_scene(scene_name).colliders())


#: GROUND_TRUTH_VARIANCE (noise-free ground truth: known, and numerically exact) on the 6x6 pose/twist
#: covariance's diagonal (``VECTOR_COVARIANCE``: the 3x3 ones).
POSE_TWIST_COVARIANCE = tuple(GROUND_TRUTH_VARIANCE if i % 7 == 0 else 0.0 for i in range(36))


def odometry_bytes(truth, stamp_ns: int, child_frame: str) -> bytes:
    """nav_msgs/Odometry (CDR): pose in ``map`` (ENU); twist in the body frame (FLU), per nav_msgs convention.

    Serialized here (:func:`aerial_sim.cdr.encode_odometry`) rather than built as an rclpy message:
    building and publishing the typed message cost about six times as much (``bench cdr``)."""
    velocity_body = rotate_inverse(truth.orientation, truth.velocity_world)
    return encode_odometry(stamp_ns, "map", child_frame, truth.position, truth.orientation, POSE_TWIST_COVARIANCE,
                           velocity_body, truth.angular_velocity_body, POSE_TWIST_COVARIANCE)


def imu_bytes(truth, stamp_ns: int, frame: str) -> bytes:
    """sensor_msgs/Imu (CDR), noise-free: orientation, body rates and specific force (+g up at rest)."""
    return encode_imu(stamp_ns, frame, truth.orientation, VECTOR_COVARIANCE, truth.angular_velocity_body,
                      VECTOR_COVARIANCE, truth.specific_force_body, VECTOR_COVARIANCE)


def rotors_bytes(rotor_states, stamp_ns: int, names: list[str]) -> bytes:
    """sensor_msgs/JointState (CDR), one entry per rotor: velocity = speed (rad/s), effort = thrust (N)."""
    return encode_joint_state(stamp_ns, "", names, [0.0] * len(names), [float(r.speed_rad_s) for r in rotor_states],
                              [float(r.thrust_n) for r in rotor_states])


def transform_message(truth, stamp, child_frame: str) -> TransformStamped:
    message = TransformStamped()
    message.header.stamp = stamp
    message.header.frame_id = "map"
    message.child_frame_id = child_frame
    translation = message.transform.translation
    translation.x, translation.y, translation.z = truth.position
    rotation = message.transform.rotation
    rotation.w, rotation.x, rotation.y, rotation.z = truth.orientation
    return message


def main(args=None):
    return run_node(PhysicsNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
