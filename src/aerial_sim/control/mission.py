"""Mission files and the paths they command (pure, no ROS).

A mission is: take off, fly a pattern (square, circle, figure-eight) or a list
of waypoints at a given speed, land. The square (5 m side) and circle (10 m
radius) are the trajectories of the AirSim paper's flight experiment (Shah et
al., FSR 2017, sec. 4, "Trajectory Evaluation"). Patterns are laid out from the
point where the vehicle hovers after takeoff (its "start"), counter-clockwise
seen from above unless ``clockwise``; waypoints are absolute ``map`` (ENU)
coordinates.

File format (``config/missions/*.yaml``), every key optional except what the
pattern needs::

    name: square_5m
    takeoff_altitude_m: 3.0
    pattern: square          # square | circle | figure_eight | waypoints
    size_m: 5.0              # square side, circle radius, figure-eight half-width
    speed_m_s: 2.0
    acceleration_m_s2: 1.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from aerial_sim.config import load_named_params, require, require_non_negative, require_positive

Vector3 = tuple[float, float, float]

#: Spacing of the points a curved pattern is sampled at, m.
CURVE_SPACING_M = 0.05


@dataclass(frozen=True)
class MissionParams:
    """One mission (defaults here only; see the module docstring for the file format)."""

    name: str = "mission"
    #: Climb this far above the ground point where the mission starts, m.
    takeoff_altitude_m: float = 3.0
    pattern: Literal["square", "circle", "figure_eight", "waypoints"] = "square"
    #: Square side, circle radius, or figure-eight half-width, m.
    size_m: float = 5.0
    #: Cruise speed along the path, m/s.
    speed_m_s: float = 2.0
    #: Largest tangential and centripetal acceleration the path is timed for, m/s^2.
    acceleration_m_s2: float = 1.0
    laps: int = 1
    clockwise: bool = False
    #: For ``pattern: waypoints``: absolute map (ENU) points, m.
    waypoints: tuple[Vector3, ...] = ()
    #: Hover this long before the pattern (after takeoff) and after it, s.
    hold_s: float = 2.0
    land: bool = True
    #: Path-following gain of the runner: velocity command = v_ref(t + lookahead) + gain * (p_ref(t) - p), 1/s.
    tracking_gain: float = 1.0
    #: Largest correction speed the runner adds to the reference velocity, m/s.
    max_correction_m_s: float = 2.0
    #: The reference velocity is taken this far ahead, s: about 1 / velocity_p of the flight
    #: controller, it cancels the velocity loop's first-order lag (cmd_vel carries no acceleration).
    lookahead_s: float = 0.4

    def __post_init__(self):
        require_positive(self, "takeoff_altitude_m", "size_m", "speed_m_s", "acceleration_m_s2", "tracking_gain",
                         "max_correction_m_s")
        require_non_negative(self, "hold_s", "lookahead_s")
        require(self.laps >= 1, f"laps must be >= 1, got {self.laps}")
        if self.pattern == "waypoints":
            require(len(self.waypoints) > 0, "pattern 'waypoints' needs a non-empty waypoints list")
            require(all(math.isfinite(v) for p in self.waypoints for v in p), "waypoints must be finite numbers")


def load_mission(name_or_path: str) -> MissionParams:
    """Load ``config/missions/<name>.yaml`` or a YAML file path."""
    return load_named_params(MissionParams, name_or_path, "missions", "mission")


def pattern_path(mission: MissionParams, start: Vector3) -> np.ndarray:
    """The commanded path as an (N, 3) polyline in map (ENU), beginning at ``start`` for patterns."""
    start = np.asarray(start, dtype=float)
    if mission.pattern == "waypoints":
        points = np.vstack([start, np.asarray(mission.waypoints, dtype=float)])
        return _drop_repeats(points)
    size = mission.size_m
    if mission.pattern == "square":
        corners = np.array([[0, 0], [1, 0], [1, 1], [0, 1]], dtype=float) * size
        corners = np.vstack([np.tile(corners, (mission.laps, 1)), corners[:1]])
        planar = corners
    else:
        turns = mission.laps * 2.0 * math.pi
        if mission.pattern == "circle":
            count = max(16, int(math.ceil(turns * size / CURVE_SPACING_M)))
            theta = np.linspace(0.0, turns, count + 1)
            # Start on the circle, centre `size` metres to the north (left of the first heading, east).
            planar = np.column_stack([size * np.sin(theta), size * (1.0 - np.cos(theta))])
        else:  # figure_eight: lemniscate of Gerono through the start point
            length_estimate = mission.laps * 6.1 * size  # perimeter of the Gerono lemniscate ~ 6.1 a
            count = max(32, int(math.ceil(length_estimate / CURVE_SPACING_M)))
            theta = np.linspace(0.0, turns, count + 1)
            planar = np.column_stack([size * np.sin(theta), size * np.sin(theta) * np.cos(theta)])
    if mission.clockwise:
        planar = planar * np.array([1.0, -1.0])
    points = np.column_stack([planar, np.zeros(len(planar))]) + start
    return _drop_repeats(points)


def _drop_repeats(points: np.ndarray) -> np.ndarray:
    keep = np.ones(len(points), dtype=bool)
    keep[1:] = np.linalg.norm(np.diff(points, axis=0), axis=1) > 1e-9
    return points[keep]


#: Highest setpoint rate a client and its controller may agree on (Hz of sim time): far above any
#: odometry rate, and low enough that the grid arithmetic of :func:`is_setpoint_due` stays finite.
MAX_SETPOINT_RATE_HZ = 1e6


def require_setpoint_rate(owner, name: str) -> None:
    """Check ``owner.<name>``: a setpoint rate in [0, MAX_SETPOINT_RATE_HZ] Hz (0: every stamp)."""
    value = getattr(owner, name)
    require(math.isfinite(value) and 0 <= value <= MAX_SETPOINT_RATE_HZ,
            f"{name} must be in [0, {MAX_SETPOINT_RATE_HZ:g}] Hz (0: one per odometry stamp), got {value!r}")


def is_setpoint_due(stamp_s: float, previous_s: float, rate_hz: float) -> bool:
    """Whether a streaming client answers odometry stamp ``stamp_s`` (the one before: ``previous_s``).

    The contract between a client that streams setpoints (the mission runner, ``setpoint_rate_hz``)
    and the flight controller waiting for it in lockstep (``lockstep_client_rate_hz``): the client
    answers, with one setpoint stamped ``stamp_s`` or one service call, the first odometry stamp at or
    after each ``k / rate_hz`` of sim time, and the controller waits for it at exactly those stamps;
    between them it flies the setpoint in force. Both sides apply this rule to the same stamps, so
    every run waits at the same steps and repeats bit for bit. ``rate_hz`` 0: every stamp; the first
    stamp, and a stamp earlier than the previous one (a simulation reset), are always due.
    """
    if rate_hz <= 0 or not math.isfinite(previous_s) or stamp_s < previous_s:
        return True
    return _grid_slot(stamp_s, rate_hz) > _grid_slot(previous_s, rate_hz)


def _grid_slot(stamp_s: float, rate_hz: float) -> int:
    """k such that k / rate_hz <= stamp_s < (k + 1) / rate_hz, in whole nanoseconds (stamps are)."""
    return math.floor(round(stamp_s * 1e9) * rate_hz / 1e9 + 1e-9)
