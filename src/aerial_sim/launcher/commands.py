"""From a :class:`ProcessSpec` to the exact command line ``ros2 launch`` would run.

launch_ros builds a node's command as::

    <executable> [args...] [--ros-args <ros_args...>] --ros-args
        [-r __node:=NAME] [-r __ns:=/NS]
        [--params-file FILE]...   # `from:` files and one generated file per inline param, in order
        [-r from:=to]...

and writes each inline parameter to a file ``{<node key>: {ros__parameters: {...}}}``
where the key is the fully qualified node name when name and namespace are both
known, else the wildcard ``/**``. :func:`node_command` reproduces that.

Executables: package ``aerial_sim`` runs ``python -m aerial_sim.nodes.<exec>``
with this interpreter (works from the source tree and from a colcon install);
any other package is ``<prefix>/lib/<pkg>/<exec>`` for the first prefix on
``AMENT_PREFIX_PATH`` that has it, as ``ros2 run`` finds it.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import sys
from pathlib import Path
from typing import Mapping, Sequence

import yaml

from aerial_sim.launcher.errors import LaunchError
from aerial_sim.launcher.plan import ParamDict, ParamFile, ProcessSpec
from aerial_sim.paths import PACKAGE_NAME

#: Kept equal to aerial_sim.nodes.ros.process.LAUNCHER_PID_VARIABLE (that module imports rclpy's side).
LAUNCHER_PID_VARIABLE = "AERIAL_SIM_LAUNCHER_PID"
#: Kept equal to aerial_sim.physics.lockstep.KEY_VARIABLE: the launch's key for lockstep announcements.
LOCKSTEP_KEY_VARIABLE = "AERIAL_SIM_LOCKSTEP_KEY"
#: This launch's lockstep key (:func:`child_environment`).
_LAUNCH_KEY = secrets.token_hex(16)


def resolve_executable(spec: ProcessSpec, environ: Mapping[str, str]) -> list[str]:
    """The argv prefix that starts ``spec``'s executable; LaunchError naming pkg and exec if none."""
    if spec.package is None:
        return [spec.executable]
    if spec.package == PACKAGE_NAME:
        module = f"{PACKAGE_NAME}.nodes.{spec.executable}"
        if not _module_exists(module):
            raise LaunchError(f"executable '{spec.executable}' not found in package '{spec.package}' (no module {module})")
        return [sys.executable, "-m", module]
    prefixes = [p for p in environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    for prefix in prefixes:
        candidate = Path(prefix) / "lib" / spec.package / spec.executable
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return [str(candidate)]
    searched = os.pathsep.join(prefixes) if prefixes else "AMENT_PREFIX_PATH is not set"
    raise LaunchError(
        f"executable '{spec.executable}' not found in package '{spec.package}' "
        f"(looked for lib/{spec.package}/{spec.executable} under: {searched})"
    )


def node_command(
    spec: ProcessSpec, executable: list[str], params_dir: Path, extra_params_files: Sequence[Path] = ()
) -> list[str]:
    """The full argv for ``spec``, writing generated params files into ``params_dir``.

    ``extra_params_files`` come after the node's own parameters (so they override them).
    """
    command = [*spec.prefix, *executable, *spec.arguments]
    if not spec.is_node:
        return command
    if spec.ros_arguments:
        command += ["--ros-args", *spec.ros_arguments]
    command.append("--ros-args")
    if spec.name is not None:
        command += ["-r", f"__node:={spec.name}"]
    if spec.namespace is not None:
        command += ["-r", f"__ns:={spec.namespace}"]
    for index, source in enumerate(spec.parameters):
        if isinstance(source, ParamFile):
            command += ["--params-file", str(source.path)]
        elif isinstance(source, ParamDict):
            path = write_params_file(source.values, spec, params_dir, index)
            command += ["--params-file", str(path)]
    for path in extra_params_files:
        command += ["--params-file", str(path)]
    for source_topic, target in spec.remappings:
        command += ["-r", f"{source_topic}:={target}"]
    return command


def params_file_key(spec: ProcessSpec) -> str:
    """The node key launch_ros writes: ``/ns/name`` when fully known, else ``/**``."""
    return spec.fully_qualified_name or "/**"


def write_params_file(values: Mapping, spec: ProcessSpec, params_dir: Path, index: int) -> Path:
    """Write ``{key: {ros__parameters: values}}`` and return its path."""
    params_dir.mkdir(parents=True, exist_ok=True)
    stem = (spec.name or Path(spec.executable).name).replace("/", "_")
    path = params_dir / f"{stem}_params_{index}.yaml"
    copy = 1
    while path.exists():  # same node name twice in one launch
        copy += 1
        path = params_dir / f"{stem}_params_{index}_{copy}.yaml"
    document = {params_file_key(spec): {"ros__parameters": _plain(values)}}
    path.write_text(yaml.safe_dump(document, default_flow_style=False, sort_keys=False))
    return path


def child_environment(spec: ProcessSpec) -> dict[str, str]:
    """The environment a process gets: the launch's, as ``ros2 launch`` passes it.

    Nothing is added that ``ros2 launch`` would not add (no discovery range, no
    PYTHONUNBUFFERED, no ROS_LOG_DIR: both launchers behave the same in the same
    environment), except that aerial_sim nodes learn the launcher's pid
    (:data:`LAUNCHER_PID_VARIABLE`), to exit if it died before they could ask for
    its death signal, and the launch's lockstep key (:data:`LOCKSTEP_KEY_VARIABLE`, doc/reliability.md).
    """
    environment = dict(spec.environment)
    if spec.package == PACKAGE_NAME:
        environment[LAUNCHER_PID_VARIABLE] = str(os.getpid())
        # Only nodes of this launch may announce lockstep participants (aerial_sim.physics.lockstep):
        # one random key per launch, unless the environment names one (graphs of several launches
        # share it; empty: announcements unsigned, as under ros2 launch without it).
        environment.setdefault(LOCKSTEP_KEY_VARIABLE, _LAUNCH_KEY)
    return environment


def process_labels(specs: list[ProcessSpec]) -> list[str]:
    """Output prefixes: ``exec_name``, else the node name, else the executable; numbered when repeated."""
    bases = [spec.exec_name or spec.name or Path(spec.executable).name for spec in specs]
    labels = []
    for index, base in enumerate(bases):
        count = bases.count(base)
        labels.append(base if count == 1 else f"{base}-{bases[: index + 1].count(base)}")
    return labels


def _module_exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


def _plain(value):
    """Mappings/lists as plain dicts/lists so yaml.safe_dump accepts them."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
