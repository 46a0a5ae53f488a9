"""A lockstep participant's side: announcing the outputs the physics node waits for
(``/lockstep/participants``), and publishers that enter the graph once their inputs are connected.
The physics node's side is :mod:`aerial_sim.nodes.physics`; the rules are :mod:`aerial_sim.physics.lockstep`."""

from __future__ import annotations

import os
import time

import rclpy.clock
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from aerial_sim.physics.lockstep import END_OF_RUN_FRAME  # noqa: F401 - the nodes' name for it
from aerial_sim.nodes.ros.qos import LATCHED_QOS
from aerial_sim.nodes.ros.raw_publish import raw_sender
from aerial_sim.nodes.ros.shared_subscriptions import SHARED_READERS
from aerial_sim.nodes.ros.swarm_link import SWARM_TRUTH


#: Lockstep participants announce themselves here (std_msgs/String, one entry per message, latched).
LOCKSTEP_PARTICIPANTS_TOPIC = "/lockstep/participants"


#: How the physics node says, once, that the clock has stopped there (``physics: lockstep`` on /diagnostics, OK).
END_OF_RUN_TEXT = "lockstep: the run ended at"
#: The longest an ending node waits for that (wall s) before it exits anyway.
END_OF_RUN_WAIT_S = 10.0


#: What the physics node reads announcements with: every announcement of every node, late joiners included.
LOCKSTEP_ANNOUNCEMENTS_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                                        durability=DurabilityPolicy.TRANSIENT_LOCAL)


def announce_lockstep_participant(node: Node, topic: str, rate_hz: float, first_s: float = 0.0, lag_s: float = 0.0):
    """Tell a lockstep physics node to wait for ``topic`` (relative names resolve in the node's
    namespace): an entry ``TOPIC@RATE_HZ:FIRST_S:LAG_S`` on ``/lockstep/participants``
    (:mod:`aerial_sim.physics.lockstep` says what the fields mean), signed with the launch's key
    where the environment has one. Latched, so a physics node that starts later still hears it. Returns the publisher (keep it alive with the node)."""
    from std_msgs.msg import String  # noqa: PLC0415 - only lockstep nodes need it

    from aerial_sim.physics.lockstep import KEY_VARIABLE, Participant, parse_key, sign_entry  # noqa: PLC0415

    entry = Participant(node.resolve_topic_name(topic), rate_hz, first_s, lag_s).text()
    before = _announcer_gids(node)
    publisher = node.create_publisher(String, LOCKSTEP_PARTICIPANTS_TOPIC, LATCHED_QOS)
    # Signed with the launch's key, where it has one: only nodes of this launch may announce, and the
    # signature covers this publisher's GID, so a node that later takes this one's name cannot replay it.
    key = parse_key(os.environ.get(KEY_VARIABLE))
    gid = b""
    if key is not None:
        new = _announcer_gids(node) - before
        if len(new) == 1:
            gid = new.pop()
        else:
            node.get_logger().error(f"lockstep: the GID of this node's {LOCKSTEP_PARTICIPANTS_TOPIC} publisher is not "
                                    f"in the graph, so the physics node will refuse {entry}")
    publisher.publish(String(data=sign_entry(entry, node.get_fully_qualified_name(), key, gid)))
    node.get_logger().info(f"lockstep participant: {entry}")
    return publisher


def _announcer_gids(node: Node) -> set[bytes]:
    """The GIDs of this node's publishers of the announcements (the graph lists a process's own at once)."""
    name, namespace = node.get_name(), node.get_namespace()
    return {bytes(info.endpoint_gid) for info in node.get_publishers_info_by_topic(LOCKSTEP_PARTICIPANTS_TOPIC)
            if info.node_name == name and info.node_namespace == namespace}


def participant_publisher(node: Node, message_type: type, topic: str, qos: QoSProfile, lockstep: bool,
                          rate_hz: float, first_s: float = 0.0, lag_s: float = 0.0, inputs: tuple[str, ...] = ()):
    """The publisher of a node's lockstep output ``topic``, made from what it reads on ``inputs``: a
    plain publisher when ``lockstep`` is false; otherwise the output is announced at once
    (:func:`announce_lockstep_participant`) and a :class:`ConnectedInputsPublisher` stands in for its publisher."""
    if not lockstep:
        return node.create_publisher(message_type, topic, qos)
    announcement = announce_lockstep_participant(node, topic, rate_hz, first_s, lag_s)
    return ConnectedInputsPublisher(node, message_type, topic, qos, inputs, announcement)


class ConnectedInputsPublisher:
    """A lockstep participant's output publisher that enters the graph only once the node's
    subscription to each of ``inputs`` has matched a publisher (checked on a wall-clock timer,
    since sim time stands still until the first step).

    The physics node takes its first step once it reads every announced output from its publisher
    (:class:`aerial_sim.nodes._physics.lockstep.LockstepOutputs`), but it cannot see whether a participant's
    own inputs are connected. Depth noise reading the camera after the camera's first frames went out
    lost them (issue 11's identical-bags test failed so once in six CI runs). Holding the output back
    until the inputs are matched makes the physics node wait for that as well.
    ``publish`` before then drops the message (nothing flows before the first step anyway).
    """

    CHECK_PERIOD_S = 0.05
    #: After this long without every input, one line (repeated at most every 10 s) names what is missing.
    REPORT_AFTER_S = 5.0

    def __init__(self, node: Node, message_type: type, topic: str, qos: QoSProfile, inputs: tuple[str, ...],
                 announcement):
        self.node, self.message_type, self.topic, self.qos = node, message_type, topic, qos
        self.inputs = {node.resolve_topic_name(name) for name in inputs}
        self.announcement = announcement  # keeps the latched entry alive with the node
        self.publisher = None
        self._send_bytes = None
        self.since = time.monotonic()
        steady = rclpy.clock.Clock(clock_type=rclpy.clock.ClockType.STEADY_TIME)
        self.timer = node.create_timer(self.CHECK_PERIOD_S, self.connect_when_inputs_are, clock=steady)

    def unconnected_inputs(self) -> list[str]:
        connected = {s.topic_name for s in self.node.subscriptions if s.get_publisher_count() > 0}
        return sorted(self.inputs - connected - SWARM_TRUTH.connected_topics(self.node)
                      - SHARED_READERS.connected_topics(self.node))

    def connect_when_inputs_are(self) -> None:
        missing = self.unconnected_inputs()
        if missing:
            if time.monotonic() - self.since >= self.REPORT_AFTER_S:
                self.node.get_logger().info(f"lockstep: {self.topic} waits for a publisher of {', '.join(missing)}",
                                            throttle_duration_sec=10.0)
            return
        self.node.destroy_timer(self.timer)
        self.publisher = self.node.create_publisher(self.message_type, self.topic, self.qos)
        self._send_bytes = raw_sender(self.publisher)

    def publish(self, message) -> None:
        if self.publisher is not None:
            if message.__class__ is bytes:
                self._send_bytes(message)  # a sensor's CDR output, every period: without rclpy's checks
            else:
                self.publisher.publish(message)
