"""The physics node's side of lockstep: which participants' outputs the clock waits for
(:class:`LockstepOutputs`; the rule is :mod:`aerial_sim.physics.lockstep`'s)."""

from __future__ import annotations

import importlib
import math
import os
import time
from typing import TYPE_CHECKING

from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from aerial_sim.cdr.decode import cdr_header_frame_id, cdr_header_stamp_ns
from aerial_sim.config import ParamsError
from aerial_sim.physics.lockstep import (DROPPED_MARKER, KEY_VARIABLE, STAMP_TOLERANCE_NS, Holdup, LockstepGate,
                                         Participant, parse_key, parse_participants, shorten, signature_matches,
                                         split_signature)
from aerial_sim.nodes.ros.lockstep import (END_OF_RUN_FRAME, END_OF_RUN_TEXT, LOCKSTEP_ANNOUNCEMENTS_QOS,
                                           LOCKSTEP_PARTICIPANTS_TOPIC)
from aerial_sim.nodes.ros.raw_take import not_called, unspun_reader_node, waiting_cdr

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

    Announcements cannot freeze the clock (issue 32; the rules are the gate's): an entry belongs to
    the node that announced it (found by the announcement's publisher in the graph) and cannot
    replace another's; it expires when that announcer leaves the graph; once its topic has
    publishers, the announcer's process must be among them (``/clock@250`` from anyone but the
    physics node is refused); and a participant silent for ``lockstep_timeout_s`` is dropped with an
    ERROR (:meth:`drop_overdue`). With the launch's key in its environment (``aerial_sim launch``
    gives one), an entry is taken only when it is signed by the node the graph names as its
    announcer (:func:`aerial_sim.physics.lockstep.signature_matches`): one from outside the launch is
    refused at once, before it can hold the clock at all.

    The end of a run (issue 32): a participant whose node ends the run (the mission) sends its last
    output again with ``frame_id`` :data:`~aerial_sim.nodes.ros.lockstep.END_OF_RUN_FRAME`. From then
    on it holds the clock for good, also once its node has left and past ``lockstep_timeout_s``: the
    clock stops at the same stamp in every run, where that participant's next output would be due,
    instead of running on while the launch stops the graph. When it does, the physics node says so
    once (:meth:`end_reached`), and the ending node, which waits for that, exits.
    """

    #: Graph rounds (CONNECT_PERIOD_S each) an announcer may be missing before its entries expire:
    #: discovery can report a writer a moment after its data arrived.
    ABSENT_ROUNDS = 3
    #: Distinct refused entries logged (each once); past this many, refusals are silent.
    MAX_REFUSALS_LOGGED = 100
    #: Graph rounds an announcement waits for discovery to name its announcer (its signature needs the name).
    UNNAMED_ROUNDS = 25
    #: Announcements kept waiting for their announcer's name at most (a flood is refused beyond it).
    MAX_UNNAMED = 200

    #: How often topics not yet in the graph are looked for (wall s).
    CONNECT_PERIOD_S = 0.2
    #: Rounds in a row :meth:`expire_and_verify` may skip its full look at the graph while the publisher
    #: counts of the announcements and the announced topics stay as they were.
    UNCHANGED_ROUNDS = 4
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
        #: (len(taken), [(topic, handle, its pointer, message type)]): take_arrived's readers, looked up once.
        self._readers: tuple[int, list] = (0, [])
        #: Announced topic -> (announcing publisher's GID, rounds it has been missing from the graph).
        self.announcers: dict[str, list] = {}
        self.refused: set[str] = set()
        #: The launch's key: only entries signed with it by their announcer are taken (None: unsigned ones too).
        self.key = parse_key(os.environ.get(KEY_VARIABLE))
        #: Signed announcements whose announcer discovery has not named yet: [message, info, rounds left].
        self.unnamed: list[list] = []
        #: (topic, stamp ns) of the participant output that ended the run (class doc); None while it runs.
        self.ended_by: tuple[str, int] | None = None
        self.end_reported = False
        #: (publisher counts, announced topics) at the last full look at the graph with every announcer
        #: present, and how many rounds have skipped it since (expire_and_verify).
        self._graph_seen: tuple | None = None
        self._skipped_rounds = 0
        self._clear: tuple[int, float] = (-1, -math.inf)  # (gate version, clear_below_ns) of holdups_from_known
        if self.key is None:
            node.get_logger().info(f"lockstep: no {KEY_VARIABLE} in the environment, so any node on this ROS domain "
                                   "may announce participants (aerial_sim launch gives its nodes one)")
        # Read with the announcer's GID (the message info), taken on the graph timer: the events
        # executor fails ("null argument to internal routine") on a callback that asks for the info.
        self.announcements = self.reader.create_subscription(String, LOCKSTEP_PARTICIPANTS_TOPIC, not_called,
                                                             LOCKSTEP_ANNOUNCEMENTS_QOS)
        node.create_timer(self.CONNECT_PERIOD_S, self.connect_pending)

    def observe(self, topic: str, stamp_ns: int) -> None:
        if self.from_before_restart(stamp_ns):
            return
        self.gate.observe(topic, stamp_ns)
        self.node.command_arrived.set()

    def restart(self) -> None:
        """A new run from clock 0 (``/physics/restart``, simulation thread): outputs still queued from the
        run before are taken and dropped, and every participant owes its stamps from the first again."""
        self.take_arrived()
        self.gate.restart()
        self.ended_by, self.end_reported = None, False

    def from_before_restart(self, stamp_ns: int) -> bool:
        """An output stamped after the clock (by more than the stamps' rounding) was made in the run before
        a ``/physics/restart``: no output of this run can be, it answers a state already published."""
        return stamp_ns > self.node.clock_ns() + STAMP_TOLERANCE_NS

    def holdups(self, clock_ns: int):
        return self.gate.holdups(clock_ns)

    def holdups_of(self, clock_ns: int, topics):
        """:meth:`holdups` of the participants publishing ``topics`` only (none known: none)."""
        return self.gate.holdups(clock_ns, topics) if self.gate.version else []

    def holdups_from_known(self, clock_ns: int):
        """:meth:`holdups`, looked at only from the gate's :meth:`~LockstepGate.clear_below_ns` on (kept
        while the gate is unchanged): most periods need no look at the participants' rules."""
        version = self.gate.version
        if self._clear[0] != version:
            self._clear = (version, self.gate.clear_below_ns())
        return [] if clock_ns < self._clear[1] else self.gate.holdups(clock_ns)

    def all_armed(self) -> bool:
        return all(self.gate.armed(p.topic) for p in self.gate.participants())

    def why_silent(self, topic: str) -> str:
        if self.gate.armed(topic):
            return ""
        return " [no header: unreadable]" if topic in self.subscriptions and self.subscriptions[topic] is None \
            else " [no publisher in the graph yet]"

    def take_announcements(self) -> None:
        """Handle every announcement that has arrived, and those that waited for their announcer's
        name (executor thread)."""
        waiting, self.unnamed = self.unnamed, []
        for message, info, rounds in waiting:
            self.on_announcement(message, info, rounds - 1)
        while True:
            try:
                with self.announcements.handle:
                    taken = self.announcements.handle.take_message(String, False)
            except Exception:  # noqa: BLE001 - destroyed while stopping, or a middleware error
                return
            if taken is None:
                return
            message, info = taken
            self.on_announcement(message, info)

    def on_announcement(self, message: String, info: dict, rounds: int = UNNAMED_ROUNDS) -> None:
        gid = bytes((info or {}).get("publisher_gid", {}).get("data", b""))
        entry, signature = split_signature(message.data)
        try:
            participant = Participant.parse(entry)
            node_name = self.announcer_node(gid)
            owner = self.describe_announcer(node_name, gid)
            if self.key is not None:
                if node_name is None and rounds > 0 and len(self.unnamed) < self.MAX_UNNAMED:
                    self.unnamed.append([message, info, rounds])  # its name comes with discovery
                    return
                if node_name is None or not signature_matches(entry, signature, node_name, self.key, gid):
                    raise ParamsError(f"{shorten(entry)} from {owner} is not signed with this launch's "
                                      f"{KEY_VARIABLE} by its publisher: only nodes of this launch may announce, "
                                      "each its own entries")
            changed = self.gate.add(participant, owner)
        except ParamsError as error:  # EntryRefused among them
            text = str(error)
            if text not in self.refused and len(self.refused) < self.MAX_REFUSALS_LOGGED:
                self.refused.add(text)  # each refusal once: a repeated (or flooded) entry is not a log flood
                self.node.get_logger().warning(f"{LOCKSTEP_PARTICIPANTS_TOPIC}: entry refused: {text}")
            return
        self.announcers[participant.topic] = [gid, 0]
        if changed:
            self.node.get_logger().info(f"lockstep: waiting for {participant.text()} (announced by {owner}) from "
                                        f"t = {self.node.world.time_s:.3f} s")

    def announcer_node(self, gid: bytes) -> str | None:
        """The announcing node's ``/namespace/name`` from the graph (None while discovery has not named it)."""
        for info in self.node.get_publishers_info_by_topic(LOCKSTEP_PARTICIPANTS_TOPIC):
            if bytes(info.endpoint_gid) == gid and not info.node_name.endswith("_NODE_NAME_UNKNOWN_"):
                return f"{info.node_namespace.rstrip('/')}/{info.node_name}"
        return None

    @staticmethod
    def describe_announcer(node_name: str | None, gid: bytes) -> str:
        """``/namespace/name (process <GUID prefix>)``, the owner of the entries it announced."""
        return f"{node_name or 'an unnamed node'} (process {gid[:12].hex()})"

    def expire_and_verify(self) -> None:
        """Drop the entries whose announcer has left the graph, and those whose topic is published
        but not by the announcer's process (executor thread).

        The full look (every publisher's GID and node, Python objects for each) cost 0.009 CPU s per
        simulated second of the smoke flight; while the publisher counts of the announcements and of
        every announced topic are what they were at the last full look, and every announcer was
        there, it is skipped, though never more than :data:`UNCHANGED_ROUNDS` rounds in a row (a
        publisher that leaves as another joins keeps the counts: seen within a second)."""
        if not self.announcers:
            return
        topics = tuple(sorted(self.announcers))
        counts = (self.node.count_publishers(LOCKSTEP_PARTICIPANTS_TOPIC),
                  *(self.node.count_publishers(topic) for topic in topics))
        if self._graph_seen == (counts, topics) and self._skipped_rounds < self.UNCHANGED_ROUNDS:
            self._skipped_rounds += 1
            return
        self._graph_seen, self._skipped_rounds = None, 0
        alive = {bytes(i.endpoint_gid) for i in self.node.get_publishers_info_by_topic(LOCKSTEP_PARTICIPANTS_TOPIC)}
        for topic, entry in list(self.announcers.items()):
            if self.ended_by is not None and topic == self.ended_by[0]:
                continue  # it ended the run: it holds the clock for good (class doc)
            gid = entry[0]
            entry[1] = 0 if gid in alive else entry[1] + 1
            if entry[1] >= self.ABSENT_ROUNDS:
                self.forget(topic, f"lockstep: no longer waiting for {topic}: {self.gate.owner(topic)}, which "
                                   "announced it, has left the graph", error=False)
                continue
            publishers = self.node.get_publishers_info_by_topic(topic)
            if publishers and gid[:12] not in {bytes(i.endpoint_gid)[:12] for i in publishers}:
                names = ", ".join(sorted({f"{i.node_namespace.rstrip('/')}/{i.node_name}" for i in publishers}))
                self.forget(topic, f"lockstep: entry {topic} refused: {self.gate.owner(topic)} announced it but "
                                   f"does not publish it (its publishers: {shorten(names)})", error=True)
        if tuple(sorted(self.announcers)) == topics and all(entry[1] == 0 for entry in self.announcers.values()):
            self._graph_seen = (counts, topics)  # all there and verified: the next rounds may skip the look

    def forget(self, topic: str, why: str, error: bool) -> None:
        self.announcers.pop(topic, None)
        if self.gate.remove(topic) is None:
            pass
        elif error:  # (rclpy wants one severity per call site)
            self.node.get_logger().error(why)
        else:
            self.node.get_logger().warning(why)
        self.node.command_arrived.set()

    def drop_overdue(self, clock_ns: int, also_held=()) -> list[Holdup]:
        """Drop every participant that has held the clock (at ``clock_ns``, or ``also_held``) for
        ``lockstep_timeout_s`` of wall time without a new output: one ERROR line (starting
        :data:`DROPPED_MARKER`) and an ERROR on ``/diagnostics`` each; the clock goes on without them
        (simulation thread)."""
        timeout_s = self.node.params.lockstep_timeout_s
        overdue = [holdup for holdup in self.gate.overdue(clock_ns, time.monotonic(), timeout_s, tuple(also_held))
                   if self.ended_by is None or holdup.participant.topic != self.ended_by[0]]
        for holdup in overdue:
            topic = holdup.participant.topic
            why = (f"{DROPPED_MARKER}: {topic} held the clock at t = {self.node.world.time_s:.3f} s for "
                   f"{timeout_s:g} s of wall time without a new output ({holdup.describe()}"
                   f"{self.why_silent(topic)}): the clock goes on without it, and this run is no longer "
                   "repeatable")
            self.announcers.pop(topic, None)
            self.gate.remove(topic)
            self.node.get_logger().error(why)
            self.node.report_lockstep_drop(why)
        return overdue

    def connect_pending(self) -> None:
        """Subscribe to every participant whose topic now has a publisher, and arm those whose
        publisher the subscription has matched (executor thread)."""
        self.take_announcements()
        self.expire_and_verify()
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
                self.gate.arm(participant.topic, self.node.clock_ns() if self.started else -1)
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

    def take_arrived(self, ready: set[int] | None = None) -> None:
        """Observe the stamp of every participant output that has arrived (simulation thread); ``ready``:
        only these subscriptions (``handle.pointer``) hold messages (None: try every one)."""
        if self._readers[0] != len(self.taken):  # a topic was added (they are never replaced nor removed)
            self._readers = (len(self.taken), [(topic, s.handle, s.handle.pointer, s.msg_type)
                                               for topic, s in list(self.taken.items())])
        for topic, handle, pointer, message_type in self._readers[1]:
            if ready is not None and pointer not in ready:
                continue
            for cdr in waiting_cdr(handle, message_type):
                stamp_ns = cdr_header_stamp_ns(cdr)
                if stamp_ns is None:
                    self.node.get_logger().warning(f"{topic}: {len(cdr)} bytes, too short for a header: dropped",
                                                   throttle_duration_sec=2.0)
                    continue
                if self.from_before_restart(stamp_ns):
                    continue
                if len(cdr) < 64 and self.ended_by is None and cdr_header_frame_id(cdr) == END_OF_RUN_FRAME:
                    self.ended_by = (topic, stamp_ns)
                self.gate.observe(topic, stamp_ns)

    def end_reached(self, holdups) -> str | None:
        """Once, when the participant that ended the run is what holds the clock: the line saying so."""
        if self.ended_by is None or self.end_reported:
            return None
        topic, stamp_ns = self.ended_by
        if not any(holdup.participant.topic == topic for holdup in holdups):
            return None
        self.end_reported = True
        return (f"{END_OF_RUN_TEXT} t = {self.node.world.time_s:.3f} s: {topic} ended it at "
                f"{stamp_ns * 1e-9:.3f} s")
