"""Small reusable pieces that the sensor models combine (the AirLib design).

AirSim's AirLib builds every sensor from the same few parts: a rate limiter, a
latency delay line, a Gauss-Markov drift, a first-order filter. This module holds
those parts, pure and separately tested, plus the ground-truth sample the models
read:

- :class:`TruthSample`: one instant of ground truth (same field names as
  ``aerial_sim.physics.state.GroundTruth``, so either can be passed to a model);
- :class:`Resampler`: turns ground truth arriving at its own rate (250 Hz) into
  samples at the exact instants ``k / rate_hz`` of the sensor, by interpolating
  between the two bracketing truth samples (or holding the older one);
- :class:`GaussMarkov`, :class:`RandomWalk`: drifting biases;
- :class:`FirstOrderFilter`: exponential approach to a target (GPS fix quality);
- :class:`DelayLine`: fixed latency (GPS);
- :class:`Mount`: where a sensor sits on the body (``<ns>/<sensor>_link`` in ``base_link``);
- quaternion helpers for (w, x, y, z) body->world quaternions.

No ROS import here: the nodes in ``aerial_sim.nodes`` adapt these to topics.
"""

from __future__ import annotations

import copy
import math
import zlib
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, Sequence, TypeVar

import numpy as np

from aerial_sim.cdr import OdometryFields
from aerial_sim.config import ParamsError, load_yaml_params, require, require_positive
from aerial_sim.paths import resolve_config
from aerial_sim.physics import rotation as physics_rotation

Vec3 = tuple[float, float, float]
Quat = tuple[float, float, float, float]
P = TypeVar("P")

#: Standard gravity (m/s^2), the unit of the "g" in accelerometer datasheets.
STANDARD_GRAVITY = 9.80665
#: Two instants closer than this (s) are the same instant (stamps are integer nanoseconds).
TIME_EPSILON_S = 1e-9
#: A quaternion whose squared norm is below this carries no rotation (a malformed message).
MIN_QUATERNION_NORM2 = 1e-6
#: Ground truth beyond these is not a vehicle state but a malformed message: |position| m,
#: |velocity| m/s, |body rate| rad/s (every model here is valid far inside them).
MAX_TRUTH_POSITION_M = 1e6
MAX_TRUTH_SPEED_M_S = 1e3
MAX_TRUTH_RATE_RAD_S = 1e3
#: What a node logs (throttled) when :func:`truth_from_odometry` refuses a message.
UNUSABLE_ODOMETRY = (f"ground_truth/odom ignored: a non-finite value, a zero quaternion, or an implausible state "
                     f"(|p| > {MAX_TRUTH_POSITION_M:g} m, |v| > {MAX_TRUTH_SPEED_M_S:g} m/s "
                     f"or |w| > {MAX_TRUTH_RATE_RAD_S:g} rad/s)")


class GroundTruthLike(Protocol):
    """What a sensor model reads: :class:`TruthSample` or ``physics.state.GroundTruth``."""

    time_s: float
    position: Vec3
    orientation: Quat
    velocity_world: Vec3
    angular_velocity_body: Vec3
    specific_force_body: Vec3
    angular_acceleration_body: Vec3


@dataclass(frozen=True)
class TruthSample:
    """Ground truth of one vehicle at one instant (SI units, ENU world ``map``, FLU body).

    ``specific_force_body`` is what a perfect accelerometer at the body origin
    reads (+g up at rest, 0 in free fall).
    """

    time_s: float
    position: Vec3 = (0.0, 0.0, 0.0)
    orientation: Quat = (1.0, 0.0, 0.0, 0.0)
    velocity_world: Vec3 = (0.0, 0.0, 0.0)
    angular_velocity_body: Vec3 = (0.0, 0.0, 0.0)
    specific_force_body: Vec3 = (0.0, 0.0, STANDARD_GRAVITY)
    angular_acceleration_body: Vec3 = (0.0, 0.0, 0.0)


_VECTOR_FIELDS = ("position", "velocity_world", "angular_velocity_body", "specific_force_body", "angular_acceleration_body")


