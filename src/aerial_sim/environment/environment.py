"""The environment a vehicle flies in: home point, gravity, air and a constant wind.

Combines the AirSim paper's environment models (Shah et al. 2017, sec. 3.2):
gravity falling with height (3.2.1; here WGS-84 normal gravity at the home
latitude, :mod:`.gravity`) and air density from the 1976 U.S. Standard
Atmosphere (3.2.3), both at the altitude ``home.altitude + up``, plus a constant
wind vector (sec. 5 mentions AirSim's "simplistic wind").

The standard atmosphere costs about 2 microseconds per evaluation, as much as a
whole physics step should, so :class:`Environment` evaluates it only when the
altitude leaves a band around the last evaluation and interpolates linearly
inside the band (error below 3e-6 relative for the default 20 m band).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aerial_sim.config import require, require_positive
from aerial_sim.environment.atmosphere import standard_atmosphere
from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.environment.gravity import gravity_coefficients, gravity_from_coefficients


@dataclass(frozen=True)
class EnvironmentParams:
    """Home point (origin of ``map``) and the constant wind (ENU, m/s)."""

    home: HomePoint = field(default_factory=HomePoint)
    wind_enu_m_s: tuple[float, float, float] = (0.0, 0.0, 0.0)
    #: Altitude band (m) within which air density is interpolated instead of recomputed.
    density_band_m: float = 20.0

    def __post_init__(self):
        require_positive(self, "density_band_m")
        require(len(self.wind_enu_m_s) == 3, f"wind_enu_m_s needs 3 values, got {self.wind_enu_m_s!r}")


class Environment:
    """Gravity and air density as functions of the height ``up`` (m) above the home point."""

    def __init__(self, params: EnvironmentParams):
        self.params = params
        self.home_altitude_m = params.home.altitude
        #: ``(g0, g1, g2)``: gravity ``g0 + up (g1 + up g2)`` at ``up`` above home (m/s^2), read by the physics step.
        self.gravity_coefficients = gravity_coefficients(params.home.latitude, params.home.altitude)
        self.wind_enu_m_s = tuple(float(v) for v in params.wind_enu_m_s)
        self._band_m = params.density_band_m
        self._anchor_up_m = float("nan")
        self._anchor_density = 0.0
        self._density_slope = 0.0
        self._refresh(0.0)

    def gravity(self, up_m: float) -> float:
        """Gravity (m/s^2) at ``up_m`` above home: WGS-84 normal gravity at the home latitude (sec. 3.2.1)."""
        return gravity_from_coefficients(self.gravity_coefficients, up_m)

    def air_density(self, up_m: float) -> float:
        """Air density (kg/m^3) at ``up_m`` above home, cached and linearly interpolated."""
        offset = up_m - self._anchor_up_m
        if not -self._band_m < offset < self._band_m:
            self._refresh(up_m)
            offset = 0.0
        return self._anchor_density + self._density_slope * offset

    @property
    def density_line(self) -> tuple[float, float, float]:
        """The interpolation in use: (anchor height up_m, density there, slope per metre)."""
        return (self._anchor_up_m, self._anchor_density, self._density_slope)

    @density_line.setter
    def density_line(self, line: tuple[float, float, float]) -> None:
        self._anchor_up_m, self._anchor_density, self._density_slope = line

    def _refresh(self, up_m: float) -> None:
        altitude = self.home_altitude_m + up_m
        here = standard_atmosphere(altitude).density_kg_m3
        step = 1.0 if altitude + 1.0 <= 86000.0 else -1.0
        there = standard_atmosphere(altitude + step).density_kg_m3
        self._anchor_up_m = up_m
        self._anchor_density = here
        self._density_slope = (there - here) / step
