"""Physics node: one per world, simulates every vehicle listed in its parameters.

A thin adapter around :class:`aerial_sim.physics.world.PhysicsWorld`:

- subscribes ``/<vehicle>/motor_commands`` (u_i in [0, 1]) and
  ``/<vehicle>/rotor_drag/wrench`` (external wrench in the body frame);
- steps the world at ``rate_hz`` (1000 Hz) in a pacing thread — real time,
  ``clock_speed`` times real time, as fast as possible (``clock_speed: 0``), or
  ``lockstep`` (each control period waits for one new command per vehicle);
- publishes ``/clock``, ``ground_truth/odom``, ``ground_truth/imu`` and
  ``rotors`` once per control period (``publish_rate_hz``, 250 Hz), not on
  every 1 ms step: consumers need 250 Hz, and publishing at the step rate would
  cost more than the physics itself.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

from geometry_msgs.msg import TransformStamped, WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray

from aerial_sim.config import ParamsError, require, require_non_negative, require_positive
from aerial_sim.environment.environment import EnvironmentParams
from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.nodes.common import (
    COMMAND_QOS,
    declare_params,
    make_tf_broadcaster,
    run_node,
    stream_qos,
    to_stamp,
)
from aerial_sim.physics.rotation import rotate_inverse
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
from aerial_sim.vehicles.multirotor import load_vehicle

#: Covariance reported for noise-free ground truth: known, and (numerically) exact.
GROUND_TRUTH_VARIANCE = 1e-12


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
    publish_tf: bool = True
    home: HomePoint = field(default_factory=HomePoint)
    wind_enu_m_s: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def __post_init__(self):
        require_positive(self, "rate_hz", "publish_rate_hz", "wrench_timeout_s")
        require_non_negative(self, "clock_speed")
        count = len(self.vehicle_names)
        require(count > 0, "vehicle_names must name at least one vehicle")
        require(len(set(self.vehicle_names)) == count, f"vehicle_names must be unique, got {self.vehicle_names}")
        require(len(self.vehicle_types) == count, f"vehicle_types needs {count} entries (one per vehicle)")
        require(len(self.initial_positions) == 3 * count, f"initial_positions needs {3 * count} numbers (x, y, z per vehicle)")
        require(len(self.initial_yaws_rad) == count, f"initial_yaws_rad needs {count} entries (one per vehicle)")
        require(self.publish_rate_hz <= self.rate_hz, "publish_rate_hz cannot exceed rate_hz")

    @property
    def steps_per_period(self) -> int:
        return max(1, round(self.rate_hz / self.publish_rate_hz))


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
        self.pending_controls: list[float] | None = None
        self.commands_received = 0
        self.wrench: tuple[tuple[float, float, float], tuple[float, float, float]] | None = None
        self.wrench_received_at = -math.inf
        node.create_subscription(Float64MultiArray, f"/{name}/motor_commands", self.on_motor_commands, COMMAND_QOS)
        node.create_subscription(WrenchStamped, f"/{name}/rotor_drag/wrench", self.on_wrench, stream_qos(lockstep))
        self._node = node

    def on_motor_commands(self, message: Float64MultiArray) -> None:
        controls = list(message.data)
        problem = motor_command_problem(controls, self.rotor_count)
        if problem:
            self._node.get_logger().warning(
                f"{self.name}/motor_commands rejected ({problem}); keeping the last valid command",
                throttle_duration_sec=2.0,
            )
            return
        with self._node.inputs_lock:
            self.pending_controls = controls
            self.commands_received += 1
        self._node.command_arrived.set()

    def on_wrench(self, message: WrenchStamped) -> None:
        force = (message.wrench.force.x, message.wrench.force.y, message.wrench.force.z)
        torque = (message.wrench.torque.x, message.wrench.torque.y, message.wrench.torque.z)
        if not all(math.isfinite(v) for v in force + torque):
            self._node.get_logger().warning(f"{self.name}/rotor_drag/wrench has NaN/inf; ignored", throttle_duration_sec=2.0)
            return
        with self._node.inputs_lock:
            self.wrench = (force, torque)
            self.wrench_received_at = self._node.world.time_s


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
        self.params = declare_params(self, PhysicsNodeParams)
        self.world = build_world(self.params)
        self.inputs_lock = threading.Lock()
        self.command_arrived = threading.Event()
        self.clock_pub = self.create_publisher(Clock, "/clock", stream_qos(self.params.lockstep))
        self.vehicles = [
            VehicleChannel(self, name, len(self.world.rotor_states(name)), self.params.lockstep)
            for name in self.params.vehicle_names
        ]
        self.tf_broadcaster = make_tf_broadcaster(self) if self.params.publish_tf else None
        self.periods_done = 0
        self.exit_code = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="physics-loop", daemon=True)
        self._thread.start()
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
        self._thread.join(timeout=2.0)
        return super().destroy_node()

    # -- the simulation loop (its own thread; callbacks run in the executor) --

    def _run(self) -> None:
        """Thread body: simulate until stopped; a crash ends the node with exit code 1."""
        try:
            self._simulate()
        except Exception as error:  # noqa: BLE001 - any failure must end the node visibly
            if not self.context.ok():
                return  # shutting down (Ctrl-C): publishers are gone, nothing is lost
            self.get_logger().fatal(f"physics loop stopped: {type(error).__name__}: {error}")
            self.exit_code = 1
            self.context.try_shutdown()

    def _simulate(self) -> None:
        params = self.params
        period_s = params.steps_per_period / params.rate_hz
        wall_start = time.monotonic()
        self._publish_state()
        waiting_since = time.monotonic()
        while not self._stop.is_set() and self.context.ok():
            if params.lockstep:
                if not self._wait_for_all_commands():
                    # Re-send this period's state: a controller that joined late (DDS
                    # discovery) must still get it. Controllers answer each stamp once.
                    self._publish_state()
                    if time.monotonic() - waiting_since > 5.0:
                        names = ", ".join(f"/{v.name}/motor_commands" for v in self.vehicles)
                        self.get_logger().info(f"lockstep: waiting for {names}", throttle_duration_sec=5.0)
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
            self.periods_done += 1
            self._publish_state()

    def _wait_for_all_commands(self) -> bool:
        """Lockstep: true once every vehicle has a new command for this period."""
        self.command_arrived.wait(timeout=0.5)
        with self.inputs_lock:
            ready = all(v.pending_controls is not None for v in self.vehicles)
            if not ready:
                self.command_arrived.clear()
            return ready and not self._stop.is_set()

    def _apply_inputs(self) -> None:
        now = self.world.time_s
        with self.inputs_lock:
            for vehicle in self.vehicles:
                if vehicle.pending_controls is not None:
                    self.world.set_controls(vehicle.name, vehicle.pending_controls)
                    vehicle.pending_controls = None
                fresh = vehicle.wrench is not None and now - vehicle.wrench_received_at <= self.params.wrench_timeout_s
                force, torque = vehicle.wrench if fresh else ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
                self.world.set_external_wrench(vehicle.name, force, torque)
            self.command_arrived.clear()

    def _publish_state(self) -> None:
        stamp = to_stamp(self.world.time_s)
        self.clock_pub.publish(Clock(clock=stamp))
        transforms = []
        for vehicle in self.vehicles:
            truth = self.world.ground_truth(vehicle.name)
            vehicle.odom_pub.publish(odometry_message(truth, stamp, vehicle.frame))
            vehicle.imu_pub.publish(imu_message(truth, stamp, vehicle.frame))
            vehicle.rotors_pub.publish(rotors_message(self.world.rotor_states(vehicle.name), stamp, vehicle.rotor_names))
            if self.tf_broadcaster is not None:
                transforms.append(transform_message(truth, stamp, vehicle.frame))
        if transforms:
            self.tf_broadcaster.sendTransform(transforms)


def build_world(params: PhysicsNodeParams) -> PhysicsWorld:
    """Create the world, its scene colliders and its vehicles from the node parameters."""
    environment = EnvironmentParams(home=params.home, wind_enu_m_s=params.wind_enu_m_s)
    world = PhysicsWorld(PhysicsParams(rate_hz=params.rate_hz, linear_drag_enabled=params.linear_drag_enabled), environment)
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


def odometry_message(truth, stamp, child_frame: str) -> Odometry:
    """Pose in ``map`` (ENU); twist in the body frame (FLU), per nav_msgs convention."""
    message = Odometry()
    message.header.stamp = stamp
    message.header.frame_id = "map"
    message.child_frame_id = child_frame
    position = message.pose.pose.position
    position.x, position.y, position.z = truth.position
    orientation = message.pose.pose.orientation
    orientation.w, orientation.x, orientation.y, orientation.z = truth.orientation
    linear = message.twist.twist.linear
    linear.x, linear.y, linear.z = rotate_inverse(truth.orientation, truth.velocity_world)
    angular = message.twist.twist.angular
    angular.x, angular.y, angular.z = truth.angular_velocity_body
    diagonal = [GROUND_TRUTH_VARIANCE if i % 7 == 0 else 0.0 for i in range(36)]
    message.pose.covariance = diagonal
    message.twist.covariance = diagonal
    return message


def imu_message(truth, stamp, frame: str) -> Imu:
    """Noise-free IMU: orientation, body rates and specific force (+g up at rest)."""
    message = Imu()
    message.header.stamp = stamp
    message.header.frame_id = frame
    orientation = message.orientation
    orientation.w, orientation.x, orientation.y, orientation.z = truth.orientation
    rate = message.angular_velocity
    rate.x, rate.y, rate.z = truth.angular_velocity_body
    accel = message.linear_acceleration
    accel.x, accel.y, accel.z = truth.specific_force_body
    diagonal = [GROUND_TRUTH_VARIANCE, 0.0, 0.0, 0.0, GROUND_TRUTH_VARIANCE, 0.0, 0.0, 0.0, GROUND_TRUTH_VARIANCE]
    message.orientation_covariance = diagonal
    message.angular_velocity_covariance = diagonal
    message.linear_acceleration_covariance = diagonal
    return message


def rotors_message(rotor_states, stamp, names: list[str]) -> JointState:
    """One entry per rotor: velocity = speed (rad/s), effort = thrust (N)."""
    message = JointState()
    message.header.stamp = stamp
    message.name = names
    message.position = [0.0] * len(names)
    message.velocity = [float(r.speed_rad_s) for r in rotor_states]
    message.effort = [float(r.thrust_n) for r in rotor_states]
    return message


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
