"""What a YAML launch file asks for: its tags evaluated into a list of processes to start.

This is the pure half of the launcher (no processes, no rclpy). It reads files
in the ROS 2 YAML launch format, as ``launch_yaml`` and ``launch_ros`` parse
them, so the same files run under a real ``ros2 launch``::

    launch:
    - arg: {name: ns, default: drone1, description: vehicle namespace}
    - group:
        children:
        - push-ros-namespace: {namespace: $(var ns)}
        - node:
            pkg: aerial_sim
            exec: imu
            name: imu
            output: screen
            param:
            - {from: $(find-pkg-share aerial_sim)/config/imu.yaml}
            - {name: seed, value: 3}
            remap:
            - {from: imu/data, to: imu/raw}

Entities are evaluated in file order against a scope of launch configurations
(``arg``/``let``/include arguments), the pushed ROS namespace and the
environment, exactly as the launch service visits them: ``arg`` keeps a value
already given (command line or include), a scoped ``group`` (the default)
restores the scope afterwards, and ``include`` is not scoped (its arguments and
``let`` values stay visible after it, as in ROS 2).

Supported tags: arg, let, node, executable, include, group, push-ros-namespace,
set_env, unset_env, log. Anything else is a :class:`LaunchError` naming the tag
and file.
"""

from __future__ import annotations

import difflib
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from aerial_sim.launcher import substitutions
from aerial_sim.launcher.errors import LaunchError
from aerial_sim.launcher.plan import (
    ArgumentDeclaration,
    DEFAULT_SIGKILL_TIMEOUT_S,
    DEFAULT_SIGTERM_TIMEOUT_S,
    IGNORED_PROCESS_ATTRIBUTES,
    LaunchPlan,
    OUTPUT_MODES,
    ParamDict,
    ParamFile,
    ParamSource,
    ProcessSpec,
)
from aerial_sim.launcher.ros_names import (
    scalar_text,
    check_namespace,
    check_node_name,
    coerce_parameter,
    make_namespace_absolute,
    prefix_namespace,
)
from aerial_sim.paths import PACKAGE_NAME, package_share


#: Include depth that can only mean a file including itself.
MAX_INCLUDE_DEPTH = 32


#: Launch arguments that launch itself reads (ExecuteLocal's timeouts): valid without an ``arg`` tag.
LAUNCH_OWN_ARGUMENTS = frozenset({"sigterm_timeout", "sigkill_timeout"})


_CONDITIONS = frozenset({"if", "unless"})


#: libyaml's safe loader when PyYAML was built with it (about 10x faster), else the pure one.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class _Scope:
    """The mutable state the launch service carries while visiting entities."""

    configurations: dict[str, str]
    environ: dict[str, str]
    ros_namespace: str | None = None

    def copy(self) -> "_Scope":
        return _Scope(dict(self.configurations), dict(self.environ), self.ros_namespace)


class _Context:
    """The :class:`substitutions.SubstitutionContext` for one file in one scope."""

    def __init__(self, scope: _Scope, current_file: Path):
        self.configurations = scope.configurations
        self.environ = scope.environ
        self.current_file = current_file

    def find_package_share(self, package: str) -> Path:
        return find_package_share(package)

    def find_package_prefix(self, package: str) -> Path:
        return Path(_ament_lookup("get_package_prefix", package))


def find_package_share(package: str) -> Path:
    """A package's share directory: ours from :func:`package_share`, others from the ament index."""
    if package == PACKAGE_NAME:
        return package_share()
    return Path(_ament_lookup("get_package_share_directory", package))


def _ament_lookup(function: str, package: str) -> str:
    """Find a package in the ament resource index (ament_index_python, on AMENT_PREFIX_PATH)."""
    try:
        from ament_index_python import packages
    except ImportError as error:
        raise LaunchError(f"cannot look up package '{package}': ament_index_python is not installed") from error
    try:
        return getattr(packages, function)(package)
    except (LookupError, ValueError, OSError) as error:
        searched = os.environ.get("AMENT_PREFIX_PATH") or "(AMENT_PREFIX_PATH is not set)"
        raise LaunchError(f"package '{package}' not found (searched AMENT_PREFIX_PATH: {searched})") from error


