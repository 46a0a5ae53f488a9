"""AirSim image requests served by the ray-cast camera (:mod:`aerial_sim.world.camera`).

``simGetImages`` asks for image types from named cameras; each batch is
rendered from the vehicle's pose at the moment of the request, one ray cast per
camera whatever the number of types asked from it. AirSim's five default
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
A camera's ``DistortionParams`` (or CameraDefaults', for every camera) is its
plumb_bob lens, over the node's ``camera.distortion_d``; ``simSetDistortionParam``
changes it from then on. A camera's ``NoiseSettings`` (or CameraDefaults') sets its Scene images' colour noise
(:func:`~aerial_sim.airsim.settings.camera_noise`), over the node's ``camera.color_noise_std``, seeded by
``camera.noise_seed``.

Image types (AirSim's ImageType enum):
- Scene (0): colour; uncompressed bytes are H x W x 3 in **BGR** order (what
  AirSim's uncompressed images hold: its examples save them with
  ``cv2.imwrite``); PNG (``compress``) is an ordinary RGB PNG.
- DepthPlanar (1), DepthPerspective (2): metres as floats with
  ``pixels_as_float`` (optical z, or distance along the ray); no return ->
  ``NO_RETURN_DEPTH_M``, nearer than the minimum range -> 0. As bytes, the
  DepthVis grey image.
- DepthVis (3): grey, black = 0 m to white = 100 m (AirSim's scale).
- DisparityNormalized (4): ``(x_left - x_right) / width`` of the stereo pair
  front_left/front_right (``STEREO_BASELINE_M`` apart), from planar depth:
  ``fx * baseline / (z * width)``, in [0, 1] (0 where nothing is hit); as
  floats (what AirSim's docs advise) or grey bytes (1 = white).
- Segmentation (5): one colour per segmentation id (a fixed palette, below);
  ``pixels_as_float`` gives the ids themselves.
- SurfaceNormals (6): the surface normal of each pixel, the renderer's hit
  normal (or, from a renderer without them, from the gradients of the
  camera-frame points of the depth image, ``cross(dP/du, dP/dv)``), turned
  toward the camera, in the camera frame AirSim uses (x forward,
  y right, z down), as colour ``(n + 1) / 2 * 255`` (RGB; BGR bytes when
  uncompressed, like Scene); black where nothing is hit.
- Infrared (7): AirSim's, each object's segmentation id (0-255) as its grey
  level (``simSetSegmentationObjectID`` sets it).
- OpticalFlow (8): the motion of each pixel since this camera's previous image
  request (any type; none before: zero), in pixels, from
  :meth:`~aerial_sim.world.camera.CameraModel.optical_flow` (exact for the static
  world). As floats, H x W x 2 values interleaved (u, v): reshape with
  ``(height, width, 2)`` (AirSim's own float image carries one channel only); as
  bytes, the OpticalFlowVis colours.
- OpticalFlowVis (9): flow as colour: hue = direction, saturation = length / the
  longest in the image (white: still; black: a point behind the previous camera);
  as floats, the length in pixels.
Any other type (Lighting, Annotation, ...) answers, for that request only, an
empty image (width and height 0, no bytes) whose ``message`` says why, as
AirSim answers an image it cannot capture; the other requests of the list are
answered as usual.
"""

from __future__ import annotations

import colorsys
import dataclasses
import math
import re
import struct
import zlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from aerial_sim.airsim.ned import body_to_flu, orientation_to_ned, quaternion_to_euler, world_to_ned
from aerial_sim.airsim.rpc import Prepacked
from aerial_sim.airsim.wire import RpcFault, quaternionr, vector3r
from aerial_sim.config import ParamsError
from aerial_sim.control.geometry import matrix_to_quat
from aerial_sim.world.camera import CameraModel, CameraParams
from aerial_sim.world.lens import LensCamera, LensParams, camera_for, color_noise
from aerial_sim.world.rotations import quaternion_to_matrix, rpy_to_matrix
from aerial_sim.world.scene import Scene

SCENE, DEPTH_PLANAR, DEPTH_PERSPECTIVE, DEPTH_VIS, DISPARITY, SEGMENTATION, SURFACE_NORMALS, INFRARED = range(8)
OPTICAL_FLOW, OPTICAL_FLOW_VIS = 8, 9
IMAGE_TYPE_NAMES = {0: "Scene", 1: "DepthPlanar", 2: "DepthPerspective", 3: "DepthVis", 4: "DisparityNormalized",
                    5: "Segmentation", 6: "SurfaceNormals", 7: "Infrared", 8: "OpticalFlow", 9: "OpticalFlowVis",
                    10: "Lighting", 11: "Annotation"}
