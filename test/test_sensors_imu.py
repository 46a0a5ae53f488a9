"""IMU model: MPU-6000 noise at rest, Allan-deviation of the bias drift, mounting, vibration."""

import math

import allantools
import numpy as np
import pytest

from aerial_sim.config import ParamsError
from aerial_sim.sensors.mounting import Mount
from aerial_sim.sensors.params import load_preset
from aerial_sim.sensors.truth import STANDARD_GRAVITY, TruthSample
from aerial_sim.sensors.imu import Imu, ImuParams

AT_REST = TruthSample(0.0)  # level, still: a perfect accelerometer reads +g up


def record(imu, truth, n, dt, rotor_speeds=()):
    samples = [imu.step(dt, truth, rotor_speeds) for _ in range(n)]
    return np.array([s.angular_velocity for s in samples]), np.array([s.linear_acceleration for s in samples])


def test_mpu6000_at_rest_has_the_datasheet_variances_and_reads_plus_g_up():
    params = load_preset(ImuParams, "mpu6000")
    dt = 1.0 / params.rate_hz
    gyro, accel = record(Imu(params), AT_REST, n=int(60 * params.rate_hz), dt=dt)  # 60 s
    gyro_var, accel_var = params.gyro_white_variance(dt), params.accel_white_variance(dt)
    assert gyro_var == pytest.approx((0.005 * math.pi / 180) ** 2 * 200, rel=1e-3)  # 1.52e-6 rad^2/s^2
    assert accel_var == pytest.approx((400e-6 * 9.80665) ** 2 * 200, rel=1e-3)  # 3.08e-3 m^2/s^4
    assert np.var(gyro, axis=0) == pytest.approx([gyro_var] * 3, rel=0.10)
    assert np.var(accel, axis=0) == pytest.approx([accel_var] * 3, rel=0.10)
    standard_error = math.sqrt(accel_var / len(accel))
    assert abs(accel[:, 2].mean() - STANDARD_GRAVITY) < 5 * standard_error + 3 * params.accel_bias_stability
    assert np.abs(accel[:, :2].mean(axis=0)).max() < 5 * standard_error + 3 * params.accel_bias_stability


def test_allan_deviation_follows_white_noise_then_bias_random_walk():
    # Allan deviation of the model: sqrt(r_a^2 / T + (b0^2 / t_a) T / 3): slope -1/2, then +1/2.
    params = ImuParams(rate_hz=10.0, seed=3)
    gyro, accel = record(Imu(params), AT_REST, n=20000, dt=0.1)  # 2000 s
    taus = np.array([0.3, 3.0, 30.0, 100.0])
    for data, density, stability, tau_b in (
        (gyro, params.gyro_noise_density, params.gyro_bias_stability, params.gyro_bias_tau_s),
        (accel - accel.mean(axis=0), params.accel_noise_density, params.accel_bias_stability, params.accel_bias_tau_s),
    ):
        measured = np.mean([allantools.oadev(data[:, i], rate=10.0, data_type="freq", taus=taus)[1] for i in range(3)], axis=0)
        predicted = np.sqrt(density**2 / taus + stability**2 / tau_b * taus / 3)
        assert measured == pytest.approx(predicted, rel=0.15)


def test_bias_drift_alone_grows_as_a_random_walk():
    params = ImuParams(rate_hz=10.0, gyro_noise_density=0.0, accel_noise_density=0.0, seed=5)
    gyro, _ = record(Imu(params), AT_REST, n=20000, dt=0.1)
    taus = np.array([1.0, 10.0, 100.0])
    adev = np.mean([allantools.oadev(gyro[:, i], rate=10.0, data_type="freq", taus=taus)[1] for i in range(3)], axis=0)
    slope = np.polyfit(np.log(taus), np.log(adev), 1)[0]
    assert slope == pytest.approx(0.5, abs=0.05)


def test_mounting_rotates_and_lever_arm_adds_centripetal_acceleration():
    params = ImuParams(gyro_noise_density=0.0, accel_noise_density=0.0, gyro_bias_stability=0.0,
                       accel_bias_stability=0.0, mount=Mount(position_m=(0.2, 0.0, 0.0), rpy_rad=(0.0, 0.0, math.pi / 2)))
    spinning = TruthSample(0.0, angular_velocity_body=(1.0, 0.0, 3.0))
    m = Imu(params).step(0.005, spinning)
    # imu_link is yawed +90 deg: body x appears on imu -y, body y on imu +x.
    assert m.angular_velocity == pytest.approx((0.0, -1.0, 3.0), abs=1e-12)
    # omega x (omega x r) with r = (0.2, 0, 0): (-1.8, 0, 0.6) in body -> (0, 1.8, 0.6) in imu_link
    assert m.linear_acceleration == pytest.approx((0.0, 1.8, STANDARD_GRAVITY + 0.6), abs=1e-12)


def test_vibration_brings_in_flight_variance_to_the_real_airframes_and_stops_with_the_rotors():
    params = ImuParams(vibration_enabled=True, seed=7)
    speeds = [params.vibration_reference_speed_rad_s * f for f in (0.98, 1.01, 0.995, 1.02)]
    dt = 1.0 / params.rate_hz
    _, accel = record(Imu(params), AT_REST, n=12000, dt=dt, rotor_speeds=speeds)
    expected = params.vibration_accel_std**2 + params.accel_white_variance(dt)  # 9.46 + 3e-3 m^2/s^4
    assert np.var(accel, axis=0) == pytest.approx([expected] * 3, rel=0.15)
    _, grounded = record(Imu(params), AT_REST, n=2000, dt=dt, rotor_speeds=[0.0] * 4)
    assert np.var(grounded, axis=0) == pytest.approx([params.accel_white_variance(dt)] * 3, rel=0.15)


@pytest.mark.parametrize("bad", [{"rate_hz": 0.0}, {"gyro_noise_density": -1e-4}, {"seed": -1}])
def test_bad_parameters_are_a_params_error_naming_them(bad):
    with pytest.raises(ParamsError, match=next(iter(bad))):
        ImuParams(**bad)
