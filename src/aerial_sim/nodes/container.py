"""One process for the nodes of several executables, as a ROS 2 component container hosts components:
``aerial_sim launch --compose`` (``aerial_sim batch``'s ``run.compose``) starts the launch file's
composable nodes (:data:`aerial_sim.launcher.compose.COMPOSABLE`) in this process instead of one process each.

Each node is built exactly as its own executable builds it (its ``main(args)`` with the argv the launcher
would have given it, :func:`aerial_sim.nodes.ros.run.collecting_builds`): same name, namespace, parameters
(its parameter files and ``-p`` values), remappings, hosting (the sensors' four nodes, a fleet). Only the
process is shared, with one DDS participant and one executor: a message between two of these nodes
goes from the publisher's thread to the subscriber's queue in the same process (Fast DDS delivers it
in process), the process wakes once per period instead of once per node, and the imports and the
start-up are paid once. ``tools/dev.sh bench batch --layouts processes one`` measures both.

The rules of the separate processes hold, with these differences:

- a node that ends (the mission's ``done``) ends the process, as its ``on_exit: shutdown`` ended the
  launch; the others spin :data:`DRAIN_S` more first (the recorder takes the graph's last outputs,
  :func:`aerial_sim.nodes.ros.executors.spin_until_stopped`), then finish as on a stop signal (the
  recorder closes its bag);
- the process runs at the priority it was started with (a separate sensors or recorder process runs
  at nice 10 in lockstep, :func:`~aerial_sim.nodes.ros.executors.yield_cpu_in_lockstep`: here that
  would slow the physics node too);
- the exit status is the first non-zero one a node sets, a configuration error (exit 2) is reported
  under the node's own name.

Usage (the launcher writes the file): ``python -m aerial_sim.nodes.container --entries FILE``, FILE a
JSON list of ``{"executable": "physics", "argv": [...]}``, ``argv`` the executable's arguments.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from contextlib import contextmanager
from typing import Iterator

from rclpy.node import Node

from aerial_sim.config import ParamsError
from aerial_sim.nodes.ros.run import NodeBuild, collecting_builds, node_name_from_args, run_nodes

#: Wall seconds the other nodes spin on after one ends the process (the mission's own ``drain_s``).
DRAIN_S = 0.5


def load_entries(path: str) -> list[tuple[str, list[str]]]:
    """The (executable, argv) entries of a ``--entries`` file; ValueError naming what is wrong."""
    with open(path, encoding="utf-8") as stream:
        document = json.load(stream)
    if not isinstance(document, list) or not document:
        raise ValueError(f"{path}: expected a non-empty JSON list of entries")
    entries = []
    for index, entry in enumerate(document):
        executable = entry.get("executable") if isinstance(entry, dict) else None
        argv = entry.get("argv", []) if isinstance(entry, dict) else None
        if not isinstance(executable, str) or not is_node_executable(executable):
            raise ValueError(f"{path}: entry {index}: {executable!r} is not a node executable of this package")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise ValueError(f"{path}: entry {index}: argv must be a list of strings")
        entries.append((executable, argv))
    return entries


def is_node_executable(name: str) -> bool:
    """Whether ``aerial_sim.nodes.<name>`` is a node executable's module (which of them share a process is
    the launcher's choice, :data:`aerial_sim.launcher.compose.COMPOSABLE`)."""
    return name.isidentifier() and not name.startswith("_") and \
        importlib.util.find_spec(f"aerial_sim.nodes.{name}") is not None


def collect(entries: list[tuple[str, list[str]]]) -> list[NodeBuild]:
    """Each entry's build, from its executable's own ``main(argv)``."""
    builds = []
    for executable, argv in entries:
        module = importlib.import_module(f"aerial_sim.nodes.{executable}")
        with collecting_builds() as found:
            module.main(argv)
        if len(found) != 1:
            raise ValueError(f"{executable}: its main() built {len(found)} node sets, not one")
        builds.append(found[0])
    return builds


@contextmanager
def node_arguments(cli_args: list[str]) -> Iterator[None]:
    """While inside, a ``Node`` built without arguments of its own takes ``cli_args`` instead of the
    process's arguments: the name remapping, namespace and parameter files its own process would have
    had as global arguments. Nodes that pass ``cli_args`` or ``use_global_arguments=False`` (a fleet's
    vehicles, a lockstep reader) are left as they are."""
    original = Node.__init__

    def init(self, node_name, *positional, cli_args_=cli_args, **options):
        if options.get("cli_args") is None and options.get("use_global_arguments", True):
            options["cli_args"], options["use_global_arguments"] = cli_args_, False
        original(self, node_name, *positional, **options)

    Node.__init__ = init
    try:
        yield
    finally:
        Node.__init__ = original


def build_all(builds: list[NodeBuild], nodes: list[Node]) -> None:
    """Build every entry's nodes into ``nodes``, each with its own arguments (:func:`node_arguments`)."""
    for entry in builds:
        try:
            with node_arguments(entry.args):
                entry.build(nodes)
        except ParamsError as error:
            if getattr(error, "node_name", None) is None:
                error.node_name = node_name_from_args(entry.args, entry.default_name)
            raise


def main(args=None):
    parser = argparse.ArgumentParser(prog="container", description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", help="JSON list of {executable, argv} (required)")
    options, _ros = parser.parse_known_args(sys.argv[1:] if args is None else args)
    try:
        if options.entries is None:
            raise ValueError("no --entries FILE (the launcher writes it: aerial_sim launch --compose)")
        builds = collect(load_entries(options.entries))
    except (OSError, ValueError) as error:
        print(f"[FATAL] [container]: cannot start: {error}", file=sys.stderr, flush=True)
        return 2
    return run_nodes(lambda nodes: build_all(builds, nodes), "container", args, drain_s=DRAIN_S)


if __name__ == "__main__":
    raise SystemExit(main())
