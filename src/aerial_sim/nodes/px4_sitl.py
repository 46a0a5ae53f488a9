"""PX4 SITL node: PX4's simulator MAVLink interface (TCP 4560) in front of the physics and sensor nodes.

A thin adapter around :mod:`aerial_sim.sitl.px4_hil`: it listens on TCP ``host:port`` (127.0.0.1:4560,
where PX4's ``simulator_mavlink`` connects), sends HIL_SENSOR at each ground-truth step from this
project's sensor models (``imu/data``, ``magnetic_field``, ``air_pressure``; ground truth where a
sensor is not running), HIL_GPS from ``gps/fix`` + ``gps/vel`` at ``gps_rate_hz`` and
HIL_STATE_QUATERNION (ground truth) at ``state_rate_hz``, and turns PX4's HIL_ACTUATOR_CONTROLS into
``motor_commands`` (run the graph with ``use_controller:=false``: PX4 is the flight controller).
With ``lockstep`` true each step's HIL_SENSOR goes out once and only PX4's answer to it (the
HIL_ACTUATOR_CONTROLS stamped with that HIL_SENSOR's time, as PX4's lockstep scheduler stamps it)
becomes the step's motor command, so the physics node, which waits for it, never runs ahead of a
slow PX4 (:mod:`aerial_sim.sitl.lockstep`).

    aerial_sim launch sim.launch.yaml mission:=none autopilot:=px4
    PX4_SIM_MODEL=none_iris make px4_sitl none     # in PX4's tree: PX4 connects to 4560 (not run here)
"""

from __future__ import annotations

import math
import socket
import threading
from dataclasses import dataclass

from geometry_msgs.msg import TwistStamped
from pymavlink.dialects.v20 import common as mav
from sensor_msgs.msg import FluidPressure, MagneticField, NavSatFix

from aerial_sim.config import require_positive
from aerial_sim.environment.geodesy import HomePoint, enu_to_geodetic
from aerial_sim.nodes.ros.parameters import declare_params
from aerial_sim.nodes.ros.qos import stream_qos
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.sitl_bridge import SitlBridgeNode, SitlBridgeParams
from aerial_sim.nodes.ros.subscriptions import subscribe_imu, subscribe_odometry
from aerial_sim.sensors.truth import truth_from_odometry
from aerial_sim.sitl import px4_hil
from aerial_sim.sitl.lockstep import StepAnswers

#: Earth's field at the default home point (WMM, Redmond), ENU tesla: used only
#: when no magnetometer runs.
_DEFAULT_FIELD_ENU = (5.3e-6, 1.85e-5, -4.88e-5)
#: Stamps are whole nanoseconds read as float seconds: a period may come out a hair short of 1 / rate.
_STAMP_SLACK_S = 1e-6


@dataclass(frozen=True)
class Px4SitlParams(SitlBridgeParams):
    port: int = 4560
    gps_rate_hz: float = 10.0
    state_rate_hz: float = 250.0
    temperature_c: float = 15.0

    def __post_init__(self):
        super().__post_init__()
        require_positive(self, "gps_rate_hz", "state_rate_hz")


