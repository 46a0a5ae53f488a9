"""Lidar: rotating multi-beam and non-repetitive scanners, each beam cast from the pose at its own firing time.

Parameters are AirSim's lidar settings (``LidarSimpleParams``; seed 000 sec. 3
lists the lidar among AirSim's sensors): ``channels``, ``range_m``,
``points_per_second``, ``rotations_per_second``, vertical FOV upper/lower and
horizontal FOV start/end; the dataclass defaults are AirSim's multirotor
defaults (16 channels, 100 m, 100 000 points/s, 10 Hz, -15..-45 deg, 0..360 deg).
Device presets live in ``config/sensors/`` (``velodyne_vlp16``, ``ouster_os1_64``,
``livox_mid360``).

Firing pattern (lidar frame ``<ns>/lidar_link``: x forward, y left, z up):

- ``rotating`` (Velodyne, Ouster, AirSim): ``C = points_per_second /
  (rotations_per_second * channels)`` columns per revolution, azimuth step
  360/C deg, the head turning clockwise seen from above (azimuth a gives the
  direction (cos e cos a, -cos e sin a, sin e)) from ``horizontal_fov_start_deg``;
  only columns inside the horizontal FOV fire. Channel elevations are spread
  evenly from ``vertical_fov_lower_deg`` to ``vertical_fov_upper_deg``, fired
  lowest first, or are ``vertical_angles_deg`` listed in firing order (laser ID
  order: the VLP-16 fires -15, +1, -13, +3, ..., -1, +15 deg, its user manual's
  laser ID table). Column c starts firing at c / (C * rotations_per_second) after the
  sweep start; the k-th laser of the column fires k * ``channel_firing_interval_s``
  later (2.304 us on a VLP-16, whose 16 lasers fire one after another; 0 on an
  Ouster, which fires a column at once), while the head keeps turning, so its
  azimuth is the column's plus 360 * rotations_per_second * k * interval: every
  point's azimuth is 360 * rotations_per_second * its ``time`` past the FOV start
  (the Velodyne manual's per-firing azimuth interpolation). The ``ring`` field is
  the beam's rank by elevation (ring 0 the lowest, as the Velodyne driver's).
- ``non_repetitive`` (Livox-style): point n of the run (counted from sim time 0,
  so a restarted run repeats it) aims at the n-th point of the R2 low-discrepancy
  sequence (Roberts 2018: (frac(0.5 + n/g), frac(0.5 + n/g^2)), g the plastic
  number) mapped onto the FOV, so, as on a Livox, coverage keeps growing with
  integration time and no two sweeps are alike; point n fires at n / points_per_second
  and belongs to line n mod ``channels`` (the ``ring`` field).

Motion distortion: every beam is cast from the lidar pose at its firing time
(ground truth interpolated: :class:`aerial_sim.sensors.resampling.PoseTrack`) and
its point is reported in the lidar frame *at that time*, as a real lidar does;
the per-point ``time`` field lets a consumer undo the skew (deskewing).

Return model, per beam hitting a surface at range r with incidence angle theta:

- intensity = 100 * rho * |cos theta| (rho: the material's ``lidar_reflectivity``,
  ``config/materials.yaml``): the Lambertian return on the Velodyne calibrated
  scale (0..100 for diffuse targets), independent of range as calibrated
  intensities are;
- detection: the received power of a Lambertian target is P ~ rho |cos theta| / r^2
  (the lidar equation for a target larger than the beam), so a surface is detected
  out to ``range_m * sqrt(rho |cos theta| / range_reflectivity)``, at most ``range_m``:
  datasheets quote range at a reference reflectivity (OS1: 120 m at 80 %, which
  gives 42 m at 10 %, matching its 45 m); ``range_reflectivity = 0`` detects every
  surface out to ``range_m`` (AirSim);
- range noise r + N(0, ``range_noise_std_m``^2) along the beam; a return is
  randomly lost with ``dropout_probability``; nearer than ``min_range_m``,
  farther than the detection range or hitting nothing is *no return*.

No return (``no_return``): ``drop`` leaves the point out (unorganized cloud,
height 1, ``is_dense``: the Velodyne ROS driver's default); ``nan`` keeps every
beam in an organized cloud (height = rings, width = columns, row r = ring r) with
x, y, z = NaN (the Velodyne driver's ``organize_cloud`` mode and REP-117's
"invalid" reading for NaN-capable fields), intensity 0, segmentation 0, ring and time kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from aerial_sim.config import require, require_non_negative, require_positive
from aerial_sim.sensors.mounting import Mount
from aerial_sim.sensors.noise import RandomCheckpoint, sensor_rng
from aerial_sim.sensors.pointcloud import LIDAR_POINT_DTYPE
from aerial_sim.sensors.resampling import PoseTrack
from aerial_sim.sensors.truth import TIME_EPSILON_S, GroundTruthLike
from aerial_sim.world.ray_caster import ray_caster_of
from aerial_sim.world.scene import NO_HIT_ID, Scene

#: The plastic number g (real root of g^3 = g + 1), generator of the R2 sequence.
PLASTIC_NUMBER = 1.324717957244746
#: Intensity of a fully reflective Lambertian surface hit square-on (Velodyne's calibrated scale).
FULL_DIFFUSE_INTENSITY = 100.0


@dataclass(frozen=True)
class LidarParams:
    """A lidar's scan pattern, range and noise. Defaults: AirSim's multirotor lidar (noise-free)."""

    scan_pattern: Literal["rotating", "non_repetitive"] = "rotating"
    channels: int = 16  # beams (rotating) or laser lines (non_repetitive)
    range_m: float = 100.0  # farthest return (at range_reflectivity when that is > 0)
    min_range_m: float = 0.1  # nearer is no return
    points_per_second: int = 100_000  # beams fired per second, returns or not
    rotations_per_second: float = 10.0  # sweeps (point clouds) per second
    vertical_fov_upper_deg: float = -15.0
    vertical_fov_lower_deg: float = -45.0
    vertical_angles_deg: tuple[float, ...] = ()  # explicit beam elevations in firing order, instead of the even spread
    horizontal_fov_start_deg: float = 0.0  # clockwise from the lidar's x axis, seen from above
    horizontal_fov_end_deg: float = 360.0
    channel_firing_interval_s: float = 0.0  # rotating: delay between successive rings of a column
    range_noise_std_m: float = 0.0
    dropout_probability: float = 0.0
    range_reflectivity: float = 0.0  # reflectivity at which range_m is reached (0: every surface to range_m)
    no_return: Literal["drop", "nan"] = "drop"
    seed: int = 0
    mount: Mount = field(default_factory=lambda: Mount(position_m=(0.0, 0.0, 0.1)))

    def __post_init__(self) -> None:
        require(isinstance(self.channels, int) and self.channels >= 1, f"channels must be an integer >= 1, got {self.channels!r}")
        require_positive(self, "range_m", "rotations_per_second")
        require_non_negative(self, "min_range_m", "channel_firing_interval_s", "range_noise_std_m", "range_reflectivity")
        require(self.min_range_m < self.range_m, f"min_range_m ({self.min_range_m}) must be < range_m ({self.range_m})")
        require(isinstance(self.points_per_second, int) and self.points_per_second > 0,
                f"points_per_second must be an integer > 0, got {self.points_per_second!r}")  # fmt: skip
        require(0 <= self.dropout_probability < 1, f"dropout_probability must be in [0, 1), got {self.dropout_probability!r}")
        require(self.range_reflectivity <= 1, f"range_reflectivity must be in [0, 1], got {self.range_reflectivity!r}")
        require(isinstance(self.seed, int) and self.seed >= 0, f"seed must be an integer >= 0, got {self.seed!r}")
        for name in ("vertical_fov_upper_deg", "vertical_fov_lower_deg"):
            value = getattr(self, name)
            require(math.isfinite(value) and -90 <= value <= 90, f"{name} must be in [-90, 90], got {value!r}")
        require(self.vertical_fov_lower_deg <= self.vertical_fov_upper_deg,
                "vertical_fov_lower_deg must be <= vertical_fov_upper_deg")  # fmt: skip
        if self.vertical_angles_deg:
            require(len(self.vertical_angles_deg) == self.channels,
                    f"vertical_angles_deg holds {len(self.vertical_angles_deg)} angles for {self.channels} channels")  # fmt: skip
            require(all(math.isfinite(a) and -90 <= a <= 90 for a in self.vertical_angles_deg),
                    "vertical_angles_deg must lie in [-90, 90]")  # fmt: skip
        span = self.horizontal_fov_end_deg - self.horizontal_fov_start_deg
        require(math.isfinite(span) and 0 < span <= 360,
                f"horizontal FOV must satisfy start < end <= start + 360, got {self.horizontal_fov_start_deg}.."
                f"{self.horizontal_fov_end_deg}")  # fmt: skip
        if self.scan_pattern == "rotating":
            require(self.columns_per_revolution >= 1,
                    f"points_per_second {self.points_per_second} is less than one column of {self.channels} beams per revolution")  # fmt: skip
            column_period = 1.0 / (self.columns_per_revolution * self.rotations_per_second)
            require(self.channels * self.channel_firing_interval_s <= column_period,
                    f"channel_firing_interval_s: {self.channels} firings of {self.channel_firing_interval_s} s do not fit "
                    f"in one column ({column_period:.3g} s)")  # fmt: skip
        else:
            require(self.points_per_sweep >= self.channels, "points_per_second too low for one point per line per sweep")

    @property
    def sweep_period_s(self) -> float:
        return 1.0 / self.rotations_per_second

    @property
    def columns_per_revolution(self) -> int:
        return round(self.points_per_second / (self.rotations_per_second * self.channels))

    @property
    def points_per_sweep(self) -> int:
        """Beams fired per sweep over the full 360 deg (returns and no-returns)."""
        return round(self.points_per_second / self.rotations_per_second)

    def elevations_deg(self) -> np.ndarray:
        """Beam elevations, ascending (index = ring)."""
        return np.sort(self.firing_elevations_deg())

    def firing_elevations_deg(self) -> np.ndarray:
        """Beam elevations in firing order within a column (index = laser ID)."""
        if self.vertical_angles_deg:
            return np.asarray(self.vertical_angles_deg, float)
        return np.linspace(self.vertical_fov_lower_deg, self.vertical_fov_upper_deg, self.channels)


@dataclass(frozen=True)
class FiringPattern:
    """The beams of one sweep in firing order (time non-decreasing)."""

    directions: np.ndarray  # (N, 3) float32 unit vectors in the lidar frame
    ring: np.ndarray  # (N,) uint16
    time_s: np.ndarray  # (N,) float64 after the sweep start
    grid_index: np.ndarray  # (N,) int: position in the organized (rows x columns) cloud
    rows: int
    columns: int


@dataclass(frozen=True)
class LidarScan:
    """One sweep: points in the lidar frame (each at its own firing time), :data:`LIDAR_POINT_DTYPE`."""

    start_time_s: float  # the cloud's stamp
    period_s: float  # the sweep covers [start, start + period)
    points: np.ndarray  # structured (height, width): height 1 when no-returns are dropped
    fired: int  # beams fired in the sweep (returns and no-returns)


def unit_directions(azimuth_deg: np.ndarray, elevation_deg: np.ndarray) -> np.ndarray:
    """Unit beam directions (x forward, y left, z up) for azimuths measured clockwise from x seen from above."""
    azimuth, elevation = np.radians(azimuth_deg), np.radians(elevation_deg)
    cos_elevation = np.cos(elevation)
    return np.stack([cos_elevation * np.cos(azimuth), -cos_elevation * np.sin(azimuth), np.sin(elevation)], axis=1).astype(np.float32)


def rotating_pattern(p: LidarParams) -> FiringPattern:
    """Column-major beams of a spinning head (see the module docstring); the same every sweep."""
    per_revolution = p.columns_per_revolution
    step_deg = 360.0 / per_revolution
    span = p.horizontal_fov_end_deg - p.horizontal_fov_start_deg
    columns = min(per_revolution, math.ceil(span / step_deg - 1e-9))
    column, laser = np.divmod(np.arange(columns * p.channels), p.channels)
    elevations = p.firing_elevations_deg()
    ring_of_laser = np.argsort(np.argsort(elevations, kind="stable"), kind="stable")  # rank by elevation
    ring = ring_of_laser[laser]
    time_s = column / (per_revolution * p.rotations_per_second) + laser * p.channel_firing_interval_s
    azimuth = p.horizontal_fov_start_deg + 360.0 * p.rotations_per_second * time_s  # the head turns while it fires
    return FiringPattern(unit_directions(azimuth, elevations[laser]), ring.astype(np.uint16), time_s,
                        ring * columns + column, p.channels, columns)  # fmt: skip


def non_repetitive_pattern(p: LidarParams, sweep_index: int) -> FiringPattern:
    """The R2-sequence beams of sweep ``sweep_index`` (counted from sim time 0; see the module docstring)."""
    per_line = p.points_per_sweep // p.channels
    count = per_line * p.channels
    index = np.arange(count)
    n = sweep_index * count + index
    u = np.mod(0.5 + n / PLASTIC_NUMBER, 1.0)
    v = np.mod(0.5 + n / PLASTIC_NUMBER**2, 1.0)
    azimuth = p.horizontal_fov_start_deg + u * (p.horizontal_fov_end_deg - p.horizontal_fov_start_deg)
    elevation = p.vertical_fov_lower_deg + v * (p.vertical_fov_upper_deg - p.vertical_fov_lower_deg)
    line = index % p.channels
    return FiringPattern(unit_directions(azimuth, elevation), line.astype(np.uint16), index / p.points_per_second,
                        line * per_line + index // p.channels, p.channels, per_line)  # fmt: skip


class LidarModel:
    """Casts sweeps of ``params`` into ``scene`` along a :class:`PoseTrack` of ``base_link`` poses."""

    def __init__(self, params: LidarParams, scene: Scene, rng: np.random.Generator | None = None):
        self.params = params
        self.scene = scene
        self.caster = ray_caster_of(scene)
        self._rng = rng if rng is not None else sensor_rng(params.seed, "lidar")
        self._random_start = RandomCheckpoint(self._rng)
        self._mount_rotation = params.mount.rotation.astype(np.float32)  # lidar -> base_link
        self._mount_offset = np.asarray(params.mount.position_m, np.float32)
        self._segmentation_lut = np.asarray(scene.surface_table(lambda s: s.segmentation_id, NO_HIT_ID), np.uint16)
        reflectivity = scene.surface_table(lambda s: scene.material(s.material).lidar_reflectivity, 0.0)
        self._reflectivity_lut = np.asarray(reflectivity, np.float32)
        self._fixed_pattern = rotating_pattern(params) if params.scan_pattern == "rotating" else None
        if self._fixed_pattern is not None:  # the same beams every sweep: turn them into base_link once
            self._fixed_directions_base = self._fixed_pattern.directions @ self._mount_rotation.T

    def reset(self) -> None:
        """Rewind the noise stream: a restarted run draws the same noise as a fresh one."""
        self._random_start.restore()

    def pattern(self, start_time_s: float) -> FiringPattern:
        if self._fixed_pattern is not None:
            return self._fixed_pattern
        return non_repetitive_pattern(self.params, round(start_time_s * self.params.rotations_per_second))

    def scan(self, start_time_s: float, track: PoseTrack) -> LidarScan:
        """The sweep starting at ``start_time_s``, each beam from the track's pose at its firing time."""
        p = self.params
        pattern = self.pattern(start_time_s)
        fixed = pattern is self._fixed_pattern
        directions_base = self._fixed_directions_base if fixed else pattern.directions @ self._mount_rotation.T
        origins, directions = track.to_world(start_time_s + pattern.time_s, directions_base, self._mount_offset)
        hits = self.caster.cast(origins, directions, normals=True)
        reflectivity = self._reflectivity_lut[hits.surface]
        cos_incidence = np.abs(np.einsum("ij,ij->i", hits.normal, directions))
        detected = hits.distance <= self._detection_range(reflectivity * cos_incidence)
        detected &= hits.distance >= p.min_range_m
        if p.dropout_probability > 0:
            detected &= self._rng.random(len(detected), dtype=np.float32) >= p.dropout_probability
        distance = hits.distance
        if p.range_noise_std_m > 0:
            distance = distance + self._rng.standard_normal(len(distance), dtype=np.float32) * np.float32(p.range_noise_std_m)
        beams = np.zeros(len(distance), LIDAR_POINT_DTYPE)
        xyz = pattern.directions * np.where(detected, distance, np.nan)[:, None]
        beams["x"], beams["y"], beams["z"] = xyz[:, 0], xyz[:, 1], xyz[:, 2]
        beams["intensity"] = np.where(detected, FULL_DIFFUSE_INTENSITY * reflectivity * cos_incidence, 0.0)
        beams["ring"] = pattern.ring
        beams["time"] = pattern.time_s
        beams["segmentation_id"] = np.where(detected, self._segmentation_lut[hits.surface], NO_HIT_ID)
        if p.no_return == "drop":
            points = beams[detected][None, :]
        else:
            points = np.empty(pattern.rows * pattern.columns, LIDAR_POINT_DTYPE)
            points[pattern.grid_index] = beams
            points = points.reshape(pattern.rows, pattern.columns)
        return LidarScan(start_time_s, p.sweep_period_s, points, len(beams))

    def _detection_range(self, return_strength: np.ndarray) -> np.ndarray | float:
        """Farthest detectable range for a return of ``rho |cos theta|`` (lidar equation, module docstring)."""
        p = self.params
        if p.range_reflectivity == 0:
            return p.range_m
        return np.minimum(p.range_m, p.range_m * np.sqrt(return_strength / p.range_reflectivity))


