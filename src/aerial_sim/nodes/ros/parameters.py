"""Params dataclasses as declared ROS parameters (:mod:`aerial_sim.config` checks them), and
parameters that name a run folder."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from rclpy.node import Node
from rcl_interfaces.msg import ParameterDescriptor

from aerial_sim.config import ParamsError, flatten_params, params_from_mapping, unflatten

T = TypeVar("T")


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
        values[name] = list(value) if isinstance(value, (tuple, list)) or is_array(value) else value
    return _build(cls, values, prefix)


def reread_params(node: Node, current: T, prefix: str = "") -> T:
    """``current``'s params dataclass built again from the node's parameters as they are now (declared
    by :func:`declare_params`, changed since with ``ros2 param set`` or a ``SetParameters`` call):
    what a node's reset service applies (e.g. a new ``seed`` for the next warm run,
    doc/batch.md). A bad value is a :class:`ParamsError` naming the parameter."""
    values: dict[str, Any] = {}
    for name, default in flatten_params(current).items():
        if dataclasses.is_dataclass(default) or _is_tuple_of_dataclasses(default):
            continue
        value = node.get_parameter(f"{prefix}{name}").value
        values[name] = list(value) if isinstance(value, (tuple, list)) or is_array(value) else value
    return _build(type(current), values, prefix)


def _build(cls: type[T], values: dict[str, Any], prefix: str) -> T:
    try:
        return params_from_mapping(cls, unflatten(values), where=prefix.rstrip("."))
    except ParamsError as error:
        # The FATAL line already names the node; the message names the parameter alone, so nodes that
        # share a bad launch argument (seed:=-1 reaches every sensor) report it in the same words.
        message = str(error)
        if message.startswith(f"{cls.__name__}: "):
            message = message[len(cls.__name__) + 2:]
        raise ParamsError(message) from None


def run_folder_parameter(value: str, parameter: str = "output_dir"):
    """The run folder for a node's ``output_dir``-style parameter (:mod:`aerial_sim.run_folder`).

    A folder that cannot be created or written is a :class:`ParamsError` naming the parameter.
    """
    from aerial_sim.run_folder import RunFolderError, resolve_run_dir

    try:
        return resolve_run_dir(value)
    except RunFolderError as error:
        raise ParamsError(f"{parameter}: {error}") from None


def is_array(value: Any) -> bool:
    return hasattr(value, "tolist") and not isinstance(value, (str, bytes))


def _is_tuple_of_dataclasses(value: Any) -> bool:
    return isinstance(value, tuple) and bool(value) and dataclasses.is_dataclass(value[0])
