"""Recorder node: subscribe to topics as serialized CDR and write a rosbag2 (MCAP) bag.

A thin adapter around :class:`aerial_sim.recording.run_bags.RunBags` (the bag and log bag of a run:
where and at which log time each message goes, a new bag, the close and its report; over
:class:`aerial_sim.recording.bag.BagWriter`). Its parts stand in ``nodes/_recorder``: ``subscriptions``,
``rates`` (configured stream rates) and ``lockstep`` (``~/written``). The node itself holds the
discovery round, the taker thread, the clock and the services:

- discovers topics every ``discovery_period_s`` and subscribes with ``raw=True``
  (no deserialization) to each selected topic once it has a publisher, with
  the publishers' QoS (best effort if any publisher is best effort, else
  reliable; transient-local if every publisher is latched), so sensor streams
  and latched scene markers both match;
- stamps each message with the node's clock at receipt (sim time with
  ``use_sim_time``, as ``ros2 bag record --use-sim-time``); before the first
  ``/clock`` arrives a message's own header stamp is used. With ``lockstep`` it writes
  deterministic files instead (:mod:`aerial_sim.recording.bag`): a stamped message is logged at
  its stamp, one without a stamp at the ``/clock`` sent before it (:mod:`aerial_sim.recording.send_clock`),
  and messages are held for ``order_window_s`` of sim time and written in an order that follows
  from them alone, so two identical lockstep runs give byte-identical bags; the log lines and
  lockstep announcements (``log_topics``: not the simulation's content) go to a second bag,
  ``log_bag``, beside it;
- learns each periodic stream's configured rate from the parameters of the node
  that publishes it (``rate_hz`` ..., asked once per node over its standard
  ``get_parameters`` service; ``expected_rates`` names others) and counts the
  messages the middleware reports lost on each subscription (``message_lost``; not under
  Fast DDS, whose event can deadlock: :mod:`aerial_sim.nodes._recorder.subscriptions`);
  both go into ``metadata.yaml`` ``custom_data`` for the report
  (:mod:`aerial_sim.recording.rates`);
- with ``lockstep``, takes part in the lockstep (``~/written``: the newest ``/clock`` stamp
  written, at ``lockstep_rate_hz``; :class:`~aerial_sim.recording.recorder.RecorderParams`). It
  announces itself at once but creates ``~/written`` only once it has recorded every topic it found
  for a whole discovery round, reads every announced participant's topic from its publisher and has
  taken each latched topic's message (the scene markers, logged at 0), at most ``LOCKSTEP_HOLD_MAX_S``
  (:mod:`aerial_sim.nodes._recorder.lockstep`): the physics node does not take its first step before every
  participant's topic has a publisher, so no run's bag starts later than another's (the clock may
  run ``lockstep_slack`` ahead of the recorder, but not before it has started);
- in a process that also runs the graph's publishers (``aerial_sim launch --compose``), takes the topics
  whose every publisher is a writer of this process that hands its bytes over
  (:mod:`aerial_sim.recording.tap`: the physics node's five streams and the motor commands) from that hand-off instead of DDS, a lockstep bag staying byte for byte the same
  (doc/scale.md, "A tap for the in-process recorder"). Their DDS readers stay, at depth 1 and never taken,
  so the graph's counts and matching are those of a recorder in its own process; a publisher of such a topic
  in another process is not recorded (one warning line);
- logs progress every ``progress_period_s``; flushes to disk every
  ``bag.flush_period_s``;
- on shutdown (Ctrl-C, SIGTERM, launch stop) closes the bag, writes
  ``metadata.yaml``, then ``recording.txt`` and ``trajectory.png`` in the run folder
  (never ``summary.txt``: that is the mission node's);
- ``~/new_bag`` (std_srvs/Trigger; a warm batch run, doc/batch.md): closes the bag as a shutdown
  does and opens a new one in ``<output_dir>/bag``, with ``output_dir`` as it is now (set it first
  through the node's ``set_parameters``, as ``ros2 param set`` does). The answer comes once the old
  bag is closed and the new one open. Once a lockstep run ended, it first waits (at most
  ``NEW_BAG_WAIT_MAX_S``) until every participant's output due at the stopped clock is recorded,
  so a held-up sensor's last outputs go into their run's bag. The new bag records the same topics,
  starts with the last message of each latched topic (what a new subscriber would get first) and takes its first
  message's time from the graph (``/physics/restart`` sends ``/clock`` back to 0: the recorder then
  reports ``~/written`` from 0 again). An ``output_dir`` that cannot be used, or the current bag's
  own folder, is refused with ``success: false`` and one line; the current bag goes on.
"""

