"""An AirSim ``settings.json`` read as an input to aerial_sim (pure, no ROS).

AirSim configures a simulation with one JSON file (docs/settings.md of
microsoft/AirSim), found in this order: the ``--settings`` argument, a
``settings.json`` beside the executable, ``~/Documents/AirSim/settings.json``
(:func:`find_settings_file`). :func:`load_settings` reads such a file,
checks every key it maps against a JSON schema (the kept ``jsonschema``
validator: a wrong type or value is one :class:`SettingsError` naming the key
path), and returns an :class:`AirSimSettings` that the launch and the AirSim
API node apply. Every key it does not map is one warning naming it
(``AirSimSettings.warnings``): a user sees what was ignored, nothing fails
because of it.

A camera's lens (``CameraDefaults``, a vehicle's ``Cameras/NAME``, ``ExternalCameras/NAME``) is aerial_sim's
one key beyond AirSim's: ``"DistortionParams": {"K1": .., "K2": .., "K3": .., "P1": .., "P2": ..}``, the names and
meaning of AirSim's ``simSetDistortionParams`` dict (Brown-Conrady on normalised image coordinates, plumb_bob
D = (K1, K2, P1, P2, K3)), which AirSim sets only through that call; a missing coefficient is 0. Neither
AirSim's nor Cosys-AirSim's settings hold a calibrated lens (Cosys's ``NoiseSettings`` ``LensDistortion*`` are
Unreal's screen-space barrel effect, warned about with the rest of NoiseSettings). A non-finite value, an
unknown coefficient or a lens too strong to invert over one of the camera's image sizes is a
:class:`SettingsError` naming the key path. The AirSim server's cameras and the camera node (the vehicle's
``front_center``) both take it (:func:`camera_lens`).

A camera's ``NoiseSettings`` (AirSim's list of per-image-type entries, docs/settings.md "Noise Settings") maps
onto the camera's colour noise, Gaussian read noise of ``color_noise_std`` 8-bit levels drawn anew each frame
from the camera's ``noise_seed`` (:mod:`aerial_sim.world.lens`): an ``Enabled`` entry of ``ImageType`` 0
(Scene) gives ``color_noise_std`` = RandContrib x 255 / sqrt(12). AirSim's random noise blends a noise value
into each pixel with the ratio RandContrib, out = (1 - c) p + c n; for n uniform over the 8-bit range the
added term's standard deviation is c x 255 / sqrt(12) (73.6 c levels, 14.7 for AirSim's default c = 0.2),
which the Gaussian keeps (not the blend's pull of the mean toward grey). The entry's horizontal artefacts
(HorzWave*, HorzNoiseLines*, HorzDistortion*: AirSim's post-process material) are drawn on the colour image
too, each at AirSim's default where the entry leaves its keys out, as AirSim does
(:mod:`aerial_sim.world.image_artefacts`, :func:`camera_artefacts`; a ``*Contrib`` of 0 turns one off). What
the model cannot make is one warning line per entry naming the keys: the random noise's spatial structure
(RandSize, RandDensity) and a slower fluctuation than a new draw each frame (RandSpeed below AirSim's default
1e5), and noise on other image types (depth noise is the depth_noise node's). A value that is not a finite number of
its range is a :class:`SettingsError` naming the key path. :func:`camera_noise` gives a camera's.

Units and frames are AirSim's: positions in metres NED relative to the
vehicle (cameras, sensors) or to the player start (vehicles, external
cameras), angles in degrees, wind NED m/s. doc/airsim_settings.md holds the
table of what maps onto what.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from aerial_sim.airsim.sensor_noise import MAPPING as NOISE_MAPPING
from aerial_sim.airsim.sensor_noise import noise_keys
from aerial_sim.world.image_artefacts import AIRSIM_DEFAULTS, ImageArtefacts
from aerial_sim.world.image_artefacts import SETTINGS_KEYS as ARTEFACT_KEYS

SIM_MODES = ("Multirotor", "ComputerVision")
#: VehicleType values flown by aerial_sim's own controller (AirSim's SimpleFlight behaviour).
MULTIROTOR_TYPES = ("SimpleFlight", "PX4Multirotor", "ArduCopter")
#: AirSim's SensorType enum.
SENSOR_TYPES = {1: "Barometer", 2: "Imu", 3: "Gps", 4: "Magnetometer", 5: "Distance", 6: "Lidar"}
#: AirSim's ImageType enum names (CaptureSettings.ImageType).
IMAGE_TYPES = {-1: "all", 0: "Scene", 1: "DepthPlanar", 2: "DepthPerspective", 3: "DepthVis", 4: "DisparityNormalized",
               5: "Segmentation", 6: "SurfaceNormals", 7: "Infrared", 8: "OpticalFlow", 9: "OpticalFlowVis"}
#: A camera's plumb_bob lens: the coefficient names of AirSim's ``simSetDistortionParams`` dict (K1 K2 K3 P1 P2) and
#: where each sits in plumb_bob's D = (k1, k2, p1, p2, k3) (module docstring: ``DistortionParams``).
DISTORTION_KEYS = {"K1": 0, "K2": 1, "P1": 2, "P2": 3, "K3": 4}
#: AirSim's defaults (docs/settings.md): 256 x 144 pixels, 90 deg.
DEFAULT_WIDTH, DEFAULT_HEIGHT, DEFAULT_FOV_DEG = 256, 144, 90.0


class SettingsError(ValueError):
    """A settings file that cannot be used: the message says which file, which key and why."""


# -- what is read -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CameraSetting:
    """A named camera: mount (NED/FRD metres, degrees) on its vehicle, or in the world for an external one."""

    name: str
    position_ned: tuple[float, float, float] | None = None  # None: AirSim's default mount of that name
    rpy_deg: tuple[float, float, float] | None = None
    width: int = DEFAULT_WIDTH
    height: int = DEFAULT_HEIGHT
    fov_deg: float = DEFAULT_FOV_DEG
    image_types: tuple[int, ...] = ()  # the CaptureSettings entries given (empty: every type)
    external: bool = False
    #: Each CaptureSettings entry: (ImageType, Width, Height, FOV_Degrees); images of that type are rendered so.
    captures: tuple[tuple[int, int, int, float], ...] = ()
    #: plumb_bob D = (k1, k2, p1, p2, k3) of its ``DistortionParams`` (or CameraDefaults'); None: none given.
    distortion_d: tuple[float, float, float, float, float] | None = None
    #: Colour noise std (8-bit levels) of its ``NoiseSettings`` (or CameraDefaults'); None: none given.
    color_noise_std: float | None = None
    #: The horizontal artefacts (Horz* keys) of its ``NoiseSettings`` (or CameraDefaults'); None: none given.
    image_artefacts: ImageArtefacts | None = None


@dataclass(frozen=True)
class SensorSetting:
    """A named sensor of a vehicle: its AirSim type and the parameters aerial_sim maps (AirSim's names)."""

    name: str
    kind: str  # Barometer, Imu, Gps, Magnetometer, Distance, Lidar
    enabled: bool = True
    params: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class VehicleSetting:
    name: str
    vehicle_type: str = "SimpleFlight"
    position_ned: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy_deg: tuple[float, float, float] = (0.0, 0.0, 0.0)
    #: AirSim's DefaultVehicleState for simple_flight: "Armed" unless "Inactive"/"Disarmed" is given.
    default_armed: bool = True
    cameras: tuple[CameraSetting, ...] = ()
    sensors: tuple[SensorSetting, ...] = ()


@dataclass(frozen=True)
class AirSimSettings:
    """What a settings file says that aerial_sim applies (module docstring); defaults are AirSim's."""

    sim_mode: str = "Multirotor"
    clock_speed: float = 1.0
    api_server_port: int = 41451
    local_host_ip: str = ""
    origin: tuple[float, float, float] | None = None  # latitude, longitude (deg), altitude (m)
    wind_ned: tuple[float, float, float] = (0.0, 0.0, 0.0)
    vehicles: tuple[VehicleSetting, ...] = ()
    camera_defaults: CameraSetting | None = None
    external_cameras: tuple[CameraSetting, ...] = ()
    recording: dict = field(default_factory=dict, compare=False, hash=False)
    warnings: tuple[str, ...] = ()
    source: str = ""

    @property
    def computer_vision(self) -> bool:
        return self.sim_mode == "ComputerVision"

    def vehicle_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.vehicles)

    def vehicle_for(self, vehicle_name: str) -> VehicleSetting | None:
        """The settings vehicle that configures the graph's vehicle ``vehicle_name``: the one of that name
        (any case), else the only one; None when neither applies."""
        vehicle = next((v for v in self.vehicles if v.name.lower() == vehicle_name.lower()), None)
        if vehicle is None and len(self.vehicles) == 1:
            return self.vehicles[0]
        return vehicle


