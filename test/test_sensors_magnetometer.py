"""Magnetometer and Earth field: the paper's four 90-degree yaw steps, dipole laws, dipole vs IGRF-14 and WMM."""

import datetime
import math
import struct

import numpy as np
import ppigrf
import pymap3d
import pytest

from aerial_sim.config import ParamsError
from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.environment.magnetic import (
    MagneticField,
    MagneticFieldParams,
    TiltedDipole,
    WorldMagneticModel,
    tilted_dipole,
)
from aerial_sim.sensors.quaternions import quat_from_rpy
from aerial_sim.sensors.truth import TruthSample
from aerial_sim.sensors.magnetometer import Magnetometer, MagnetometerParams

HOME = HomePoint()


def test_four_90_degree_yaw_steps_turn_the_horizontal_field_by_90_degrees_each():
    mag = Magnetometer(MagnetometerParams(), HOME)
    headings, magnitudes = [], []
    for step in range(5):
        truth = TruthSample(0.0, orientation=quat_from_rpy(0.0, 0.0, step * math.pi / 2))
        field = np.mean([mag.step(0.02, truth).magnetic_field_t for _ in range(50)], axis=0)
        headings.append(math.degrees(math.atan2(field[1], field[0])))
        magnitudes.append(np.linalg.norm(field))
    turns = [(b - a + 180) % 360 - 180 for a, b in zip(headings, headings[1:])]
    # The body turns +90 deg (counter-clockwise), so the field seen in the body turns -90 deg.
    assert turns == pytest.approx([-90.0] * 4, abs=1.0)
    assert magnitudes == pytest.approx([magnitudes[0]] * 5, rel=0.01)


def test_mean_reading_is_the_field_plus_the_fixed_bias():
    bias = (1e-6, -2e-6, 0.5e-6)
    mag = Magnetometer(MagnetometerParams(bias_t=bias), HOME)
    truth = TruthSample(0.0)
    readings = np.array([mag.step(0.02, truth).magnetic_field_t for _ in range(2000)])
    expected = mag.true_field_enu((0.0, 0.0, 0.0)) + bias  # level, facing east: body axes = ENU
    assert readings.mean(axis=0) == pytest.approx(expected, abs=4 * 2e-7 / math.sqrt(2000))
    assert readings.std(axis=0) == pytest.approx([2e-7] * 3, rel=0.1)


def test_dipole_obeys_its_own_laws():
    dipole = TiltedDipole(2026.0)
    # IGRF-14 at 2026.0: B0 = |(g10, g11, h11)| = 29,717 nT, geomagnetic north pole 80.8 N 72.8 W.
    assert dipole.equatorial_field_t == pytest.approx(29717e-9, abs=1e-9)
    assert dipole.pole_deg == pytest.approx((80.83, -72.80), abs=0.01)
    # At the pole the field points straight down; 90 deg south of it along its meridian it is horizontal, north.
    pole = dipole(*dipole.pole_deg, 0.0)
    assert pole.inclination_deg == pytest.approx(90.0, abs=0.2)  # geodetic vs geocentric vertical: < 0.2 deg
    equator = dipole(dipole.pole_deg[0] - 90.0, dipole.pole_deg[1], 0.0)
    assert equator.inclination_deg == pytest.approx(0.0, abs=0.2) and equator.declination_deg == pytest.approx(0.0, abs=1e-6)
    # ... and twice as strong at the pole as on the equator at the same distance from the Earth's centre,
    # with the intensity falling as the cube of that distance.
    pole_radius, equator_radius = (np.linalg.norm(pymap3d.geodetic2ecef(lat, lon, 0.0))
                                   for lat, lon in (dipole.pole_deg, (dipole.pole_deg[0] - 90.0, dipole.pole_deg[1])))
    assert pole.intensity_t / equator.intensity_t * (pole_radius / equator_radius) ** 3 == pytest.approx(2.0, rel=1e-5)
    high = dipole(47.6, -122.1, 6371000.0)
    assert high.intensity_t == pytest.approx(dipole(47.6, -122.1, 0.0).intensity_t / 8, rel=3e-3)


# (latitude, longitude): Redmond (home), London, Sydney, Singapore, Tromsoe, Tokyo; then Sao Paulo
# and Cape Town in the South Atlantic anomaly.
CITIES = [(47.641468, -122.140165), (51.5, -0.13), (-33.87, 151.21), (1.35, 103.82), (69.65, 18.96), (35.68, 139.69)]
ANOMALY = [(-23.55, -46.63), (-33.92, 18.42)]