from __future__ import annotations

import bisect
import itertools
import math
import threading
import time

from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy
from std_srvs.srv import Trigger

from aerial_sim.cdr.decode import cdr_header_stamp_ns
from aerial_sim.config import ParamsError
from aerial_sim.recording.digest import STAMP_FIRST_TYPES
from aerial_sim.recording.msgdefs import UnknownMessageType, message_definition
from aerial_sim.recording.rates import CONFIGURED_KEY, LOST_KEY, RATED_TYPES, encode_table, parse_rate_table
from aerial_sim.recording.recorder import RecorderParams, has_header
from aerial_sim.recording.run_bags import RunBags
from aerial_sim.recording import tap as taps
from aerial_sim.nodes._recorder.lockstep import NEW_BAG_WAIT_MAX_S, RecorderLockstep
from aerial_sim.nodes._recorder.rates import LOCKSTEP_PARAMETER_TRIES, PARAMETER_TRIES, ConfiguredRates
from aerial_sim.nodes._recorder.subscriptions import (hand_back_loss_handlers, matching_qos, message_class,
                                                      policy_name, subscribe_raw)
from aerial_sim.nodes.ros import process
from aerial_sim.nodes.ros.clocks import InputStampClock
from aerial_sim.nodes.ros.parameters import declare_params, run_folder_parameter
from aerial_sim.nodes.ros.services import serve
from aerial_sim.nodes.ros.raw_take import ArrivalWait, unspun_reader_node
from aerial_sim.nodes.ros.run import run_node


#: The taker's longest sleep on the middleware (wall s): then it looks again for topics discovery added.
IDLE_WAIT_S = 0.1


def _say(line: str) -> None:
    print(line, flush=True)