# -- the schema of the keys mapped (types and values; unknown keys are warnings, not errors) ----------------

_NUMBER = {"type": "number"}
_POSE = {"X": _NUMBER, "Y": _NUMBER, "Z": _NUMBER, "Roll": _NUMBER, "Pitch": _NUMBER, "Yaw": _NUMBER}
_CAPTURE = {
    "type": "object",
    "properties": {
        "ImageType": {"type": "integer", "minimum": -1, "maximum": 11},
        "Width": {"type": "integer", "minimum": 1, "maximum": 8192},
        "Height": {"type": "integer", "minimum": 1, "maximum": 8192},
        "FOV_Degrees": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 180},
    },
}
#: AirSim's NoiseSettings entry keys (AirSimSettings.hpp NoiseSetting) and the range of each number.
NOISE_NUMBERS = {"RandContrib": (0.0, 1.0), "RandSpeed": (0.0, math.inf), "RandSize": (0.0, math.inf),
                 "RandDensity": (0.0, math.inf), "HorzWaveContrib": (0.0, 1.0), "HorzWaveStrength": (0.0, math.inf),
                 "HorzWaveVertSize": (0.0, math.inf), "HorzWaveScreenSize": (0.0, math.inf),
                 "HorzNoiseLinesContrib": (0.0, 1.0), "HorzNoiseLinesDensityY": (0.0, math.inf),
                 "HorzNoiseLinesDensityXY": (0.0, math.inf), "HorzDistortionContrib": (0.0, 1.0),
                 "HorzDistortionStrength": (0.0, math.inf)}
