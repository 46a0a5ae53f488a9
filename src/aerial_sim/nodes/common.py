"""Shared plumbing for the thin ROS 2 adapters in ``aerial_sim.nodes``.

Only nodes import this module (it imports rclpy). It gives every node the same
QoS choices, the same way to turn a params dataclass into declared ROS
parameters, the same stamp conversions and the same ``main()`` behaviour: a bad
parameter is one clear log line and exit code 2, Ctrl-C (once or many times) is a
quiet exit 0 (:mod:`aerial_sim.nodes._process`), and a message or request that
makes a callback raise is dropped with a warning instead of ending the node
(:class:`InputGuard`).

One process may also serve many vehicles (:class:`FleetHosting`): given a fleet
(``fleet``, ``vehicles`` or ``namespaces`` parameter), ``run_node`` builds one node
per vehicle, each in its own namespace, and spins them all in one executor.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

import rclpy
import rclpy.clock
import rclpy.executors
import rclpy.logging
import rclpy.task
from builtin_interfaces.msg import Time
from rclpy.exceptions import NameValidationException
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.signals import SignalHandlerOptions
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)

from aerial_sim import cdr
from aerial_sim.config import ParamsError, flatten_params, params_from_mapping, unflatten
from aerial_sim.nodes import _process
from aerial_sim.nodes._swarm_link import SWARM_COMMANDS, SWARM_TRUTH

RCLError = _rclpy.RCLError

T = TypeVar("T")

#: Commands and services: every message matters (REP-2003 style reliable QoS).
COMMAND_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
#: Latched data (scene markers, static descriptions): late joiners get the last message.
LATCHED_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
#: Streams in lockstep mode: reliable with room for a burst, so no sample is lost
#: and runs repeat bit for bit.
LOCKSTEP_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=200, reliability=ReliabilityPolicy.RELIABLE)


def stream_qos(lockstep: bool = False) -> QoSProfile:
    """QoS for sensor and ground-truth streams: sensor-data (best effort) unless lockstep."""
    return LOCKSTEP_QOS if lockstep else qos_profile_sensor_data


#: Lockstep participants announce themselves here (std_msgs/String, one entry per message, latched).
LOCKSTEP_PARTICIPANTS_TOPIC = "/lockstep/participants"
#: What the physics node reads announcements with: every announcement of every node, late joiners included.
LOCKSTEP_ANNOUNCEMENTS_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                                        durability=DurabilityPolicy.TRANSIENT_LOCAL)


def announce_lockstep_participant(node: Node, topic: str, rate_hz: float, first_s: float = 0.0, lag_s: float = 0.0):
    """Tell a lockstep physics node to wait for ``topic`` (relative names resolve in the node's
    namespace): an entry ``TOPIC@RATE_HZ:FIRST_S:LAG_S`` on ``/lockstep/participants``
    (:mod:`aerial_sim.physics.lockstep` says what the fields mean). Latched, so a physics node
    that starts later still hears it. Returns the publisher (keep it alive with the node)."""
    from std_msgs.msg import String  # noqa: PLC0415 - only lockstep nodes need it

    from aerial_sim.physics.lockstep import Participant  # noqa: PLC0415

    entry = Participant(node.resolve_topic_name(topic), rate_hz, first_s, lag_s).text()
    publisher = node.create_publisher(String, LOCKSTEP_PARTICIPANTS_TOPIC, LATCHED_QOS)
    publisher.publish(String(data=entry))
    node.get_logger().info(f"lockstep participant: {entry}")
    return publisher


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
    (:class:`aerial_sim.nodes.physics.LockstepOutputs`), but it cannot see whether a participant's
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
        self.since = time.monotonic()
        steady = rclpy.clock.Clock(clock_type=rclpy.clock.ClockType.STEADY_TIME)
        self.timer = node.create_timer(self.CHECK_PERIOD_S, self.connect_when_inputs_are, clock=steady)

    def unconnected_inputs(self) -> list[str]:
        connected = {s.topic_name for s in self.node.subscriptions if s.get_publisher_count() > 0}
        return sorted(self.inputs - connected - SWARM_TRUTH.connected_topics(self.node))

    def connect_when_inputs_are(self) -> None:
        missing = self.unconnected_inputs()
        if missing:
            if time.monotonic() - self.since >= self.REPORT_AFTER_S:
                self.node.get_logger().info(f"lockstep: {self.topic} waits for a publisher of {', '.join(missing)}",
                                            throttle_duration_sec=10.0)
            return
        self.node.destroy_timer(self.timer)
        self.publisher = self.node.create_publisher(self.message_type, self.topic, self.qos)

    def publish(self, message) -> None:
        if self.publisher is not None:
            self.publisher.publish(message)


class ThrottledWarning:
    """A warning logged at most once per ``period_s`` of wall time, for conditions checked on every
    message. The time is checked before the text is built or rclpy's logger is called: rclpy's own
    ``throttle_duration_sec`` looks up the caller's frame and source file on every call, suppressed
    or not (about 70 us; half of an 80-vehicle flight-controller process's CPU once its odometry
    arrived slowly)."""

    def __init__(self, node: Node, period_s: float):
        self._logger = node.get_logger()
        self._period_s = period_s
        self._next_s = -math.inf

    def __call__(self, text: Callable[[], str]) -> None:
        """Log ``text()`` unless a warning went out less than ``period_s`` ago."""
        now = time.monotonic()
        if now >= self._next_s:
            self._next_s = now + self._period_s
            self._logger.warning(text())


def unspun_reader_node(node: Node, suffix: str) -> Node:
    """A second node in ``node``'s process, ``<name>_<suffix>`` in its namespace, that no executor
    spins: what its subscriptions receive waits in their queues until the owner takes it
    (:func:`take_raw`), with no callback and no wake-up per message. Subscribe it to resolved
    (absolute) names: it has none of the process's remappings."""
    return Node(f"{node.get_name()}_{suffix}", namespace=node.get_namespace(), context=node.context,
                use_global_arguments=False, start_parameter_services=False, enable_rosout=False)