def igrf_enu_t(latitude, longitude, altitude_m, when, max_degree=13):
    """IGRF-14 field (east, north, up) in tesla from ppigrf, the IAGA V-MOD working group's Python IGRF."""
    east, north, up = ppigrf.igrf(longitude, latitude, altitude_m / 1000.0, when, max_degree=max_degree)
    return np.array([float(np.ravel(c)[0]) for c in (east, north, up)]) * 1e-9


def test_dipole_in_plain_floats_gives_pymap3d_s_bits():
    """The field written out in floats (issue 34: a magnetometer sample's cost) against the same maths through
    pymap3d's NumPy functions, bit for bit: around home as a flight moves, over the whole Earth and its heights,
    on two dates; a point that is not finite still gives NaNs."""
    rng = np.random.default_rng(34)
    home = [(HOME.latitude + d, HOME.longitude + e, HOME.altitude + h)
            for d, e, h in zip(rng.normal(0, 1e-4, 5_000), rng.normal(0, 1e-4, 5_000), rng.uniform(-50, 500, 5_000))]
    world = list(zip(rng.uniform(-90, 90, 5_000), rng.uniform(-180, 180, 5_000), rng.uniform(-1000, 86000, 5_000)))
    poles = [(90.0, 0.0, 0.0), (-90.0, 45.0, 10.0), (0.0, 180.0, 0.0), (0.0, -180.0, -1000.0)]
    for year in (2026.0, 2021.3):
        dipole = TiltedDipole(year)
        for point in [*home, *world, *poles]:
            assert struct.pack("3d", *dipole.enu(*point)) == struct.pack("3d", *dipole._enu_by_pymap3d(*point)), point
    assert all(math.isnan(v) for v in TiltedDipole(2026.0).enu(math.nan, 0.0, 0.0))
    field = MagneticField(MagneticFieldParams(date=2026.0))
    assert struct.pack("3d", *field.enu(*home[0])) == struct.pack("3d", *field(*home[0]).enu)


@pytest.mark.parametrize("iso_date", ["2025-01-01", "2026-01-01", "2027-07-02", "2029-12-31"])
@pytest.mark.parametrize("latitude, longitude", CITIES + ANOMALY + [(-77.85, 166.67), (80.8, -72.8)])
def test_dipole_is_the_igrf14_dipole_at_the_date(latitude, longitude, iso_date):
    # The degree-1 part of IGRF-14 (ppigrf with max_degree=1) at the same date, on the ground and at 10 km.
    when = datetime.datetime.fromisoformat(iso_date)
    for altitude in (0.0, 10000.0):
        ours = np.array(tilted_dipole(latitude, longitude, altitude, iso_date).enu)
        reference = igrf_enu_t(latitude, longitude, altitude, when, max_degree=1)
        assert np.linalg.norm(ours - reference) < 1e-5 * np.linalg.norm(reference)


def angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    return math.degrees(math.acos(np.clip(a @ b / np.linalg.norm(a) / np.linalg.norm(b), -1.0, 1.0)))


@pytest.mark.parametrize("latitude, longitude", CITIES)
def test_dipole_agrees_with_igrf_and_wmm_as_far_as_a_dipole_can_at_six_cities(latitude, longitude):
    # doc/sensors.md's figures: away from the South Atlantic anomaly the dipole's direction is within
    # 10 deg and its intensity within 30 % of the full IGRF-14 and of WMM2025 (the non-dipole field).
    dipole = np.array(tilted_dipole(latitude, longitude, 0.0, 2026.0).enu)
    for reference in (igrf_enu_t(latitude, longitude, 0.0, datetime.datetime(2026, 1, 1)),
                      np.array(WorldMagneticModel(2026.0)(latitude, longitude, 0.0).enu)):
        assert angle_deg(dipole, reference) < 10.0
        assert np.linalg.norm(dipole) == pytest.approx(np.linalg.norm(reference), rel=0.30)