class Px4SitlNode(SitlBridgeNode):
    def __init__(self):
        super().__init__("px4_sitl", Px4SitlParams)
        params = self.params
        self.home = declare_params(self, HomePoint, prefix="home.")
        self.mav = mav.MAVLink(None, srcSystem=1, srcComponent=51)  # the simulator's ids, as Gazebo's plugin
        self.imu = self.field = self.pressure = self.fix = None
        self.gps_velocity = (0.0, 0.0, 0.0)
        self.truth_force = (0.0, 0.0, 9.80665)
        self._last_gps = self._last_state = -math.inf
        self._new_mag = self._new_baro = False
        qos = stream_qos(params.lockstep)
        subscribe_odometry(self, "ground_truth/odom", self.on_odom, qos)
        subscribe_imu(self, "ground_truth/imu", self.on_truth_imu, qos)
        subscribe_imu(self, "imu/data", self.on_imu, qos)
        self.create_subscription(MagneticField, "magnetic_field", self.on_field, qos)
        self.create_subscription(FluidPressure, "air_pressure", self.on_pressure, qos)
        self.create_subscription(NavSatFix, "gps/fix", self.on_fix, qos)
        self.create_subscription(TwistStamped, "gps/vel", self.on_gps_velocity, qos)
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind((params.host, params.port))
        self.server.listen(1)
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.client: socket.socket | None = None
        self.connections = 0
        self.send_lock = threading.Lock()
        self.steps = StepAnswers()  # lockstep only
        self.steps_lock = threading.Lock()
        self.actuator_messages = 0
        self.start_serving("px4-sitl")
        self.get_logger().info(f"PX4 simulator interface on tcp {params.host}:{self.port} ({self.rotor_count} "
                               "rotors; start PX4 SITL with a 'none' model so it connects here"
                               f"{'; lockstep' if params.lockstep else ''})")

    # -- sensors in ---------------------------------------------------------------------------
    def on_truth_imu(self, imu) -> None:
        if all(math.isfinite(a) for a in imu.linear_acceleration):
            self.truth_force = tuple(imu.linear_acceleration)

    def on_imu(self, imu) -> None:
        if all(math.isfinite(v) for v in (*imu.angular_velocity, *imu.linear_acceleration)):
            self.imu = (tuple(imu.linear_acceleration), tuple(imu.angular_velocity))

    def on_field(self, message: MagneticField) -> None:
        f = message.magnetic_field
        if all(math.isfinite(v) for v in (f.x, f.y, f.z)):
            self.field, self._new_mag = (f.x, f.y, f.z), True

    def on_pressure(self, message: FluidPressure) -> None:
        if math.isfinite(message.fluid_pressure) and message.fluid_pressure > 0:
            self.pressure, self._new_baro = message.fluid_pressure, True

    def on_fix(self, message: NavSatFix) -> None:
        if all(math.isfinite(v) for v in (message.latitude, message.longitude, message.altitude)):
            self.fix = message

    def on_gps_velocity(self, message: TwistStamped) -> None:
        v = message.twist.linear
        if all(math.isfinite(c) for c in (v.x, v.y, v.z)):
            self.gps_velocity = (v.x, v.y, v.z)

    def on_odom(self, odom) -> None:
        if self.client is None:
            return
        truth = truth_from_odometry(odom)
        if truth is None:
            return
        t = truth.time_s
        if self.params.lockstep:
            with self.steps_lock:
                if not self.steps.send_state(px4_hil.time_usec(t), self.connections):
                    return
        force, gyro = self.imu if self.imu is not None else (self.truth_force, truth.angular_velocity_body)
        if self.field is not None:
            field, new_mag = self.field, self._new_mag
        else:  # no magnetometer node: the home field rotated into the body
            from aerial_sim.control.geometry import quat_to_matrix

            field = tuple(quat_to_matrix(truth.orientation).T @ _DEFAULT_FIELD_ENU)
            new_mag = True
        lat, lon, alt = enu_to_geodetic(*truth.position, self.home)
        pressure = self.pressure if self.pressure is not None else 101325.0 * (1 - 2.25577e-5 * alt) ** 5.25588
        new_baro = self._new_baro or self.pressure is None
        self._new_mag = self._new_baro = False
        messages = [px4_hil.hil_sensor(t, force, gyro, field, pressure, self.params.temperature_c, new_mag, new_baro)]
        if t - self._last_gps >= 1.0 / self.params.gps_rate_hz - _STAMP_SLACK_S or t < self._last_gps:
            self._last_gps = t
            if self.fix is not None:
                cov = self.fix.position_covariance
                messages.append(px4_hil.hil_gps(t, self.fix.latitude, self.fix.longitude, self.fix.altitude,
                                                self.gps_velocity, math.sqrt(max(cov[0], 0.0)),
                                                math.sqrt(max(cov[8], 0.0)), self.fix.status.status >= 0))
            else:
                messages.append(px4_hil.hil_gps(t, lat, lon, alt, truth.velocity_world))
        if t - self._last_state >= 1.0 / self.params.state_rate_hz - _STAMP_SLACK_S or t < self._last_state:
            self._last_state = t
            messages.append(px4_hil.hil_state_quaternion(t, truth.orientation, truth.angular_velocity_body, lat, lon,
                                                         alt, truth.velocity_world, self.truth_force))
        self._send(b"".join(m.pack(self.mav) for m in messages))
        if self.params.lockstep:
            with self.steps_lock:
                unanswered = self.steps.release_unanswered()
            if unanswered:
                self.send_controls([0.0] * self.rotor_count)  # PX4 has not answered yet: motors off

    def _send(self, data: bytes) -> None:
        client = self.client
        if client is None:
            return
        try:
            with self.send_lock:
                client.sendall(data)
        except OSError as error:
            self.get_logger().warning(f"PX4 connection lost ({error}); waiting for it to reconnect")
            self._drop_client()

    def _drop_client(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            try:
                client.close()
            except OSError:
                pass

    # -- PX4 in -----------------------------------------------------------------------------
    def serve(self) -> None:
        while self.running:
            if self.client is None:
                try:
                    client, peer = self.server.accept()
                except (socket.timeout, OSError):
                    continue
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                client.settimeout(0.2)
                parser = mav.MAVLink(None)
                parser.robust_parsing = True
                self.client = client
                self.connections += 1
                self.get_logger().info(f"PX4 connected from {peer[0]}:{peer[1]}")
            try:
                data = self.client.recv(65536)
            except socket.timeout:
                continue
            except (OSError, AttributeError):
                self._drop_client()
                continue
            if not data:
                self.get_logger().info("PX4 disconnected")
                self._drop_client()
                continue
            try:
                messages = parser.parse_buffer(data) or []
            except Exception as error:
                self.warn(f"unreadable MAVLink from PX4 dropped: {error}")
                continue
            for message in messages:
                if message.get_type() == "HIL_ACTUATOR_CONTROLS":
                    self.on_actuator_controls(message)
                elif message.get_type() == "BAD_DATA":
                    self.warn("malformed MAVLink frame from PX4 dropped")

    def on_actuator_controls(self, message) -> None:
        """PX4's outputs -> ``motor_commands``; in lockstep only its answer to the step awaited."""
        if self.params.lockstep:
            with self.steps_lock:
                if not self.steps.release(int(message.time_usec)):
                    return  # an answer to an earlier, re-sent step: this step waits for its own
        controls, _ = px4_hil.motor_controls(message, self.rotor_count)
        self.actuator_messages += 1
        self.send_controls(controls)

    def close_sockets(self) -> None:
        self._drop_client()
        self.server.close()


def main(args=None):
    return run_node(Px4SitlNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
