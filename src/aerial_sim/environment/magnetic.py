"""Earth's magnetic field: the AirSim tilted dipole, or NOAA's World Magnetic Model.

Tilted dipole (AirSim paper, Shah et al. 2017, sec. 3.2.2, after Lanza and
Meloni 2006, pp. 27-30). With geographic latitude ``theta``, longitude ``phi``,
height ``h`` and the geomagnetic north pole at (``theta0``, ``phi0``):

    cos theta_m = sin theta sin theta0 + cos theta cos theta0 cos(phi - phi0)
    |B| = B0 (Re / (Re + h))^3 sqrt(1 + 3 cos^2 theta_m)
    tan alpha = 2 cot theta_m                          (inclination, down positive)
    beta = atan2(sin(phi0 - phi) cos theta0,
                 cos theta sin theta0 - sin theta cos theta0 cos(phi0 - phi))   (declination, east positive)
    H = |B| cos alpha,  Z = |B| sin alpha,  X = H cos beta,  Y = H sin beta

Two notes against the printed formulas. (1) The paper writes the co-latitude
with cos/sin of the *co*-latitudes; written with latitudes (as here, and as
AirLib's EarthUtils does) it is the spherical law of cosines above. (2) The
paper's declination ``sin beta = sin(phi - phi0) cos theta0 / sin theta_m`` (with a
second case for points beyond the pole) is the bearing of the pole with its sign
flipped and its quadrant ambiguous; the ``atan2`` form above is the bearing
itself, valid everywhere, and gives the right sign (Redmond, WA: +12 deg dipole
vs +15 deg WMM2025; the printed form gives -12 deg).

Accuracy of the dipole: it keeps only the first-degree terms, so it misses the
non-dipole field. Against WMM2025 at sea level (dipole / WMM):

    site        intensity (uT)   declination (deg)   inclination (deg)   angle between vectors
    Redmond     53.3 / 52.7      +11.9 / +15.0       69.5 / 68.8          1.3 deg
    London      53.4 / 49.1      -15.1 / +1.1        69.6 / 66.5          6.7 deg
    Sydney      46.9 / 57.0      +8.5 / +12.8        -59.5 / -64.4        5.3 deg
    Singapore   32.1 / 42.1      -0.6 / +0.2         -15.7 / -12.8        2.9 deg
    Tromsoe     58.9 / 53.9      -25.0 / +11.1       78.3 / 78.4          7.2 deg
    Tokyo       40.0 / 46.9      +5.6 / -7.9         46.3 / 49.5          9.6 deg
    Sao Paulo   34.2 / 22.8      -4.2 / -21.9        -28.3 / -40.7        19.0 deg (South Atlantic anomaly)

So the field direction is typically within 10 deg and the intensity within 25 %,
but declination, the angle a compass heading depends on, can be off by tens of
degrees where the horizontal field is weak or the non-dipole field strong: use
``model: wmm`` when absolute heading matters.

``model: wmm`` evaluates the World Magnetic Model (WMM2025, via the ``pygeomag``
library: a pure-Python port of NOAA's reference code that ships the coefficient
files, so nothing is downloaded), cached and re-evaluated only when the sensor
has moved ``cache_distance_m`` (the field changes by a few nT per km), so the
~60 us evaluation is paid rarely and the sensor stays real time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from aerial_sim.config import ParamsError, require, require_positive

#: Mean Earth radius (m) used by the dipole.
EARTH_RADIUS_M = 6371000.0


@dataclass(frozen=True)
class MagneticFieldParams:
    """Which field model, and its constants."""

    model: Literal["dipole", "wmm"] = "dipole"
    #: Geomagnetic (dipole) north pole, IGRF-13 epoch 2020.0: 80.65 N, 72.68 W.
    pole_latitude_deg: float = 80.65
    pole_longitude_deg: float = -72.68
    #: B0: mean field at the magnetic equator on the surface, 3.12e-5 T (AirLib's MeanMagField).
    equatorial_field_t: float = 3.12e-5
    #: WMM evaluation date as a decimal year (WMM2025 is valid 2025.0 - 2030.0).
    decimal_year: float = 2026.0
    #: WMM is re-evaluated only after the sensor moves this far (m).
    cache_distance_m: float = 100.0

    def __post_init__(self):
        require(-90.0 <= self.pole_latitude_deg <= 90.0, "pole_latitude_deg must be in [-90, 90]")
        require_positive(self, "equatorial_field_t", "cache_distance_m")


@dataclass(frozen=True)
class FieldComponents:
    """Field at one place: north, east, down components (T) and the usual angles (deg)."""

    north_t: float
    east_t: float
    down_t: float

    @property
    def enu(self) -> tuple[float, float, float]:
        return (self.east_t, self.north_t, -self.down_t)

    @property
    def intensity_t(self) -> float:
        return math.sqrt(self.north_t**2 + self.east_t**2 + self.down_t**2)

    @property
    def declination_deg(self) -> float:
        return math.degrees(math.atan2(self.east_t, self.north_t))

    @property
    def inclination_deg(self) -> float:
        return math.degrees(math.atan2(self.down_t, math.hypot(self.north_t, self.east_t)))


def tilted_dipole(latitude_deg: float, longitude_deg: float, altitude_m: float,
                  params: MagneticFieldParams = MagneticFieldParams()) -> FieldComponents:
    """Tilted-dipole field (module docstring equations) at a geodetic point."""
    lat, lon = math.radians(latitude_deg), math.radians(longitude_deg)
    lat0, lon0 = math.radians(params.pole_latitude_deg), math.radians(params.pole_longitude_deg)
    cos_m = math.sin(lat) * math.sin(lat0) + math.cos(lat) * math.cos(lat0) * math.cos(lon - lon0)
    cos_m = min(1.0, max(-1.0, cos_m))
    sin_m = math.sqrt(1.0 - cos_m * cos_m)
    intensity = params.equatorial_field_t * (EARTH_RADIUS_M / (EARTH_RADIUS_M + altitude_m)) ** 3 * math.sqrt(1 + 3 * cos_m**2)
    inclination = math.atan2(2.0 * cos_m, sin_m)
    declination = math.atan2(
        math.sin(lon0 - lon) * math.cos(lat0),
        math.cos(lat) * math.sin(lat0) - math.sin(lat) * math.cos(lat0) * math.cos(lon0 - lon),
    )
    horizontal = intensity * math.cos(inclination)
    return FieldComponents(
        north_t=horizontal * math.cos(declination),
        east_t=horizontal * math.sin(declination),
        down_t=intensity * math.sin(inclination),
    )


class WorldMagneticModel:
    """NOAA World Magnetic Model through ``pygeomag`` (imported on first use)."""

    def __init__(self, params: MagneticFieldParams = MagneticFieldParams()):
        try:
            from pygeomag import GeoMag
        except ImportError as error:  # pragma: no cover - a declared dependency
            raise ParamsError("field model 'wmm' needs the pygeomag package (pip install pygeomag)") from error
        self.params = params
        self._geomag = GeoMag()

    def __call__(self, latitude_deg: float, longitude_deg: float, altitude_m: float) -> FieldComponents:
        result = self._geomag.calculate(glat=latitude_deg, glon=longitude_deg, alt=altitude_m / 1000.0,
                                        time=self.params.decimal_year, allow_date_outside_lifespan=True)
        return FieldComponents(north_t=result.x * 1e-9, east_t=result.y * 1e-9, down_t=result.z * 1e-9)


class MagneticField:
    """The configured field model as ``field(lat, lon, alt) -> FieldComponents``, cached for WMM."""

    def __init__(self, params: MagneticFieldParams = MagneticFieldParams()):
        self.params = params
        self._wmm = WorldMagneticModel(params) if params.model == "wmm" else None
        self._cached_at: tuple[float, float, float] | None = None
        self._cached: FieldComponents | None = None
        self.evaluations = 0  #: number of full model evaluations (for tests and benchmarks)

    def __call__(self, latitude_deg: float, longitude_deg: float, altitude_m: float) -> FieldComponents:
        if self._wmm is None:
            self.evaluations += 1
            return tilted_dipole(latitude_deg, longitude_deg, altitude_m, self.params)
        here = (latitude_deg, longitude_deg, altitude_m)
        if self._cached is None or _distance_m(self._cached_at, here) > self.params.cache_distance_m:
            self.evaluations += 1
            self._cached, self._cached_at = self._wmm(*here), here
        return self._cached


def _distance_m(a: tuple[float, float, float], b: tuple[float, float, float]) -> float:
    """Approximate distance (m) between two nearby geodetic points (local flat earth)."""
    north = math.radians(b[0] - a[0]) * EARTH_RADIUS_M
    east = math.radians((b[1] - a[1] + 180.0) % 360.0 - 180.0) * EARTH_RADIUS_M * math.cos(math.radians(a[0]))
    return math.sqrt(north**2 + east**2 + (b[2] - a[2]) ** 2)
