"""Swarm formations: where each vehicle of a formation should be at time t, and how close they came (pure, no ROS).

A swarm mission (issue 14) flies N vehicles in a formation around a centre that
moves along a path:

1. every vehicle takes off and climbs to the formation altitude above its start;
2. *assembly*: each vehicle flies a straight line to its slot of the formation
   at the centre's first point; every line starts and ends at the same time
   (a smoothstep in time), and slots are assigned by the minimum total squared
   distance (:func:`assign_slots`), so no two lines cross (for synchronised
   straight lines that assignment is collision-free: Turpin et al., "CAPT",
   IJRR 2014);
3. *formation*: the centre moves along its path (waypoints, or a circle) with a
   trapezoidal speed profile (``centre_speed_m_s``, ``centre_acceleration_m_s2``)
   and each vehicle holds its slot = centre + a fixed offset (the formation
   translates, it does not turn), so planned slots never cross and their
   separation is constant (:func:`min_separation` of :func:`slot_offsets`);
4. hold, land.

Formations: ``ring`` (N slots evenly on a circle of ``radius_m`` around the
centre, the first one east of it) and ``grid`` (rows and columns ``spacing_m``
apart, centred on the centre, filled row by row from the south-west).

Figures for the run summary: :func:`planned_path` (the polyline a vehicle's slot
traces), :func:`hausdorff_per_vehicle` (flown track vs planned path, the
symmetric polyline Hausdorff distance of :mod:`aerial_sim.control.track`) and
:func:`closest_approach` (the smallest distance between any two vehicles over
tracks resampled to common instants by :func:`resample_tracks`).

File format (``config/missions/swarm_*.yaml``)::

    name: swarm_ring
    formation: ring          # ring | grid
    radius_m: 3.0            # ring radius
    spacing_m: 2.0           # grid spacing
    altitude_m: 4.0          # formation altitude (map z)
    centre_path: waypoints   # waypoints | circle
    waypoints: [[4, 0], [30, 0]]          # the centre's path (map x, y)
    circle_centre_m: [0, 0]               # or a circle: centre and radius
    circle_radius_m: 5.0
    centre_speed_m_s: 1.5
    duration_s: 0            # formation flight time; 0 = the whole path (waypoints) / one lap (circle)
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from aerial_sim.config import ParamsError, load_named_params, require, require_non_negative, require_positive
from aerial_sim.control.track import TrackMetrics, compare_tracks

Vector2 = tuple[float, float]

#: Spacing of the points a planned path is sampled at, m (as curved mission patterns).
PATH_SPACING_M = 0.05
#: Time pairs of tracks are compared in per block of :func:`closest_approach` (bounds memory).
_TIME_BLOCK = 4096
#: Up to this many vehicles slots are assigned by trying every permutation (7! = 5040).
_BRUTE_FORCE_MAX = 7


@dataclass(frozen=True)
class FormationParams:
    """One swarm mission (defaults here only; see the module docstring for the file format)."""

    name: str = "swarm"
    formation: Literal["ring", "grid"] = "ring"
    #: Ring radius, m.
    radius_m: float = 3.0
    #: Grid spacing (between neighbouring slots), m.
    spacing_m: float = 2.0
    #: Formation altitude (map z), m: vehicles climb to it above their start points.
    altitude_m: float = 4.0
    centre_path: Literal["waypoints", "circle"] = "circle"
    #: For ``centre_path: waypoints``: the centre's path, map (x, y) points, m.
    waypoints: tuple[Vector2, ...] = ()
    #: For ``centre_path: circle``: the circle's centre (map x, y) and radius, m; the centre
    #: starts east of it and goes counter-clockwise.
    circle_centre_m: Vector2 = (0.0, 0.0)
    circle_radius_m: float = 5.0
    #: Cruise speed and acceleration of the centre along its path.
    centre_speed_m_s: float = 1.0
    centre_acceleration_m_s2: float = 0.5
    #: Formation flight time, s; 0 = the whole waypoint path, or one lap of the circle.
    duration_s: float = 0.0
    #: Speed of the assembly flight from above the start points to the slots, m/s (the slowest
    #: vehicle's distance sets the common assembly time).
    assemble_speed_m_s: float = 1.0
    #: Planned slots closer than this are a configuration error, m.
    safety_distance_m: float = 1.0
    #: Hover this long before the assembly and after the formation flight, s.
    hold_s: float = 1.0
    land: bool = True

    def __post_init__(self):
        require_positive(self, "radius_m", "spacing_m", "altitude_m", "circle_radius_m", "centre_speed_m_s",
                         "centre_acceleration_m_s2", "assemble_speed_m_s", "safety_distance_m")
        require_non_negative(self, "duration_s", "hold_s")
        require(all(math.isfinite(v) for v in self.circle_centre_m), "circle_centre_m must be finite")
        if self.centre_path == "waypoints":
            require(len(self.waypoints) >= 2, "centre_path 'waypoints' needs at least two waypoints")
            require(all(len(p) == 2 for p in self.waypoints), "waypoints are map (x, y) pairs")
            require(all(math.isfinite(v) for p in self.waypoints for v in p), "waypoints must be finite numbers")


def load_formation(name_or_path: str) -> FormationParams:
    """Load ``config/missions/<name>.yaml`` or a YAML path as a swarm mission (ParamsError names the key)."""
    return load_named_params(FormationParams, name_or_path, "missions", "swarm mission", "swarm*.yaml")


# -- geometry of the formation -------------------------------------------------


def slot_offsets(params: FormationParams, count: int) -> np.ndarray:
    """(count, 3) offsets of the slots from the centre, map axes, z = 0 (see the module docstring)."""
    require(count >= 1, f"a formation needs at least one vehicle, got {count}")
    if params.formation == "ring":
        angle = 2.0 * math.pi * np.arange(count) / count
        planar = params.radius_m * np.column_stack([np.cos(angle), np.sin(angle)])
    else:
        columns = math.ceil(math.sqrt(count))
        rows = math.ceil(count / columns)
        row, column = np.divmod(np.arange(count), columns)
        planar = params.spacing_m * np.column_stack([column - (columns - 1) / 2.0, row - (rows - 1) / 2.0])
    return np.column_stack([planar, np.zeros(count)])


def min_separation(points) -> float:
    """Smallest distance between any two of ``points`` (N, 3); inf for fewer than two."""
    points = np.asarray(points, dtype=float)
    if len(points) < 2:
        return math.inf
    first, second = np.triu_indices(len(points), k=1)
    return float(np.linalg.norm(points[first] - points[second], axis=1).min())


def check_separation(params: FormationParams, count: int) -> float:
    """The planned slots' smallest separation; ParamsError when it is below ``safety_distance_m``."""
    separation = min_separation(slot_offsets(params, count))
    require(separation >= params.safety_distance_m,
            f"{params.formation} of {count} vehicles: slots {separation:.2f} m apart, less than safety_distance_m "
            f"{params.safety_distance_m:g} m (raise {'radius_m' if params.formation == 'ring' else 'spacing_m'})")
    return separation