def take_raw(subscription) -> bytes | None:
    """The next message's CDR bytes from a raw subscription of an :func:`unspun_reader_node`, or None
    when none is waiting."""
    taken = take_raw_with_info(subscription)
    return None if taken is None else taken[0]


def take_raw_with_info(subscription) -> tuple[bytes, dict] | None:
    """:func:`take_raw` with the middleware's message info (``received_timestamp``: wall ns, ...)."""
    try:
        with subscription.handle:
            return subscription.handle.take_message(subscription.msg_type, True)
    except Exception:  # noqa: BLE001 - destroyed while stopping, or a middleware error: nothing to take
        return None


def not_called(_message) -> None:
    """The callback of a subscription no executor spins (:func:`unspun_reader_node`)."""


def subscribe_decoded(node: Node, message_type: type, decode: Callable[[bytes], Any], topic: str,
                      callback: Callable[[Any], None], qos: QoSProfile, clock: "InputStampClock | None" = None):
    """A raw (CDR bytes) subscription whose ``callback`` gets ``decode(bytes)``: the few fields a node
    reads, without rclpy building the message object (:mod:`aerial_sim.cdr`; a quarter of a 250 Hz
    subscriber's CPU). Bytes ``decode`` refuses raise ``ValueError`` out of the callback, which the
    node's :class:`InputGuard` reports (topic, type, reason) and drops, as any bad message. With
    ``clock``, each message's stamp sets the node's sim time first (:class:`InputStampClock`)."""
    decode = _decoded_once(decode)
    if clock is None:
        def on_bytes(data: bytes) -> None:
            callback(decode(data))
    else:
        def on_bytes(data: bytes) -> None:
            fields = decode(data)
            clock.advance(fields.stamp_sec * 1_000_000_000 + fields.stamp_nanosec)
            callback(fields)
    return node.create_subscription(message_type, topic, on_bytes, qos, raw=True)


class LastDecoded:
    """``decode`` that remembers its last bytes and fields: a message read by several nodes of one
    process (the barometer, magnetometer and GPS of a vehicle each get their own copy of its
    odometry) is decoded once. Equal bytes are the same message, whoever reads it."""

    def __init__(self, decode: Callable[[bytes], Any]):
        self.decode = decode
        self.last: tuple[bytes | None, Any] = (None, None)

    def __call__(self, data: bytes) -> Any:
        last_data, fields = self.last
        if data != last_data:
            fields = self.decode(data)  # a ValueError leaves the memory as it was
            self.last = (data, fields)
        return fields


_DECODED_ONCE: dict[Callable[[bytes], Any], LastDecoded] = {}


def _decoded_once(decode: Callable[[bytes], Any]) -> LastDecoded:
    """The process's one :class:`LastDecoded` for ``decode`` (executor callbacks run one at a time)."""
    if decode not in _DECODED_ONCE:
        _DECODED_ONCE[decode] = LastDecoded(decode)
    return _DECODED_ONCE[decode]


def subscribe_odometry(node: Node, topic: str, callback: Callable[[cdr.OdometryFields], None], qos: QoSProfile,
                       clock: "InputStampClock | None" = None):
    """Subscribe to nav_msgs/Odometry; ``callback`` gets :class:`aerial_sim.cdr.OdometryFields`."""
    from nav_msgs.msg import Odometry  # noqa: PLC0415 - not every node reads odometry

    if SWARM_TRUTH.route(node, topic, callback, clock):
        return SWARM_TRUTH.subscription  # a fleet process's row of /swarm/state (swarm_link)
    return subscribe_decoded(node, Odometry, cdr.decode_odometry, topic, callback, qos, clock)


def subscribe_imu(node: Node, topic: str, callback: Callable[[cdr.ImuFields], None], qos: QoSProfile,
                  clock: "InputStampClock | None" = None):
    """Subscribe to sensor_msgs/Imu; ``callback`` gets :class:`aerial_sim.cdr.ImuFields`."""
    from sensor_msgs.msg import Imu  # noqa: PLC0415

    if SWARM_TRUTH.route(node, topic, callback, clock):
        return SWARM_TRUTH.subscription
    return subscribe_decoded(node, Imu, cdr.decode_imu, topic, callback, qos, clock)


def motor_command_output(node: Node, topic: str) -> Callable[[Sequence[float]], None]:
    """``send(controls)``: a vehicle's motor commands as ``std_msgs/Float64MultiArray`` on ``topic``
    (reliable), or its row of the fleet's ``/swarm/motor_commands`` (:mod:`aerial_sim.nodes._swarm_link`)."""
    send = SWARM_COMMANDS.output(node, topic)
    if send is not None:
        return send
    from std_msgs.msg import Float64MultiArray  # noqa: PLC0415

    publisher = node.create_publisher(Float64MultiArray, topic, COMMAND_QOS)

    def publish(controls: Sequence[float]) -> None:
        publisher.publish(cdr.encode_float64_array(controls))  # CDR: a sixth of the typed message's cost
    return publish


def subscribe_joint_state(node: Node, topic: str, callback: Callable[[cdr.JointStateFields], None], qos: QoSProfile):
    """Subscribe to sensor_msgs/JointState; ``callback`` gets :class:`aerial_sim.cdr.JointStateFields`."""
    from sensor_msgs.msg import JointState  # noqa: PLC0415

    return subscribe_decoded(node, JointState, cdr.decode_joint_state, topic, callback, qos)


def stamp_from_fields(fields) -> Time:
    """``builtin_interfaces/Time`` of decoded fields (:mod:`aerial_sim.cdr`), to stamp an output with."""
    return Time(sec=fields.stamp_sec, nanosec=fields.stamp_nanosec)