def points_to_world(points: np.ndarray, start_time_s: float, track: PoseTrack, mount: Mount) -> np.ndarray:
    """Deskew a sweep: each point (structured, lidar frame at its own ``time`` after ``start_time_s``) placed in
    the world with the body pose of ``track`` at that instant and the lidar ``mount``; (N, 3) float32, NaN kept.

    A cloud without a ``time`` field is placed with the pose at ``start_time_s``.
    """
    points = points.reshape(-1)
    local = np.stack([points["x"], points["y"], points["z"]], axis=1).astype(np.float32) @ mount.rotation.T.astype(np.float32)
    offsets = points["time"].astype(float) if "time" in (points.dtype.names or ()) else np.zeros(len(points))
    order = np.argsort(offsets, kind="stable")  # the track wants sorted instants; organized clouds are by ring
    origins, vectors = track.to_world(start_time_s + offsets[order], local[order], mount.position_m)
    world = np.empty_like(origins)
    world[order] = origins + vectors  # Rodrigues' formula is linear: a point turns like a direction
    return world


class LidarSweeper:
    """Ground truth in, finished sweeps out: sweeps start at the sim-time instants k / rotations_per_second.

    Each pushed truth sample extends the pose track; every sweep whose period the
    track now covers is cast and returned (so a sweep is published once its last
    beam has fired, as a driver publishes a finished revolution). Time going back
    (a restarted simulation) or a gap longer than ``max_gap_s`` starts over at the
    next sweep instant, with the model's noise rewound.
    """

    def __init__(self, model: LidarModel, hold: bool = False, max_gap_s: float = 1.0):
        self.model = model
        self.track = PoseTrack(hold=hold)
        self.max_gap_s = max_gap_s
        self.next_start_s: float | None = None

    def push(self, truth: GroundTruthLike) -> list[LidarScan]:
        track, period = self.track, self.model.params.sweep_period_s
        time_s = float(truth.time_s)
        if len(track) and abs(time_s - track.last_time_s) <= TIME_EPSILON_S:
            return []  # duplicate stamp
        if not len(track) or time_s < track.last_time_s or time_s - track.last_time_s > self.max_gap_s:
            track.clear()
            self.model.reset()
            self.next_start_s = math.ceil(time_s / period - 1e-6) * period
        track.push(time_s, truth.position, truth.orientation)
        scans = []
        while time_s >= self.next_start_s + period - TIME_EPSILON_S:
            scans.append(self.model.scan(self.next_start_s, track))
            self.next_start_s = (round(self.next_start_s / period) + 1) * period
            track.drop_before(self.next_start_s)
        return scans
