"""One vehicle's ROS topics and services for the AirSim server (:class:`RosVehicleLink`).

:class:`aerial_sim.airsim.graph.VehicleLink` on the graph's public interfaces, namespace = the vehicle's
ROS name: while an AirSim client is connected it reads ``ground_truth/odom``, ``ground_truth/imu``,
``rotors``, ``imu/data``, ``air_pressure``, ``magnetic_field``, ``gps/fix``, ``gps/vel``, ``lidar/points``,
``distance/range`` and ``battery``, and always ``set_pose/applied`` (and, through its node, the flight
controller's mode from ``/diagnostics``); it writes ``cmd_pose``, ``cmd_vel``, ``cmd_attitude``,
``cmd_rates``, ``cmd_motors`` and ``set_pose`` and calls the controller's ``arm``, ``takeoff``, ``land``,
``reset`` and ``kill``. The AirSim API node (:mod:`aerial_sim.nodes.airsim_api`) holds one per vehicle,
and so does the MAVLink node (:mod:`aerial_sim.nodes.mavlink`): the node passed in gives the link its
``clock`` (:class:`aerial_sim.airsim.graph.SimClock`), ``home`` and ``call`` (a service call with a timeout).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import PoseStamped, TwistStamped
from sensor_msgs.msg import BatteryState, FluidPressure, MagneticField, NavSatFix, NavSatStatus, PointCloud2, Range
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool, Trigger

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
)
from aerial_sim.cdr.decode import ImuFields, JointStateFields, OdometryFields
from aerial_sim.cdr.encode import encode_float64_array, encode_pose_stamped, encode_twist_stamped
from aerial_sim.control.geometry import quat_from_yaw, quat_to_matrix
from aerial_sim.environment.gravity import normal_gravity
from aerial_sim.nodes.ros.message_fields import is_finite_sequence
from aerial_sim.nodes.ros.qos import COMMAND_QOS, stream_qos
from aerial_sim.nodes.ros.services import SERVICE_QOS
from aerial_sim.nodes.ros.stamps import from_stamp, to_stamp_ns
from aerial_sim.nodes.ros.subscriptions import subscribe_imu, subscribe_joint_state, subscribe_odometry
from aerial_sim.sensors.truth import truth_from_odometry
from aerial_sim.vehicles.multirotor import load_vehicle

if TYPE_CHECKING:  # annotations only: that module imports this one
    from aerial_sim.nodes.airsim_api import AirSimApiNode


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
