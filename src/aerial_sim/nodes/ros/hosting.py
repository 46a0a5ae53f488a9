"""Many nodes in one process: every vehicle of a fleet (:class:`FleetHosting`), and several kinds of node
sharing a process (:func:`build_shared_nodes`). :func:`aerial_sim.nodes.ros.run.run_node` calls them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import rclpy.logging
from rclpy.node import Node
from rclpy.parameter import Parameter

from aerial_sim.config import SAFE_LOADER, ParamsError
from aerial_sim.nodes.ros.clocks import share_clock
from aerial_sim.nodes.ros.parameters import is_array
from aerial_sim.nodes.ros.qos import COMMAND_QOS, stream_qos
from aerial_sim.nodes.ros.swarm_link import SWARM_COMMANDS, SWARM_TRUTH


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
    one ``/swarm/motor_commands`` message (:mod:`aerial_sim.nodes.ros.swarm_link`).

    The nodes share one ``/clock`` subscription (one per process instead of one per vehicle).

    ``fleet_vehicle: NAME`` (fleet.launch.yaml passes sim.launch.yaml's ``vehicle_name``, whose
    camera, viewer, AirSim server and mission serve it): a fleet must be selected and hold a
    vehicle of that name, else one line says so (``vehicles:=0`` ran a one-vehicle fleet, and a
    ``vehicle_name`` outside the fleet gave a camera and mission with no vehicle, both silently).
    """

    #: The node's name in code (launch's ``name`` replaces it, as for a single node).
    name: str
    #: Fleet files list each vehicle's sensors: only vehicles carrying this one get a node.
    sensor: str | None = None
    seeded: bool = False
    type_parameter: str | None = None

    #: Parameters of the hosting process itself (not passed on to the vehicles' nodes).
    SELECTION = ("fleet", "vehicles", "namespaces", "shard", "swarm_link", "fleet_vehicle")
    OVERRIDE_PREFIX = "vehicle_overrides."
    SEED_STRIDE = 1_000_000


def build_fleet_nodes(node_factory: Callable[..., Node], hosting: FleetHosting, nodes: list[Node],
                      args: list[str] | None = None) -> None:
    """Append to ``nodes`` the node(s) this process serves (see :class:`FleetHosting`).

    When the process's arguments ``args`` (``-p`` and ``--params-file``) name none of the selection
    parameters, it serves the single node, built at once: no other node is in the graph. Otherwise a
    probe node (named and namespaced as launch asked, so it receives exactly the parameters meant for
    this process) reads the selection; it stays as the process's only node when no vehicle needs one
    (it then idles instead of ending the launch).
    The probe is never destroyed while the process starts: destroying a node right after
    creating it, while DDS discovery runs, segfaulted in rclpy's ``destroy_node`` (seen twice
    in full-suite runs, an IMU and a barometer); it is destroyed with the others. Serving a fleet, it is
    the process's node in the parent namespace and answers parameter services (read only,
    :func:`answer_parameter_services`); serving the single node, which has its name, it answers none
    and has no rosout, so it answers nothing in that node's name.
    Its clock follows the first node's ``/clock`` subscription (:func:`share_clock`): an idle
    probe reading ``/clock`` on its own cost a sensor process a third of its callbacks.
    """
    if args is not None and not selection_given(args):
        nodes.append(node_factory())
        return
    probe = _parameter_probe(hosting.name)
    nodes.append(probe)
    served: list[Node] = []
    try:
        add_hosted_nodes(node_factory, hosting, probe.get_parameters_by_prefix(""), probe.get_name(),
                         probe.get_namespace(), served, single=node_factory)
    finally:
        nodes[:0] = served  # before the probe: the first served node's /clock drives the others
    if not any(node.get_fully_qualified_name() == probe.get_fully_qualified_name() for node in served):
        answer_parameter_services(probe)
    share_clock(nodes)