def assign_slots(starts, slots) -> np.ndarray:
    """Slot index of each vehicle: the assignment with the least total squared distance (CAPT).

    With simultaneous straight-line flights that start and end together, this
    assignment keeps the lines from crossing (the module docstring).
    """
    starts = np.asarray(starts, dtype=float)
    slots = np.asarray(slots, dtype=float)
    cost = ((starts[:, None, :] - slots[None, :, :]) ** 2).sum(axis=2)
    if len(starts) <= _BRUTE_FORCE_MAX:  # every permutation at once: no scipy import (seconds on a busy machine)
        permutations = np.array(list(itertools.permutations(range(len(slots)), len(starts))), dtype=int)
        totals = cost[np.arange(len(starts)), permutations].sum(axis=1)
        return permutations[int(np.argmin(totals))]
    from scipy.optimize import linear_sum_assignment

    rows, columns = linear_sum_assignment(cost)
    assignment = np.empty(len(starts), dtype=int)
    assignment[rows] = columns
    return assignment


def smoothstep(fraction):
    """3f^2 - 2f^3 on [0, 1] (clipped): zero speed at both ends."""
    f = np.clip(fraction, 0.0, 1.0)
    return f * f * (3.0 - 2.0 * f)


def assembly_setpoints(starts, goals, elapsed_s: float, duration_s: float) -> np.ndarray:
    """(N, 3) setpoints ``elapsed_s`` into the synchronised straight-line flights from ``starts`` to ``goals``."""
    starts = np.asarray(starts, dtype=float)
    fraction = smoothstep(elapsed_s / duration_s) if duration_s > 0 else 1.0
    return starts + fraction * (np.asarray(goals, dtype=float) - starts)


def assembly_duration(params: FormationParams, starts, goals) -> float:
    """Time of the assembly flights: the longest distance at ``assemble_speed_m_s`` (smoothstep peaks at
    1.5x that), at least 1 s."""
    distances = np.linalg.norm(np.asarray(goals, float) - np.asarray(starts, float), axis=1)
    return max(1.0, float(distances.max(initial=0.0)) / params.assemble_speed_m_s)


