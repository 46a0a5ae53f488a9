"""GPS receiver model: latency, update rate, decaying error estimates, consistent noise.

AirSim paper (Shah et al. 2017), sec. 3.4.4, and MSR-TR-2017-9 sec. 3.4.4: a
fix reports where the antenna was ``latency_s`` (200 ms) ago, at a slower update
rate (50 Hz in the paper); the receiver's horizontal and vertical error
estimates (eph, epv) decay from their initial to their final values through
first-order low-pass filters, simulating the fix improving,

    eph(t) = eph_final + (eph_initial - eph_final) exp(-t / tau_h)   (same for epv),

the fix type follows eph (3D below ``fix_3d_max_eph_m``, 2D below
``fix_2d_max_eph_m``, as AirLib's GpsSimple), and velocity is reported in the
horizontal plane only.

Beyond AirSim (which reports the true position): the position error is drawn
to match the estimates, ``e = (eph e_x, eph e_y, epv e_z)`` with ``e_*`` unit-variance
Gauss-Markov processes of time constant ``position_error_tau_s`` (0 = white), so
``eph``/``epv`` are honest 1-sigma per-axis figures and the NavSatFix covariance
``diag(eph^2, eph^2, epv^2)`` describes the actual error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from aerial_sim.config import require, require_non_negative, require_positive
from aerial_sim.environment.geodesy import HomePoint, enu_to_geodetic
from aerial_sim.physics.rotation import cross, rotate  # on 3-vectors far faster than NumPy's (np.cross: 12 us a call)
from aerial_sim.sensors.filters import DelayLine, FirstOrderFilter
from aerial_sim.sensors.mounting import Mount
from aerial_sim.sensors.noise import GaussMarkov, NormalStream, RandomCheckpoint, sensor_rng
from aerial_sim.sensors.params import check_rate_and_seed
from aerial_sim.sensors.truth import GroundTruthLike

FIX_NONE, FIX_2D, FIX_3D = 0, 2, 3


@dataclass(frozen=True)
class GpsParams:
    """GPS timing and error figures. Defaults: the AirSim paper / AirLib's GpsSimpleParams."""

    rate_hz: float = 50.0
    seed: int = 0
    latency_s: float = 0.2
    #: Error estimates (1-sigma per axis, m) at the first sample and after the fix settles.
    eph_initial_m: float = 100.0
    epv_initial_m: float = 100.0
    eph_final_m: float = 0.1
    epv_final_m: float = 0.1
    #: Time constants of the first-order decay (s).
    eph_tau_s: float = 0.9
    epv_tau_s: float = 0.9
    #: Fix type from eph (m): 3D at or below the first, 2D at or below the second, else no fix.
    fix_3d_max_eph_m: float = 3.0
    fix_2d_max_eph_m: float = 4.0
    #: Correlation time of the position error (s); 0 = white from fix to fix.
    position_error_tau_s: float = 5.0
    #: Horizontal velocity noise, per axis (m/s).
    velocity_noise_std_m_s: float = 0.05
    #: Antenna position (lever arm) in base_link.
    mount: Mount = field(default_factory=Mount)

    def __post_init__(self):
        check_rate_and_seed(self)
        require_non_negative(self, "latency_s", "position_error_tau_s", "velocity_noise_std_m_s")
        require_positive(self, "eph_initial_m", "epv_initial_m", "eph_final_m", "epv_final_m", "eph_tau_s", "epv_tau_s")
        require(self.fix_3d_max_eph_m <= self.fix_2d_max_eph_m, "fix_3d_max_eph_m cannot exceed fix_2d_max_eph_m")


class GpsFix(NamedTuple):
    """One fix as the receiver delivers it: ``time_s`` = when it is output (measured ``latency_s`` earlier)."""

    time_s: float
    measured_at_s: float
    latitude_deg: float
    longitude_deg: float
    altitude_m: float
    #: ENU velocity (m/s), up component always 0 (horizontal only).
    velocity_enu: tuple[float, float, float]
    eph_m: float
    epv_m: float
    fix_type: int


class Gps:
    """GPS receiver (see the module docstring). ``step`` returns the fixes due by the sample's time."""

    def __init__(self, params: GpsParams = GpsParams(), home: HomePoint = HomePoint(), rng: np.random.Generator | None = None):
        self.params = params
        self.home = home
        rng = rng if rng is not None else sensor_rng(params.seed, "gps")
        error_rng, self._velocity_rng = rng.spawn(2)
        self._error_rng = error_rng
        self._random_start = RandomCheckpoint(error_rng, self._velocity_rng)
        self._velocity_noise = NormalStream(self._velocity_rng)
        self._error = None if params.position_error_tau_s == 0 else GaussMarkov(params.position_error_tau_s, 1.0, error_rng, shape=(3,))
        self.eph = FirstOrderFilter(params.eph_tau_s, params.eph_initial_m)
        self.epv = FirstOrderFilter(params.epv_tau_s, params.epv_initial_m)
        self.delay = DelayLine(params.latency_s)
        self._offset = tuple(float(x) for x in params.mount.position_m)
        self._started = False

    def reset(self) -> None:
        """Back to the state of a freshly built model (filters, delay line and noise streams)."""
        self._random_start.restore()
        self._velocity_noise.restart()
        self.eph.reset()
        self.epv.reset()
        self.delay.reset()
        if self._error is not None:
            self._error.reset()
        self._started = False

    def fix_type(self, eph_m: float) -> int:
        if eph_m <= self.params.fix_3d_max_eph_m:
            return FIX_3D
        return FIX_2D if eph_m <= self.params.fix_2d_max_eph_m else FIX_NONE

    def step(self, dt: float, truth: GroundTruthLike) -> list[GpsFix]:
        p = self.params
        if self._started:  # the first fix carries the initial estimates
            self.eph.step(dt, p.eph_final_m)
            self.epv.step(dt, p.epv_final_m)
            unit_error = self._error.step(dt) if self._error is not None else self._error_rng.standard_normal(3).tolist()
        else:
            unit_error = self._error.value if self._error is not None else self._error_rng.standard_normal(3).tolist()
            self._started = True
        eph, epv = self.eph.value, self.epv.value
        # In plain floats: on 3-vectors NumPy's per-call overhead was most of a fix's cost.
        lever = rotate(truth.orientation, self._offset)  # antenna - body origin, ENU
        lever_velocity = rotate(truth.orientation, cross(truth.angular_velocity_body, self._offset))
        ux, uy, uz = unit_error  # plain floats (GaussMarkov keeps a 3-vector in floats)
        (px, py, pz), (vx, vy, _) = truth.position, truth.velocity_world
        lat, lon, alt = enu_to_geodetic(px + lever[0] + ux * eph, py + lever[1] + uy * eph, pz + lever[2] + uz * epv,
                                        self.home)
        nx, ny = (n * p.velocity_noise_std_m_s for n in self._velocity_noise.take(2))
        fix = GpsFix(truth.time_s + p.latency_s, truth.time_s, lat, lon, alt,
                     (vx + lever_velocity[0] + nx, vy + lever_velocity[1] + ny, 0.0), float(eph), float(epv),
                     self.fix_type(eph))
        self.delay.push(truth.time_s, fix)
        return [item for _, item in self.delay.pop_ready(truth.time_s)]
