"""Timing a commanded path, and following it with velocity commands (pure, no ROS).

:class:`Trajectory` turns a polyline into position/velocity/acceleration over
time with a speed profile limited by the cruise speed and by one acceleration
bound used both along the path (speeding up, braking) and across it
(centripetal, a = v^2 kappa): the classic forward/backward pass of
time-optimal path parameterisation for a point mass (e.g. Lipp & Boyd,
"Minimum-time speed optimisation over a fixed path", 2014, sec. 2). Sharp
corners get a near-zero speed because their curvature, estimated over the
sample spacing, is large: the square is flown corner to corner, stopping at
each, the way a waypoint mission flies it.

:class:`PathFollower` is what the mission runner sends as ``cmd_vel``:
``v = v_ref(t) + K (p_ref(t) - p)`` with the correction limited in size.
"""

from __future__ import annotations

import math

import numpy as np

#: Longest segment of the resampled path, m; corners keep their exact vertices.
RESAMPLE_SPACING_M = 0.05


class Trajectory:
    """A polyline timed with a speed- and acceleration-limited profile, starting and ending at rest."""

    def __init__(self, path: np.ndarray, speed_m_s: float, acceleration_m_s2: float):
        points = _resample(np.asarray(path, dtype=float), RESAMPLE_SPACING_M)
        self.points = points
        if len(points) < 2:
            self.times = np.zeros(1)
            self.speeds = np.zeros(1)
            self.velocities = np.zeros((1, 3))
            self.accelerations = np.zeros((1, 3))
            return
        segments = np.diff(points, axis=0)
        lengths = np.linalg.norm(segments, axis=1)
        tangents = segments / lengths[:, None]
        # Curvature at interior vertices: turn angle over the mean adjacent segment length.
        cosines = np.clip(np.einsum("ij,ij->i", tangents[:-1], tangents[1:]), -1.0, 1.0)
        curvature = np.arccos(cosines) / (0.5 * (lengths[:-1] + lengths[1:]))
        limit = np.full(len(points), float(speed_m_s))
        with np.errstate(divide="ignore"):
            limit[1:-1] = np.minimum(limit[1:-1], np.sqrt(acceleration_m_s2 / np.maximum(curvature, 1e-12)))
        limit[0] = limit[-1] = 0.0
        speeds = limit.copy()
        for i in range(1, len(points)):  # forward pass: cannot speed up faster than the bound
            speeds[i] = min(speeds[i], math.sqrt(speeds[i - 1] ** 2 + 2.0 * acceleration_m_s2 * lengths[i - 1]))
        for i in range(len(points) - 2, -1, -1):  # backward pass: must be able to brake in time
            speeds[i] = min(speeds[i], math.sqrt(speeds[i + 1] ** 2 + 2.0 * acceleration_m_s2 * lengths[i]))
        durations = 2.0 * lengths / np.maximum(speeds[:-1] + speeds[1:], 1e-9)
        self.times = np.concatenate([[0.0], np.cumsum(durations)])
        self.speeds = speeds
        # Velocity at a vertex: speed along the mean of the adjacent tangents.
        directions = np.vstack([tangents[:1], tangents[:-1] + tangents[1:], tangents[-1:]])
        directions /= np.maximum(np.linalg.norm(directions, axis=1, keepdims=True), 1e-12)
        self.velocities = directions * speeds[:, None]
        self.accelerations = np.gradient(self.velocities, self.times, axis=0) if len(points) > 2 else np.zeros((2, 3))

    @property
    def duration_s(self) -> float:
        return float(self.times[-1])

    @property
    def length_m(self) -> float:
        return float(np.linalg.norm(np.diff(self.points, axis=0), axis=1).sum())

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Position, velocity and acceleration (map, SI) at time ``t`` s after the start (clamped)."""
        times = self.times
        if t <= times[0]:
            return self.points[0].copy(), np.zeros(3), np.zeros(3)
        if t >= times[-1]:
            return self.points[-1].copy(), np.zeros(3), np.zeros(3)
        i = int(np.searchsorted(times, t, side="right")) - 1
        f = (t - times[i]) / (times[i + 1] - times[i])
        lerp = lambda a: a[i] + f * (a[i + 1] - a[i])  # noqa: E731
        return lerp(self.points), lerp(self.velocities), lerp(self.accelerations)


class PathFollower:
    """Velocity commands that fly a :class:`Trajectory`: ``v_ref(t) + K (p_ref(t) - p)``, correction limited."""

    def __init__(self, trajectory: Trajectory, gain_per_s: float, max_correction_m_s: float, lookahead_s: float = 0.0):
        self.trajectory = trajectory
        self.gain = gain_per_s
        self.max_correction = max_correction_m_s
        self.lookahead_s = lookahead_s

    def command(self, t: float, position) -> tuple[np.ndarray, np.ndarray]:
        """(velocity command, reference position) at ``t`` s after the start, for the vehicle at ``position``."""
        reference, _, _ = self.trajectory.sample(t)
        _, velocity, _ = self.trajectory.sample(t + self.lookahead_s)
        correction = self.gain * (reference - np.asarray(position, dtype=float))
        size = float(np.linalg.norm(correction))
        if size > self.max_correction:
            correction *= self.max_correction / size
        return velocity + correction, reference


def _resample(points: np.ndarray, spacing: float) -> np.ndarray:
    """Split every segment longer than ``spacing`` into equal parts, keeping the original vertices."""
    if len(points) < 2:
        return points
    pieces = [points[:1]]
    for a, b in zip(points[:-1], points[1:]):
        count = max(1, int(math.ceil(np.linalg.norm(b - a) / spacing)))
        fractions = np.arange(1, count + 1)[:, None] / count
        pieces.append(a + fractions * (b - a))
    return np.vstack(pieces)
