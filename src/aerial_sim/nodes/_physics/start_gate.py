"""The physics node's start gate: the clock stays at 0 until every node of ``start_gate_nodes`` is ready in
the graph (the rules are :mod:`aerial_sim.physics.start_gate`'s)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from aerial_sim.physics.start_gate import (INFRASTRUCTURE_TOPICS, NodeView, StartGate, for_each_vehicle,
                                           parse_gate_nodes, split_entry, split_name)
from aerial_sim.vehicles.fleet import SENSORS, FleetSelection
from aerial_sim.nodes.ros.lockstep import LOCKSTEP_PARTICIPANTS_TOPIC

if TYPE_CHECKING:  # annotations only: that module imports this one
    from aerial_sim.nodes.physics import PhysicsNode


#: How often the simulation thread looks at the graph while the gate is closed (wall s).
POLL_S = 0.02
#: Real time: wall seconds from the gate's opening to the first state. The graph shows the physics node its
#: own side of each connection only; the reader's side can come later, and the state at t = 0 is sent once
#: (a camera's first frame once came at 0.068 s at a load of 16 on 2 cores, the states before it lost).
CONNECT_GRACE_S = 0.2


def own_publishers(node: "PhysicsNode") -> dict[str, object]:
    """The physics node's publishers of what the simulated nodes read, by topic (a fleet's processes with
    the swarm link read ``/swarm/state`` instead of each vehicle's ground truth)."""
    publishers = {}
    for vehicle in node.vehicles:
        for publisher in (vehicle.odom_pub, vehicle.imu_pub, vehicle.rotors_pub, vehicle.wind_pub, vehicle.battery_pub):
            if publisher is not None:
                publishers[publisher.topic_name] = publisher
    if node.swarm.many:
        publishers[node.swarm.state_pub.topic_name] = node.swarm.state_pub
    return publishers


def fleet_sensors(node: "PhysicsNode") -> list[tuple[str, tuple[str, ...]]]:
    """(name, sensors carried) of each of the node's vehicles, for the gate's ``/{vehicle}/...`` entries: what
    the fleet file says (a grid fleet's vehicles carry the default four), every sensor for a vehicle not in it."""
    params = node.params
    selection = FleetSelection(fleet=params.fleet, vehicles=params.vehicles,
                               vehicle_type=params.vehicle_types[0] if params.vehicle_types else "quad_x")
    carried = {v.name: v.sensors for v in selection.load()} if selection.given else {}
    return [(v.name, carried.get(v.name, SENSORS)) for v in node.vehicles]


def _full_name(info) -> str:
    return f"{info.node_namespace.rstrip('/')}/{info.node_name}"


