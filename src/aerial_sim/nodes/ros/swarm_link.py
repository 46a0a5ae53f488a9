"""A fleet process's link to the physics node: ``/swarm/state`` in, ``/swarm/motor_commands`` out.

A process that serves many vehicles' sensors or flight controllers (:class:`~aerial_sim.nodes.ros.hosting.FleetHosting`)
given ``swarm_link: true`` exchanges one message per period with the physics node for all its vehicles
(:mod:`aerial_sim.physics.swarm_messages`) instead of two or three per vehicle:

- :data:`SWARM_TRUTH`: each node still asks for its own ``ground_truth/odom`` or ``ground_truth/imu``
  (:func:`~aerial_sim.nodes.ros.subscriptions.subscribe_odometry`, ``subscribe_imu``); the router takes those
  requests, holds one ``/swarm/state`` subscription, and hands every node the fields of its vehicle's
  row (the same values its own topic would carry), with its clock advanced to the stamp first. Rows
  are built once per message and vehicle, so a vehicle's barometer, magnetometer and GPS get the same
  fields object (checked and converted once, as with their own topic).
- :data:`SWARM_COMMANDS`: a flight controller's ``motor_commands`` output
  (:func:`~aerial_sim.nodes.ros.motor_commands.motor_command_output`) becomes its vehicle's row of one
  ``/swarm/motor_commands`` message; the commands computed while one ``/swarm/state`` message is
  handed out go out together when it is done, any other immediately.

Why (measured at 64-100 vehicles and 50 Hz, doc/many_vehicles.md): every message costs a wake-up of
Fast DDS's threads and, in Python, an executor callback; a reliable write cost the controllers'
process 30 us more than a best-effort one, and the physics node took each vehicle's command in a
callback of its own. The outputs a user sees stay per vehicle and per node: sensors publish on their
own topics, and a real driver or controller that publishes ``<vehicle>/motor_commands`` still flies
its vehicle (the physics node reads both).
"""

from __future__ import annotations

import contextlib
from typing import Callable, Sequence

from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import PointCloud2
from std_msgs.msg import Float64MultiArray

from aerial_sim.nodes.ros.shared_subscriptions import failure_line
from aerial_sim.physics import swarm_messages

STATE_TOPIC = "/swarm/state"
COMMANDS_TOPIC = "/swarm/motor_commands"
#: The ground-truth topics a vehicle's nodes read, relative to the vehicle's namespace, and how
#: a row becomes what each decodes to.
ROUTED = {
    "ground_truth/odom": swarm_messages.odometry_fields,
    "ground_truth/imu": swarm_messages.imu_fields,
}


def _vehicle_topics(vehicle_names: list[str], namespace: str, topics) -> dict[str, tuple[int, str]]:
    """``{<namespace>/<vehicle>/<topic>: (the vehicle's row, its name)}``."""
    parent = namespace.rstrip("/")
    return {f"{parent}/{name}/{topic}": (row, name) for row, name in enumerate(vehicle_names) for topic in topics}


class _Route:
    """One node's request: its vehicle's row, as one of the ROUTED topics, to ``callback``."""

    def __init__(self, node: Node, row: int, vehicle: str, topic: str, callback: Callable, clock) -> None:
        self.node, self.row, self.topic, self.callback, self.clock = node, row, topic, callback, clock
        self.frame = f"{vehicle}/base_link"  # the physics node's body frame of the vehicle


