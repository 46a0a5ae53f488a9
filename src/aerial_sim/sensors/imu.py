"""Accelerometer and gyroscope (IMU) model.

AirSim paper (Shah et al. 2017), sec. 3.4.2, and MSR-TR-2017-9 sec. 3.4.2
(parameters from Allan-variance plots): for the gyro

    omega_out = omega + eta_a + b_t,   eta_a ~ N(0, r_a^2 / dt)
    b_t = b_{t-1} + eta_b,             eta_b ~ N(0, b0 sqrt(dt / t_a))

with ``r_a`` the angle random walk (the datasheet's noise spectral density,
rad/s/sqrt(Hz)), ``b0`` the bias stability and ``t_a`` its time constant; the
accelerometer is the same with velocity random walk, applied to the specific
force in the sensor frame. The per-sample white-noise standard deviation
``r_a / sqrt(dt)`` is AirLib's (ImuSimple) and Kalibr's discretisation of a noise
density. As a check, the Allan deviation of the output is
``sqrt(r_a^2 / T + (b0^2 / t_a) T / 3)`` at averaging time ``T``.

Beyond AirSim: the sensor can sit anywhere on the body (lever arm and rotation
of ``imu_link``), and an optional airframe-vibration model driven by the rotor
speeds (:class:`AirframeVibration`) brings in-flight accelerometer variance to
what real airframes show (9.46 m^2/s^4 measured on a Flamewheel quadrotor in the
paper's sec. 4, vs 1.75e-3 simulated by AirSim).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from aerial_sim.config import require, require_non_negative, require_positive
from aerial_sim.sensors.mounting import Mount, in_sensor_frame, lever_arm_acceleration
from aerial_sim.sensors.noise import NormalStream, RandomCheckpoint, RandomWalk, sensor_rng
from aerial_sim.sensors.params import check_rate_and_seed
from aerial_sim.sensors.truth import STANDARD_GRAVITY, GroundTruthLike

DEG = math.pi / 180.0


@dataclass(frozen=True)
class ImuParams:
    """IMU noise, rate and mounting. Defaults: InvenSense MPU-6000 datasheet (rev. 3.4)
    noise densities, and AirSim's ImuSimpleParams bias stabilities (the datasheet gives none)."""

    rate_hz: float = 200.0
    seed: int = 0
    #: r_a: gyro rate noise spectral density, 0.005 deg/s/sqrt(Hz) (= 0.3 deg/sqrt(h)), in rad/s/sqrt(Hz).
    gyro_noise_density: float = 0.005 * DEG
    #: b0: gyro bias stability, 4.6 deg/h (AirSim), in rad/s.
    gyro_bias_stability: float = 4.6 / 3600.0 * DEG
    #: t_a: gyro bias-stability time constant (s).
    gyro_bias_tau_s: float = 500.0
    #: Constant gyro bias at switch-on (rad/s); zero = calibrated, as AirSim assumes.
    gyro_turn_on_bias: tuple[float, float, float] = (0.0, 0.0, 0.0)
    #: Accelerometer noise spectral density, 400 ug/sqrt(Hz), in m/s^2/sqrt(Hz).
    accel_noise_density: float = 400e-6 * STANDARD_GRAVITY
    #: Accelerometer bias stability, 36 ug (AirSim), in m/s^2.
    accel_bias_stability: float = 36e-6 * STANDARD_GRAVITY
    accel_bias_tau_s: float = 800.0
    accel_turn_on_bias: tuple[float, float, float] = (0.0, 0.0, 0.0)
    #: Pose of imu_link in base_link.
    mount: Mount = field(default_factory=Mount)
    #: Airframe vibration (beyond AirSim), off by default; see :class:`AirframeVibration`.
    vibration_enabled: bool = False
    #: Accelerometer vibration standard deviation per axis with every rotor at the reference speed (m/s^2);
    #: sqrt(9.46): the in-flight variance of the paper's real quadrotor.
    vibration_accel_std: float = math.sqrt(9.46)
    #: Rotor speed at which the vibration has that size (rad/s; near hover); it grows with speed squared.
    vibration_reference_speed_rad_s: float = 600.0
    #: Share of the vibration variance in rotor-synchronous tones (the rest is broadband).
    vibration_tonal_fraction: float = 0.8
    #: Tones per rotor, as multiples of its rotation frequency (1 = imbalance, 2 = blade pass of a 2-blade prop).
    vibration_harmonics: tuple[float, ...] = (1.0, 2.0)

    def __post_init__(self):
        check_rate_and_seed(self)
        require_non_negative(self, "gyro_noise_density", "gyro_bias_stability", "accel_noise_density",
                             "accel_bias_stability", "vibration_accel_std")
        require_positive(self, "gyro_bias_tau_s", "accel_bias_tau_s", "vibration_reference_speed_rad_s")
        require(0.0 <= self.vibration_tonal_fraction <= 1.0,
                f"vibration_tonal_fraction must be in [0, 1], got {self.vibration_tonal_fraction!r}")
        require(all(h > 0 for h in self.vibration_harmonics), "vibration_harmonics must be positive multiples")

    def gyro_white_variance(self, dt: float) -> float:
        """Per-axis variance of the gyro white noise at sample interval ``dt`` (rad^2/s^2)."""
        return self.gyro_noise_density**2 / dt

    def accel_white_variance(self, dt: float) -> float:
        """Per-axis variance of the accelerometer white noise at sample interval ``dt`` (m^2/s^4)."""
        return self.accel_noise_density**2 / dt


