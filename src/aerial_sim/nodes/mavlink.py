"""MAVLink node: each vehicle's built-in flight controller as a PX4-style MAVLink 2 autopilot.

A thin adapter around :class:`aerial_sim.mavlink.autopilot.Autopilot` (one per vehicle) and
:class:`aerial_sim.mavlink.server.MavlinkServer` (UDP as PX4 SITL: vehicle i binds 18570+i and sends to 14550 for ground stations, binds 14580+i and
sends to 14540+i for offboard APIs such as MAVSDK; system id ``sysid_base + i``). It reads and
commands the graph exactly as the AirSim server does, through the same
:class:`aerial_sim.nodes._vehicle_link.RosVehicleLink` (the flight controller's public topics and
services only), so it serves a fleet and can run beside the AirSim server.

Per vehicle (namespace = vehicle name): reads ``ground_truth/odom``, ``ground_truth/imu``,
``rotors``, ``gps/fix``, ``gps/vel``, ``distance/range`` (and the other streams the link reads) and
the controller's mode from ``/diagnostics``; writes ``cmd_pose``, ``cmd_vel``, ``cmd_attitude``,
``cmd_rates``; calls ``arm``, ``takeoff``, ``land``. World: ``/clock`` (telemetry and guidance run on
simulation time; HEARTBEAT on wall time, 1 Hz).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rosgraph_msgs.msg import Clock

from aerial_sim.airsim.graph import SimClock
from aerial_sim.config import require
from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.mavlink.autopilot import Autopilot, AutopilotParams
from aerial_sim.mavlink.server import EndpointParams, MavlinkServer
from aerial_sim.nodes._vehicle_link import RosVehicleLink
from aerial_sim.nodes.airsim_api import AirSimApiNode
from aerial_sim.nodes.ros.clocks import InputStampClock
from aerial_sim.nodes.ros.event_loop_thread import EventLoopThread
from aerial_sim.nodes.ros.parameters import declare_params
from aerial_sim.nodes.ros.qos import COMMAND_QOS, stream_qos
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.throttle import WarningsByText
from aerial_sim.vehicles.fleet import require_served_vehicles, served_vehicles


@dataclass(frozen=True)
class MavlinkNodeParams:
    """ROS parameters of the MAVLink node (defaults here only)."""

    vehicle_names: tuple[str, ...] = ("drone1",)
    vehicle_types: tuple[str, ...] = ("quad_x",)
    #: A fleet instead of ``vehicle_names`` (the physics node's selection): a fleet file
    #: (config/fleets/<name>.yaml or a path; ``none`` = none) or ``vehicles`` > 1 = drone1..N of ``vehicle_types[0]``.
    fleet: str = "none"
    vehicles: int = 0
    #: System id of the first vehicle; vehicle i gets sysid_base + i (PX4 SITL: MAV_SYS_ID = instance + 1).
    sysid_base: int = 1
    lockstep: bool = False
    endpoints: EndpointParams = field(default_factory=EndpointParams)
    autopilot: AutopilotParams = field(default_factory=AutopilotParams)

    def __post_init__(self):
        require_served_vehicles(self.vehicle_names, self.vehicle_types, self.vehicles)
        count = max(len(self.vehicle_names), self.vehicles)
        require(1 <= self.sysid_base and self.sysid_base + count - 1 <= 250,
                f"system ids must be in 1..250 (sysid_base {self.sysid_base}, {count} vehicles)")

    def fleet_vehicles(self) -> list[tuple[str, str]]:
        """(name, vehicle type) of every vehicle served, in system-id order."""
        return served_vehicles(self.vehicle_names, self.vehicle_types, self.fleet, self.vehicles)


class MavlinkNode(Node):
    """The graph side (vehicle links, /clock, /diagnostics) and the MAVLink server's event loop."""

    # The AirSim server's graph plumbing, reused as is: service calls from the event loop that never
    # hang, the controller's mode from /diagnostics, /clock into the SimClock.
    call = AirSimApiNode.call
    on_diagnostics = AirSimApiNode.on_diagnostics
    on_clock = AirSimApiNode.on_clock

    def __init__(self):
        super().__init__("mavlink")
        self.params = params = declare_params(self, MavlinkNodeParams)
        self.home = declare_params(self, HomePoint, prefix="home.")
        self.clock = SimClock()
        self.vehicles = {name: RosVehicleLink(self, name, kind, params.lockstep)
                         for name, kind in params.fleet_vehicles()}
        self.create_subscription(Clock, "/clock", self.on_clock, stream_qos(params.lockstep), raw=True)
        self.sim_clock = InputStampClock(self)
        self.create_subscription(DiagnosticArray, "/diagnostics", self.on_diagnostics, COMMAND_QOS)
        for link in self.vehicles.values():
            link.subscribe_streams()
        logger = _RosLogger(self)
        self.autopilots = [Autopilot(link, self.home, params.sysid_base + index, lambda frame: None, logger,
                                     params.autopilot)
                           for index, link in enumerate(self.vehicles.values())]
        self.serving = EventLoopThread(
            self, MavlinkServer(self.autopilots, params.endpoints, self.clock, params.autopilot.tick_hz, logger),
            "mavlink", f"cannot open the MAVLink UDP ports on {params.endpoints.host}: {{error}}; no MAVLink in this "
            "run (choose other ports: mavlink_gcs_port:=N ...)")
        self.loop, self.server = self.serving.loop, self.serving.server
        if self.server is None:
            return
        for index, (name, ports) in enumerate(zip(self.vehicles, self.server.bound)):
            remote_gcs, remote_api = (r for _, r in params.endpoints.ports(index))
            self.get_logger().info(
                f"MAVLink {name}: sysid {params.sysid_base + index}, GCS udp {params.endpoints.host}:{ports[0]} -> "
                f"{remote_gcs}, API udp {params.endpoints.host}:{ports[1]} -> {remote_api}")

    def destroy_node(self):
        self.serving.close()
        return super().destroy_node()


class _RosLogger:
    """The node's logger behind the core's ``info``/``warning`` calls: each distinct warning at most once
    every ``WARNING_PERIOD_S`` (a client streaming bad setpoints must not flood the log)."""

    WARNING_PERIOD_S = 5.0

    def __init__(self, node: Node):
        self._logger = node.get_logger()
        self.warning = WarningsByText(node, self.WARNING_PERIOD_S)

    def info(self, text: str) -> None:
        self._logger.info(text)


def main(args=None):
    return run_node(MavlinkNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