def graph_views(node: "PhysicsNode", names: tuple[str, ...]) -> dict[str, NodeView]:
    """What the graph shows of each named node (:class:`NodeView`), by entry (``NODE>TOPIC`` ones too, whose
    view also lists the topics the node publishes).

    A node's inputs are its own subscriptions and, of the physics node's topics, those its process reads:
    the nodes of one process share one reader of ground truth (:mod:`aerial_sim.nodes.ros.shared_subscriptions`),
    which the graph lists under the node that asked first. A process is known by the GUID prefix (the first
    12 bytes) of its nodes' endpoints; a node's own are its ``/rosout`` and ``/parameter_events`` publishers."""
    present = {f"{namespace.rstrip('/')}/{name}" for name, namespace in node.get_node_names_and_namespaces()}
    entries = {entry: split_entry(entry) for entry in names}
    nodes = {full for full, _ in entries.values()}
    named = sorted({full for full in nodes if full in present})
    process: dict[str, bytes] = {}
    for topic in ("/rosout", "/parameter_events"):
        for info in node.get_publishers_info_by_topic(topic):
            process.setdefault(_full_name(info), bytes(info.endpoint_gid)[:12])
    own: dict[str, set[str]] = {}
    for full in named:
        namespace, name = split_name(full)
        try:
            topics = node.get_subscriber_names_and_types_by_node(name, namespace)
        except Exception:  # noqa: BLE001 - it left the graph between the two questions
            topics = []
        own[full] = {topic for topic, _ in topics if topic not in INFRASTRUCTURE_TOPICS}
    # Our topics' readers in the named nodes' processes: each endpoint must be matched by our publisher.
    publishers = own_publishers(node)
    prefixes = {process[full] for full in named if full in process}
    read_by_process: dict[bytes, set[str]] = {}
    unmatched = set()
    for topic, publisher in publishers.items():
        readers = [info for info in node.get_subscriptions_info_by_topic(topic)
                   if _full_name(info) in nodes or bytes(info.endpoint_gid)[:12] in prefixes]
        for info in readers:
            read_by_process.setdefault(bytes(info.endpoint_gid)[:12], set()).add(topic)
        if publisher.get_subscription_count() < len(readers):
            unmatched.add(topic)
    announcers: dict[str, set[bytes]] = {}
    taken: set[bytes] = set()
    if node.lockstep_outputs is not None:
        for info in node.get_publishers_info_by_topic(LOCKSTEP_PARTICIPANTS_TOPIC):
            announcers.setdefault(_full_name(info), set()).add(bytes(info.endpoint_gid))
        taken = {bytes(entry[0]) for entry in list(node.lockstep_outputs.announcers.values())}
    views = {}
    for entry, (full, output) in entries.items():
        if full not in own:
            continue
        inputs = own[full] | read_by_process.get(process.get(full, b""), set())
        gids = announcers.get(full, set())
        views[entry] = NodeView(present=True, inputs=tuple(sorted(inputs)),
                                unmatched=tuple(sorted(inputs & unmatched)),
                                announcements=len(gids), announcements_taken=len(gids & taken),
                                outputs=_published_by(node, full) if output is not None else ())
    return views


def _published_by(node: "PhysicsNode", full: str) -> tuple[str, ...]:
    """The topics the node ``full`` publishes (none when it left the graph meanwhile)."""
    namespace, name = split_name(full)
    try:
        return tuple(sorted(topic for topic, _ in node.get_publisher_names_and_types_by_node(name, namespace)))
    except Exception:  # noqa: BLE001 - it left the graph between the two questions
        return ()


def await_start_gate(node: "PhysicsNode") -> None:
    """Hold the first step (simulation thread) until every ``start_gate_nodes`` node is ready, at most
    ``start_gate_timeout_s`` of wall time; nothing is published meanwhile. No names: returns at once."""
    names = parse_gate_nodes(node.params.start_gate_nodes)
    if any("{" in name for name in names):
        names = for_each_vehicle(names, fleet_sensors(node))
    if not names:
        return
    gate = StartGate(names, node.params.start_gate_timeout_s, time.monotonic())
    log = node.get_logger()
    shown = ", ".join(names[:12]) + (f", ... ({len(names)} nodes)" if len(names) > 12 else "")
    log.info(f"start gate: the clock waits at 0 for {shown} (at most {gate.timeout_s:g} s)")
    # A node seen ready is not looked at again: a hundred vehicles' nodes cost graph queries each per poll.
    pending = names
    while not node._stop.is_set() and node.context.ok():
        holdups = gate.holdups(graph_views(node, pending), node.params.lockstep, among=pending)
        held = {name for name, _ in holdups}
        pending = tuple(name for name in pending if name in held)
        if not holdups:
            log.info(f"start gate: every node ready after {time.monotonic() - gate.started_at:.1f} s")
            if not node.params.lockstep:  # (lockstep settles the graph next, and re-sends a state nobody answered)
                time.sleep(CONNECT_GRACE_S)
            return
        if gate.expired(time.monotonic()):
            log.warning(gate.timeout_line(holdups))
            return
        time.sleep(POLL_S)