class SwarmTruth:
    """The process's router from ``/swarm/state`` to its vehicles' nodes (see the module doc)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Serve nothing: every node subscribes to its own topics."""
        self.rows: dict[str, tuple[int, str]] = {}  # absolute routed topic -> the vehicle's row and name
        self.vehicles = 0
        self.qos: QoSProfile | None = None
        self.routes: list[_Route] = []
        self.subscription = None

    def serve(self, vehicle_names: list[str], namespace: str, qos: QoSProfile) -> None:
        """Route the ROUTED topics of ``<namespace>/<vehicle>`` for these vehicles, in the physics
        node's order (each member of a shared process calls this with the same fleet)."""
        self.vehicles, self.qos = len(vehicle_names), qos
        self.rows = _vehicle_topics(vehicle_names, namespace, ROUTED)

    def route(self, node: Node, topic: str, callback: Callable, clock=None) -> bool:
        """Take ``node``'s subscription to ``topic`` when it is a served vehicle's ground truth; False
        (the caller subscribes as usual) otherwise."""
        resolved = node.resolve_topic_name(topic)
        if resolved not in self.rows:
            return False
        relative = next(name for name in ROUTED if resolved.endswith(f"/{name}"))
        row, vehicle = self.rows[resolved]
        self.routes.append(_Route(node, row, vehicle, relative, callback, clock))
        if self.subscription is None:  # on the first node that asks; the InputGuard of that node guards it
            self.subscription = node.create_subscription(PointCloud2, STATE_TOPIC, self.on_state, self.qos, raw=True)
            node.get_logger().info(f"ground truth of {self.vehicles} vehicles from {STATE_TOPIC} (swarm_link)")
        return True

    def connected_topics(self, node: Node) -> set[str]:
        """The routed topics of ``node`` once ``/swarm/state`` has a publisher (a lockstep
        participant's inputs, :class:`~aerial_sim.nodes.ros.lockstep.ConnectedInputsPublisher`)."""
        if self.subscription is None or self.subscription.get_publisher_count() == 0:
            return set()
        return {node.resolve_topic_name(r.topic) for r in self.routes if r.node is node}

    def on_state(self, data: bytes) -> None:
        """Hand each route its row; the commands this computes go out as one message. A malformed
        message is refused whole (``ValueError``, reported by the InputGuard); a node whose callback
        fails does not keep the others from their rows."""
        sec, nanosec, rows = swarm_messages.decode_state(data, self.vehicles)
        stamp_ns = sec * 1_000_000_000 + nanosec
        built: dict[tuple[int, str], object] = {}
        failures = []
        with SWARM_COMMANDS.together():
            for route in self.routes:
                key = (route.row, route.topic)
                fields = built.get(key)
                if fields is None:
                    fields = built[key] = ROUTED[route.topic](rows[route.row], sec, nanosec, route.frame)
                try:
                    if route.clock is not None:
                        route.clock.advance(stamp_ns)
                    route.callback(fields)
                except Exception as error:  # noqa: BLE001 - one node's failure is reported below, the rest go on
                    failures.append(failure_line(route.node, error))
        if failures:
            raise ValueError(f"{len(failures)} node(s) could not use their row: {'; '.join(failures)}")


class SwarmCommands:
    """The process's one ``/swarm/motor_commands`` publisher for its vehicles' controllers (module doc)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Serve nothing: every controller publishes its own ``motor_commands``."""
        self.rows: dict[str, tuple[int, str]] = {}
        self.qos: QoSProfile | None = None
        self.publisher = None
        self.pending: dict[int, Sequence[float]] = {}
        self.holding = 0

    def serve(self, vehicle_names: list[str], namespace: str, qos: QoSProfile) -> None:
        self.qos = qos
        self.rows = _vehicle_topics(vehicle_names, namespace, ("motor_commands",))

    def output(self, node: Node, topic: str) -> Callable[[Sequence[float]], None] | None:
        """``send(controls)`` for ``node``'s ``topic`` when it is a served vehicle's ``motor_commands``,
        else None (the node publishes its own)."""
        resolved = node.resolve_topic_name(topic)
        if resolved not in self.rows:
            return None
        if self.publisher is None:
            self.publisher = node.create_publisher(Float64MultiArray, COMMANDS_TOPIC, self.qos)
            node.get_logger().info(f"motor commands of {len(self.rows)} vehicles on {COMMANDS_TOPIC} (swarm_link)")
        row = self.rows[resolved][0]

        def send(controls: Sequence[float]) -> None:
            self.pending[row] = controls
            if not self.holding:
                self.flush()
        return send

    @contextlib.contextmanager
    def together(self):
        """Hold the commands sent inside and publish them as one message at the end."""
        self.holding += 1
        try:
            yield
        finally:
            self.holding -= 1
            if not self.holding:
                self.flush()

    def flush(self) -> None:
        if self.pending and self.publisher is not None:
            commands, self.pending = self.pending, {}
            self.publisher.publish(swarm_messages.encode_commands(commands))


#: The process's one router and one command publisher (nodes of one process are built and spun in one thread).
SWARM_TRUTH = SwarmTruth()
SWARM_COMMANDS = SwarmCommands()
