"""Recorder node: subscribe to topics as serialized CDR and write a rosbag2 (MCAP) bag.

A thin adapter around :class:`aerial_sim.recording.bag.BagWriter`:

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
  messages the middleware reports lost on each subscription (``message_lost``);
  both go into ``metadata.yaml`` ``custom_data`` for the report
  (:mod:`aerial_sim.recording.rates`);
- with ``lockstep``, takes part in the lockstep (``~/written``: the newest ``/clock`` stamp
  written, at ``lockstep_rate_hz``; :class:`~aerial_sim.recording.recorder.RecorderParams`). It
  announces itself at once but creates ``~/written`` only once it has recorded every topic it found
  for a whole discovery round and reads every announced participant's topic from its publisher
  (at most ``LOCKSTEP_HOLD_MAX_S``): the physics node does not take its first step before every
  participant's topic has a publisher, so no run's bag starts later than another's (the clock may
  run ``lockstep_slack`` ahead of the recorder, but not before it has started);
- logs progress every ``progress_period_s``; flushes to disk every
  ``bag.flush_period_s``;
- on shutdown (Ctrl-C, SIGTERM, launch stop) closes the bag, writes
  ``metadata.yaml``, then ``recording.txt`` and ``trajectory.png`` in the run folder
  (never ``summary.txt``: that is the mission node's);
- ``~/new_bag`` (std_srvs/Trigger; a warm batch run, doc/batch.md): closes the bag as a shutdown
  does and opens a new one in ``<output_dir>/bag``, with ``output_dir`` as it is now (set it first
  through the node's ``set_parameters``, as ``ros2 param set`` does). The answer comes once the old
  bag is closed and the new one open; the new bag records the same topics, starts with the last
  message of each latched topic (what a new subscriber would get first) and takes its first
  message's time from the graph (``/physics/restart`` sends ``/clock`` back to 0: the recorder then
  reports ``~/written`` from 0 again). An ``output_dir`` that cannot be used, or the current bag's
  own folder, is refused with ``success: false`` and one line; the current bag goes on.
"""

from __future__ import annotations

import importlib
import threading
import time

from rcl_interfaces.srv import GetParameters
from rclpy.clock import Clock, ClockType
from rclpy.event_handler import SubscriptionEventCallbacks, UnsupportedEventTypeError
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Header, String
from std_srvs.srv import Trigger

from aerial_sim.cdr import cdr_header_frame_id, cdr_header_stamp_ns
from aerial_sim.config import ParamsError
from aerial_sim.physics.lockstep import Participant, split_signature
from aerial_sim.recording.bag import WALL_CLOCK_FILE, BagWriter, qos_profile_dict
from aerial_sim.recording.digest import STAMP_FIRST_TYPES
from aerial_sim.recording.msgdefs import UnknownMessageType, message_definition
from aerial_sim.recording.rates import (
    CONFIGURED_KEY,
    LOST_KEY,
    QUERIED_PARAMETERS,
    RATED_TYPES,
    agreed_rate,
    configured_rate_hz,
    encode_table,
    parameter_number,
    parse_rate_table,
    rate_from_table,
)
from aerial_sim.recording.recorder import (LOG_BAG, RecorderParams, WallSpan, has_header, progress_text,
                                           release_point_ns)
from aerial_sim.recording.send_clock import SendClock
from aerial_sim.nodes.ros.clocks import InputStampClock
from aerial_sim.nodes.ros.lockstep import (
    END_OF_RUN_FRAME, LOCKSTEP_ANNOUNCEMENTS_QOS, LOCKSTEP_PARTICIPANTS_TOPIC, announce_lockstep_participant,
)
from aerial_sim.nodes.ros.parameters import declare_params, run_folder_parameter
from aerial_sim.nodes.ros.services import serve
from aerial_sim.nodes.ros.qos import LOCKSTEP_QOS
from aerial_sim.nodes.ros.raw_take import not_called, take_raw_with_info, unspun_reader_node
from aerial_sim.nodes.ros.run import run_node


