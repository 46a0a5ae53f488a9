"""What the physics node publishes: ground truth as CDR bytes, TF, ``/swarm/poses``, ``/swarm/state``
and collisions, paced for many vehicles (:class:`SwarmOutputs`)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseArray, TransformStamped
from sensor_msgs.msg import BatteryState, PointCloud2

from aerial_sim.cdr.encode import encode_diagnostics_of, encode_pose_array, imu_encoder, odometry_encoder
from aerial_sim.nodes._physics.inputs import command_subscription
from aerial_sim.nodes._physics.world_setup import hovering_copy
from aerial_sim.physics.rotation import rotate_inverse
from aerial_sim.physics.world import PhysicsWorld
from aerial_sim.nodes.ros.qos import COMMAND_QOS, stream_qos
from aerial_sim.nodes.ros.stamps import to_stamp
from aerial_sim.physics import swarm_messages
from aerial_sim.physics.swarm_messages import GROUND_TRUTH_VARIANCE, VECTOR_COVARIANCE

if TYPE_CHECKING:  # annotations only: that module imports this one
    from aerial_sim.nodes.physics import PhysicsNode


class PeriodTruths(dict):
    """Each vehicle's ground truth at this control period, computed once however many outputs read it
    (``/swarm/state`` and a due vehicle's own topics in the same period)."""

    def __init__(self, world: PhysicsWorld):
        super().__init__()
        self.world = world

    def __missing__(self, name: str):
        truth = self[name] = self.world.ground_truth(name)
        return truth


class SwarmOutputs:
    """What the physics node publishes for many vehicles: paced ground truth, ``/swarm/poses``
    (PoseArray in ``map``, vehicle_names order) and ``/swarm/state`` (every vehicle's ground truth
    in one PointCloud2, :mod:`aerial_sim.physics.swarm_messages`), both only with more than one
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
        #: The swarm messages' rows: the launched vehicles. One added at run time (``add_vehicle``) has its own
        #: topics only, so the fleet's processes, which read and write rows in the launch's order, go on.
        self.rows = len(node.vehicles)
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
            node._publish_ground_truth(stamp, node.clock_ns(), node.vehicles, unread_too=True)
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

    def add_vehicle(self, name: str) -> None:
        """A vehicle added at run time (simulation thread): its collisions topic; no swarm row."""
        self.collision_pubs[name] = self.node.create_publisher(DiagnosticArray, f"/{name}/collisions", COMMAND_QOS)

    def on_commands(self, data: bytes) -> None:
        """``/swarm/motor_commands``: each row to its vehicle, checked as that vehicle's own topic is."""
        vehicles = self.node.vehicles
        for index, controls in swarm_messages.decode_commands(data, self.rows):
            vehicles[index].accept_controls(controls, "its row of /swarm/motor_commands")

    def publish_swarm_state(self, stamp_ns: int, truths: "PeriodTruths") -> None:
        """``/swarm/state``: every vehicle's ground truth, one row each (what the fleet's sensor and
        controller processes read instead of each vehicle's ground_truth topics, ``swarm_messages``)."""
        rows = [swarm_messages.state_row(truths[v.name]) for v in self.node.vehicles[: self.rows]]
        self.state_pub.publish(swarm_messages.encode_state(stamp_ns, rows))

    def publish_poses(self, stamp_ns: int) -> None:
        positions, orientations = self.node.world.poses()
        self.poses_pub.publish(encode_pose_array(stamp_ns, "map", positions[: self.rows].tolist(),
                                                 orientations[: self.rows].tolist()))

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
            self.collision_pubs[vehicle].publish(encode_diagnostics_of(message))


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


#: GROUND_TRUTH_VARIANCE (noise-free ground truth: known, and numerically exact) on the 6x6 pose/twist
#: covariance's diagonal (``VECTOR_COVARIANCE``: the 3x3 ones).
POSE_TWIST_COVARIANCE = tuple(GROUND_TRUTH_VARIANCE if i % 7 == 0 else 0.0 for i in range(36))


def odometry_bytes(truth, stamp_ns: int, child_frame: str) -> bytes:
    """nav_msgs/Odometry (CDR): pose in ``map`` (ENU); twist in the body frame (FLU), per nav_msgs convention.

    Serialized here (:func:`aerial_sim.cdr.encode.encode_odometry`, through an encoder kept per child frame:
    :func:`~aerial_sim.cdr.encode.odometry_encoder`) rather than built as an rclpy message: building and
    publishing the typed message cost about six times as much (``bench cdr``)."""
    encode = _ODOMETRY_ENCODERS.get(child_frame)
    if encode is None:
        encode = _ODOMETRY_ENCODERS[child_frame] = odometry_encoder("map", child_frame, POSE_TWIST_COVARIANCE,
                                                                    POSE_TWIST_COVARIANCE)
    orientation = truth.orientation
    return encode(stamp_ns, truth.position, orientation, rotate_inverse(orientation, truth.velocity_world),
                  truth.angular_velocity_body)


def imu_bytes(truth, stamp_ns: int, frame: str) -> bytes:
    """sensor_msgs/Imu (CDR), noise-free: orientation, body rates and specific force (+g up at rest)."""
    encode = _IMU_ENCODERS.get(frame)
    if encode is None:
        encode = _IMU_ENCODERS[frame] = imu_encoder(frame)
    return encode(stamp_ns, truth.orientation, VECTOR_COVARIANCE, truth.angular_velocity_body, VECTOR_COVARIANCE,
                  truth.specific_force_body, VECTOR_COVARIANCE)


#: The encoders of :func:`odometry_bytes` and :func:`imu_bytes`, by frame (a vehicle's frame and covariances are fixed).
_ODOMETRY_ENCODERS: dict = {}
_IMU_ENCODERS: dict = {}


def battery_message(pack, stamp, frame: str) -> BatteryState:
    """sensor_msgs/BatteryState of a :class:`aerial_sim.physics.battery.Battery`: terminal voltage under load,
    current (negative: discharging, as the message defines it), remaining charge and capacity in Ah,
    percentage 0..1, one equal voltage per cell (the model's cells are matched)."""
    state, params = pack.state, pack.params
    message = BatteryState()
    message.header.stamp = stamp
    message.header.frame_id = frame
    message.voltage = float(state.voltage_v)
    message.temperature = math.nan
    message.current = -float(state.current_a)
    message.capacity = message.design_capacity = params.capacity_mah / 1000.0
    message.charge = float(state.charge) * message.capacity
    message.percentage = float(state.charge)
    message.power_supply_status = (BatteryState.POWER_SUPPLY_STATUS_DISCHARGING if state.current_a > 0
                                   else BatteryState.POWER_SUPPLY_STATUS_NOT_CHARGING)
    message.power_supply_health = (BatteryState.POWER_SUPPLY_HEALTH_GOOD if state.charge > 0
                                   else BatteryState.POWER_SUPPLY_HEALTH_DEAD)
    message.power_supply_technology = BatteryState.POWER_SUPPLY_TECHNOLOGY_LIPO
    message.present = True
    message.cell_voltage = [float(state.voltage_v) / params.cells] * params.cells
    message.cell_temperature = [math.nan] * params.cells
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