class CentrePath:
    """The formation centre over time: arc length s(t) by a trapezoidal speed profile along the path."""

    def __init__(self, params: FormationParams):
        self.params = params
        if params.centre_path == "waypoints":
            points = np.asarray(params.waypoints, dtype=float)
            keep = np.ones(len(points), dtype=bool)
            keep[1:] = np.linalg.norm(np.diff(points, axis=0), axis=1) > 1e-9
            self._points = points[keep]
            self._cumulative = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(self._points, axis=0), axis=1))])
            full = float(self._cumulative[-1])
        else:
            full = 2.0 * math.pi * params.circle_radius_m
        v, a = params.centre_speed_m_s, params.centre_acceleration_m_s2
        if params.duration_s > 0:
            # The distance a trapezoid of this speed and acceleration covers in duration_s.
            reach = v * (params.duration_s - v / a) if params.duration_s >= 2 * v / a else a * params.duration_s ** 2 / 4
            length = reach if params.centre_path == "circle" else min(full, reach)
        else:
            length = full
        self.length_m = float(length)
        if length <= v * v / a:  # triangle: never reaches cruise speed
            self._peak = math.sqrt(length * a)
            self._accel_s = self._peak / a
            self._cruise_s = 0.0
        else:
            self._peak = v
            self._accel_s = v / a
            self._cruise_s = (length - v * v / a) / v
        self.duration_s = 2.0 * self._accel_s + self._cruise_s

    def arc_length(self, t):
        """Distance travelled along the path at time(s) ``t`` (0 before, ``length_m`` after)."""
        t = np.clip(np.asarray(t, dtype=float), 0.0, self.duration_s)
        a, ta, tc, peak = self.params.centre_acceleration_m_s2, self._accel_s, self._cruise_s, self._peak
        rising = 0.5 * a * t**2
        cruising = 0.5 * a * ta**2 + peak * (t - ta)
        left = self.duration_s - t
        falling = self.length_m - 0.5 * a * left**2
        return np.where(t < ta, rising, np.where(t < ta + tc, cruising, falling))

    def position(self, t) -> np.ndarray:
        """Centre position(s) at time(s) ``t`` (s since the formation flight began): (3,) or (T, 3), z = altitude."""
        s = self.arc_length(t)
        if self.params.centre_path == "circle":
            angle = s / self.params.circle_radius_m
            cx, cy = self.params.circle_centre_m
            r = self.params.circle_radius_m
            x, y = cx + r * np.cos(angle), cy + r * np.sin(angle)
        else:
            x = np.interp(s, self._cumulative, self._points[:, 0])
            y = np.interp(s, self._cumulative, self._points[:, 1])
        return np.stack([x, y, np.full_like(np.asarray(x, dtype=float), self.params.altitude_m)], axis=-1)


@dataclass(frozen=True)
class FormationPlan:
    """A formation of ``count`` vehicles around a moving centre: slot offsets and the centre's path."""

    params: FormationParams
    offsets: np.ndarray  # (count, 3), slot k's offset from the centre
    centre: CentrePath

    @classmethod
    def build(cls, params: FormationParams, count: int) -> "FormationPlan":
        check_separation(params, count)
        return cls(params, slot_offsets(params, count), CentrePath(params))

    @property
    def count(self) -> int:
        return len(self.offsets)

    @property
    def duration_s(self) -> float:
        return self.centre.duration_s

    def setpoints(self, t: float) -> np.ndarray:
        """(count, 3) slot positions ``t`` seconds into the formation flight (held at the end)."""
        return self.centre.position(t)[None, :] + self.offsets

    def setpoint(self, slot: int, t) -> np.ndarray:
        """Slot ``slot``'s position(s) at time(s) ``t``: (3,) or (T, 3)."""
        return self.centre.position(t) + self.offsets[slot]


def planned_path(plan: FormationPlan, slot: int, spacing_m: float = PATH_SPACING_M) -> np.ndarray:
    """(M, 3) polyline slot ``slot`` traces during the formation flight, a point every ``spacing_m`` of path."""
    count = max(2, int(math.ceil(plan.centre.length_m / spacing_m)) + 1)
    times = np.linspace(0.0, plan.duration_s, 4 * count)  # dense in time, then thinned by distance
    points = plan.setpoint(slot, times)
    keep = [0]
    for index in range(1, len(points)):
        if np.linalg.norm(points[index] - points[keep[-1]]) >= spacing_m:
            keep.append(index)
    if keep[-1] != len(points) - 1:
        keep.append(len(points) - 1)
    return points[keep]


# -- figures of a flown swarm ----------------------------------------------------


def hausdorff_per_vehicle(tracks: dict[str, np.ndarray], paths: dict[str, np.ndarray]) -> dict[str, TrackMetrics]:
    """Per vehicle: symmetric Hausdorff distance and cross-track error of its flown track (N, 3) against its
    planned path (M, 3) (:func:`aerial_sim.control.track.compare_tracks`); vehicles with fewer than two
    track points are left out."""
    return {name: compare_tracks(track, paths[name]) for name, track in tracks.items()
            if name in paths and len(track) >= 2}


