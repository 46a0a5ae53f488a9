"""Pressure, temperature and density of the 1976 U.S. Standard Atmosphere.

AirSim paper (Shah et al. 2017), sec. 3.2.3: pressure from the 1976 U.S.
Standard Atmosphere (NOAA/NASA/USAF, NOAA-S/T 76-1562) up to 86 km, and density
from the ideal gas law ``rho = P / (R T)``. The layer equations are those of the
``fluids`` library (:class:`fluids.atmosphere.ATMOSPHERE_1976`, geometric altitude
in, valid from -5 km to 86 km), a maintained and tested implementation of the
standard, so this module only validates the range and freezes the result.
"""

from __future__ import annotations

from dataclasses import dataclass

from fluids.atmosphere import ATMOSPHERE_1976

from aerial_sim.config import ParamsError

#: Sea-level values of the standard (density from P / (R T) at 288.15 K).
SEA_LEVEL_DENSITY_KG_M3 = 1.225
SEA_LEVEL_PRESSURE_PA = 101325.0
SEA_LEVEL_TEMPERATURE_K = 288.15
#: Range of geometric altitude the 1976 standard covers (m).
MIN_ALTITUDE_M = -5000.0
MAX_ALTITUDE_M = 86000.0


class AltitudeOutOfRangeError(ParamsError):
    """The altitude is outside the range the 1976 standard atmosphere defines."""


@dataclass(frozen=True)
class AtmosphereState:
    """Static air state at one altitude (SI units)."""

    temperature_k: float
    pressure_pa: float
    density_kg_m3: float


def standard_atmosphere(geometric_altitude_m: float) -> AtmosphereState:
    """Air temperature, pressure and density at ``geometric_altitude_m`` (m above mean sea level).

    Raises :class:`AltitudeOutOfRangeError` outside -5 km .. 86 km.
    """
    if not MIN_ALTITUDE_M <= geometric_altitude_m <= MAX_ALTITUDE_M:
        raise AltitudeOutOfRangeError(
            f"altitude {geometric_altitude_m:g} m is outside the 1976 standard atmosphere "
            f"({MIN_ALTITUDE_M:g} m .. {MAX_ALTITUDE_M:g} m)"
        )
    air = ATMOSPHERE_1976(geometric_altitude_m)
    return AtmosphereState(temperature_k=float(air.T), pressure_pa=float(air.P), density_kg_m3=float(air.rho))
