"""The standard ``main()`` of every node executable (:func:`run_node`): init, build the node (or a
fleet's nodes, :mod:`aerial_sim.nodes.ros.hosting`), spin, and stop quietly.

A bad parameter is one clear log line and exit code 2, Ctrl-C (once or many times) is a quiet
exit 0 (:mod:`aerial_sim.nodes.ros.process`), and a message or request that makes a callback raise is
dropped with a warning instead of ending the node (:class:`aerial_sim.nodes.ros.input_guard.InputGuard`).
"""

from __future__ import annotations

import sys
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import rclpy
from rclpy.exceptions import NameValidationException
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from aerial_sim.config import ParamsError
from aerial_sim.nodes.ros import log_caller, process, type_support
from aerial_sim.nodes.ros.executors import restore_cpu_priority, spin_until_stopped, yield_cpu_in_lockstep
from aerial_sim.nodes.ros.hosting import FleetHosting, build_fleet_nodes
from aerial_sim.nodes.ros.transport import use_transport_profile

RCLError = _rclpy.RCLError


def run_node(node_factory: Callable[..., Node], args: list[str] | None = None,
             hosting: FleetHosting | None = None, background: bool = False) -> int:
    """Standard ``main()`` for every node: init, build, spin, and stop quietly.

    Exit status: 0 when stopped by SIGINT/SIGTERM (however often they arrive,
    also while starting) or when the node finishes; 2 for a configuration error
    (a :class:`ParamsError`, a bad ROS argument or name, a file that cannot be
    written), printed as one ``[FATAL]`` line without traceback; otherwise the
    node's ``exit_code`` (a node that sets it and shuts its context down ends
    with that failure). A node with a ``done`` attribute stops when it is true.
    See :mod:`aerial_sim.nodes.ros.process` for the signal rules. With ``hosting``
    the process may serve a whole fleet, one node per vehicle (:class:`FleetHosting`);
    ``node_factory`` then takes rclpy ``Node`` keyword arguments. ``background``: the node's
    outputs are off the control loop's critical path (:func:`yield_cpu_in_lockstep`).
    """
    default_name = hosting.name if hosting is not None else executable_name(node_factory)
    if hosting is None:
        def build(nodes: list[Node]) -> None:
            nodes.append(node_factory())
    else:
        def build(nodes: list[Node]) -> None:
            build_fleet_nodes(node_factory, hosting, nodes, args if args is not None else sys.argv)
    return run_nodes(build, default_name, args, background)


def run_nodes(build: Callable[[list[Node]], None], default_name: str, args: list[str] | None = None,
              background: bool = False, drain_s: float = 0.0) -> int:
    """:func:`run_node` for any set of nodes: ``build`` appends the process's nodes to the list it is
    given (after ``rclpy.init``); they spin in one executor and stop together. ``drain_s``: when a node
    ends the process (its ``done``), the others spin on that long first (:func:`spin_until_stopped`).

    Inside :func:`collecting_builds` (a node container, :mod:`aerial_sim.nodes.container`) nothing runs:
    the build is handed to the container, which builds it beside other executables' nodes."""
    if _Collecting.builds is not None:
        _Collecting.builds.append(NodeBuild(build, default_name, list(args or []), background))
        return 0
    process.start_node_process()
    log_caller.install()  # the logger's caller without reading source files (its module doc)
    type_support.load_without_generator()  # nor the message code generator's imports
    use_transport_profile()
    name = node_name_from_args(args if args is not None else sys.argv, default_name)
    nodes: list[Node] = []
    code = 0
    try:
        process.set_phase("starting")
        rclpy.init(args=args if args is not None else sys.argv, signal_handler_options=SignalHandlerOptions.NO)
        build(nodes)
        if len(nodes) == 1:
            name = nodes[0].get_name()  # else the process's own name (launch's ``name``)
        if background:
            yield_cpu_in_lockstep(nodes)
        process.set_phase("running")
        spin_until_stopped(nodes, drain_s)
        code = next((int(c) for c in (getattr(n, "exit_code", 0) for n in nodes) if c), 0)
    except process.StopRequested:
        code = 0
    except ParamsError as error:
        code = _fatal(getattr(error, "node_name", name), f"invalid parameter: {error}")
    except Exception as error:  # noqa: BLE001
        code = _failure_code(name, nodes[0] if nodes else None, error)
    finally:
        process.set_phase("stopping")
        restore_cpu_priority()  # the launch waits for what is left
        if any(hasattr(node, "finish_work") for node in nodes):
            process.set_aside_stop_watchdog()  # its own work is the launcher's timeouts' to bound
        for node in reversed(nodes):
            _finish_work(node)
        process.arm_teardown_watchdog()  # what is left must not hang (process.arm_teardown_watchdog)
        for node in reversed(nodes):
            _stop_node(node)
        _shutdown()
    if process.is_node_executable():
        process.exit_now(code)
    return code


@dataclass(frozen=True)
class NodeBuild:
    """What an executable's ``main(args)`` would build and spin (:func:`run_nodes`' arguments)."""

    build: Callable[[list[Node]], None]
    default_name: str
    args: list[str]
    background: bool


class _Collecting:
    builds: list[NodeBuild] | None = None


@contextmanager
def collecting_builds() -> Iterator[list[NodeBuild]]:
    """While inside, :func:`run_nodes` (so every executable's ``main(args)``) records its build in the
    list yielded and returns 0 at once instead of starting rclpy and spinning."""
    before, _Collecting.builds = _Collecting.builds, []
    try:
        yield _Collecting.builds
    finally:
        _Collecting.builds = before


def executable_name(node_factory: Callable[..., Node]) -> str:
    """The name a node of ``node_factory`` is reported under before it has one: its executable's
    (``aerial_sim.nodes.swarm_mission.SwarmMissionNode`` -> ``swarm_mission``, which is also the node's
    name), not the class's, whichever way the executable was started (``python -m``, a console script)."""
    module = getattr(node_factory, "__module__", "") or ""
    if module.startswith("aerial_sim.nodes.") and not module.rsplit(".", 1)[1].startswith("_"):
        return module.rsplit(".", 1)[1]
    return getattr(node_factory, "__name__", "node")


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


def _failure_code(name: str, node: Node | None, error: Exception) -> int:
    """Exit status for an exception out of start-up or spinning (see :func:`run_node`)."""
    if process.stop_requested() or (node is not None and not node.context.ok()):
        return 0  # interrupted while starting or while a callback ran: not a failure
    # rclpy not ok and no node: rclpy.init itself refused the arguments (a params file that does not
    # parse, a bad remap), a configuration error like any other; it used to exit 0 as if interrupted.
    if node is None or isinstance(error, (OSError, RCLError, NameValidationException)):
        # Start-up: a bad argument, name, file or folder. One line, no traceback.
        return _fatal(name, f"cannot start: {' '.join(str(error).split()) or type(error).__name__}")
    traceback.print_exc()
    return 1


def _fatal(name: str, message: str) -> int:
    print(f"[FATAL] [{name}]: {message}", file=sys.stderr, flush=True)
    return 2


def _finish_work(node: Node) -> None:
    """A node's own work at the end (``finish_work``, where it has one: the recorder closes its bag and
    writes its report), before its ROS entities are destroyed under the teardown watchdog."""
    finish = getattr(node, "finish_work", None)
    if finish is None:
        return
    try:
        finish()
    except Exception as error:  # noqa: BLE001 - the node is going away either way
        print(f"[WARN] [{node.get_name()}]: while finishing: {type(error).__name__}: {error}", file=sys.stderr)


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