def resample_tracks(tracks: list[tuple[np.ndarray, np.ndarray]], rate_hz: float) -> tuple[np.ndarray, np.ndarray]:
    """Put tracks sampled at different instants on common ones: ``(times (T,), positions (T, N, 3))``.

    ``tracks``: per vehicle (times (n,), positions (n, 3)), times increasing. The
    common instants run at ``rate_hz`` over the span every track covers; positions
    are linearly interpolated. Empty arrays when the spans do not overlap.
    """
    if not tracks or any(len(t) == 0 for t, _ in tracks):
        return np.empty(0), np.empty((0, len(tracks), 3))
    start = max(float(t[0]) for t, _ in tracks)
    end = min(float(t[-1]) for t, _ in tracks)
    if end < start:
        return np.empty(0), np.empty((0, len(tracks), 3))
    grid = np.arange(start, end + 0.5 / rate_hz, 1.0 / rate_hz)
    grid = grid[grid <= end + 1e-12]
    positions = np.empty((len(grid), len(tracks), 3))
    for index, (times, points) in enumerate(tracks):
        points = np.asarray(points, dtype=float)
        for axis in range(3):
            positions[:, index, axis] = np.interp(grid, times, points[:, axis])
    return grid, positions


@dataclass(frozen=True)
class ClosestApproach:
    """The smallest centre-to-centre distance between two vehicles: which pair and when."""

    distance_m: float
    first: int
    second: int
    time_s: float


def closest_approach(times, positions) -> ClosestApproach | None:
    """Closest approach over all pairs of vehicles, tracks (T, N, 3) sampled at common ``times`` (T,).

    Vectorised over time and pairs (in blocks of time); None for fewer than two
    vehicles or no samples. ``first`` < ``second`` index the N axis.
    """
    positions = np.asarray(positions, dtype=float)
    times = np.asarray(times, dtype=float)
    if positions.ndim != 3 or positions.shape[1] < 2 or positions.shape[0] == 0:
        return None
    first, second = np.triu_indices(positions.shape[1], k=1)
    best = (math.inf, 0, 0)
    for start in range(0, len(times), _TIME_BLOCK):
        block = positions[start : start + _TIME_BLOCK]
        distances = np.linalg.norm(block[:, first, :] - block[:, second, :], axis=2)  # (t, pairs)
        flat = int(np.argmin(distances))
        row, pair = divmod(flat, distances.shape[1])
        if distances[row, pair] < best[0]:
            best = (float(distances[row, pair]), start + row, pair)
    distance, row, pair = best
    return ClosestApproach(distance, int(first[pair]), int(second[pair]), float(times[row]))


def summary_text(params: FormationParams, names: list[str], metrics: dict[str, TrackMetrics], approach,
                 approach_pair: tuple[str, str] | None, planned_separation_m: float, outcomes: dict[str, str],
                 flight_s: float) -> str:
    """The swarm run's summary (swarm_summary.txt): per-vehicle Hausdorff and the closest approach."""
    shape = (f"ring of radius {params.radius_m:g} m" if params.formation == "ring"
             else f"grid {params.spacing_m:g} m apart")
    path = ("waypoints " + " -> ".join(f"({x:g}, {y:g})" for x, y in params.waypoints)
            if params.centre_path == "waypoints"
            else f"circle r = {params.circle_radius_m:g} m around ({params.circle_centre_m[0]:g}, {params.circle_centre_m[1]:g})")
    lines = [
        f"swarm mission      {params.name}: {len(names)} vehicles, {shape}, at z = {params.altitude_m:g} m",
        f"centre path        {path} at up to {params.centre_speed_m_s:g} m/s, formation flight {flight_s:.1f} s (sim time)",
        f"planned separation {planned_separation_m:.3f} m between slots (safety distance {params.safety_distance_m:g} m)",
    ]
    if approach is not None and approach_pair is not None:
        lines.append(f"closest approach   {approach.distance_m:.3f} m between {approach_pair[0]} and {approach_pair[1]} "
                     f"at t = {approach.time_s:.2f} s (whole flight, centre to centre)")
    else:
        lines.append("closest approach   n/a (fewer than two vehicles flew)")
    lines.append("vehicle            Hausdorff   RMS cross-track   max cross-track   samples   outcome")
    for name in names:
        m = metrics.get(name)
        figures = (f"{m.hausdorff_m:7.3f} m   {m.rms_cross_track_m:7.3f} m         {m.max_cross_track_m:7.3f} m"
                   f"         {m.samples:6d}" if m is not None else f"{'n/a':>9}   {'n/a':>9}         {'n/a':>9}         {'-':>6}")
        lines.append(f"{name:<18} {figures}   {outcomes.get(name, '?')}")
    return "\n".join(lines)
