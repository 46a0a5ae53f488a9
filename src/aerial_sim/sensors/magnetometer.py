"""Magnetometer model: Earth's field in the sensor frame + fixed bias + white noise.

AirSim paper (Shah et al. 2017), sec. 3.4.3, and MSR-TR-2017-9 sec. 3.4.3: the
field at the vehicle's geodetic position (tilted dipole of sec. 3.2.2, or the
WMM, :mod:`aerial_sim.environment.magnetic`) is rotated into the body frame,
then into ``mag_link``; a fixed bias and Gaussian white noise from the datasheet
are added:

    m_out = R_mount^T R^T B_enu(lat, lon, alt) + b + eta,   eta ~ N(0, sigma^2 I)

with ``R`` the body->world rotation. Output in tesla (sensor_msgs/MagneticField).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from aerial_sim.config import require_non_negative
from aerial_sim.environment.geodesy import HomePoint, enu_to_geodetic
from aerial_sim.environment.magnetic import MagneticField, MagneticFieldParams
from aerial_sim.physics.rotation import rotate_inverse
from aerial_sim.sensors.mounting import Mount, in_sensor_frame
from aerial_sim.sensors.noise import NormalStream, RandomCheckpoint, sensor_rng
from aerial_sim.sensors.params import check_rate_and_seed
from aerial_sim.sensors.truth import GroundTruthLike


@dataclass(frozen=True)
class MagnetometerParams:
    """Magnetometer rate, noise and field model. Defaults: Honeywell HMC5883L datasheet."""

    rate_hz: float = 50.0
    seed: int = 0
    #: White noise standard deviation per axis (T): noise floor 2 mG (HMC5883L datasheet) = 2e-7 T.
    noise_std_t: float = 2e-7
    #: Fixed (hard-iron) bias in mag_link (T); zero = calibrated.
    bias_t: tuple[float, float, float] = (0.0, 0.0, 0.0)
    mount: Mount = field(default_factory=Mount)
    field: MagneticFieldParams = field(default_factory=MagneticFieldParams)

    def __post_init__(self):
        check_rate_and_seed(self)
        require_non_negative(self, "noise_std_t")


class MagnetometerMeasurement(NamedTuple):
    """One sample in ``mag_link`` (a named tuple: immutable, and cheap to make per sample)."""

    time_s: float
    magnetic_field_t: tuple[float, float, float]
    variance_t2: float


class Magnetometer:
    """Three-axis magnetometer (see the module docstring)."""

    def __init__(self, params: MagnetometerParams = MagnetometerParams(), home: HomePoint = HomePoint(),
                 rng: np.random.Generator | None = None):
        self.params = params
        self.home = home
        self.rng = rng if rng is not None else sensor_rng(params.seed, "magnetometer")
        self._random_start = RandomCheckpoint(self.rng)
        self._normals = NormalStream(self.rng)
        self.field = MagneticField(params.field)
        self._to_sensor_rows = params.mount.rotation.T.tolist()
        self._bias = tuple(float(b) for b in params.bias_t)

    def reset(self) -> None:
        """Back to the state of a freshly built model (the noise stream rewound)."""
        self._random_start.restore()
        self._normals.restart()

    def true_field_enu(self, position_enu) -> np.ndarray:
        return np.asarray(self._field_enu(position_enu))

    def _field_enu(self, position_enu) -> tuple[float, float, float]:
        lat, lon, alt = enu_to_geodetic(*position_enu, self.home)
        return self.field.enu(lat, lon, alt)

    def step(self, dt: float, truth: GroundTruthLike) -> MagnetometerMeasurement:
        world = self._field_enu(truth.position)
        body = rotate_inverse(truth.orientation, world)
        std = self.params.noise_std_t
        noise = [n * std for n in self._normals.take(3)]
        measured = in_sensor_frame(self._to_sensor_rows, body, self._bias, noise)
        return MagnetometerMeasurement(truth.time_s, measured, self.params.noise_std_t**2)