def parse_cli_arguments(items: list[str]) -> dict[str, str]:
    """``['rate:=50', 'ns:=a']`` -> dict, refusing what ``ros2 launch`` refuses.

    ``ros2 launch`` rejects an argument without ``:=``, one starting with ``:=``
    and one ending in its only ``:=`` (an empty value, e.g. ``mission:=``).
    """
    values: dict[str, str] = {}
    for item in items:
        count = item.count(":=")
        if count == 0 or item.startswith(":=") or (count == 1 and item.endswith(":=")):
            hint = " (ros2 launch refuses empty values too)" if item.endswith(":=") and count == 1 else ""
            raise LaunchError(f"malformed launch argument '{item}': expected name:=value{hint}")
        name, _, value = item.partition(":=")
        values[name] = value
    return values


def check_arguments_declared(given: Mapping[str, str], declared: set[str], file: Path) -> None:
    """Refuse a command-line argument no launch file of the launch declares, naming the closest one.

    ``ros2 launch`` ignores such arguments silently (``use_camra:=false`` leaves
    the camera on); here they are an error.
    """
    for name in given:
        if name in declared or name in LAUNCH_OWN_ARGUMENTS:
            continue
        close = difflib.get_close_matches(name, sorted(declared), n=1, cutoff=0.6)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        listing = f" (see: aerial_sim launch {file.name} --show-args)"
        raise LaunchError(f"unknown launch argument '{name}'{hint}{listing}")


def load_launch_file(
    path: str | Path, arguments: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None
) -> LaunchPlan:
    """Evaluate a YAML launch file with ``name:=value`` arguments into a :class:`LaunchPlan`.

    An argument that no file of the launch declares is a :class:`LaunchError`
    naming the closest declared one.
    """
    environ = dict(os.environ if environ is None else environ)
    scope = _Scope(configurations=dict(arguments or {}), environ=environ)
    check_arguments_declared(scope.configurations, declared_argument_names(Path(path), scope.copy()), Path(path))
    evaluator = _Evaluator(initial_environ=environ)
    evaluator.include(Path(path), scope, depth=0)
    evaluator.plan.configurations = dict(scope.configurations)
    return evaluator.plan


def declared_argument_names(path: Path, scope: "_Scope", depth: int = 0) -> set[str]:
    """Every ``arg`` name in ``path`` and the files it includes, whatever the conditions say.

    A file that is included only under some condition still declares its
    arguments (``attitude_source:=imu`` is valid for sim.launch.yaml even with
    ``use_controller:=false``). Include paths that cannot be evaluated yet are skipped.
    """
    names: set[str] = set()
    if depth > MAX_INCLUDE_DEPTH:
        return names
    pending = list(read_launch_entities(path))
    context = _Context(scope, path.resolve())
    while pending:
        tag, body = _scanned_tag(pending.pop())
        if body is None:
            continue
        try:
            if tag == "arg" and "name" in body:
                names.add(substitutions.substitute(scalar_text(body["name"]), context))
            elif tag == "group" and isinstance(body.get("children"), list):
                pending.extend(body["children"])
            elif tag == "include" and "file" in body:
                included = Path(substitutions.substitute(scalar_text(body["file"]), context)).expanduser()
                if included.is_file():
                    names |= declared_argument_names(included, scope, depth + 1)
        except LaunchError:
            continue
    return names


def _scanned_tag(entity: Any) -> tuple[str, dict | None]:
    """A launch entry's tag and body as the argument scans read it (leniently: the evaluator reports a
    malformed entry), ``include: <path>`` taken as ``{file: <path>}``; the body is None where the entry is
    not one tag with a mapping body."""
    if not isinstance(entity, dict) or len(entity) != 1:
        return "", None
    ((tag, body),) = entity.items()
    if tag == "include" and isinstance(body, str):
        body = {"file": body}
    return tag, body if isinstance(body, dict) else None


#: path -> (its text, its ``launch:`` list) of the files read so far (:func:`read_launch_entities`).
_READ: dict[str, tuple[str, list[Any]]] = {}


