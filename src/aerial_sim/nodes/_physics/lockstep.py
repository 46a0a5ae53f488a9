"""The physics node's side of lockstep: which participants' outputs the clock waits for
(:class:`LockstepOutputs`; the rule is :mod:`aerial_sim.physics.lockstep`'s)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from aerial_sim.cdr import cdr_header_stamp_ns
from aerial_sim.config import ParamsError
from aerial_sim.physics.lockstep import LockstepGate, Participant, parse_participants
from aerial_sim.rosnode.lockstep import LOCKSTEP_ANNOUNCEMENTS_QOS, LOCKSTEP_PARTICIPANTS_TOPIC
from aerial_sim.rosnode.raw_take import not_called, take_raw, unspun_reader_node

if TYPE_CHECKING:  # annotations only: that module imports this one
    from aerial_sim.nodes.physics import PhysicsNode


class LockstepOutputs:
    """Lockstep for the whole graph: the participants' outputs the clock waits for (issue 11;
    the rule is :mod:`aerial_sim.physics.lockstep`'s).

    Participants come from the ``lockstep_participants`` parameter (any node, e.g. a real
    driver that knows nothing of this simulator) and from entries announced on
    ``/lockstep/participants`` (std_msgs/String, latched; every simulated sensor, the camera,
    depth noise and rotor drag announce themselves when their ``lockstep`` is true). Each
    participant's topic is read with a raw subscription (its type from the graph, QoS
    matching its publishers): only the header stamp is decoded from the CDR bytes, so an
    image costs no deserialization. ``rotor_drag/wrench``, which the node reads anyway, is
    observed in its own callback, after the wrench is stored.

    The participants' topics are read by a second node, ``<physics>_lockstep_outputs``, that no
    executor spins: the simulation thread takes whatever has arrived when it looks
    (:meth:`take_arrived`), instead of an executor callback and a wake-up per output (425 a
    simulated second from the four sensors and the recorder).
    """

    #: How often topics not yet in the graph are looked for (wall s).
    CONNECT_PERIOD_S = 0.2
    #: How often the simulation thread looks again while a participant holds the clock (wall s).
    POLL_S = 0.001

    def __init__(self, node: "PhysicsNode"):
        self.node = node
        self.gate = LockstepGate(parse_participants(node.params.lockstep_participants))
        self.subscriptions: dict[str, object] = {v.wrench_topic: v.wrench_subscription for v in node.vehicles}
        self.own_topics = set(self.subscriptions)
        #: Set once the first state has gone out: a participant armed later owes only later stamps.
        self.started = False
        # Not spun by any executor (see the class doc); its own name, not launch's remapped one.
        self.reader = unspun_reader_node(node, "lockstep_outputs")
        self.taken: dict[str, object] = {}  # topic -> subscription of self.reader
        node.create_subscription(String, LOCKSTEP_PARTICIPANTS_TOPIC, self.on_announcement, LOCKSTEP_ANNOUNCEMENTS_QOS)
        node.create_timer(self.CONNECT_PERIOD_S, self.connect_pending)

    def observe(self, topic: str, stamp_ns: int) -> None:
        self.gate.observe(topic, stamp_ns)
        self.node.command_arrived.set()

    def holdups(self, clock_ns: int):
        return self.gate.holdups(clock_ns)

    def all_armed(self) -> bool:
        return all(self.gate.armed(p.topic) for p in self.gate.participants())

    def why_silent(self, topic: str) -> str:
        if self.gate.armed(topic):
            return ""
        return " [no header: unreadable]" if topic in self.subscriptions and self.subscriptions[topic] is None \
            else " [no publisher in the graph yet]"

    def on_announcement(self, message: String) -> None:
        try:
            participant = Participant.parse(message.data)
        except ParamsError as error:
            self.node.get_logger().warning(f"{LOCKSTEP_PARTICIPANTS_TOPIC}: entry refused: {error}",
                                           throttle_duration_sec=2.0)
            return
        if self.gate.add(participant):
            self.node.get_logger().info(f"lockstep: waiting for {participant.text()} from t = {self.node.world.time_s:.3f} s")
        self.connect_pending()

    def connect_pending(self) -> None:
        """Subscribe to every participant whose topic now has a publisher, and arm those whose
        publisher the subscription has matched (executor thread)."""
        participants = self.gate.participants()
        pending = [p.topic for p in participants if p.topic not in self.subscriptions]
        types = dict(self.node.get_topic_names_and_types()) if pending else {}
        for topic in pending:
            publishers = self.node.get_publishers_info_by_topic(topic) if types.get(topic) else []
            if publishers:
                self.subscriptions[topic] = self.subscribe(topic, types[topic][0], publishers)
        for participant in participants:
            subscription = self.subscriptions.get(participant.topic)
            if subscription is not None and not self.gate.armed(participant.topic) and subscription.get_publisher_count():
                self.gate.arm(participant.topic, self.node._clock_ns() if self.started else -1)
                self.node.command_arrived.set()

    def subscribe(self, topic: str, type_name: str, publishers):
        """A raw subscription to ``topic``; reliable when every publisher is (a best-effort
        reader would lose outputs the clock waits for), best effort otherwise (it matches any)."""
        package, _, name = type_name.partition("/msg/")
        try:
            message_type = getattr(importlib.import_module(f"{package}.msg"), name)
        except (ImportError, AttributeError, ValueError):
            self.node.get_logger().error(f"lockstep: {topic} has type {type_name}, which is not installed here: its "
                                         "stamps cannot be read and the clock will wait for it: leave it out")
            return None
        fields = list(message_type.get_fields_and_field_types().items())
        is_header = type_name == "std_msgs/msg/Header"  # its own stamp leads its bytes (the recorder's progress)
        if not is_header and (not fields or fields[0] != ("header", "std_msgs/Header")):
            self.node.get_logger().error(f"lockstep: {topic} ({type_name}) does not start with a std_msgs/Header: "
                                         "its stamps cannot be read and the clock will wait for it: leave it out")
            return None
        reliable = all(p.qos_profile.reliability == ReliabilityPolicy.RELIABLE for p in publishers)
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT)
        if not reliable:
            self.node.get_logger().warning(f"lockstep: {topic} is published best effort: an output lost on the way "
                                           "would hold the clock for good (publish it reliable)")
        self.node.get_logger().info(f"lockstep: reading stamps of {topic} ({type_name})")
        subscription = self.reader.create_subscription(message_type, topic, not_called, qos, raw=True)
        self.taken[topic] = subscription
        return subscription

    def take_arrived(self) -> None:
        """Observe the stamp of every participant output that has arrived (simulation thread)."""
        for topic, subscription in list(self.taken.items()):
            while (cdr := take_raw(subscription)) is not None:
                stamp_ns = cdr_header_stamp_ns(cdr)
                if stamp_ns is None:
                    self.node.get_logger().warning(f"{topic}: {len(cdr)} bytes, too short for a header: dropped",
                                                   throttle_duration_sec=2.0)
                    continue
                self.gate.observe(topic, stamp_ns)
