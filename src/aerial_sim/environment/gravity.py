"""Gravity as a function of altitude (AirSim paper, Shah et al. 2017, sec. 3.2.1).

Newton's law of gravitation ``g = g0 * Re^2 / (Re + h)^2``, expanded with the
binomial theorem and truncated after the linear term: ``g ~= g0 * (1 - 2 h / Re)``.
"""

from __future__ import annotations

#: Standard gravity at the surface (m/s^2), ISO 80000-3 / CGPM 1901.
STANDARD_GRAVITY_M_S2 = 9.80665
#: Mean Earth radius (m), as used by AirSim's EarthUtils.
EARTH_RADIUS_M = 6371000.0


def gravity_at_altitude(geometric_altitude_m: float) -> float:
    """Magnitude of gravitational acceleration (m/s^2) at ``geometric_altitude_m`` above the surface."""
    return STANDARD_GRAVITY_M_S2 * (1.0 - 2.0 * geometric_altitude_m / EARTH_RADIUS_M)