class ImuMeasurement(NamedTuple):
    """One IMU sample in ``imu_link``; variances are per axis (REP-145 covariance diagonals). A named tuple:
    immutable, and made 200 times a simulated second for a third of a frozen dataclass's cost."""

    time_s: float
    angular_velocity: tuple[float, float, float]
    linear_acceleration: tuple[float, float, float]
    angular_velocity_variance: float
    linear_acceleration_variance: float


class AirframeVibration:
    """Accelerometer vibration from spinning rotors (not in AirSim).

    Each rotor i at speed w_i adds, on each axis, tones at the harmonics h of its
    rotation, ``A (w_i / w_ref)^2 sin(phi_ih + psi_ih,axis)`` with
    ``dphi_ih / dt = h w_i`` (imbalance and blade-pass forces grow with the square
    of the speed), plus broadband noise scaled by the mean of ``(w_i / w_ref)^2``.
    ``A`` is set so the variance with every rotor at ``w_ref`` is
    ``vibration_accel_std^2`` per axis, split by ``vibration_tonal_fraction``.
    Stopped rotors give no vibration.
    """

    def __init__(self, params: ImuParams, rng: np.random.Generator):
        self.params = params
        self.rng = rng
        self.harmonics = np.asarray(params.vibration_harmonics, dtype=float)
        self.phases: np.ndarray | None = None

    def reset(self) -> None:
        self.phases = None

    def step(self, dt: float, rotor_speeds_rad_s) -> np.ndarray:
        speeds = np.abs(np.asarray(rotor_speeds_rad_s, dtype=float))
        if speeds.size == 0:
            return np.zeros(3)
        if self.phases is None or self.phases.shape[0] != speeds.size:
            shape = (speeds.size, self.harmonics.size)
            self.phases = self.rng.uniform(0, 2 * np.pi, shape)
            self.offsets = self.rng.uniform(0, 2 * np.pi, shape + (3,))
        self.phases = np.mod(self.phases + np.outer(speeds, self.harmonics) * dt, 2 * np.pi)
        p = self.params
        scale = (speeds / p.vibration_reference_speed_rad_s) ** 2
        variance = p.vibration_accel_std**2
        tone_amplitude = math.sqrt(2.0 * variance * p.vibration_tonal_fraction / self.phases.size)
        tones = np.sin(self.phases[:, :, None] + self.offsets) * (tone_amplitude * scale[:, None, None])
        broadband = self.rng.standard_normal(3) * math.sqrt(variance * (1.0 - p.vibration_tonal_fraction))
        return tones.sum(axis=(0, 1)) + broadband * scale.mean()