#: Discovery rounds a publisher's parameter service is waited for before its rates are given up.
PARAMETER_TRIES = 20
#: Lockstep: wall seconds the recorder waits for its discovery to settle before taking part anyway.
LOCKSTEP_HOLD_MAX_S = 10.0
#: Deterministic files: a stamp this far from the receive time (a wall-clock stamp, a zero one) is not a log time.
STAMP_WINDOW_NS = 10_000_000_000
#: At most this many ``~/written`` stamps at once (a clock that jumped ahead is reported by its newest).
MAX_WRITTEN_BURST = 50


def _policy_name(policy) -> str:
    return getattr(policy, "name", str(policy)).lower()


def _node_path(namespace: str, name: str) -> str:
    return namespace.rstrip("/") + "/" + name


class Recorder(Node):
    def __init__(self):
        super().__init__("recorder")
        self.params: RecorderParams = declare_params(self, RecorderParams)
        self.selection = self.params.selection()
        self.expected_rates = parse_rate_table(self.params.expected_rates)
        self._configured: dict[str, float] = {}  # topic -> configured rate (Hz of sim time)
        self._rate_publishers: dict[str, set[str]] = {}  # topic -> publisher nodes not yet resolved
        self._node_parameters: dict[str, dict[str, float | None]] = {}
        self._parameter_clients: dict[str, list] = {}  # node -> [client, rounds left]
        self._parameter_answers: dict[str, dict[str, float | None]] = {}  # node -> parameters answered so far
        self._unnamed_publishers: dict[str, int] = {}  # topic -> rounds left to learn its publishers' names
        self._answered_clients: list = []  # destroyed at the next discovery, outside their own callback
        self._lost: dict[str, int] = {}  # topic -> messages lost while this bag recorded
        self._lost_before: dict[str, int] = {}  # topic -> the middleware's total count when this bag opened
        self.run_dir = run_folder_parameter(self.params.output_dir)
        # Lockstep: deterministic files (module doc), which need the recorded /clock's sim time.
        self.deterministic = self.params.lockstep and self.selection.wants("/clock")
        self.writer = BagWriter(self.run_dir / "bag", self.params.bag, deterministic=self.deterministic)
        # Deterministic files: an unstamped message is logged at the /clock sent before it (module doc),
        # and log lines (wall-clock content) go to a bag of their own.
        self.send_clock = SendClock() if self.deterministic else None
        log_selection = self.params.log_selection() if self.deterministic else None
        self.log_wants = log_selection.wants if log_selection is not None else (lambda topic: False)
        self.log_writer = BagWriter(self.run_dir / LOG_BAG, self.params.bag) if log_selection is not None else None
        self._wall_span = WallSpan()  # wall-clock span of the simulated one (real-time factor)
        # Subscriptions live on a node no executor spins; the taker thread drains them (_take_arrived).
        self._reader = unspun_reader_node(self, "reader")
        self._lock = threading.RLock()  # the bag and the topic table, shared by the taker and the executor
        self._stop_taking = threading.Event()
        self._taker = threading.Thread(target=self._take_loop, name="recorder-take", daemon=True)
        self._recorded: dict[str, object] = {}  # topic -> subscription of self._reader
        self._skipped: set[str] = set()
        self._header_first: dict[str, bool] = {}
        self._stamped: dict[str, bool] = {}  # topic -> its messages begin with a stamp (deterministic files)
        self._topic_types: dict[str, tuple[str, list[dict]]] = {}  # topic -> (type, offered QoS): a new bag's topics
        self._log_topic_types: dict[str, tuple[str, list[dict]]] = {}  # the same for log_bag's
        self._latched: dict[str, tuple[bytes, int, bool] | None] = {}  # latched topic -> its last (data, log ns, stamped)
        self._clock_in_bag = False  # a /clock written into this bag: its held messages may be released
        self._started = time.monotonic()
        self._last_progress = (time.monotonic(), self.writer.info())
        self._stopped_logged = False
        self._log_stopped = False
        self._run_ended_by: str | None = None  # the participant topic that said the run ended (END_OF_RUN_FRAME)
        # Recording /clock anyway: its messages set this node's sim time (receive stamps), instead of
        # a second /clock subscription of rclpy's own (a 250 Hz callback, 0.07-0.09 core here).
        self.sim_clock = InputStampClock(self) if self.selection.wants("/clock") else None
        self.get_logger().info(f"recording to {self.writer.path} ({'all topics' if not self.selection.include else ' '.join(self.selection.include)})")
        self._written_participant: Participant | None = None  # set when it announces itself, in lockstep
        self._written_due_ns = -1
        self._written_pub = None  # created once discovery has settled (module doc)
        self._participant_topics: set[str] = set()
        self._participant_latest: dict[str, int] = {}  # participant topic -> newest stamp recorded (release point)
        self._quiet_rounds = 0
        if self.params.lockstep:
            self._announce_lockstep_participant()
        # Wall-clock timers: discovery and flushing must go on while sim time stands still.
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(self.params.discovery_period_s, self._discover, clock=steady)
        housekeeping_period = min(self.params.bag.flush_period_s, self.params.progress_period_s)
        self.create_timer(housekeeping_period, self._housekeeping, clock=steady)
        serve(self, Trigger, "~/new_bag", self.on_new_bag)
        self._discover()
        self._taker.start()

    # -- discovery --------------------------------------------------------
    def _discover(self) -> None:
        with self._lock:
            self._discover_topics()

    def _discover_topics(self) -> None:
        self._ask_parameters()
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
                message_class = self._message_class(msgtype)
            except (ImportError, AttributeError, ValueError):
                self.get_logger().warning(f"not recording {topic}: no Python interface for {msgtype} installed")
                self._skipped.add(topic)
                continue
            new_topics += 1
            qos, offered = self._matching_qos(publishers, self.params.depth_for(msgtype))
            if self.log_wants(topic):
                self.log_writer.add_topic(topic, msgtype, offered)
                self._log_topic_types[topic] = (msgtype, offered)
            else:
                self.writer.add_topic(topic, msgtype, offered)
                self._topic_types[topic] = (msgtype, offered)
                if qos.durability == DurabilityPolicy.TRANSIENT_LOCAL:
                    self._latched[topic] = None
            self._header_first[topic] = has_header(definition)
            self._stamped[topic] = self._header_first[topic] or definition.msgtype in STAMP_FIRST_TYPES
            self._recorded[topic] = self._subscribe(message_class, topic, qos)
            self.get_logger().info(f"subscribed {topic} [{msgtype}] ({_policy_name(qos.reliability)})")
            if msgtype in RATED_TYPES:
                self._find_configured_rate(topic, publishers)
        self._ask_parameters()
        if self._written_participant is not None and self._written_pub is None:
            self._quiet_rounds = 0 if new_topics else self._quiet_rounds + 1
            self._start_taking_part_when_settled()

    def _subscribe(self, message_class, topic: str, qos: QoSProfile):
        """A raw subscription of the unspun reader (:meth:`_take_arrived` drains it) that also counts
        the messages the middleware reports lost (its event handler is spun with this node)."""
        callbacks = SubscriptionEventCallbacks(message_lost=lambda info: self._on_lost(topic, info))
        try:
            subscription = self._reader.create_subscription(
                message_class, topic, not_called, qos, raw=True, event_callbacks=callbacks
            )
        except UnsupportedEventTypeError:  # a middleware without the event: no transport-loss count
            subscription = self._reader.create_subscription(message_class, topic, not_called, qos, raw=True)
        for handler in subscription.event_handlers:
            self._reader.remove_waitable(handler)
            self.add_waitable(handler)
        return subscription

    def _on_lost(self, topic: str, info) -> None:
        with self._lock:
            self._lost[topic] = int(info.total_count) - self._lost_before.get(topic, 0)  # this bag's
            self.writer.custom_data[LOST_KEY] = encode_table(self._lost)

    # -- configured rates ---------------------------------------------------
    def _find_configured_rate(self, topic: str, publishers) -> None:
        """The rate ``expected_rates`` gives ``topic``, else ask its publishers for their rate parameters."""
        explicit = rate_from_table(topic, self.expected_rates)
        if explicit is not None:
            self._set_configured(topic, explicit)
            return
        nodes = {_node_path(info.node_namespace, info.node_name) for info in publishers}
        nodes.discard(self.get_fully_qualified_name())
        if any(name.endswith("_NODE_NAME_UNKNOWN_") for name in nodes):  # not discovered yet: next round
            tries = self._unnamed_publishers.get(topic, PARAMETER_TRIES) - 1
            if tries > 0:
                self._unnamed_publishers[topic] = tries
            else:
                self._unnamed_publishers.pop(topic, None)  # a publisher outside ROS: no parameters to ask
            return
        self._unnamed_publishers.pop(topic, None)
        if not nodes:
            return
        self._rate_publishers[topic] = nodes
        for node in nodes:
            if node not in self._node_parameters and node not in self._parameter_clients:
                client = self.create_client(GetParameters, f"{node}/get_parameters")
                self._parameter_clients[node] = [client, PARAMETER_TRIES]
        self._resolve_rates()

    def _ask_parameters(self) -> None:
        """(Re)send each publisher's unanswered ``get_parameters`` requests, once per discovery round (never blocks).

        A reply can be lost when the request goes out right after the service is discovered (the
        server's reply writer not matched yet), and a busy node answers late: unanswered requests
        are sent again each round, for ``PARAMETER_TRIES`` rounds.
        """
        while self._answered_clients:
            self.destroy_client(self._answered_clients.pop())
        for topic in list(self._unnamed_publishers):
            self._find_configured_rate(topic, self.get_publishers_info_by_topic(topic))
        for node, entry in list(self._parameter_clients.items()):
            client, tries = entry
            if tries <= 0:  # no parameter service, or never an answer: its streams stay unrated
                self.destroy_client(client)
                del self._parameter_clients[node]
                self._node_parameters[node] = {}
                self._resolve_rates()
                continue
            entry[1] -= 1
            if not client.service_is_ready():
                continue
            answers = self._parameter_answers.setdefault(node, {})
            for name in QUERIED_PARAMETERS:
                if name not in answers:
                    # One name per request: a node answers nothing at all when any name asked is undeclared.
                    future = client.call_async(GetParameters.Request(names=[name]))
                    future.add_done_callback(lambda done, n=node, p=name: self._on_parameter(n, p, done))

    def _on_parameter(self, node: str, name: str, future) -> None:
        """One parameter's answer; once all are in, the node's streams get their rates."""
        if node in self._node_parameters or node not in self._parameter_clients:
            return  # a late answer to a repeated request
        try:
            values = future.result().values  # empty: the node has no such parameter
        except Exception:  # noqa: BLE001 - a node that went away: asked again next round
            return
        answers = self._parameter_answers.setdefault(node, {})
        answers[name] = parameter_number(values[0]) if values else None
        if len(answers) < len(QUERIED_PARAMETERS):
            return
        self._node_parameters[node] = dict(answers)
        self._answered_clients.append(self._parameter_clients.pop(node)[0])
        self._resolve_rates()

    def _resolve_rates(self) -> None:
        for topic, nodes in list(self._rate_publishers.items()):
            if all(node in self._node_parameters for node in nodes):
                del self._rate_publishers[topic]
                rate = agreed_rate(configured_rate_hz(topic, self._node_parameters[node]) for node in nodes)
                if rate is not None:
                    self._set_configured(topic, rate)

    def _set_configured(self, topic: str, rate_hz: float) -> None:
        with self._lock:
            self._configured[topic] = rate_hz
            self.writer.custom_data[CONFIGURED_KEY] = encode_table(self._configured)

    def _matching_qos(self, publishers, depth: int) -> tuple[QoSProfile, list[dict]]:
        offered = []
        best_effort, all_latched = False, True
        for info in publishers:
            profile = info.qos_profile
            reliability = _policy_name(profile.reliability)
            durability = _policy_name(profile.durability)
            best_effort |= reliability == "best_effort"
            all_latched &= durability == "transient_local"
            offered.append(
                qos_profile_dict(reliability, durability, _policy_name(profile.history), profile.depth)
            )
        qos = QoSProfile(
            history=HistoryPolicy.KEEP_LAST,
            depth=depth,
            reliability=ReliabilityPolicy.BEST_EFFORT if best_effort else ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL if all_latched else DurabilityPolicy.VOLATILE,
        )
        return qos, offered

    @staticmethod
    def _message_class(msgtype: str):
        """The Python class of ``pkg/msg/Type`` (rclpy needs it for the type support, even raw)."""
        package, kind, name = msgtype.split("/")
        return getattr(importlib.import_module(f"{package}.{kind}"), name)

    def _take_loop(self) -> None:
        """The taker thread: every ``take_period_s`` (wall), write what has arrived."""
        while not self._stop_taking.wait(self.params.take_period_s):
            try:
                self._take_arrived()
            except Exception as error:  # noqa: BLE001 - one line, and the next round goes on
                self.get_logger().error(f"writing the arrived messages failed: {type(error).__name__}: {error}",
                                        throttle_duration_sec=10.0)

    def _take_arrived(self) -> None:
        """Write what every recorded topic has received since the last call, in the order it arrived
        (the middleware's receive stamps).

        A thread's round every ``take_period_s`` instead of an executor callback per message: at
        five times real time the recorder receives some 9,000 messages a second, and their callbacks
        were a quarter of its CPU (0.38 -> 0.29 core in a lockstep flight); an rclpy timer this often
        costs 80 us a tick. Taken in arrival order, each message gets the same sim-time receive stamp
        as a callback per message gave it."""
        with self._lock:
            arrived = []
            for topic, subscription in self._recorded.items():
                while (taken := take_raw_with_info(subscription)) is not None:
                    data, info = taken
                    arrived.append((info["received_timestamp"], len(arrived), topic, data,
                                    info.get("source_timestamp") or 0))
            arrived.sort()
            for received_ns, _, topic, data, sent_ns in arrived:
                self._write(topic, data, received_ns, sent_ns)
            if self.deterministic and self.sim_clock.active and self._clock_in_bag:
                window_ns = round(self.params.order_window_s * 1e9)
                until_ns = release_point_ns(self.sim_clock.latest_ns, window_ns, self._participant_latest.values())
                if not self.writer.release(until_ns):
                    self._report_stop()

    def _write(self, topic: str, data: bytes, received_ns: int, sent_ns: int = 0) -> None:
        """One message into the bag, stamped with this node's time at its receipt (``received_ns``: wall ns;
        ``sent_ns``: the sender's, for deterministic files, 0 when the middleware gives none)."""
        is_clock = topic == "/clock" and self.sim_clock is not None
        if is_clock:
            clock_ns = cdr_header_stamp_ns(data) or 0  # the stamp leads a Clock's payload
            if clock_ns < self.sim_clock.latest_ns:  # /physics/restart: a new run owes ~/written from 0
                self._written_due_ns = -1
                self._participant_latest.clear()
                self._wall_span = WallSpan()  # and its real-time factor starts with it
            self.sim_clock.advance(clock_ns)
            self._clock_in_bag = True
            if self.send_clock is not None and sent_ns:
                for waiting_ns, (waiting_topic, waiting_data) in self.send_clock.tick(sent_ns, clock_ns):
                    self._hold(waiting_topic, waiting_data, waiting_ns)
        now_ns = self._receipt_time_ns(received_ns)
        if now_ns == 0 and self._header_first[topic]:
            now_ns = cdr_header_stamp_ns(data) or 0
        self._wall_span.observe(now_ns, received_ns)
        if self.log_writer is not None and self.log_wants(topic):
            if not self.log_writer.write(topic, data, now_ns) and self.log_writer.error and not self._log_stopped:
                self._log_stopped = True
                self.get_logger().error(f"{LOG_BAG}: {self.log_writer.error}")
            return
        if self.deterministic:
            stamp_ns = cdr_header_stamp_ns(data) if self._stamped[topic] else None
            if (len(data) < 64 and self._run_ended_by is None and topic in self._participant_topics
                    and cdr_header_frame_id(data) == END_OF_RUN_FRAME):
                self._run_ended_by = topic
            stamped = stamp_ns is not None and abs(stamp_ns - now_ns) <= STAMP_WINDOW_NS
            if stamped:
                log_ns = stamp_ns
                if topic in self._participant_topics and topic != self._written_participant.topic:
                    self._participant_latest[topic] = max(stamp_ns, self._participant_latest.get(topic, stamp_ns))
            elif sent_ns:  # no stamp of its own: the sim time in force when it was sent (maybe known later)
                log_ns = self.send_clock.place(sent_ns, (topic, data))
            else:
                log_ns = now_ns
            if log_ns is not None:
                self._hold(topic, data, log_ns, stamped)
            else:
                log_ns = now_ns  # (for a latched topic's copy below)
            written = True
        else:
            log_ns, stamped = now_ns, False
            written = self.writer.write(topic, data, now_ns)
        if topic in self._latched:
            self._latched[topic] = (data, log_ns, stamped)
        if not written:
            self._report_stop()
        if is_clock and self._written_pub is not None:
            self._report_written(now_ns)  # each /clock in turn: the same stamps on ~/written, whatever the batches

    def _hold(self, topic: str, data: bytes, log_ns: int, stamped: bool = False) -> None:
        """Deterministic files: one message to the writer's held set (module doc)."""
        if not self.writer.hold(topic, data, log_ns, stamped):
            self._report_stop()

    def _receipt_time_ns(self, received_ns: int) -> int:
        """This node's time when a message was received: sim time from the recorded ``/clock``, rclpy's
        own sim time when ``/clock`` is not recorded, wall time (the receive stamp) without sim time."""
        if self.sim_clock is not None and self.sim_clock.active:
            return self.sim_clock.latest_ns
        if self.get_clock().ros_time_is_active:
            return self.get_clock().now().nanoseconds
        return received_ns

    # -- lockstep -------------------------------------------------------------
    def _announce_lockstep_participant(self) -> None:
        """Announce ``~/written`` as a lockstep participant (one line instead where it cannot be one)."""
        if self.sim_clock is None:
            self.get_logger().warning("lockstep: /clock is not recorded, so the recorder cannot report its "
                                      "progress: it does not take part (the clock may outrun it)")
            return
        self._written_participant = Participant(self.resolve_topic_name("~/written"), self.params.lockstep_rate_hz)
        self._holding_since = time.monotonic()
        self.create_subscription(String, LOCKSTEP_PARTICIPANTS_TOPIC, self._on_participant, LOCKSTEP_ANNOUNCEMENTS_QOS)
        self.lockstep_announcement = announce_lockstep_participant(self, "~/written", self.params.lockstep_rate_hz)

    def _on_participant(self, message: String) -> None:
        try:
            self._participant_topics.add(Participant.parse(split_signature(message.data)[0]).topic)
        except ParamsError:
            pass  # the physics node reports a bad entry; nothing to wait for here

    def _start_taking_part_when_settled(self) -> None:
        """Create ``~/written`` (the physics node then takes its first step) once a whole discovery
        round found nothing new to record and every announced participant's topic is recorded from
        its publisher, or after ``LOCKSTEP_HOLD_MAX_S`` (saying what is missing)."""
        own = self._written_participant.topic
        missing = sorted(t for t in self._participant_topics if t != own and self.selection.wants(t)
                         and (t not in self._recorded or self._recorded[t].get_publisher_count() == 0))
        waited = time.monotonic() - self._holding_since
        if (self._quiet_rounds < 1 or missing) and waited < LOCKSTEP_HOLD_MAX_S:
            return
        if missing:
            self.get_logger().warning(f"lockstep: taking part after {waited:.0f} s without reading {', '.join(missing)}")
        self._written_pub = self.create_publisher(Header, "~/written", LOCKSTEP_QOS)
        self.get_logger().info(f"lockstep: recording {len(self._recorded)} topics, every participant's among them: "
                               "taking part")

    def _report_written(self, clock_ns: int) -> None:
        """Stamp ``~/written`` with each due time of the grid that the /clock just written reached.

        The stamps are the grid's, every one in turn (at most ``MAX_WRITTEN_BURST`` at once, after a jump
        of the clock): a ``/clock`` that reached the recorder late (a reliable resend) must not change which
        stamps appear, or two identical runs' bags would differ here (issue 32)."""
        due_ns = self._written_participant.awaited_stamp_ns(clock_ns)
        if due_ns is None or due_ns <= self._written_due_ns:
            return
        period_ns = round(1e9 / self._written_participant.rate_hz)
        first_ns = due_ns if self._written_due_ns < 0 else self._written_due_ns + period_ns
        first_ns = max(first_ns, due_ns - (MAX_WRITTEN_BURST - 1) * period_ns)
        self._written_due_ns = due_ns
        for stamp_ns in range(first_ns, due_ns + 1, period_ns):
            message = Header()
            message.stamp.sec, message.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
            self._written_pub.publish(message)

    def _report_stop(self) -> None:
        """Log, once, why recording stopped (one line: the file, the errno, the messages kept)."""
        if self.writer.error and not self._stopped_logged:
            self._stopped_logged = True
            self.get_logger().error(self.writer.error)

    # -- progress and flushing ----------------------------------------------
    def _housekeeping(self) -> None:
        with self._lock:
            self._flush_and_report()

    def _flush_and_report(self) -> None:
        self.writer.maybe_flush()
        if self.log_writer is not None:
            self.log_writer.maybe_flush()
        self._report_stop()
        now = time.monotonic()
        last_time, last_info = self._last_progress
        if now - last_time >= self.params.progress_period_s:
            info = self.writer.info()
            self.get_logger().info(progress_text(info, now - self._started, last_info, now - last_time))
            self._last_progress = (now, info)

    # -- shutdown -----------------------------------------------------------
    def destroy_node(self):
        self.close()
        for subscription in self._recorded.values():  # their loss handlers live on this node (_subscribe)
            for handler in subscription.event_handlers:
                self.remove_waitable(handler)
                self._reader.add_waitable(handler)
        self._reader.destroy_node()
        return super().destroy_node()

    def finish_work(self) -> None:
        """What the recorder does before its ROS entities go (:func:`aerial_sim.nodes.ros.run.run_nodes`)."""
        self.close()

    def close(self) -> None:
        """Close the bag (final metadata.yaml) and write the run summary and plot."""
        self._stop_taking.set()
        if threading.current_thread() is not self._taker:
            self._taker.join(timeout=5.0)
        with self._lock:
            self._close_bag()

    # -- a new bag in the running graph ------------------------------------------
    def on_new_bag(self, request, response):
        """``~/new_bag``: close this bag and record on into ``<output_dir>/bag`` (module doc)."""
        began = time.monotonic()
        try:
            run_dir = run_folder_parameter(str(self.get_parameter("output_dir").value))
            if (run_dir / "bag").resolve() == self.writer.path.resolve():
                raise ParamsError(f"output_dir {run_dir} holds the current bag: set a new one first")
            with self._lock:
                self._take_arrived()  # the old run's end into the old bag
                writer = BagWriter(run_dir / "bag", self.params.bag, deterministic=self.deterministic)
                log_writer = BagWriter(run_dir / LOG_BAG, self.params.bag) if self.log_writer is not None else None
        except (ParamsError, OSError) as error:
            self.get_logger().warning(f"new bag refused: {error}")
            response.success, response.message = False, str(error)
            return response
        opened = time.monotonic()
        with self._lock:
            self._close_bag()
            closed = time.monotonic()
            writer.custom_data.update(self.writer.custom_data)  # configured rates
            for topic, lost in self._lost.items():  # transport losses count from 0 in each bag
                self._lost_before[topic] = self._lost_before.get(topic, 0) + lost
            self._lost.clear()
            writer.custom_data.pop(LOST_KEY, None)
            self.writer, self.run_dir, self.log_writer = writer, run_dir, log_writer
            for topic, (msgtype, offered) in self._topic_types.items():
                writer.add_topic(topic, msgtype, offered)
            for topic, (msgtype, offered) in self._log_topic_types.items():
                log_writer.add_topic(topic, msgtype, offered)
            self._run_ended_by, self._log_stopped = None, False
            for topic, last in sorted(self._latched.items()):
                if last is not None:  # a new subscriber's first message: the latched one
                    data, log_ns, stamped = last
                    writer.hold(topic, data, log_ns, stamped) if self.deterministic else writer.write(topic, data, log_ns)
            self._wall_span = WallSpan()
            self._clock_in_bag = False  # the run before's time is no release point (a restart sends it back)
            self._stopped_logged = False
            self._started = time.monotonic()
            self._last_progress = (self._started, writer.info())
        self.get_logger().info(f"recording to {writer.path} (new bag: opened in {opened - began:.3f} s, the last closed "
                               f"in {closed - opened:.3f} s, {time.monotonic() - began:.3f} s in all)")
        response.success, response.message = True, str(writer.path)
        return response

    def _close_bag(self) -> None:
        if self.writer.closed:
            return
        self._take_arrived()  # what came since the taker's last round: the end of the run
        if self.send_clock is not None:  # sent after the last /clock: no later one comes
            for log_ns, (topic, data) in self.send_clock.drain():
                self._hold(topic, data, log_ns)
        if self.deterministic and self._run_ended_by is not None:
            # The run ended (a participant said so, and the clock stopped there for good): the bag ends
            # order_window_s before the last /clock. Everything logged up to then was waited for; what
            # came after it, and whether it reached this node before the graph stopped, was timing.
            end_ns = self.sim_clock.latest_ns - round(self.params.order_window_s * 1e9)
            self.writer.release(end_ns)
            dropped = self.writer.discard_held()
            print(f"[recorder] the run ended ({self._run_ended_by}); the bag ends at t = {end_ns * 1e-9:.3f} s, "
                  f"order_window_s before the last /clock: {dropped} messages after it left out", flush=True)
        info = self.writer.close()
        print(f"[recorder] bag closed: {info.path} ({info.message_count} msgs, {info.bytes_written / 1e6:.1f} MB)", flush=True)
        if self.log_writer is not None:
            log_info = self.log_writer.close()
            print(f"[recorder] log bag closed: {log_info.path} ({log_info.message_count} msgs: "
                  f"{', '.join(sorted(log_info.topic_counts)) or 'nothing'})", flush=True)
        if self.writer.late:
            print(f"[recorder] {self.writer.late} messages arrived more than order_window_s "
                  f"({self.params.order_window_s:g} s) of sim time late: they stand where they arrived, so this "
                  "bag's bytes may differ from another run's (its content does not)", flush=True)
        try:  # beside the bag, not in it: a deterministic bag holds nothing wall time chose
            (info.path.parent / WALL_CLOCK_FILE).write_text(
                f"wall_start_ns: {self._wall_span.start_ns}\nwall_end_ns: {self._wall_span.end_ns}\n")
        except OSError as error:
            print(f"[recorder] {WALL_CLOCK_FILE} not written: {error}", flush=True)
        if self.params.write_report and info.message_count:
            try:
                from aerial_sim.recording.summary import write_run_report

                text, plot = write_run_report(info.path, self.run_dir)
                for line in text.read_text().splitlines():
                    if line.startswith(("LOW:", "stream rates:", "messages known missed:")):
                        print(f"[recorder] {line}", flush=True)
                print(f"[recorder] run summary: {text}\n[recorder] trajectory plot: {plot or 'none (no odometry recorded)'}",
                      flush=True)
            except Exception as error:  # the bag is safe; a failed report must not hide that
                print(f"[recorder] run report failed: {error}", flush=True)


def main(args=None):
    return run_node(Recorder, args, background=True)


if __name__ == "__main__":
    raise SystemExit(main())