#: AirSim's RandContrib when an enabled entry gives none, and the RandSpeed from which its noise is new each frame.
NOISE_DEFAULT_RAND_CONTRIB, NOISE_FULL_SPEED = 0.2, 1e5
_NOISE_ENTRY = {
    "type": "object",
    "properties": dict(Enabled={"type": "boolean"}, ImageType={"type": "integer", "minimum": -1, "maximum": 11},
                       **{key: _NUMBER for key in NOISE_NUMBERS}),
}
_CAMERA = {
    "type": "object",
    "properties": dict(_POSE, CaptureSettings={"type": "array", "items": _CAPTURE},
                       DistortionParams={"type": "object", "properties": {k: _NUMBER for k in DISTORTION_KEYS},
                                         "additionalProperties": False},
                       NoiseSettings={"type": "array", "items": _NOISE_ENTRY}),
}
_SENSOR = {
    "type": "object",
    "required": ["SensorType"],
    "properties": dict(
        _POSE,
        SensorType={"type": "integer", "enum": sorted(SENSOR_TYPES)},
        Enabled={"type": "boolean"},
        **{key: {"type": "number", "minimum": 0} for kind in NOISE_MAPPING for key in NOISE_MAPPING[kind]
           if key != "UpdateFrequency"},
        UpdateFrequency={"type": "number", "exclusiveMinimum": 0},
        NumberOfChannels={"type": "integer", "minimum": 1, "maximum": 512},
        Range={"type": "number", "exclusiveMinimum": 0},
        PointsPerSecond={"type": "integer", "minimum": 1},
        RotationsPerSecond={"type": "number", "exclusiveMinimum": 0},
        HorizontalFOVStart={"type": "number", "minimum": -360, "maximum": 360},
        HorizontalFOVEnd={"type": "number", "minimum": -360, "maximum": 360},
        VerticalFOVUpper={"type": "number", "minimum": -90, "maximum": 90},
        VerticalFOVLower={"type": "number", "minimum": -90, "maximum": 90},
        MinDistance={"type": "number", "minimum": 0},
        MaxDistance={"type": "number", "exclusiveMinimum": 0},
    ),
}
_VEHICLE = {
    "type": "object",
    "properties": dict(
        _POSE,
        VehicleType={"type": "string"},
        DefaultVehicleState={"type": "string", "enum": ["", "Armed", "Inactive", "Disarmed"]},
        Cameras={"type": "object", "additionalProperties": _CAMERA},
        Sensors={"type": "object", "additionalProperties": _SENSOR},
    ),
}
SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "SettingsVersion": {"type": "number"},
        "SimMode": {"type": "string"},
        "ClockSpeed": {"type": "number", "minimum": 0},
        "ApiServerPort": {"type": "integer", "minimum": 0, "maximum": 65535},
        "LocalHostIp": {"type": "string"},
        "OriginGeopoint": {
            "type": "object",
            "properties": {"Latitude": {"type": "number", "minimum": -90, "maximum": 90},
                           "Longitude": {"type": "number", "minimum": -180, "maximum": 180},
                           "Altitude": _NUMBER},
        },
        "Wind": {"type": "object", "properties": {"X": _NUMBER, "Y": _NUMBER, "Z": _NUMBER}},
        "Vehicles": {"type": "object", "additionalProperties": _VEHICLE},
        "CameraDefaults": _CAMERA,
        "ExternalCameras": {"type": "object", "additionalProperties": _CAMERA},
        "DefaultSensors": {"type": "object", "additionalProperties": _SENSOR},
        "Recording": {
            "type": "object",
            "properties": {"RecordOnMove": {"type": "boolean"}, "RecordInterval": {"type": "number", "minimum": 0},
                           "Folder": {"type": "string"}, "Enabled": {"type": "boolean"},
                           "Cameras": {"type": "array"}},
        },
    },
}


