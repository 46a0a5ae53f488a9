"""ArduPilot SITL node: ArduPilot's JSON simulator interface in front of the physics node.

A thin adapter around :mod:`aerial_sim.sitl.ardupilot_json`: it listens on UDP ``host:port``
(127.0.0.1:9002, where ArduPilot's ``--model JSON`` sends), turns each servo packet into the vehicle's
``motor_commands`` (run the graph with ``use_controller:=false``: ArduPilot is the flight controller)
and answers with the newest ground truth after it (``ground_truth/odom`` + ``ground_truth/imu``),
waiting up to ``max_wait_s`` for a state newer than the last one answered, so ArduPilot advances
with the simulation's steps. A datagram that is not a servo packet is dropped with one log line.

    aerial_sim launch sim.launch.yaml mission:=none use_controller:=false autopilot:=ardupilot
    sim_vehicle.py -v ArduCopter -f quad --model JSON        # in ArduPilot's tree (not run here)
"""

from __future__ import annotations

import math
import socket
import threading
import time
from dataclasses import dataclass

from aerial_sim.config import require, require_positive
from aerial_sim.nodes.ros.parameters import declare_params
from aerial_sim.nodes.ros.motor_commands import motor_command_output
from aerial_sim.nodes.ros.qos import stream_qos
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.subscriptions import subscribe_imu, subscribe_odometry
from aerial_sim.sensors.truth import truth_from_odometry
from aerial_sim.sitl.ardupilot_json import PacketError, controls_from_pwm, parse_servo_packet, state_json
from aerial_sim.vehicles.multirotor import load_vehicle
from rclpy.node import Node


@dataclass(frozen=True)
class ArdupilotSitlParams:
    host: str = "127.0.0.1"
    port: int = 9002
    vehicle: str = "quad_x"
    #: Longest wait (wall s) for a state newer than the last answered before answering with the newest.
    max_wait_s: float = 0.05
    lockstep: bool = False

    def __post_init__(self):
        require(0 <= self.port <= 65535, f"port must be in 0..65535, got {self.port}")
        require_positive(self, "max_wait_s")


class ArdupilotSitlNode(Node):
    def __init__(self):
        super().__init__("ardupilot_sitl")
        self.params = params = declare_params(self, ArdupilotSitlParams)
        self.rotor_count = len(load_vehicle(params.vehicle).rotors)
        self.send_controls = motor_command_output(self, "motor_commands")
        self.state = threading.Condition()
        self._truth = None
        self._specific_force = (0.0, 0.0, 9.80665)
        qos = stream_qos(params.lockstep)
        subscribe_odometry(self, "ground_truth/odom", self.on_odom, qos)
        subscribe_imu(self, "ground_truth/imu", self.on_imu, qos)
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind((params.host, params.port))
        self.socket.settimeout(0.1)
        self.port = self.socket.getsockname()[1]
        self.packets = 0
        self._warned: dict[str, float] = {}
        self._running = True
        self._thread = threading.Thread(target=self._serve, name="ardupilot-json", daemon=True)
        self._thread.start()
        self.get_logger().info(f"ArduPilot JSON SITL interface on udp {params.host}:{self.port} "
                               f"({self.rotor_count} rotors; run ArduPilot with --model JSON)")

    def on_odom(self, odom) -> None:
        truth = truth_from_odometry(odom)
        if truth is None:
            return
        with self.state:
            self._truth = truth
            self.state.notify_all()

    def on_imu(self, imu) -> None:
        if all(math.isfinite(a) for a in imu.linear_acceleration):
            self._specific_force = tuple(imu.linear_acceleration)

    def _warn(self, text: str) -> None:
        now = time.monotonic()
        if now - self._warned.get(text, -math.inf) >= 5.0:
            self._warned[text] = now
            self.get_logger().warning(text)

    def _serve(self) -> None:
        last_frame, last_stamp, last_reply = None, -math.inf, None
        while self._running:
            try:
                data, peer = self.socket.recvfrom(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                packet = parse_servo_packet(data)
            except PacketError as error:
                self._warn(f"not an ArduPilot servo packet from {peer[0]}:{peer[1]}: {error}; dropped")
                continue
            self.packets += 1
            if packet.frame_count == last_frame and last_reply is not None:
                self.socket.sendto(last_reply, peer)  # a resend: same answer
                continue
            if last_frame is not None and packet.frame_count < last_frame:
                self.get_logger().info("ArduPilot restarted (frame count went back)")
            last_frame = packet.frame_count
            self.send_controls(controls_from_pwm(packet.pwm_us, self.rotor_count))
            with self.state:
                self.state.wait_for(lambda: self._truth is not None and self._truth.time_s > last_stamp,
                                    timeout=self.params.max_wait_s)
                truth = self._truth
            if truth is None:
                continue  # no physics yet: ArduPilot resends after a second
            try:
                line = state_json(truth.time_s, truth.position, truth.velocity_world, truth.orientation,
                                  truth.angular_velocity_body, self._specific_force)
            except ValueError as error:
                self._warn(f"ground truth unusable ({error}); not answered")
                continue
            last_stamp, last_reply = truth.time_s, line.encode()
            self.socket.sendto(last_reply, peer)

    def destroy_node(self):
        self._running = False
        self._thread.join(timeout=1.0)
        self.socket.close()
        return super().destroy_node()


def main(args=None):
    return run_node(ArdupilotSitlNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