def to_stamp(seconds: float) -> Time:
    """Simulation time in seconds -> ``builtin_interfaces/Time``."""
    nanoseconds = to_stamp_ns(seconds)
    return Time(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def diagonal_covariance(variance: float) -> tuple[float, ...]:
    """A row-major 3x3 covariance with ``variance`` on its diagonal (sensor_msgs' ``*_covariance``)."""
    return (variance, 0.0, 0.0, 0.0, variance, 0.0, 0.0, 0.0, variance)


def to_stamp_ns(seconds: float) -> int:
    """Simulation time in seconds -> the stamp in whole nanoseconds (what :func:`to_stamp` holds)."""
    return int(round(seconds * 1e9))


def from_stamp(stamp: Time) -> float:
    """``builtin_interfaces/Time`` -> seconds."""
    return stamp.sec + stamp.nanosec * 1e-9


def frame_in_namespace(node: Node, frame: str) -> str:
    """Prefix a relative frame name with the node's namespace: ``imu_link`` -> ``drone1/imu_link``.

    Frames that already contain a ``/`` or are world frames (``map``, ``odom``,
    ``earth``) are returned unchanged.
    """
    if "/" in frame or frame in ("map", "odom", "earth", "world"):
        return frame.lstrip("/")
    namespace = node.get_namespace().strip("/")
    return f"{namespace}/{frame}" if namespace else frame


def declare_params(node: Node, cls: type[T], prefix: str = "", defaults: T | None = None) -> T:
    """Declare every field of params dataclass ``cls`` as a ROS parameter and build ``cls``.

    Defaults come from the dataclass, or from ``defaults`` (an instance of
    ``cls``, e.g. a datasheet preset loaded from YAML) when given; values given
    with ``--params-file`` or ``-p`` override them. Nested dataclasses become
    dotted names (``home.latitude``). Validation is the dataclass's own, so a
    bad value is a :class:`ParamsError` naming the parameter.
    """
    defaults = flatten_params(defaults if defaults is not None else cls())
    values: dict[str, Any] = {}
    for name, default in defaults.items():
        full_name = f"{prefix}{name}"
        if dataclasses.is_dataclass(default) or _is_tuple_of_dataclasses(default):
            continue
        descriptor = ParameterDescriptor(dynamic_typing=True)
        ros_default = list(default) if isinstance(default, tuple) else default
        node.declare_parameter(full_name, ros_default, descriptor)
        value = node.get_parameter(full_name).value
        values[name] = list(value) if isinstance(value, (tuple, list)) or _is_array(value) else value
    try:
        return params_from_mapping(cls, unflatten(values), where=prefix.rstrip("."))
    except ParamsError as error:
        # The FATAL line already names the node; the message names the parameter alone, so nodes that
        # share a bad launch argument (seed:=-1 reaches every sensor) report it in the same words.
        message = str(error)
        if message.startswith(f"{cls.__name__}: "):
            message = message[len(cls.__name__) + 2:]
        raise ParamsError(message) from None


@dataclass(frozen=True)
class FleetHosting:
    """How an executable serves every vehicle of a fleet in one process (:func:`run_node`).

    The process reads three parameters of its own before building any vehicle's node:

    - ``fleet``: a fleet file (config/fleets/<name>.yaml or a path; ``none`` or '' = none), or
    - ``vehicles``: N > 0 vehicles ``drone1 .. droneN`` (the grid of the physics node), or
    - ``namespaces``: an explicit list of vehicle names.

    With none of them the executable is the plain single-vehicle node, unchanged. With one,
    it builds one node per vehicle (of a fleet file: per vehicle that carries ``sensor``),
    named as the process's node (launch's ``name``) in namespace ``<process ns>/<vehicle>``,
    with every other parameter the process was given (``use_sim_time`` included), plus:

    - ``seed`` (when ``seeded``): vehicle i of the fleet (0-based) gets ``seed + i * SEED_STRIDE``:
      noise differs between vehicles, repeats run to run, and the first vehicle's equals a
      single-vehicle run's;
    - ``type_parameter`` (e.g. the controller's ``vehicle``): the fleet entry's vehicle type;
    - ``vehicle_overrides.<vehicle>.<name>``: ``<name>`` for that vehicle only.

    ``shard: [i, k]`` splits the fleet over k processes: this one serves vehicles i, i + k,
    i + 2k, ... (0-based fleet order), so a large fleet's nodes need not share one core.

    ``swarm_link: true`` (with ``fleet`` or ``vehicles``): the nodes read their vehicle's ground
    truth from the physics node's one ``/swarm/state`` message instead of each vehicle's
    ``ground_truth/odom`` and ``ground_truth/imu``, and flight controllers send their commands in
    one ``/swarm/motor_commands`` message (:mod:`aerial_sim.nodes._swarm_link`).

    The nodes share one ``/clock`` subscription (one per process instead of one per vehicle).
    """

    #: The node's name in code (launch's ``name`` replaces it, as for a single node).
    name: str
    #: Fleet files list each vehicle's sensors: only vehicles carrying this one get a node.
    sensor: str | None = None
    seeded: bool = False
    type_parameter: str | None = None

    #: Parameters of the hosting process itself (not passed on to the vehicles' nodes).
    SELECTION = ("fleet", "vehicles", "namespaces", "shard", "swarm_link")
    OVERRIDE_PREFIX = "vehicle_overrides."
    SEED_STRIDE = 1_000_000


def run_node(node_factory: Callable[..., Node], args: list[str] | None = None,
             hosting: FleetHosting | None = None, background: bool = False) -> int:
    """Standard ``main()`` for every node: init, build, spin, and stop quietly.

    Exit status: 0 when stopped by SIGINT/SIGTERM (however often they arrive,
    also while starting) or when the node finishes; 2 for a configuration error
    (a :class:`ParamsError`, a bad ROS argument or name, a file that cannot be
    written), printed as one ``[FATAL]`` line without traceback; otherwise the
    node's ``exit_code`` (a node that sets it and shuts its context down ends
    with that failure). A node with a ``done`` attribute stops when it is true.
    See :mod:`aerial_sim.nodes._process` for the signal rules. With ``hosting``
    the process may serve a whole fleet, one node per vehicle (:class:`FleetHosting`);
    ``node_factory`` then takes rclpy ``Node`` keyword arguments. ``background``: the node's
    outputs are off the control loop's critical path (:func:`yield_cpu_in_lockstep`).
    """
    default_name = hosting.name if hosting is not None else getattr(node_factory, "__name__", "node")
    if hosting is None:
        def build(nodes: list[Node]) -> None:
            nodes.append(node_factory())
    else:
        def build(nodes: list[Node]) -> None:
            build_fleet_nodes(node_factory, hosting, nodes)
    return run_nodes(build, default_name, args, background)


def run_nodes(build: Callable[[list[Node]], None], default_name: str, args: list[str] | None = None,
              background: bool = False) -> int:
    """:func:`run_node` for any set of nodes: ``build`` appends the process's nodes to the list it is
    given (after ``rclpy.init``); they spin in one executor and stop together."""
    _process.start_node_process()
    use_transport_profile()
    name = node_name_from_args(args if args is not None else sys.argv, default_name)
    nodes: list[Node] = []
    code = 0
    try:
        _process.set_phase("starting")
        rclpy.init(args=args if args is not None else sys.argv, signal_handler_options=SignalHandlerOptions.NO)
        build(nodes)
        if len(nodes) == 1:
            name = nodes[0].get_name()  # else the process's own name (launch's ``name``)
        if background:
            yield_cpu_in_lockstep(nodes)
        _process.set_phase("running")
        _spin_until_stopped(nodes)
        code = next((int(c) for c in (getattr(n, "exit_code", 0) for n in nodes) if c), 0)
    except _process.StopRequested:
        code = 0
    except ParamsError as error:
        code = _fatal(getattr(error, "node_name", name), f"invalid parameter: {error}")
    except Exception as error:  # noqa: BLE001
        code = _failure_code(name, nodes[0] if nodes else None, error)
    finally:
        _process.set_phase("stopping")
        for node in reversed(nodes):
            _stop_node(node)
        _shutdown()
    if _process.is_node_executable():
        _process.exit_now(code)
    return code


def node_name_from_args(args: list[str], default: str) -> str:
    """The node name a start-up error is reported under: ``-r __node:=NAME`` (as launchers pass it), else
    the executable's module name (``aerial_sim.nodes.gps`` -> ``gps``), else ``default``.

    A node whose constructor fails has no name to ask for; this is the one it would have had.
    """
    name = None
    for argument in args:
        if argument.startswith("__node:=") or argument.startswith("__name:="):
            name = argument.split(":=", 1)[1] or name
    if name:
        return name
    module = getattr(sys.modules.get("__main__"), "__spec__", None)
    module_name = getattr(module, "name", "") or ""
    if module_name.startswith("aerial_sim.nodes."):
        return module_name.rsplit(".", 1)[1]
    return default


def build_fleet_nodes(node_factory: Callable[..., Node], hosting: FleetHosting, nodes: list[Node]) -> None:
    """Append to ``nodes`` the node(s) this process serves (see :class:`FleetHosting`).

    A probe node (named and namespaced as launch asked, so it receives exactly the
    parameters meant for this process) reads the fleet selection; it stays as the
    process's only node when no vehicle needs one (it then idles instead of ending the launch).
    The probe is never destroyed while the process starts: destroying a node right after
    creating it, while DDS discovery runs, segfaulted in rclpy's ``destroy_node`` (seen twice
    in full-suite runs, an IMU and a barometer). It has no parameter services and no rosout,
    so it answers nothing in the name of the node(s) built after it; it is destroyed with them.
    Its clock follows the first node's ``/clock`` subscription (:func:`share_clock`): an idle
    probe reading ``/clock`` on its own cost a sensor process a third of its callbacks.
    """
    probe = _parameter_probe(hosting.name)
    nodes.append(probe)
    served: list[Node] = []
    try:
        add_hosted_nodes(node_factory, hosting, probe.get_parameters_by_prefix(""), probe.get_name(),
                         probe.get_namespace(), served, single=node_factory)
    finally:
        nodes[:0] = served  # before the probe: the first served node's /clock drives the others
    share_clock(nodes)


def _parameter_probe(name: str) -> Node:
    """An idle node that receives the process's parameters (see :func:`build_fleet_nodes`)."""
    return Node(name, allow_undeclared_parameters=True, automatically_declare_parameters_from_overrides=True,
                start_parameter_services=False, enable_rosout=False)


def add_hosted_nodes(node_factory: Callable[..., Node], hosting: FleetHosting, given: dict[str, Parameter],
                     node_name: str, namespace: str, nodes: list[Node], single: Callable[[], Node]) -> None:
    """Append to ``nodes`` the nodes ``hosting`` serves with parameters ``given``: ``single()`` when
    they select no fleet, else one node per vehicle (:class:`FleetHosting`), named ``node_name`` in
    ``<namespace>/<vehicle>``. A fleet that needs none of them is one log line and no node."""
    from aerial_sim.vehicles.fleet import FleetSelection, FleetVehicle

    value = {name: parameter.value for name, parameter in given.items()}
    count = value.get("vehicles", 0)
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise ParamsError(f"vehicles must be an integer >= 0, got {count!r}")
    fleet_file = FleetSelection(fleet=str(value.get("fleet") or ""), vehicles=count).fleet_file
    listed = [str(n) for n in value.get("namespaces") or () if str(n)]
    if not fleet_file and count == 0 and not listed:
        nodes.append(single())  # the single-vehicle node, exactly as without hosting
        return
    if fleet_file or count:
        vehicle_type = str(value.get(hosting.type_parameter, "quad_x")) if hosting.type_parameter else "quad_x"
        fleet = FleetSelection(fleet=fleet_file, vehicles=count, vehicle_type=vehicle_type).load()
    else:
        fleet = tuple(FleetVehicle(name=n) for n in listed)  # ParamsError for a name that is no ROS name
    typed = bool(fleet_file or count) and hosting.type_parameter is not None
    shard, shards = _shard(value.get("shard", [0, 1]))
    served = [(i, v) for i, v in enumerate(fleet) if i % shards == shard
              and (hosting.sensor is None or not fleet_file or hosting.sensor in v.sensors)]
    if not served:
        carrying = f" carrying a {hosting.sensor}" if hosting.sensor and fleet_file else ""
        in_shard = f" in shard {shard} of {shards}" if shards > 1 else ""
        rclpy.logging.get_logger(node_name).info(f"no vehicle{carrying}{in_shard}: nothing to serve")
        return
    parent = namespace.rstrip("/")
    if _swarm_link_asked(value, bool(fleet_file or count)):
        names = [v.name for v in fleet]
        SWARM_TRUTH.serve(names, parent, stream_qos(value.get("lockstep") is True))
        SWARM_COMMANDS.serve(names, parent, COMMAND_QOS)
    common = [p for n, p in given.items() if n not in FleetHosting.SELECTION and not n.startswith(FleetHosting.OVERRIDE_PREFIX)]
    first = len(nodes)
    for index, vehicle in served:
        overrides = list(common)
        if hosting.seeded:
            base = value.get("seed", 0)
            if not isinstance(base, int) or isinstance(base, bool):
                raise ParamsError(f"seed must be an integer >= 0, got {base!r}")
            overrides.append(Parameter("seed", value=base + index * FleetHosting.SEED_STRIDE))
        if typed:
            overrides.append(Parameter(hosting.type_parameter, value=vehicle.type))
        prefix = f"{FleetHosting.OVERRIDE_PREFIX}{vehicle.name}."
        overrides += [Parameter(n[len(prefix):], value=p.value) for n, p in given.items() if n.startswith(prefix)]
        cli = ["--ros-args", "-r", f"__node:={node_name}", "-r", f"__ns:={parent}/{vehicle.name}"]
        nodes.append(node_factory(cli_args=cli, use_global_arguments=False, parameter_overrides=overrides))
    mine = nodes[first:]
    mine[0].get_logger().info(
        f"serving {len(mine)} vehicles in one process: {', '.join(n.get_namespace().strip('/') for n in mine)}")


def _swarm_link_asked(value: dict[str, Any], ordered: bool) -> bool:
    """``swarm_link`` (see :class:`FleetHosting`), checked: it needs the physics node's vehicle order,
    which a fleet file or ``vehicles`` gives and a bare ``namespaces`` list does not."""
    asked = value.get("swarm_link", False)
    if not isinstance(asked, bool):
        raise ParamsError(f"swarm_link must be true or false, got {asked!r}")
    if asked and not ordered:
        raise ParamsError("swarm_link needs fleet or vehicles (the physics node's vehicle order), not namespaces alone")
    return asked


def _shard(value: Any) -> tuple[int, int]:
    """``shard: [i, k]`` (see :class:`FleetHosting`), checked."""
    shard = list(value) if isinstance(value, (list, tuple)) or _is_array(value) else value
    if not (isinstance(shard, list) and len(shard) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                               for x in shard) and 0 <= shard[0] < shard[1]):
        raise ParamsError(f"shard must be [index, count] with 0 <= index < count, got {value!r}")
    return shard[0], shard[1]