@cache
def _validator():
    """The schema's validator, built at the first file read: ``jsonschema`` (0.1 CPU s to import) is not imported by
    the nodes that only look for a settings file and find none (every batch run's physics node)."""
    import jsonschema

    return jsonschema.Draft7Validator(SCHEMA)


#: Keys read, per section; any other key is one warning naming it.
_TOP_KEYS = set(SCHEMA["properties"]) - {"LocalHostIp"}  # the server binds 127.0.0.1 (airsim_api.launch host:=)
_VEHICLE_KEYS = set(_VEHICLE["properties"])
_CAMERA_KEYS = set(_CAMERA["properties"])
_CAPTURE_KEYS = set(_CAPTURE["properties"])
_SENSOR_COMMON = {"SensorType", "Enabled", "X", "Y", "Z", "Roll", "Pitch", "Yaw"}
_SENSOR_KEYS = {
    "Lidar": _SENSOR_COMMON | {"NumberOfChannels", "Range", "PointsPerSecond", "RotationsPerSecond",
                               "HorizontalFOVStart", "HorizontalFOVEnd", "VerticalFOVUpper", "VerticalFOVLower"},
    "Distance": _SENSOR_COMMON | {"MinDistance", "MaxDistance"},
    # Their noise keys become the sensor nodes' parameters (airsim/sensor_noise.py); other keys are warned about.
    "Imu": {"SensorType", "Enabled"} | noise_keys("Imu"),
    "Barometer": {"SensorType", "Enabled"} | noise_keys("Barometer"),
    "Magnetometer": {"SensorType", "Enabled"} | noise_keys("Magnetometer"),
    "Gps": {"SensorType", "Enabled"} | noise_keys("Gps"),
}
#: Recording: aerial_sim records every topic to a bag (record:=true); only Enabled maps (false: record:=false).
_RECORDING_KEYS = {"Enabled"}
#: AirSim's sensors of a multirotor when its settings name none (AirSimSettings.hpp: createDefaultSensorSettings).
DEFAULT_MULTIROTOR_SENSORS = (SensorSetting("Imu", "Imu"), SensorSetting("Magnetometer", "Magnetometer"),
                              SensorSetting("Gps", "Gps"), SensorSetting("Barometer", "Barometer"))


# -- reading --------------------------------------------------------------------------------------------------


def find_settings_file(explicit: str = "auto", home: str | None = None) -> Path | None:
    """AirSim's search order: an explicit path (must exist), else ``~/Documents/AirSim/settings.json`` if
    present, else None (AirSim's defaults). ``explicit`` ``""``/``none`` means: no settings file."""
    if explicit.strip().lower() in ("", "none"):
        return None
    if explicit != "auto":
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise SettingsError(f"AirSim settings file {explicit} does not exist")
        return path
    documents = Path(home if home is not None else os.path.expanduser("~")) / "Documents" / "AirSim" / "settings.json"
    return documents if documents.is_file() else None


def usable_settings(spec: str, on_error: Callable[[SettingsError], None]) -> tuple[Path, AirSimSettings] | None:
    """The settings file ``spec`` names (:func:`find_settings_file`) with its contents, or None: no file, or one
    that cannot be used, handed to ``on_error`` (a node logs it in one line: a file never stops the simulation)."""
    try:
        path = find_settings_file(spec)
        return None if path is None else (path, load_settings(path))
    except SettingsError as error:
        on_error(error)
        return None


