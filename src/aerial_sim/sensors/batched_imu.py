"""The IMU model for many vehicles at once: the noise of :class:`~aerial_sim.sensors.imu.Imu`, rows of arrays.

Same model as :mod:`aerial_sim.sensors.imu` (AirSim paper, Shah et al. 2017, sec. 3.4.2): per axis
``omega_out = omega + eta_a + b_t`` with white noise ``eta_a ~ N(0, r_a^2 / dt)`` and the bias
random walk ``b_t = b_{t-1} + eta_b``, ``eta_b ~ N(0, b0 sqrt(dt / t_a))``, the accelerometer the
same on the specific force, both in the mount's frame with its lever arm. Each vehicle has its own
seed.

Two sources of the normal draws, same model either way:

- ``noise="numpy"``: each vehicle draws from the same four generators an
  ``Imu(replace(params, seed=seed))`` would (``sensor_rng(seed, "imu")`` spawned as that class
  does), in the same order: vehicle ``i``'s samples equal that model's bit for bit. The draws are
  taken ``block_samples`` samples ahead per vehicle and stream. NumPy's generator costs about
  15 ns a draw here and an IMU sample needs 12: at 10,000 vehicles that is most of a 4 ms period.
- ``noise="fast"`` (default): one compiled generator per vehicle, seeded from the vehicle's seed
  alone (SplitMix64, Steele, Lea & Flood, OOPSLA 2014, as a counter-based stream) and
  Marsaglia & Tsang's ziggurat (J. Stat. Softw. 5(8), 2000) with 1024 layers for the standard
  normals. Each sample takes six 64-bit words of each vehicle's stream, drawn for all vehicles
  in one vectorised loop; each word gives two 32-bit candidates (layer from the low 10 bits, the
  abscissa from the other 22: disjoint bits, as Doornik's "An improved ziggurat method", 2005,
  advises); the 0.43 % outside their layer's rectangle then take the wedge or tail path with
  further words of that vehicle's stream. About 2 ns a normal, no Python per vehicle. A
  vehicle's samples depend only on its seed and inputs (not on the swarm's size or its row);
  their statistics are the model's (``test/test_swarm_closed_loop.py`` checks the white-noise
  and bias-walk variances, the normal law into the tails and the tail sampler). The stream is each vehicle's SplitMix64
  sequence in order; the values differ from those of before 2026-11-27 (128 layers, one
  candidate a word).

The arithmetic is one compiled loop over the rows. Every vehicle samples at once. The
airframe-vibration extension is not batched: a ``vibration_enabled`` params is refused.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import replace
from typing import Sequence

import numpy as np

from aerial_sim.jit import njit
from aerial_sim.sensors.noise import sensor_rng
from aerial_sim.sensors.imu import ImuParams

#: Samples drawn ahead per vehicle and stream: 4 x 3 x 128 floats (12 kB) per vehicle.
BLOCK_SAMPLES = 128


class BatchedImu:
    """Gyroscope and accelerometer of N vehicles (module docstring); ``seeds`` one per vehicle."""

    def __init__(self, params: ImuParams, seeds: Sequence[int], block_samples: int = BLOCK_SAMPLES,
                 noise: str = "fast"):
        if noise not in ("fast", "numpy"):
            raise ValueError(f"noise must be 'fast' or 'numpy', got {noise!r}")
        self.noise = noise
        if params.vibration_enabled:
            raise ValueError("the batched IMU has no airframe vibration: set vibration_enabled false")
        self.params = params
        self.seeds = [int(seed) for seed in seeds]
        for seed in self.seeds:
            replace(params, seed=seed)  # refuses a negative seed as the per-vehicle model would
        if not self.seeds:
            raise ValueError("a batched IMU needs at least one vehicle")
        if block_samples < 1:
            raise ValueError(f"block_samples must be >= 1, got {block_samples!r}")
        self.count = len(self.seeds)
        self.block = 3 * int(block_samples)
        self._to_sensor = np.ascontiguousarray(params.mount.rotation.T, dtype=float)
        self._offset = np.asarray(params.mount.position_m, dtype=float)
        self._has_offset = bool(self._offset.any())
        self._bias_scales = np.array([params.gyro_bias_stability / math.sqrt(params.gyro_bias_tau_s),
                                      params.accel_bias_stability / math.sqrt(params.accel_bias_tau_s)])
        #: Outputs of the last :meth:`step`, imu_link: rad/s and m/s^2.
        self.angular_velocity = np.zeros((self.count, 3))
        self.linear_acceleration = np.zeros((self.count, 3))
        self._draws = np.empty((4, self.count, self.block)) if noise == "numpy" else None
        self._sample_noise = np.empty((self.count, 12))
        self._words = np.empty((6, self.count), dtype=np.int64)  # fill_normals' scratch
        self._pending = np.empty(12 * self.count, dtype=np.int64)
        self.reset()

    def reset(self) -> None:
        """Back to freshly built models: generators rewound to their seeds, biases at switch-on."""
        self._generators = []
        self._states = np.array([_seed_state(seed) for seed in self.seeds], dtype=np.uint64)
        for seed in self.seeds if self.noise == "numpy" else ():
            gyro, accel, bias, _vibration = sensor_rng(seed, "imu").spawn(4)
            gyro_bias, accel_bias = bias.spawn(2)
            self._generators.append((gyro, accel, gyro_bias, accel_bias))
        self._next = self.block  # empty: the first step draws
        #: Bias random walks, (N, 3) each.
        self.gyro_bias = np.tile(np.asarray(self.params.gyro_turn_on_bias, dtype=float), (self.count, 1))
        self.accel_bias = np.tile(np.asarray(self.params.accel_turn_on_bias, dtype=float), (self.count, 1))

    def _refill(self) -> None:
        draws = self._draws
        for row, generators in enumerate(self._generators):
            for stream, generator in enumerate(generators):
                generator.standard_normal(out=draws[stream, row])
        self._next = 0

    def variances(self, dt: float) -> tuple[float, float]:
        """Per-axis variances a sample reports (gyro, accelerometer), as ``ImuMeasurement``'s."""
        p = self.params
        return (p.gyro_white_variance(dt) + p.gyro_bias_stability**2,
                p.accel_white_variance(dt) + p.accel_bias_stability**2)

    def step(self, dt: float, angular_velocity_body, specific_force_body, angular_acceleration_body=None):
        """One sample of every vehicle, ``dt`` s after the previous one, from (N, 3) body-frame truth;
        returns ``(angular_velocity, linear_acceleration)`` (views, overwritten by the next call)."""
        dt = float(dt)
        if not (dt > 0.0 and math.isfinite(dt)):
            raise ValueError(f"dt must be a positive number of seconds, got {dt!r}")
        noise = self._sample_noise
        if self.noise == "numpy":
            if self._next + 3 > self.block:
                self._refill()
            at = self._next
            for stream in range(4):
                noise[:, 3 * stream : 3 * stream + 3] = self._draws[stream, :, at : at + 3]
            self._next += 3
        else:
            fill_normals(self._states, noise, self._words, self._pending)
        p = self.params
        stds = np.array([math.sqrt(p.gyro_white_variance(dt)), math.sqrt(p.accel_white_variance(dt))])
        alpha = angular_acceleration_body if self._has_offset else angular_velocity_body
        if alpha is None:
            raise ValueError("a lever arm needs angular_acceleration_body")
        _measure(np.asarray(angular_velocity_body, dtype=float), np.asarray(specific_force_body, dtype=float),
                 np.asarray(alpha, dtype=float), self._has_offset, self._offset, self._to_sensor, stds,
                 self._bias_scales * math.sqrt(dt), noise, self.gyro_bias, self.accel_bias,
                 self.angular_velocity, self.linear_acceleration)
        return self.angular_velocity, self.linear_acceleration


