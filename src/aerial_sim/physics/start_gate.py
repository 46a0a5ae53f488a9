"""The start gate: the physics clock stays at 0 until every node the launch named is ready (issue 29).

A launch starts its nodes together, but they are not ready together: a camera that loads a city and
warms its renderer up takes seconds of CPU (on a loaded machine its first frame came 6.4 s of sim time
into a real-time flight), and a node container builds its nodes one after the other (in lockstep the
clock once started with none of them announced, so one run's bag lacked the first 100 ms of sensor
output another run's had). The physics node's ``start_gate_nodes`` names the nodes to wait for; the
launch files fill it with the simulated nodes they start, and it is empty (no gate) otherwise: a
physics node launched alone, or next to a real driver, starts at once.

What "ready" means is seen in the ROS graph, the same for every node and for any launcher
(:func:`why_not_ready`, checked in this order):

1. the node is in the graph;
2. it subscribes to at least one topic besides :data:`INFRASTRUCTURE_TOPICS`, or its process reads one
   of the physics node's topics for it (the nodes of a process share one reader of ground truth): every
   simulated node makes its input subscriptions last, once its scene is loaded and its renderer warmed up.
   A node that reads nothing but must publish before the start is named ``NODE>TOPIC``
   (:data:`OUTPUT_MARK`): it is ready once it publishes ``TOPIC`` instead. The scene markers node
   creates its latched ``/scene_markers`` publisher once its scene is loaded and sends its one message
   at once, so a lockstep launch names ``/scene_markers>/scene_markers``: the message is out before the
   clock starts, and the recorder has it before its first records (outside the gate it once came after
   them in one of two identical runs, and that bag's bytes differed: ci13);
3. the physics node's publishers of the topics it (or its process) reads have matched those readers (the
   graph can list a subscription before DDS has connected it, and the first state is sent once);
4. in lockstep, each lockstep announcement it publishes has been taken by the physics node.

After ``timeout_s`` of wall time the clock starts anyway, with one warning naming the nodes still
missing and why (:meth:`StartGate.timeout_line`).

A fleet's launch cannot list its vehicles' nodes (the fleet file or ``vehicles`` decides them), so an
entry may hold :data:`VEHICLE` as a namespace: ``/{vehicle}/imu`` stands for that node of every vehicle
of the physics node's fleet that carries an IMU (:func:`for_each_vehicle`). Without it a lockstep fleet
whose sensor process was held up for 15 s at start (SIGSTOP) began without that process's vehicle, whose
IMU then joined at 0.1 s of sim time (test_swarm_link's determinism test).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from aerial_sim.config import ParamsError
from aerial_sim.vehicles.fleet import SENSORS

#: Topics every rclpy node may read without being set up: not a sign that it is ready.
INFRASTRUCTURE_TOPICS = frozenset({"/clock", "/parameter_events"})

_NAME = re.compile(r"^(/[A-Za-z_][A-Za-z0-9_]*)+$")
#: The namespace that stands for each vehicle of the fleet in an entry (module doc).
VEHICLE = "{vehicle}"
#: ``NODE>TOPIC``: the node is ready once it publishes ``TOPIC`` (module doc, rule 2).
OUTPUT_MARK = ">"
#: Nodes named after a sensor a fleet file says whether each vehicle carries (the fleet's processes
#: serve it only on those vehicles).
FLEET_SENSORS = SENSORS


def parse_gate_nodes(text: str) -> tuple[str, ...]:
    """Fully qualified node names (``/drone1/camera``), or ``NODE>TOPIC`` entries (module doc), separated by
    spaces or commas, each once; an empty text (or ``none``, as launch files write it) is none. A name that is
    not fully qualified is a ParamsError naming it."""
    if text.strip().lower() == "none":
        return ()
    names: list[str] = []
    for entry in re.split(r"[\s,]+", text.strip()):
        if not entry:
            continue
        node, output = split_entry(entry)
        parts = (node,) if output is None else (node, output)
        if not all(_NAME.match(part.replace(f"/{VEHICLE}/", "/vehicle/")) for part in parts):
            raise ParamsError(f"start_gate_nodes: '{entry}' is not a fully qualified node name (e.g. /drone1/camera, "
                              f"or /{VEHICLE}/imu for every vehicle's, or NODE{OUTPUT_MARK}TOPIC for a node ready once "
                              "it publishes TOPIC)")
        if entry not in names:
            names.append(entry)
    return tuple(names)


def for_each_vehicle(names: tuple[str, ...], vehicles) -> tuple[str, ...]:
    """``names`` with each entry that holds :data:`VEHICLE` replaced by one per vehicle, in fleet order:
    ``vehicles`` are (name, sensors carried) pairs, and a node named after one of :data:`FLEET_SENSORS`
    stands only for the vehicles that carry it. Each name once."""
    expanded: list[str] = []
    for entry in names:
        if f"/{VEHICLE}/" not in entry:
            concrete = [entry]
        else:
            node = split_entry(entry)[0].rsplit("/", 1)[1]
            concrete = [entry.replace(f"/{VEHICLE}/", f"/{vehicle}/") for vehicle, sensors in vehicles
                        if node not in FLEET_SENSORS or node in sensors]
        expanded += [name for name in concrete if name not in expanded]
    return tuple(expanded)


def split_entry(entry: str) -> tuple[str, str | None]:
    """``/scene_markers>/scene_markers`` -> (``/scene_markers``, ``/scene_markers``); ``/drone1/imu`` ->
    (``/drone1/imu``, None): the node, and the topic it must publish to be ready (module doc, rule 2)."""
    node, mark, output = entry.partition(OUTPUT_MARK)
    return node, (output if mark else None)


def split_name(name: str) -> tuple[str, str]:
    """``/ns/sub/name`` -> (``/ns/sub``, ``name``); ``/name`` -> (``/``, ``name``)."""
    namespace, _, node = name.rpartition("/")
    return namespace or "/", node


@dataclass(frozen=True)
class NodeView:
    """What the graph shows of one named node."""

    present: bool
    #: Topics it subscribes to, :data:`INFRASTRUCTURE_TOPICS` left out.
    inputs: tuple[str, ...] = ()
    #: Of the physics node's topics it reads, those whose publisher has not matched every named reader yet.
    unmatched: tuple[str, ...] = ()
    #: Its lockstep announcement publishers, and how many of them the physics node has taken an entry from.
    announcements: int = 0
    announcements_taken: int = 0
    #: Topics it publishes (looked up only for a ``NODE>TOPIC`` entry).
    outputs: tuple[str, ...] = ()


def why_not_ready(view: NodeView, lockstep: bool, output: str | None = None) -> str | None:
    """None when ``view`` shows a ready node (module doc), else what it still lacks; ``output``: the topic of
    a ``NODE>TOPIC`` entry, which it must publish instead of reading anything."""
    if not view.present:
        return "not in the graph"
    if output is not None:
        if output not in view.outputs:
            return f"not publishing {output} yet (still setting up)"
    elif not view.inputs:
        return "no input subscriptions yet (still setting up)"
    if view.unmatched:
        return f"not connected to {', '.join(view.unmatched)} yet"
    if lockstep and view.announcements_taken < view.announcements:
        return "its lockstep announcement not taken yet"
    return None


class StartGate:
    """The nodes the clock waits for, and since when (wall s, any monotonic clock)."""

    def __init__(self, nodes: tuple[str, ...], timeout_s: float, started_at: float):
        self.nodes = nodes
        self.timeout_s = timeout_s
        self.started_at = started_at

    def holdups(self, views: Mapping[str, NodeView], lockstep: bool,
                among: tuple[str, ...] | None = None) -> list[tuple[str, str]]:
        """(entry, why) for each named node (of ``among`` only, when given: those not seen ready yet) not ready
        yet, in the order named; one without a view is absent. ``views`` are by entry (``NODE>TOPIC`` too)."""
        found = []
        for name in self.nodes if among is None else among:
            why = why_not_ready(views.get(name, NodeView(present=False)), lockstep, split_entry(name)[1])
            if why is not None:
                found.append((name, why))
        return found

    def expired(self, now: float) -> bool:
        return now - self.started_at >= self.timeout_s

    def timeout_line(self, holdups: list[tuple[str, str]]) -> str:
        missing = "; ".join(f"{name} ({why})" for name, why in holdups)
        return (f"start gate: starting the clock after {self.timeout_s:g} s without {missing}: "
                "its first outputs may be missing")
