"""Ground truth at its own rate turned into the sensor's instants (the AirLib design).

- :class:`Resampler`: turns ground truth arriving at its own rate (250 Hz) into samples at the
  exact instants ``k / rate_hz`` of the sensor, by interpolating between the two bracketing truth
  samples (or holding the older one); :func:`resample_for` resets the model when it starts over;
- :class:`PoseTrack`: the pose interpolated at each point's own time (a lidar sweep).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from aerial_sim.config import ParamsError
from aerial_sim.physics import rotation as physics_rotation
from aerial_sim.sensors.quaternions import quat_multiply, rotation_matrix, slerp
from aerial_sim.sensors.truth import GroundTruthLike, Quat, TIME_EPSILON_S, TruthSample, Vec3, as_truth_sample

class Resampler:
    """Ground truth at any rate -> samples at the exact instants ``t_k = k / rate_hz``.

    Each pushed truth sample returns the sensor instants in (previous truth
    time, this truth time], each built by interpolating the two bracketing
    truth samples (``mode='linear'``: vectors linearly, orientation by slerp)
    or by holding the older one (``mode='hold'``, zero-order hold). So a
    200 Hz IMU fed 250 Hz truth gives exactly 200 samples per simulated second,
    stamped 0.005 s apart, whatever the ratio of the two rates.

    Time going backwards (a simulation restart) or a gap longer than
    ``max_gap_s`` starts over at the new sample instead of back-filling.
    """

    def __init__(self, rate_hz: float, mode: Literal["linear", "hold"] = "linear", max_gap_s: float = 1.0):
        if not (math.isfinite(rate_hz) and rate_hz > 0):
            raise ParamsError(f"rate_hz must be a positive number, got {rate_hz!r}")
        if mode not in ("linear", "hold"):
            raise ParamsError(f"mode must be 'linear' or 'hold', got {mode!r}")
        self.rate_hz = float(rate_hz)
        self.mode = mode
        self.max_gap_s = max_gap_s
        self.restarted = False  #: True after a push that started over (callers reset their models)
        self.reset()

    def reset(self) -> None:
        self._last: TruthSample | None = None
        self._next_index = 0

    def instant(self, index: int) -> float:
        return index / self.rate_hz

    def push(self, truth: GroundTruthLike) -> list[TruthSample]:
        sample = truth if truth.__class__ is TruthSample else as_truth_sample(truth)
        last = self._last
        time_s = sample.time_s
        self.restarted = last is None or time_s < last.time_s - TIME_EPSILON_S or time_s - last.time_s > self.max_gap_s
        if self.restarted:
            self._last = sample
            self._next_index = math.ceil(time_s * self.rate_hz - TIME_EPSILON_S * self.rate_hz)
            return self._emit_until(sample, lambda t: sample._replace(time_s=t))
        self._last = sample
        if time_s <= last.time_s + TIME_EPSILON_S:  # duplicate stamp: nothing new
            return []
        if self._next_index / self.rate_hz > time_s + TIME_EPSILON_S:
            return []  # no instant of the sensor's in (last, this]: most pushes of a sensor slower than the truth
        if self.mode == "hold":
            return self._emit_until(sample, lambda t: (sample if t >= time_s - TIME_EPSILON_S else last)._replace(time_s=t))
        return self._emit_until(sample, lambda t: interpolate(last, sample, t))

    def _emit_until(self, sample: TruthSample, make) -> list[TruthSample]:
        out = []
        while (t := self.instant(self._next_index)) <= sample.time_s + TIME_EPSILON_S:
            out.append(make(t))
            self._next_index += 1
        return out


def resample_for(model: Any, resampler: "Resampler", truth: GroundTruthLike) -> list[TruthSample]:
    """``truth`` resampled to the sensor's instants; when the resampler starts over (simulation
    time went back, e.g. a new run, or jumped a gap) ``model`` is reset too, so drift, latency
    queues and filters never carry over from another run."""
    samples = resampler.push(truth)
    if resampler.restarted:
        model.reset()
    return samples


def interpolate(a: TruthSample, b: TruthSample, time_s: float) -> TruthSample:
    """Ground truth at ``time_s`` between samples ``a`` and ``b`` (linear; slerp for orientation)."""
    span = b.time_s - a.time_s
    f = 0.0 if span <= 0 else min(max((time_s - a.time_s) / span, 0.0), 1.0)
    return TruthSample(time_s, _lerp3(a.position, b.position, f), slerp(a.orientation, b.orientation, f),
                       _lerp3(a.velocity_world, b.velocity_world, f),
                       _lerp3(a.angular_velocity_body, b.angular_velocity_body, f),
                       _lerp3(a.specific_force_body, b.specific_force_body, f),
                       _lerp3(a.angular_acceleration_body, b.angular_acceleration_body, f))


def _lerp3(x: Vec3, y: Vec3, f: float) -> Vec3:
    return (x[0] + f * (y[0] - x[0]), x[1] + f * (y[1] - x[1]), x[2] + f * (y[2] - x[2]))


class PoseTrack:
    """Recent ground-truth poses of one body, to place rays fired at many instants between them.

    A scanning sensor (the lidar) fires each beam at its own instant; this turns the
    truth samples bracketing those instants into the world pose of every beam:
    position linear in time, orientation by the constant-rate rotation between the
    two samples (the same path as slerp, evaluated by Rodrigues' formula in the body
    frame of the earlier sample, so one axis and angle serves every instant of an
    interval). ``hold=True`` uses the earlier sample's pose (zero-order hold).
    """

    def __init__(self, hold: bool = False):
        self.hold = hold
        self.clear()

    def clear(self) -> None:
        self._samples: list[tuple[float, np.ndarray, Quat]] = []

    def __len__(self) -> int:
        return len(self._samples)

    @property
    def first_time_s(self) -> float:
        return self._samples[0][0]

    @property
    def last_time_s(self) -> float:
        return self._samples[-1][0]

    def push(self, time_s: float, position: Vec3, orientation: Quat) -> None:
        """Append a sample (times must increase; the caller restarts the track when they do not)."""
        q = np.asarray(orientation, float)
        self._samples.append((float(time_s), np.asarray(position, float), tuple(q / np.linalg.norm(q))))

    def drop_before(self, time_s: float) -> None:
        """Forget samples no longer needed for instants >= ``time_s`` (keeps the one bracketing it)."""
        keep = 0
        while keep + 1 < len(self._samples) and self._samples[keep + 1][0] <= time_s:
            keep += 1
        del self._samples[:keep]

    def to_world(self, times_s: np.ndarray, directions_body: np.ndarray, offset_body) -> tuple[np.ndarray, np.ndarray]:
        """World origins and unit directions (float32, (N, 3)) of rays fired at sorted ``times_s`` from
        ``offset_body`` along ``directions_body`` (N, 3), each with the body pose at its own instant
        (clamped to the track's first and last sample).

        Between samples k and k+1 the body turns by angle theta about a fixed body axis a, so at
        fraction s a body vector v points along R_k (v + sin(s theta) K v + (1 - cos(s theta)) K^2 v)
        with K the cross-product matrix of a (Rodrigues' formula): three 3x3 products per interval.
        """
        times_s = np.asarray(times_s, float)
        directions_body = np.asarray(directions_body, np.float32)
        offset = np.asarray(offset_body, np.float32)[None, :]
        origins = np.empty((len(times_s), 3), np.float32)
        directions = np.empty((len(times_s), 3), np.float32)
        samples = self._samples
        inner = [t for t, _, _ in samples[1:-1]]
        bounds = [0, *np.searchsorted(times_s, inner, side="left"), len(times_s)]
        for k, (begin, end) in enumerate(zip(bounds[:-1], bounds[1:])):
            if begin == end:
                continue
            (t0, p0, q0), (t1, p1, q1) = samples[k], samples[min(k + 1, len(samples) - 1)]
            s = np.zeros((end - begin, 1), np.float32)
            if not self.hold and t1 > t0:
                s = np.clip((times_s[begin:end, None] - t0) / (t1 - t0), 0.0, 1.0).astype(np.float32)
            turn = _interval_turn(q0, q1, s)
            directions[begin:end] = turn(directions_body[begin:end])
            origins[begin:end] = turn(offset) + p0.astype(np.float32) + s * (p1 - p0).astype(np.float32)
        return origins, directions


def _interval_turn(q0: Quat, q1: Quat, s: np.ndarray):
    """``v -> R(t) v`` for row vectors at the fractions ``s`` (n, 1) of the constant-rate turn from q0 to q1."""
    start = rotation_matrix(q0).T.astype(np.float32)
    axis, angle = _relative_axis_angle(q0, q1)
    if angle == 0.0:
        return lambda rows: rows @ start
    K = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    first = (rotation_matrix(q0) @ K).T.astype(np.float32)
    second = (rotation_matrix(q0) @ K @ K).T.astype(np.float32)
    sin, versine = np.sin(s * np.float32(angle)), 1.0 - np.cos(s * np.float32(angle))
    return lambda rows: rows @ start + (rows @ first) * sin + (rows @ second) * versine


def _relative_axis_angle(q0: Quat, q1: Quat) -> tuple[np.ndarray, float]:
    """Axis (in the body frame of ``q0``) and angle of the rotation ``q0^-1 q1``, shortest way round."""
    r = quat_multiply(physics_rotation.quat_conjugate(q0), q1)
    if r[0] < 0:
        r = tuple(-c for c in r)
    vector = np.asarray(r[1:], np.float64)
    sine = float(np.linalg.norm(vector))
    if sine < 1e-12:
        return np.array([1.0, 0.0, 0.0]), 0.0
    return vector / sine, 2.0 * math.atan2(sine, r[0])
