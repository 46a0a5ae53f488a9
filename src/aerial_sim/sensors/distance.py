"""Distance sensor: a single-beam rangefinder (AirSim's DistanceSensor) whose beam is a cone, not a line.

AirSim's DistanceSensor (``DistanceSimpleParams``: 0.2-40 m, 50 Hz) casts one
ray along the sensor's x axis; those are the dataclass defaults (``cone_rays: 1``).
A real rangefinder lights a cone of full angle ``field_of_view_deg``, and what it
reports where the cone straddles an edge depends on how it measures
(``return_mode``):

- ``nearest``: the first echo, i.e. the shortest distance to any surface inside
  the cone: ultrasonic sonars and first-return laser rangefinders. Over a box
  edge the reading jumps to the box as soon as the edge enters the cone: with
  the sensor at height D above the box top and d beside its edge, it reads
  sqrt(d^2 + D^2) while atan(d / D) <= fov / 2.
- ``mean``: the energy-weighted mean range of the whole spot, weight
  rho |cos theta| / r^2 per ray (the lidar equation of
  :mod:`aerial_sim.sensors.lidar`): the "mixed pixel" of time-of-flight modules
  such as the TFmini, whose output lies between the two surfaces' ranges.

The cone is sampled by ``cone_rays`` rays on a sunflower (Vogel) spiral over its
cross-section, from the axis (ray 0) to the rim (the last ray, at exactly
fov / 2), evenly spread over the lit disc. A hit's range gets N(0, ``noise_std_m`` ^ 2)
noise first, as the instrument measures it; then REP-117 applies to the noisy value:
nothing within ``max_range_m`` -> +inf, nearer than ``min_range_m`` -> -inf, so a
finite reading always lies in [min_range_m, max_range_m]. The sensor frame's x axis is the
beam (sensor_msgs/Range); the default mount looks straight down (pitch +90 deg).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from aerial_sim.config import require, require_non_negative, require_positive
from aerial_sim.sensors.mounting import Mount
from aerial_sim.sensors.noise import RandomCheckpoint, sensor_rng
from aerial_sim.sensors.params import check_rate_and_seed
from aerial_sim.sensors.quaternions import rotation_matrix
from aerial_sim.sensors.truth import GroundTruthLike
from aerial_sim.world.ray_caster import ray_caster_of
from aerial_sim.world.scene import Scene

GOLDEN_ANGLE_RAD = math.pi * (3.0 - math.sqrt(5.0))


@dataclass(frozen=True)
class DistanceSensorParams:
    """Rangefinder rate, range, beam and noise. Defaults: AirSim's DistanceSensor (one ray, noise-free), looking down."""

    rate_hz: float = 50.0
    seed: int = 0
    min_range_m: float = 0.2
    max_range_m: float = 40.0
    field_of_view_deg: float = 0.0  # full cone angle; 0 with cone_rays 1: AirSim's single ray
    cone_rays: int = 1
    return_mode: Literal["nearest", "mean"] = "nearest"
    noise_std_m: float = 0.0
    radiation_type: Literal["infrared", "ultrasound"] = "infrared"
    mount: Mount = field(default_factory=lambda: Mount(rpy_rad=(0.0, math.pi / 2, 0.0)))

    def __post_init__(self) -> None:
        check_rate_and_seed(self)
        require_positive(self, "max_range_m")
        require_non_negative(self, "min_range_m", "noise_std_m")
        require(self.min_range_m < self.max_range_m, f"min_range_m ({self.min_range_m}) must be < max_range_m ({self.max_range_m})")
        require(math.isfinite(self.field_of_view_deg) and 0 <= self.field_of_view_deg < 180,
                f"field_of_view_deg must be in [0, 180), got {self.field_of_view_deg!r}")  # fmt: skip
        require(isinstance(self.cone_rays, int) and self.cone_rays >= 1, f"cone_rays must be an integer >= 1, got {self.cone_rays!r}")
        require(self.cone_rays == 1 or self.field_of_view_deg > 0, "cone_rays > 1 needs field_of_view_deg > 0")


@dataclass(frozen=True)
class DistanceMeasurement:
    time_s: float
    range_m: float  # +inf: nothing within max range; -inf: nearer than min range
    variance_m2: float


def cone_directions(field_of_view_deg: float, rays: int) -> np.ndarray:
    """Unit ray directions (rays, 3) in the sensor frame (x = beam axis) filling a cone (module docstring)."""
    if rays == 1:
        return np.array([[1.0, 0.0, 0.0]], np.float32)
    index = np.arange(rays)
    radius = math.tan(math.radians(field_of_view_deg) / 2) * np.sqrt(index / (rays - 1))
    angle = index * GOLDEN_ANGLE_RAD
    rays_xyz = np.stack([np.ones(rays), radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    return (rays_xyz / np.linalg.norm(rays_xyz, axis=1, keepdims=True)).astype(np.float32)


class DistanceSensor:
    """Rangefinder over ``scene``; ``step`` reads it at one ground-truth pose of ``base_link``."""

    def __init__(self, params: DistanceSensorParams, scene: Scene, rng: np.random.Generator | None = None):
        self.params = params
        self.caster = ray_caster_of(scene)
        self._rng = rng if rng is not None else sensor_rng(params.seed, "distance")
        self._random_start = RandomCheckpoint(self._rng)
        self.directions_sensor = cone_directions(params.field_of_view_deg, params.cone_rays)
        self._directions_base = self.directions_sensor @ params.mount.rotation.T
        self._offset = np.asarray(params.mount.position_m, float)
        reflectivity = scene.surface_table(lambda s: scene.material(s.material).lidar_reflectivity, 0.0)
        self._reflectivity_lut = np.asarray(reflectivity, np.float32)

    def reset(self) -> None:
        self._random_start.restore()

    def step(self, dt: float, truth: GroundTruthLike) -> DistanceMeasurement:
        del dt  # a memoryless sensor
        return DistanceMeasurement(truth.time_s, self.read(truth.position, truth.orientation), self.params.noise_std_m**2)

    def read(self, position, orientation) -> float:
        """The (noisy) reading at a base_link pose (ENU position, (w, x, y, z) body->world)."""
        p = self.params
        R = rotation_matrix(orientation)
        origin = np.asarray(position, float) + R @ self._offset
        directions = (self._directions_base @ R.T).astype(np.float32)
        hits = self.caster.cast(origin, directions, normals=p.return_mode == "mean")
        reading = self._combine(hits, directions)
        if not math.isfinite(reading):
            return reading
        if p.noise_std_m > 0:  # the noise is in what the sensor measures, so the range test sees the noisy value
            reading += float(self._rng.standard_normal()) * p.noise_std_m
        if reading < p.min_range_m:
            return -math.inf
        if reading > p.max_range_m:
            return math.inf
        return reading

    def _combine(self, hits, directions: np.ndarray) -> float:
        """One range from the cone's rays: the nearest hit, or the energy-weighted mean within max range."""
        distance = hits.distance.astype(float)
        if self.params.return_mode == "nearest":
            return float(distance.min())
        within = distance <= self.params.max_range_m
        if not within.any():
            return math.inf
        cos_incidence = np.abs(np.einsum("ij,ij->i", hits.normal[within], directions[within]))
        weight = self._reflectivity_lut[hits.surface[within]] * cos_incidence / distance[within] ** 2
        if weight.sum() <= 0:
            return math.inf
        return float(np.sum(weight * distance[within]) / weight.sum())
