"""What a launch file evaluates to (:class:`LaunchPlan`): the processes to start (:class:`ProcessSpec`) with
their parameter sources, the declared arguments, messages and warnings; and the launch-wide defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Union


#: Values of the ``output`` attribute (launch's ExecuteProcess).
OUTPUT_MODES = ("screen", "log", "both")


#: ExecuteProcess attributes that are accepted (the files stay valid) but have no effect here.
IGNORED_PROCESS_ATTRIBUTES = frozenset({"respawn", "respawn_delay", "respawn_max_retries", "emulate_tty", "shell"})


#: Seconds from SIGINT to SIGTERM and from SIGTERM to SIGKILL when stopping a process: ros2
#: launch's defaults, overridden per process by the ``sigterm_timeout``/``sigkill_timeout``
#: attributes or for the whole launch by launch arguments of those names.
DEFAULT_SIGTERM_TIMEOUT_S = 5.0


DEFAULT_SIGKILL_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ParamFile:
    """A ``param: {from: FILE}`` entry: passed as ``--params-file FILE``."""

    path: Path


@dataclass(frozen=True)
class ParamDict:
    """Inline ``param: {name, value}`` entries: written to a generated params file."""

    values: Mapping[str, Any]


ParamSource = Union[ParamFile, ParamDict]


@dataclass(frozen=True)
class ProcessSpec:
    """One process to start: a ``node`` (gets ``--ros-args``) or a plain ``executable``.

    A node with no ``package`` runs ``executable`` as a path, as launch_ros does.
    ``namespace`` is absolute, or None when neither the node nor an enclosing
    ``push-ros-namespace`` gave one (then no ``__ns`` remap is passed).
    ``environment`` is the complete environment the process gets.
    """

    executable: str
    package: str | None = None
    is_node: bool = True
    name: str | None = None
    namespace: str | None = None
    exec_name: str | None = None
    arguments: tuple[str, ...] = ()
    ros_arguments: tuple[str, ...] = ()
    parameters: tuple[ParamSource, ...] = ()
    remappings: tuple[tuple[str, str], ...] = ()
    output: str = "log"
    shutdown_on_exit: bool = False
    sigterm_timeout_s: float = DEFAULT_SIGTERM_TIMEOUT_S
    sigkill_timeout_s: float = DEFAULT_SIGKILL_TIMEOUT_S
    cwd: str | None = None
    prefix: tuple[str, ...] = ()
    environment: Mapping[str, str] = field(default_factory=dict)

    @property
    def fully_qualified_name(self) -> str | None:
        """``/ns/name`` when both are known (launch_ros keys generated params files by it)."""
        if self.name is None or self.namespace is None:
            return None
        return f"{self.namespace.rstrip('/')}/{self.name}"


@dataclass(frozen=True)
class ArgumentDeclaration:
    """An ``arg`` tag, for ``--show-args`` and error messages."""

    name: str
    default: str | None
    description: str
    choices: tuple[str, ...] = ()


@dataclass
class LaunchPlan:
    """Everything a launch file evaluated to, in start order."""

    processes: list[ProcessSpec] = field(default_factory=list)
    arguments: list[ArgumentDeclaration] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    configurations: dict[str, str] = field(default_factory=dict)
