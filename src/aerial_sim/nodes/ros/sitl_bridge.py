"""What every SITL bridge node shares (PX4's simulator interface, ArduPilot's JSON interface): its
parameters, the vehicle's motor-command output the autopilot drives, and the socket it serves on a
thread of its own, closed with the node."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from rclpy.node import Node

from aerial_sim.config import require
from aerial_sim.nodes.ros.motor_commands import motor_command_output
from aerial_sim.nodes.ros.parameters import declare_params
from aerial_sim.nodes.ros.throttle import WarningsByText
from aerial_sim.vehicles.multirotor import load_vehicle


@dataclass(frozen=True)
class SitlBridgeParams:
    """Where the autopilot connects, which vehicle it flies, and whether the graph runs in lockstep
    (then reliable streams, and exactly one motor command per simulation step, the autopilot's answer
    to that step: :mod:`aerial_sim.sitl.lockstep`)."""

    host: str = "127.0.0.1"
    port: int = 0
    vehicle: str = "quad_x"
    lockstep: bool = False

    def __post_init__(self):
        require(0 <= self.port <= 65535, f"port must be in 0..65535, got {self.port}")


class SitlBridgeNode(Node):
    """A node that serves one autopilot's socket on a background thread (:meth:`serve`, run by
    :meth:`start_serving`) and publishes the autopilot's outputs as ``motor_commands``."""

    #: Each distinct warning about the autopilot's traffic at most this often (wall s).
    WARNING_PERIOD_S = 5.0

    def __init__(self, name: str, params_type: type[SitlBridgeParams]):
        super().__init__(name)
        self.params = declare_params(self, params_type)
        self.rotor_count = len(load_vehicle(self.params.vehicle).rotors)
        self.send_controls = motor_command_output(self, "motor_commands")
        self.warn = WarningsByText(self, self.WARNING_PERIOD_S)
        self._running = True
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._running

    def start_serving(self, thread_name: str) -> None:
        self._thread = threading.Thread(target=self.serve, name=thread_name, daemon=True)
        self._thread.start()

    def serve(self) -> None:
        """The thread's body: serve the socket while :attr:`running` (short socket timeouts)."""
        raise NotImplementedError

    def close_sockets(self) -> None:
        raise NotImplementedError

    def destroy_node(self):
        self._running = False
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        self.close_sockets()
        return super().destroy_node()
