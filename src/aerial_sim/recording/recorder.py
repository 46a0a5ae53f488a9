"""Pure parts of the recorder: its parameters, topic selection, stamps (its release point and
``~/written``) and progress text.

The ROS adapter is :mod:`aerial_sim.nodes.recorder`; everything here is
testable without ROS.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

from aerial_sim.config import require, require_positive
from aerial_sim.recording.bag import BagInfo, BagWriterParams
from aerial_sim.recording.msgdefs import MessageDefinition

#: With lockstep, the bag of the topics that are not the simulation's content (``log_topics``), beside ``bag``.
LOG_BAG = "log_bag"
#: Topics ``--all`` leaves out unless named explicitly: parameter-change chatter.
DEFAULT_EXCLUDE = "/parameter_events"
#: What a recording of "every topic" leaves out unless asked (``aerial_sim record`` with no topics, and
#: ``record.launch.yaml``'s ``exclude``, which test_record_bag checks against it): derived point clouds
#: and the camera's label images and boxes, which it renders only while subscribed. Recorded, they halved the
#: camera (color 27.2 Hz in a launched flight's bag, 14.6 Hz under ``aerial_sim record``, same machine).
ON_DEMAND_EXCLUDE = (DEFAULT_EXCLUDE + " /*/camera/depth/points /*/camera/instance/image_raw /*/camera/normals/image_raw"
                     " /*/camera/flow/image_raw /*/camera/detections_3d /*/camera/detections_2d")
#: Message types of image size (hundreds of kB), queued less deep.
LARGE_TYPES = frozenset(
    {"sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage", "sensor_msgs/msg/PointCloud2"}
)


#: The longest wait between two rounds of writing what arrived (wall s): a lockstep clock waits for them.
MAX_TAKE_PERIOD_S = 0.1


@dataclass(frozen=True)
class RecorderParams:
    """Recorder configuration (ROS parameters of the ``recorder`` node).

    ``output_dir``: the run folder (bag in ``<output_dir>/bag``, then ``recording.txt``
    and ``trajectory.png``); empty or ``auto`` = the launch's ``runs/<local date-time>``
    (:mod:`aerial_sim.run_folder`).
    ``topics``: names or glob patterns separated by spaces or commas (relative
    names are taken from the root namespace); empty or ``all`` = every topic.
    (``auto``/``all`` exist because launch files cannot pass an empty string.)
    ``exclude``: patterns never recorded. ``queue_depth`` / ``image_queue_depth``:
    subscription history depth for ordinary / image-sized messages (images,
    point clouds), each about 4 s at their usual rates (250 Hz, 30 Hz), so a
    recorder starved of CPU for a moment catches up instead of dropping.
    ``bag.compression``: MCAP chunk compression, ``lz4`` here (the writer's own default
    is ``none``): measured on a recorded default flight, lz4 chunks are 0.32 of the
    plain size for +0.4 ms of CPU per MB, zstd 0.25 for +2.6 ms per MB.
    ``expected_rates``: ``TOPIC=HZ`` pairs (globs allowed, space or comma separated;
    ``none``: no pairs) for periodic streams whose publisher has no rate parameter
    of its own; every other stream's configured rate is asked from its publisher
    (:mod:`aerial_sim.recording.rates`). The report flags streams below it.
    ``order_window_s``: with ``lockstep``, how long (sim s) a message is held before it is
    written in the deterministic order (:mod:`aerial_sim.recording.bag`): longer than the
    lockstep slack plus the longest lag of a participant's output (a lidar sweep is stamped
    at its start, a tenth of a second before it is complete); it costs that much of the
    streams in memory (about 20 MB at 0.3 s with the default camera).
    ``log_topics``: with ``lockstep``, topics whose content is not the simulation's: log lines
    (stamped with the wall clock, their number and wording following the machine's timing) and the
    lockstep announcements (signed with the launch's key and the announcer's publisher GID, both new
    in every launch), written to a second bag, ``<output_dir>/log_bag``, in arrival order, so ``bag``
    holds only what two identical runs repeat; ``none``: every topic in ``bag``. Without
    ``lockstep`` they are in ``bag``.
    ``lockstep``: take part in a lockstep run as a participant: on ``~/written``
    (std_msgs/Header) the recorder stamps, ``lockstep_rate_hz`` times per simulated
    second, the ``/clock`` message it has just written, and the physics node does not
    step past its next due time until that stamp comes. So the recorder is never more
    than one such period (plus the lockstep slack) behind the clock, well within its
    reliable queues: a slow disk or chunk compression slows the run, never drops messages.
    """

    output_dir: str = "auto"
    topics: str = "all"
    exclude: str = DEFAULT_EXCLUDE
    include_hidden: bool = False
    queue_depth: int = 1000
    image_queue_depth: int = 120
    #: How often the graph is polled for new topics (wall s). A lockstep physics node starts its clock once
    #: the graph's counts have held still for its lockstep_settle_s (1.5 s): a topic found later than that
    #: loses its first messages, and one lockstep bag of two then lacks early stamps the other has (seen once
    #: under load with a 1 s period).
    discovery_period_s: float = 0.5
    #: How often what has arrived on the recorded topics is written (wall s): one round of the recorder's
    #: taker thread per batch instead of an executor callback per message. Well within a lockstep run's
    #: slack at any speed this machine reaches (0.1 s of sim time is 20 ms at 5x real time).
    take_period_s: float = 0.004
    progress_period_s: float = 5.0
    write_report: bool = True
    expected_rates: str = "none"
    lockstep: bool = False
    lockstep_rate_hz: float = 50.0
    order_window_s: float = 0.3
    log_topics: str = "/rosout /lockstep/participants"
    #: lz4 chunks by default: a third of the size for about 0.4 ms of CPU per MB (doc/datasets.md, "Bag size").
    bag: BagWriterParams = field(default_factory=lambda: BagWriterParams(compression="lz4"))

    def __post_init__(self) -> None:
        require_positive(self, "discovery_period_s", "take_period_s", "progress_period_s", "lockstep_rate_hz",
                         "order_window_s")
        require(self.queue_depth >= 1 and self.image_queue_depth >= 1, "queue depths must be >= 1")
        require(self.take_period_s <= MAX_TAKE_PERIOD_S,
                f"take_period_s must be at most {MAX_TAKE_PERIOD_S:g} s (the bag and a lockstep run's clock wait for "
                f"each round), got {self.take_period_s!r}")
        from aerial_sim.recording.rates import parse_rate_table

        try:
            parse_rate_table(self.expected_rates)
        except ValueError as error:
            require(False, str(error))

    def depth_for(self, msgtype: str) -> int:
        """Subscription depth for a message type (images and clouds are large: a shorter queue)."""
        return self.image_queue_depth if msgtype in LARGE_TYPES else self.queue_depth

    def log_selection(self) -> "TopicSelection | None":
        """The topics a lockstep recorder writes to ``log_bag`` (None: none)."""
        if not self.lockstep or self.log_topics.strip() in ("", "none"):
            return None
        return TopicSelection(split_patterns(self.log_topics))

    def selection(self) -> "TopicSelection":
        include = () if self.topics.strip() in ("", "all") else split_patterns(self.topics)
        return TopicSelection(include, split_patterns(self.exclude), self.include_hidden)



#: A participant further behind the clock than this many ``order_window_s`` no longer holds the release back.
RELEASE_HOLD_WINDOWS = 4


def release_point_ns(clock_ns: int, window_ns: int, participants_latest_ns) -> int:
    """Deterministic files: up to which log time the held messages may be written, at recorded clock
    ``clock_ns``: ``order_window_s`` behind it, and no further than the newest stamp of any lockstep
    participant's output (``participants_latest_ns``: its newest stamp, per participant topic
    recorded, None before the first). A participant's outputs come from one writer, in stamp order,
    and the clock waited for them: none stamped at or before the point can come later, however late
    the transport brings them (issue 32: messages more than ``order_window_s`` late stood where they
    arrived). One more than ``RELEASE_HOLD_WINDOWS`` windows behind (dropped, or its node gone) holds
    nothing back: the window alone then decides, as for every topic that is not a participant's."""
    point = clock_ns - window_ns
    floor = clock_ns - RELEASE_HOLD_WINDOWS * window_ns
    for latest in participants_latest_ns:
        if latest is not None and floor <= latest < point:
            point = latest
    return point