def load_settings(path: str | os.PathLike) -> AirSimSettings:
    """Read, validate and map one settings file (:class:`SettingsError` if it cannot be used)."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # Windows editors write a BOM
    except (OSError, UnicodeDecodeError) as error:
        raise SettingsError(f"cannot read AirSim settings file {path}: {error}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise SettingsError(f"AirSim settings file {path} is not valid JSON: {error.msg} at line {error.lineno} "
                            f"column {error.colno}") from None
    return parse_settings(data, str(path))


def parse_settings(data: Any, source: str = "settings") -> AirSimSettings:
    """Map the decoded JSON of a settings file (see :func:`load_settings`)."""
    errors = sorted(_validator().iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(top level)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise SettingsError(f"AirSim settings {source}: {where}: {first.message}{more}")
    warnings: list[str] = []

    def unknown(section: dict, known: set, where: str) -> None:
        for key in section:
            if key not in known:
                warnings.append(f"{where}{key}: not supported by aerial_sim, ignored")

    unknown(data, _TOP_KEYS, "")
    sim_mode = data.get("SimMode", "") or "Multirotor"
    if sim_mode not in SIM_MODES:
        raise SettingsError(f"AirSim settings {source}: SimMode: '{sim_mode}' is not simulated here "
                            f"(aerial_sim flies {', '.join(SIM_MODES)})")
    origin = None
    if "OriginGeopoint" in data:
        geo = data["OriginGeopoint"]
        unknown(geo, {"Latitude", "Longitude", "Altitude"}, "OriginGeopoint/")
        origin = (float(geo.get("Latitude", 47.641468)), float(geo.get("Longitude", -122.140165)),
                  float(geo.get("Altitude", 122.0)))
    wind = data.get("Wind", {})
    unknown(wind, {"X", "Y", "Z"}, "Wind/")
    camera_defaults = None
    if "CameraDefaults" in data:
        camera_defaults = _camera("CameraDefaults", data["CameraDefaults"], None, False, warnings, "CameraDefaults/")
    external = tuple(_camera(name, spec, camera_defaults, True, warnings, f"ExternalCameras/{name}/")
                     for name, spec in data.get("ExternalCameras", {}).items())
    default_sensors = _sensors(data.get("DefaultSensors", {}), warnings, "DefaultSensors/")
    vehicles = []
    for name, spec in data.get("Vehicles", {}).items():
        vehicles.append(_vehicle(name, spec, sim_mode, camera_defaults, default_sensors, warnings))
    if not vehicles:  # AirSim's default vehicle of the mode
        default_name = "ComputerVision" if sim_mode == "ComputerVision" else "SimpleFlight"
        vehicles.append(VehicleSetting(default_name, "ComputerVision" if sim_mode == "ComputerVision" else "SimpleFlight",
                                       sensors=default_sensors or DEFAULT_MULTIROTOR_SENSORS))
    recording = dict(data.get("Recording", {}))
    unknown(recording, _RECORDING_KEYS, "Recording/")
    return AirSimSettings(
        sim_mode=sim_mode,
        clock_speed=float(data.get("ClockSpeed", 1.0)),
        api_server_port=int(data.get("ApiServerPort", 41451)),
        local_host_ip=str(data.get("LocalHostIp", "")),
        origin=origin,
        wind_ned=(float(wind.get("X", 0.0)), float(wind.get("Y", 0.0)), float(wind.get("Z", 0.0))),
        vehicles=tuple(vehicles),
        camera_defaults=camera_defaults,
        external_cameras=external,
        recording=recording,
        warnings=tuple(warnings),
        source=source,
    )


def _pose(spec: dict, default_position=None, default_rpy=None):
    position = default_position
    if any(k in spec for k in ("X", "Y", "Z")):
        base = default_position or (0.0, 0.0, 0.0)
        position = tuple(float(spec.get(k, b)) for k, b in zip("XYZ", base))
    rpy = default_rpy
    if any(k in spec for k in ("Roll", "Pitch", "Yaw")):
        base = default_rpy or (0.0, 0.0, 0.0)
        rpy = tuple(float(spec.get(k, b)) for k, b in zip(("Roll", "Pitch", "Yaw"), base))
    for value in (position or ()) + (rpy or ()):
        if not math.isfinite(value):
            raise SettingsError("a pose value is not finite")
    return position, rpy


def _camera(name: str, spec: dict, defaults: CameraSetting | None, external: bool, warnings: list,
            where: str) -> CameraSetting:
    unknown = [k for k in spec if k not in _CAMERA_KEYS]
    warnings.extend(f"{where}{k}: not supported by aerial_sim, ignored" for k in unknown)
    base = defaults or CameraSetting(name)
    position, rpy = _pose(spec, base.position_ned, base.rpy_deg)
    width, height, fov, types = base.width, base.height, base.fov_deg, list(base.image_types)
    entries = list(base.captures)
    captures = spec.get("CaptureSettings")
    if captures is not None:
        types, entries = [], []
        for index, capture in enumerate(captures):
            for key in capture:
                if key not in _CAPTURE_KEYS:
                    warnings.append(f"{where}CaptureSettings/{index}/{key}: not supported by aerial_sim, ignored")
            # The camera's own size (camera info, types without an entry): the largest asked for; each type
            # with an entry is rendered at that entry's size and FOV (captures).
            width = max(width if types else 0, int(capture.get("Width", DEFAULT_WIDTH)))
            height = max(height if types else 0, int(capture.get("Height", DEFAULT_HEIGHT)))
            fov = float(capture.get("FOV_Degrees", fov))
            types.append(int(capture.get("ImageType", 0)))
            entries.append((types[-1], int(capture.get("Width", DEFAULT_WIDTH)), int(capture.get("Height", DEFAULT_HEIGHT)),
                            float(capture.get("FOV_Degrees", base.fov_deg))))
    distortion = base.distortion_d
    if "DistortionParams" in spec:
        distortion = _distortion(spec["DistortionParams"], f"{where}DistortionParams")
    if distortion is not None:
        _check_lens(distortion, [(width, height, fov)] + [(w, h, f) for _, w, h, f in entries], f"{where}DistortionParams")
    noise, artefacts = base.color_noise_std, base.image_artefacts
    if "NoiseSettings" in spec:
        noise, artefacts = _noise(spec["NoiseSettings"], f"{where}NoiseSettings", warnings)
    return CameraSetting(name, position, rpy, width, height, fov, tuple(types), external, tuple(entries), distortion,
                         noise, artefacts)


#: Keys of a NoiseSettings entry that the camera's noise model cannot make (module docstring).
_NOISE_UNMADE = {"RandSize", "RandDensity"}


def _noise(entries: list, where: str, warnings: list) -> tuple[float, ImageArtefacts]:
    """(The colour noise std (8-bit levels), the horizontal artefacts) of a camera's ``NoiseSettings`` (module
    docstring): its last enabled Scene entry's RandContrib x 255 / sqrt(12) and Horz* numbers (AirSim's default
    for each one it leaves out); 0.0 and none when it has entries but none enabled for Scene."""
    std, artefacts = 0.0, ImageArtefacts()
    for index, entry in enumerate(entries):
        here = f"{where}/{index}"
        for key in entry:
            if key not in _NOISE_ENTRY["properties"]:
                warnings.append(f"{here}/{key}: not supported by aerial_sim, ignored" + (
                    " (Cosys-AirSim's screen-space barrel effect of Unreal's; a calibrated plumb_bob lens is the "
                    "camera's DistortionParams)" if key.startswith("LensDistortion") else ""))
        for key, (low, high) in NOISE_NUMBERS.items():
            if key in entry:
                value = float(entry[key])
                if not (math.isfinite(value) and low <= value <= high):
                    raise SettingsError(f"{here}/{key}: must be a finite number in [{low:g}, {high:g}], "
                                        f"got {entry[key]!r}")
        if not entry.get("Enabled", False):
            continue  # AirSim's default: off
        image_type = int(entry.get("ImageType", 0))
        if image_type != 0:
            warnings.append(f"{here}: noise on ImageType {image_type} ({IMAGE_TYPES.get(image_type, '?')}) is not "
                            "simulated, ignored (colour noise only; depth noise is the depth_noise node's)")
            continue
        contrib = float(entry.get("RandContrib", NOISE_DEFAULT_RAND_CONTRIB))
        std = contrib * 255.0 / math.sqrt(12.0)
        artefacts = dataclasses.replace(AIRSIM_DEFAULTS, **{name: float(entry[key])
                                                            for key, name in ARTEFACT_KEYS.items() if key in entry})
        unmade = [key for key in entry if key in _NOISE_UNMADE]
        if "RandSpeed" in entry and float(entry["RandSpeed"]) < NOISE_FULL_SPEED:
            unmade.insert(0, "RandSpeed")
        if unmade:
            warnings.append(f"{here}: mapped to colour noise of {std:.1f} levels (RandContrib {contrib:g} x 255 / "
                            f"sqrt(12), new each frame); not simulated: {', '.join(unmade)} (the random noise's "
                            "spatial structure and slower fluctuation)")
    return std, artefacts


def _distortion(spec: dict, where: str) -> tuple[float, float, float, float, float]:
    """plumb_bob D of a camera's ``DistortionParams`` {K1, K2, K3, P1, P2} (a missing one is 0)."""
    d = [0.0] * 5
    for key, index in DISTORTION_KEYS.items():
        value = float(spec.get(key, 0.0))
        if not math.isfinite(value):
            raise SettingsError(f"{where}/{key}: must be a finite number, got {spec.get(key)!r}")
        d[index] = value
    return tuple(d)