@njit(cache=True)
def _measure(omega, force, alpha, has_offset, offset, rows, stds, bias_steps, noise, gyro_bias, accel_bias,
             gyro_out, accel_out):
    """``Imu.step`` per row (same expressions, same order), then both bias walks one step; ``noise``
    row: 3 gyro, 3 accelerometer, 3 gyro-bias and 3 accelerometer-bias standard normals."""
    r00, r01, r02 = rows[0, 0], rows[0, 1], rows[0, 2]
    r10, r11, r12 = rows[1, 0], rows[1, 1], rows[1, 2]
    r20, r21, r22 = rows[2, 0], rows[2, 1], rows[2, 2]
    ox, oy, oz = offset[0], offset[1], offset[2]
    gyro_std, accel_std = stds[0], stds[1]
    for i in range(omega.shape[0]):
        wx, wy, wz = omega[i, 0], omega[i, 1], omega[i, 2]
        fx, fy, fz = force[i, 0], force[i, 1], force[i, 2]
        if has_offset:  # alpha x r + omega x (omega x r)
            ax, ay, az = alpha[i, 0], alpha[i, 1], alpha[i, 2]
            cx, cy, cz = wy * oz - wz * oy, wz * ox - wx * oz, wx * oy - wy * ox
            fx = fx + ((ay * oz - az * oy) + (wy * cz - wz * cy))
            fy = fy + ((az * ox - ax * oz) + (wz * cx - wx * cz))
            fz = fz + ((ax * oy - ay * ox) + (wx * cy - wy * cx))
        g0, g1, g2 = noise[i, 0] * gyro_std, noise[i, 1] * gyro_std, noise[i, 2] * gyro_std
        a0, a1, a2 = noise[i, 3] * accel_std, noise[i, 4] * accel_std, noise[i, 5] * accel_std
        b0, b1, b2 = gyro_bias[i, 0], gyro_bias[i, 1], gyro_bias[i, 2]
        gyro_out[i, 0] = r00 * wx + r01 * wy + r02 * wz + b0 + g0
        gyro_out[i, 1] = r10 * wx + r11 * wy + r12 * wz + b1 + g1
        gyro_out[i, 2] = r20 * wx + r21 * wy + r22 * wz + b2 + g2
        b0, b1, b2 = accel_bias[i, 0], accel_bias[i, 1], accel_bias[i, 2]
        accel_out[i, 0] = r00 * fx + r01 * fy + r02 * fz + b0 + a0
        accel_out[i, 1] = r10 * fx + r11 * fy + r12 * fz + b1 + a1
        accel_out[i, 2] = r20 * fx + r21 * fy + r22 * fz + b2 + a2
        for k in range(3):
            gyro_bias[i, k] = gyro_bias[i, k] + noise[i, 6 + k] * bias_steps[0]
            accel_bias[i, k] = accel_bias[i, k] + noise[i, 9 + k] * bias_steps[1]


