"""Named lidars and distance sensors of an AirSim settings file, scanned on request (pure, no ROS).

AirSim gives each sensor of a vehicle a name (``Sensors`` in settings.json)
and ``getLidarData(lidar_name)`` / ``getDistanceSensorData(name)`` answer the
one named. The graph has one lidar and one rangefinder node per vehicle; the
extra named ones of a settings file are cast here, from the scene, at the
vehicle's pose when a client asks (as the API's cameras are), with
:class:`aerial_sim.sensors.lidar.LidarModel` and the scene's ray caster:

- Lidar: ``NumberOfChannels``, ``Range``, ``PointsPerSecond``,
  ``RotationsPerSecond``, ``VerticalFOVUpper/Lower``, ``HorizontalFOVStart/End``
  (AirSim's multirotor defaults when absent: 16, 100 m, 100,000, 10 Hz,
  -15/-45 deg, 0/359 deg) and the mount ``X Y Z`` (NED/FRD m) ``Roll Pitch Yaw``
  (deg; FLU mount: (x, -y, -z), (roll, -pitch, -yaw)). One sweep
  (``PointsPerSecond / RotationsPerSecond`` beams) from the current pose; points
  in the lidar's FLU frame.
- Distance: one ray along the sensor's x axis from its mount, ``MinDistance``
  (0.2 m) to ``MaxDistance`` (40 m), AirSim's defaults.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aerial_sim.sensors.lidar import LidarModel, LidarParams
from aerial_sim.sensors.mounting import Mount
from aerial_sim.sensors.resampling import PoseTrack
from aerial_sim.world.ray_caster import ray_caster_of
from aerial_sim.world.rotations import quaternion_to_matrix
from aerial_sim.world.scene import Scene


def _mount(params: dict) -> Mount:
    x, y, z = (float(params.get(k, 0.0)) for k in "XYZ")
    roll, pitch, yaw = (math.radians(float(params.get(k, 0.0))) for k in ("Roll", "Pitch", "Yaw"))
    return Mount(position_m=(x, -y, -z), rpy_rad=(roll, -pitch, -yaw))


def lidar_params(params: dict) -> LidarParams:
    """LidarParams of an AirSim Lidar sensor setting (module docstring); ValueError if inconsistent."""
    start = float(params.get("HorizontalFOVStart", 0.0))
    end = float(params.get("HorizontalFOVEnd", 359.0))
    return LidarParams(
        channels=int(params.get("NumberOfChannels", 16)),
        range_m=float(params.get("Range", 100.0)),
        points_per_second=int(params.get("PointsPerSecond", 100_000)),
        rotations_per_second=float(params.get("RotationsPerSecond", 10.0)),
        vertical_fov_upper_deg=float(params.get("VerticalFOVUpper", -15.0)),
        vertical_fov_lower_deg=float(params.get("VerticalFOVLower", -45.0)),
        horizontal_fov_start_deg=start,
        horizontal_fov_end_deg=end if end > start else end + 360.0,
        mount=_mount(params),
    )


@dataclass
class Sweep:
    time_s: float
    points: np.ndarray  # (N, 3) float32, lidar frame FLU
    segmentation: np.ndarray  # (N,) int


@dataclass
class Range:
    time_s: float
    distance_m: float
    min_m: float
    max_m: float
    mount: Mount


class NamedSensors:
    """The named lidars and distance sensors of every vehicle of a settings file."""

    def __init__(self, scene: Scene, settings):
        self.scene = scene
        self.lidars: dict[tuple[str, str], LidarModel] = {}
        self.distances: dict[tuple[str, str], tuple[Mount, float, float]] = {}
        for vehicle in settings.vehicles:
            for sensor in vehicle.sensors:
                if not sensor.enabled:
                    continue
                if sensor.kind == "Lidar":
                    try:
                        params = lidar_params(sensor.params)
                    except ValueError as error:
                        raise ValueError(f"Vehicles/{vehicle.name}/Sensors/{sensor.name}: {error}") from None
                    self.lidars[(vehicle.name, sensor.name)] = LidarModel(params, scene)
                elif sensor.kind == "Distance":
                    low = float(sensor.params.get("MinDistance", 0.2))
                    high = float(sensor.params.get("MaxDistance", 40.0))
                    if not 0 <= low < high:
                        raise ValueError(f"Vehicles/{vehicle.name}/Sensors/{sensor.name}: MinDistance {low:g} must be "
                                         f"below MaxDistance {high:g}")
                    self.distances[(vehicle.name, sensor.name)] = (_mount(sensor.params), low, high)

    def names(self, vehicle: str, kind: str) -> list[str]:
        table = self.lidars if kind == "Lidar" else self.distances
        return [name for (v, name) in table if v == vehicle]

    def lidar(self, vehicle: str, name: str, time_s: float, position, orientation) -> Sweep:
        model = self.lidars[(vehicle, name)]
        period = model.params.sweep_period_s
        track = PoseTrack(hold=True)
        track.push(time_s - period - 1.0, tuple(position), tuple(orientation))
        track.push(time_s + 1.0, tuple(position), tuple(orientation))
        scan = model.scan(time_s - period, track)
        points = scan.points.ravel()
        xyz = np.stack([points["x"], points["y"], points["z"]], axis=1).astype(np.float32)
        keep = np.isfinite(xyz).all(axis=1)
        return Sweep(time_s, xyz[keep], points["segmentation_id"][keep].astype(np.int64))

    def distance(self, vehicle: str, name: str, time_s: float, position, orientation) -> Range:
        mount, low, high = self.distances[(vehicle, name)]
        rotation = quaternion_to_matrix(orientation)
        origin = np.asarray(position, float) + rotation @ np.asarray(mount.position_m, float)
        direction = rotation @ mount.rotation @ np.array([1.0, 0.0, 0.0])
        hits = ray_caster_of(self.scene).cast(origin[None, :], direction[None, :], normals=False)
        distance = float(hits.distance[0])
        if not math.isfinite(distance) or distance > high:
            distance = high  # AirSim reports the maximum when nothing is in range
        return Range(time_s, max(distance, low), low, high, mount)
