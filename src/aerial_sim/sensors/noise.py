"""The random processes the sensor models draw from (AirSim paper sec. 3.4), each from a seeded generator.

- :func:`sensor_rng`: one sensor's generator, from the seed and the sensor's name;
- :class:`RandomCheckpoint`: rewinds generators, so a reset model replays its random numbers;
- :class:`GaussMarkov`, :class:`RandomWalk`: drifting biases;
- :class:`NormalStream`: a generator's normal draws taken a block at a time.
"""

from __future__ import annotations

import copy
import math
import zlib
from typing import Literal

import numpy as np

def sensor_rng(seed: int, sensor: str) -> np.random.Generator:
    """The generator of one sensor model: seeded by ``seed`` and the sensor's name.

    Mixing in the name keeps the IMU and the barometer of one launch (same
    ``seed`` argument) from drawing correlated noise.
    """
    return np.random.default_rng([seed, zlib.crc32(sensor.encode())])


class RandomCheckpoint:
    """Saved states of a model's random generators, to rewind them.

    A model takes the checkpoint right after creating its generators and
    restores it in ``reset()``, so a reset model replays exactly the random
    numbers of a freshly built one: the same seed and the same inputs give the
    same samples, also after the simulation restarts.
    """

    def __init__(self, *generators: np.random.Generator):
        self._saved = [(generator, copy.deepcopy(generator.bit_generator.state)) for generator in generators]

    def restore(self) -> None:
        for generator, state in self._saved:
            generator.bit_generator.state = copy.deepcopy(state)


class GaussMarkov:
    """First-order Gauss-Markov (Ornstein-Uhlenbeck) process: a bias that drifts and returns.

    ``discretization='exact'`` (default): ``b_{k+1} = w b_k + sqrt(1 - w^2) eta``,
    ``w = exp(-dt / tau)``, ``eta ~ N(0, sigma^2)``: the stationary standard
    deviation is ``sigma`` and the autocorrelation ``exp(-|lag| / tau)`` whatever dt is.

    ``discretization='paper'``: ``b_{k+1} = w b_k + (1 - w) eta``, the form printed in
    the AirSim paper (Shah et al. 2017, sec. 3.4.1) and used by AirLib's
    GaussianMarkov. Its stationary standard deviation is only
    ``sigma sqrt((1 - w) / (1 + w))`` (about ``sigma sqrt(dt / 2 tau)``: 0.2 % of sigma
    at 50 Hz with tau = 1 h), so the configured drift would never show; kept to
    reproduce AirSim exactly.

    The process starts from a draw of its stationary distribution (``exact``) or
    from zero (``paper``). ``shape`` gives independent processes in one array.
    A scalar process (``shape=()``, ``value`` a float) or a short vector of up to
    :data:`FLOAT_SIZE` (``value`` a tuple of floats) is kept in plain floats with its
    draws taken a block at a time (:class:`NormalStream`): the same numbers as NumPy
    on arrays, for a fraction of the per-call cost. :meth:`reset` starts from the
    generator's state as it is, so rewind the generator first for a replay.
    """

    #: Largest vector kept in plain floats (a GPS's three axes); larger shapes stay NumPy arrays.
    FLOAT_SIZE = 8

    def __init__(self, tau_s: float, sigma: float, rng: np.random.Generator, shape: tuple[int, ...] = (),
                 discretization: Literal["exact", "paper"] = "exact"):
        self.tau_s = tau_s
        self.sigma = sigma
        self.rng = rng
        self.shape = shape
        self.discretization = discretization
        self._floats = len(shape) == 0 or (len(shape) == 1 and shape[0] <= self.FLOAT_SIZE)
        self._normals = NormalStream(rng)
        self.reset()

    def reset(self) -> None:
        self._normals.restart()
        exact = self.discretization == "exact"
        if not self._floats:
            self.value = self.rng.standard_normal(self.shape) * self.sigma if exact else np.zeros(self.shape)
        elif not self.shape:
            self.value = self._normals.take(1)[0] * self.sigma if exact else 0.0
        else:
            sigma = self.sigma
            self.value = tuple(n * sigma for n in self._normals.take(self.shape[0])) if exact else (0.0,) * self.shape[0]

    def step(self, dt: float):
        w = math.exp(-dt / self.tau_s)
        gain = math.sqrt(max(0.0, 1.0 - w * w)) if self.discretization == "exact" else 1.0 - w
        sigma = self.sigma
        if not self._floats:
            self.value = w * self.value + gain * (self.rng.standard_normal(self.shape) * sigma)
        elif not self.shape:
            self.value = w * self.value + gain * (self._normals.take(1)[0] * sigma)
        else:
            self.value = tuple(w * b + gain * (n * sigma) for b, n in zip(self.value, self._normals.take(self.shape[0])))
        return self.value


class NormalStream:
    """A generator's standard normal draws, taken a block at a time and handed out as plain floats.

    The same values in the same order as drawing each alone (NumPy fills an array from the bit
    stream element by element; ``test/test_sensors_common.py`` checks it), for a fraction of the
    cost: ``rng.standard_normal(3)`` costs about 2 us here, and at 100 vehicles the IMUs alone drew
    80,000 times a second. Call :meth:`restart` after rewinding the generator (:class:`RandomCheckpoint`).
    """

    BLOCK = 1024

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.restart()

    def restart(self) -> None:
        self._values: list[float] = []
        self._next = 0

    def take(self, count: int) -> list[float]:
        """The next ``count`` draws."""
        if self._next + count > len(self._values):
            self._values = self._values[self._next:] + self.rng.standard_normal(max(self.BLOCK, count)).tolist()
            self._next = 0
        start = self._next
        self._next += count
        return self._values[start:self._next]


class RandomWalk:
    """Bias random walk of the AirSim paper (sec. 3.4.2): ``b_t = b_{t-1} + eta_b``,
    ``eta_b ~ N(0, b0 sqrt(dt / t_a))`` (b0: bias stability, t_a: its time constant).

    Three axes in plain floats (``value`` is a tuple): NumPy on a 3-vector cost more than the sum."""

    def __init__(self, bias_stability: float, tau_s: float, rng: np.random.Generator, initial=(0.0, 0.0, 0.0)):
        self.scale = bias_stability / math.sqrt(tau_s)
        self.normals = NormalStream(rng)
        self.initial = tuple(float(v) for v in initial)
        self.reset()

    def reset(self) -> None:
        """Back to the initial bias; the caller rewinds the generator first (if it does)."""
        self.normals.restart()
        self.value = self.initial

    def step(self, dt: float) -> tuple[float, ...]:
        step = self.scale * math.sqrt(dt)
        if len(self.value) == 3:  # the IMU's axes, unrolled: 1.5 us a step less than the generator expression
            (x, y, z), (nx, ny, nz) = self.value, self.normals.take(3)
            self.value = (x + nx * step, y + ny * step, z + nz * step)
        else:
            self.value = tuple(b + n * step for b, n in zip(self.value, self.normals.take(len(self.value))))
        return self.value