def read_launch_entities(path: Path) -> list[Any]:
    """The ``launch:`` list of a YAML launch file (errors name the file).

    A text is parsed once per process: a launch reads each of its files twice (the argument scan, then the
    evaluation), and the parse was most of the evaluation's CPU. The lists returned are shared: read them,
    never change them."""
    if path.suffix not in (".yaml", ".yml"):
        raise LaunchError(f"{path}: only YAML launch files (.yaml, .yml) are supported")
    try:
        text = path.read_text()
    except FileNotFoundError as error:
        raise LaunchError(f"launch file not found: {path}") from error
    except IsADirectoryError as error:
        raise LaunchError(f"launch file is a directory: {path}") from error
    known = _READ.get(os.fspath(path))
    if known is not None and known[0] == text:
        return known[1]
    try:
        document = yaml.load(text, Loader=_YAML_LOADER)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise LaunchError(f"{path}: not valid YAML{where}") from error
    if not isinstance(document, dict) or "launch" not in document:
        raise LaunchError(f"{path}: expected a top-level 'launch:' list")
    entities = document["launch"] or []
    if not isinstance(entities, list):
        raise LaunchError(f"{path}: 'launch:' must be a list of tags")
    _READ[os.fspath(path)] = (text, entities)
    return entities


def declared_arguments(path: Path, include_nested: bool = False) -> list[ArgumentDeclaration]:
    """The ``arg`` tags of a file, unevaluated (for ``--show-args``): those at its top level, or with
    ``include_nested`` also those in its groups and in the files it includes (whatever their conditions
    say), depth first in file order, the first declaration of a name kept: what ``ros2 launch
    --show-args`` lists. Include paths that cannot be evaluated without arguments are skipped."""
    declarations: dict[str, ArgumentDeclaration] = {}
    scope = _Scope(configurations={}, environ=dict(os.environ))
    _collect_declarations(Path(path), scope, include_nested, declarations, depth=0)
    return list(declarations.values())


def _collect_declarations(path: Path, scope: _Scope, nested: bool, found: dict[str, ArgumentDeclaration],
                          depth: int) -> None:
    if depth > MAX_INCLUDE_DEPTH:
        return
    context = _Context(scope, path.resolve())

    def visit(entities: list[Any], top: bool) -> None:
        for entity in entities:
            tag, body = _scanned_tag(entity)
            if body is None:
                continue
            if tag == "arg" and (top or nested):
                declaration = _declaration(body)
                found.setdefault(declaration.name, declaration)
            elif nested and tag == "group" and isinstance(body.get("children"), list):
                visit(body["children"], top=False)
            elif nested and tag == "include" and "file" in body:
                try:
                    included = Path(substitutions.substitute(scalar_text(body["file"]), context)).expanduser()
                except LaunchError:
                    continue
                if included.is_file():
                    _collect_declarations(included, scope, nested, found, depth + 1)

    visit(read_launch_entities(path), top=True)


def _declaration(body: dict) -> ArgumentDeclaration:
    default = body.get("default")
    choices = [c for c in body.get("choices") or [] if isinstance(c, dict)]
    return ArgumentDeclaration(
        name=scalar_text(body.get("name", "?")),
        default=None if default is None else scalar_text(default),
        description=scalar_text(body.get("description", "")),
        choices=tuple(scalar_text(c.get("value", "")) for c in choices),
    )


