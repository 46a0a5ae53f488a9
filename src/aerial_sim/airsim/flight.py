"""AirSim's high-level flight tasks on top of the flight controller's public inputs (pure, no ROS).

AirSim's ``MultirotorApiBase`` runs each ``*Async`` command as a loop on the
simulation clock (``getCommandPeriod()`` = 1/50 s for simple_flight) that
sends a setpoint, checks its goal and ends when the goal is reached, its
duration or timeout has passed, or the next command cancels it. These tasks do
the same, with aerial_sim's flight controller underneath:

- position goals, paths, ``moveToZ``, ``goHome``: a carrot on the path
  (:class:`PathFollower`: the point ``lookahead`` metres ahead of the closest
  point of the path) flown at ``velocity`` on ``cmd_vel``, slowing down as
  ``gain * distance`` near the end; the goal is then held with ``cmd_pose``;
- velocity commands: ``cmd_vel`` in ``map`` every period for ``duration``
  (body-frame ones are turned into the world frame once, at the start, by the
  heading then, as AirSim does); ``...Z`` variants hold the altitude with a P
  loop on the vertical speed;
- yaw (:func:`yaw_rate_command`): ``YawMode`` angle -> a P loop on the yaw
  error, rate -> that rate; ``ForwardOnly`` faces the direction of travel plus
  the angle as an offset (a rate is refused with ``ForwardOnly``, as in AirSim);
- attitude and rate commands: ``cmd_attitude`` / ``cmd_rates``; motor PWMs:
  ``cmd_motors`` (passed through unchanged by the controller).

All vectors are ENU/FLU here; the API layer converts the client's NED first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from aerial_sim.control.geometry import wrap_angle, yaw_of

MAX_DEGREE_OF_FREEDOM, FORWARD_ONLY = 0, 1


@dataclass(frozen=True)
class GuidanceParams:
    """Gains and tolerances of the API's flight tasks (defaults here only)."""

    #: AirSim's command period (simple_flight: 1/50 s of simulation time).
    command_period_s: float = 0.02
    #: Yaw P gain (1/s) turning a yaw error into the yaw rate sent on cmd_vel.
    yaw_gain: float = 2.0
    max_yaw_rate_rad_s: float = 1.5
    #: Speed (m/s) per metre left near the end of a path, and the vertical P gain of the ``...Z`` commands.
    approach_gain: float = 1.0
    altitude_gain: float = 1.5
    #: A goal is reached within this distance (m); AirSim's distance accuracy is of the same order.
    goal_tolerance_m: float = 0.3
    #: simple_flight's ``getDistanceAccuracy()`` (m): the auto lookahead is at least 1.5 times this.
    distance_accuracy_m: float = 0.5
    #: AirSim's ``getAutoLookahead``: lookahead = speed x command period x factor (30 with
    #: adaptive_lookahead, 40 without), so 0.6 s (0.8 s) of travel at the commanded speed.
    adaptive_lookahead_factor: float = 30.0
    fixed_lookahead_factor: float = 40.0
    #: takeoffAsync climbs this far above the start (AirSim: "3 m above ground").
    takeoff_height_m: float = 3.0
    #: Below this horizontal speed ForwardOnly keeps the current heading (no direction to face).
    forward_only_min_speed_m_s: float = 0.2


def yaw_rate_command(params: GuidanceParams, current_yaw: float, is_rate: bool, yaw_or_rate: float,
                     drivetrain: int, travel_world: Sequence[float] | None = None, hold_yaw: float | None = None) -> float:
    """ENU yaw rate (rad/s) that realises an AirSim YawMode (given here already in ENU radians).

    ``yaw_or_rate``: target heading (angle mode), rate (rate mode) or, with
    ForwardOnly, the offset from the direction of travel ``travel_world``.
    """
    limit = params.max_yaw_rate_rad_s
    if drivetrain == FORWARD_ONLY:
        speed = math.hypot(travel_world[0], travel_world[1]) if travel_world is not None else 0.0
        if speed < params.forward_only_min_speed_m_s:
            target = current_yaw if hold_yaw is None else hold_yaw
        else:
            target = math.atan2(travel_world[1], travel_world[0]) + yaw_or_rate
    elif is_rate:
        return max(-limit, min(limit, yaw_or_rate))
    else:
        target = yaw_or_rate
    return max(-limit, min(limit, params.yaw_gain * wrap_angle(target - current_yaw)))


def auto_lookahead(params: GuidanceParams, speed: float, adaptive: bool) -> float:
    """AirSim's ``getAutoLookahead``: ``speed * period * factor``, at least 1.5 x the distance accuracy."""
    factor = params.adaptive_lookahead_factor if adaptive else params.fixed_lookahead_factor
    return max(speed * params.command_period_s * factor, 1.5 * params.distance_accuracy_m)


