"""The home point and ENU <-> WGS-84 geodetic conversion.

The world frame ``map`` is a local East-North-Up tangent plane at the home
point (REP-103/105). Conversions are exact WGS-84 ellipsoid transforms through
ECEF rather than AirSim's flat-earth approximation, so GPS fixes stay exact far
from home. ``pymap3d`` (a small, well-tested library) does them, except on the
per-sample path of the GPS and magnetometer, :func:`enu_to_geodetic`: there its
NumPy code on scalars cost 93 us a call, two thirds of both models' time, so the
same transform runs in plain floats (ENU -> ECEF with the home point's ECEF from
pymap3d, then Heikkinen's closed-form ECEF -> geodetic, Heikkinen 1982, as given
by Zhu 1993), checked against pymap3d to 1e-9 deg and 1 um in the tests; a result
that is not finite falls back to pymap3d.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import pymap3d

from aerial_sim.config import require


@dataclass(frozen=True)
class HomePoint:
    """Origin of ``map``: WGS-84 latitude and longitude (deg), altitude above the ellipsoid (m).

    Default: AirSim's default home point (Microsoft campus, Redmond, WA).
    """

    latitude: float = 47.641468
    longitude: float = -122.140165
    altitude: float = 122.0

    def __post_init__(self):
        require(-90.0 <= self.latitude <= 90.0, f"latitude must be in [-90, 90] deg, got {self.latitude!r}")
        require(-180.0 <= self.longitude <= 180.0, f"longitude must be in [-180, 180] deg, got {self.longitude!r}")
        require(-1000.0 <= self.altitude <= 86000.0, f"altitude must be in [-1000, 86000] m, got {self.altitude!r}")


#: WGS-84 semi-major axis (m) and flattening, as pymap3d's default ellipsoid.
WGS84_A = 6378137.0
WGS84_F = 1.0 / 298.257223563
_B = WGS84_A * (1.0 - WGS84_F)
_E2 = 1.0 - (_B / WGS84_A) ** 2  # first eccentricity squared
_EP2 = (WGS84_A / _B) ** 2 - 1.0  # second eccentricity squared


def enu_to_geodetic(east: float, north: float, up: float, home: HomePoint) -> tuple[float, float, float]:
    """ENU position (m) relative to ``home`` -> (latitude deg, longitude deg, altitude m above the ellipsoid)."""
    if not (math.isfinite(east) and math.isfinite(north) and math.isfinite(up)):
        return math.nan, math.nan, math.nan
    x, y, z = _enu_to_ecef(east, north, up, home)
    try:
        lat, lon, alt = _ecef_to_geodetic(x, y, z)
    except (ValueError, ZeroDivisionError):  # near the Earth's centre: no sensor position, but no crash either
        lat = math.nan
    if math.isfinite(lat) and math.isfinite(lon) and math.isfinite(alt):
        return lat, lon, alt
    lat, lon, alt = pymap3d.enu2geodetic(east, north, up, home.latitude, home.longitude, home.altitude)
    return float(lat), float(lon), float(alt)


@lru_cache(maxsize=64)
def _home_frame(home: HomePoint) -> tuple[tuple[float, float, float], tuple[float, float, float, float]]:
    """The home point's ECEF position (m) and the sines and cosines of its latitude and longitude."""
    origin = tuple(float(v) for v in pymap3d.geodetic2ecef(home.latitude, home.longitude, home.altitude))
    lat, lon = math.radians(home.latitude), math.radians(home.longitude)
    return origin, (math.sin(lat), math.cos(lat), math.sin(lon), math.cos(lon))


def _enu_to_ecef(east: float, north: float, up: float, home: HomePoint) -> tuple[float, float, float]:
    """Rotate ENU into ECEF axes at the home point and add the home point's ECEF position."""
    (x0, y0, z0), (sin_lat, cos_lat, sin_lon, cos_lon) = _home_frame(home)
    t = cos_lat * up - sin_lat * north
    return (x0 + cos_lon * t - sin_lon * east,
            y0 + sin_lon * t + cos_lon * east,
            z0 + sin_lat * up + cos_lat * north)


def _ecef_to_geodetic(x: float, y: float, z: float) -> tuple[float, float, float]:
    """ECEF (m) -> geodetic (deg, deg, m) on WGS-84: Heikkinen's closed form (Zhu 1993, eqs. as numbered there)."""
    a, b, e2, ep2 = WGS84_A, _B, _E2, _EP2
    p = math.hypot(x, y)
    f = 54.0 * b * b * z * z
    g = p * p + (1.0 - e2) * z * z - e2 * (a * a - b * b)
    c = e2 * e2 * f * p * p / (g * g * g)
    s = math.cbrt(1.0 + c + math.sqrt(c * c + 2.0 * c))
    k = s + 1.0 + 1.0 / s
    big_p = f / (3.0 * k * k * g * g)
    q = math.sqrt(1.0 + 2.0 * e2 * e2 * big_p)
    r0 = (-big_p * e2 * p / (1.0 + q)
          + math.sqrt(0.5 * a * a * (1.0 + 1.0 / q) - big_p * (1.0 - e2) * z * z / (q * (1.0 + q)) - 0.5 * big_p * p * p))
    u = math.hypot(p - e2 * r0, z)
    v = math.sqrt((p - e2 * r0) ** 2 + (1.0 - e2) * z * z)
    z0 = b * b * z / (a * v)
    altitude = u * (1.0 - b * b / (a * v))
    latitude = math.degrees(math.atan2(z + ep2 * z0, p))
    longitude = math.degrees(math.atan2(y, x))
    return latitude, longitude, altitude


def geodetic_to_enu(lat_deg: float, lon_deg: float, alt_m: float, home: HomePoint) -> tuple[float, float, float]:
    """(latitude deg, longitude deg, altitude m) -> ENU position (m) relative to ``home``."""
    east, north, up = pymap3d.geodetic2enu(lat_deg, lon_deg, alt_m, home.latitude, home.longitude, home.altitude)
    return float(east), float(north), float(up)