class _Evaluator:
    """Walks launch entities, filling a :class:`LaunchPlan`."""

    def __init__(self, initial_environ: Mapping[str, str]):
        self.plan = LaunchPlan()
        self.initial_environ = dict(initial_environ)
        self.handlers = {
            "arg": self.arg,
            "let": self.let,
            "node": self.node,
            "executable": self.executable,
            "include": self.include_tag,
            "group": self.group,
            "push-ros-namespace": self.push_ros_namespace,
            "push_ros_namespace": self.push_ros_namespace,
            "set_env": self.set_env,
            "unset_env": self.unset_env,
            "log": self.log,
        }

    # -- structure ---------------------------------------------------------------------------

    def include(self, path: Path, scope: _Scope, depth: int) -> None:
        if depth > MAX_INCLUDE_DEPTH:
            raise LaunchError(f"{path}: includes nested deeper than {MAX_INCLUDE_DEPTH} (a file including itself?)")
        self.run(read_launch_entities(path), scope, path.resolve(), depth)

    def run(self, entities: list[Any], scope: _Scope, file: Path, depth: int) -> None:
        for entity in entities:
            if not isinstance(entity, dict) or len(entity) != 1:
                raise LaunchError(f"{file}: each launch entry must be one tag (a mapping with one key), got {entity!r}")
            ((tag, body),) = entity.items()
            handler = self.handlers.get(tag)
            if handler is None:
                supported = ", ".join(sorted(set(self.handlers) - {"push_ros_namespace"}))
                raise LaunchError(f"{file}: unsupported tag '{tag}' (supported: {supported})")
            if isinstance(body, dict) and not self.condition(body, scope, file, tag):
                continue
            handler(_Tag(tag, body, file), scope, depth)

    def condition(self, body: dict, scope: _Scope, file: Path, tag: str) -> bool:
        for key, wanted in (("if", True), ("unless", False)):
            if key in body:
                text = self.text(body[key], scope, file)
                if substitutions.to_bool(text, f"{file}: {tag}: '{key}'") != wanted:
                    return False
        return True

    def text(self, value: Any, scope: _Scope, file: Path) -> str:
        try:
            return substitutions.substitute(scalar_text(value), _Context(scope, file))
        except LaunchError as error:
            raise LaunchError(f"{file}: {error}") from None

    # -- tags ----------------------------------------------------------------------------------

    def arg(self, tag: "_Tag", scope: _Scope, depth: int) -> None:
        body = tag.mapping({"name"}, {"default", "description", "choices"})
        name = self.text(body["name"], scope, tag.file)
        default = body.get("default")
        choices = tuple(
            self.text(_Tag("choices", choice, tag.file).mapping({"value"}, set())["value"], scope, tag.file)
            for choice in tag.entity_list(body.get("choices"), "choices")
        )
        declaration = ArgumentDeclaration(
            name=name,
            default=None if default is None else scalar_text(default),
            description=scalar_text(body.get("description", "")),
            choices=choices,
        )
        self.plan.arguments.append(declaration)
        if name not in scope.configurations:
            if default is None:
                hint = f" ({declaration.description})" if declaration.description else ""
                raise LaunchError(f"{tag.file}: missing launch argument '{name}'{hint}: pass {name}:=VALUE")
            scope.configurations[name] = self.text(default, scope, tag.file)
        value = scope.configurations[name]
        if choices and value not in choices:
            raise LaunchError(f"{tag.file}: launch argument '{name}' is '{value}', expected one of: {', '.join(choices)}")

    def let(self, tag: "_Tag", scope: _Scope, depth: int) -> None:
        body = tag.mapping({"name", "value"}, set())
        scope.configurations[self.text(body["name"], scope, tag.file)] = self.text(body["value"], scope, tag.file)

    def push_ros_namespace(self, tag: "_Tag", scope: _Scope, depth: int) -> None:
        body = tag.mapping({"namespace"}, set())
        pushed = self.text(body["namespace"], scope, tag.file)
        namespace = prefix_namespace(scope.ros_namespace, pushed)
        check_namespace(make_namespace_absolute(namespace), f"{tag.file}: push-ros-namespace '{pushed}'")
        scope.ros_namespace = namespace

    def set_env(self, tag: "_Tag", scope: _Scope, depth: int) -> None:
        body = tag.mapping({"name", "value"}, set())
        scope.environ[self.text(body["name"], scope, tag.file)] = self.text(body["value"], scope, tag.file)

    def unset_env(self, tag: "_Tag", scope: _Scope, depth: int) -> None:
        body = tag.mapping({"name"}, set())
        scope.environ.pop(self.text(body["name"], scope, tag.file), None)

    def log(self, tag: "_Tag", scope: _Scope, depth: int) -> None:
        body = tag.mapping({"message"}, {"level"})
        self.plan.messages.append(self.text(body["message"], scope, tag.file))

    def group(self, tag: "_Tag", scope: _Scope, depth: int) -> None:
        body = tag.mapping(set(), {"scoped", "forwarding", "keep", "children"})
        scoped = self.flag(body, "scoped", True, scope, tag)
        forwarding = self.flag(body, "forwarding", True, scope, tag)
        keep = dict(self.pairs(tag, "keep", ("name", "value"), scope))
        inner = scope.copy() if scoped else scope
        if scoped and not forwarding:
            inner.configurations.clear()
            inner.environ = dict(self.initial_environ)
            inner.ros_namespace = None
        inner.configurations.update(keep)
        self.run(tag.entity_list(body.get("children"), "children"), inner, tag.file, depth)

    def include_tag(self, tag: "_Tag", scope: _Scope, depth: int) -> None:
        if isinstance(tag.body, str):  # `- include: path` form
            tag = _Tag(tag.name, {"file": tag.body}, tag.file)
        body = tag.mapping({"file"}, {"arg"})
        path = Path(self.text(body["file"], scope, tag.file)).expanduser()
        arguments = self.pairs(tag, "arg", ("name", "value"), scope)
        if not path.is_file():
            raise LaunchError(f"{tag.file}: included launch file not found: {path}")
        scope.configurations.update(arguments)
        self.include(path, scope, depth + 1)

    def node(self, tag: "_Tag", scope: _Scope, depth: int) -> None:
        body = tag.mapping(
            {"exec"},
            {"pkg", "name", "namespace", "exec_name", "args", "ros_args", "param", "remap"} | _PROCESS_ATTRIBUTES,
        )
        name = self.text(body["name"], scope, tag.file) if "name" in body else None
        namespace = self.text(body["namespace"], scope, tag.file) if "namespace" in body else None
        executable = self.text(body["exec"], scope, tag.file)
        package = self.text(body["pkg"], scope, tag.file) if "pkg" in body else None
        full_namespace = make_namespace_absolute(prefix_namespace(scope.ros_namespace, namespace))
        if full_namespace is not None:
            check_namespace(full_namespace, f"{tag.file}: node '{executable}': namespace")
        if name is not None:
            check_node_name(name, f"{tag.file}: node '{executable}'")
        spec = ProcessSpec(
            executable=executable,
            package=package or None,
            name=name,
            namespace=full_namespace,
            arguments=self.cmdline(body.get("args"), scope, tag.file),
            ros_arguments=self.cmdline(body.get("ros_args"), scope, tag.file),
            parameters=self.parameters(tag.entity_list(body.get("param"), "param"), scope, tag.file),
            remappings=tuple(self.pairs(tag, "remap", ("from", "to"), scope)),
            exec_name=self.text(body["exec_name"], scope, tag.file) if "exec_name" in body else None,
            **self.process_options(body, scope, tag),
        )
        self.plan.processes.append(spec)

    def executable(self, tag: "_Tag", scope: _Scope, depth: int) -> None:
        body = tag.mapping({"cmd"}, {"name"} | _PROCESS_ATTRIBUTES)
        command = self.cmdline(body["cmd"], scope, tag.file)
        if not command:
            raise LaunchError(f"{tag.file}: executable: 'cmd' is empty")
        name = self.text(body["name"], scope, tag.file) if "name" in body else None
        spec = ProcessSpec(
            executable=command[0],
            is_node=False,
            arguments=command[1:],
            name=name,
            **self.process_options(body, scope, tag),
        )
        self.plan.processes.append(spec)

    # -- pieces --------------------------------------------------------------------------------

    def process_options(self, body: dict, scope: _Scope, tag: "_Tag") -> dict[str, Any]:
        """The ExecuteProcess attributes shared by ``node`` and ``executable``."""
        for ignored in sorted(IGNORED_PROCESS_ATTRIBUTES & set(body)):
            self.plan.warnings.append(f"{tag.file}: {tag.name}: attribute '{ignored}' is ignored by aerial_sim launch")
        output = self.text(body.get("output", "log"), scope, tag.file)
        if output not in OUTPUT_MODES:
            raise LaunchError(f"{tag.file}: {tag.name}: output must be one of {', '.join(OUTPUT_MODES)}, got '{output}'")
        # launch ExecuteProcess.parse compares the raw attribute with 'shutdown' (no substitution).
        on_exit = body.get("on_exit")
        if on_exit is not None and on_exit != "shutdown":
            raise LaunchError(
                f"{tag.file}: {tag.name}: on_exit supports only the literal 'shutdown' (as ros2 launch), got {on_exit!r}"
            )
        environment = dict(scope.environ)
        environment.update(self.pairs(tag, "env", ("name", "value"), scope))
        return {
            "output": output,
            "shutdown_on_exit": on_exit == "shutdown",
            "sigterm_timeout_s": self.timeout(body, "sigterm_timeout", DEFAULT_SIGTERM_TIMEOUT_S, scope, tag),
            "sigkill_timeout_s": self.timeout(body, "sigkill_timeout", DEFAULT_SIGKILL_TIMEOUT_S, scope, tag),
            "cwd": self.text(body["cwd"], scope, tag.file) if "cwd" in body else None,
            "prefix": self.cmdline(body.get("launch-prefix"), scope, tag.file),
            "environment": environment,
        }

    def timeout(self, body: dict, key: str, default: float, scope: _Scope, tag: "_Tag") -> float:
        """A process's ``sigterm_timeout``/``sigkill_timeout``: attribute, else launch argument, else default.

        As launch_yaml reads it (launch ``ExecuteProcess.parse``: ``get_attr(key, data_type=float)``,
        then ``< 0.0``; launch_yaml ``Entity.get_attr`` only checks types, never converts): the
        attribute must be a YAML float (``30.0``); ``30`` fails the type check and ``"30"`` or a
        substitution the comparison, so ros2 launch refuses them and so does this. The launch
        argument of the same name (``sigterm_timeout:=20``, ``LaunchConfiguration(key, default=5)``
        in ``ExecuteLocal.__init__``) is text, converted with ``float()``.
        """
        if key in body:
            value = body[key]
            if not isinstance(value, float):
                raise LaunchError(
                    f"{tag.file}: {tag.name}: {key} must be a YAML float such as 5.0 "
                    f"(ros2 launch refuses {value!r}), got {type(value).__name__}"
                )
            if not value >= 0.0:
                raise LaunchError(f"{tag.file}: {tag.name}: {key} must be >= 0, got {value!r}")
            return value
        text = scope.configurations.get(key, str(default))
        try:
            seconds = float(text)
        except ValueError:
            seconds = -1.0
        if not seconds >= 0.0:
            raise LaunchError(f"{tag.file}: {tag.name}: launch argument {key} must be a number of seconds >= 0, got '{text}'")
        return seconds

    def pairs(self, tag: "_Tag", key: str, names: tuple[str, str], scope: _Scope) -> list[tuple[str, str]]:
        """A list attribute of two-attribute entries (``arg``/``env``/``keep``: name, value; ``remap``: from, to)."""
        first, second = names
        result = []
        for item in tag.entity_list(tag.body.get(key), key):
            entry = _Tag(key, item, tag.file).mapping({first, second}, set())
            result.append((self.text(entry[first], scope, tag.file), self.text(entry[second], scope, tag.file)))
        return result

    def flag(self, body: dict, key: str, default: bool, scope: _Scope, tag: "_Tag") -> bool:
        if key not in body:
            return default
        if isinstance(body[key], bool):
            return body[key]
        return substitutions.to_bool(self.text(body[key], scope, tag.file), f"{tag.file}: {tag.name}: '{key}'")

    def cmdline(self, value: Any, scope: _Scope, file: Path) -> tuple[str, ...]:
        """Split a command line as launch's ``_parse_cmdline`` does.

        Literal text is split like a shell would; a substitution's result is
        never split, and sticks to text written right next to it.
        """
        if value is None:
            return ()
        try:
            parts = substitutions.parse(scalar_text(value))
            context = _Context(scope, file)
            result: list[str] = []
            current: list[str] | None = None
            for part in parts:
                if isinstance(part, substitutions.Substitution):
                    current = (current or []) + [substitutions.evaluate((part,), context)]
                    continue
                tokens = shlex.split(part)
                if not tokens:
                    current = _close(current, result)
                    continue
                if part[0].isspace():
                    current = _close(current, result)
                current = (current or []) + [tokens[0]]
                if len(tokens) > 1:
                    current = _close(current, result)
                    result.extend(tokens[1:-1])
                    current = [tokens[-1]]
                if part[-1].isspace():
                    current = _close(current, result)
            _close(current, result)
            return tuple(result)
        except ValueError as error:  # shlex: unbalanced quotes
            raise LaunchError(f"{file}: cannot split command line '{value}': {error}") from None
        except LaunchError as error:
            raise LaunchError(f"{file}: {error}") from None

    def parameters(self, entries: list[Any], scope: _Scope, file: Path) -> tuple[ParamSource, ...]:
        """``param`` entries in order: ``from`` files and one generated dict per inline entry.

        Each inline entry becomes its own params file, in the order written,
        which is what launch_ros (Humble onwards) passes.
        """
        sources: list[ParamSource] = []
        for item in entries:
            entry = _Tag("param", item, file).mapping(set(), {"name", "from", "value", "type", "param", "allow_substs"})
            if "from" in entry and "name" in entry:
                raise LaunchError(f"{file}: param: 'name' and 'from' are mutually exclusive")
            if "from" in entry:
                path = Path(self.text(entry["from"], scope, file)).expanduser()
                if not path.is_file():
                    raise LaunchError(f"{file}: parameter file not found: {path}")
                sources.append(ParamFile(path))
            elif "name" in entry:
                sources.append(ParamDict(self.parameter_dict([item], scope, file)))
            else:
                raise LaunchError(f"{file}: param needs a 'name' or a 'from' attribute")
        return tuple(sources)

    def parameter_dict(self, entries: list[Any], scope: _Scope, file: Path) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for item in entries:
            entry = _Tag("param", item, file).mapping({"name"}, {"value", "type", "param"})
            name = self.text(entry["name"], scope, file)
            if ("value" in entry) == ("param" in entry):
                raise LaunchError(f"{file}: param '{name}' needs exactly one of 'value' or nested 'param'")
            if "param" in entry:
                nested = _Tag("param", entry, file).entity_list(entry["param"], "param")
                values[name] = self.parameter_dict(nested, scope, file)
                continue
            type_name = self.text(entry["type"], scope, file) if "type" in entry else None
            values[name] = self.parameter_value(entry["value"], type_name, scope, file, name)
        return values

    def parameter_value(self, value: Any, type_name: str | None, scope: _Scope, file: Path, name: str) -> Any:
        if isinstance(value, list):
            items = [self.parameter_value(v, type_name, scope, file, name) for v in value]
            if len({type(v) for v in items}) > 1:
                raise LaunchError(f"{file}: param '{name}': list items must all have the same type")
            return items
        if isinstance(value, str):
            value = self.text(value, scope, file)
        return coerce_parameter(value, type_name, f"{file}: param '{name}'")