def _check_lens(d, sizes, where: str) -> None:
    """A lens that cannot serve one of the camera's image sizes is an error naming the key (world/lens.py)."""
    from aerial_sim.world.lens import lens_problem

    for width, height, fov in dict.fromkeys(sizes):
        problem = lens_problem(d, width, height, fov)
        if problem is not None:
            named = ", ".join(f"{k} {d[i]:g}" for k, i in DISTORTION_KEYS.items())
            raise SettingsError(f"{where} ({named}): {problem}")


def _camera_value(settings: AirSimSettings, vehicle_name: str, camera_name: str, field: str, key: str):
    """The ``field`` of the graph's vehicle ``vehicle_name``'s camera ``camera_name`` (AirSim's aliases ``0`` and
    ``""`` are front_center): that settings vehicle's (any case, or the only one) camera of that name, else
    CameraDefaults'; None when neither gives one. With the key path (ending in ``key``) it came from."""
    aliases = {"front_center": {"front_center", "0", ""}}.get(camera_name, {camera_name})
    vehicle = settings.vehicle_for(vehicle_name)
    if vehicle is not None:
        for camera in vehicle.cameras:
            if camera.name in aliases and getattr(camera, field) is not None:
                return getattr(camera, field), f"Vehicles/{vehicle.name}/Cameras/{camera.name}/{key}"
    defaults = settings.camera_defaults
    if defaults is not None and getattr(defaults, field) is not None:
        return getattr(defaults, field), f"CameraDefaults/{key}"
    return None