@dataclass(frozen=True)
class HostedNode:
    """One kind of node a shared process (:func:`build_shared_nodes`) can host."""

    factory: Callable[..., Node]  # takes rclpy ``Node`` keyword arguments
    hosting: FleetHosting  # its name, and how it serves a fleet


def build_shared_nodes(process_name: str, members: tuple[HostedNode, ...], nodes: list[Node]) -> None:
    """Append to ``nodes`` several kinds of node that share this process, each as its own node.

    One process instead of one per node: the publisher sends each message once to the
    process, which wakes once for all its readers (``benchmarks/shared_process.py``: a publisher
    and four readers in four processes spent 264 µs of CPU per message, with the four readers in
    one process 88 µs). Parameters, as given to the process (launch's ``param``):

    - ``<member>.<name>``: parameter ``<name>`` of that member only (``imu.preset``);
    - ``<member>.enabled``: false leaves that member out (a real driver takes its place);
    - anything else (``use_sim_time``, ``seed``, ``lockstep``, ``fleet``, ``home.*``): every member.

    Each member is named as its own executable would be (``imu`` in the process's namespace) and
    may serve a fleet (:class:`FleetHosting`). A bad value is the FATAL line the member's own
    executable would print (``[imu]: invalid parameter: rate_hz ...``), and the process ends.
    """
    probe = _parameter_probe(process_name)
    nodes.append(probe)
    given = probe.get_parameters_by_prefix("")
    names = {member.hosting.name for member in members}
    common = {n: p for n, p in given.items() if n.split(".", 1)[0] not in names}
    hosted: list[Node] = []
    try:
        for member in members:
            name = member.hosting.name
            own = {n[len(name) + 1:]: p.value for n, p in given.items() if n.startswith(f"{name}.")}
            enabled = own.pop("enabled", True)
            if not isinstance(enabled, bool):
                raise ParamsError(f"{name}.enabled must be true or false, got {enabled!r}")
            if enabled:
                first = len(hosted)
                _add_member(member, {**common, **{n: Parameter(n, value=v) for n, v in own.items()}},
                            probe.get_namespace(), hosted)
                _warn_unknown(name, own, hosted[first:first + 1])
    finally:
        nodes[:0] = hosted
    served = sorted({n.get_name() for n in hosted}, key=[m.hosting.name for m in members].index)
    probe.get_logger().info(f"one process for {', '.join(served)}" if served else "every member disabled: nothing to serve")
    share_clock(nodes)