def as_truth_sample(truth: GroundTruthLike) -> TruthSample:
    """Copy any ground-truth-like object into a :class:`TruthSample`."""
    if isinstance(truth, TruthSample):
        return truth
    return TruthSample(
        time_s=float(truth.time_s),
        orientation=tuple(map(float, truth.orientation)),
        **{name: tuple(map(float, getattr(truth, name, (0.0, 0.0, 0.0)))) for name in _VECTOR_FIELDS},
    )


def truth_from_odometry(msg: Any) -> TruthSample | None:
    """A :class:`TruthSample` from odometry: :class:`aerial_sim.cdr.OdometryFields` (what the nodes'
    raw subscriptions decode) or a nav_msgs/Odometry-shaped object (read by attribute, no ROS import).

    Pose is in ``map`` (ENU), twist in the body frame (nav_msgs convention), so the
    linear velocity is rotated into the world. Returns None (log :data:`UNUSABLE_ODOMETRY`)
    when any value is not finite, the orientation quaternion is (nearly) zero, which gives
    no rotation, or the state is beyond the ``MAX_TRUTH_*`` bounds. A quaternion that is not
    of unit length is normalised.
    """
    odom = msg if isinstance(msg, OdometryFields) else OdometryFields.from_message(msg)
    values = odom.position + odom.orientation_wxyz + odom.linear_velocity + odom.angular_velocity
    if not all(math.isfinite(x) for x in values) or sum(x * x for x in values[3:7]) < MIN_QUATERNION_NORM2:
        return None
    if (math.hypot(*values[0:3]) > MAX_TRUTH_POSITION_M or math.hypot(*values[7:10]) > MAX_TRUTH_SPEED_M_S
            or math.hypot(*values[10:13]) > MAX_TRUTH_RATE_RAD_S):
        return None
    orientation = values[3:7]
    norm = math.sqrt(sum(x * x for x in orientation))
    if abs(norm - 1.0) > 1e-6:
        orientation = tuple(x / norm for x in orientation)
    return TruthSample(
        time_s=odom.time_s,
        position=values[0:3],
        orientation=orientation,
        velocity_world=physics_rotation.rotate(orientation, values[7:10]),
        angular_velocity_body=values[10:13],
    )


# --------------------------------------------------------------------------- quaternions


def rotation_matrix(q: Quat) -> np.ndarray:
    """3x3 rotation matrix of quaternion ``q = (w, x, y, z)`` (body -> world), as a numpy array."""
    return np.array(physics_rotation.rotation_matrix(q))


def quat_from_rpy(roll: float, pitch: float, yaw: float) -> Quat:
    """Quaternion of fixed-axis roll (x), pitch (y), yaw (z) rotations, as URDF ``rpy``."""
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    return (
        cr * cp * cy + sr * sp * sy,
        sr * cp * cy - cr * sp * sy,
        cr * sp * cy + sr * cp * sy,
        cr * cp * sy - sr * sp * cy,
    )


quat_multiply = physics_rotation.quat_multiply  # Hamilton product a * b (apply b first, then a)


