"""``aerial_sim launch --compose``: a launch file's composable nodes in one process, a node container
(:mod:`aerial_sim.nodes.container`), the others in a process each, as without it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Sequence

from aerial_sim.launcher.plan import ProcessSpec
from aerial_sim.paths import PACKAGE_NAME

#: Executables whose nodes may share the container: those of a batch graph, which spin only in their
#: executor (and the physics node's own simulation thread). Servers with threads and sockets of their own
#: (web viewer, AirSim API, MAVLink, SITL bridges), the renderers (camera, depth noise, lidar, point
#: clouds) and any other package's executables keep a process each.
COMPOSABLE = frozenset({"physics", "sensors", "imu", "barometer", "magnetometer", "gps", "flight_controller",
                        "mission", "recorder", "rotor_drag"})
#: The container's executable (``aerial_sim.nodes.container``) and its label in the launch's output.
CONTAINER = "container"


def composable(spec: ProcessSpec, first: ProcessSpec | None) -> bool:
    """Whether ``spec`` can join the container whose first member is ``first`` (None: none yet): a node
    of this package, started plainly (no prefix, no working folder of its own), in the same environment."""
    plain = (spec.package == PACKAGE_NAME and spec.is_node and spec.executable in COMPOSABLE
             and not spec.prefix and spec.cwd is None)
    return plain and (first is None or dict(spec.environment) == dict(first.environment))


def compose(specs: Sequence[ProcessSpec], argvs: Sequence[list[str]], entries_path: Path) \
        -> tuple[list[ProcessSpec], list[list[str] | None]]:
    """``specs`` with their composable members replaced by one container process where the first member
    was; ``argvs`` are the members' arguments (their command lines after the executable). Returns the
    processes to start and, for each, the arguments to run it with (None: build its command as usual).
    Fewer than two composable nodes: ``specs`` unchanged."""
    members: list[int] = []
    for index, spec in enumerate(specs):
        if composable(spec, specs[members[0]] if members else None):
            members.append(index)
    if len(members) < 2:
        return list(specs), [None] * len(specs)
    entries = [{"executable": specs[i].executable, "argv": argvs[i]} for i in members]
    entries_path.parent.mkdir(parents=True, exist_ok=True)
    entries_path.write_text(json.dumps(entries, indent=1))
    group = [specs[i] for i in members]
    container = dataclasses.replace(
        group[0], executable=CONTAINER, is_node=False, name=CONTAINER, namespace=None, exec_name=CONTAINER,
        arguments=(), ros_arguments=(), parameters=(), remappings=(),
        output="screen" if any(s.output in ("screen", "both") for s in group) else group[0].output,
        shutdown_on_exit=any(s.shutdown_on_exit for s in group),
        sigterm_timeout_s=max(s.sigterm_timeout_s for s in group),
        sigkill_timeout_s=max(s.sigkill_timeout_s for s in group))
    processes: list[ProcessSpec] = []
    arguments: list[list[str] | None] = []
    for index, spec in enumerate(specs):
        if index == members[0]:
            processes.append(container)
            arguments.append(["--entries", str(entries_path)])
        elif index not in members:
            processes.append(spec)
            arguments.append(None)
    return processes, arguments