# -- the fast noise source: SplitMix64 per vehicle, a 1024-layer ziggurat ------------------------

GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
#: Layers of the ziggurat: 2**ZIG_BITS. Each 32-bit candidate: the low ZIG_BITS bits pick the layer,
#: the other 32 - ZIG_BITS (signed) the abscissa (disjoint bits: RNOR's value and layer shared them).
ZIG_BITS = 10
#: Start of the tail ``r`` and each layer's area ``v`` for 1024 layers: the root of Marsaglia & Tsang's
#: condition (the recursion from ``r`` closes exactly at the cap ``v = x_1 (1 - f(x_1))``), found by
#: bisection; the same procedure gives their 128-layer r, 3.442619855899, to 11 digits.
ZIG_R = 4.038849846109504
ZIG_V = 0.0012263246463530893


def _seed_state(seed: int) -> int:
    """A vehicle's generator state from its seed and the sensor's name (as ``sensor_rng`` mixes them):
    both through SplitMix64's finaliser, so that neighbouring seeds start far apart on the cycle."""
    mask = (1 << 64) - 1

    def mix(z):
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    return mix((mix(int(seed) & mask) + zlib.crc32(b"imu")) & mask)


def _ziggurat_tables(bits: int = ZIG_BITS, r: float = ZIG_R, v: float = ZIG_V):
    """Marsaglia & Tsang (2000) layers of ``f(x) = exp(-x^2/2)`` (``2**bits`` of area ``v``; edges
    ``x_{L-1} = r``, ``x_{i-1} = f^-1(v / x_i + f(x_i))``), for abscissae ``u wn[i]`` with ``u`` an
    odd integer, ``|u| < m = 2**(32 - bits)``: ``wn`` (``x_i / m``; for the base layer ``v / f(r) / m``,
    its rectangle and tail as one), ``xt`` (``|x| < xt[i]`` lies inside layer ``i``'s rectangle: the
    edge above, ``x_{i-1}``; 0 for the cap, ``r`` for the base) and ``fn`` (``f(x_i)``; 1 at the top)."""
    layers, m = 1 << bits, 2.0 ** (32 - bits)
    edge = np.zeros(layers)
    edge[-1] = r
    for i in range(layers - 1, 1, -1):
        edge[i - 1] = math.sqrt(-2.0 * math.log(v / edge[i] + math.exp(-0.5 * edge[i] ** 2)))
    wn, xt, fn = edge / m, np.zeros(layers), np.exp(-0.5 * edge**2)
    wn[0] = v / math.exp(-0.5 * r * r) / m
    xt[0], xt[2:] = r, edge[1:-1]
    fn[0] = 1.0
    return wn, xt, fn


ZIG_WN, ZIG_XT, ZIG_FN = _ziggurat_tables()
_ZIG_MASK = (1 << ZIG_BITS) - 1
_ZIG_SHIFT = 31 + ZIG_BITS  # of a 64-bit word: its top half's abscissa, as 2 (h >> 32 + bits) + 1


@njit(cache=True)
def _mix(z):
    """SplitMix64's output function of a state (uint64)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def _next_u64(states, i):
    """SplitMix64: the next 64 random bits of row ``i``'s stream."""
    z = states[i] + GOLDEN_GAMMA
    states[i] = z
    return _mix(z)