def selection_given(args: list[str]) -> bool:
    """Whether ``args`` name a parameter of :attr:`FleetHosting.SELECTION` anywhere: a ``-p NAME:=...``
    (for any node) or a key of a ``--params-file`` (at any depth). Conservative: a name given for
    another node counts too, and a file that cannot be read counts (the probe then reads the selection)."""
    import yaml  # noqa: PLC0415

    names = set(FleetHosting.SELECTION)
    ros = False
    for index, argument in enumerate(args):
        if argument == "--ros-args":
            ros = True
        elif argument == "--":
            ros = False
        elif ros and argument in ("-p", "--param") and index + 1 < len(args):
            if args[index + 1].split(":=", 1)[0].rsplit(":", 1)[-1] in names:
                return True
        elif ros and argument == "--params-file" and index + 1 < len(args):
            try:
                with open(args[index + 1], encoding="utf-8") as stream:
                    document = yaml.load(stream, Loader=SAFE_LOADER)
            except (OSError, yaml.YAMLError):
                return True
            if _keys_of(document) & names:
                return True
    return False


def _keys_of(document: Any) -> set[str]:
    """Every mapping key in a YAML document, at any depth (the last dotted part of each)."""
    if isinstance(document, dict):
        keys = {str(key).rsplit(".", 1)[-1] for key in document}
        for value in document.values():
            keys |= _keys_of(value)
        return keys
    if isinstance(document, list):
        return set().union(*(_keys_of(item) for item in document)) if document else set()
    return set()


def _parameter_probe(name: str) -> Node:
    """An idle node that receives the process's parameters (see :func:`build_fleet_nodes`)."""
    return Node(name, allow_undeclared_parameters=True, automatically_declare_parameters_from_overrides=True,
                start_parameter_services=False, enable_rosout=False)


def answer_parameter_services(probe: Node) -> None:
    """Give a process's own node (a fleet's or a shared process's probe) the standard parameter
    services: ``ros2 param list/get`` show what the process was given. Read only: those values were read
    at start, so a set is refused with the reason (set them on the nodes it serves)."""
    from rcl_interfaces.msg import SetParametersResult  # noqa: PLC0415
    from rclpy.parameter_service import ParameterService  # noqa: PLC0415

    def refuse(_parameters) -> SetParametersResult:
        return SetParametersResult(successful=False, reason=f"{probe.get_fully_qualified_name()} reads its "
                                   "parameters once at start: set them on the nodes it serves")

    probe.add_on_set_parameters_callback(refuse)
    probe._aerial_sim_parameter_service = ParameterService(probe)


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
    member = str(value.get("fleet_vehicle") or "")
    if member and not fleet_file and count == 0:
        raise ParamsError("vehicles must be at least 1 (1: the single vehicle vehicle_name; 2 or more: a fleet), got 0")
    if not fleet_file and count == 0 and not listed:
        nodes.append(single())  # the single-vehicle node, exactly as without hosting
        return
    if fleet_file or count:
        vehicle_type = str(value.get(hosting.type_parameter, "quad_x")) if hosting.type_parameter else "quad_x"
        fleet = FleetSelection(fleet=fleet_file, vehicles=count, vehicle_type=vehicle_type).load()
    else:
        fleet = tuple(FleetVehicle(name=n) for n in listed)  # ParamsError for a name that is no ROS name
    names = [v.name for v in fleet]
    if member and member not in names:
        shown = ", ".join(names[:8]) + (f", ... ({len(names)} vehicles)" if len(names) > 8 else "")
        raise ParamsError(f"vehicle_name '{member}' is not in the fleet ({shown}): its camera, viewer and mission "
                          "would serve no vehicle")
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
    shard = list(value) if isinstance(value, (list, tuple)) or is_array(value) else value
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
    process, which wakes once for all its readers (``benchmarks/sharedprocess.py``: a publisher
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
    if not any(node.get_fully_qualified_name() == probe.get_fully_qualified_name() for node in hosted):
        answer_parameter_services(probe)
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
