"""Wind field core: Dryden and von Kármán spectra (Welch) within their statistical band at two heights, the
long-run mean, 1 - cos gusts, shear with height, MIL-F-8785C intensities and scale lengths, determinism, bad
parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.signal

from aerial_sim.config import ParamsError, params_from_mapping
from aerial_sim.environment.wind import (
    FOOT_M,
    VON_KARMAN_U,
    VON_KARMAN_V,
    GustParams,
    RationalShapingFilter,
    WindField,
    WindParams,
    dryden_psd,
    turbulence_scales,
    von_karman_psd,
)

MEAN = (8.0, 0.0, 0.0)
HEIGHTS = (10.0, 100.0)
PER_HEIGHT = 20
DT = 0.2  # the filters are discretised exactly, so a coarse step keeps the spectrum: 5 Hz, 10 min
STEPS = 3000


@pytest.fixture(scope="module")
def moderate_series():
    """10 min of moderate turbulence for 20 hovering vehicles at 10 m and 20 at 100 m, in one field."""
    field = WindField(WindParams(mean_enu_m_s=MEAN, turbulence="moderate", seed=7), 2 * PER_HEIGHT)
    positions = np.zeros((2 * PER_HEIGHT, 3))
    positions[:PER_HEIGHT, 2], positions[PER_HEIGHT:, 2] = HEIGHTS
    velocities = np.zeros_like(positions)
    return np.array([field.step(k * DT, DT, positions, velocities) for k in range(STEPS)])  # (steps, vehicles, 3)


@pytest.mark.parametrize("group", [0, 1])
def test_turbulence_spectra_follow_the_dryden_forms_within_the_welch_band(moderate_series, group):
    height = HEIGHTS[group]
    series = moderate_series[:, group * PER_HEIGHT : (group + 1) * PER_HEIGHT, :] - MEAN  # u east, v north, w up
    nperseg = 512
    frequency, psd = scipy.signal.welch(series, fs=1 / DT, nperseg=nperseg, axis=0)  # (f, vehicle, axis)
    psd = psd.mean(axis=1)
    segments = (STEPS - nperseg) // (nperseg // 2) + 1
    # Hann, 50 % overlap: var(P_hat) / P^2 = (1 + 2 c^2) / K per segment average, c = 0.167 (Welch 1967);
    # averaged over the vehicles' independent series. 4.5 sigma per bin over ~150 bins: p ~ 1e-3 for the lot.
    relative_std = math.sqrt((1 + 2 * 0.167**2) / (segments * PER_HEIGHT))
    band = (frequency >= 0.03) & (frequency <= 0.5)  # above Hann leakage of the first bins, below aliasing (fs / 10)
    lu, lw, su, sw = turbulence_scales("moderate", height)
    for axis, kind, sigma, scale in ((0, "longitudinal", su, lu), (1, "lateral", su, lu), (2, "lateral", sw, lw)):
        expected = dryden_psd(kind, frequency[band], float(sigma), float(scale), 8.0)
        ratio = psd[band, axis] / expected
        assert np.all(np.abs(ratio - 1) < 4.5 * relative_std), (height, kind, axis, ratio)
        assert abs(ratio.mean() - 1) < 4 * relative_std / math.sqrt(band.sum() / 2)  # adjacent Hann bins correlate


@pytest.fixture(scope="module")
def von_karman_series():
    """The same 10 min and fleet as ``moderate_series`` with von Kármán turbulence."""
    field = WindField(WindParams(mean_enu_m_s=MEAN, turbulence="moderate", turbulence_model="von_karman", seed=7),
                      2 * PER_HEIGHT)
    positions = np.zeros((2 * PER_HEIGHT, 3))
    positions[:PER_HEIGHT, 2], positions[PER_HEIGHT:, 2] = HEIGHTS
    velocities = np.zeros_like(positions)
    return np.array([field.step(k * DT, DT, positions, velocities) for k in range(STEPS)])


@pytest.mark.parametrize("group", [0, 1])
def test_von_karman_spectra_follow_the_mil_forms_within_the_welch_band(von_karman_series, group):
    height = HEIGHTS[group]
    series = von_karman_series[:, group * PER_HEIGHT : (group + 1) * PER_HEIGHT, :] - MEAN
    nperseg = 512
    frequency, psd = scipy.signal.welch(series, fs=1 / DT, nperseg=nperseg, axis=0)
    psd = psd.mean(axis=1)
    segments = (STEPS - nperseg) // (nperseg // 2) + 1
    relative_std = math.sqrt((1 + 2 * 0.167**2) / (segments * PER_HEIGHT))  # as for Dryden above
    band = (frequency >= 0.03) & (frequency <= 0.5)
    lu, lw, su, sw = turbulence_scales("moderate", height)
    for axis, kind, sigma, scale in ((0, "longitudinal", su, lu), (1, "lateral", su, lu), (2, "lateral", sw, lw)):
        # The samples are the continuous process's (exact discretisation), so their spectrum is the form folded
        # at fs: the omega^(-5/3) tail adds 9 % at 0.5 Hz (Dryden's omega^-2 about 2 %).
        expected = sum(von_karman_psd(kind, np.abs(frequency[band] + k / DT), float(sigma), float(scale), 8.0)
                       for k in range(-200, 201))
        ratio = psd[band, axis] / expected
        assert np.all(np.abs(ratio - 1) < 4.5 * relative_std), (height, kind, axis, ratio)
        # the mean ratio, also against the filters' own fit error (below 1 %, the next test)
        assert abs(ratio.mean() - 1) < 4 * relative_std / math.sqrt(band.sum() / 2) + 0.01, (height, axis, ratio.mean())
    assert series.var(axis=(0, 1)) == pytest.approx([su**2, su**2, sw**2], rel=0.25)  # sigma: 10 min of L / V


def test_von_karman_filters_follow_the_mil_forms_within_one_percent_over_seven_decades():
    tau_omega = np.logspace(-3, np.log10(2e4), 3000)
    x = (1.339 * tau_omega) ** 2
    forms = {"u": (1 + x) ** (-5 / 6), "v": (1 + 8 / 3 * x) / (1 + x) ** (11 / 6)}
    for axis, coefficients, gain_squared in (("u", VON_KARMAN_U, 2.0), ("v", VON_KARMAN_V, 1.0)):
        shaping = RationalShapingFilter(**coefficients)
        assert np.abs(shaping.gain_squared(tau_omega) / forms[axis] - 1).max() < 0.01
        assert shaping.variance() * gain_squared == pytest.approx(1.0, abs=0.001)  # sigma^2 for sigma = 1
    # (MIL-HDBK-1797's second-order u filter, for comparison, is 74 % low at the top of the range)
    s = 1j * tau_omega[-1]
    hdbk = abs((1 + 0.25 * s) / (1 + 1.357 * s + 0.1987 * s**2)) ** 2
    assert hdbk / forms["u"][-1] < 0.3


def test_the_long_run_mean_is_the_set_mean_wind(moderate_series):
    duration = STEPS * DT
    for group, height in enumerate(HEIGHTS):
        series = moderate_series[:, group * PER_HEIGHT : (group + 1) * PER_HEIGHT, :]
        mean = series.mean(axis=(0, 1))
        lu, lw, su, sw = turbulence_scales("moderate", height)
        # var of a time average over T: P(0) / (2 T) (one-sided PSD at 0), over independent vehicles
        spread = [math.sqrt(float(dryden_psd(kind, 0.0, float(s), float(scale), 8.0)) / (2 * duration) / PER_HEIGHT)
                  for kind, s, scale in (("longitudinal", su, lu), ("lateral", su, lu), ("lateral", sw, lw))]
        assert np.all(np.abs(mean - MEAN) < 4 * np.array(spread)), (height, mean, spread)


def test_mil_f_8785c_intensities_and_scale_lengths():
    lu, lw, su, sw = turbulence_scales("light", 1000 * FOOT_M)  # low-altitude model at its top
    assert lu == pytest.approx(1000 * FOOT_M) and lw == pytest.approx(1000 * FOOT_M)  # 0.177 + 0.823 = 1
    assert sw == pytest.approx(0.1 * 15 * 1852 / 3600) and su == pytest.approx(sw)  # 0.1 W20, W20 = 15 kt
    lu, lw, su, sw = turbulence_scales("moderate", 7500 * FOOT_M)  # high altitude: fig. 7, P = 1e-3
    assert lu == pytest.approx(1750 * FOOT_M) and lw == pytest.approx(1750 * FOOT_M)
    assert su == pytest.approx(10.1 * FOOT_M) and sw == pytest.approx(10.1 * FOOT_M)
    _, lw_low, su_low, sw_low = turbulence_scales("severe", 1.0)  # below 10 ft: held at 10 ft
    assert lw_low == pytest.approx(10 * FOOT_M)
    assert sw_low == pytest.approx(0.1 * 45 * 1852 / 3600) and su_low > sw_low  # near the ground u, v > w
    assert turbulence_scales("none", 50.0)[2] == 0.0


def test_a_one_minus_cosine_gust_rises_holds_and_falls_with_its_amplitude():
    gust = GustParams(start_s=2.0, rise_s=1.5, hold_s=1.0, fall_s=0.5, amplitude_enu_m_s=(0.0, 6.0, -2.0))
    field = WindField(WindParams(mean_enu_m_s=(3.0, 0.0, 0.0), gusts=(gust,)), 3)
    positions = np.array([[0.0, 0.0, 5.0], [100.0, -40.0, 30.0], [-5.0, 9.0, 1.0]])
    times = np.linspace(0.0, 6.0, 601)
    winds = np.array([field.step(t, 0.01, positions) for t in times])
    assert np.all(winds[:, :, 0] == 3.0)  # the mean wind untouched
    assert np.all(winds == winds[:, :1, :])  # a gust front: every vehicle feels the same gust at once
    gust_y = winds[:, 0, 1]
    t = times - 2.0
    expected = np.where(t < 0, 0.0, np.where(t <= 1.5, 3.0 * (1 - np.cos(np.pi * np.clip(t, 0, 1.5) / 1.5)),
                        np.where(t <= 2.5, 6.0, 3.0 * (1 + np.cos(np.pi * np.clip(t - 2.5, 0, 0.5) / 0.5)))))  # fmt: skip
    assert gust_y == pytest.approx(expected, abs=1e-12)
    assert gust_y.max() == pytest.approx(6.0) and winds[:, 0, 2].min() == pytest.approx(-2.0)
    assert field.step(2.75, 0.01, positions)[0, 1] == pytest.approx(3.0)  # half way up: A / 2
    full = GustParams(start_s=0.0, rise_s=1.0, fall_s=1.0, amplitude_enu_m_s=(4.0, 0.0, 0.0))  # classic full 1 - cos
    t = np.linspace(0.0, 2.0, 41)
    assert full.speed(t) * 4.0 == pytest.approx(2.0 * (1 - np.cos(2 * np.pi * t / 2.0)), abs=1e-12)


def test_shear_scales_the_horizontal_mean_with_height():
    mean = (6.0, -3.0, 0.5)
    power = WindField(WindParams(mean_enu_m_s=mean, shear="power_law", reference_height_m=10.0), 0)
    winds = power.mean_at([10.0, 40.0, 0.0, -1.0])
    assert winds[0] == pytest.approx(mean)
    assert winds[1, :2] == pytest.approx(np.array(mean[:2]) * 4 ** (1 / 7))
    assert winds[2:, :2] == pytest.approx(np.zeros((2, 2)))  # nothing at and below the ground
    assert np.all(winds[:, 2] == 0.5)  # the vertical part is not sheared
    log = WindField(WindParams(mean_enu_m_s=mean, shear="log_law"), 0)  # 20 ft reference, z0 = 0.15 ft
    assert log.mean_at([6.096])[0] == pytest.approx(mean)
    expected = math.log(60 / 0.0457) / math.log(6.096 / 0.0457)
    assert log.mean_at([60.0])[0, :2] == pytest.approx(np.array(mean[:2]) * expected)
    assert log.mean_at([0.01])[0, :2] == pytest.approx([0.0, 0.0])
    log.set_mean((0.0, 2.0, 0.0))  # the mean is settable at run time
    assert log.mean_at([6.096])[0] == pytest.approx([0.0, 2.0, 0.0])


def test_the_same_seed_gives_the_same_series_and_another_seed_another():
    def series(seed):
        gust = GustParams(start_s=1.0, amplitude_enu_m_s=(1.0, 0.0, 0.0))
        field = WindField(WindParams(mean_enu_m_s=(5.0, 2.0, 0.0), turbulence="severe", shear="log_law",
                                     gusts=(gust,), seed=seed), 2)  # fmt: skip
        positions = np.array([[0.0, 0.0, 20.0], [5.0, 0.0, 50.0]])
        return np.array([field.step(k * 0.02, 0.02, positions, np.ones((2, 3))) for k in range(300)]), field

    first, field = series(3)
    again, _ = series(3)
    von_karman = WindField(WindParams(mean_enu_m_s=(5.0, 2.0, 0.0), turbulence="light", turbulence_model="von_karman",
                                      seed=3), 2)
    positions = np.array([[0.0, 0.0, 20.0], [5.0, 0.0, 50.0]])
    run = [von_karman.step(k * 0.02, 0.02, positions, np.ones((2, 3))) for k in range(50)]
    von_karman.reset()
    assert np.array_equal(run, [von_karman.step(k * 0.02, 0.02, positions, np.ones((2, 3))) for k in range(50)])
    assert not np.allclose(run, first[:50])  # another model, another series
    assert np.array_equal(first, again)
    assert not np.allclose(first, series(4)[0])
    field.reset()  # a restarted run repeats the series
    positions = np.array([[0.0, 0.0, 20.0], [5.0, 0.0, 50.0]])
    assert np.array_equal(field.step(0.0, 0.02, positions, np.ones((2, 3))), first[0])


@pytest.mark.parametrize("values, name", [
    ({"turbulence": "strong"}, "turbulence"),
    ({"turbulance": "light"}, "turbulance"),
    ({"shear": "cubic"}, "shear"),
    ({"turbulence_model": "kolmogorov"}, "turbulence_model"),
    ({"mean_enu_m_s": [1.0, float("nan"), 0.0]}, "mean_enu_m_s"),
    ({"mean_enu_m_s": [1.0, 2.0]}, "mean_enu_m_s"),
    ({"roughness_length_m": 10.0}, "roughness_length_m"),
    ({"reference_height_m": 0.0}, "reference_height_m"),
    ({"min_airspeed_m_s": -1.0}, "min_airspeed_m_s"),
    ({"seed": -2}, "seed"),
    ({"gusts": [{"rise_s": 0.0}]}, "rise_s"),
    ({"gusts": [{"amplitude_enu_m_s": [1.0, 2.0, float("inf")]}]}, "amplitude_enu_m_s"),
])  # fmt: skip
def test_bad_wind_parameters_are_one_clear_error_naming_the_key(values, name):
    with pytest.raises(ParamsError, match=name):
        params_from_mapping(WindParams, values)


def test_a_bad_run_time_mean_or_position_count_is_refused_and_changes_nothing():
    field = WindField(WindParams(mean_enu_m_s=(1.0, 0.0, 0.0)), 2)
    for bad in ((1.0, float("nan"), 0.0), (1.0, 2.0), "east"):
        with pytest.raises(ValueError, match="mean wind"):
            field.set_mean(bad)
    assert field.mean_at([5.0])[0] == pytest.approx([1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="expected 2 positions"):
        field.step(0.0, 0.01, np.zeros((3, 3)))