@njit(cache=True)
def _uniform(states, i):
    """Uniform in (0, 1) from the top 53 bits."""
    return ((_next_u64(states, i) >> np.uint64(11)) + 0.5) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def _draw_words(states, words):
    """``words[j, i]``: row ``i``'s next ``words.shape[0]`` outputs, as int64. SplitMix64's state is
    a counter, so the ``j``-th is ``mix(state + (j + 1) gamma)``: a loop across rows that LLVM
    vectorises (AVX-512's 64-bit multiply)."""
    for j in range(words.shape[0]):
        step = np.uint64(j + 1) * GOLDEN_GAMMA
        for i in range(states.shape[0]):
            words[j, i] = np.int64(_mix(states[i] + step))
    advance = np.uint64(words.shape[0]) * GOLDEN_GAMMA
    for i in range(states.shape[0]):
        states[i] += advance


@njit(cache=True)
def _rectangles(words, out, pending):
    """The ziggurat's fast path for every candidate: word ``j``'s top half is column ``2 j``, its
    bottom half ``2 j + 1`` (``out`` has 2 ``words.shape[0]`` columns). ``out`` gets ``x = u wn[i]``;
    the flat index ``row * columns + column`` of each ``x`` outside its layer's rectangle goes to
    ``pending``, in order. Returns their count."""
    count = 0
    columns = out.shape[1]
    for i in range(out.shape[0]):
        for j in range(words.shape[0]):
            h = words[j, i]
            layer = (h >> 32) & _ZIG_MASK
            x = ((h >> _ZIG_SHIFT) | 1) * ZIG_WN[layer]
            out[i, 2 * j] = x
            if not abs(x) < ZIG_XT[layer]:
                pending[count] = i * columns + 2 * j
                count += 1
            h = h << 32
            layer = (h >> 32) & _ZIG_MASK
            x = ((h >> _ZIG_SHIFT) | 1) * ZIG_WN[layer]
            out[i, 2 * j + 1] = x
            if not abs(x) < ZIG_XT[layer]:
                pending[count] = i * columns + 2 * j + 1
                count += 1
    return count


@njit(cache=True, error_model="numpy")
def _wedge(states, i, u, layer):
    """The ziggurat's rare path outside the base layer: the wedge of layer ``layer`` by rejection,
    drawing from row ``i``'s stream until a value is accepted. Returns it, or +-inf where the draw
    falls in the base layer's tail (its sign that of the value)."""
    while True:
        if layer == 0:
            return math.inf if u > 0 else -math.inf
        x = u * ZIG_WN[layer]
        if ZIG_FN[layer] + _uniform(states, i) * (ZIG_FN[layer - 1] - ZIG_FN[layer]) < math.exp(-0.5 * x * x):
            return x
        h = np.int64(_next_u64(states, i))
        u = (h >> _ZIG_SHIFT) | 1
        layer = (h >> 32) & _ZIG_MASK
        if abs(u * ZIG_WN[layer]) < ZIG_XT[layer]:
            return u * ZIG_WN[layer]


@njit(cache=True, error_model="numpy")
def _tail(states, i, positive):
    """A normal beyond ``ZIG_R`` (Marsaglia 1964), from row ``i``'s stream."""
    while True:
        x = -math.log(_uniform(states, i)) / ZIG_R
        y = -math.log(_uniform(states, i))
        if y + y >= x * x:
            return ZIG_R + x if positive else -ZIG_R - x


@njit(cache=True, error_model="numpy")
def _resolve(states, words, out, pending, count):
    """The candidates :func:`_rectangles` left, in their order: each row's continue its own stream
    after that sample's words. (Apart from the fast pass: one loop with both in it ran slower.)"""
    columns = out.shape[1]
    for k in range(count):
        i, c = pending[k] // columns, pending[k] % columns
        h = words[c >> 1, i]
        if c & 1:
            h = h << 32
        x = _wedge(states, i, (h >> _ZIG_SHIFT) | 1, (h >> 32) & _ZIG_MASK)
        if math.isinf(x):
            x = _tail(states, i, x > 0)
        out[i, c] = x


@njit(cache=True)
def _fill(states, out, words, pending):
    """One sample of normals for every row: the words, the rectangles, then the rare paths."""
    _draw_words(states, words)
    count = _rectangles(words, out, pending)
    _resolve(states, words, out, pending, count)


def fill_normals(states: np.ndarray, out: np.ndarray, words: np.ndarray | None = None,
                 pending: np.ndarray | None = None) -> None:
    """Fill row ``i`` of ``out`` (N, K) with standard normals from stream ``states[i]`` (advanced in
    place; ``K`` even). Each call takes ``K / 2`` 64-bit words per row, two 32-bit candidates each,
    then more words of a row only for its candidates outside their layer's rectangle (about 0.43 %).
    ``words`` ((K / 2, N) int64) and ``pending`` (N K int64) are scratch, made if not given."""
    rows, columns = out.shape
    if columns % 2:
        raise ValueError(f"fill_normals fills an even number of columns, got {columns}")
    if words is None:
        words = np.empty((columns // 2, rows), dtype=np.int64)
    if pending is None:
        pending = np.empty(rows * columns, dtype=np.int64)
    _fill(states, out, words, pending)
