"""Typed parameter loading: frozen dataclasses from YAML, with no silent defaults.

Every model in aerial_sim is configured by a frozen dataclass whose field
defaults are the only defaults in the project. YAML files (and ROS parameters)
override them; a key the dataclass does not have, or a value of the wrong type,
is a :class:`ParamsError` that names the offending key path, e.g.
``vehicle.rotors[2].diameter_m: expected a number, got 'big'``.

Files may be plain mappings or ROS 2 parameter files
(``<node_name>: {ros__parameters: {...}}``); :func:`load_yaml_params` accepts both.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from pathlib import Path
from typing import Any, Mapping, TypeVar

import yaml

T = TypeVar("T")

#: libyaml's parser where PyYAML has it (the same documents, several times faster: a graph's nodes read about
#: fifteen parameter and preset files at start).
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ParamsError(ValueError):
    """A configuration value is missing, unknown, of the wrong type or out of range."""


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    """``typing.get_type_hints(cls)``, worked out once per class (a scene of thousands of objects asks per object)."""
    return typing.get_type_hints(cls)


def params_from_mapping(cls: type[T], values: Mapping[str, Any] | None, where: str = "") -> T:
    """Build dataclass ``cls`` from ``values``, recursing into nested dataclasses.

    Keys absent from ``values`` keep the dataclass default. Unknown keys raise
    :class:`ParamsError` naming the key. Lists become tuples, so the result stays
    hashable and immutable like the frozen dataclass itself.
    """
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise ParamsError(f"{where or cls.__name__}: expected a mapping, got {type(values).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        known = ", ".join(sorted(fields))
        raise ParamsError(f"{_join(where, unknown[0])}: unknown parameter (known: {known})")
    hints = _type_hints(cls)
    kwargs = {name: _convert(hints[name], value, _join(where, name)) for name, value in values.items()}
    try:
        return cls(**kwargs)
    except ParamsError:
        raise
    except (TypeError, ValueError) as error:
        raise ParamsError(f"{where or cls.__name__}: {error}") from error


def read_yaml_file(path: Path) -> Any:
    """The YAML document in ``path`` ({} for an empty file); a missing file or bad YAML is a :class:`ParamsError`
    naming the file."""
    try:
        return yaml.load(path.read_text(), Loader=SAFE_LOADER) or {}
    except FileNotFoundError as error:
        raise ParamsError(f"{path}: file not found") from error
    except yaml.YAMLError as error:
        raise ParamsError(f"{path}: not valid YAML: {error}") from error


def load_yaml_params(cls: type[T], path: str | Path, section: str | None = None) -> T:
    """Load ``cls`` from a YAML file; ``section`` selects a top-level key (a node name).

    ROS 2 parameter files are unwrapped: ``{node: {ros__parameters: {...}}}``.
    """
    path = Path(path)
    values = unwrap_ros_parameters(read_yaml_file(path), section)
    return params_from_mapping(cls, values, where=path.name)


def load_named_params(cls: type[T], name_or_path: str, subdir: str, what: str, available: str = "*.yaml") -> T:
    """Load ``config/<subdir>/<name>.yaml`` or a YAML path as ``cls``; a missing file is a
    :class:`ParamsError` naming ``what`` and the files that are there (matching ``available``)."""
    from aerial_sim.paths import resolve_config

    path = resolve_config(name_or_path, subdir)
    if not Path(path).is_file():
        found = sorted(p.stem for p in Path(path).parent.glob(available))
        raise ParamsError(f"{what} '{name_or_path}': {path} not found (available: {', '.join(found) or 'none'})")
    return load_yaml_params(cls, path)


def unwrap_ros_parameters(document: Mapping[str, Any], section: str | None = None) -> Mapping[str, Any]:
    """Return the plain parameter mapping inside a (possibly ROS-style) YAML document."""
    if section is not None:
        if section not in document:
            raise ParamsError(f"no section '{section}' (found: {', '.join(map(str, document))})")
        document = document[section]
    if isinstance(document, Mapping) and "ros__parameters" in document:
        document = document["ros__parameters"]
    if isinstance(document, Mapping) and len(document) == 1:
        (only,) = document.values()
        if isinstance(only, Mapping) and "ros__parameters" in only:
            document = only["ros__parameters"]
    return document


def flatten_params(params: Any, prefix: str = "") -> dict[str, Any]:
    """Flatten a params dataclass to dotted names (``home.latitude``), as ROS parameters are named.

    Nested dataclasses become dotted prefixes; tuples of dataclasses are not
    flattened (they are configured from files, not individual ROS parameters).
    """
    flat: dict[str, Any] = {}
    for field in dataclasses.fields(params):
        value = getattr(params, field.name)
        name = f"{prefix}{field.name}"
        if dataclasses.is_dataclass(value):
            flat.update(flatten_params(value, prefix=f"{name}."))
        else:
            flat[name] = value
    return flat


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`flatten_params` on plain values: ``{'a.b': 1}`` -> ``{'a': {'b': 1}}``."""
    nested: dict[str, Any] = {}
    for dotted, value in flat.items():
        node = nested
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def require(condition: bool, message: str) -> None:
    """Raise :class:`ParamsError` with ``message`` unless ``condition`` holds (for ``__post_init__``)."""
    if not condition:
        raise ParamsError(message)


def require_positive(owner: Any, *names: str) -> None:
    """Check that each named field of ``owner`` is a finite number > 0."""
    for name in names:
        value = getattr(owner, name)
        require(math.isfinite(value) and value > 0, f"{name} must be a positive number, got {value!r}")


def require_non_negative(owner: Any, *names: str) -> None:
    """Check that each named field of ``owner`` is a finite number >= 0."""
    for name in names:
        value = getattr(owner, name)
        require(math.isfinite(value) and value >= 0, f"{name} must be >= 0, got {value!r}")


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else str(key)


def _convert(hint: Any, value: Any, where: str) -> Any:
    """Convert ``value`` to the annotated type ``hint`` or raise ParamsError naming ``where``."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for option in (a for a in args if a is not type(None)):
            try:
                return _convert(option, value, where)
            except ParamsError as error:
                errors.append(str(error))
        raise ParamsError(errors[0] if errors else f"{where}: unsupported value {value!r}")
    if origin is typing.Literal:
        if value not in args:
            raise ParamsError(f"{where}: expected one of {list(args)}, got {value!r}")
        return value
    if dataclasses.is_dataclass(hint):
        if isinstance(value, hint):
            return value
        return params_from_mapping(hint, value, where)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ParamsError(f"{where}: expected a list, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], item, f"{where}[{i}]") for i, item in enumerate(value))
        if len(args) != len(value):
            raise ParamsError(f"{where}: expected {len(args)} values, got {len(value)}")
        return tuple(_convert(a, item, f"{where}[{i}]") for i, (a, item) in enumerate(zip(args, value)))
    if origin in (dict, Mapping) or hint in (dict,):
        if not isinstance(value, Mapping):
            raise ParamsError(f"{where}: expected a mapping, got {value!r}")
        key_type, value_type = args if args else (Any, Any)
        return {_convert(key_type, k, f"{where}.{k}"): _convert(value_type, v, f"{where}.{k}") for k, v in value.items()}
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParamsError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParamsError(f"{where}: expected an integer, got {value!r}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ParamsError(f"{where}: expected true or false, got {value!r}")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise ParamsError(f"{where}: expected a string, got {value!r}")
        return value
    return value
