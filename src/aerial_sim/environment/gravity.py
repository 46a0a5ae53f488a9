"""Gravity: WGS-84 normal gravity at the home latitude and height (NIMA TR8350.2, 3rd ed., 2000, ch. 4).

The AirSim paper (Shah et al. 2017, sec. 3.2.1) uses ``g0 (1 - 2h/Re)`` with
standard gravity ``g0 = 9.80665 m/s^2`` at every latitude, which is 0.27 % high
at the equator and 0.26 % low at the poles (0.02 % low at Redmond). Here gravity
is the normal gravity of the WGS-84 ellipsoid (gravitation plus the centrifugal
term of the Earth's rotation):

- Somigliana's closed formula on the ellipsoid (TR8350.2 eq. 4-1)::

      gamma(phi) = gamma_e (1 + k sin^2 phi) / sqrt(1 - e^2 sin^2 phi)

- and its second-order expansion in ellipsoidal height ``h`` (eq. 4-3), which
  keeps the paper's linear fall with height plus the ellipsoid's terms::

      gamma(phi, h) = gamma(phi) [1 - 2/a (1 + f + m - 2 f sin^2 phi) h + 3 h^2 / a^2]

with the WGS-84 constants of TR8350.2 tables 3.1 and 3.3. The expansion agrees
with the closed-form normal gravity at height (Li and Goetze 2001, as in the
``boule`` library) to 1e-8 at 1 km, 7e-8 at 10 km and 1e-5 at 86 km.

In flight the latitude stays that of the home point (a vehicle would have to fly
11 km north to change gravity by 1e-5 relative at mid-latitudes), so gravity is a
quadratic in the height ``up`` above home: :func:`gravity_coefficients` gives its
three coefficients once, and the physics step evaluates
``g0 + up * (g1 + up * g2)`` (:func:`gravity_from_coefficients`).
"""

from __future__ import annotations

import math

#: Standard gravity (m/s^2), ISO 80000-3 / CGPM 1901: the unit "g" of datasheets and the
#: 1976 standard atmosphere's geopotential; not the gravity the vehicle feels.
STANDARD_GRAVITY_M_S2 = 9.80665

#: WGS-84 (NIMA TR8350.2, 3rd ed., tables 3.1 and 3.3).
WGS84_SEMI_MAJOR_AXIS_M = 6378137.0
WGS84_FLATTENING = 1.0 / 298.257223563
#: Normal gravity at the equator and at the poles (m/s^2).
WGS84_EQUATORIAL_GRAVITY_M_S2 = 9.7803253359
WGS84_POLAR_GRAVITY_M_S2 = 9.8321849378
#: Somigliana's constant k = (b gamma_p) / (a gamma_e) - 1.
WGS84_SOMIGLIANA_K = 0.00193185265241
#: First eccentricity squared.
WGS84_ECCENTRICITY_SQUARED = 0.00669437999013
#: m = omega^2 a^2 b / GM.
WGS84_GRAVITY_RATIO_M = 0.00344978650684

GravityCoefficients = tuple[float, float, float]


def somigliana_gravity(latitude_deg: float) -> float:
    """Normal gravity on the WGS-84 ellipsoid at geodetic ``latitude_deg`` (m/s^2), TR8350.2 eq. 4-1."""
    sin2 = math.sin(math.radians(latitude_deg)) ** 2
    return WGS84_EQUATORIAL_GRAVITY_M_S2 * (1.0 + WGS84_SOMIGLIANA_K * sin2) / math.sqrt(
        1.0 - WGS84_ECCENTRICITY_SQUARED * sin2
    )


def gravity_coefficients(latitude_deg: float, home_height_m: float) -> GravityCoefficients:
    """``(g0, g1, g2)`` with ``g(up) = g0 + up (g1 + up g2)`` = TR8350.2 eq. 4-3 at height ``home_height_m + up``.

    Exact: eq. 4-3 is a quadratic in the height, re-centred here on the home point.
    """
    a = WGS84_SEMI_MAJOR_AXIS_M
    f = WGS84_FLATTENING
    sin2 = math.sin(math.radians(latitude_deg)) ** 2
    gamma = somigliana_gravity(latitude_deg)
    linear = 2.0 / a * (1.0 + f + WGS84_GRAVITY_RATIO_M - 2.0 * f * sin2)
    quadratic = 3.0 / (a * a)
    h = home_height_m
    return (
        gamma * (1.0 - linear * h + quadratic * h * h),
        gamma * (-linear + 2.0 * quadratic * h),
        gamma * quadratic,
    )


def gravity_from_coefficients(coefficients: GravityCoefficients, up_m: float) -> float:
    """``g0 + up (g1 + up g2)``: gravity (m/s^2) at ``up_m`` above home; the physics step inlines the same expression."""
    g0, g1, g2 = coefficients
    return g0 + up_m * (g1 + up_m * g2)


def normal_gravity(latitude_deg: float, height_m: float) -> float:
    """WGS-84 normal gravity (m/s^2) at geodetic ``latitude_deg`` and ellipsoidal ``height_m`` (eq. 4-3)."""
    return gravity_from_coefficients(gravity_coefficients(latitude_deg, 0.0), height_m)
