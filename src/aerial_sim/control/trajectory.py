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

import bisect
import math

import numpy as np

#: Longest segment of the resampled path, m; corners keep their exact vertices.
RESAMPLE_SPACING_M = 0.05
#: Which vector :meth:`Trajectory.at` gives.
POSITION, VELOCITY, ACCELERATION = 0, 1, 2


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
            self._keep_floats()
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
        self._keep_floats()

    def _keep_floats(self) -> None:
        """The arrays as lists of floats, for :meth:`at` (the same numbers)."""
        self._times = self.times.tolist()
        #: A path with a repeated vertex has NaN times from it on: bisect cannot search those as searchsorted does.
        self._finite_times = math.isfinite(self._times[-1])
        self._rows = (self.points.tolist(), self.velocities.tolist(), self.accelerations.tolist())

    @property
    def duration_s(self) -> float:
        return float(self.times[-1])

    @property
    def length_m(self) -> float:
        return float(np.linalg.norm(np.diff(self.points, axis=0), axis=1).sum())

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Position, velocity and acceleration (map, SI) at time ``t`` s after the start (clamped)."""
        return tuple(np.array(self.at(t, which)) for which in (POSITION, VELOCITY, ACCELERATION))

    def at(self, t: float, which: int) -> tuple[float, float, float]:
        """One vector of :meth:`sample` (``which``: :data:`POSITION`, :data:`VELOCITY` or :data:`ACCELERATION`) as
        floats: the vertex before ``t`` (``searchsorted``'s right side, by ``bisect``) and the linear interpolation
        to the next, each component as NumPy computed it on the rows, so the same bits. In plain floats: NumPy on
        3-vectors cost about 25 us a sample, and the mission runner takes two at 50 Hz while it follows a pattern
        (issue 34)."""
        times, rows = self._times, self._rows[which]
        if t <= times[0]:
            return tuple(rows[0]) if which == POSITION else (0.0, 0.0, 0.0)
        if t >= times[-1]:
            return tuple(rows[-1]) if which == POSITION else (0.0, 0.0, 0.0)
        if self._finite_times:
            i = bisect.bisect_right(times, t) - 1
        else:
            i = int(np.searchsorted(self.times, t, side="right")) - 1
        f = (t - times[i]) / (times[i + 1] - times[i])
        (a0, a1, a2), (b0, b1, b2) = rows[i], rows[i + 1]
        return (a0 + f * (b0 - a0), a1 + f * (b1 - a1), a2 + f * (b2 - a2))


class PathFollower:
    """Velocity commands that fly a :class:`Trajectory`: ``v_ref(t) + K (p_ref(t) - p)``, correction limited."""

    def __init__(self, trajectory: Trajectory, gain_per_s: float, max_correction_m_s: float, lookahead_s: float = 0.0):
        self.trajectory = trajectory
        self.gain = gain_per_s
        self.max_correction = max_correction_m_s
        self.lookahead_s = lookahead_s

    def command(self, t: float, position) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        """(velocity command, reference position) at ``t`` s after the start, for the vehicle at ``position``.

        In plain floats, component by component as NumPy's arithmetic on the 3-vectors was; the correction's size
        is ``sqrt(c . c)`` with NumPy's dot, what ``np.linalg.norm`` computes (a plain sum of squares differs from
        that dot in the last bit about once in ten)."""
        reference = self.trajectory.at(t, POSITION)
        velocity = self.trajectory.at(t + self.lookahead_s, VELOCITY)
        gain = self.gain
        correction = [gain * (r - float(p)) for r, p in zip(reference, position)]
        vector = np.array(correction)
        size = math.sqrt(vector.dot(vector))
        if size > self.max_correction:
            scale = self.max_correction / size
            correction = [c * scale for c in correction]
        return tuple(v + c for v, c in zip(velocity, correction)), reference


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
