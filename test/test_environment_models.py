"""Environment models: 1976 standard atmosphere, WGS-84 normal gravity, ENU <-> WGS-84, density cache."""

import math

import boule
import numpy as np
import pytest

from aerial_sim.config import ParamsError
from aerial_sim.environment.atmosphere import AltitudeOutOfRangeError, standard_atmosphere, standard_pressure_pa
from aerial_sim.environment.environment import Environment, EnvironmentParams
from aerial_sim.environment.geodesy import HomePoint, enu_to_geodetic, geodetic_to_enu
from aerial_sim.environment.gravity import normal_gravity

#: Earth radius of the 1976 standard's geopotential altitude definition (m).
R0_1976 = 6356766.0


def geometric_from_geopotential(h_m: float) -> float:
    return R0_1976 * h_m / (R0_1976 - h_m)


# Published U.S. Standard Atmosphere 1976 values (NOAA-S/T 76-1562, table I); the layer
# bases are geopotential altitudes, 86 km is geometric.
TABLE = [
    (0.0, 288.15, 101325.0, 1.2250),
    (geometric_from_geopotential(11000.0), 216.65, 22632.0, 0.36392),
    (geometric_from_geopotential(20000.0), 216.65, 5474.9, 0.088035),
    (geometric_from_geopotential(32000.0), 228.65, 868.02, 0.013225),
    (geometric_from_geopotential(47000.0), 270.65, 110.91, 0.0014275),
    (86000.0, 186.87, 0.3734, 6.958e-6),
]


@pytest.mark.parametrize("altitude, temperature, pressure, density", TABLE)
def test_standard_atmosphere_matches_the_published_1976_table(altitude, temperature, pressure, density):
    air = standard_atmosphere(altitude)
    # Above 80 km the standard's kinetic temperature falls below the molecular-scale temperature
    # the layer equations give (by the molecular-weight ratio, 0.99958 at 86 km): 0.08 K there.
    assert air.temperature_k == pytest.approx(temperature, abs=0.01 if altitude < 80000 else 0.1)
    assert air.pressure_pa == pytest.approx(pressure, rel=2e-4)
    assert air.density_kg_m3 == pytest.approx(density, rel=2e-3)


def test_atmosphere_outside_its_range_is_a_clear_error():
    with pytest.raises(AltitudeOutOfRangeError, match="outside the 1976 standard atmosphere"):
        standard_atmosphere(90000.0)
    with pytest.raises(AltitudeOutOfRangeError, match="outside the 1976 standard atmosphere"):
        standard_pressure_pa(-5000.5)


def test_the_barometers_pressure_alone_is_the_standard_atmospheres_to_the_bit():
    """standard_pressure_pa (what the barometer samples) gives the very float standard_atmosphere does: every
    layer, its boundaries, and a flight's few hundred metres densely (a recorded bag stays the same bytes)."""
    rng = np.random.default_rng(7)
    boundaries = [-5000.0, 0.0, 11000.0, 20000.0, 32000.0, 47000.0, 51000.0, 71000.0, 86000.0]
    altitudes = [*boundaries, *np.nextafter(boundaries, 0.0), *rng.uniform(-5000.0, 86000.0, 3000),
                 *rng.uniform(-20.0, 400.0, 3000)]
    differing = [z for z in altitudes if standard_pressure_pa(z) != standard_atmosphere(z).pressure_pa]
    assert not differing, differing[:5]


# Published WGS-84 normal gravity on the ellipsoid (NIMA TR8350.2, 3rd ed., table 3.4), m/s^2.
@pytest.mark.parametrize("latitude, published", [(0.0, 9.7803253359), (90.0, 9.8321849378), (-90.0, 9.8321849378)])
def test_gravity_on_the_ellipsoid_is_the_published_wgs84_value(latitude, published):
    assert normal_gravity(latitude, 0.0) == pytest.approx(published, abs=1e-9)


