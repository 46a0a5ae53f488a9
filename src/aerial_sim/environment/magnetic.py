"""Earth's magnetic field: the AirSim tilted dipole (with IGRF-14's dipole), or NOAA's World Magnetic Model.

Tilted dipole (AirSim paper, Shah et al. 2017, sec. 3.2.2, after Lanza and
Meloni 2006, pp. 27-30): the Earth's field reduced to its first-degree
(dipole) terms. The paper writes it on a spherical Earth with the magnetic
co-latitude ``theta_m`` of the point (its angle from the geomagnetic north pole)::

    |B| = B0 (Re / (Re + h))^3 sqrt(1 + 3 cos^2 theta_m),   tan(inclination) = 2 cot theta_m

Here the same dipole is evaluated in its vector form at the point's geocentric
position ``r`` (WGS-84 geodetic -> ECEF, :func:`pymap3d.geodetic2ecef`), as the
IGRF does for its degree-1 terms, and the result turned into the local
north/east/down frame::

    B(r) = (a / |r|)^3 [3 (d . r_hat) r_hat - d],   d = (g11, h11, g10)   (ECEF, nT)

with ``a`` = 6371.2 km, the IGRF reference radius. On a sphere this is exactly
the paper's formula with ``B0 = |d|`` and the pole at ``-d / |d|``; on the
ellipsoid it is exactly the degree-1 part of the IGRF (the tests compare it with
``ppigrf``'s to 1e-5), and it needs no special case near the pole (the paper's
printed declination has the wrong sign: -12 deg at Redmond, where WMM2025 gives
+15 deg).

The dipole coefficients are those of IGRF-14 (IAGA Working Group V-MOD, 2024;
coefficient file doi:10.5281/zenodo.14012302): ``g10, g11, h11`` at 2020.0 and 2025.0, interpolated linearly
between them and carried on with the 2025-2030 secular variation, as the IGRF
itself is evaluated, at the simulation's ``date``. At 2026.0 that is
``B0 = 29,717 nT`` with the geomagnetic north pole at 80.8 N, 72.8 W (AirLib's
``MeanMagField``, 3.12e-5 T, is 5 % above it). Dates before 2020 extrapolate the
2020-2025 change.

Accuracy of the dipole: it keeps only the first-degree terms and misses the
non-dipole field. Against IGRF-14 at 2026.0, on the surface (dipole / IGRF):

    site        intensity (uT)   declination (deg)   inclination (deg)   angle between vectors
    Redmond     50.8 / 52.7      +11.5 / +14.9       69.1 / 68.8          1.3 deg
    London      50.9 / 49.1      -14.6 / +1.1        69.3 / 66.5          6.5 deg
    Sydney      44.5 / 57.0      +8.3 / +12.8        -59.0 / -64.4        5.7 deg
    Singapore   30.4 / 42.1      -0.5 / +0.2         -15.4 / -12.8        2.6 deg
    Tromsoe     56.4 / 53.9      -24.2 / +11.1       78.1 / 78.4          7.1 deg
    Tokyo       38.1 / 46.9      +5.5 / -7.9         46.1 / 49.5          9.6 deg
    Sao Paulo   32.6 / 22.8      -4.2 / -21.9        -28.3 / -40.7        19.1 deg (South Atlantic anomaly)
    Cape Town   41.1 / 25.0      -11.0 / -26.6       -52.7 / -64.7        14.4 deg (South Atlantic anomaly)

Over the whole surface (5-degree grid, weighted by area) the direction is within
10 deg on 62 % of it and within 20 deg on 90 % (worst 39 deg, in the South
Atlantic); the intensity is within 25 % on 79 % of it, between -32 % and +92 %.
WMM2025 agrees with IGRF-14 within 35 nT at these sites, so the same holds
against it.

The tests (``test_sensors_magnetometer.py``) measure these figures against
IGRF-14 (``ppigrf``) and WMM2025 (``pygeomag``). Declination, the angle a compass
heading depends on, can be off by tens of degrees where the horizontal field is
weak or the non-dipole field strong: use ``model: wmm`` when absolute heading
matters.

``model: wmm`` evaluates the World Magnetic Model (WMM2025, via the ``pygeomag``
library: a pure-Python port of NOAA's reference code that ships the coefficient
files, so nothing is downloaded) at the simulation's ``date``, cached and
re-evaluated only when the sensor has moved ``cache_distance_m`` (the field
changes by a few nT per km), so the ~60 us evaluation is paid rarely and the
sensor stays real time.

``date`` is a decimal year (``2026.5``), an ISO date (``"2026-07-02"``) or
``"today"`` (the default: the UTC date when the model is built). Set it for runs
that must give the same field on every day they are repeated.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from typing import Literal

import pymap3d

from aerial_sim.config import ParamsError, require, require_positive

#: Mean Earth radius (m), for the distance the WMM cache tolerates.
EARTH_RADIUS_M = 6371000.0
#: Reference radius of the IGRF's spherical-harmonic expansion (m).
IGRF_REFERENCE_RADIUS_M = 6371200.0
#: IGRF-14 degree-1 Gauss coefficients (g10, g11, h11), nT, at the epochs 2020.0 (definitive) and 2025.0.
IGRF14_DIPOLE_NT = {2020.0: (-29403.41, -1451.37, 4653.35), 2025.0: (-29350.0, -1410.3, 4545.5)}
#: IGRF-14 secular variation of (g10, g11, h11) for 2025-2030, nT per year.
IGRF14_DIPOLE_SV_NT_PER_YEAR = (12.6, 10.0, -21.5)
#: Years the model accepts for ``date`` (the WMM2025 is valid 2025.0-2030.0, IGRF-14's prediction to 2030.0).
FIRST_YEAR, LAST_YEAR = 1900.0, 2100.0


@dataclass(frozen=True)
class MagneticFieldParams:
    """Which field model, and at which date."""

    model: Literal["dipole", "wmm"] = "dipole"
    #: Simulation date: decimal year (2026.5), ISO date ("2026-07-02") or "today" (UTC, when the model is built).
    date: float | str = "today"
    #: WMM is re-evaluated only after the sensor moves this far (m).
    cache_distance_m: float = 100.0

    def __post_init__(self):
        require_positive(self, "cache_distance_m")
        decimal_year(self.date)  # a ParamsError naming the bad date

    @property
    def decimal_year(self) -> float:
        """``date`` as a decimal year (``"today"`` read now)."""
        return decimal_year(self.date)


def decimal_year(date: float | str) -> float:
    """A decimal year (``2026.5``), an ISO date or date-time (``"2026-07-02"``) or ``"today"``, as a decimal year."""
    if isinstance(date, (int, float)) and not isinstance(date, bool):
        year = float(date)
    elif isinstance(date, str):
        year = _iso_decimal_year(date.strip())
    else:
        raise ParamsError(f"date must be a decimal year, an ISO date or 'today', got {date!r}")
    require(math.isfinite(year) and FIRST_YEAR <= year <= LAST_YEAR,
            f"date must be within {FIRST_YEAR:g}-{LAST_YEAR:g}, got {date!r}")
    return year


def _iso_decimal_year(text: str) -> float:
    if text.lower() == "today":
        moment = datetime.datetime.now(datetime.timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    else:
        try:
            moment = datetime.datetime.fromisoformat(text)
        except ValueError as error:
            raise ParamsError(f"date must be a decimal year, an ISO date (2026-07-02) or 'today', got {text!r}") from error
    moment = moment.replace(tzinfo=None)
    start = datetime.datetime(moment.year, 1, 1)
    length = datetime.datetime(moment.year + 1, 1, 1) - start
    return moment.year + (moment - start) / length


def igrf14_dipole_nt(year: float) -> tuple[float, float, float]:
    """IGRF-14 ``(g10, g11, h11)`` (nT) at decimal ``year``: linear between 2020.0 and 2025.0, secular variation after."""
    if year >= 2025.0:
        return tuple(g + sv * (year - 2025.0) for g, sv in zip(IGRF14_DIPOLE_NT[2025.0], IGRF14_DIPOLE_SV_NT_PER_YEAR))
    weight = (year - 2020.0) / 5.0
    return tuple(a + weight * (b - a) for a, b in zip(IGRF14_DIPOLE_NT[2020.0], IGRF14_DIPOLE_NT[2025.0]))


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


#: pymap3d's default ellipsoid, built once: ``geodetic2ecef`` without ``ell`` builds it anew at every call
#: (a third of a magnetometer sample's cost).
_WGS84 = pymap3d.Ellipsoid.from_name("wgs84")
#: geodetic2ecef's ``ell.semimajor_axis**2`` and ``(ell.semiminor_axis / ell.semimajor_axis) ** 2``, made once.
_A_SQUARED = _WGS84.semimajor_axis**2
_B_OVER_A_SQUARED = (_WGS84.semiminor_axis / _WGS84.semimajor_axis) ** 2


class TiltedDipole:
    """The IGRF-14 dipole at one date, as ``dipole(lat, lon, alt) -> FieldComponents`` (module docstring)."""

    def __init__(self, year: float):
        self.year = year
        g10, g11, h11 = igrf14_dipole_nt(year)
        #: Dipole vector d = (g11, h11, g10) in ECEF, tesla.
        self.moment_t = (g11 * 1e-9, h11 * 1e-9, g10 * 1e-9)

    @property
    def equatorial_field_t(self) -> float:
        """B0 = |d|: the field on the dipole's equator at the reference radius (T)."""
        return math.sqrt(sum(c * c for c in self.moment_t))

    @property
    def pole_deg(self) -> tuple[float, float]:
        """Geomagnetic north pole (geocentric latitude, longitude), deg: where the dipole's axis leaves the north."""
        dx, dy, dz = self.moment_t
        return (math.degrees(math.asin(-dz / self.equatorial_field_t)), math.degrees(math.atan2(-dy, -dx)))

    def __call__(self, latitude_deg: float, longitude_deg: float, altitude_m: float) -> FieldComponents:
        east, north, up = self.enu(latitude_deg, longitude_deg, altitude_m)
        return FieldComponents(north_t=north, east_t=east, down_t=-up)

    def enu(self, latitude_deg: float, longitude_deg: float, altitude_m: float) -> tuple[float, float, float]:
        """The field's east, north, up components (T): :attr:`FieldComponents.enu` of a call, without the object.

        pymap3d's ``geodetic2ecef`` and ``ecef2enuv`` written out in plain floats, the same operations in the same
        order: its NumPy functions on scalars cost two thirds of a magnetometer sample (issue 34). NumPy's
        ``radians``, ``sin`` and ``cos`` of a float64 give ``math``'s bits (both call the C library's); its
        ``hypot`` is the C library's, which ``abs(complex(x, y))`` calls too (``math.hypot`` is CPython's own
        and differs in the last bit about once in 200 calls). ``test_sensors_magnetometer.py`` checks the bits
        against pymap3d's over random points. A point that is not finite goes through pymap3d itself."""
        if not (math.isfinite(latitude_deg) and math.isfinite(longitude_deg) and math.isfinite(altitude_m)):
            return self._enu_by_pymap3d(latitude_deg, longitude_deg, altitude_m)
        lat, lon = math.radians(latitude_deg), math.radians(longitude_deg)
        sin_lat, cos_lat, sin_lon, cos_lon = math.sin(lat), math.cos(lat), math.sin(lon), math.cos(lon)
        # geodetic2ecef: N = a^2 / hypot(a cos(lat), b sin(lat)), x = (N + h) cos(lat) cos(lon), ...
        n = _A_SQUARED / abs(complex(_WGS84.semimajor_axis * cos_lat, _WGS84.semiminor_axis * sin_lat))
        x = (n + altitude_m) * cos_lat * cos_lon
        y = (n + altitude_m) * cos_lat * sin_lon
        z = (n * _B_OVER_A_SQUARED + altitude_m) * sin_lat
        bx, by, bz = self._dipole_ecef(x, y, z)
        # ecef2enuv
        t = cos_lon * bx + sin_lon * by
        east = -sin_lon * bx + cos_lon * by
        up = cos_lat * t + sin_lat * bz
        north = -sin_lat * t + cos_lat * bz
        return east, north, up

    def _dipole_ecef(self, x: float, y: float, z: float) -> tuple[float, float, float]:
        """The dipole's field at ECEF point (x, y, z), T: B = (R/r)^3 (3 (m.u) u - m), m the moment (``moment_t``)."""
        radius = math.sqrt(x * x + y * y + z * z)
        ux, uy, uz = x / radius, y / radius, z / radius
        dx, dy, dz = self.moment_t
        along = 3.0 * (dx * ux + dy * uy + dz * uz)
        scale = (IGRF_REFERENCE_RADIUS_M / radius) ** 3
        return scale * (along * ux - dx), scale * (along * uy - dy), scale * (along * uz - dz)

    def _enu_by_pymap3d(self, latitude_deg: float, longitude_deg: float, altitude_m: float) -> tuple[float, float, float]:
        """:meth:`enu` through pymap3d's own functions (the reference the tests compare it with)."""
        x, y, z = pymap3d.geodetic2ecef(latitude_deg, longitude_deg, altitude_m, ell=_WGS84)
        bx, by, bz = self._dipole_ecef(x, y, z)
        east, north, up = pymap3d.ecef2enuv(bx, by, bz, latitude_deg, longitude_deg)
        return float(east), float(north), float(up)