def written_stamps(participant, clock_ns: int, last_due_ns: int, max_burst: int) -> tuple[range, int]:
    """The stamps a lockstep recorder sends on ``~/written`` once it has written the ``/clock`` of
    ``clock_ns``, and the newest due time reported (``last_due_ns``: the one before, -1 before the first).

    ``participant`` (:class:`aerial_sim.physics.lockstep.Participant`: its ``rate_hz`` and
    ``awaited_stamp_ns``) gives the grid. The stamps are the grid's, every one in turn (at most
    ``max_burst`` at once, after a jump of the clock): a ``/clock`` that reached the recorder late (a
    reliable resend) must not change which stamps appear, or two identical runs' bags would differ
    there (issue 32)."""
    due_ns = participant.awaited_stamp_ns(clock_ns)
    if due_ns is None or due_ns <= last_due_ns:
        return range(0), last_due_ns
    period_ns = round(1e9 / participant.rate_hz)
    first_ns = due_ns if last_due_ns < 0 else last_due_ns + period_ns
    first_ns = max(first_ns, due_ns - (max_burst - 1) * period_ns)
    return range(first_ns, due_ns + 1, period_ns), due_ns


def owed_outputs(participants, latest_ns: dict, clock_ns: int, skip=()) -> list[str]:
    """Lockstep participants whose output due at the stopped clock ``clock_ns`` has not been recorded yet,
    each as ``"TOPIC (due S s, got S s)"`` (or ``got nothing``): the rule the physics node's gate waits by
    (:meth:`aerial_sim.physics.lockstep.Participant.awaited_stamp_ns`), over ``participants`` (Participant
    objects) against ``latest_ns`` (topic -> its newest stamp recorded). ``skip``: topics that owe nothing
    (the recorder's own ``~/written``, the participant that ended the run, one not recorded).

    A warm batch run closes its bag (``~/new_bag``) once none is owed: a sensor process held up past the
    end of a run would otherwise bring its last outputs after the close, into the next run's bag."""
    owed = []
    for participant in sorted(participants, key=lambda p: p.topic):
        if participant.topic in skip:
            continue
        due_ns = participant.awaited_stamp_ns(clock_ns)
        got_ns = latest_ns.get(participant.topic, -1)
        if due_ns is not None and got_ns < due_ns:
            got = f"{got_ns * 1e-9:.3f} s" if got_ns >= 0 else "nothing"
            owed.append(f"{participant.topic} (due {due_ns * 1e-9:.3f} s, got {got})")
    return owed


