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
  Marsaglia & Tsang's ziggurat (J. Stat. Softw. 5(8), 2000; 128 layers) for the standard
  normals: a few ns a draw, no Python per vehicle. A vehicle's samples depend only on its seed
  and inputs (not on the swarm's size or its row); their statistics are the model's
  (``test/test_swarm_closed_loop.py`` checks the white-noise and bias-walk variances).

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
            fill_normals(self._states, noise)
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


# -- the fast noise source: SplitMix64 per vehicle, Marsaglia-Tsang ziggurat ----------------------


def _seed_state(seed: int) -> int:
    """A vehicle's generator state from its seed and the sensor's name (as ``sensor_rng`` mixes them):
    both through SplitMix64's finaliser, so that neighbouring seeds start far apart on the cycle."""
    mask = (1 << 64) - 1

    def mix(z):
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    return mix((mix(int(seed) & mask) + zlib.crc32(b"imu")) & mask)


def _ziggurat_tables():
    """Marsaglia & Tsang (2000) RNOR tables, 128 layers: ``kn`` (int32 thresholds), ``wn``, ``fn``."""
    m1 = 2147483648.0
    dn = tn = 3.442619855899
    vn = 9.91256303526217e-3
    kn, wn, fn = np.zeros(128, dtype=np.int64), np.zeros(128), np.zeros(128)
    q = vn / math.exp(-0.5 * dn * dn)
    kn[0] = int((dn / q) * m1)
    kn[1] = 0
    wn[0], wn[127] = q / m1, dn / m1
    fn[0], fn[127] = 1.0, math.exp(-0.5 * dn * dn)
    for i in range(126, 0, -1):
        dn = math.sqrt(-2.0 * math.log(vn / dn + math.exp(-0.5 * dn * dn)))
        kn[i + 1] = int((dn / tn) * m1)
        tn = dn
        fn[i] = math.exp(-0.5 * dn * dn)
        wn[i] = dn / m1
    return kn, wn, fn


ZIG_KN, ZIG_WN, ZIG_FN = _ziggurat_tables()
ZIG_R = 3.442620


@njit(cache=True)
def _next_u64(states, i):
    """SplitMix64: the next 64 random bits of row ``i``'s stream."""
    z = states[i] + np.uint64(0x9E3779B97F4A7C15)
    states[i] = z
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def _uniform(states, i):
    """Uniform in (0, 1) from the top 53 bits."""
    return ((_next_u64(states, i) >> np.uint64(11)) + 0.5) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def _signed32(states, i):
    """The top 32 of row ``i``'s next 64 bits as a signed 32-bit number."""
    hz = np.int64(_next_u64(states, i) >> np.uint64(32))
    return hz - 4294967296 if hz >= 2147483648 else hz


@njit(cache=True, error_model="numpy")
def _normal_slow(states, i, hz, kn, wn, fn, r):
    """The ziggurat's rare path (about 3 % of draws): the tail beyond ``r`` (Marsaglia 1964) and
    the wedges by rejection, drawing again until a value is accepted."""
    while True:
        iz = hz & 127
        x = hz * wn[iz]
        if iz == 0:
            while True:
                x = -math.log(_uniform(states, i)) / r
                y = -math.log(_uniform(states, i))
                if y + y >= x * x:
                    break
            return r + x if hz > 0 else -r - x
        if fn[iz] + _uniform(states, i) * (fn[iz - 1] - fn[iz]) < math.exp(-0.5 * x * x):
            return x
        hz = _signed32(states, i)
        iz = hz & 127
        if abs(hz) < kn[iz]:
            return hz * wn[iz]


@njit(cache=True, error_model="numpy")
def _fill(states, out, kn, wn, fn, r):
    for i in range(out.shape[0]):
        for k in range(out.shape[1]):
            hz = _signed32(states, i)
            iz = hz & 127
            if abs(hz) < kn[iz]:  # the fast path: inside a layer's rectangle
                out[i, k] = hz * wn[iz]
            else:
                out[i, k] = _normal_slow(states, i, hz, kn, wn, fn, r)


def fill_normals(states: np.ndarray, out: np.ndarray) -> None:
    """Fill row ``i`` of ``out`` with standard normals from stream ``states[i]`` (advanced in place)."""
    _fill(states, out, ZIG_KN, ZIG_WN, ZIG_FN, ZIG_R)