def _add_member(member: HostedNode, given: dict[str, Parameter], namespace: str, nodes: list[Node]) -> None:
    name = member.hosting.name

    def single() -> Node:
        cli = ["--ros-args", "-r", f"__node:={name}", "-r", f"__ns:={namespace}"]
        return member.factory(cli_args=cli, use_global_arguments=False, parameter_overrides=list(given.values()))

    try:
        add_hosted_nodes(member.factory, member.hosting, given, name, namespace, nodes, single)
    except ParamsError as error:
        error.node_name = name  # reported as the member's own executable would report it
        raise


def _warn_unknown(member: str, own: dict[str, Any], built: list[Node]) -> None:
    """A ``<member>.<name>`` the member does not declare would be silently ignored: say so once."""
    for name in own:
        if built and not name.startswith(FleetHosting.OVERRIDE_PREFIX) and not built[0].has_parameter(name):
            built[0].get_logger().warning(f"{member}.{name}: not a parameter of {member}; ignored")


class InputStampClock:
    """Simulation time for a node driven by stamped data, without a ``/clock`` subscription of its own.

    A node that only transforms input stamped in sim time (a sensor resampling ground
    truth, the flight controller answering odometry, the camera rendering at odometry
    stamps, depth post-processing) uses its clock for nothing but log throttling. Its
    ``/clock`` subscription still cost a whole callback per physics period: 250 messages/s
    and about 0.05-0.09 cores per node on this machine (an idle subscriber's CPU), for a
    time its input already carries, since the physics node stamps ground truth with the
    very ``/clock`` value it publishes with it. Used by the sensors, the flight controller, the
    mission runner, camera, depth noise, depth points, lidar, rotor drag, the web viewer and
    scene markers (through :func:`subscribe_odometry`'s ``clock``, or by hand), and by the
    recorder and the AirSim server, which read ``/clock`` anyway. With ``use_sim_time`` true this drops the
    subscription and sets the node's ROS time from :meth:`advance` (the stamp of the input
    just handled; a simulation reset sends it back, as ``/clock`` would); with
    ``use_sim_time`` false it does nothing (wall time, as before).
    """

    def __init__(self, node: Node):
        self._clock = node.get_clock()
        source = getattr(node, "_time_source", None)  # rclpy's TimeSource (absent: keep /clock)
        self.active = source is not None and source.ros_time_is_active
        if self.active:
            source.detach_node()  # drops the /clock subscription; the clock stays in ROS-time mode
        self._last_ns = 0

    @property
    def latest_ns(self) -> int:
        """The stamp last advanced to (ns; 0 before the first): the node's sim time now."""
        return self._last_ns

    def advance(self, stamp_ns: int) -> None:
        """Set the node's time to ``stamp_ns`` (sim time, ns); a negative stamp is no sim time and is
        left to the node's own checks of the message."""
        if self.active and stamp_ns != self._last_ns and stamp_ns >= 0:
            self._last_ns = stamp_ns
            # What Clock.set_ros_time_override does, without building a checked rclpy Time first: a
            # fleet process sets some 10,000 clocks a second (1.5 instead of 2.5 us each here).
            point = _rclpy.rcl_time_point_t(stamp_ns, self._clock.clock_type)
            with self._clock.handle:
                self._clock.handle.set_ros_time_override(point)


