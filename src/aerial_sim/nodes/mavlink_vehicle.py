"""MAVLink vehicle node: the built-in flight controller's topic contract, served by a MAVLink autopilot.

A thin adapter around :class:`aerial_sim.mavlink.driver.AutopilotDriver`: it speaks MAVLink 2 to a
PX4 (or ArduPilot) autopilot over pymavlink's connection (``url``: PX4 SITL's offboard link is
``udpin:0.0.0.0:14540``, a serial port ``/dev/ttyACM0``, ...) and offers, in its namespace, what the
built-in ``flight_controller`` offers, so the missions, the AirSim server and the fleet tooling can fly
a real PX4/ArduPilot vehicle or its SITL:

- services ``arm`` (SetBool), ``takeoff``, ``land``, ``reset`` (Trigger); each answers with the
  autopilot's COMMAND_ACK (or why the driver refused to send it);
- topics ``cmd_pose``, ``cmd_vel`` (``map`` or ``<ns>/base_link``), ``cmd_attitude`` and ``cmd_rates``
  (throttle form: frame ``<ns>/base_link``), streamed to the autopilot at ``setpoint_rate_hz``;
- publishes ``odom`` (nav_msgs/Odometry: the autopilot's estimate, ``map`` ENU / ``base_link`` FLU),
  one per LOCAL_POSITION_NED (at most ``odom_rate_hz``), stamped with the time the autopilot measured it (its
  ``time_boot_ms`` mapped to this node's ROS clock by :mod:`aerial_sim.mavlink.autopilot_clock`), and
  ``/diagnostics`` (armed, mode in the built-in controller's words, the autopilot's mode).

Tested against aerial_sim's own MAVLink autopilot (``mavlink`` node) over loopback, not against PX4
or ArduPilot firmware.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped, TwistStamped
from nav_msgs.msg import Odometry
from pymavlink import mavutil
from rclpy.clock import Clock as WallClock
from rclpy.clock import ClockType
from rclpy.node import Node
from rclpy.time import Time
from std_srvs.srv import SetBool, Trigger

from aerial_sim.config import require_positive
from aerial_sim.mavlink.driver import AutopilotDriver, DriverParams, DriverRejected
from aerial_sim.nodes.ros.parameters import declare_params
from aerial_sim.nodes.ros.qos import COMMAND_QOS
from aerial_sim.nodes.ros.run import run_node


@dataclass(frozen=True)
class MavlinkVehicleParams:
    """ROS parameters of the MAVLink vehicle node (defaults here only)."""

    #: pymavlink connection string of the autopilot (PX4 SITL's offboard link by default).
    url: str = "udpin:127.0.0.1:14540"
    #: This node's own MAVLink system and component id (MAVROS': 1/191; here 255 = a ground station's).
    source_system: int = 255
    source_component: int = 191
    #: At most about this many odometry messages per second of the autopilot's time (one per LOCAL_POSITION_NED
    #: up to it), Hz.
    odom_rate_hz: float = 50.0
    diagnostics_period_s: float = 1.0
    driver: DriverParams = field(default_factory=DriverParams)

    def __post_init__(self):
        require_positive(self, "odom_rate_hz", "diagnostics_period_s")


class MavlinkVehicleNode(Node):
    def __init__(self):
        super().__init__("mavlink_vehicle")
        self.params = params = declare_params(self, MavlinkVehicleParams)
        self.driver = AutopilotDriver(params.driver)
        self.lock = threading.Lock()
        self.acks: dict[int, tuple[threading.Event, list]] = {}
        self.namespace = self.get_namespace().strip("/")
        self.body_frames = {"base_link", f"{self.namespace}/base_link"}
        self._refused_at: dict[str, float] = {}
        self._odom_stamp_s = -math.inf
        self._clock_resets = 0
        self.connection = mavutil.mavlink_connection(params.url, source_system=params.source_system,
                                                     source_component=params.source_component, autoreconnect=True)
        self.odom_pub = self.create_publisher(Odometry, "odom", 10)
        self.diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", COMMAND_QOS)
        self.create_service(SetBool, "arm", self.on_arm)
        self.create_service(Trigger, "takeoff", self.on_takeoff)
        self.create_service(Trigger, "land", self.on_land)
        self.create_service(Trigger, "reset", self.on_reset)
        self.create_subscription(PoseStamped, "cmd_pose", self.on_cmd_pose, COMMAND_QOS)
        self.create_subscription(TwistStamped, "cmd_vel", self.on_cmd_vel, COMMAND_QOS)
        self.create_subscription(PoseStamped, "cmd_attitude", self.on_cmd_attitude, COMMAND_QOS)
        self.create_subscription(TwistStamped, "cmd_rates", self.on_cmd_rates, COMMAND_QOS)
        wall = WallClock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(1.0 / params.driver.setpoint_rate_hz, self.send_setpoints, clock=wall)
        # Each new position is published by the executor (the reader thread stays free for the COMMAND_ACKs; the
        # project's executor has no guard conditions): polled at twice the rate cap, so within half its period.
        self.create_timer(0.5 / params.odom_rate_hz, self.publish_odometry, clock=wall)
        self.create_timer(params.diagnostics_period_s, self.publish_diagnostics, clock=wall)
        self._running = True
        self._reader = threading.Thread(target=self._read, name="mavlink-vehicle", daemon=True)
        self._reader.start()
        self.get_logger().info(f"commanding the {params.driver.conventions} autopilot at {params.url} "
                               f"(system {params.driver.target_system})")

    # -- MAVLink in/out ---------------------------------------------------------------------
    def _read(self) -> None:
        last_heartbeat = 0.0
        while self._running:
            if time.monotonic() - last_heartbeat >= 1.0:  # a companion's heartbeat, as MAVROS sends
                last_heartbeat = time.monotonic()
                self._send([self.connection.mav.heartbeat_encode(mavutil.mavlink.MAV_TYPE_ONBOARD_CONTROLLER,
                                                                  mavutil.mavlink.MAV_AUTOPILOT_INVALID, 0, 0, 0)])
            try:
                message = self.connection.recv_match(blocking=True, timeout=0.1)
            except Exception as error:  # a broken frame or a closed port must not end the reader
                self.get_logger().warning(f"MAVLink read failed: {error}", throttle_duration_sec=5.0)
                continue
            if message is None or message.get_type() == "BAD_DATA":
                continue
            received_s = self.get_clock().now().nanoseconds * 1e-9
            with self.lock:
                self.driver.receive(message, time.monotonic(), received_s)
                resets = self.driver.clock.resets
            if resets != self._clock_resets:
                self._clock_resets = resets
                self.get_logger().warning(f"the autopilot's clock no longer matched the mapping to ROS time (a reboot, "
                                          f"or a clock that stepped): re-synchronised (time {resets})")
            if message.get_type() == "COMMAND_ACK":
                waiter = self.acks.get(int(message.command))
                if waiter is not None:
                    waiter[1].append(int(message.result))
                    waiter[0].set()

    def _send(self, messages) -> None:
        for message in messages:
            try:
                self.connection.mav.send(message)
            except Exception as error:
                self.get_logger().warning(f"MAVLink send failed: {error}", throttle_duration_sec=5.0)

    def _command(self, messages) -> tuple[bool, str]:
        """Send commands (the last one is answered by its COMMAND_ACK) and wait for that ACK; an IN_PROGRESS one
        (a long-running command, the MAVLink command protocol) gives the autopilot ``ack_timeout_s`` more."""
        command = int(messages[-1].command)
        event, results = threading.Event(), []
        self.acks[command] = (event, results)
        sent_at = time.monotonic()
        in_progress = mavutil.mavlink.MAV_RESULT_IN_PROGRESS
        try:
            self._send(messages)
            while True:
                if not event.wait(self.params.driver.ack_timeout_s):
                    return False, f"no COMMAND_ACK for command {command} within {self.params.driver.ack_timeout_s:g} s"
                event.clear()
                if any(result != in_progress for result in results):
                    break
        finally:
            self.acks.pop(command, None)
        result = next(result for result in results if result != in_progress)
        name = mavutil.mavlink.enums["MAV_RESULT"][result].name if result in mavutil.mavlink.enums["MAV_RESULT"] \
            else str(result)
        accepted = result == mavutil.mavlink.MAV_RESULT_ACCEPTED
        with self.lock:
            reason = "" if accepted else self.driver.reason_since(sent_at)
        return accepted, f"{name} ({reason})" if reason else name

    # -- services ---------------------------------------------------------------------------
    def _service(self, response, build, what: str):
        try:
            with self.lock:
                messages = build()
        except DriverRejected as error:
            response.success, response.message = False, str(error)
            self.get_logger().warning(str(error))
            return response
        ok, result = self._command(messages)
        response.success, response.message = ok, f"{what}: {result}"
        if not ok:
            self.get_logger().warning(f"{what} refused by the autopilot: {result}")
        return response

    def on_arm(self, request, response):
        response = self._service(response, lambda: self.driver.arm_messages(bool(request.data)),
                                 "arm" if request.data else "disarm")
        if response.success:
            with self.lock:
                self.driver.armed = bool(request.data)  # as acknowledged, before the next HEARTBEAT says so
        return response

    def on_takeoff(self, request, response):
        return self._service(response, self.driver.takeoff_messages, "takeoff")

    def on_land(self, request, response):
        return self._service(response, self.driver.land_messages, "land")

    def on_reset(self, request, response):
        with self.lock:
            self.driver.setpoint = None
        response.success, response.message = True, "setpoints cleared (a real autopilot is not reset)"
        return response

    # -- setpoint topics --------------------------------------------------------------------
    def _setpoint(self, what: str, apply) -> None:
        try:
            with self.lock:
                apply(time.monotonic())
        except DriverRejected as error:
            self.refuse(str(error))

    def on_cmd_pose(self, message: PoseStamped) -> None:
        if message.header.frame_id != "map":
            return self.refuse(f"cmd_pose refused: frame '{message.header.frame_id}' is not 'map'")
        p, q = message.pose.position, message.pose.orientation
        yaw = math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))
        self._setpoint("cmd_pose", lambda t: self.driver.pose(t, (p.x, p.y, p.z), yaw))

    def on_cmd_vel(self, message: TwistStamped) -> None:
        frame = message.header.frame_id
        if frame != "map" and frame not in self.body_frames:
            return self.refuse(f"cmd_vel refused: frame '{frame}' is neither 'map' nor a body frame")
        v, w = message.twist.linear, message.twist.angular
        self._setpoint("cmd_vel", lambda t: self.driver.velocity(t, (v.x, v.y, v.z), w.z, frame != "map"))

    def on_cmd_attitude(self, message: PoseStamped) -> None:
        if message.header.frame_id not in self.body_frames:
            return self.refuse("cmd_attitude refused: only the throttle form (frame <ns>/base_link) is supported")
        q = message.pose.orientation
        self._setpoint("cmd_attitude", lambda t: self.driver.attitude(t, (q.w, q.x, q.y, q.z), message.pose.position.z))

    def on_cmd_rates(self, message: TwistStamped) -> None:
        if message.header.frame_id not in self.body_frames:
            return self.refuse("cmd_rates refused: only the throttle form (frame <ns>/base_link) is supported")
        w = message.twist.angular
        self._setpoint("cmd_rates", lambda t: self.driver.rates(t, (w.x, w.y, w.z), message.twist.linear.z))

    def refuse(self, why: str) -> None:
        now = time.monotonic()
        if now - self._refused_at.get(why, -math.inf) >= 5.0:
            self._refused_at[why] = now
            self.get_logger().warning(why)

    # -- outputs ----------------------------------------------------------------------------
    def send_setpoints(self) -> None:
        with self.lock:
            messages = self.driver.due_messages(time.monotonic())
        self._send(messages)

    def publish_odometry(self) -> None:
        """The newest estimate, stamped when the autopilot measured it, once per position the reader received."""
        with self.lock:
            estimate = self.driver.estimate()
        if estimate is None or not math.isfinite(estimate.time_s) or estimate.time_s <= 0.0:
            return
        period = 1.0 / self.params.odom_rate_hz
        if 0.0 <= estimate.time_s - self._odom_stamp_s < 0.75 * period:  # published already, or the rate cap
            return
        self._odom_stamp_s = estimate.time_s
        message = Odometry()
        message.header.stamp = Time(nanoseconds=int(round(estimate.time_s * 1e9))).to_msg()
        message.header.frame_id = "map"
        message.child_frame_id = f"{self.namespace}/base_link" if self.namespace else "base_link"
        pose, twist = message.pose.pose, message.twist.twist
        pose.position.x, pose.position.y, pose.position.z = estimate.position
        o = pose.orientation
        o.w, o.x, o.y, o.z = estimate.orientation
        # Odometry's twist is in child_frame_id: rotate the world velocity into the body frame.
        w, x, y, z = estimate.orientation
        vx, vy, vz = estimate.velocity_world
        r = ((1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)),
             (2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)),
             (2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)))
        twist.linear.x, twist.linear.y, twist.linear.z = (row[0] * vx + row[1] * vy + row[2] * vz for row in r)
        twist.angular.x, twist.angular.y, twist.angular.z = estimate.angular_velocity_body
        self.odom_pub.publish(message)

    def publish_diagnostics(self) -> None:
        with self.lock:
            connected = self.driver.heartbeat is not None
            armed, mode = self.driver.armed, self.driver.controller_mode()
            autopilot_mode = getattr(self.driver.flight_mode, "value", self.driver.flight_mode)
            system_status = self.driver.system_status()
        status = DiagnosticStatus(
            level=DiagnosticStatus.OK if connected else DiagnosticStatus.WARN,
            name=f"{self.get_fully_qualified_name()}: flight control",
            message=mode if connected else f"no HEARTBEAT from the autopilot at {self.params.url}",
            hardware_id=self.namespace,
            values=[KeyValue(key="armed", value=str(armed).lower()), KeyValue(key="mode", value=mode),
                    KeyValue(key="autopilot_mode", value=str(autopilot_mode)),
                    KeyValue(key="system_status", value=system_status)])
        message = DiagnosticArray(status=[status])
        message.header.stamp = self.get_clock().now().to_msg()
        self.diagnostics_pub.publish(message)

    def destroy_node(self):
        self._running = False
        self._reader.join(timeout=1.0)
        try:
            self.connection.close()
        except Exception:
            pass
        return super().destroy_node()


def main(args=None):
    return run_node(MavlinkVehicleNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
