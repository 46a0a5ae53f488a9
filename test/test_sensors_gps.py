"""GPS model: 200 ms latency, update rate, decaying error estimates, noise consistent with them."""

import math

import numpy as np
import pytest

from aerial_sim.environment.geodesy import HomePoint, geodetic_to_enu
from aerial_sim.sensors.resampling import Resampler
from aerial_sim.sensors.truth import TruthSample
from aerial_sim.sensors.gps import FIX_2D, FIX_3D, FIX_NONE, Gps, GpsParams

HOME = HomePoint()
SPEED = 5.0  # m/s east, climbing 1 m/s


def flight(t):
    return TruthSample(t, position=(SPEED * t, 0.0, 10.0 + t), velocity_world=(SPEED, 0.0, 1.0))


def run(params, duration_s, truth_rate_hz=250.0):
    gps, resampler = Gps(params, HOME), Resampler(params.rate_hz)
    fixes = []
    for k in range(int(duration_s * truth_rate_hz) + 1):
        for sample in resampler.push(flight(k / truth_rate_hz)):
            fixes.extend(gps.step(1.0 / params.rate_hz, sample))
    return fixes


def test_fixes_lag_the_true_position_by_the_latency_at_the_update_rate():
    params = GpsParams(eph_initial_m=0.001, epv_initial_m=0.001, eph_final_m=0.001, epv_final_m=0.001,
                       velocity_noise_std_m_s=0.0)
    fixes = run(params, 3.0)
    times = np.array([f.time_s for f in fixes])
    assert times[0] == pytest.approx(0.2) and np.allclose(np.diff(times), 0.02, atol=1e-12)  # 50 Hz after 200 ms
    assert len(fixes) == 141  # outputs at 0.20 .. 3.00 s
    for fix in fixes:
        east, north, up = geodetic_to_enu(fix.latitude_deg, fix.longitude_deg, fix.altitude_m, HOME)
        lagged = flight(fix.time_s - 0.2).position
        assert (east, north, up) == pytest.approx(lagged, abs=0.01)  # where it was 200 ms ago
        assert east < SPEED * fix.time_s - 0.9  # not where it is now
        assert fix.velocity_enu == pytest.approx((SPEED, 0.0, 0.0))  # horizontal only


def test_error_estimates_decay_by_first_order_filters_and_set_the_fix_type():
    params = GpsParams(eph_tau_s=0.9, epv_tau_s=1.5)
    fixes = run(params, 8.0)
    for fix in fixes:
        t = fix.measured_at_s
        assert fix.eph_m == pytest.approx(0.1 + 99.9 * math.exp(-t / 0.9), rel=1e-6)
        assert fix.epv_m == pytest.approx(0.1 + 99.9 * math.exp(-t / 1.5), rel=1e-6)
        expected = FIX_3D if fix.eph_m <= 3.0 else FIX_2D if fix.eph_m <= 4.0 else FIX_NONE
        assert fix.fix_type == expected
    assert fixes[0].fix_type == FIX_NONE and fixes[-1].fix_type == FIX_3D


def test_position_noise_matches_the_reported_estimates():
    params = GpsParams(eph_initial_m=2.0, eph_final_m=2.0, epv_initial_m=3.5, epv_final_m=3.5,
                       position_error_tau_s=0.0, seed=4)
    fixes = run(params, 40.0)  # 2000 fixes
    errors = np.array([
        np.subtract(geodetic_to_enu(f.latitude_deg, f.longitude_deg, f.altitude_m, HOME), flight(f.measured_at_s).position)
        for f in fixes
    ])
    assert errors.std(axis=0) == pytest.approx([2.0, 2.0, 3.5], rel=0.08)
    assert np.abs(errors.mean(axis=0)).max() < 4 * 3.5 / math.sqrt(len(fixes))


def test_ublox_preset_updates_at_10_hz():
    from aerial_sim.sensors.params import load_preset

    params = load_preset(GpsParams, "ublox_m8n")
    fixes = run(params, 2.0)
    assert np.allclose(np.diff([f.time_s for f in fixes]), 0.1, atol=1e-12)
