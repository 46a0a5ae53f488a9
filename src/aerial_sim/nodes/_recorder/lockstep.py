"""The recorder as a lockstep participant (:class:`RecorderLockstep`): ``~/written``, the newest ``/clock``
stamp written, and the participants whose outputs the bag's release point waits for."""

from __future__ import annotations

import time

from rclpy.node import Node
from std_msgs.msg import Header, String

from aerial_sim.config import ParamsError
from aerial_sim.physics.lockstep import Participant, split_signature
from aerial_sim.recording.recorder import owed_outputs, written_stamps
from aerial_sim.nodes.ros.lockstep import (LOCKSTEP_ANNOUNCEMENTS_QOS, LOCKSTEP_PARTICIPANTS_TOPIC,
                                           announce_lockstep_participant)
from aerial_sim.nodes.ros.qos import LOCKSTEP_QOS

#: Wall seconds the recorder waits for its discovery to settle before taking part anyway.
LOCKSTEP_HOLD_MAX_S = 10.0
#: At most this many ``~/written`` stamps at once (a clock that jumped ahead is reported by its newest).
MAX_WRITTEN_BURST = 50
#: Wall seconds ``~/new_bag`` waits, once a run ended, for every participant's output due at the stopped
#: clock (:meth:`RecorderLockstep.owed`) before it closes the bag anyway, naming what is missing.
NEW_BAG_WAIT_MAX_S = 5.0


class RecorderLockstep:
    """``~/written`` (std_msgs/Header, ``rate_hz`` stamps a simulated second) and the announced participants.

    It announces itself at once (where ``/clock`` is recorded; one line instead where it is not) but creates
    ``~/written`` only once discovery has settled (:meth:`take_part_when_settled`): the physics node does
    not take its first step before every participant's topic has a publisher, so no run's bag starts later
    than another's. It remembers each other participant's newest stamp recorded (:meth:`observe`), up to
    which the deterministic bag may be written (:func:`aerial_sim.recording.recorder.release_point_ns`).
    """

    def __init__(self, node: Node, rate_hz: float, clock_recorded: bool):
        self.node = node
        self.participant: Participant | None = None  # set when it announces itself
        self.topics: set[str] = set()  # every announced participant's topic
        self.participants: dict[str, Participant] = {}  # topic -> its announced entry (its rule)
        self.latest: dict[str, int] = {}  # another participant's topic -> its newest stamp recorded
        self._due_ns = -1
        self._publisher = None  # ~/written, created once discovery has settled
        self._quiet_rounds = 0
        if not clock_recorded:
            node.get_logger().warning("lockstep: /clock is not recorded, so the recorder cannot report its "
                                      "progress: it does not take part (the clock may outrun it)")
            return
        self.participant = Participant(node.resolve_topic_name("~/written"), rate_hz)
        self._holding_since = time.monotonic()
        node.create_subscription(String, LOCKSTEP_PARTICIPANTS_TOPIC, self._on_participant, LOCKSTEP_ANNOUNCEMENTS_QOS)
        self.announcement = announce_lockstep_participant(node, "~/written", rate_hz)

    @property
    def taking_part(self) -> bool:
        return self._publisher is not None

    def _on_participant(self, message: String) -> None:
        try:
            participant = Participant.parse(split_signature(message.data)[0])
            self.topics.add(participant.topic)
            self.participants[participant.topic] = participant
        except ParamsError:
            pass  # the physics node reports a bad entry; nothing to wait for here

    def observe(self, topic: str, stamp_ns: int) -> None:
        """A stamped message of ``topic`` was recorded: another participant's output moves its newest stamp."""
        if topic in self.topics and topic != self.participant.topic:
            self.latest[topic] = max(stamp_ns, self.latest.get(topic, stamp_ns))

    def owed(self, clock_ns: int, ended_by: str | None, recorded) -> list[str]:
        """What the bag still lacks at clock ``clock_ns``: each other participant's output due there
        (:func:`aerial_sim.recording.recorder.owed_outputs`), but for the one that ended the run
        (``ended_by``) and those whose topic is not recorded (``recorded``)."""
        skip = {self.participant.topic, ended_by} | {t for t in self.participants if t not in recorded}
        return owed_outputs(self.participants.values(), self.latest, clock_ns, skip)

    def clock_went_back(self) -> None:
        """``/physics/restart``: a new run owes ``~/written`` from 0, and no participant has output in it yet."""
        self._due_ns = -1
        self.latest.clear()

    def discovery_round(self, new_topics: int, selection, recorded: dict, unheard=()) -> None:
        """After each discovery round while not yet taking part: count quiet rounds, take part once settled
        (``unheard``: the recorded latched topics whose message has not been taken yet)."""
        if self.participant is None or self._publisher is not None:
            return
        self._quiet_rounds = 0 if new_topics else self._quiet_rounds + 1
        self._take_part_when_settled(selection, recorded, unheard)

    def _take_part_when_settled(self, selection, recorded: dict, unheard=()) -> None:
        """Create ``~/written`` (the physics node then takes its first step) once a whole discovery
        round found nothing new to record, every announced participant's topic is recorded from
        its publisher and every recorded latched topic's message is taken, or after
        ``LOCKSTEP_HOLD_MAX_S`` (saying what is missing)."""
        own = self.participant.topic
        missing = sorted(t for t in self.topics if t != own and selection.wants(t)
                         and (t not in recorded or recorded[t].get_publisher_count() == 0))
        # Every recorded topic's subscription matched with every publisher the graph shows for it: a
        # reader that DDS has not matched yet misses what is sent before the match (a loaded machine:
        # the first 16 motor commands of a run, and t = 0 range and lidar messages arriving late).
        missing += sorted(t for t, subscription in recorded.items() if t != own and t not in missing
                          and subscription.get_publisher_count() < self.node.count_publishers(t))
        # A latched topic's message (the scene markers: the start gate holds the clock until they are sent) is
        # logged at 0: taken before the first records are written, it stands there in every run's file.
        missing += sorted(t for t in unheard if t not in missing)
        waited = time.monotonic() - self._holding_since
        if (self._quiet_rounds < 1 or missing) and waited < LOCKSTEP_HOLD_MAX_S:
            return
        if missing:
            self.node.get_logger().warning(f"lockstep: taking part after {waited:.0f} s without reading {', '.join(missing)}")
        self._publisher = self.node.create_publisher(Header, "~/written", LOCKSTEP_QOS)
        self.node.get_logger().info(f"lockstep: recording {len(recorded)} topics, every participant's among them: "
                                    "taking part")

    def report_written(self, clock_ns: int) -> None:
        """Stamp ``~/written`` with each due time of the grid that the /clock just written reached
        (:func:`aerial_sim.recording.recorder.written_stamps`)."""
        stamps, self._due_ns = written_stamps(self.participant, clock_ns, self._due_ns, MAX_WRITTEN_BURST)
        for stamp_ns in stamps:
            message = Header()
            message.stamp.sec, message.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
            self._publisher.publish(message)