def check_lookahead(params: GuidanceParams, speed: float, lookahead: float) -> None:
    """Refuse what AirSim's ``moveOnPath`` refuses (ValueError with AirSim's words)."""
    if lookahead == 0:
        raise ValueError("lookahead distance cannot be 0")
    if lookahead > 0:
        step = speed * params.command_period_s
        if step > lookahead:
            raise ValueError(f"lookahead value {lookahead:f} is too small for velocity {speed:f}. "
                             f"It must be at least {step:f}")
        if params.distance_accuracy_m > lookahead:
            raise ValueError(f"lookahead value {lookahead:f} is smaller than drone's distance accuracy "
                             f"{params.distance_accuracy_m:f}.")


class PathFollower:
    """Carrot-on-a-path guidance (AirSim's ``MultirotorApiBase::moveOnPath``): velocity toward the lookahead point.

    The carrot is ``lookahead`` metres of path ahead of the closest path point
    (which never moves back), as in AirSim; with ``lookahead < 0`` it is
    :func:`auto_lookahead` (AirSim's ``getAutoLookahead``). The goal is reached
    when the progress along the path is within ``goal_tolerance_m`` of its end
    *and* the vehicle is that close to the last point, so a closed path (last
    point = start) is flown, not declared done at once.
    """

    def __init__(self, start: Sequence[float], path: Sequence[Sequence[float]], speed: float, lookahead: float,
                 params: GuidanceParams, adaptive: bool = True):
        points = [np.asarray(start, float)] + [np.asarray(p, float) for p in path]
        self.points = np.array(points)
        segments = np.diff(self.points, axis=0)
        self.lengths = np.linalg.norm(segments, axis=1)
        self.cumulative = np.concatenate([[0.0], np.cumsum(self.lengths)])
        self.total = float(self.cumulative[-1])
        self.speed = speed
        self.lookahead = lookahead if lookahead > 0 else auto_lookahead(params, speed, adaptive)
        self.params = params
        self._progress = 0.0  # arc length of the closest point so far (never goes back)

    @property
    def goal(self) -> np.ndarray:
        return self.points[-1]

    def point_at(self, s: float) -> np.ndarray:
        s = min(max(s, 0.0), self.total)
        index = int(np.searchsorted(self.cumulative, s, side="right")) - 1
        index = min(max(index, 0), len(self.lengths) - 1)
        length = self.lengths[index]
        t = 0.0 if length == 0 else (s - self.cumulative[index]) / length
        return self.points[index] + t * (self.points[index + 1] - self.points[index])

    def closest_arc_length(self, position: np.ndarray) -> float:
        """Arc length of the path point closest to ``position``, not behind the progress so far and
        not more than two lookaheads ahead of it."""
        best_s, best_d = self._progress, math.inf
        horizon = self._progress + 2.0 * self.lookahead + self.params.goal_tolerance_m
        for index, length in enumerate(self.lengths):
            if self.cumulative[index + 1] < self._progress or length == 0:
                continue
            if self.cumulative[index] > horizon:
                break  # local, as AirSim's: a later leg passing close by (a closed path's last) is not jumped to
            a, b = self.points[index], self.points[index + 1]
            t = float(np.clip(np.dot(position - a, b - a) / (length * length), 0.0, 1.0))
            s = max(self.cumulative[index] + t * length, self._progress)
            d = float(np.linalg.norm(position - self.point_at(s)))
            if d < best_d:
                best_s, best_d = s, d
        self._progress = best_s
        return best_s

    def command(self, position: Sequence[float]) -> tuple[np.ndarray, bool]:
        """(world velocity to fly, goal reached) for the current position."""
        position = np.asarray(position, float)
        to_goal = self.goal - position
        distance_to_goal = float(np.linalg.norm(to_goal))
        s = self.closest_arc_length(position)
        tolerance = self.params.goal_tolerance_m
        if distance_to_goal <= tolerance and self.total - s <= tolerance + 1e-9:
            return np.zeros(3), True
        carrot = self.point_at(s + self.lookahead)
        direction = carrot - position
        norm = float(np.linalg.norm(direction))
        if norm < 1e-9:
            direction, norm = to_goal, distance_to_goal
        remaining = (self.total - s) + float(np.linalg.norm(position - self.point_at(s)))
        speed = min(self.speed, self.params.approach_gain * remaining)
        return direction / norm * speed, False


def world_velocity_from_heading(forward: float, right: float, yaw_ned: float) -> tuple[float, float]:
    """AirSim body-frame (x forward, y right) horizontal velocity -> (north, east) by the heading."""
    c, s = math.cos(yaw_ned), math.sin(yaw_ned)
    return c * forward - s * right, s * forward + c * right


def heading(orientation: Sequence[float]) -> float:
    """ENU heading (rad) of an ENU/FLU attitude."""
    return yaw_of(orientation)
