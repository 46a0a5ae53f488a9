"""AirSim's object detection API: ``simAddDetectionFilterMeshName``, ``simSetDetectionFilterRadius``,
``simClearDetectionMeshNames`` and ``simGetDetections`` over the camera rig (AIRSIM_API.md).

As in AirSim, each camera and image type has its own filter: a list of mesh-name wildcards
(``*`` and ``?``, case-insensitive, as Unreal's ``MatchesWildcard``) and a radius (default 200 m, from the
camera to the object's centre). An empty list detects nothing. ``simGetDetections`` renders the camera's
instance image from the vehicle's pose at the request (:mod:`aerial_sim.world.labels`) and answers one
``DetectionInfo`` per matching scene object in view:

- ``box2D``: the box of its **visible pixels** in the camera's image, pixel-edge coordinates
  (``min`` = (u_min, v_min) of its extreme pixels, ``max`` = (u_max + 1, v_max + 1)). AirSim projects the
  8 corners of the object's bounds instead, so its boxes also cover occluded parts; ours are what a
  detector can see, and equal ``aerial_sim export``'s COCO boxes.
- ``box3D``: the smallest box, in the camera frame (x forward, y right, z down, metres), holding the
  8 corners of the object's 3D box (``camera/detections_3d``); ``relative_pose``: the object's centre
  and orientation in that frame; ``geo_point``: its centre in WGS-84 (from the home point).
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field

import numpy as np

from aerial_sim.airsim import wire
from aerial_sim.airsim.camera_rig import camera_link
from aerial_sim.airsim.image_types import IMAGE_TYPE_NAMES
from aerial_sim.airsim.wire import RpcFault
from aerial_sim.control.geometry import matrix_to_quat
from aerial_sim.environment.geodesy import HomePoint, enu_to_geodetic
from aerial_sim.world.labels import boxes_3d, detections_2d
from aerial_sim.world.rotations import quaternion_to_matrix

#: AirSim's default detection radius (DetectionComponent: 20000 cm).
DEFAULT_RADIUS_CM = 20000.0
#: FLU (camera link: x forward, y left, z up) <-> FRD (AirSim's camera frame).
FLU_TO_FRD = np.diag([1.0, -1.0, -1.0])


@dataclass
class DetectionFilter:
    """One camera and image type's filter: mesh-name wildcards and radius."""

    patterns: list[str] = field(default_factory=list)
    radius_cm: float = DEFAULT_RADIUS_CM

    def matches(self, name: str) -> bool:
        lowered = name.lower()
        return any(fnmatch.fnmatchcase(lowered, pattern.lower()) for pattern in self.patterns)


class DetectionFilters:
    """The filters of every (vehicle or external, camera, image type)."""

    def __init__(self):
        self._filters: dict[tuple[str, str, int], DetectionFilter] = {}

    def get(self, key: tuple[str, str, int]) -> DetectionFilter:
        return self._filters.setdefault(key, DetectionFilter())

    def add(self, key, mesh_name: str) -> None:
        if not mesh_name:
            raise RpcFault("mesh_name must not be empty (a name or a wildcard such as 'Car_*')")
        patterns = self.get(key).patterns
        if mesh_name not in patterns:
            patterns.append(mesh_name)

    def set_radius(self, key, radius_cm: float) -> None:
        if not (math.isfinite(radius_cm) and radius_cm > 0):
            raise RpcFault(f"radius_cm must be a finite number > 0, got {radius_cm!r}")
        self.get(key).radius_cm = float(radius_cm)

    def clear(self, key) -> None:
        self.get(key).patterns.clear()


def image_type_of(value) -> int:
    """An AirSim ImageType (0-11) from the wire, or a fault naming the value."""
    kind = wire.integer(value, "image_type")
    if kind not in IMAGE_TYPE_NAMES:
        raise RpcFault(f"image_type must be an AirSim ImageType 0..{max(IMAGE_TYPE_NAMES)}, got {kind}")
    return kind


def detection_infos(camera, rule: DetectionFilter, position, orientation, home: HomePoint) -> list[dict]:
    """DetectionInfo maps (module docstring) for ``camera`` (a :class:`~aerial_sim.airsim.camera_rig.Camera`) at
    this vehicle pose (ENU position, w-x-y-z orientation)."""
    if not rule.patterns:
        return []
    model = camera.model
    scene = model.scene
    frame = model.render(position, orientation, depth=False, segmentation=False, color=False, instance=True)
    origin, R_world_link = camera_link(model, position, orientation)
    to_frd = FLU_TO_FRD @ R_world_link.T  # world vector -> camera FRD
    boxes = boxes_3d(scene)
    signs = np.array([(x, y, z) for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    found = []
    for seen in detections_2d(frame.instance, scene):
        box = boxes[seen.instance_id]
        center = np.asarray(box.center, float)
        if not rule.matches(box.name) or np.linalg.norm(center - origin) * 100.0 > rule.radius_cm:
            continue
        R_world_object = quaternion_to_matrix(box.orientation)
        corners = center + (signs * np.asarray(box.size) / 2.0) @ R_world_object.T
        corners_frd = (corners - origin) @ to_frd.T
        latitude, longitude, altitude = enu_to_geodetic(*center, home)
        found.append({
            "name": box.name,
            "geo_point": wire.geo_point(latitude, longitude, altitude),
            "box2D": {"min": {"x_val": float(seen.u_min), "y_val": float(seen.v_min)},
                      "max": {"x_val": float(seen.u_max + 1), "y_val": float(seen.v_max + 1)}},
            "box3D": {"min": wire.vector3r(corners_frd.min(axis=0)), "max": wire.vector3r(corners_frd.max(axis=0))},
            "relative_pose": wire.pose(to_frd @ (center - origin),
                                       matrix_to_quat(to_frd @ R_world_object @ FLU_TO_FRD)),
        })
    return found