def share_clock(nodes: list[Node]) -> None:
    """Let the first node's ``/clock`` subscription drive every node's clock.

    Each rclpy node subscribes to ``/clock`` itself (250 messages/s from the physics node);
    for N nodes in one process that is N deserialisations per tick for the same time. Uses
    rclpy's TimeSource (``Node._time_source``): where that is missing, every node keeps its own.
    """
    source = getattr(nodes[0], "_time_source", None)
    if source is None or not source.ros_time_is_active:
        return
    for node in nodes[1:]:
        own = getattr(node, "_time_source", None)
        if own is None or not own.ros_time_is_active:
            continue
        own.detach_node()  # drops its /clock subscription; its clock stays in ROS-time mode
        source.attach_clock(node.get_clock())


def _spin_until_stopped(nodes: list[Node]) -> None:
    """Spin until a stop signal, the context's shutdown, or any node's ``done``."""
    for node in nodes:
        InputGuard(node)  # wraps the node's callbacks, now and as they are created
    context = nodes[0].context
    executor = make_executor(context)
    for node in nodes:
        executor.add_node(node)
    never = rclpy.task.Future()
    while not _process.stop_requested() and context.ok() and not any(getattr(n, "done", False) for n in nodes):
        # Spin for 0.1 s at a time, not one callback: the loop's own checks per message cost a
        # sensor fed 250 Hz odometry 13 % of its CPU (benchmarks/executor.py, --before the change).
        executor.spin_until_future_complete(never, timeout_sec=0.1)
    for node in nodes:
        executor.remove_node(node)


#: Lockstep: the niceness of a process whose outputs the clock awaits with slack (environment
#: variable; 0 leaves every process at the priority it was started with).
BACKGROUND_NICE_VARIABLE = "AERIAL_SIM_BACKGROUND_NICE"
DEFAULT_BACKGROUND_NICE = 10