def tilted_dipole(latitude_deg: float, longitude_deg: float, altitude_m: float, year: float | str = "today") -> FieldComponents:
    """The IGRF-14 dipole field at a geodetic point and date (decimal year, ISO date or "today")."""
    return TiltedDipole(decimal_year(year))(latitude_deg, longitude_deg, altitude_m)


class WorldMagneticModel:
    """NOAA World Magnetic Model through ``pygeomag`` (imported on first use), at one date."""

    def __init__(self, year: float):
        try:
            from pygeomag import GeoMag
        except ImportError as error:  # pragma: no cover - a declared dependency
            raise ParamsError("field model 'wmm' needs the pygeomag package (pip install pygeomag)") from error
        self.year = year
        self._geomag = GeoMag()

    def __call__(self, latitude_deg: float, longitude_deg: float, altitude_m: float) -> FieldComponents:
        result = self._geomag.calculate(glat=latitude_deg, glon=longitude_deg, alt=altitude_m / 1000.0,
                                        time=self.year, allow_date_outside_lifespan=True)
        return FieldComponents(north_t=result.x * 1e-9, east_t=result.y * 1e-9, down_t=result.z * 1e-9)


class MagneticField:
    """The configured field model at the configured date, as ``field(lat, lon, alt) -> FieldComponents``.

    ``date: today`` is read once, here. The WMM is cached (re-evaluated after ``cache_distance_m``).
    """

    def __init__(self, params: MagneticFieldParams = MagneticFieldParams()):
        self.params = params
        self.decimal_year = params.decimal_year
        self._dipole = TiltedDipole(self.decimal_year)
        self._wmm = WorldMagneticModel(self.decimal_year) if params.model == "wmm" else None
        self._cached_at: tuple[float, float, float] | None = None
        self._cached: FieldComponents | None = None
        self.evaluations = 0  #: number of full model evaluations (for tests and benchmarks)

    def __call__(self, latitude_deg: float, longitude_deg: float, altitude_m: float) -> FieldComponents:
        if self._wmm is None:
            self.evaluations += 1
            return self._dipole(latitude_deg, longitude_deg, altitude_m)
        here = (latitude_deg, longitude_deg, altitude_m)
        if self._cached is None or _distance_m(self._cached_at, here) > self.params.cache_distance_m:
            self.evaluations += 1
            self._cached, self._cached_at = self._wmm(*here), here
        return self._cached

    def enu(self, latitude_deg: float, longitude_deg: float, altitude_m: float) -> tuple[float, float, float]:
        """``self(...).enu``: east, north, up (T); the dipole's without building :class:`FieldComponents`."""
        if self._wmm is None:
            self.evaluations += 1
            return self._dipole.enu(latitude_deg, longitude_deg, altitude_m)
        return self(latitude_deg, longitude_deg, altitude_m).enu


def _distance_m(a: tuple[float, float, float], b: tuple[float, float, float]) -> float:
    """Approximate distance (m) between two nearby geodetic points (local flat earth)."""
    north = math.radians(b[0] - a[0]) * EARTH_RADIUS_M
    east = math.radians((b[1] - a[1] + 180.0) % 360.0 - 180.0) * EARTH_RADIUS_M * math.cos(math.radians(a[0]))
    return math.sqrt(north**2 + east**2 + (b[2] - a[2]) ** 2)