def test_dipole_against_igrf_over_the_whole_earth():
    # doc/sensors.md's figures, on a 5-degree grid (85 S - 85 N) weighted by area, at 2026.0: the direction
    # is within 10 deg on 62 % of the surface, within 20 deg on 90 %, at worst 40 deg off (South
    # Atlantic); the intensity is within 25 % on 79 %, within 30 % on 87 %, between -32 % and +92 %.
    # Sao Paulo: 19 deg and +43 %.
    latitudes, longitudes = np.meshgrid(np.arange(-85.0, 86.0, 5.0), np.arange(-180.0, 180.0, 5.0), indexing="ij")
    east, north, up = ppigrf.igrf(longitudes, latitudes, 0.0, datetime.datetime(2026, 1, 1))
    reference = np.stack([east[0], north[0], up[0]], axis=-1) * 1e-9
    dipole = TiltedDipole(2026.0)
    ours = np.array([dipole(lat, lon, 0.0).enu for lat, lon in zip(latitudes.ravel(), longitudes.ravel())])
    ours = ours.reshape(reference.shape)
    cosine = np.sum(ours * reference, axis=-1) / np.linalg.norm(ours, axis=-1) / np.linalg.norm(reference, axis=-1)
    angles = np.degrees(np.arccos(np.clip(cosine, -1.0, 1.0)))
    ratio = np.linalg.norm(ours, axis=-1) / np.linalg.norm(reference, axis=-1)
    weights = np.cos(np.radians(latitudes))

    def area(mask):
        return float(np.sum(weights * mask) / np.sum(weights))

    assert area(angles <= 10.0) >= 0.62 and area(angles <= 20.0) >= 0.90 and angles.max() <= 40.0
    assert area(abs(ratio - 1) <= 0.25) >= 0.79 and area(abs(ratio - 1) <= 0.30) >= 0.87
    assert 0.67 <= ratio.min() and ratio.max() <= 1.93
    sao_paulo = np.array(dipole(*ANOMALY[0], 0.0).enu), igrf_enu_t(*ANOMALY[0], 0.0, datetime.datetime(2026, 1, 1))
    assert angle_deg(*sao_paulo) == pytest.approx(19.1, abs=0.5)
    assert np.linalg.norm(sao_paulo[0]) / np.linalg.norm(sao_paulo[1]) == pytest.approx(1.43, abs=0.02)


def test_dipole_declination_at_home_has_the_sign_and_size_of_the_real_one():
    dipole = tilted_dipole(HOME.latitude, HOME.longitude, HOME.altitude, 2026.0)
    wmm = WorldMagneticModel(2026.0)(HOME.latitude, HOME.longitude, HOME.altitude)
    assert wmm.declination_deg == pytest.approx(15.0, abs=0.5)  # WMM2025: 15 deg east at Redmond
    assert dipole.declination_deg == pytest.approx(wmm.declination_deg, abs=4.0)
    assert dipole.inclination_deg == pytest.approx(wmm.inclination_deg, abs=2.0)


@pytest.mark.parametrize("date, when", [(2025.0, datetime.datetime(2025, 1, 1)), ("2029-12-01", datetime.datetime(2029, 12, 1))])
@pytest.mark.parametrize("latitude, longitude", [CITIES[0], CITIES[1], ANOMALY[0]])
def test_wmm_is_evaluated_at_the_configured_date(date, when, latitude, longitude):
    # WMM2025 and IGRF-14 agree within 35 nT at one date; the field drifts by 70-540 nT in these 4 years.
    field = MagneticField(MagneticFieldParams(model="wmm", date=date))
    ours = np.array(field(latitude, longitude, 0.0).enu)
    assert np.linalg.norm(ours - igrf_enu_t(latitude, longitude, 0.0, when)) < 35e-9


def test_date_is_a_decimal_year_an_iso_date_or_today():
    assert MagneticFieldParams(date=2027.5).decimal_year == 2027.5
    assert MagneticFieldParams(date="2027-07-02T12:00:00").decimal_year == pytest.approx(2027.5, abs=1e-9)
    today = datetime.datetime.now(datetime.timezone.utc).date()
    start = datetime.date(today.year, 1, 1)
    expected = today.year + (today - start).days / (datetime.date(today.year + 1, 1, 1) - start).days
    assert MagneticFieldParams().decimal_year == pytest.approx(expected, abs=1.0 / 365)  # default: today
    assert MagneticField().decimal_year == pytest.approx(expected, abs=1.0 / 365)
    for bad in ("yesterday", "2026-13-01", 20260.0, float("nan")):
        with pytest.raises(ParamsError, match="date"):
            MagneticFieldParams(date=bad)


def test_wmm_is_reevaluated_only_after_moving_far_enough():
    field = MagneticField(MagneticFieldParams(model="wmm", cache_distance_m=100.0, date=2026.0))
    first = field(47.6, -122.1, 100.0)
    field(47.6 + 50.0 / 111e3, -122.1, 100.0)  # 50 m north: cached
    assert field.evaluations == 1
    moved = field(47.6 + 500.0 / 111e3, -122.1, 100.0)  # 500 m: new evaluation
    assert field.evaluations == 2 and moved != first
    # and the WMM option runs through the sensor
    m = Magnetometer(MagnetometerParams(field=MagneticFieldParams(model="wmm", date=2026.0)), HOME).step(0.02, TruthSample(0.0))
    assert np.linalg.norm(m.magnetic_field_t) == pytest.approx(52.7e-6, rel=0.02)  # WMM2025 at Redmond