SUPPORTED_TYPES = (SCENE, DEPTH_PLANAR, DEPTH_PERSPECTIVE, DEPTH_VIS, DISPARITY, SEGMENTATION, SURFACE_NORMALS, INFRARED,
                   OPTICAL_FLOW, OPTICAL_FLOW_VIS)
FLOW_TYPES = {OPTICAL_FLOW, OPTICAL_FLOW_VIS}
DEPTH_TYPES = {DEPTH_PLANAR, DEPTH_PERSPECTIVE, DEPTH_VIS, DISPARITY, SURFACE_NORMALS}
#: DisparityNormalized: the stereo baseline (m), front_left to front_right (5 cm either side of the centre).
STEREO_BASELINE_M = 0.10
#: Depth reported where a ray hits nothing within range (the largest half-float: finite, far).
NO_RETURN_DEPTH_M = 65504.0
#: DepthVis: white at this depth (AirSim: 100 m).
DEPTH_VIS_RANGE_M = 100.0

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


def segmentation_palette(size: int = 65536) -> np.ndarray:
    """RGB colour per id: 0 black, then well-separated hues (golden-ratio steps), the same on every run."""
    ids = np.arange(size)
    hue = (ids * 0.618033988749895) % 1.0
    value = 0.55 + 0.45 * ((ids * 7) % 5) / 4.0
    palette = np.array([colorsys.hsv_to_rgb(h, 0.85, v) for h, v in zip(hue[:256], value[:256])]) * 255.0
    colors = np.tile(palette, (size // 256 + 1, 1))[:size]
    colors[0] = 0.0
    return np.round(colors).astype(np.uint8)


@dataclass
class Camera:
    """One named camera: its model (mount, fov) and the base_link->optical-z factor for planar depth."""

    name: str
    model: CameraModel | LensCamera
    planar_factor: np.ndarray  # (H, W): optical z per metre along the ray
    noise_std: float = 0.0  # colour noise of its Scene images, 8-bit levels (CameraRig.noise_std)


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
        palette = segmentation_palette()
        # One 3-byte item per id, RGB (PNG) and BGR (raw bytes): np.take of these gives the image bytes in one pass.
        self._palette_rgb = palette.view("V3").ravel()
        self._palette_bgr = np.ascontiguousarray(palette[:, ::-1]).view("V3").ravel()
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
                                                 self.noise_std(vehicle, name))
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
    def render(self, vehicle: str, requests: Sequence[tuple[str, int, bool, bool]], position, orientation,
               stamp_ns: int) -> list[dict]:
        """ImageResponse maps for ``requests`` = [(camera_name, image_type, pixels_as_float, compress)].

        An unknown camera name fails the whole list (AirSim throws); an image type not rendered here
        gets an empty image for that request only (module docstring)."""
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
        for name, kind, as_float, compress in requests:
            frame = frames[(name, variant[(name, kind)])]
            if kind in SUPPORTED_TYPES:
                responses.append(self._response(frame, name, kind, as_float, compress, position, orientation,
                                                stamp_ns))
            else:
                responses.append(self._empty_response(frame[0], name, kind, as_float, compress, position,
                                                      orientation, stamp_ns))
        return responses

    def _empty_response(self, camera, camera_name, image_type, as_float, compress, position, orientation, stamp_ns):
        name = IMAGE_TYPE_NAMES.get(image_type, "unknown")
        supported = ", ".join(IMAGE_TYPE_NAMES[t] for t in SUPPORTED_TYPES)
        cam_position, cam_orientation = self.camera_pose(camera, position, orientation)
        return {
            "image_data_uint8": b"",
            "image_data_float": [],
            "camera_position": vector3r(cam_position),
            "camera_name": camera_name,
            "camera_orientation": quaternionr(cam_orientation),
            "time_stamp": int(stamp_ns),
            "message": f"image type {image_type} ({name}) is not rendered by aerial_sim (supported: {supported})",
            "pixels_as_float": bool(as_float),
            "compress": bool(compress),
            "width": 0,
            "height": 0,
            "image_type": int(image_type),
        }

    def _response(self, rendered, camera_name, image_type, as_float, compress, position, orientation, stamp_ns):
        camera, frame, flow = rendered
        height, width = camera.model.params.height, camera.model.params.width
        floats, pixels = None, None
        if image_type == SCENE:
            color = color_noise(frame.color, camera.noise_std, self.lens.noise_seed, stamp_ns)
            pixels = color if compress else color[:, :, ::-1]  # BGR: tobytes copies it once
            floats = color.astype(np.float32).mean(axis=2) if as_float else None
        elif image_type in (DEPTH_PLANAR, DEPTH_PERSPECTIVE):
            depth = frame.depth * camera.planar_factor if image_type == DEPTH_PLANAR else frame.depth
            floats = airsim_depth(depth) if as_float else None
            pixels = None if as_float else depth_vis(depth)
        elif image_type == DEPTH_VIS:
            depth = frame.depth * camera.planar_factor
            floats = np.clip(airsim_depth(depth) / DEPTH_VIS_RANGE_M, 0.0, 1.0) if as_float else None
            pixels = None if as_float else depth_vis(depth)
        elif image_type == DISPARITY:
            disparity = disparity_normalized(frame.depth * camera.planar_factor, camera.model.fx, width)
            floats = disparity if as_float else None
            if not as_float:
                grey = (disparity * 255.0 + 0.5).astype(np.uint8)
                pixels = np.repeat(grey[:, :, None], 3, axis=2)
        elif image_type == INFRARED:  # AirSim's: each object's segmentation id as its grey level
            grey = np.minimum(frame.segmentation, 255).astype(np.uint8)
            floats = grey.astype(np.float32) if as_float else None
            pixels = None if as_float else np.repeat(grey[:, :, None], 3, axis=2)
        elif image_type == SURFACE_NORMALS:
            model = camera.model
            planar = frame.depth * camera.planar_factor
            if frame.normals is not None:  # the renderer's hit normals (exact, sharp at edges)
                normals = hit_normals(frame.normals, planar, model.optical_rays())
            else:
                normals = surface_normals(planar, model.fx, model.fy, model.cx, model.cy)
            rgb = normals_to_rgb(normals)
            pixels = rgb if compress else rgb[:, :, ::-1]
        elif image_type == OPTICAL_FLOW and as_float:
            floats = flow  # (H, W, 2): interleaved u, v
        elif image_type in FLOW_TYPES:
            floats = np.hypot(flow[:, :, 0], flow[:, :, 1]) if as_float else None
            if not as_float:
                rgb = flow_to_rgb(flow)
                pixels = rgb if compress else rgb[:, :, ::-1]
        else:  # SEGMENTATION
            floats = frame.segmentation.astype(np.float32) if as_float else None
            if not as_float:
                pixels = np.take(self._palette_rgb if compress else self._palette_bgr, frame.segmentation)
        if floats is not None:
            data_uint8, data_float = b"", Prepacked(pack_float32_array(floats))
        else:
            data_uint8 = encode_png(pixels.tobytes(), width, height) if compress else pixels.tobytes()
            data_float = []
        cam_position, cam_orientation = self.camera_pose(camera, position, orientation)
        return {
            "image_data_uint8": data_uint8,
            "image_data_float": data_float,
            "camera_position": vector3r(cam_position),
            "camera_name": camera_name,
            "camera_orientation": quaternionr(cam_orientation),
            "time_stamp": int(stamp_ns),
            "message": "",
            "pixels_as_float": bool(as_float),
            "compress": bool(compress and floats is None),
            "width": int(width),
            "height": int(height),
            "image_type": int(image_type),
        }

    def camera_pose(self, camera: Camera, position, orientation):
        """(NED position, NED/FRD attitude) of the camera link (x forward) for a vehicle ENU pose."""
        model = camera.model
        R_world_base = quaternion_to_matrix(orientation)
        origin = np.asarray(position, float) + R_world_base @ model.t_base_camera
        R_world_link = R_world_base @ rpy_to_matrix(*np.radians(model.params.mount_rpy_deg))
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


def disparity_normalized(planar_depth: np.ndarray, fx: float, width: int,
                         baseline_m: float = STEREO_BASELINE_M) -> np.ndarray:
    """AirSim's DisparityNormalized ``(x_l - x_r) / x_max`` = ``fx * baseline / (z * width)``, clipped to [0, 1]
    (a rectified stereo pair; disparity d = f B / z, Hartley & Zisserman eq. 11.1); no return (+inf) -> 0,
    nearer than the minimum range (-inf, REP-117) -> 1."""
    z = np.where(planar_depth == -np.inf, 0.0, planar_depth)
    with np.errstate(divide="ignore"):
        return np.clip(fx * baseline_m / (z * width), 0.0, 1.0).astype(np.float32)


def surface_normals(planar_depth: np.ndarray, fx: float, fy: float, cx: float, cy: float) -> np.ndarray:
    """Unit normals (H, W, 3) in AirSim's camera frame (x forward, y right, z down) from a planar depth image:
    back-project each pixel to P = z ((u - cx) / fx, (v - cy) / fy, 1) (optical frame), take
    n = dP/du x dP/dv by central differences and turn it toward the camera. No return (or a neighbour
    without one): zero."""
    height, width = planar_depth.shape
    valid = np.isfinite(planar_depth) & (planar_depth > 0)
    z = np.where(valid, planar_depth, np.nan).astype(np.float64)
    u, v = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
    points = np.stack([z * (u - cx) / fx, z * (v - cy) / fy, z], axis=2)  # optical: x right, y down, z forward
    du = np.gradient(points, axis=1)
    dv = np.gradient(points, axis=0)
    normal = np.cross(du, dv)
    facing = np.einsum("ijk,ijk->ij", normal, points)
    normal[facing > 0] *= -1.0  # toward the camera
    norm = np.linalg.norm(normal, axis=2, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        normal = normal / norm
    normal[~np.isfinite(normal).all(axis=2)] = 0.0
    # optical (right, down, forward) -> AirSim camera (forward, right, down)
    return np.stack([normal[:, :, 2], normal[:, :, 0], normal[:, :, 1]], axis=2).astype(np.float32)


def hit_normals(optical: np.ndarray, planar_depth: np.ndarray, rays: np.ndarray) -> np.ndarray:
    """The renderer's unit hit normals (optical frame) turned toward the camera, in AirSim's camera frame
    (x forward, y right, z down); zero where nothing is hit. ``rays`` (H, W, 3): each pixel's optical-frame ray."""
    normal = np.array(optical, np.float32, copy=True)
    normal[np.einsum("ijk,ijk->ij", normal, rays) > 0] *= -1.0
    normal[~(np.isfinite(planar_depth) & (planar_depth > 0)) | ~np.isfinite(normal).all(axis=2)] = 0.0
    return np.stack([normal[:, :, 2], normal[:, :, 0], normal[:, :, 1]], axis=2)


def flow_to_rgb(flow: np.ndarray) -> np.ndarray:
    """Optical flow (H, W, 2) as colour (the colour-wheel coding of Baker et al., *A Database and Evaluation
    Methodology for Optical Flow*, IJCV 2011, in HSV): hue = direction, saturation = length / the longest
    finite length in the image, full value; still = white, NaN (no flow) = black."""
    from matplotlib.colors import hsv_to_rgb

    u, v = flow[:, :, 0].astype(np.float64), flow[:, :, 1].astype(np.float64)
    length = np.hypot(u, v)
    finite = np.isfinite(length)
    longest = float(length[finite].max()) if finite.any() else 0.0
    hsv = np.ones(flow.shape[:2] + (3,))
    hsv[:, :, 0] = np.where(finite, (np.arctan2(v, u) / (2 * np.pi)) % 1.0, 0.0)
    hsv[:, :, 1] = np.where(finite, length / longest, 0.0) if longest > 0 else 0.0
    rgb = (hsv_to_rgb(np.clip(hsv, 0.0, 1.0)) * 255.0 + 0.5).astype(np.uint8)
    rgb[~finite] = 0
    return rgb


def normals_to_rgb(normals: np.ndarray) -> np.ndarray:
    """(n + 1) / 2 * 255 per axis; zero normals (no surface) black."""
    rgb = ((normals + 1.0) * 127.5 + 0.5).astype(np.uint8)
    rgb[~normals.any(axis=2)] = 0
    return rgb


def airsim_depth(depth: np.ndarray) -> np.ndarray:
    """REP-117 depth (+inf no return, -inf too near) -> AirSim floats (far constant, 0), in one pass."""
    return np.clip(depth, 0.0, NO_RETURN_DEPTH_M).astype(np.float32, copy=False)


def depth_vis(depth: np.ndarray) -> np.ndarray:
    """Grey H x W x 3 uint8: 0 m black, DEPTH_VIS_RANGE_M or farther white."""
    grey = (np.clip(airsim_depth(depth) / DEPTH_VIS_RANGE_M, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    return np.repeat(grey[:, :, None], 3, axis=2)


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def encode_png(rgb: bytes, width: int, height: int) -> bytes:
    """PNG (RFC 2083 / ISO 15948) of ``height`` rows of ``width`` RGB8 pixels: filter 0 (None) on every row,
    one zlib level-1 IDAT. Lossless like any PNG, so every decoder gives back the same pixels; 2-4x faster
    than Pillow's level 1 (which also runs the adaptive row filters) for ~10% more bytes (issue 13)."""
    rows = np.empty((height, 3 * width + 1), dtype=np.uint8)
    rows[:, 0] = 0  # filter type None
    rows[:, 1:] = np.frombuffer(rgb, dtype=np.uint8).reshape(height, 3 * width)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit truecolour, no interlace
    return PNG_SIGNATURE + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", zlib.compress(rows, 1)) + \
        _png_chunk(b"IEND", b"")


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    """length, type, data, CRC-32 of type + data (PNG spec section 5.3)."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))


def pack_float32_array(values: np.ndarray) -> bytes:
    """A msgpack array of float32 (what the C++ server sends for vector<float>), packed by NumPy."""
    flat = np.ascontiguousarray(values, dtype=np.float32).ravel()
    body = np.empty(flat.size, dtype=[("tag", "u1"), ("value", ">f4")])
    body["tag"] = 0xCA
    body["value"] = flat
    return b"\xdd" + flat.size.to_bytes(4, "big") + body.tobytes()
