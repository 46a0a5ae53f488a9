"""AirSim's cameras, served by the ray-cast camera (:mod:`aerial_sim.world.camera`): which cameras a
vehicle has, where each is mounted, and ``simGetImages`` requests rendered from them.

``simGetImages`` asks for image types from named cameras; each batch is
rendered from the vehicle's pose at the moment of the request, one ray cast per
camera whatever the number of types asked from it; each type's pixels are
:mod:`aerial_sim.airsim.image_types`'. AirSim's five default
cameras exist on every vehicle, all with the camera parameters the node was
given (460x320, 90 deg by default):

| name (or number)      | mount (base_link, FLU)                           |
|-----------------------|--------------------------------------------------|
| ``front_center`` (0, "") | ``mount_position_m``, looking forward        |
| ``front_right`` (1)   | 5 cm to the right of front_center                |
| ``front_left`` (2)    | 5 cm to the left                                 |
| ``bottom_center`` (3) | at the centre, looking down                      |
| ``back_center`` (4)   | at the back, looking backward                    |

More cameras come from an AirSim settings file (:mod:`aerial_sim.airsim.settings`):
``CameraDefaults`` sets every camera's resolution and FOV, a vehicle's ``Cameras``
add named cameras (or change a default one) with their mount, resolution and
FOV, and ``ExternalCameras`` are fixed in the world: rendered from the map
origin facing north, with their settings pose (NED) as the mount, asked for
with ``external=True`` (:data:`EXTERNAL`). AirSim's mount angles (roll, pitch
up, yaw right, degrees) become the FLU mount's (roll, -pitch, -yaw).
A camera's ``CaptureSettings`` (or CameraDefaults') may give one image type a size
of its own: that type is rendered by a camera of that size.
A camera's ``DistortionParams`` (or CameraDefaults', for every camera) is its
plumb_bob lens, over the node's ``camera.distortion_d``; ``simSetDistortionParam``
changes it from then on. A camera's ``NoiseSettings`` (or CameraDefaults') sets its Scene images' colour noise
(:func:`~aerial_sim.airsim.settings.camera_noise`), over the node's ``camera.color_noise_std``, and its horizontal
artefacts (:mod:`aerial_sim.world.image_artefacts`), seeded by ``camera.noise_seed``.

An unknown camera name fails the whole request list (AirSim throws); a request for an
image type not rendered here is answered, for that request only, with an empty image
(width and height 0, no bytes) whose ``message`` says why, as AirSim answers an image it
cannot capture; the other requests of the list are answered as usual. Each response
echoes the request's camera name, type, ``pixels_as_float`` and ``compress`` (as AirSim's
``UnrealImageCapture``: a float image says ``compress`` if it was asked, and carries
floats) and carries the camera's pose (NED) and the render's time stamp (ns of sim time).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from aerial_sim.airsim.image_types import DEPTH_TYPES, FLOW_TYPES, INFRARED, SCENE, SEGMENTATION, \
    SUPPORTED_TYPES, SURFACE_NORMALS, encode, refusal
from aerial_sim.airsim.ned import body_to_flu, orientation_to_ned, quaternion_to_euler, world_to_ned
from aerial_sim.airsim.png import encode_png
from aerial_sim.airsim.rpc import pack_float32_array
from aerial_sim.airsim.wire import ImageRequest, RpcFault, quaternionr, vector3r
from aerial_sim.config import ParamsError
from aerial_sim.control.geometry import matrix_to_quat
from aerial_sim.world.camera import CameraModel, CameraParams
from aerial_sim.world.image_artefacts import ImageArtefacts, apply_artefacts
from aerial_sim.world.lens import LensCamera, LensParams, camera_for, color_noise
from aerial_sim.world.rotations import quaternion_to_matrix, rpy_to_matrix
from aerial_sim.world.scene import Scene

#: The name under which external cameras are kept (they belong to no vehicle).
EXTERNAL = "<external>"
#: Pose of the frame external cameras are mounted on: the map origin, facing north (ENU yaw 90 deg).
EXTERNAL_POSE = ((0.0, 0.0, 0.0), (math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)))

#: AirSim's distortion parameter names, in the order simGetDistortionParams answers them, and where each
#: sits in plumb_bob's D = (k1, k2, p1, p2, k3).
DISTORTION_NAMES = ("K1", "K2", "K3", "P1", "P2")
PLUMB_BOB_INDEX = {"K1": 0, "K2": 1, "P1": 2, "P2": 3, "K3": 4}

CAMERA_ALIASES = {"": "front_center", "0": "front_center", "1": "front_right", "2": "front_left",
                  "3": "bottom_center", "4": "back_center"}


def default_mounts(front: Sequence[float]) -> dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]]:
    """(position FLU m, roll/pitch/yaw deg) of AirSim's five default cameras (module docstring)."""
    x, y, z = (float(v) for v in front)
    return {
        "front_center": ((x, y, z), (0.0, 0.0, 0.0)),
        "front_right": ((x, y - 0.05, z), (0.0, 0.0, 0.0)),
        "front_left": ((x, y + 0.05, z), (0.0, 0.0, 0.0)),
        "bottom_center": ((0.0, 0.0, z - 0.05), (0.0, 90.0, 0.0)),
        "back_center": ((-x, y, z), (0.0, 0.0, 180.0)),
    }


