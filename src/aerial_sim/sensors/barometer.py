"""Barometer model: standard-atmosphere pressure + Gauss-Markov drift + white noise.

AirSim paper (Shah et al. 2017), sec. 3.4.1: the true pressure comes from the
1976 U.S. Standard Atmosphere (sec. 3.2.3) at the sensor's altitude; a drifting
bias follows a Gauss-Markov process ``b_{k+1} = w b_k + (1 - w) eta``,
``w = exp(-dt / tau)``, tau = 1 h, drift standard deviation 0.5 mbar (Sabatini and
Genovese 2013; Burch 2014); then white noise from the datasheet is added. The
driver-side altitude is the barometric formula

    h = (T0 / a) [ (p / p0)^(-a R / g) - 1 ],  T0 = 288.15 K, a = -6.5e-3 K/m.

By default the drift uses the exact discretisation of the same process (see
:class:`aerial_sim.sensors.noise.GaussMarkov`), so its long-run standard
deviation really is 0.5 mbar; ``drift_discretization: paper`` keeps AirSim's.

White noise: the paper's "0.24" for the MS5611 carries no unit. It matches the
datasheet when read as metres of altitude: the MS5611-01BA03 RMS resolution at
OSR 1024 is 0.027 mbar = 2.7 Pa, i.e. 0.23 m near sea level (AirLib's
BarometerSimpleParams uses the same 0.027 mbar). The preset uses 2.7 Pa.

The altitude fed to the atmosphere is ``home.altitude + up`` (the home point's
ellipsoidal height, the geoid undulation ignored, as AirSim does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np

from aerial_sim.config import require_non_negative, require_positive
from aerial_sim.environment.atmosphere import SEA_LEVEL_PRESSURE_PA, SEA_LEVEL_TEMPERATURE_K, standard_pressure_pa
from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.sensors.noise import GaussMarkov, NormalStream, RandomCheckpoint, sensor_rng
from aerial_sim.sensors.params import check_rate_and_seed
from aerial_sim.sensors.truth import STANDARD_GRAVITY, GroundTruthLike

#: Troposphere temperature gradient a (K/m) and specific gas constant of dry air R (J/(kg K)).
TEMPERATURE_GRADIENT_K_M = -6.5e-3
GAS_CONSTANT_AIR = 287.05287


def pressure_to_altitude(pressure_pa, sea_level_pressure_pa: float = SEA_LEVEL_PRESSURE_PA):
    """Barometric formula (paper sec. 3.4.1): altitude (m) of ``pressure_pa`` given the sea-level pressure ``p0``."""
    exponent = -TEMPERATURE_GRADIENT_K_M * GAS_CONSTANT_AIR / STANDARD_GRAVITY
    return SEA_LEVEL_TEMPERATURE_K / TEMPERATURE_GRADIENT_K_M * (np.power(pressure_pa / sea_level_pressure_pa, exponent) - 1.0)


@dataclass(frozen=True)
class BarometerParams:
    """Barometer rate and noise. Defaults: MEAS MS5611-01BA at OSR 1024 and the paper's drift."""

    rate_hz: float = 50.0
    seed: int = 0
    #: White noise standard deviation (Pa): 0.027 mbar RMS resolution at OSR 1024 (datasheet).
    noise_std_pa: float = 2.7
    #: Drift (Gauss-Markov bias) long-run standard deviation (Pa): 0.5 mbar (paper).
    drift_std_pa: float = 50.0
    #: Drift time constant (s): 1 hour (paper).
    drift_tau_s: float = 3600.0
    #: 'exact' (stationary std = drift_std_pa at any rate) or 'paper' (AirSim's (1 - w) form).
    drift_discretization: Literal["exact", "paper"] = "exact"
    #: Sea-level pressure p0 the driver's altitude formula assumes (Pa), i.e. QNH.
    sea_level_pressure_pa: float = SEA_LEVEL_PRESSURE_PA

    def __post_init__(self):
        check_rate_and_seed(self)
        require_non_negative(self, "noise_std_pa", "drift_std_pa")
        require_positive(self, "drift_tau_s", "sea_level_pressure_pa")


class BarometerMeasurement(NamedTuple):
    """One sample (a named tuple, as every sensor's measurement: immutable, and cheap to make per sample)."""

    time_s: float
    pressure_pa: float
    #: Altitude the driver derives with the barometric formula (m above the p0 level).
    altitude_m: float
    #: Variance of the pressure error (Pa^2): white noise plus drift.
    variance_pa2: float


class Barometer:
    """Pressure sensor at ``home.altitude + up`` (see the module docstring)."""

    def __init__(self, params: BarometerParams = BarometerParams(), home: HomePoint = HomePoint(),
                 rng: np.random.Generator | None = None):
        self.params = params
        self.home = home
        rng = rng if rng is not None else sensor_rng(params.seed, "barometer")
        self._noise_rng, drift_rng = rng.spawn(2)
        self._random_start = RandomCheckpoint(self._noise_rng, drift_rng)
        self._noise = NormalStream(self._noise_rng)
        self.drift = GaussMarkov(params.drift_tau_s, params.drift_std_pa, drift_rng,
                                 discretization=params.drift_discretization)
        self.variance_pa2 = params.noise_std_pa**2 + params.drift_std_pa**2

    def reset(self) -> None:
        """Back to the state of a freshly built model (drift and noise streams rewound)."""
        self._random_start.restore()
        self._noise.restart()
        self.drift.reset()

    def true_pressure(self, up_m: float) -> float:
        return standard_pressure_pa(self.home.altitude + up_m)

    def step(self, dt: float, truth: GroundTruthLike) -> BarometerMeasurement:
        p = self.params
        pressure = self.true_pressure(truth.position[2]) + self.drift.value + self._noise.take(1)[0] * p.noise_std_pa
        self.drift.step(dt)
        return BarometerMeasurement(truth.time_s, float(pressure),
                                    float(pressure_to_altitude(pressure, p.sea_level_pressure_pa)), self.variance_pa2)
