"""Node parameters of a sweep: checked against the nodes' params dataclasses, written as one params file.

A sweep key ``camera.width`` is the ROS parameter ``width`` of the node named
``camera``. Each node of ``sim.launch.yaml`` declares the fields of the params
dataclasses listed in :data:`NODE_PARAMETER_TYPES` (see each node's
``declare_params`` calls), so a value is checked by building those dataclasses
from it, exactly as the node will at start-up (unknown name or wrong type =
:class:`~aerial_sim.config.ParamsError` naming the key). The classes are
imported only when a sweep uses node parameters (some live in node modules,
which import rclpy).

The run's parameters reach the nodes through ``aerial_sim launch
--params-file``: one file with a ``/**/<node>`` section per node, given to every
node after its own parameters, so it overrides them (rcl applies later files last).
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Any, Mapping

import yaml

from aerial_sim.config import ParamsError, flatten_params, params_from_mapping, unflatten

_SENSOR_OPTIONS = ("aerial_sim.sensors.params:SensorNodeOptions", "")
_HOME = ("aerial_sim.environment.geodesy:HomePoint", "home.")

#: node name -> (``module:Class``, parameter-name prefix) of every params dataclass it declares.
NODE_PARAMETER_TYPES: dict[str, tuple[tuple[str, str], ...]] = {
    "physics": (("aerial_sim.nodes.physics:PhysicsNodeParams", ""),),
    "imu": (_SENSOR_OPTIONS, ("aerial_sim.sensors.imu:ImuParams", "")),
    "barometer": (_SENSOR_OPTIONS, ("aerial_sim.sensors.barometer:BarometerParams", ""), _HOME),
    "magnetometer": (_SENSOR_OPTIONS, ("aerial_sim.sensors.magnetometer:MagnetometerParams", ""), _HOME),
    "gps": (_SENSOR_OPTIONS, ("aerial_sim.sensors.gps:GpsParams", ""), _HOME),
    "camera": (("aerial_sim.nodes.camera:CameraNodeParams", ""), ("aerial_sim.world.camera:CameraParams", "")),
    "depth_noise": (
        ("aerial_sim.nodes.depth_noise:DepthNoiseNodeParams", ""),
        ("aerial_sim.sensors.depth_noise:DepthNoiseParams", ""),
    ),
    "rotor_drag": (
        ("aerial_sim.nodes.rotor_drag:RotorDragNodeParams", ""),
        ("aerial_sim.physics.rotor_drag:RotorDragParams", ""),
    ),
    "flight_controller": (("aerial_sim.nodes.flight_controller:FlightControllerNodeParams", ""),),
    "mission": (("aerial_sim.nodes.mission:MissionNodeParams", ""),),
    "recorder": (("aerial_sim.recording.recorder:RecorderParams", ""),),
}
#: Parameters the launch file or the batch sets from the run itself.
RESERVED_PARAMETERS = {
    "lockstep": "set from the launch file's lockstep (always on in a batch)",
    "output_dir": "each run writes into its own folder",
    "use_sim_time": "every node runs on /clock",
}
#: Sensor nodes whose model defaults come from the ``preset`` parameter's datasheet file.
PRESET_NODES = {"imu", "barometer", "magnetometer", "gps"}
#: The process that hosts those four in ``sim.launch.yaml`` (``launch/sensors.launch.yaml``).
SHARED_SENSOR_PROCESS = "sensors"


def validate_node_parameters(node: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Check one run's parameters of ``node``; return them converted to the declared types.

    Raises :class:`ParamsError` naming ``node.parameter`` for an unknown node,
    an unknown or reserved parameter, or a value the node would refuse.
    """
    if node not in NODE_PARAMETER_TYPES:
        raise ParamsError(f"{node}: no node of that name takes sweep parameters (nodes: {', '.join(NODE_PARAMETER_TYPES)})")
    for name in values:
        if name in RESERVED_PARAMETERS:
            raise ParamsError(f"{node}.{name}: {RESERVED_PARAMETERS[name]}")
    types = [(_import(target), prefix) for target, prefix in NODE_PARAMETER_TYPES[node]]
    owners: dict[str, tuple[type, str]] = {}
    for name in values:
        owner = next((t for t in types if _declares(t[0], t[1], name)), None)
        if owner is None:
            known = sorted(f"{prefix}{n}" for cls, prefix in types for n in flatten_params(cls()))
            raise ParamsError(f"{node}.{name}: unknown parameter of node '{node}' (known: {', '.join(known)})")
        owners[name] = owner
    preset = _preset(node, values, types)
    converted: dict[str, Any] = {}
    for cls, prefix in {owner for owner in owners.values()}:
        mine = {name[len(prefix):]: value for name, value in values.items() if owners[name] == (cls, prefix)}
        defaults = _defaults(cls, preset)
        try:
            params = params_from_mapping(cls, unflatten({**flatten_params(defaults), **mine}), where=f"{node}")
        except ParamsError:
            raise
        flat = flatten_params(params)
        converted.update({f"{prefix}{name}": _plain(flat[name]) for name in mine})
    return converted


def write_params_file(node_parameters: Mapping[str, Mapping[str, Any]], path: Path) -> Path:
    """Write ``{'/**/<node>': {'ros__parameters': {...}}}`` for every node (the launcher's ``--params-file``).

    The sensor nodes share one process, ``sensors``, which hands ``imu.<name>`` to its ``imu``
    node (:mod:`aerial_sim.nodes.sensors`): their values go to that process under those names too.
    """
    document = {f"/**/{node}": {"ros__parameters": {k: _plain(v) for k, v in values.items()}}
                for node, values in node_parameters.items()}
    shared = {f"{node}.{k}": _plain(v) for node, values in node_parameters.items() if node in PRESET_NODES
              for k, v in values.items()}
    if shared:
        document[f"/**/{SHARED_SENSOR_PROCESS}"] = {"ros__parameters": shared}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, default_flow_style=False, sort_keys=False))
    return path


def _declares(cls: type, prefix: str, name: str) -> bool:
    if prefix and not name.startswith(prefix):
        return False
    return name[len(prefix):] in flatten_params(cls())


def _preset(node: str, values: Mapping[str, Any], types) -> str:
    """The datasheet preset a sensor node loads its model defaults from (its own default unless swept)."""
    if node not in PRESET_NODES:
        return ""
    return str(values.get("preset", _NODE_DEFAULT_PRESETS[node]))


#: The presets the sensor nodes load when none is given (see each node's constructor).
_NODE_DEFAULT_PRESETS = {"imu": "mpu6000", "barometer": "ms5611", "magnetometer": "hmc5883l", "gps": "airsim_gps"}


def _defaults(cls: type, preset: str):
    from aerial_sim.sensors.params import SensorNodeOptions, load_preset

    if preset and cls is not SensorNodeOptions and cls.__module__.startswith("aerial_sim.sensors."):
        return load_preset(cls, preset)
    return cls()


def _import(target: str) -> type:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if dataclasses.is_dataclass(value):
        return {k: _plain(v) for k, v in dataclasses.asdict(value).items()}
    return value
