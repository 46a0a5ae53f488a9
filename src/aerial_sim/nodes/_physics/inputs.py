"""What the physics node reads for each vehicle: motor commands, external wrenches and teleports,
checked before they reach the world, and the simulation thread's wake-up."""

from __future__ import annotations

import math
import struct
import threading
import time
from typing import TYPE_CHECKING, Callable, NamedTuple

from geometry_msgs.msg import PoseStamped, Vector3Stamped, WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from sensor_msgs.msg import BatteryState, Imu, JointState
from std_msgs.msg import Float64MultiArray

from aerial_sim.cdr.decode import decode_float64_array
from aerial_sim.cdr.encode import encode_pose_stamped, joint_state_encoder
from aerial_sim.environment.atmosphere import MAX_ALTITUDE_M, MIN_ALTITUDE_M
from aerial_sim.nodes._physics.params import PhysicsNodeParams
from aerial_sim.nodes.ros.qos import COMMAND_QOS, stream_qos
from aerial_sim.nodes.ros.raw_publish import raw_sender
from aerial_sim.nodes.ros.raw_take import not_called
from aerial_sim.nodes.ros.stamps import to_stamp_ns

if TYPE_CHECKING:  # annotations only: that module imports this one
    from aerial_sim.nodes.physics import PhysicsNode


class Wakeup(threading.Event):
    """The simulation thread's wake-up (a command, a world edit, a pause, a participant armed...). In
    lockstep it also triggers a guard condition, so the thread's wait on the middleware
    (:meth:`LockstepWait.ready`) ends for it too."""

    def __init__(self, context=None):
        super().__init__()
        self.guard = _rclpy.GuardCondition(context.handle) if context is not None else None

    def clear(self) -> None:
        """As :meth:`threading.Event.clear`; an event not set is left alone (the simulation thread clears it
        two or three times a lockstep period, and a clear takes the event's lock)."""
        if self.is_set():
            super().clear()

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


