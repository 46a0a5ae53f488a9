"""Pressure, temperature and density of the 1976 U.S. Standard Atmosphere.

AirSim paper (Shah et al. 2017), sec. 3.2.3: pressure from the 1976 U.S.
Standard Atmosphere (NOAA/NASA/USAF, NOAA-S/T 76-1562) up to 86 km, and density
from the ideal gas law ``rho = P / (R T)``. The layer equations are those of the
``fluids`` library (:class:`fluids.atmosphere.ATMOSPHERE_1976`, geometric altitude
in, valid from -5 km to 86 km), a maintained and tested implementation of the
standard, so this module only validates the range and freezes the result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fluids import atmosphere as fluids_atmosphere
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


#: Universal gas constant of the 1976 standard (J/(kmol K)), as fluids' ATMOSPHERE_1976 uses it.
_GAS_CONSTANT_1976 = 8314.32


def _check_range(geometric_altitude_m: float) -> None:
    if not MIN_ALTITUDE_M <= geometric_altitude_m <= MAX_ALTITUDE_M:
        raise AltitudeOutOfRangeError(
            f"altitude {geometric_altitude_m:g} m is outside the 1976 standard atmosphere "
            f"({MIN_ALTITUDE_M:g} m .. {MAX_ALTITUDE_M:g} m)"
        )


def standard_atmosphere(geometric_altitude_m: float) -> AtmosphereState:
    """Air temperature, pressure and density at ``geometric_altitude_m`` (m above mean sea level).

    Raises :class:`AltitudeOutOfRangeError` outside -5 km .. 86 km.
    """
    _check_range(geometric_altitude_m)
    air = ATMOSPHERE_1976(geometric_altitude_m)
    return AtmosphereState(temperature_k=float(air.T), pressure_pa=float(air.P), density_kg_m3=float(air.rho))


def standard_pressure_pa(geometric_altitude_m: float) -> float:
    """The pressure of :func:`standard_atmosphere` alone, bit for bit, at a seventh of its cost (1.5 vs 11 us;
    ``bench sensors``): a barometer samples it 50 times a simulated second and needs no viscosity, thermal
    conductivity or sound speed, which ATMOSPHERE_1976 computes too. The 1976 standard's layer equations
    (NOAA-S/T 76-1562 eqs. 33a/33b) on fluids' layer tables, in fluids' order of operations, at the
    geopotential height ``H = r0 Z / (r0 + Z)``:

        P = P_b (T_b / T)^(g0 M0 / (R* L_b)),  T = T_b + L_b (H - H_b)   (L_b != 0)
        P = P_b exp(-g0 M0 (H - H_b) / (R* T_b))                           (L_b == 0)

    ``test_environment.py`` checks it against :func:`standard_atmosphere` at many altitudes, for equality.
    Raises :class:`AltitudeOutOfRangeError` outside -5 km .. 86 km.
    """
    _check_range(geometric_altitude_m)
    f = fluids_atmosphere
    height = f.r0 * geometric_altitude_m / (f.r0 + geometric_altitude_m)
    layer = ATMOSPHERE_1976._get_ind_from_H(height)
    base_temperature, gradient = f.T_std[layer], f.T_grad[layer]
    above = height - f.H_std[layer]
    if gradient == 0.0:
        return float(f.P_std[layer] * math.exp(-f.g0 * f.M0 * above / (_GAS_CONSTANT_1976 * base_temperature)))
    temperature = base_temperature + gradient * above
    return float(f.P_std[layer] * (base_temperature / temperature) ** (f.g0 * f.M0 / (_GAS_CONSTANT_1976 * gradient)))