def slerp(a: Quat, b: Quat, fraction: float) -> Quat:
    """Spherical linear interpolation from ``a`` (fraction 0) to ``b`` (fraction 1), shortest path.

    In plain floats: on 4-vectors NumPy's per-call overhead made this 5 us a sample, and every
    sensor sample between two ground-truth messages takes one (``bench sensors``)."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    dot = aw * bw + ax * bx + ay * by + az * bz
    if dot < 0.0:
        bw, bx, by, bz, dot = -bw, -bx, -by, -bz, -dot
    if dot > 0.9995:  # nearly equal: normalised lerp is exact to rounding
        q = (aw + fraction * (bw - aw), ax + fraction * (bx - ax), ay + fraction * (by - ay), az + fraction * (bz - az))
    else:
        theta = math.acos(dot)
        sine = math.sin(theta)
        ka, kb = math.sin((1 - fraction) * theta), math.sin(fraction * theta)
        q = ((ka * aw + kb * bw) / sine, (ka * ax + kb * bx) / sine, (ka * ay + kb * by) / sine, (ka * az + kb * bz) / sine)
    norm = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    return (q[0] / norm, q[1] / norm, q[2] / norm, q[3] / norm)


# --------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class Mount:
    """Pose of a sensor frame (``<ns>/<sensor>_link``) in ``<ns>/base_link``.

    ``position_m``: FLU offset of the sensor from the body origin (lever arm).
    ``rpy_rad``: fixed-axis roll, pitch, yaw of the sensor frame in the body frame (URDF style).
    """

    position_m: Vec3 = (0.0, 0.0, 0.0)
    rpy_rad: Vec3 = (0.0, 0.0, 0.0)

    @property
    def orientation(self) -> Quat:
        """Quaternion sensor frame -> base_link."""
        return quat_from_rpy(*self.rpy_rad)

    @property
    def rotation(self) -> np.ndarray:
        """Rotation matrix sensor frame -> base_link (its transpose maps body vectors into the sensor)."""
        return rotation_matrix(self.orientation)


def sensor_mount(params: Any) -> Mount:
    """The pose of a sensor's frame in base_link: its params' ``mount``, or the body origin for a
    model without one (the barometer measures at the body origin, yet stamps ``<ns>/baro_link``),
    so every frame a sensor node stamps has a transform on ``/tf_static``."""
    mount = getattr(params, "mount", None)
    return mount if isinstance(mount, Mount) else Mount()


def check_rate_and_seed(params: Any) -> None:
    """Shared ``__post_init__`` checks: ``rate_hz`` > 0 and ``seed`` >= 0."""
    require_positive(params, "rate_hz")
    require(isinstance(params.seed, int) and params.seed >= 0, f"seed must be an integer >= 0, got {params.seed!r}")


def check_vector_non_negative(params: Any, *names: str) -> None:
    """Each named tuple field holds finite numbers >= 0."""
    for name in names:
        values = getattr(params, name)
        require(all(math.isfinite(v) and v >= 0 for v in values), f"{name} must hold numbers >= 0, got {values!r}")


@dataclass(frozen=True)
class SensorNodeOptions:
    """ROS-side options every sensor node has besides its model's params.

    ``preset``: a datasheet preset, ``config/sensors/<preset>.yaml`` or a path,
    whose values become the defaults of the model's parameters ('' = dataclass
    defaults). ``frame_id``: the sensor frame, prefixed with the node's namespace
    when relative. ``lockstep``: reliable QoS on every stream (no lost samples).
    ``interpolation``: how truth is resampled to the sensor's instants.
    """

    preset: str = ""
    frame_id: str = ""
    lockstep: bool = False
    interpolation: Literal["linear", "hold"] = "linear"


def load_preset(cls: type[P], preset: str) -> P:
    """Load params ``cls`` from ``config/sensors/<preset>.yaml`` (or a path); '' gives the defaults."""
    if not preset:
        return cls()
    return load_yaml_params(cls, resolve_config(preset, "sensors"))


def sensor_rng(seed: int, sensor: str) -> np.random.Generator:
    """The generator of one sensor model: seeded by ``seed`` and the sensor's name.

    Mixing in the name keeps the IMU and the barometer of one launch (same
    ``seed`` argument) from drawing correlated noise.
    """
    return np.random.default_rng([seed, zlib.crc32(sensor.encode())])


# --------------------------------------------------------------------------- resampling


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
        sample = as_truth_sample(truth)
        last = self._last
        self.restarted = last is None or sample.time_s < last.time_s - TIME_EPSILON_S or sample.time_s - last.time_s > self.max_gap_s
        if self.restarted:
            self._last = sample
            self._next_index = math.ceil(sample.time_s * self.rate_hz - TIME_EPSILON_S * self.rate_hz)
            return self._emit_until(sample, lambda t: replace(sample, time_s=t))
        self._last = sample
        if sample.time_s <= last.time_s + TIME_EPSILON_S:  # duplicate stamp: nothing new
            return []
        if self.mode == "hold":
            return self._emit_until(sample, lambda t: replace(sample if t >= sample.time_s - TIME_EPSILON_S else last, time_s=t))
        return self._emit_until(sample, lambda t: interpolate(last, sample, t))

    def _emit_until(self, sample: TruthSample, make) -> list[TruthSample]:
        out = []
        while (t := self.instant(self._next_index)) <= sample.time_s + TIME_EPSILON_S:
            out.append(make(t))
            self._next_index += 1
        return out


class RandomCheckpoint:
    """Saved states of a model's random generators, to rewind them.

    A model takes the checkpoint right after creating its generators and
    restores it in ``reset()``, so a reset model replays exactly the random
    numbers of a freshly built one: the same seed and the same inputs give the
    same samples, also after the simulation restarts.
    """

    def __init__(self, *generators: np.random.Generator):
        self._saved = [(generator, copy.deepcopy(generator.bit_generator.state)) for generator in generators]

    def restore(self) -> None:
        for generator, state in self._saved:
            generator.bit_generator.state = copy.deepcopy(state)


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
    return TruthSample(
        time_s=time_s,
        position=_lerp3(a.position, b.position, f),
        orientation=slerp(a.orientation, b.orientation, f),
        velocity_world=_lerp3(a.velocity_world, b.velocity_world, f),
        angular_velocity_body=_lerp3(a.angular_velocity_body, b.angular_velocity_body, f),
        specific_force_body=_lerp3(a.specific_force_body, b.specific_force_body, f),
        angular_acceleration_body=_lerp3(a.angular_acceleration_body, b.angular_acceleration_body, f),
    )


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


# --------------------------------------------------------------------------- random processes and filters


class GaussMarkov:
    """First-order Gauss-Markov (Ornstein-Uhlenbeck) process: a bias that drifts and returns.

    ``discretization='exact'`` (default): ``b_{k+1} = w b_k + sqrt(1 - w^2) eta``,
    ``w = exp(-dt / tau)``, ``eta ~ N(0, sigma^2)``: the stationary standard
    deviation is ``sigma`` and the autocorrelation ``exp(-|lag| / tau)`` whatever dt is.

    ``discretization='paper'``: ``b_{k+1} = w b_k + (1 - w) eta``, the form printed in
    the AirSim paper (Shah et al. 2017, sec. 3.4.1) and used by AirLib's
    GaussianMarkov. Its stationary standard deviation is only
    ``sigma sqrt((1 - w) / (1 + w))`` (about ``sigma sqrt(dt / 2 tau)``: 0.2 % of sigma
    at 50 Hz with tau = 1 h), so the configured drift would never show; kept to
    reproduce AirSim exactly.

    The process starts from a draw of its stationary distribution (``exact``) or
    from zero (``paper``). ``shape`` gives independent processes in one array.
    """

    def __init__(self, tau_s: float, sigma: float, rng: np.random.Generator, shape: tuple[int, ...] = (),
                 discretization: Literal["exact", "paper"] = "exact"):
        self.tau_s = tau_s
        self.sigma = sigma
        self.rng = rng
        self.shape = shape
        self.discretization = discretization
        self.reset()

    def reset(self) -> None:
        start = self.rng.standard_normal(self.shape) * self.sigma if self.discretization == "exact" else np.zeros(self.shape)
        self.value = start if self.shape else float(start)

    def step(self, dt: float):
        w = math.exp(-dt / self.tau_s)
        gain = math.sqrt(max(0.0, 1.0 - w * w)) if self.discretization == "exact" else 1.0 - w
        eta = self.rng.standard_normal(self.shape) * self.sigma
        self.value = w * self.value + gain * (eta if self.shape else float(eta))
        return self.value


class NormalStream:
    """A generator's standard normal draws, taken a block at a time and handed out as plain floats.

    The same values in the same order as drawing each alone (NumPy fills an array from the bit
    stream element by element; ``test/test_sensors_common.py`` checks it), for a fraction of the
    cost: ``rng.standard_normal(3)`` costs about 2 us here, and at 100 vehicles the IMUs alone drew
    80,000 times a second. Call :meth:`restart` after rewinding the generator (:class:`RandomCheckpoint`).
    """

    BLOCK = 1024

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.restart()

    def restart(self) -> None:
        self._values: list[float] = []
        self._next = 0

    def take(self, count: int) -> list[float]:
        """The next ``count`` draws."""
        if self._next + count > len(self._values):
            self._values = self._values[self._next:] + self.rng.standard_normal(max(self.BLOCK, count)).tolist()
            self._next = 0
        start = self._next
        self._next += count
        return self._values[start:self._next]


class RandomWalk:
    """Bias random walk of the AirSim paper (sec. 3.4.2): ``b_t = b_{t-1} + eta_b``,
    ``eta_b ~ N(0, b0 sqrt(dt / t_a))`` (b0: bias stability, t_a: its time constant).

    Three axes in plain floats (``value`` is a tuple): NumPy on a 3-vector cost more than the sum."""

    def __init__(self, bias_stability: float, tau_s: float, rng: np.random.Generator, initial=(0.0, 0.0, 0.0)):
        self.scale = bias_stability / math.sqrt(tau_s)
        self.normals = NormalStream(rng)
        self.initial = tuple(float(v) for v in initial)
        self.reset()

    def reset(self) -> None:
        """Back to the initial bias; the caller rewinds the generator first (if it does)."""
        self.normals.restart()
        self.value = self.initial

    def step(self, dt: float) -> tuple[float, ...]:
        step = self.scale * math.sqrt(dt)
        self.value = tuple(b + n * step for b, n in zip(self.value, self.normals.take(len(self.value))))
        return self.value


class FirstOrderFilter:
    """First-order low-pass ``y <- y + (1 - exp(-dt / tau)) (x - y)``, exact for a held input.

    Used for the GPS error estimates decaying from their initial to their final
    value (AirSim paper sec. 3.4.4): ``y(t) = final + (initial - final) exp(-t / tau)``.
    """

    def __init__(self, tau_s: float, initial):
        self.tau_s = tau_s
        self.initial = initial
        self.reset()

    def reset(self) -> None:
        self.value = self.initial

    def step(self, dt: float, target):
        self.value = self.value + (1.0 - math.exp(-dt / self.tau_s)) * (target - self.value)
        return self.value


class DelayLine:
    """Fixed latency: an item pushed at ``time_s`` comes out at ``time_s + latency_s``."""

    def __init__(self, latency_s: float):
        self.latency_s = latency_s
        self._queue: deque[tuple[float, Any]] = deque()

    def reset(self) -> None:
        self._queue.clear()

    def push(self, time_s: float, item: Any) -> None:
        self._queue.append((time_s + self.latency_s, item))

    def pop_ready(self, now_s: float) -> list[tuple[float, Any]]:
        """Items due at or before ``now_s``, each as (release time, item), oldest first."""
        ready = []
        while self._queue and self._queue[0][0] <= now_s + TIME_EPSILON_S:
            ready.append(self._queue.popleft())
        return ready


def in_sensor_frame(rows, vector: Vec3, bias: Vec3, noise: Sequence[float]) -> Vec3:
    """``rows @ vector + bias + noise`` in plain floats: a body vector measured in the sensor frame
    (``rows``: the mount's body -> sensor rotation). On 3-vectors NumPy's per-call overhead was
    most of an IMU or magnetometer sample's cost."""
    x, y, z = vector
    (b0, b1, b2), (n0, n1, n2) = bias, noise
    (r00, r01, r02), (r10, r11, r12), (r20, r21, r22) = rows
    return (r00 * x + r01 * y + r02 * z + b0 + n0, r10 * x + r11 * y + r12 * z + b1 + n1,
            r20 * x + r21 * y + r22 * z + b2 + n2)


def lever_arm_acceleration(truth: GroundTruthLike, offset_m: np.ndarray) -> np.ndarray:
    """Extra specific force at ``offset_m`` from the body origin: ``alpha x r + omega x (omega x r)`` (body frame)."""
    omega, alpha = truth.angular_velocity_body, truth.angular_acceleration_body
    cross = physics_rotation.cross  # on 3-vectors 14x faster than np.cross (12 us a call, per sample)
    return np.add(cross(alpha, offset_m), cross(omega, cross(omega, offset_m)))


__all__ = [
    "STANDARD_GRAVITY", "DelayLine", "SensorNodeOptions", "FirstOrderFilter", "GaussMarkov", "GroundTruthLike", "Mount", "NormalStream", "PoseTrack", "RandomWalk",
    "Resampler", "TruthSample", "as_truth_sample", "check_rate_and_seed", "check_vector_non_negative",
    "in_sensor_frame", "interpolate", "lever_arm_acceleration", "truth_from_odometry", "UNUSABLE_ODOMETRY", "load_preset", "quat_from_rpy", "quat_multiply", "rotation_matrix",
    "sensor_rng", "slerp",
]
