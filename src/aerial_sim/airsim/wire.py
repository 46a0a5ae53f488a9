"""AirSim's wire structures: msgpack maps keyed by field name (AIRSIM_API.md, "Wire structures").

Encoders build exactly the keys the contract lists (the airsim 1.8.1 client
raises on an unknown key that holds a map). Decoders take what a client sent
(maps for Vector3r, Quaternionr, Pose, YawMode, ImageRequest, RCData) and raise
:class:`RpcFault` naming the argument when it does not fit. Values are NED/FRD
here; :mod:`aerial_sim.airsim.ned` converts at the boundary.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, NamedTuple, Sequence


class RpcFault(Exception):
    """A request the server refuses; the text says why (it reaches the client inside rpclib's error string)."""


# -- encoders (server -> client) ---------------------------------------------------------------


def vector3r(v: Sequence[float]) -> dict:
    return {"x_val": float(v[0]), "y_val": float(v[1]), "z_val": float(v[2])}


def quaternionr(q: Sequence[float]) -> dict:
    return {"w_val": float(q[0]), "x_val": float(q[1]), "y_val": float(q[2]), "z_val": float(q[3])}


def pose(position: Sequence[float], orientation: Sequence[float]) -> dict:
    return {"position": vector3r(position), "orientation": quaternionr(orientation)}


def nan_pose() -> dict:
    """AirSim's answer for an unknown object: a pose of NaNs."""
    nan = math.nan
    return pose((nan, nan, nan), (nan, nan, nan, nan))


def geo_point(latitude: float, longitude: float, altitude: float) -> dict:
    return {"latitude": float(latitude), "longitude": float(longitude), "altitude": float(altitude)}


def kinematics_state(position, orientation, linear_velocity, angular_velocity,
                     linear_acceleration, angular_acceleration) -> dict:
    return {
        "position": vector3r(position),
        "orientation": quaternionr(orientation),
        "linear_velocity": vector3r(linear_velocity),
        "angular_velocity": vector3r(angular_velocity),
        "linear_acceleration": vector3r(linear_acceleration),
        "angular_acceleration": vector3r(angular_acceleration),
    }


def collision_info(has_collided: bool = False, penetration_depth: float = 0.0, time_stamp: int = 0,
                   normal=(0.0, 0.0, 0.0), impact_point=(0.0, 0.0, 0.0), position=(0.0, 0.0, 0.0),
                   object_name: str = "", object_id: int = -1) -> dict:
    return {
        "has_collided": bool(has_collided),
        "penetration_depth": float(penetration_depth),
        "time_stamp": int(time_stamp),
        "normal": vector3r(normal),
        "impact_point": vector3r(impact_point),
        "position": vector3r(position),
        "object_name": str(object_name),
        "object_id": int(object_id),
    }


def rc_data(timestamp: int = 0, pitch: float = 0.0, roll: float = 0.0, throttle: float = 0.0, yaw: float = 0.0,
            is_initialized: bool = False, is_valid: bool = False) -> dict:
    """The C++ RCData map (what getMultirotorState carries)."""
    return {
        "timestamp": int(timestamp), "pitch": float(pitch), "roll": float(roll), "throttle": float(throttle),
        "yaw": float(yaw), "left_z": 0.0, "right_z": 0.0, "switches": 0, "vendor_id": "",
        "is_initialized": bool(is_initialized), "is_valid": bool(is_valid),
    }


# -- decoders (client -> server) ---------------------------------------------------------------


def number(value: Any, what: str, allow_nan: bool = False) -> float:
    """A finite float (or NaN when ``allow_nan``) from an int/float argument."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RpcFault(f"{what} must be a number, got {_show(value)}")
    value = float(value)
    if math.isnan(value) and allow_nan:
        return value
    if not math.isfinite(value):
        raise RpcFault(f"{what} must be finite, got {value}")
    return value


def duration(value: Any, what: str = "duration") -> float:
    """A non-negative time (s); AirSim's 'no timeout' default 3e38 stays a large finite number."""
    seconds = number(value, what)
    if seconds < 0:
        raise RpcFault(f"{what} must be >= 0 s, got {seconds:g}")
    return seconds


def flag(value: Any, what: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise RpcFault(f"{what} must be a bool, got {_show(value)}")


def text(value: Any, what: str) -> str:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        raise RpcFault(f"{what} must be a string, got {_show(value)}")
    return value


def integer(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RpcFault(f"{what} must be an integer, got {_show(value)}")
    return value


def mapping(value: Any, what: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise RpcFault(f"{what} must be a map (an AirSim struct), got {_show(value)}")
    return value


def parse_vector3r(value: Any, what: str, allow_nan: bool = False) -> tuple[float, float, float]:
    fields = mapping(value, what)
    return tuple(number(fields.get(k, 0.0), f"{what}.{k}", allow_nan) for k in ("x_val", "y_val", "z_val"))


def parse_quaternionr(value: Any, what: str, allow_nan: bool = False) -> tuple[float, float, float, float]:
    fields = mapping(value, what)
    defaults = {"w_val": 1.0}
    return tuple(number(fields.get(k, defaults.get(k, 0.0)), f"{what}.{k}", allow_nan)
                 for k in ("w_val", "x_val", "y_val", "z_val"))


def parse_pose(value: Any, what: str, allow_nan: bool = True):
    """(position, orientation) of a Pose map; NaN components mean 'keep' (AirSim's convention)."""
    fields = mapping(value, what)
    position = parse_vector3r(fields.get("position", {}), f"{what}.position", allow_nan)
    orientation = parse_quaternionr(fields.get("orientation", {}), f"{what}.orientation", allow_nan)
    return position, orientation


def parse_geo_point(value: Any, what: str) -> tuple[float, float, float]:
    fields = mapping(value, what)
    return tuple(number(fields.get(k, 0.0), f"{what}.{k}") for k in ("latitude", "longitude", "altitude"))


def parse_yaw_mode(value: Any, what: str = "yaw_mode") -> tuple[bool, float]:
    """(is_rate, yaw_or_rate in degrees or deg/s)."""
    fields = mapping(value, what)
    return flag(fields.get("is_rate", True), f"{what}.is_rate"), number(fields.get("yaw_or_rate", 0.0), f"{what}.yaw_or_rate")


class ImageRequest(NamedTuple):
    """One ImageRequest of ``simGetImages``. ``rgb``: the client is cosysairsim (its requests carry
    ``annotation_name``), whose server sends uncompressed bytes in RGB order where AirSim's sends BGR."""

    camera_name: str
    image_type: int
    pixels_as_float: bool = False
    compress: bool = True
    rgb: bool = False


def parse_image_request(value: Any, what: str) -> ImageRequest:
    """The :class:`ImageRequest` of an ImageRequest map."""
    fields = mapping(value, what)
    camera = fields.get("camera_name", "0")
    if isinstance(camera, int) and not isinstance(camera, bool):
        camera = str(camera)  # pre-1.2 clients sent camera numbers
    return ImageRequest(
        text(camera, f"{what}.camera_name"),
        integer(fields.get("image_type", 0), f"{what}.image_type"),
        flag(fields.get("pixels_as_float", False), f"{what}.pixels_as_float"),
        flag(fields.get("compress", True), f"{what}.compress"),
        "annotation_name" in fields,
    )


def parse_rc_data(value: Any, what: str = "rcdata") -> dict:
    fields = mapping(value, what)
    return {k: number(fields.get(k, 0.0), f"{what}.{k}") for k in ("roll", "pitch", "yaw", "throttle")} | {
        "is_valid": flag(fields.get("is_valid", False), f"{what}.is_valid")
    }


def _show(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."