def camera_lens(settings: AirSimSettings, vehicle_name: str, camera_name: str = "front_center"):
    """The plumb_bob D the settings' ``DistortionParams`` give the graph's vehicle's camera (see
    ``_camera_value``), with the key path it came from; None when no camera gives a lens."""
    return _camera_value(settings, vehicle_name, camera_name, "distortion_d", "DistortionParams")


def camera_noise(settings: AirSimSettings, vehicle_name: str, camera_name: str = "front_center"):
    """The colour noise std (8-bit levels) the settings' ``NoiseSettings`` give the graph's vehicle's camera (see
    ``_camera_value``), with the key path it came from; None when no camera has NoiseSettings."""
    return _camera_value(settings, vehicle_name, camera_name, "color_noise_std", "NoiseSettings")


def camera_artefacts(settings: AirSimSettings, vehicle_name: str, camera_name: str = "front_center"):
    """The horizontal artefacts (:class:`~aerial_sim.world.image_artefacts.ImageArtefacts`) the settings'
    ``NoiseSettings`` give the graph's vehicle's camera (see ``_camera_value``), with the key path it came from;
    None when no camera has NoiseSettings."""
    return _camera_value(settings, vehicle_name, camera_name, "image_artefacts", "NoiseSettings")


def _sensors(spec: dict, warnings: list, where: str) -> tuple[SensorSetting, ...]:
    sensors = []
    for name, sensor in spec.items():
        kind = SENSOR_TYPES[sensor["SensorType"]]
        known = _SENSOR_KEYS[kind]
        for key in sensor:
            if key not in known:
                warnings.append(f"{where}{name}/{key}: not supported by aerial_sim for a {kind}, ignored")
        params = {k: v for k, v in sensor.items() if k in known and k not in ("SensorType", "Enabled")}
        sensors.append(SensorSetting(name, kind, bool(sensor.get("Enabled", True)), params))
    return tuple(sensors)