_PROCESS_ATTRIBUTES = (
    frozenset({"output", "on_exit", "cwd", "launch-prefix", "env", "sigterm_timeout", "sigkill_timeout"})
    | IGNORED_PROCESS_ATTRIBUTES
)


@dataclass(frozen=True)
class _Tag:
    """A tag's body with the file it came from, for messages that name both."""

    name: str
    body: Any
    file: Path

    def mapping(self, required: set[str], optional: set[str]) -> dict:
        if not isinstance(self.body, dict):
            raise LaunchError(f"{self.file}: '{self.name}' expects attributes (a mapping), got {self.body!r}")
        missing = sorted(required - set(self.body))
        if missing:
            raise LaunchError(f"{self.file}: {self.name}: missing attribute '{missing[0]}'")
        unknown = sorted(set(self.body) - required - optional - _CONDITIONS)
        if unknown:
            raise LaunchError(f"{self.file}: {self.name}: unknown attribute '{unknown[0]}'")
        return self.body

    def entity_list(self, value: Any, key: str) -> list:
        if value is None:
            return []
        if not isinstance(value, list):
            raise LaunchError(f"{self.file}: {self.name}: '{key}' must be a list")
        return value


def _close(current: list[str] | None, result: list[str]) -> None:
    """End the command-line argument being built (if any); returns None for the next one."""
    if current is not None:
        result.append("".join(current))
    return None
