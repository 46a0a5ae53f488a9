"""ArduPilot SITL node: ArduPilot's JSON simulator interface in front of the physics node.

A thin adapter around :mod:`aerial_sim.sitl.ardupilot_json`: it listens on UDP ``host:port``
(127.0.0.1:9002, where ArduPilot's ``--model JSON`` sends), turns each servo packet into the vehicle's
``motor_commands`` (run the graph with ``use_controller:=false``: ArduPilot is the flight controller)
and answers with the newest ground truth after it (``ground_truth/odom`` + ``ground_truth/imu``),
waiting up to ``max_wait_s`` for a state newer than the last one answered, so ArduPilot advances
with the simulation's steps. With ``lockstep`` true each new frame is one simulation step: its command
releases the physics node's step and the answer is the state after that step, however long it takes
(the physics node waits for the command, ArduPilot for the state, so neither runs ahead of the other;
a resent frame gets the same answer and commands nothing). A datagram that is not a servo packet is
dropped with one log line.

    aerial_sim launch sim.launch.yaml mission:=none use_controller:=false autopilot:=ardupilot
    sim_vehicle.py -v ArduCopter -f quad --model JSON        # in ArduPilot's tree (not run here)
"""

from __future__ import annotations

import math
import socket
import threading
from dataclasses import dataclass

from aerial_sim.config import require_positive
from aerial_sim.nodes.ros.qos import stream_qos
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.sitl_bridge import SitlBridgeNode, SitlBridgeParams
from aerial_sim.nodes.ros.subscriptions import subscribe_imu, subscribe_odometry
from aerial_sim.sensors.truth import truth_from_odometry
from aerial_sim.sitl.ardupilot_json import PacketError, controls_from_pwm, parse_servo_packet, state_json


@dataclass(frozen=True)
class ArdupilotSitlParams(SitlBridgeParams):
    port: int = 9002
    #: Longest wait (wall s) for a state newer than the last answered before answering with the newest
    #: (not in lockstep: there the answer waits for the step).
    max_wait_s: float = 0.05

    def __post_init__(self):
        super().__post_init__()
        require_positive(self, "max_wait_s")


class ArdupilotSitlNode(SitlBridgeNode):
    #: Lockstep: how long (wall s) one wait for the step's state lasts before the node looks at whether it stops.
    LOCKSTEP_WAIT_SLICE_S = 0.1

    def __init__(self):
        super().__init__("ardupilot_sitl", ArdupilotSitlParams)
        params = self.params
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
        self.start_serving("ardupilot-json")
        self.get_logger().info(f"ArduPilot JSON SITL interface on udp {params.host}:{self.port} "
                               f"({self.rotor_count} rotors; run ArduPilot with --model JSON"
                               f"{'; lockstep' if params.lockstep else ''})")

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

    def serve(self) -> None:
        last_frame, last_stamp, last_reply = None, -math.inf, None
        while self.running:
            try:
                data, peer = self.socket.recvfrom(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                packet = parse_servo_packet(data)
            except PacketError as error:
                self.warn(f"not an ArduPilot servo packet from {peer[0]}:{peer[1]}: {error}; dropped")
                continue
            self.packets += 1
            if packet.frame_count == last_frame and last_reply is not None:
                self.socket.sendto(last_reply, peer)  # a resend: same answer
                continue
            if last_frame is not None and packet.frame_count < last_frame:
                self.get_logger().info("ArduPilot restarted (frame count went back)")
            last_frame = packet.frame_count
            truth = self._answer(controls_from_pwm(packet.pwm_us, self.rotor_count), last_stamp)
            if truth is None:
                continue  # no physics yet: ArduPilot resends after a second
            try:
                line = state_json(truth.time_s, truth.position, truth.velocity_world, truth.orientation,
                                  truth.angular_velocity_body, self._specific_force)
            except ValueError as error:
                self.warn(f"ground truth unusable ({error}); not answered")
                continue
            last_stamp, last_reply = truth.time_s, line.encode()
            self.socket.sendto(last_reply, peer)

    def _answer(self, controls, last_stamp: float):
        """Command ``controls`` and return the state to answer with (None when there is none yet)."""
        if not self.params.lockstep:
            self.send_controls(controls)
            with self.state:
                self.state.wait_for(lambda: self._truth is not None and self._truth.time_s > last_stamp,
                                    timeout=self.params.max_wait_s)
                return self._truth
        with self.state:  # lockstep: the state after the step this command releases
            if self._truth is None:
                return None  # no step to release yet: ArduPilot sends again
            before = self._truth.time_s
        self.send_controls(controls)
        with self.state:
            while self.running and not self.state.wait_for(
                    lambda: self._truth is not None and self._truth.time_s > before, timeout=self.LOCKSTEP_WAIT_SLICE_S):
                pass
            return self._truth

    def close_sockets(self) -> None:
        self.socket.close()


def main(args=None):
    return run_node(ArdupilotSitlNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
