"""The home point and ENU <-> WGS-84 geodetic conversion.

The world frame ``map`` is a local East-North-Up tangent plane at the home
point (REP-103/105). Conversions use ``pymap3d`` (exact WGS-84 ellipsoid
transforms through ECEF, a small, well-tested library) rather than AirSim's
flat-earth approximation, so GPS fixes stay exact far from home.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def enu_to_geodetic(east: float, north: float, up: float, home: HomePoint) -> tuple[float, float, float]:
    """ENU position (m) relative to ``home`` -> (latitude deg, longitude deg, altitude m above the ellipsoid)."""
    lat, lon, alt = pymap3d.enu2geodetic(east, north, up, home.latitude, home.longitude, home.altitude)
    return float(lat), float(lon), float(alt)


def geodetic_to_enu(lat_deg: float, lon_deg: float, alt_m: float, home: HomePoint) -> tuple[float, float, float]:
    """(latitude deg, longitude deg, altitude m) -> ENU position (m) relative to ``home``."""
    east, north, up = pymap3d.geodetic2enu(lat_deg, lon_deg, alt_m, home.latitude, home.longitude, home.altitude)
    return float(east), float(north), float(up)
