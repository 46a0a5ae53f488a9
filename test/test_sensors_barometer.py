"""Barometer model: the paper's 1.78 m lift experiment, and the drift's time constant and std."""

import math

import numpy as np
import pytest

from aerial_sim.environment.atmosphere import standard_atmosphere
from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.sensors.barometer import Barometer, BarometerParams, pressure_to_altitude
from aerial_sim.sensors.params import load_preset
from aerial_sim.sensors.truth import TruthSample

HOME = HomePoint()


def test_raising_the_sensor_178_cm_changes_pressure_and_altitude_as_the_atmosphere_gives():
    params = BarometerParams(drift_std_pa=0.0)  # MS5611 white noise only: the drift is tested below
    baro = Barometer(params, HOME)
    dt, n = 1.0 / params.rate_hz, 250  # 5 s per level
    low = [baro.step(dt, TruthSample(0.0, position=(0.0, 0.0, 0.0))) for _ in range(n)]
    high = [baro.step(dt, TruthSample(0.0, position=(0.0, 0.0, 1.78))) for _ in range(n)]
    expected_dp = standard_atmosphere(HOME.altitude + 1.78).pressure_pa - standard_atmosphere(HOME.altitude).pressure_pa
    assert expected_dp == pytest.approx(-21.0, abs=0.5)  # about 11.8 Pa per metre near sea level
    tolerance = 4 * params.noise_std_pa * math.sqrt(2 / n)
    measured_dp = np.mean([m.pressure_pa for m in high]) - np.mean([m.pressure_pa for m in low])
    assert measured_dp == pytest.approx(expected_dp, abs=tolerance)
    measured_dh = np.mean([m.altitude_m for m in high]) - np.mean([m.altitude_m for m in low])
    assert measured_dh == pytest.approx(1.78, abs=tolerance / 11.0)
    assert np.mean([m.altitude_m for m in low]) == pytest.approx(HOME.altitude, abs=0.2)


def test_barometric_formula_inverts_the_standard_troposphere():
    # The driver's formula is the 1976 troposphere in geopotential altitude H = r0 Z / (r0 + Z).
    r0 = 6356766.0
    for z in (0.0, 122.0, 1500.0, 8000.0):
        assert pressure_to_altitude(standard_atmosphere(z).pressure_pa) == pytest.approx(r0 * z / (r0 + z), abs=0.05)


def test_drift_has_the_configured_time_constant_and_std():
    params = load_preset(BarometerParams, "ms5611")
    assert (params.drift_tau_s, params.drift_std_pa) == (3600.0, 50.0)  # 1 h, 0.5 mbar
    params = BarometerParams(noise_std_pa=0.0, seed=11)
    baro = Barometer(params, HOME)
    true_pressure = standard_atmosphere(HOME.altitude).pressure_pa
    dt = params.drift_tau_s / 10
    drift = np.array([baro.step(dt, TruthSample(0.0)).pressure_pa - true_pressure for _ in range(20000)])  # 2000 h
    assert drift.std() == pytest.approx(params.drift_std_pa, rel=0.15)
    lag = 10  # one time constant
    correlation = np.corrcoef(drift[:-lag], drift[lag:])[0, 1]
    assert -dt * lag / math.log(correlation) == pytest.approx(params.drift_tau_s, rel=0.15)


def test_pressure_variance_is_filled_from_the_model():
    m = Barometer().step(0.02, TruthSample(0.0))
    assert m.variance_pa2 == pytest.approx(2.7**2 + 50.0**2)
