"""A recorder's bags for one run: ``bag`` and, with deterministic files, ``log_bag`` beside it (:class:`RunBags`).

Where each received message goes and at which log time (:meth:`RunBags.write`): a log topic to the log bag
in arrival order; otherwise, in a deterministic (lockstep) recording, a stamped message at its stamp, an
unstamped one at the ``/clock`` sent before it (:mod:`aerial_sim.recording.send_clock`), held until its
release point (:func:`aerial_sim.recording.recorder.release_point_ns`); else at the recorder's time at
its receipt (at its first time, for what came before it had one; :data:`BEFORE_TIME_LIMIT_BYTES`). A latched
topic's first unstamped message (``/scene_markers``) is the state the run starts in:
logged at 0, not at the ``/clock`` in force when its publisher happened to come up (ci of 2026-11-27 saw the
scene markers, then outside the start gate, before ``/clock`` 4 ms in one of two identical runs and after it
in the other; a lockstep launch now gates them, a viewer launched on its own against a running graph does
not). Also the next run's bags in the same graph (:meth:`RunBags.take_over`: the same topics, each
latched topic's last message first) and the close with its report (:meth:`RunBags.close`).

No ROS here: the recorder node (:mod:`aerial_sim.nodes.recorder`) takes the messages and keeps the clock.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from aerial_sim.cdr.decode import cdr_header_frame_id, cdr_header_stamp_ns
from aerial_sim.physics.lockstep import END_OF_RUN_FRAME
from aerial_sim.recording.bag import WALL_CLOCK_FILE, BagWriter
from aerial_sim.recording.recorder import LOG_BAG, RecorderParams, WallSpan, progress_text, release_point_ns
from aerial_sim.recording.send_clock import SendClock

#: Deterministic files: a stamp this far from the receive time (a wall-clock stamp, a zero one) is not a log time.
STAMP_WINDOW_NS = 10_000_000_000
#: Bytes held for the first sim time (a recording started mid-run) before giving up on it: a graph recorded
#: with use_sim_time but no /clock must not fill the memory; past it they are written at time 0, as before.
BEFORE_TIME_LIMIT_BYTES = 16 * 1024 * 1024
#: Lines of the run report repeated in the recorder's output.
REPORT_LINES = ("LOW:", "stream rates:", "messages known missed:")


class RunBags:
    """The bag (and log bag) of one run in ``run_dir``.

    ``participants`` (deterministic files only: the recorder's lockstep side, with ``topics``, ``participant``
    and ``observe(topic, stamp_ns)``) tells which topics are lockstep participants' outputs. ``log_error``
    gets one line when a bag stops (a full disk); ``say`` gets the close's lines (printed: the logger may
    be gone by then). Opening the bags can raise :class:`OSError`.
    """

    def __init__(self, params: RecorderParams, run_dir: Path, deterministic: bool, participants=None,
                 log_error: Callable[[str], None] = print, say: Callable[[str], None] = print):
        self.params = params
        self.run_dir = run_dir
        self.deterministic = deterministic
        self.participants = participants
        self.log_error = log_error
        self.say = say
        self.writer = BagWriter(run_dir / "bag", params.bag, deterministic=deterministic)
        # Deterministic files: an unstamped message is logged at the /clock sent before it (module doc), and
        # log lines (wall-clock content) go to a bag of their own.
        self.send_clock = SendClock() if deterministic else None
        log_selection = params.log_selection() if deterministic else None
        self._log_selection = log_selection
        self._to_log: dict[str, bool] = {}  # topic -> into log_bag (log_selection's answer, kept: once a message)
        self.log_writer = BagWriter(run_dir / LOG_BAG, params.bag) if log_selection is not None else None
        self.wall_span = WallSpan()  # wall-clock span of the simulated one (real-time factor)
        self.header_first: dict[str, bool] = {}
        self.stamped: dict[str, bool] = {}  # topic -> its messages begin with a stamp (deterministic files)
        self.topic_types: dict[str, tuple[str, list[dict]]] = {}  # topic -> (type, offered QoS): a new bag's topics
        self.log_topic_types: dict[str, tuple[str, list[dict]]] = {}  # the same for log_bag's
        self.latched: dict[str, tuple[bytes, int, bool] | None] = {}  # latched topic -> its last (data, log ns, stamped)
        self.clock_in_bag = False  # a /clock written into this bag: its held messages may be released
        self._before_time: list[tuple[str, bytes]] = []  # not deterministic: arrived before the recorder had a time
        self._before_time_bytes = 0  # their size; past BEFORE_TIME_LIMIT_BYTES they are written at 0 after all
        self.run_ended_by: str | None = None  # the participant topic that said the run ended (END_OF_RUN_FRAME)
        self._stopped_logged = False
        self._log_stopped = False
        self.started = time.monotonic()
        self._last_progress = (self.started, self.writer.info())

    def log_wants(self, topic: str) -> bool:
        """Whether ``topic`` goes to ``log_bag`` (``log_topics``; asked once per topic, the patterns are globs)."""
        wanted = self._to_log.get(topic)
        if wanted is None:
            wanted = self._to_log[topic] = self._log_selection is not None and self._log_selection.wants(topic)
        return wanted

    # -- topics ---------------------------------------------------------------
    def add_topic(self, topic: str, msgtype: str, offered: list[dict], latched: bool, header_first: bool,
                  stamped: bool) -> None:
        """A topic now recorded: into the log bag (``log_topics``) or the bag, with its publishers' QoS."""
        if self.log_wants(topic):
            self.log_writer.add_topic(topic, msgtype, offered)
            self.log_topic_types[topic] = (msgtype, offered)
        else:
            self.writer.add_topic(topic, msgtype, offered)
            self.topic_types[topic] = (msgtype, offered)
            if latched:
                self.latched[topic] = None
        self.header_first[topic] = header_first
        self.stamped[topic] = stamped

    # -- messages ---------------------------------------------------------------
    def clock(self, clock_ns: int, sent_ns: int) -> None:
        """A recorded ``/clock`` of ``clock_ns`` (sent at wall ``sent_ns``): what waited for it gets its time."""
        self.clock_in_bag = True
        self._write_before_time(clock_ns)
        if self.send_clock is not None and sent_ns:
            for waiting_ns, (waiting_topic, waiting_data) in self.send_clock.tick(sent_ns, clock_ns):
                self._hold(waiting_topic, waiting_data, waiting_ns)

    def clock_went_back(self) -> None:
        """``/physics/restart`` sent ``/clock`` back: the real-time factor's wall span starts again."""
        self.wall_span = WallSpan()

    def write(self, topic: str, data: bytes, now_ns: int, received_ns: int, sent_ns: int = 0) -> None:
        """One message, received at the recorder's time ``now_ns`` (0: none yet) and wall ``received_ns``
        (``sent_ns``: the sender's wall time, 0 when the middleware gives none)."""
        if now_ns == 0 and self.header_first[topic]:
            now_ns = cdr_header_stamp_ns(data) or 0
        self.wall_span.observe(now_ns, received_ns)
        if self.log_writer is not None and self.log_wants(topic):
            if not self.log_writer.write(topic, data, now_ns) and self.log_writer.error and not self._log_stopped:
                self._log_stopped = True
                self.log_error(f"{LOG_BAG}: {self.log_writer.error}")
            return
        if self.deterministic:
            stamp_ns = cdr_header_stamp_ns(data) if self.stamped[topic] else None
            if (len(data) < 64 and self.run_ended_by is None and topic in self.participants.topics
                    and cdr_header_frame_id(data) == END_OF_RUN_FRAME):
                self.run_ended_by = topic
            stamped = stamp_ns is not None and abs(stamp_ns - now_ns) <= STAMP_WINDOW_NS
            if stamped:
                log_ns = stamp_ns
                self.participants.observe(topic, stamp_ns)
            elif topic in self.latched and self.latched[topic] is None:
                log_ns = 0  # a latched topic's first message: the state the run starts in (module doc)
            elif sent_ns:  # no stamp of its own: the sim time in force when it was sent (maybe known later)
                log_ns = self.send_clock.place(sent_ns, (topic, data))
            else:
                log_ns = now_ns
            if log_ns is not None:
                self._hold(topic, data, log_ns, stamped)
            else:
                log_ns = now_ns  # (for a latched topic's copy below)
            written = True
        elif now_ns == 0 and self._before_time_bytes <= BEFORE_TIME_LIMIT_BYTES:
            # no sim time yet: logged at the first one, not at 0 (aerial_sim record mid-run)
            self._before_time.append((topic, data))
            self._before_time_bytes += len(data)
            if self._before_time_bytes > BEFORE_TIME_LIMIT_BYTES:  # a sim time that never comes: stop holding
                self.say(f"[recorder] no /clock after {len(self._before_time)} messages: logging them at time 0")
                self._write_before_time(0)
            return
        else:
            self._write_before_time(now_ns)
            log_ns, stamped = now_ns, False
            written = self.writer.write(topic, data, now_ns)
        if topic in self.latched:
            self.latched[topic] = (data, log_ns, stamped)
        if not written:
            self.report_stop()

    def _write_before_time(self, log_ns: int) -> None:
        """Not deterministic: the messages that arrived before the recorder had a time (a latched topic's, old
        ``/rosout`` lines: sent before the recorder started, or at sim time 0), logged at ``log_ns``, the first
        time it has. Logged at 0, they made a bag recorded from t = 120 s of a running graph span 0-132 s:
        ``starting_time`` 0, ``recording.txt``'s duration 10 times the wall time, and ``ros2 bag play`` waiting
        120 s after its first messages."""
        waiting, self._before_time = self._before_time, []
        if log_ns:
            self._before_time_bytes = 0
        for topic, data in waiting:
            if not self.writer.write(topic, data, log_ns):
                self.report_stop()
            if topic in self.latched:
                self.latched[topic] = (data, log_ns, False)

    def _hold(self, topic: str, data: bytes, log_ns: int, stamped: bool = False) -> None:
        """Deterministic files: one message to the writer's held set (module doc)."""
        if not self.writer.hold(topic, data, log_ns, stamped):
            self.report_stop()

    def release(self, clock_ns: int) -> None:
        """Deterministic files, at recorded clock ``clock_ns``: write what is held up to its release point."""
        if not self.deterministic or not self.clock_in_bag:
            return
        window_ns = round(self.params.order_window_s * 1e9)
        if not self.writer.release(release_point_ns(clock_ns, window_ns, self.participants.latest.values())):
            self.report_stop()

    def report_stop(self) -> None:
        """Say, once, why recording stopped (one line: the file, the errno, the messages kept)."""
        if self.writer.error and not self._stopped_logged:
            self._stopped_logged = True
            self.log_error(self.writer.error)

    def housekeeping(self) -> str | None:
        """Flush what is due; the progress text every ``progress_period_s`` (None in between)."""
        self.writer.maybe_flush()
        if self.log_writer is not None:
            self.log_writer.maybe_flush()
        self.report_stop()
        now = time.monotonic()
        last_time, last_info = self._last_progress
        if now - last_time < self.params.progress_period_s:
            return None
        info = self.writer.info()
        self._last_progress = (now, info)
        return progress_text(info, now - self.started, last_info, now - last_time)

    # -- the next run's bags --------------------------------------------------------
    def take_over(self, previous: "RunBags") -> None:
        """Record on where ``previous`` (closed now) stopped: its topics, its ``custom_data`` (configured rates),
        the ``/clock`` history, and first each latched topic's last message (what a new subscriber would get
        first)."""
        self.writer.custom_data.update(previous.writer.custom_data)
        self.send_clock = previous.send_clock
        self.header_first, self.stamped = previous.header_first, previous.stamped
        self.topic_types, self.log_topic_types = previous.topic_types, previous.log_topic_types
        self.latched = previous.latched
        for topic, (msgtype, offered) in self.topic_types.items():
            self.writer.add_topic(topic, msgtype, offered)
        for topic, (msgtype, offered) in self.log_topic_types.items():
            self.log_writer.add_topic(topic, msgtype, offered)
        for topic, last in sorted(self.latched.items()):
            if last is not None:  # a new subscriber's first message: the latched one
                data, log_ns, stamped = last
                self.writer.hold(topic, data, log_ns, stamped) if self.deterministic else self.writer.write(topic, data, log_ns)
        self.started = time.monotonic()
        self._last_progress = (self.started, self.writer.info())

    # -- the close ------------------------------------------------------------------
    def close(self, clock_ns: int) -> None:
        """Close the bags (final metadata.yaml) at recorded clock ``clock_ns``, then write the wall-clock span
        beside the bag and the run summary and plot in the run folder."""
        if self.writer.closed:
            return
        self._write_before_time(clock_ns)  # never a time (no /clock came): at the last one known, 0
        if self.send_clock is not None:  # sent after the last /clock: no later one comes
            for log_ns, (topic, data) in self.send_clock.drain():
                self._hold(topic, data, log_ns)
        if self.deterministic and self.run_ended_by is not None:
            # The run ended (a participant said so, and the clock stopped there for good): the bag ends
            # order_window_s before the last /clock. Everything logged up to then was waited for; what
            # came after it, and whether it reached this node before the graph stopped, was timing.
            end_ns = clock_ns - round(self.params.order_window_s * 1e9)
            self.writer.release(end_ns)
            dropped = self.writer.discard_held()
            self.say(f"[recorder] the run ended ({self.run_ended_by}); the bag ends at t = {end_ns * 1e-9:.3f} s, "
                     f"order_window_s before the last /clock: {dropped} messages after it left out")
        info = self.writer.close()
        self.say(f"[recorder] bag closed: {info.path} ({info.message_count} msgs, {info.bytes_written / 1e6:.1f} MB)")
        if self.log_writer is not None:
            log_info = self.log_writer.close()
            self.say(f"[recorder] log bag closed: {log_info.path} ({log_info.message_count} msgs: "
                     f"{', '.join(sorted(log_info.topic_counts)) or 'nothing'})")
        if self.writer.late:
            self.say(f"[recorder] {self.writer.late} messages arrived more than order_window_s "
                     f"({self.params.order_window_s:g} s) of sim time late: they stand where they arrived, so this "
                     "bag's bytes may differ from another run's (its content does not)")
        try:  # beside the bag, not in it: a deterministic bag holds nothing wall time chose
            (info.path.parent / WALL_CLOCK_FILE).write_text(
                f"wall_start_ns: {self.wall_span.start_ns}\nwall_end_ns: {self.wall_span.end_ns}\n")
        except OSError as error:
            self.say(f"[recorder] {WALL_CLOCK_FILE} not written: {error}")
        if self.params.write_report and info.message_count:
            try:
                from aerial_sim.recording.summary import write_run_report

                text, plot = write_run_report(info.path, self.run_dir)
                for line in text.read_text().splitlines():
                    if line.startswith(REPORT_LINES):
                        self.say(f"[recorder] {line}")
                self.say(f"[recorder] run summary: {text}\n[recorder] trajectory plot: "
                         f"{plot or 'none (no odometry recorded)'}")
            except Exception as error:  # the bag is safe; a failed report must not hide that
                self.say(f"[recorder] run report failed: {error}")