@pytest.mark.parametrize("latitude", [0.0, 15.0, 30.0, 45.0, 47.641468, -33.87, 60.0, 75.0, 89.0])
@pytest.mark.parametrize("height", [0.0, 122.0, 1000.0, 10000.0])
def test_gravity_is_wgs84_normal_gravity_at_latitude_and_height(latitude, height):
    # boule evaluates the closed-form normal gravity at any height (Li and Goetze 2001); ours is
    # TR8350.2's second-order expansion in height (eq. 4-3): equal to 1e-7 up to 10 km.
    reference = float(boule.WGS84.normal_gravity((0.0, latitude, height), si_units=True))
    assert normal_gravity(latitude, height) == pytest.approx(reference, rel=1e-7)


def test_gravity_at_redmond_is_not_standard_gravity():
    home = HomePoint()  # AirSim's home, Redmond WA, 47.64 N, 122 m
    environment = Environment(EnvironmentParams(home=home))
    assert environment.gravity(0.0) == pytest.approx(normal_gravity(home.latitude, home.altitude), rel=1e-15)
    assert environment.gravity(0.0) / 9.80665 - 1 == pytest.approx(1.6e-4, abs=0.1e-4)  # 9.80665 is 0.016 % low
    # Along the vertical it falls by 3.08e-6 1/s^2 per metre: 30.8 mm/s^2 per 10 km.
    assert environment.gravity(0.0) - environment.gravity(10000.0) == pytest.approx(0.0308, abs=0.0002)


def test_enu_and_geodetic_round_trip_and_scale():
    home = HomePoint()
    lat, lon, alt = enu_to_geodetic(100.0, 200.0, 30.0, home)
    # 200 m north is about 200 / 111_200 deg of latitude at 47.6 deg; 100 m east scales with cos(lat).
    assert lat - home.latitude == pytest.approx(200.0 / 111_210.0, rel=2e-3)
    assert lon - home.longitude == pytest.approx(100.0 / (111_320.0 * math.cos(math.radians(home.latitude))), rel=3e-3)
    assert alt == pytest.approx(home.altitude + 30.0, abs=0.01)
    east, north, up = geodetic_to_enu(lat, lon, alt, home)
    assert (east, north, up) == pytest.approx((100.0, 200.0, 30.0), abs=1e-6)


def test_enu_to_geodetic_matches_pymap3d_anywhere_on_earth():
    # The per-sample path is a closed form in plain floats (60x faster than pymap3d's NumPy on scalars);
    # pymap3d is the independent reference: homes from pole to pole and across the date line, points
    # 200 km away and up to 30 km high.
    import random

    import pymap3d

    rng = random.Random(7)
    for _ in range(3000):
        home = HomePoint(rng.uniform(-90, 90), rng.uniform(-180, 180), rng.uniform(-1000, 9000))
        enu = (rng.uniform(-2e5, 2e5), rng.uniform(-2e5, 2e5), rng.uniform(-2000, 30000))
        lat, lon, alt = enu_to_geodetic(*enu, home)
        ref_lat, ref_lon, ref_alt = (float(v) for v in pymap3d.enu2geodetic(*enu, home.latitude, home.longitude,
                                                                             home.altitude))
        assert lat == pytest.approx(ref_lat, abs=1e-9)
        assert ((lon - ref_lon + 180) % 360 - 180) * math.cos(math.radians(lat)) == pytest.approx(0.0, abs=1e-9)
        assert alt == pytest.approx(ref_alt, abs=1e-6)
    assert all(math.isnan(v) for v in enu_to_geodetic(math.nan, 0.0, 0.0, HomePoint()))  # no exception


def test_home_point_out_of_range_names_the_field():
    with pytest.raises(ParamsError, match="latitude"):
        HomePoint(latitude=123.0)


def test_cached_density_tracks_the_standard_atmosphere_as_altitude_changes():
    environment = Environment(EnvironmentParams(home=HomePoint(altitude=500.0)))
    for up in [0.0, 3.0, 17.0, 19.9, 45.0, 1234.5, 800.0, -100.0]:
        exact = standard_atmosphere(500.0 + up).density_kg_m3
        assert environment.air_density(up) == pytest.approx(exact, rel=3e-6)
        assert environment.gravity(up) == pytest.approx(normal_gravity(environment.params.home.latitude, 500.0 + up), rel=1e-14)