class Recorder(Node):
    def __init__(self):
        super().__init__("recorder")
        self.params: RecorderParams = declare_params(self, RecorderParams)
        self.selection = self.params.selection()
        self._configured: dict[str, float] = {}  # topic -> configured rate (Hz of sim time)
        self._lost: dict[str, int] = {}  # topic -> messages lost while this bag recorded
        self._lost_before: dict[str, int] = {}  # topic -> the middleware's total count when this bag opened
        self.rates = ConfiguredRates(self, parse_rate_table(self.params.expected_rates), self._set_configured,
                                     LOCKSTEP_PARAMETER_TRIES if self.params.lockstep else PARAMETER_TRIES)
        # Recording /clock anyway: its messages set this node's sim time (receive stamps), instead of
        # a second /clock subscription of rclpy's own (a 250 Hz callback, 0.07-0.09 core here).
        self.sim_clock = InputStampClock(self) if self.selection.wants("/clock") else None
        # Lockstep: deterministic files (module doc), which need the recorded /clock's sim time.
        self.deterministic = self.params.lockstep and self.selection.wants("/clock")
        self.bags = self._open_bags(run_folder_parameter(self.params.output_dir))
        # Subscriptions live on a node no executor spins; the taker thread drains them (_take_arrived).
        self._reader = unspun_reader_node(self, "reader")
        self._lock = threading.RLock()  # the bags and the topic table, shared by the taker and the executor
        self._stop_taking = threading.Event()
        self._taker = threading.Thread(target=self._take_loop, name="recorder-take", daemon=True)
        self._arrivals = ArrivalWait(self.context)  # the taker's wait for messages, woken by close()
        self._recorded: dict[str, object] = {}  # topic -> subscription of self._reader
        #: Taken, received after the last round began: written with the next round's (_take_arrived).
        self._held: list[tuple] = []
        self._taken = itertools.count()  # the order messages were taken in, for equal receive stamps
        #: The same as two lists, ((topic, subscription) pairs, subscriptions), replaced when a topic is added
        #: (the taker's wait looks up the subscriptions' handles once per list).
        self._recorded_items: tuple[list, list] = ([], [])
        #: Topics this process's own writers hand over (aerial_sim.recording.tap), not taken from DDS: their
        #: taps, what was handed over since the last round (arrived tuples, stamped under _tap_lock) and the
        #: tapped topics found with a publisher outside this process (one warning each).
        self._tap_lock = threading.Lock()
        self._tapped: list[tuple] = []
        self._taps: list = []
        self._foreign_writers: set[str] = set()
        self._waiting = False  # the taker is waiting on the middleware
        self._skipped: set[str] = set()
        self.get_logger().info(f"recording to {self.bags.writer.path} ({'all topics' if not self.selection.include else ' '.join(self.selection.include)})")
        self.lockstep = None  # the lockstep side (~/written), with lockstep
        if self.params.lockstep:
            self.lockstep = self.bags.participants = RecorderLockstep(self, self.params.lockstep_rate_hz,
                                                                      self.sim_clock is not None)
        # Wall-clock timers: discovery and flushing must go on while sim time stands still.
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(self.params.discovery_period_s, self._discover, clock=steady)
        housekeeping_period = min(self.params.bag.flush_period_s, self.params.progress_period_s)
        self.create_timer(housekeeping_period, self._housekeeping, clock=steady)
        serve(self, Trigger, "~/new_bag", self.on_new_bag)
        self._discover()
        self._taker.start()

    def _open_bags(self, run_dir) -> RunBags:
        """The bags of a run in ``run_dir`` (:class:`~aerial_sim.recording.run_bags.RunBags`; raises OSError)."""
        return RunBags(self.params, run_dir, self.deterministic, participants=getattr(self, "lockstep", None),
                       log_error=self.get_logger().error, say=_say)

    # -- discovery --------------------------------------------------------
    def _discover(self) -> None:
        with self._lock:
            self._discover_topics()

    def _discover_topics(self) -> None:
        self.rates.ask()
        new_topics = 0
        for topic, types in self.get_topic_names_and_types():
            if topic in self._recorded or topic in self._skipped or not self.selection.wants(topic):
                continue
            publishers = self.get_publishers_info_by_topic(topic)
            if not publishers:
                continue  # QoS unknown until something publishes
            msgtype = types[0]
            try:
                definition = message_definition(msgtype)
            except UnknownMessageType as error:
                self.get_logger().warning(f"not recording {topic}: {error}")
                self._skipped.add(topic)
                continue
            try:
                message_type = message_class(msgtype)
            except (ImportError, AttributeError, ValueError):
                self.get_logger().warning(f"not recording {topic}: no Python interface for {msgtype} installed")
                self._skipped.add(topic)
                continue
            new_topics += 1
            qos, offered = matching_qos(publishers, self.params.depth_for(msgtype))
            header_first = has_header(definition)
            self.bags.add_topic(topic, msgtype, offered, latched=qos.durability == DurabilityPolicy.TRANSIENT_LOCAL,
                                header_first=header_first,
                                stamped=header_first or definition.msgtype in STAMP_FIRST_TYPES)
            tap = taps.find(topic)
            tapped = (tap is not None and tap.sink is None and qos.durability != DurabilityPolicy.TRANSIENT_LOCAL
                      and tap.writers >= len(publishers))
            if tapped:
                # Kept for the graph's counts and matching, never taken: depth 1 (a full history of 1000
                # made each publish cost 19 us instead of 5).
                qos.depth = 1
            self._recorded[topic] = subscribe_raw(self, self._reader, message_type, topic, qos,
                                                  lambda info, t=topic: self._on_lost(t, info))
            if tapped:
                tap.sink = self._on_tapped
                self._taps.append(tap)
            self._recorded_items = ([(t, s) for t, s in self._recorded.items() if not self._is_tapped(t)],
                                    [s for t, s in self._recorded.items() if not self._is_tapped(t)])
            self.get_logger().info(f"subscribed {topic} [{msgtype}] ({policy_name(qos.reliability)})")
            if msgtype in RATED_TYPES:
                self.rates.find(topic, publishers)
        self.rates.ask()
        for tap in self._taps:
            if tap.topic not in self._foreign_writers and self.count_publishers(tap.topic) > tap.writers:
                self._foreign_writers.add(tap.topic)
                self.get_logger().warning(f"not recording {tap.topic} from its publishers outside this process: "
                                          "it is handed over by this process's own (aerial_sim.recording.tap)")
        if self.lockstep is not None:
            unheard = [topic for topic, last in self.bags.latched.items() if last is None]
            self.lockstep.discovery_round(new_topics, self.selection, self._recorded, unheard)

    def _is_tapped(self, topic: str) -> bool:
        return any(tap.topic == topic for tap in self._taps)

    def _on_tapped(self, topic: str, data: bytes) -> None:
        """A tapped writer's message, in its thread before its DDS write: stamped ``time.time_ns()`` (the clock
        of the middleware's stamps) as received and sent, under the lock the round's start is taken under, so a
        round writes exactly what was handed over before it began (:meth:`_take_arrived`)."""
        with self._tap_lock:
            now = time.time_ns()
            self._tapped.append((now, next(self._taken), topic, data, now))
        if self._waiting:  # the taker sleeps on the middleware, which does not see this topic
            self._arrivals.wake()

    def _on_lost(self, topic: str, info) -> None:
        with self._lock:
            self._lost[topic] = int(info.total_count) - self._lost_before.get(topic, 0)  # this bag's
            self._store_lost()

    def _store_lost(self) -> None:
        """The losses in ``custom_data``: a log topic's (``log_topics``: /rosout, the lockstep announcements)
        in the log bag's, beside its messages. A deterministic bag holds nothing that timing chose, and a
        /rosout line lost on a loaded machine had put ``lost_messages`` into one of two identical runs' bags."""
        log_writer = self.bags.log_writer
        for writer, lost in ((self.bags.writer, {t: n for t, n in self._lost.items() if not self.bags.log_wants(t)}),
                             (log_writer, {t: n for t, n in self._lost.items() if self.bags.log_wants(t)})):
            if writer is not None and lost:
                writer.custom_data[LOST_KEY] = encode_table(lost)

    def _set_configured(self, topic: str, rate_hz: float) -> None:
        with self._lock:
            self._configured[topic] = rate_hz
            self.bags.writer.custom_data[CONFIGURED_KEY] = encode_table(self._configured)

    # -- the taker thread ---------------------------------------------------------
    def _take_loop(self) -> None:
        """The taker thread: once something has arrived, take what has, then gather for ``take_period_s``
        (wall) before looking again. It sleeps on the middleware while nothing arrives (:class:`ArrivalWait`:
        no round every ``take_period_s`` of a paused or settling graph). One look at the middleware a round
        (a second look before the take cost a lockstep flight's recorder a tenth of its CPU), and the round
        takes from every topic, not only those the look found holding messages: a topic found empty may
        have received since, and its messages must be written before a /clock received after them
        (test_record_order: taking the looked-at topics only stamped a probe with the next round's clock).
        An empty topic's take costs a few microseconds. While messages flow (the last round took some), the
        round after the gathering takes without that look (a wait-set round over every recorded topic: 15 us
        for 20 topics on the development machine, a lockstep flight's 500-odd rounds); a round that finds
        nothing sends the thread back to sleeping on the middleware."""
        process.name_os_thread()
        flowing = False
        while not self._stop_taking.is_set():
            with self._lock:
                subscriptions = self._recorded_items[1]
            if not flowing and not self._held and not self._tapped:
                self._waiting = True  # a hand-off wakes the wait (_on_tapped)
                arrived = self._tapped or self._arrivals.ready(subscriptions, IDLE_WAIT_S)
                self._waiting = False
                if not arrived:
                    continue  # nothing for IDLE_WAIT_S, a stop, or new topics: look again
            flowing = False
            try:
                flowing = self._take_arrived() > 0
            except Exception as error:  # noqa: BLE001 - one line, and the next round goes on
                self.get_logger().error(f"writing the arrived messages failed: {type(error).__name__}: {error}",
                                        throttle_duration_sec=10.0)
            if self._stop_taking.wait(self.params.take_period_s):
                break

    def _take_arrived(self, everything: bool = False) -> int:
        """Write what every recorded topic has received since the last call, in the order it arrived
        (the middleware's receive stamps), up to when the call began; what arrived since waits for the
        next call (``everything``: nothing waits, the bag is closing). Returns how many messages it took.

        The topics are taken one after the other, so one taken earlier in the call may have received a
        message since, before a message that a topic taken later still finds (under load the taker is
        held up between two takes while messages come in): a /clock that came first was then written
        in the next round, after a probe that came after it, which got the /clock before it (what
        test_record_order saw once beside load). Every message received before the call began is in its
        reader when the call takes, so those are written in their order.

        A thread's round every ``take_period_s`` instead of an executor callback per message: at
        five times real time the recorder receives some 9,000 messages a second, and their callbacks
        were a quarter of its CPU (0.38 -> 0.29 core in a lockstep flight); an rclpy timer this often
        costs 80 us a tick. Taken in arrival order, each message gets the same sim-time receive stamp
        as a callback per message gave it."""
        with self._lock:
            with self._tap_lock:
                began_ns = time.time_ns()  # the middleware's receive stamps are system-clock ns too
                arrived, self._tapped = self._tapped, []
            tapped = len(arrived)
            arrived += self._held
            self._held = []
            held_before = len(arrived) - tapped
            order = self._taken
            for topic, subscription in self._recorded_items[0]:
                # take_raw_with_info's take, without a call and a property per message
                handle, message_type = subscription.handle, subscription.msg_type
                try:
                    with handle:
                        while (taken := handle.take_message(message_type, True)) is not None:
                            data, info = taken
                            arrived.append((info["received_timestamp"], next(order), topic, data,
                                            info.get("source_timestamp") or 0))
                except Exception:  # noqa: BLE001 - destroyed while stopping, or a middleware error: nothing to take
                    pass
            taken = len(arrived) - held_before
            arrived.sort()
            if not everything:
                ready = bisect.bisect_right(arrived, (began_ns, math.inf))
                arrived, self._held = arrived[:ready], arrived[ready:]
            sim_clock = self.sim_clock
            if sim_clock is not None and sim_clock.active:  # _write's own steps, in line for all but /clock
                write = self.bags.write
                for received_ns, _, topic, data, sent_ns in arrived:
                    if topic == "/clock":
                        self._write(topic, data, received_ns, sent_ns)
                    else:
                        write(topic, data, sim_clock.latest_ns, received_ns, sent_ns)
            else:
                for received_ns, _, topic, data, sent_ns in arrived:
                    self._write(topic, data, received_ns, sent_ns)
            if self.deterministic and self.sim_clock.active:
                self.bags.release(self.sim_clock.latest_ns)
            return taken

    def _write(self, topic: str, data: bytes, received_ns: int, sent_ns: int = 0) -> None:
        """One message into the bags, stamped with this node's time at its receipt (``received_ns``: wall ns;
        ``sent_ns``: the sender's, for deterministic files, 0 when the middleware gives none)."""
        is_clock = topic == "/clock" and self.sim_clock is not None
        if is_clock:
            clock_ns = cdr_header_stamp_ns(data) or 0  # the stamp leads a Clock's payload
            if clock_ns < self.sim_clock.latest_ns:  # /physics/restart: a new run owes ~/written from 0
                if self.lockstep is not None:
                    self.lockstep.clock_went_back()
                self.bags.clock_went_back()  # and its real-time factor starts with it
            self.sim_clock.advance(clock_ns)
            self.bags.clock(clock_ns, sent_ns)
        now_ns = self._receipt_time_ns(received_ns)
        self.bags.write(topic, data, now_ns, received_ns, sent_ns)
        if is_clock and self.lockstep is not None and self.lockstep.taking_part:
            self.lockstep.report_written(now_ns)  # each /clock in turn: the same stamps on ~/written, whatever the batches

    def _receipt_time_ns(self, received_ns: int) -> int:
        """This node's time when a message was received: sim time from the recorded ``/clock``, rclpy's
        own sim time when ``/clock`` is not recorded, wall time (the receive stamp) without sim time."""
        if self.sim_clock is not None and self.sim_clock.active:
            return self.sim_clock.latest_ns
        if self.get_clock().ros_time_is_active:
            return self.get_clock().now().nanoseconds
        return received_ns

    # -- progress and flushing ----------------------------------------------
    def _housekeeping(self) -> None:
        with self._lock:
            progress = self.bags.housekeeping()
        if progress is not None:
            self.get_logger().info(progress)

    # -- a new bag in the running graph ------------------------------------------
    def on_new_bag(self, request, response):
        """``~/new_bag``: close this bag and record on into ``<output_dir>/bag`` (module doc)."""
        began = time.monotonic()
        try:
            run_dir = run_folder_parameter(str(self.get_parameter("output_dir").value))
            if (run_dir / "bag").resolve() == self.bags.writer.path.resolve():
                raise ParamsError(f"output_dir {run_dir} holds the current bag: set a new one first")
            self._await_last_outputs()
            with self._lock:
                self._take_arrived(everything=True)  # the old run's end into the old bag
                bags = self._open_bags(run_dir)
        except (ParamsError, OSError) as error:
            self.get_logger().warning(f"new bag refused: {error}")
            response.success, response.message = False, str(error)
            return response
        opened = time.monotonic()
        with self._lock:
            self._close_bags()
            closed = time.monotonic()
            bags.take_over(self.bags)  # configured rates among the rest
            for topic, lost in self._lost.items():  # transport losses count from 0 in each bag
                self._lost_before[topic] = self._lost_before.get(topic, 0) + lost
            self._lost.clear()
            for writer in (bags.writer, bags.log_writer):
                if writer is not None:
                    writer.custom_data.pop(LOST_KEY, None)
            self.bags = bags
        self.get_logger().info(f"recording to {bags.writer.path} (new bag: opened in {opened - began:.3f} s, the last "
                               f"closed in {closed - opened:.3f} s, {time.monotonic() - began:.3f} s in all)")
        response.success, response.message = True, str(bags.writer.path)
        return response

    def _await_last_outputs(self) -> None:
        """Once a lockstep run ended (its clock stopped for good), until every participant's output due at
        the stopped clock is recorded (:meth:`RecorderLockstep.owed`), at most ``NEW_BAG_WAIT_MAX_S``
        (then one line naming what is missing, and the bag closes anyway): a sensor process held up past
        the run's end would otherwise bring its last outputs after the close, into the next run's bag."""
        if self.lockstep is None or not self.lockstep.taking_part or not self.deterministic:
            return
        deadline = time.monotonic() + NEW_BAG_WAIT_MAX_S
        while True:
            with self._lock:
                self._take_arrived()
                ended_by = self.bags.run_ended_by
                owed = [] if ended_by is None else self.lockstep.owed(self.sim_clock.latest_ns, ended_by,
                                                                       self._recorded)
            if not owed:
                return
            if time.monotonic() >= deadline:
                self.get_logger().warning(f"new bag: closing the last run's bag without {', '.join(owed)} "
                                          f"after {NEW_BAG_WAIT_MAX_S:g} s")
                return
            time.sleep(0.01)

    # -- shutdown -----------------------------------------------------------
    def destroy_node(self):
        self.close()
        for tap in self._taps:
            tap.sink = None
        hand_back_loss_handlers(self, self._reader, self._recorded.values())  # they live on this node (subscribe_raw)
        self._reader.destroy_node()
        return super().destroy_node()

    def finish_work(self) -> None:
        """What the recorder does before its ROS entities go (:func:`aerial_sim.nodes.ros.run.run_nodes`)."""
        self.close()

    def close(self) -> None:
        """Close the bag (final metadata.yaml) and write the run summary and plot."""
        self._stop_taking.set()
        self._arrivals.wake()
        if threading.current_thread() is not self._taker:
            self._taker.join(timeout=5.0)
        with self._lock:
            self._close_bags()

    def _close_bags(self) -> None:
        if self.bags.writer.closed:
            return
        self._take_arrived(everything=True)  # what came since the taker's last round: the end of the run
        self.bags.close(self.sim_clock.latest_ns if self.sim_clock is not None else 0)


def main(args=None):
    return run_node(Recorder, args, background=True)


if __name__ == "__main__":
    raise SystemExit(main())