def yield_cpu_in_lockstep(nodes: list[Node]) -> None:
    """In lockstep, lower this process's CPU priority to nice ``AERIAL_SIM_BACKGROUND_NICE`` (10).

    For the processes off the control loop's critical path: sensors, camera, depth noise, point
    cloud, lidar, rangefinder, recorder. Each lockstep period waits for the flight
    controller's answer to the physics node's odometry, while those nodes may lag by the lockstep
    slack. On two cores, four or five processes wake at each odometry message; given the same
    priority, the scheduler shares the cores among them and the controller's answer comes later.
    At nice 10 they use the time the loop leaves (``bench graph --variants lockstep_no_camera``,
    measured in the README). Every thread of the process is reniced (Linux sets niceness per
    thread; threads started later inherit it). Outside lockstep every node keeps its priority:
    in real time each stream has a wall-clock deadline of its own.
    """
    if not any(n.has_parameter("lockstep") and n.get_parameter("lockstep").value is True for n in nodes):
        return
    text = os.environ.get(BACKGROUND_NICE_VARIABLE, str(DEFAULT_BACKGROUND_NICE))
    logger = nodes[0].get_logger()
    try:
        nice = int(text)
        if not 0 <= nice <= 19:
            raise ValueError
    except ValueError:
        logger.warning(f"{BACKGROUND_NICE_VARIABLE}={text!r} is not a niceness in 0..19: priority left as it is")
        return
    if nice == 0:
        return
    try:
        threads = [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        threads = [0]  # no /proc: the calling thread (the whole process where niceness is per process)
    try:
        for thread in threads:
            os.setpriority(os.PRIO_PROCESS, thread, max(nice, os.getpriority(os.PRIO_PROCESS, thread)))
    except OSError as error:
        logger.warning(f"lockstep: could not lower this process's CPU priority ({error}); it runs as it was")
        return
    logger.info(f"lockstep: off the control loop's critical path, this process runs at nice {nice} "
                f"({BACKGROUND_NICE_VARIABLE}=0 leaves it as it is)")


def make_executor(context):
    """The executor every node spins in: rclpy's events executor (C++) where this rclpy has it,
    else the Python ``SingleThreadedExecutor``.

    Most nodes here do little per message, so the executor's own overhead dominates their CPU:
    ``benchmarks/executor.py`` measures both on a 250 Hz odometry subscriber. ``AERIAL_SIM_EXECUTOR=single``
    chooses the Python one (for comparison, or should the experimental one misbehave).
    """
    if os.environ.get("AERIAL_SIM_EXECUTOR", "events") != "single":
        try:
            from rclpy.experimental import EventsExecutor
        except ImportError:
            pass
        else:
            return EventsExecutor(context=context)
    return rclpy.executors.SingleThreadedExecutor(context=context)


class InputGuard:
    """No message or request may end a node: the last line of defence behind each callback's own checks.

    Every subscription and service callback of the node is wrapped: an exception
    raised while handling one message (a value no check foresaw, a wrong size)
    drops that message; a service request gets ``success = False`` where the
    response has that field. One warning per topic and ``interval_s`` names the
    topic, the message type and the problem, and counts what was dropped since.
    Timer callbacks are wrapped too: they work on what messages left behind (the web
    viewer draws the newest cloud at each refresh), so a failing tick is skipped and
    reported the same way. Shutdown (a dead context, a stop signal) is not input: it passes through.
    """

    def __init__(self, node: Node, interval_s: float = 5.0):
        self.node = node
        self.interval_s = interval_s
        self._dropped: dict[str, int] = {}
        self._reported_at: dict[str, float] = {}
        self._guarded_key: tuple = (0, None, 0)
        self.guard_all()
        for factory in ("create_subscription", "create_service", "create_timer"):
            # What the node creates from now on (the recorder subscribes as topics appear) is
            # guarded as it is created, before the executor can call it.
            setattr(node, factory, self._guarding(getattr(node, factory)))

    def _guarding(self, create):
        def create_guarded(*args, **kwargs):
            entity = create(*args, **kwargs)
            self.guard_all()
            return entity
        return create_guarded

    def guard_all(self) -> None:
        """Wrap every callback not wrapped yet (cheap when there is none).

        New entities are spotted by the count and the last one: a node that destroys and recreates
        subscriptions (the web viewer, as browsers come and go) can end at the same count."""
        subscriptions, services, timers = list(self.node.subscriptions), list(self.node.services), list(self.node.timers)
        key = (len(subscriptions), subscriptions[-1] if subscriptions else None, len(services), len(timers),
               timers[-1] if timers else None)
        if key == self._guarded_key:
            return
        for subscription in self.node.subscriptions:
            if not hasattr(subscription.callback, "input_guard"):
                subscription.callback = self._guarded(subscription.callback, subscription.topic_name,
                                                      subscription.msg_type.__name__, subscription._callback_type.name)
        for service in self.node.services:
            if not hasattr(service.callback, "input_guard"):
                service.callback = self._guarded_service(service.callback, service.srv_name)
        for timer in timers:
            if timer.callback is not None and not hasattr(timer.callback, "input_guard"):
                timer.callback = self._guarded_timer(timer.callback)
        self._guarded_key = key

    def _guarded(self, callback, topic: str, type_name: str, callback_type: str):
        # Keep the callback's arity: rclpy passes the message info only to two-argument callbacks.
        if callback_type == "WithMessageInfo":
            def guarded(message, info):
                return self._call(callback, topic, type_name, None, message, info)
        else:
            def guarded(message):
                return self._call(callback, topic, type_name, None, message)
        guarded.input_guard = self
        return guarded

    def _guarded_service(self, callback, name: str):
        def guarded(request, response):
            answer = self._call(callback, name, type(request).__name__, response, request, response)
            return response if answer is None else answer
        guarded.input_guard = self
        return guarded

    def _guarded_timer(self, callback):
        name = f"timer {getattr(callback, '__qualname__', type(callback).__name__)}"

        @functools.wraps(callback)  # keeps its signature: rclpy passes TimerInfo to callbacks that ask for it
        def guarded(*args, **kwargs):
            try:
                return callback(*args, **kwargs)
            except Exception as error:  # noqa: BLE001 - as for a message: the node goes on
                if _process.stop_requested() or not self.node.context.ok():
                    raise
                self.report(name, "timer", error, outcome="tick skipped")
        guarded.input_guard = self
        return guarded

    def _call(self, callback, topic: str, type_name: str, refusal, *args):
        try:
            return callback(*args)
        except Exception as error:  # noqa: BLE001 - this is the point: input never ends the node
            if _process.stop_requested() or not self.node.context.ok():
                raise
            self.report(topic, type_name, error)
            if refusal is not None and hasattr(refusal, "success"):
                refusal.success = False
                if hasattr(refusal, "message"):
                    refusal.message = f"refused: {type(error).__name__}: {error}"
            return refusal

    def report(self, topic: str, type_name: str, error: Exception, outcome: str = "message dropped") -> None:
        self._dropped[topic] = self._dropped.get(topic, 0) + 1
        now = time.monotonic()
        if now - self._reported_at.get(topic, -math.inf) < self.interval_s:
            return
        self._reported_at[topic] = now
        count, self._dropped[topic] = self._dropped[topic], 0
        detail = " ".join(str(error).split())[:200] or "-"
        self.node.get_logger().warning(
            f"{topic}: {outcome} ({type_name}: {type(error).__name__}: {detail}); "
            f"{count} since the last such warning")


def _failure_code(name: str, node: Node | None, error: Exception) -> int:
    """Exit status for an exception out of start-up or spinning (see :func:`run_node`)."""
    if _process.stop_requested() or not rclpy.ok() or (node is not None and not node.context.ok()):
        return 0  # interrupted while starting or while a callback ran: not a failure
    if node is None or isinstance(error, (OSError, RCLError, NameValidationException)):
        # Start-up: a bad argument, name, file or folder. One line, no traceback.
        return _fatal(name, f"cannot start: {' '.join(str(error).split()) or type(error).__name__}")
    traceback.print_exc()
    return 1


def _fatal(name: str, message: str) -> int:
    print(f"[FATAL] [{name}]: {message}", file=sys.stderr, flush=True)
    return 2


def _stop_node(node: Node) -> None:
    """Destroy one node; nothing here may print a traceback."""
    try:
        node.destroy_node()
    except Exception as error:  # noqa: BLE001 - the node is going away either way
        print(f"[WARN] [{node.get_name()}]: while stopping: {type(error).__name__}: {error}", file=sys.stderr)


def _shutdown() -> None:
    try:
        rclpy.try_shutdown()
    except Exception:  # noqa: BLE001
        pass


def run_folder_parameter(value: str, parameter: str = "output_dir"):
    """The run folder for a node's ``output_dir``-style parameter (:mod:`aerial_sim.run_folder`).

    A folder that cannot be created or written is a :class:`ParamsError` naming the parameter.
    """
    from aerial_sim.run_folder import RunFolderError, resolve_run_dir

    try:
        return resolve_run_dir(value)
    except RunFolderError as error:
        raise ParamsError(f"{parameter}: {error}") from None


def use_transport_profile() -> None:
    """Point Fast DDS at ``config/fastdds.xml`` unless the user chose a profile or another RMW.

    The default Fast DDS transports drop most best-effort camera images bigger
    than 512 kB between processes; the profile enlarges the shared-memory
    segment and socket buffers (measurements in the file). Call before rclpy.init.
    """
    if os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp") != "rmw_fastrtps_cpp":
        return
    if os.environ.get("FASTDDS_DEFAULT_PROFILES_FILE") or os.environ.get("FASTRTPS_DEFAULT_PROFILES_FILE"):
        return
    from aerial_sim.paths import config_path

    profile = config_path("fastdds.xml")
    if profile.is_file():
        os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = str(profile)


_tf_missing_reported = False


def make_tf_broadcaster(node: Node, static: bool = False):
    """A tf2_ros broadcaster when tf2_ros is importable, else None (logged once).

    In a pip-only install tf2_ros does not exist; the simulation runs on without
    TF and says so once, instead of failing.
    """
    global _tf_missing_reported
    try:
        import tf2_ros
    except ImportError:
        if not _tf_missing_reported:  # once per process (one that serves a fleet has many nodes)
            node.get_logger().info("tf2_ros is not installed (pip-only install): TF is skipped")
            _tf_missing_reported = True
        return None
    return tf2_ros.StaticTransformBroadcaster(node) if static else tf2_ros.TransformBroadcaster(node)


def publish_static_mount(node: Node, child_frame: str, position_m, orientation_wxyz) -> None:
    """Broadcast the fixed pose of a sensor frame in ``<ns>/base_link`` on ``/tf_static``.

    ``orientation_wxyz`` rotates child-frame vectors into base_link. Without
    tf2_ros (pip-only install) this only logs, once, that TF is skipped.
    """
    broadcaster = make_tf_broadcaster(node, static=True)
    if broadcaster is None:
        return
    from geometry_msgs.msg import TransformStamped

    transform = TransformStamped()
    transform.header.stamp = node.get_clock().now().to_msg()
    transform.header.frame_id = frame_in_namespace(node, "base_link")
    transform.child_frame_id = child_frame
    t, r = transform.transform.translation, transform.transform.rotation
    t.x, t.y, t.z = (float(v) for v in position_m)
    r.w, r.x, r.y, r.z = (float(v) for v in orientation_wxyz)
    broadcaster.sendTransform(transform)
    node._aerial_sim_static_broadcaster = broadcaster  # keep it alive for late subscribers


def is_finite_sequence(values) -> bool:
    """True when every element of ``values`` is a finite float."""
    return all(math.isfinite(v) for v in values)


def _is_array(value: Any) -> bool:
    return hasattr(value, "tolist") and not isinstance(value, (str, bytes))


def _is_tuple_of_dataclasses(value: Any) -> bool:
    return isinstance(value, tuple) and bool(value) and dataclasses.is_dataclass(value[0])