class VehicleChannel:
    """The publishers, subscriptions and last inputs of one simulated vehicle."""

    def __init__(self, node: "PhysicsNode", name: str, rotor_count: int, lockstep: bool, battery: bool = False):
        self.name = name
        self.rotor_count = rotor_count
        self.frame = f"{name}/base_link"
        qos = stream_qos(lockstep)
        self.odom_pub = node.create_publisher(Odometry, f"/{name}/ground_truth/odom", qos)
        self.imu_pub = node.create_publisher(Imu, f"/{name}/ground_truth/imu", qos)
        self.rotors_pub = node.create_publisher(JointState, f"/{name}/rotors", qos)
        #: The wind the engine applies to this vehicle (ENU, map): what the rotor drag node subtracts.
        self.wind_pub = node.create_publisher(Vector3Stamped, f"/{name}/ground_truth/wind", qos)
        #: The pack's state (battery_enabled only): what the MAVLink autopilot and a user's monitor read.
        self.battery_pub = node.create_publisher(BatteryState, f"/{name}/battery", qos) if battery else None
        #: The same four publishers' senders of CDR bytes (every period: :func:`raw_sender`).
        self.send_odom, self.send_imu, self.send_rotors, self.send_wind = (
            raw_sender(p, tap=True) for p in (self.odom_pub, self.imu_pub, self.rotors_pub, self.wind_pub))
        self.rotor_names = [f"rotor_{i}" for i in range(rotor_count)]
        #: ``rotors`` (sensor_msgs/JointState) as CDR: ``encode_rotors(stamp_ns, positions, speeds, thrusts)``.
        self.encode_rotors = joint_state_encoder("", self.rotor_names, (rotor_count,) * 3)
        self.rotor_positions = [0.0] * rotor_count
        #: The wrench last given to the world (None: give the next one): unchanged, it is not given again.
        self.applied_wrench = None
        self._readers_asked_at = -math.inf
        self._readers = (True, True, True, True)
        self.pending_controls: list[float] | None = None
        self._command_layout: CommandLayout | None = None  # of the last motor command (on_motor_commands)
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
        #: Each teleport once applied, stamped with the sim time from which the state shows it.
        self.pose_set_pub = node.create_publisher(PoseStamped, f"/{name}/set_pose/applied", COMMAND_QOS)
        self._node = node

    #: How often (wall s) :meth:`readers` asks again (each question costs 1-3 us, per topic and vehicle).
    READERS_REFRESH_S = 0.5

    def readers(self) -> tuple[bool, bool, bool, bool]:
        """Whether ground_truth/odom, ground_truth/imu, rotors and ground_truth/wind have readers (asked at
        most every READERS_REFRESH_S: a reader that comes waits that long for its first message)."""
        now = time.monotonic()
        if now - self._readers_asked_at >= self.READERS_REFRESH_S:
            self._readers_asked_at = now
            publishers = (self.odom_pub, self.imu_pub, self.rotors_pub, self.wind_pub)
            self._readers = tuple(p.get_subscription_count() > 0 for p in publishers)
        return self._readers

    def on_motor_commands(self, data: bytes) -> None:
        """Raw: decoding the values alone costs a fraction of rclpy's message (on every lockstep period's
        critical path); bytes that are no Float64MultiArray raise ValueError, which InputGuard reports (in
        lockstep :meth:`LockstepWait.take_commands`). A message laid out as the last one (the same length
        and the same bytes before its values: :class:`CommandLayout`) has its values read in one unpack."""
        layout = self._command_layout
        if layout is not None and len(data) == layout.size and data.startswith(layout.prefix):
            values = layout.unpack_from(data, layout.start)
        else:
            _, _, values = decode_float64_array(data)
            self._command_layout = CommandLayout.of(data, values)
        self.accept_controls(list(values), "motor_commands")

    def accept_controls(self, controls: list[float], source: str) -> None:
        """A command from ``<vehicle>/motor_commands`` or the vehicle's row of ``/swarm/motor_commands``."""
        # The common case in one look (a NaN or infinity fails both comparisons); the reason only when not.
        valid = len(controls) == self.rotor_count and all(0.0 <= u <= 1.0 for u in controls)
        problem = None if valid else motor_command_problem(controls, self.rotor_count)
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
        if threading.get_ident() != self._node.simulation_thread.ident:  # it is looking already (lockstep)
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

        def teleport(world) -> None:
            world.set_kinematics(self.name, position, orientation, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
            self.say_pose_applied(world, position, orientation)

        self._node.edit_world(teleport)

    def say_pose_applied(self, world, position, orientation) -> None:
        """A teleport or reset once applied, on ``set_pose/applied`` with the sim time at which it was: every
        later ground_truth/odom shows it, and so does the state re-sent at that time while paused. A client
        (the AirSim server) waits for such a state, not for a position it might miss."""
        self.pose_set_pub.publish(encode_pose_stamped(to_stamp_ns(world.time_s), "map", position, orientation))


class CommandLayout(NamedTuple):
    """Where a ``std_msgs/Float64MultiArray``'s values lie in its CDR bytes, learnt from one message that
    :func:`~aerial_sim.cdr.decode.decode_float64_array` decoded: they end the message (little-endian, right
    after their count). A message of the same length that starts with the same ``prefix`` (the dimensions,
    the data offset and the count, byte for byte) has its values at ``start`` too, and they decode to the
    same floats with one ``unpack_from``."""

    size: int
    prefix: bytes
    start: int
    unpack_from: Callable

    @classmethod
    def of(cls, data: bytes, values: tuple[float, ...]) -> "CommandLayout | None":
        """The layout of ``data`` whose decoded ``values`` are given; None where they do not end it as above."""
        count = len(values)
        start = len(data) - 8 * count
        if data[:2] != b"\x00\x01" or start < 8:  # CDR little-endian only
            return None
        packing = struct.Struct(f"<{count}d")
        counted = any(data[at:at + 4] == count.to_bytes(4, "little") for at in (start - 4, start - 8))
        if not counted or packing.pack(*values) != data[start:]:
            return None
        return cls(len(data), bytes(data[:start]), start, packing.unpack_from)


def wrench_problem(force, torque, params: PhysicsNodeParams) -> str | None:
    """Why an external wrench is unusable (NaN/inf, or above the node's caps), or None when it is valid."""
    if not all(map(math.isfinite, (*force, *torque))):
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