class Imu:
    """Gyroscope + accelerometer (see the module docstring for the equations)."""

    def __init__(self, params: ImuParams = ImuParams(), rng: np.random.Generator | None = None):
        self.params = params
        rng = rng if rng is not None else sensor_rng(params.seed, "imu")
        self._gyro_rng, self._accel_rng, bias_rng, vibration_rng = rng.spawn(4)
        gyro_bias_rng, accel_bias_rng = bias_rng.spawn(2)
        self._random_start = RandomCheckpoint(self._gyro_rng, self._accel_rng, gyro_bias_rng, accel_bias_rng, vibration_rng)
        self._gyro_noise, self._accel_noise = NormalStream(self._gyro_rng), NormalStream(self._accel_rng)
        self.gyro_bias = RandomWalk(params.gyro_bias_stability, params.gyro_bias_tau_s, gyro_bias_rng, params.gyro_turn_on_bias)
        self.accel_bias = RandomWalk(params.accel_bias_stability, params.accel_bias_tau_s, accel_bias_rng, params.accel_turn_on_bias)
        self.vibration = AirframeVibration(params, vibration_rng)
        self._to_sensor_rows = params.mount.rotation.T.tolist()  # base_link vectors -> imu_link
        self._offset = np.asarray(params.mount.position_m, dtype=float)
        self._has_offset = bool(self._offset.any())
        self._white_dt: float | None = None
        self._white = (0.0, 0.0, 0.0, 0.0)

    def reset(self) -> None:
        """Back to the state of a freshly built model (biases and noise streams rewound)."""
        self._random_start.restore()
        self._gyro_noise.restart()
        self._accel_noise.restart()
        self.gyro_bias.reset()
        self.accel_bias.reset()
        self.vibration.reset()

    def step(self, dt: float, truth: GroundTruthLike, rotor_speeds_rad_s=()) -> ImuMeasurement:
        """Measure ``truth`` (sampled ``dt`` after the previous sample); rotor speeds drive the vibration."""
        p = self.params
        force_body = truth.specific_force_body
        if self._has_offset:
            lever = lever_arm_acceleration(truth, self._offset)
            force_body = (force_body[0] + lever[0], force_body[1] + lever[1], force_body[2] + lever[2])
        if dt != self._white_dt:  # the white noise's figures, once per sample interval (a sensor's is fixed)
            gyro_var, accel_var = p.gyro_white_variance(dt), p.accel_white_variance(dt)
            self._white = (gyro_var, accel_var, math.sqrt(gyro_var), math.sqrt(accel_var))
            self._white_dt = dt
        gyro_var, accel_var, gyro_std, accel_std = self._white
        n0, n1, n2 = self._gyro_noise.take(3)
        gyro = in_sensor_frame(self._to_sensor_rows, truth.angular_velocity_body, self.gyro_bias.value,
                               (n0 * gyro_std, n1 * gyro_std, n2 * gyro_std))
        n0, n1, n2 = self._accel_noise.take(3)
        accel = in_sensor_frame(self._to_sensor_rows, force_body, self.accel_bias.value,
                                (n0 * accel_std, n1 * accel_std, n2 * accel_std))
        if p.vibration_enabled:
            shake = self.vibration.step(dt, rotor_speeds_rad_s).tolist()
            accel = (accel[0] + shake[0], accel[1] + shake[1], accel[2] + shake[2])
            accel_var += p.vibration_accel_std**2
        self.gyro_bias.step(dt)
        self.accel_bias.step(dt)
        return ImuMeasurement(truth.time_s, gyro, accel, gyro_var + p.gyro_bias_stability**2,
                              accel_var + p.accel_bias_stability**2)