@dataclass
class Camera:
    """One named camera: its model (mount, fov) and the base_link->optical-z factor for planar depth."""

    name: str
    model: CameraModel | LensCamera
    planar_factor: np.ndarray  # (H, W): optical z per metre along the ray
    noise_std: float = 0.0  # colour noise of its Scene images, 8-bit levels (CameraRig.noise_std)
    artefacts: ImageArtefacts | None = None  # horizontal artefacts of its Scene images (CameraRig.artefacts)


class CameraRig:
    """The five cameras of every vehicle, rendered on demand (see module docstring)."""

    def __init__(self, scene: Scene, params: CameraParams, settings=None, lens: LensParams | None = None):
        self.scene = scene
        #: The lens (plumb_bob D) and colour noise every camera starts with (the camera node's ``distortion_d``,
        #: ``color_noise_std``, ``noise_seed``); simSetDistortionParam changes one camera's D.
        self.lens = lens or LensParams()
        self._distortion: dict[tuple[str, str], tuple[float, ...]] = {}  # (vehicle, name) -> D set by the API
        #: Lenses of a settings file (DistortionParams): (vehicle, name) -> D of a settings camera, and
        #: CameraDefaults' for every other camera (None: the rig's ``lens``).
        self._settings_distortion: dict[tuple[str, str], tuple[float, ...]] = {}
        self._default_distortion: tuple[float, ...] | None = None
        #: Colour noise of a settings file (NoiseSettings), as the lenses: (vehicle, name) -> std; CameraDefaults'.
        self._settings_noise: dict[tuple[str, str], float] = {}
        self._default_noise: float | None = None
        #: Horizontal artefacts of a settings file (NoiseSettings' Horz* keys), as the noise.
        self._settings_artefacts: dict[tuple[str, str], ImageArtefacts] = {}
        self._default_artefacts: ImageArtefacts | None = None
        self.base = dataclasses.replace(params, depth_mode="perspective")
        self.mounts = default_mounts(params.mount_position_m)
        #: Cameras of one vehicle (or EXTERNAL) from a settings file: (vehicle, name) -> CameraParams changes.
        self._named: dict[tuple[str, str], dict] = {}
        #: Per image type sizes of a settings camera's CaptureSettings: (vehicle, name) -> {type: (w, h, fov)}.
        self._captures: dict[tuple[str, str], dict[int, tuple[int, int, float]]] = {}
        self._default_captures: dict[int, tuple[int, int, float]] = {}  # CameraDefaults' (every camera)
        #: Built cameras: (vehicle, name), or (vehicle, name, image type) for a type with a size of its own.
        self._cameras: dict[tuple, Camera] = {}
        self._overrides: dict[tuple[str, str], dict] = {}
        self.object_ids = {obj.name: obj.segmentation_id for obj in scene.objects}
        self._surface_ids: dict[int, int] = {}  # surface index -> segmentation id set by the API
        self._time_of_day = None  # the instant simSetTimeOfDay placed the sun for (None: the scene's sun)
        self._fog_density = None  # fog set by simSetWeatherParameter (None: the scene's)
        self._previous_pose: dict[tuple, tuple] = {}  # (vehicle, camera[, sized type]) -> last pose
        if settings is not None:
            self._apply_settings(settings)

    # -- cameras --------------------------------------------------------------------------
    def _apply_settings(self, settings) -> None:
        """Cameras of an :class:`~aerial_sim.airsim.settings.AirSimSettings` (module docstring)."""
        defaults = settings.camera_defaults
        if defaults is not None:
            self.base = dataclasses.replace(self.base, width=defaults.width, height=defaults.height,
                                            hfov_deg=defaults.fov_deg)
            self._default_captures = {t: (w, h, f) for t, w, h, f in defaults.captures}
            self._default_distortion = defaults.distortion_d
            self._default_noise = defaults.color_noise_std
            self._default_artefacts = defaults.image_artefacts
        for vehicle in settings.vehicles:
            for camera in vehicle.cameras:
                self.add_camera(vehicle.name, camera)
        for camera in settings.external_cameras:
            self.add_camera(EXTERNAL, camera)

    def add_camera(self, vehicle: str, camera) -> None:
        """A settings camera (:class:`~aerial_sim.airsim.settings.CameraSetting`) on ``vehicle`` or EXTERNAL."""
        name = CAMERA_ALIASES.get(camera.name, camera.name)
        changes = dict(width=camera.width, height=camera.height, hfov_deg=camera.fov_deg)
        if camera.position_ned is not None:
            x, y, z = camera.position_ned
            changes["mount_position_m"] = (x, -y, -z)
        elif name not in self.mounts:
            changes["mount_position_m"] = self.mounts["front_center"][0] if vehicle != EXTERNAL else (0.0, 0.0, 0.0)
        if camera.rpy_deg is not None:
            roll, pitch, yaw = camera.rpy_deg
            changes["mount_rpy_deg"] = (roll, -pitch, -yaw)
        elif name not in self.mounts:
            changes["mount_rpy_deg"] = (0.0, 0.0, 0.0)
        self._named[(vehicle, name)] = changes
        self._captures[(vehicle, name)] = {t: (w, h, f) for t, w, h, f in camera.captures}
        if camera.distortion_d is not None:
            self._settings_distortion[(vehicle, name)] = tuple(camera.distortion_d)
        if camera.color_noise_std is not None:
            self._settings_noise[(vehicle, name)] = float(camera.color_noise_std)
        if camera.image_artefacts is not None:
            self._settings_artefacts[(vehicle, name)] = camera.image_artefacts
        self._forget(vehicle, name)

    def _forget(self, vehicle: str, name: str) -> None:
        """Drop the built models of a camera (every image type's) after a change: rebuilt on the next request."""
        for key in [k for k in self._cameras if k[:2] == (vehicle, name)]:
            del self._cameras[key]

    def _capture(self, vehicle: str, name: str, image_type: int | None) -> tuple[int, int, float] | None:
        """(width, height, FOV) of ``image_type`` on that camera when its CaptureSettings (or CameraDefaults')
        give that type a size of its own that differs from the camera's; else None (the camera's size)."""
        if image_type is None:
            return None
        own = self._captures.get((vehicle, name))
        capture = (own if own is not None else self._default_captures).get(image_type)
        if capture is None:
            return None
        p = dataclasses.replace(self.base, **self._named.get((vehicle, name), {}))
        return None if capture == (p.width, p.height, p.hfov_deg) else capture

    def names(self, vehicle: str) -> list[str]:
        defaults = [] if vehicle == EXTERNAL else list(self.mounts)
        return defaults + [n for (v, n) in self._named if v == vehicle and n not in self.mounts]

    def canonical(self, camera_name: str, vehicle: str | None = None) -> str:
        name = CAMERA_ALIASES.get(camera_name, camera_name)
        if vehicle == EXTERNAL:
            if (EXTERNAL, name) not in self._named:
                have = ", ".join(self.names(EXTERNAL)) or "none: add ExternalCameras to the settings file"
                raise RpcFault(f"no external camera named '{camera_name}' (have: {have})")
            return name
        if name not in self.mounts and (vehicle is None or (vehicle, name) not in self._named):
            have = ", ".join(self.names(vehicle) if vehicle is not None else self.mounts)
            raise RpcFault(f"no camera named '{camera_name}' (have: {have} or 0-4)")
        return name

    def camera(self, vehicle: str, camera_name: str, image_type: int | None = None) -> Camera:
        """The camera's model; for an ``image_type`` its CaptureSettings size (:meth:`_capture`) when it has one."""
        name = self.canonical(camera_name, vehicle)
        capture = self._capture(vehicle, name, image_type)
        key = (vehicle, name) if capture is None else (vehicle, name, image_type)
        camera = self._cameras.get(key)
        if camera is None:
            position, rpy = self.mounts.get(name, ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)))
            size = {} if capture is None else dict(width=capture[0], height=capture[1], hfov_deg=capture[2])
            settings = (dict(mount_position_m=position, mount_rpy_deg=rpy) | self._named.get(key[:2], {}) | size
                        | self._overrides.get(key[:2], {}))
            lens = dataclasses.replace(self.lens, distortion_d=self.distortion(vehicle, name))
            model = camera_for(dataclasses.replace(self.base, **settings), lens, self.scene)
            self._apply_segmentation_overrides(model)
            if self._time_of_day is not None:
                model.set_time_of_day(self._time_of_day)
            if self._fog_density is not None:
                model.set_fog(self._fog_density)
            factor = 1.0 / np.linalg.norm(model.optical_rays(), axis=2)
            camera = self._cameras[key] = Camera(name, model, factor.astype(np.float32),
                                                 self.noise_std(vehicle, name), self.artefacts(vehicle, name))
        return camera

    # -- lens ------------------------------------------------------------------------------
    def distortion(self, vehicle: str, camera_name: str) -> tuple[float, float, float, float, float]:
        """plumb_bob D = (k1, k2, p1, p2, k3) of a camera: set by simSetDistortionParam, else its settings
        camera's DistortionParams, else CameraDefaults', else the rig's lens."""
        key = (vehicle, self.canonical(camera_name, vehicle))
        if key in self._distortion:
            return self._distortion[key]
        if key in self._settings_distortion:
            return self._settings_distortion[key]
        return self._default_distortion or tuple(self.lens.distortion_d)

    def noise_std(self, vehicle: str, camera_name: str) -> float:
        """Colour noise (8-bit levels) of a camera's Scene images: its settings camera's NoiseSettings, else
        CameraDefaults', else the rig's lens's ``color_noise_std``."""
        key = (vehicle, self.canonical(camera_name, vehicle))
        if key in self._settings_noise:
            return self._settings_noise[key]
        return self._default_noise if self._default_noise is not None else float(self.lens.color_noise_std)

    def artefacts(self, vehicle: str, camera_name: str) -> ImageArtefacts | None:
        """Horizontal artefacts of a camera's Scene images (:mod:`aerial_sim.world.image_artefacts`): its settings
        camera's NoiseSettings, else CameraDefaults', else none."""
        key = (vehicle, self.canonical(camera_name, vehicle))
        return self._settings_artefacts.get(key, self._default_artefacts)

    def distortion_params(self, vehicle: str, camera_name: str) -> list[float]:
        """simGetDistortionParams: [K1, K2, K3, P1, P2] (AirSim's order) of the camera's lens."""
        d = self.distortion(vehicle, camera_name)
        return [float(d[PLUMB_BOB_INDEX[name]]) for name in DISTORTION_NAMES]

    def set_distortion_param(self, vehicle: str, camera_name: str, param_name: str, value: float) -> None:
        """simSetDistortionParam: one coefficient (K1, K2, K3, P1 or P2) of a camera's lens; its images follow
        from the next request. A lens that cannot map onto every pixel of the image is refused, the old one kept."""
        name = self.canonical(camera_name, vehicle)
        key = str(param_name).upper()
        if key not in PLUMB_BOB_INDEX:
            raise RpcFault(f"param_name must be one of {', '.join(DISTORTION_NAMES)}, got '{param_name}'")
        if not math.isfinite(value):
            raise RpcFault(f"distortion parameter {key} must be finite, got {value!r}")
        old = self._distortion.get((vehicle, name))
        d = list(self.distortion(vehicle, name))
        d[PLUMB_BOB_INDEX[key]] = float(value)
        self._distortion[(vehicle, name)] = tuple(d)
        self._forget(vehicle, name)
        try:
            self.camera(vehicle, name)  # built now: a lens the image cannot hold is refused here
        except ParamsError as error:
            if old is None:
                del self._distortion[(vehicle, name)]
            else:
                self._distortion[(vehicle, name)] = old
            self._forget(vehicle, name)
            raise RpcFault(f"{key} = {value:g} refused: {error}") from None

    def set_time_of_day(self, moment) -> None:
        """simSetTimeOfDay: every camera's sun for ``moment`` (an aware datetime) at the scene's home point."""
        self._time_of_day = moment
        for camera in self._cameras.values():
            camera.model.set_time_of_day(moment)

    def set_fog(self, density_per_m: float | None) -> None:
        """simSetWeatherParameter(Fog): every camera's fog density (1/m); None: the scene's fog."""
        self._fog_density = density_per_m
        for camera in self._cameras.values():
            camera.model.set_fog(density_per_m)

    def set_pose(self, vehicle: str, camera_name: str, position_frd, orientation_frd) -> None:
        """simSetCameraPose: the camera's pose relative to the vehicle (FRD; NaN keeps a value)."""
        name = self.canonical(camera_name, vehicle)
        mount_position, mount_rpy = self.mounts.get(name, ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)))
        named = self._named.get((vehicle, name), {})
        mount_position = named.get("mount_position_m", mount_position)
        current = self._overrides.get((vehicle, name), {})
        position = [old if math.isnan(new) else new
                    for old, new in zip(current.get("mount_position_m", mount_position), body_to_flu(position_frd))]
        settings = dict(current, mount_position_m=tuple(position))
        if not any(math.isnan(c) for c in orientation_frd):
            # FRD-relative attitude -> FLU-relative: conjugate by the 180 deg turn about x.
            w, x, y, z = orientation_frd
            roll, pitch, yaw = quaternion_to_euler((w, x, -y, -z))
            settings["mount_rpy_deg"] = tuple(math.degrees(a) for a in (roll, pitch, yaw))
        self._overrides[(vehicle, name)] = settings
        self._forget(vehicle, name)

    def set_fov(self, vehicle: str, camera_name: str, fov_deg: float) -> None:
        name = self.canonical(camera_name, vehicle)
        if not 0.0 < fov_deg < 180.0:
            raise RpcFault(f"fov_degrees must be in (0, 180), got {fov_deg:g}")
        self._overrides[(vehicle, name)] = dict(self._overrides.get((vehicle, name), {}), hfov_deg=float(fov_deg))
        self._forget(vehicle, name)

    # -- segmentation ids ------------------------------------------------------------------
    def set_segmentation_id(self, mesh_name: str, object_id: int, is_regex: bool) -> bool:
        """simSetSegmentationObjectID for the images this API serves; true if any object matched."""
        if not 0 <= object_id <= 65535:
            raise RpcFault(f"object_id must be in 0..65535, got {object_id}")
        if is_regex:
            try:
                pattern = re.compile(mesh_name, re.IGNORECASE)
            except re.error as error:
                raise RpcFault(f"mesh_name is not a valid regular expression: {error}") from None
            matches = [i for i, obj in enumerate(self.scene.objects) if pattern.fullmatch(obj.name)]
        else:
            matches = [i for i, obj in enumerate(self.scene.objects) if obj.name.lower() == mesh_name.lower()]
            if mesh_name.lower() in ("ground", "floor"):
                self._surface_ids[1] = object_id
                matches = matches or [-1]
        for index in matches:
            if index >= 0:
                self._surface_ids[2 + index] = object_id
                self.object_ids[self.scene.objects[index].name] = object_id
        for camera in self._cameras.values():
            self._apply_segmentation_overrides(camera.model)
        return bool(matches)

    def _apply_segmentation_overrides(self, model: CameraModel) -> None:
        for surface, object_id in self._surface_ids.items():
            model.set_surface_segmentation_id(surface, object_id)

    # -- rendering -------------------------------------------------------------------------
    def render(self, vehicle: str, requests: Sequence[ImageRequest | tuple], position, orientation,
               stamp_ns: int) -> list[dict]:
        """ImageResponse maps for ``requests``, each an :class:`~aerial_sim.airsim.wire.ImageRequest` or its
        tuple (camera_name, image_type, pixels_as_float, compress[, rgb]).

        An unknown camera name fails the whole list (AirSim throws); an image type not rendered here
        gets an empty image for that request only (module docstring)."""
        requests = [ImageRequest(*r) for r in requests]
        frames = {}
        # One render per camera, and one more per image type that its CaptureSettings size differently.
        variant = {(r[0], r[1]): r[1] if self._capture(vehicle, self.canonical(r[0], vehicle), r[1]) else None
                   for r in requests}
        for camera_name, kind_key in dict.fromkeys((r[0], variant[(r[0], r[1])]) for r in requests):
            camera = self.camera(vehicle, camera_name, kind_key)
            kinds = {r[1] for r in requests if r[0] == camera_name and variant[(r[0], r[1])] == kind_key}
            if not kinds & set(SUPPORTED_TYPES):
                frames[(camera_name, kind_key)] = (camera, None, None)
                continue
            flow = None
            if kinds & FLOW_TYPES:
                previous = self._previous_pose.get((vehicle, camera.name) + ((kind_key,) if kind_key is not None else ()))
                p = camera.model.params
                flow = (camera.model.optical_flow(position, orientation, *previous) if previous is not None
                        else np.zeros((p.height, p.width, 2), np.float32))
            frames[(camera_name, kind_key)] = (camera, camera.model.render(
                position, orientation,
                depth=bool(kinds & DEPTH_TYPES),
                segmentation=bool(kinds & {SEGMENTATION, INFRARED}),
                color=SCENE in kinds,
                normals=SURFACE_NORMALS in kinds,
            ), flow)
            self._previous_pose[(vehicle, camera.name) + ((kind_key,) if kind_key is not None else ())] = (
                tuple(position), tuple(orientation))
        responses = []
        for request in requests:
            frame = frames[(request.camera_name, variant[request[:2]])]
            if request.image_type in SUPPORTED_TYPES:
                responses.append(self._response(frame, request, position, orientation, stamp_ns))
            else:
                responses.append(self._response_map(frame[0], request, position, orientation, stamp_ns, b"", [],
                                                    0, 0, refusal(request.image_type)))
        return responses

    def _response(self, rendered, request: ImageRequest, position, orientation, stamp_ns):
        camera, frame, flow = rendered
        height, width = camera.model.params.height, camera.model.params.width
        color = (apply_artefacts(color_noise(frame.color, camera.noise_std, self.lens.noise_seed, stamp_ns),
                                 camera.artefacts, self.lens.noise_seed, stamp_ns)
                 if request.image_type == SCENE else None)
        floats, pixels = encode(request.image_type, frame, flow, color, camera.model, camera.planar_factor,
                                request.pixels_as_float, rgb=request.compress or request.rgb)
        if floats is not None:
            data_uint8, data_float = b"", pack_float32_array(floats)
        else:
            data_uint8 = encode_png(pixels.tobytes(), width, height) if request.compress else pixels.tobytes()
            data_float = []
        return self._response_map(camera, request, position, orientation, stamp_ns, data_uint8, data_float,
                                  width, height, "")

    def _response_map(self, camera, request: ImageRequest, position, orientation, stamp_ns, data_uint8, data_float,
                      width, height, message) -> dict:
        """An ImageResponse (AIRSIM_API.md: exactly its keys, in its order); the request's flags echoed, as
        AirSim's UnrealImageCapture does."""
        cam_position, cam_orientation = self.camera_pose(camera, position, orientation)
        return {
            "image_data_uint8": data_uint8,
            "image_data_float": data_float,
            "camera_position": vector3r(cam_position),
            "camera_name": request.camera_name,
            "camera_orientation": quaternionr(cam_orientation),
            "time_stamp": int(stamp_ns),
            "message": message,
            "pixels_as_float": bool(request.pixels_as_float),
            "compress": bool(request.compress),
            "width": int(width),
            "height": int(height),
            "image_type": int(request.image_type),
        }

    def camera_pose(self, camera: Camera, position, orientation):
        """(NED position, NED/FRD attitude) of the camera link (x forward) for a vehicle ENU pose."""
        origin, R_world_link = camera_link(camera.model, position, orientation)
        return world_to_ned(origin), orientation_to_ned(matrix_to_quat(R_world_link))

    def camera_info(self, vehicle: str, camera_name: str, position, orientation) -> dict:
        camera = self.camera(vehicle, camera_name)
        cam_position, cam_orientation = self.camera_pose(camera, position, orientation)
        p = camera.model.params
        near, far = p.min_range_m, p.max_range_m
        # OpenGL-style perspective projection of the pinhole camera (row-major 4x4).
        fx, fy, cx, cy = camera.model.fx, camera.model.fy, camera.model.cx, camera.model.cy
        matrix = [[2 * fx / p.width, 0.0, 1.0 - 2 * cx / p.width, 0.0],
                  [0.0, 2 * fy / p.height, 2 * cy / p.height - 1.0, 0.0],
                  [0.0, 0.0, -(far + near) / (far - near), -2 * far * near / (far - near)],
                  [0.0, 0.0, -1.0, 0.0]]
        return {"pose": {"position": vector3r(cam_position), "orientation": quaternionr(cam_orientation)},
                "fov": float(p.hfov_deg), "proj_mat": {"matrix": matrix}}


def camera_link(model: CameraModel | LensCamera, position, orientation) -> tuple[np.ndarray, np.ndarray]:
    """(ENU origin, rotation link -> world) of a camera's link frame (FLU: x forward, y left, z up) on its
    mount, for the vehicle's ENU pose (position, w-x-y-z orientation)."""
    R_world_base = quaternion_to_matrix(orientation)
    origin = np.asarray(position, float) + R_world_base @ model.t_base_camera
    return origin, R_world_base @ rpy_to_matrix(*np.radians(model.params.mount_rpy_deg))