def split_patterns(text: str) -> tuple[str, ...]:
    """``"/a, b  /c/*"`` -> ``('/a', '/b', '/c/*')``: absolute names, in order, without duplicates."""
    names = []
    for token in re.split(r"[\s,]+", text.strip()):
        if token and (name := "/" + token.lstrip("/")) not in names:
            names.append(name)
    return tuple(names)


@dataclass(frozen=True)
class TopicSelection:
    """Which topics to record: the named ones (glob patterns allowed), or all but the excluded ones."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    include_hidden: bool = False

    def wants(self, topic: str) -> bool:
        if self.include:
            return any(topic == p or fnmatch.fnmatchcase(topic, p) for p in self.include)
        if not self.include_hidden and any(part.startswith("_") for part in topic.split("/")):
            return False
        return not any(topic == p or fnmatch.fnmatchcase(topic, p) for p in self.exclude)


def has_header(definition: MessageDefinition) -> bool:
    """True when the message's first field is a ``std_msgs/Header`` (its stamp leads the CDR payload)."""
    for line in definition.text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            return line.split()[0] in ("std_msgs/Header", "Header", "std_msgs/msg/Header")
    return False


class WallSpan:
    """The wall-clock interval that matches a recording's simulated span, for its real-time factor.

    The run summary's real-time factor is simulated duration (first to last receive stamp) over
    this interval. It starts at the last message received while sim time still stood at its
    first value, and ends at the first message received at the last sim time. So the wait before
    a simulation starts (lockstep settling, a publisher not running yet, while ``/clock`` repeats
    its first stamp) and the messages after it stopped (log lines, latched topics, the final
    flush) count neither as simulated nor as wall time; counting them read a real-time run as
    0.75x (12 s simulated, 16 s of wall clock from the first ``/rosout`` line to the last).
    """

    def __init__(self) -> None:
        self.start_ns = self.end_ns = 0
        self._first_sim_ns: int | None = None
        self._latest_sim_ns = 0

    def observe(self, sim_ns: int, wall_ns: int) -> None:
        """A message received at sim time ``sim_ns`` and wall time ``wall_ns`` (both ns)."""
        if self._first_sim_ns is None:
            self._first_sim_ns = self._latest_sim_ns = sim_ns
            self.start_ns = self.end_ns = wall_ns
        elif sim_ns > self._latest_sim_ns:
            self._latest_sim_ns = sim_ns
            self.end_ns = wall_ns
        elif self._latest_sim_ns == self._first_sim_ns:
            self.start_ns = self.end_ns = wall_ns  # sim time has not moved yet: the run starts later


def progress_text(info: BagInfo, elapsed_s: float, previous: BagInfo | None = None, dt_s: float = 0.0) -> str:
    """One progress report: totals, current throughput, and per-topic counts."""
    megabytes = info.bytes_written / 1e6
    lines = [f"recorded {info.message_count} msgs, {megabytes:.1f} MB in {elapsed_s:.0f} s"]
    if previous is not None and dt_s > 0:
        rate = (info.message_count - previous.message_count) / dt_s
        throughput = (info.bytes_written - previous.bytes_written) / 1e6 / dt_s
        lines[0] += f" ({rate:.0f} msg/s, {throughput:.1f} MB/s)"
    for topic, count in sorted(info.topic_counts.items()):
        lines.append(f"  {topic}: {count}")
    return "\n".join(lines)
