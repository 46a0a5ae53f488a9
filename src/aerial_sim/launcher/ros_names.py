"""ROS names and parameter values as ``launch_ros`` checks and types them: namespaces, node names,\n``param`` values coerced like launch_ros's, and the text of a YAML scalar.\n"""

from __future__ import annotations

from typing import Any

import yaml

from aerial_sim.launcher.errors import LaunchError


def coerce_parameter(value: Any, type_name: str | None, where: str) -> Any:
    """A parameter value as launch_ros types it: explicit ``type``, else YAML's reading of the text.

    launch_ros ``ParameterValue.evaluate`` -> launch ``perform_typed_substitution`` ->
    ``coerce_to_type`` (launch/utilities/type_utils.py): without a type, non-empty text
    is ``yaml.safe_load``-ed (YAML 1.1: ``yes``/``on`` are booleans, ``1e3`` is text,
    ``0x10`` is 16) and must give a bool, int, float, str or a list of one of those
    types (``null``, a mapping or a date is an error); empty text stays ''. YAML numbers
    and booleans written in the file stay as they are.
    """
    if type_name is None:
        if not isinstance(value, str) or not value:
            return value
        try:
            loaded = yaml.safe_load(value)
        except yaml.YAMLError:
            raise LaunchError(f"{where}: '{value}' is not valid YAML (ros2 launch refuses it too)") from None
        if isinstance(loaded, (bool, int, float, str)):
            return loaded
        if isinstance(loaded, list) and all(isinstance(v, (bool, int, float, str)) for v in loaded):
            if len({type(v) for v in loaded}) <= 1:
                return loaded
        raise LaunchError(
            f"{where}: '{value}' reads as {type(loaded).__name__} in YAML, which ros2 launch refuses "
            "(give type: str or quote it)"
        )
    try:
        if type_name == "str":
            return scalar_text(value)
        if type_name == "bool":
            if isinstance(value, bool):
                return value
            text = {"1": "true", "0": "false"}.get(str(value), str(value))
            loaded = yaml.safe_load(text) if text else text
            if isinstance(loaded, bool):
                return loaded
            raise ValueError(text)
        if type_name in ("int", "float") and not isinstance(value, bool):
            return int(value) if type_name == "int" else float(value)
    except (ValueError, yaml.YAMLError):
        raise LaunchError(f"{where}: '{value}' is not a valid {type_name}") from None
    raise LaunchError(f"{where}: unsupported or mismatched type '{type_name}' for {value!r} (use str, int, float or bool)")


def prefix_namespace(base: str | None, namespace: str | None) -> str | None:
    """launch_ros's rule: a relative namespace is appended to the pushed one; absolute wins."""
    if base is None or not base.strip("/"):
        return namespace if namespace is not None else base
    if namespace is None:
        return base
    if namespace.startswith("/"):
        return namespace
    return f"{base.rstrip('/')}/{namespace}" if namespace else base


def check_namespace(namespace: str, what: str) -> None:
    """ROS 2's rule for a namespace (rmw_validate_namespace): '/'-separated tokens of letters,
    digits and '_', none starting with a digit, no empty token; ``ros2 launch`` refuses others too."""
    if namespace == "/":
        return
    tokens = namespace[1:].split("/") if namespace.startswith("/") else [namespace]
    for token in tokens:
        if not token or not all(c.isascii() and (c.isalnum() or c == "_") for c in token) or token[0].isdigit():
            raise LaunchError(
                f"{what}: invalid ROS namespace '{namespace}' (letters, digits and '_' between '/', "
                "not starting with a digit)"
            )


def check_node_name(name: str, what: str) -> None:
    """ROS 2's rule for a node name (rmw_validate_node_name)."""
    if not name or not all(c.isascii() and (c.isalnum() or c == "_") for c in name) or name[0].isdigit():
        raise LaunchError(f"{what}: invalid node name '{name}' (letters, digits and '_', not starting with a digit)")


def make_namespace_absolute(namespace: str | None) -> str | None:
    if namespace is None:
        return None
    return namespace if namespace.startswith("/") else f"/{namespace}"


def scalar_text(value: Any) -> str:
    """YAML scalars as launch text: booleans lower-case, numbers as written."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise LaunchError(f"expected a text value, got {value!r}")
