"""The physics node's start gate: the clock stays at 0 until every node of ``start_gate_nodes`` is ready in
the graph (the rules are :mod:`aerial_sim.physics.start_gate`'s)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from aerial_sim.physics.start_gate import INFRASTRUCTURE_TOPICS, NodeView, StartGate, parse_gate_nodes, split_name
from aerial_sim.nodes.ros.lockstep import LOCKSTEP_PARTICIPANTS_TOPIC

if TYPE_CHECKING:  # annotations only: that module imports this one
    from aerial_sim.nodes.physics import PhysicsNode


#: How often the simulation thread looks at the graph while the gate is closed (wall s).
POLL_S = 0.02


def own_publishers(node: "PhysicsNode") -> dict[str, object]:
    """The physics node's publishers of what the simulated nodes read, by topic."""
    publishers = {}
    for vehicle in node.vehicles:
        for publisher in (vehicle.odom_pub, vehicle.imu_pub, vehicle.rotors_pub, vehicle.wind_pub, vehicle.battery_pub):
            if publisher is not None:
                publishers[publisher.topic_name] = publisher
    return publishers


def graph_views(node: "PhysicsNode", names: tuple[str, ...]) -> dict[str, NodeView]:
    """What the graph shows of each named node (:class:`NodeView`)."""
    present = {f"{namespace.rstrip('/')}/{name}" for name, namespace in node.get_node_names_and_namespaces()}
    inputs: dict[str, tuple[str, ...]] = {}
    for full in names:
        if full not in present:
            continue
        namespace, name = split_name(full)
        try:
            topics = node.get_subscriber_names_and_types_by_node(name, namespace)
        except Exception:  # noqa: BLE001 - it left the graph between the two questions
            continue
        inputs[full] = tuple(sorted(topic for topic, _ in topics if topic not in INFRASTRUCTURE_TOPICS))
    # A topic of ours is connected once its publisher has matched as many readers as the named nodes that read it.
    publishers = own_publishers(node)
    readers: dict[str, int] = {}
    for topics in inputs.values():
        for topic in topics:
            if topic in publishers:
                readers[topic] = readers.get(topic, 0) + 1
    unmatched = {topic for topic, count in readers.items() if publishers[topic].get_subscription_count() < count}
    announcers: dict[str, set[bytes]] = {}
    taken: set[bytes] = set()
    if node.lockstep_outputs is not None:
        for info in node.get_publishers_info_by_topic(LOCKSTEP_PARTICIPANTS_TOPIC):
            full = f"{info.node_namespace.rstrip('/')}/{info.node_name}"
            announcers.setdefault(full, set()).add(bytes(info.endpoint_gid))
        taken = {bytes(entry[0]) for entry in list(node.lockstep_outputs.announcers.values())}
    views = {}
    for full in names:
        if full not in present:
            continue
        topics = inputs.get(full, ())
        gids = announcers.get(full, set())
        views[full] = NodeView(present=True, inputs=topics, unmatched=tuple(t for t in topics if t in unmatched),
                               announcements=len(gids), announcements_taken=len(gids & taken))
    return views


def await_start_gate(node: "PhysicsNode") -> None:
    """Hold the first step (simulation thread) until every ``start_gate_nodes`` node is ready, at most
    ``start_gate_timeout_s`` of wall time; nothing is published meanwhile. No names: returns at once."""
    names = parse_gate_nodes(node.params.start_gate_nodes)
    if not names:
        return
    gate = StartGate(names, node.params.start_gate_timeout_s, time.monotonic())
    log = node.get_logger()
    log.info(f"start gate: the clock waits at 0 for {', '.join(names)} (at most {gate.timeout_s:g} s)")
    while not node._stop.is_set() and node.context.ok():
        holdups = gate.holdups(graph_views(node, names), node.params.lockstep)
        if not holdups:
            log.info(f"start gate: every node ready after {time.monotonic() - gate.started_at:.1f} s")
            return
        if gate.expired(time.monotonic()):
            log.warning(gate.timeout_line(holdups))
            return
        time.sleep(POLL_S)