def _vehicle(name: str, spec: dict, sim_mode: str, camera_defaults, default_sensors, warnings) -> VehicleSetting:
    where = f"Vehicles/{name}/"
    for key in spec:
        if key not in _VEHICLE_KEYS:
            warnings.append(f"{where}{key}: not supported by aerial_sim, ignored")
    kind = spec.get("VehicleType", "ComputerVision" if sim_mode == "ComputerVision" else "SimpleFlight")
    if sim_mode == "ComputerVision":
        if kind != "ComputerVision":
            warnings.append(f"{where}VehicleType: '{kind}' in SimMode ComputerVision: flown as a ComputerVision "
                            "vehicle")
            kind = "ComputerVision"
    elif kind not in MULTIROTOR_TYPES:
        raise SettingsError(f"{where}VehicleType: '{kind}' is not a multirotor type aerial_sim flies "
                            f"({', '.join(MULTIROTOR_TYPES)}); SimMode is Multirotor")
    elif kind != "SimpleFlight":
        warnings.append(f"{where}VehicleType: '{kind}' is flown by aerial_sim's own controller (as SimpleFlight)")
        kind = "SimpleFlight"
    position, rpy = _pose(spec, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    state = spec.get("DefaultVehicleState", "")
    cameras = tuple(_camera(cam, cam_spec, camera_defaults, False, warnings, f"{where}Cameras/{cam}/")
                    for cam, cam_spec in spec.get("Cameras", {}).items())
    sensors = _sensors(spec.get("Sensors", {}), warnings, f"{where}Sensors/") if "Sensors" in spec else None
    if sensors is None:
        sensors = default_sensors or DEFAULT_MULTIROTOR_SENSORS
    names = _valid_name(name, where)
    return VehicleSetting(names, kind, position, rpy, state in ("", "Armed"), cameras, sensors)


def _valid_name(name: str, where: str) -> str:
    """A vehicle name is a ROS namespace here: letters, digits and underscores, not starting with a digit."""
    if not name or not (name[0].isalpha() or name[0] == "_") or not all(c.isalnum() or c == "_" for c in name):
        raise SettingsError(f"{where[:-1]}: the vehicle name '{name}' cannot be a ROS namespace (use letters, "
                            "digits and underscores, starting with a letter)")
    return name


# -- onto the launch ----------------------------------------------------------------------------------------


def spawn_poses(settings: AirSimSettings, positions_enu, yaws_rad) -> tuple[list, list]:
    """The start positions (``map`` ENU, m) and headings (ENU yaw, rad) of the graph's vehicles, the i-th
    settings vehicle's pose replacing the launch's i-th: ``X Y Z`` (NED m from the origin, Z up negative)
    when any is non-zero, ``Yaw`` (NED deg) when any angle is. AirSim spawns at these poses; so does the
    physics node. Roll and pitch are not applied (a vehicle starts level, at rest; one on or below the ground
    starts resting on it)."""
    positions = [tuple(float(c) for c in p) for p in positions_enu]
    yaws = [float(y) for y in yaws_rad]
    for index, vehicle in enumerate(settings.vehicles[: len(positions)]):
        if any(vehicle.position_ned):
            north, east, down = vehicle.position_ned
            positions[index] = (east, north, -down)
        if any(vehicle.rpy_deg):
            yaws[index] = math.pi / 2 - math.radians(vehicle.rpy_deg[2])
    return positions, yaws


def launch_arguments(settings: AirSimSettings) -> dict[str, str]:
    """``sim.launch.yaml`` arguments that realise ``settings`` (what the launch itself must change)."""
    arguments = {"clock_speed": f"{settings.clock_speed:g}", "airsim_port": str(settings.api_server_port)}
    names = settings.vehicle_names()
    if len(names) == 1:
        arguments["vehicle_name"] = names[0]
    else:
        arguments["vehicles"] = str(len(names))
    lidar = any(s.kind == "Lidar" and s.enabled for v in settings.vehicles for s in v.sensors)
    distance = any(s.kind == "Distance" and s.enabled for v in settings.vehicles for s in v.sensors)
    arguments["use_lidar"] = str(lidar).lower()
    arguments["use_distance"] = str(distance).lower()
    if settings.computer_vision:
        arguments["mission"] = "none"
    if settings.recording.get("Enabled") is False:
        arguments["record"] = "false"
    return arguments


def settings_json(settings: AirSimSettings) -> str:
    """``getSettingsString``: the settings as AirSim would report them (the keys aerial_sim applies)."""
    vehicles = {}
    for vehicle in settings.vehicles:
        x, y, z = vehicle.position_ned
        roll, pitch, yaw = vehicle.rpy_deg
        vehicles[vehicle.name] = {"VehicleType": vehicle.vehicle_type, "X": x, "Y": y, "Z": z, "Roll": roll,
                                  "Pitch": pitch, "Yaw": yaw,
                                  "Cameras": {c.name: _camera_json(c) for c in vehicle.cameras},
                                  "Sensors": {s.name: {"SensorType": _sensor_type(s.kind), "Enabled": s.enabled,
                                                       **s.params} for s in vehicle.sensors}}
    out = {"SettingsVersion": 1.2, "SimMode": settings.sim_mode, "ClockSpeed": settings.clock_speed,
           "Vehicles": vehicles, "Wind": dict(zip("XYZ", settings.wind_ned))}
    if settings.origin is not None:
        out["OriginGeopoint"] = dict(zip(("Latitude", "Longitude", "Altitude"), settings.origin))
    if settings.external_cameras:
        out["ExternalCameras"] = {c.name: _camera_json(c) for c in settings.external_cameras}
    return json.dumps(out)


def _camera_json(camera: CameraSetting) -> dict:
    captures = camera.captures or tuple((t, camera.width, camera.height, camera.fov_deg) for t in (camera.image_types or (0,)))
    out = {"CaptureSettings": [{"ImageType": t, "Width": w, "Height": h, "FOV_Degrees": f} for t, w, h, f in captures]}
    if camera.position_ned is not None:
        out.update(zip("XYZ", camera.position_ned))
    if camera.rpy_deg is not None:
        out.update(zip(("Roll", "Pitch", "Yaw"), camera.rpy_deg))
    if camera.distortion_d is not None:
        out["DistortionParams"] = {k: camera.distortion_d[i] for k, i in DISTORTION_KEYS.items()}
    artefacts = camera.image_artefacts or ImageArtefacts()
    if camera.color_noise_std or artefacts.active:
        out["NoiseSettings"] = [{"Enabled": True, "ImageType": 0,
                                 "RandContrib": (camera.color_noise_std or 0.0) * math.sqrt(12.0) / 255.0,
                                 **{key: getattr(artefacts, name) for key, name in ARTEFACT_KEYS.items()}}]
    return out


def _sensor_type(kind: str) -> int:
    return next(code for code, name in SENSOR_TYPES.items() if name == kind)
