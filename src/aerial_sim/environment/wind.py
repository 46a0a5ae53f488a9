"""Wind field: mean wind with height (shear), discrete 1-cos gusts and Dryden or von Kármán turbulence, for a fleet.

One :class:`WindField` serves every vehicle of a world: :meth:`WindField.step`
takes all vehicles' positions (and velocities) as arrays and returns the wind
each one feels, ENU m/s, as the sum of

- **mean wind with shear**: the mean wind ``mean_enu_m_s`` (settable at run
  time: :meth:`WindField.set_mean`, what ``/physics/wind`` and AirSim's
  ``simSetWind`` do) holds at ``reference_height_m``; its horizontal part scales
  with the height ``h`` above the ground (``z`` of ``map``, the ground being
  ``z = 0``) by the power law ``(h / h_ref)^alpha`` (``shear: power_law``,
  alpha = 1/7 for open country, Peterson & Hennessey, J. Appl. Meteor. 1978) or
  the log law ``ln(h / z0) / ln(h_ref / z0)`` (``shear: log_law``: MIL-F-8785C
  sec. 3.7.2.1, z0 = 0.15 ft = 0.046 m for a runway and flight phase C, 2 ft
  otherwise), zero at and below ``z0`` (log law) or the ground (power law);
  ``shear: none`` keeps it the same at every height. The vertical part is not sheared.
- **discrete gusts** (``gusts``): each the "1 - cosine" shape of MIL-F-8785C
  sec. 3.7.4 in time, the same for every vehicle (a gust front over the whole
  field): ``A/2 (1 - cos(pi t / rise_s))`` while rising, ``A`` for ``hold_s``,
  then ``A/2 (1 + cos(pi t / fall_s))`` back to zero; with ``hold_s = 0`` and
  ``fall_s = rise_s`` it is the full 1 - cos gust ``A/2 (1 - cos(2 pi t / T))``,
  ``T = 2 rise_s``.
- **Dryden turbulence** (``turbulence``: none, light, moderate, severe), the
  MIL-F-8785C forms (sec. 3.7.2; also MIL-HDBK-1797 with its L_v = L_u, L_w = h
  variant of the scale lengths): spectra, one-sided in omega (rad/s), with
  tau = L / V (V the vehicle's speed through the air, Taylor's frozen turbulence)::

      Phi_u(omega) = sigma_u^2 (2 L_u / (pi V)) / (1 + (L_u omega / V)^2)
      Phi_v(omega) = sigma_v^2 (L_v / (pi V)) (1 + 3 (L_v omega / V)^2) / (1 + (L_v omega / V)^2)^2

  and Phi_w as Phi_v with L_w, sigma_w. Below 1000 ft (the low-altitude model,
  axes: u along the horizontal mean wind, v across it, w up): L_w = h,
  L_u = L_v = h / (0.177 + 0.000823 h)^1.2, sigma_w = 0.1 W20,
  sigma_u = sigma_v = sigma_w / (0.177 + 0.000823 h)^0.4 (h in ft, at least
  10 ft), with the wind at 20 ft W20 = 15, 30, 45 knots for light, moderate,
  severe. Above 2000 ft: L = 1750 ft and sigma_u = sigma_v = sigma_w from the
  probability-of-exceedance table of MIL-F-8785C fig. 7 (1e-2, 1e-3, 1e-5 for
  light, moderate, severe); between the two, linear in height. Each vehicle
  draws its own turbulence (no correlation between vehicles; its statistics
  follow its own height and air speed).

  The shaping filters are discretised exactly for each step ``dt`` (the
  variances of the sampled process are those of the continuous one at any
  ``dt``): u is the Ornstein-Uhlenbeck process u' = -(u - sigma_u sqrt(2 tau)
  xi) / tau; v and w are ``sigma sqrt(tau) (1 + sqrt(3) tau s) / (1 + tau s)^2``
  of unit white noise, a double pole, advanced with its Jordan-block transition
  and the exact covariance of the noise it collects over ``dt`` (incomplete
  gamma integrals). V is the vehicle's air speed ``|v - mean wind|``, at least
  ``min_airspeed_m_s`` (a vehicle hovering in still air would otherwise see
  frozen turbulence that never changes).

- **von Kármán turbulence** (``turbulence_model: von_karman``; the same
  intensities, scale lengths and axes as Dryden): the MIL-F-8785C sec. 3.7.2 /
  MIL-HDBK-1797 forms::

      Phi_u(omega) = sigma_u^2 (2 L_u / (pi V)) / (1 + (1.339 L_u omega / V)^2)^(5/6)
      Phi_v(omega) = sigma_v^2 (L_v / (pi V)) (1 + 8/3 (1.339 L_v omega / V)^2) / (1 + (1.339 L_v omega / V)^2)^(11/6)

  (MIL-HDBK-1797 writes the lateral form with 2 L_v and 2.678; with its
  L_v = L_u / 2, L_w = h / 2 it is this one.) Their spectra fall as
  omega^(-5/3), which no finite filter gives, so the shaping filters are
  rational approximations: ``sigma sqrt(2 tau) G_u(tau s)`` and
  ``sigma sqrt(tau) G_v(tau s)`` with ``G = prod(1 + p / z_j) / prod(1 + p / p_k)``,
  nine real poles and eight real zeros each (:data:`VON_KARMAN_U` and
  :data:`VON_KARMAN_V`, fitted for this module: least squares on the log
  magnitude over tau omega from 1e-3 to 2e4, reweighted towards the largest
  error). Their |G|^2 is within 0.6 % (u) and 0.9 % (v, w) of the forms over that
  range, seven decades: at 10 m/s, L_u = 67 m, that is 0.00002-470 Hz; above it
  they fall as omega^-2 like Dryden's. MIL-HDBK-1797's own second- and
  third-order approximations are off by up to 74 % in the omega^(-5/3) tail,
  which a drone at 100 m (tau omega ~ 100 at 0.5 Hz) samples. The filter is
  a sum of first-order modes driven by one white noise (partial fractions), in
  time scaled by tau: each mode decays by ``exp(-p_k dt / tau)`` and the noise it
  collects has the exact covariance ``(1 - exp(-(p_i + p_j) dt / tau)) / (p_i + p_j)``,
  so the sampled variances are the continuous ones at any step, as for Dryden.

Every random draw comes from ``numpy.random.Generator`` seeded with ``seed``: the
same seed, fleet and steps give the same series bit for bit; :meth:`WindField.reset`
starts the series over.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from aerial_sim.config import ParamsError, require, require_non_negative, require_positive

FOOT_M = 0.3048
KNOT_M_S = 1852.0 / 3600.0

#: Wind speed at 20 ft (knots) of MIL-F-8785C's low-altitude model per turbulence level.
W20_KNOTS = {"none": 0.0, "light": 15.0, "moderate": 30.0, "severe": 45.0}
#: MIL-F-8785C fig. 7, medium/high altitude: altitudes (ft) and sigma (ft/s) at the probabilities of
#: exceedance 1e-2 (light), 1e-3 (moderate) and 1e-5 (severe).
HIGH_ALTITUDES_FT = (500.0, 1750.0, 3750.0, 7500.0, 15000.0, 25000.0, 35000.0, 45000.0, 55000.0, 65000.0,
                     75000.0, 80000.0)  # fmt: skip
HIGH_ALTITUDE_SIGMA_FT_S = {
    "light": (6.6, 6.9, 7.4, 6.7, 4.6, 2.7, 0.4, 0.0, 0.0, 0.0, 0.0, 0.0),
    "moderate": (8.6, 9.6, 10.6, 10.1, 8.0, 6.6, 5.0, 4.2, 2.7, 0.0, 0.0, 0.0),
    "severe": (15.6, 17.6, 23.0, 23.6, 22.1, 20.0, 16.0, 15.1, 12.1, 7.9, 6.2, 5.1),
}
#: von Kármán shaping filters (module docstring): real poles and zeros of G(tau s), in units of 1 / tau.
VON_KARMAN_U = {
    "poles": (0.779677, 1.71251, 5.51458, 19.6318, 71.6356, 263.207, 973.71, 3685.84, 16542.6),
    "zeros": (1.44254, 4.48998, 15.8451, 57.6968, 211.813, 782.33, 2941.64, 12394.8),
}
VON_KARMAN_V = {
    "poles": (0.621837, 0.991792, 3.33738, 12.0206, 46.1377, 182.733, 738.491, 3068.14, 14855.2),
    "zeros": (0.443609, 2.71825, 9.65557, 36.7699, 145.06, 584.301, 2411.71, 11022.4),
}
LOW_ALTITUDE_FT = 1000.0
HIGH_ALTITUDE_FT = 2000.0
HIGH_ALTITUDE_SCALE_FT = 1750.0
MIN_HEIGHT_FT = 10.0


@dataclass(frozen=True)
class GustParams:
    """One discrete gust (module docstring): starts at ``start_s`` (sim time), rises, holds, falls."""

    start_s: float = 0.0
    rise_s: float = 1.0
    hold_s: float = 0.0
    fall_s: float = 1.0
    amplitude_enu_m_s: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def __post_init__(self):
        require(math.isfinite(self.start_s), f"start_s must be a finite time, got {self.start_s!r}")
        require_positive(self, "rise_s", "fall_s")
        require_non_negative(self, "hold_s")
        require(all(math.isfinite(a) for a in self.amplitude_enu_m_s),
                f"amplitude_enu_m_s must be 3 finite values, got {self.amplitude_enu_m_s!r}")  # fmt: skip

    def speed(self, time_s: np.ndarray | float) -> np.ndarray:
        """The gust's shape factor in [0, 1] at ``time_s`` (multiply by the amplitude)."""
        t = np.asarray(time_s, float) - self.start_s
        rising = 0.5 * (1.0 - np.cos(np.pi * np.clip(t, 0.0, self.rise_s) / self.rise_s))
        falling_t = np.clip(t - self.rise_s - self.hold_s, 0.0, self.fall_s)
        falling = 0.5 * (1.0 + np.cos(np.pi * falling_t / self.fall_s))
        return np.where(t < 0, 0.0, np.where(t <= self.rise_s + self.hold_s, rising, falling))


@dataclass(frozen=True)
class WindParams:
    """Mean wind, shear, gusts and turbulence of a :class:`WindField` (module docstring)."""

    #: Mean wind at ``reference_height_m`` (ENU, m/s); run time: ``set_mean``.
    mean_enu_m_s: tuple[float, float, float] = (0.0, 0.0, 0.0)
    shear: Literal["none", "power_law", "log_law"] = "none"
    #: Height at which the mean wind is ``mean_enu_m_s``, m (20 ft: MIL-F-8785C's W20).
    reference_height_m: float = 6.096
    #: Power-law exponent (1/7: open country).
    power_law_exponent: float = 1.0 / 7.0
    #: Log-law roughness length, m (0.15 ft: MIL-F-8785C, flight phase C).
    roughness_length_m: float = 0.0457
    turbulence: Literal["none", "light", "moderate", "severe"] = "none"
    #: Spectral form of the turbulence: ``dryden`` or ``von_karman`` (module docstring).
    turbulence_model: Literal["dryden", "von_karman"] = "dryden"
    #: Floor of the air speed V that sets the turbulence's time scale L / V, m/s.
    min_airspeed_m_s: float = 1.0
    gusts: tuple[GustParams, ...] = ()
    seed: int = 0
    #: How often a physics world samples the field (s of sim time); the wind is held in between.
    #: 0.02 s (50 Hz) resolves the turbulence (its spectrum falls off above V / (2 pi L), under 1 Hz
    #: for L_w >= 10 ft at 20 m/s) and gusts of 0.1 s and longer.
    update_period_s: float = 0.02

    def __post_init__(self):
        require(len(self.mean_enu_m_s) == 3 and all(math.isfinite(v) for v in self.mean_enu_m_s),
                f"mean_enu_m_s must be 3 finite values (ENU, m/s), got {self.mean_enu_m_s!r}")  # fmt: skip
        require_positive(self, "reference_height_m", "power_law_exponent", "roughness_length_m", "min_airspeed_m_s",
                         "update_period_s")
        require(self.roughness_length_m < self.reference_height_m,
                f"roughness_length_m ({self.roughness_length_m}) must be below reference_height_m "
                f"({self.reference_height_m})")  # fmt: skip
        require(isinstance(self.seed, int) and self.seed >= 0, f"seed must be an integer >= 0, got {self.seed!r}")
        require(self.turbulence_model in ("dryden", "von_karman"),
                f"turbulence_model must be 'dryden' or 'von_karman', got {self.turbulence_model!r}")


def turbulence_scales(turbulence: str, height_m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(L_u = L_v, L_w, sigma_u = sigma_v, sigma_w) in m and m/s at ``height_m`` (MIL-F-8785C, module docstring)."""
    h_ft = np.maximum(np.asarray(height_m, float) / FOOT_M, MIN_HEIGHT_FT)
    low_h = np.minimum(h_ft, LOW_ALTITUDE_FT)
    factor = 0.177 + 0.000823 * low_h
    low_lu, low_lw = low_h / factor**1.2, low_h
    low_sw = 0.1 * W20_KNOTS[turbulence] * KNOT_M_S / FOOT_M  # ft/s
    low_su = low_sw / factor**0.4
    if np.all(h_ft <= LOW_ALTITUDE_FT):  # every vehicle in the low-altitude model (a drone's usual case)
        return low_lu * FOOT_M, low_lw * FOOT_M, low_su * FOOT_M, np.full_like(h_ft, low_sw * FOOT_M)
    if turbulence == "none":
        high_sigma = np.zeros_like(h_ft)
    else:
        high_sigma = np.interp(np.maximum(h_ft, HIGH_ALTITUDE_FT), HIGH_ALTITUDES_FT, HIGH_ALTITUDE_SIGMA_FT_S[turbulence])
    blend = np.clip((h_ft - LOW_ALTITUDE_FT) / (HIGH_ALTITUDE_FT - LOW_ALTITUDE_FT), 0.0, 1.0)
    lu = (1 - blend) * low_lu + blend * HIGH_ALTITUDE_SCALE_FT
    lw = (1 - blend) * low_lw + blend * HIGH_ALTITUDE_SCALE_FT
    su = (1 - blend) * low_su + blend * high_sigma
    sw = (1 - blend) * low_sw + blend * high_sigma
    return lu * FOOT_M, lw * FOOT_M, su * FOOT_M, sw * FOOT_M


def dryden_psd(kind: Literal["longitudinal", "lateral"], frequency_hz, sigma, scale_m, airspeed_m_s) -> np.ndarray:
    """One-sided PSD in (m/s)^2 / Hz of a Dryden component (``longitudinal``: u; ``lateral``: v and w)."""
    omega = 2 * np.pi * np.asarray(frequency_hz, float)
    tau = scale_m / airspeed_m_s
    x = (tau * omega) ** 2
    if kind == "longitudinal":
        phi = sigma**2 * 2 * tau / np.pi / (1 + x)
    else:
        phi = sigma**2 * tau / np.pi * (1 + 3 * x) / (1 + x) ** 2
    return 2 * np.pi * phi  # Phi(omega) d omega = P(f) df


def von_karman_psd(kind: Literal["longitudinal", "lateral"], frequency_hz, sigma, scale_m, airspeed_m_s) -> np.ndarray:
    """One-sided PSD in (m/s)^2 / Hz of a von Kármán component (``longitudinal``: u; ``lateral``: v and w)."""
    omega = 2 * np.pi * np.asarray(frequency_hz, float)
    tau = scale_m / airspeed_m_s
    x = (1.339 * tau * omega) ** 2
    if kind == "longitudinal":
        phi = sigma**2 * 2 * tau / np.pi / (1 + x) ** (5 / 6)
    else:
        phi = sigma**2 * tau / np.pi * (1 + 8 / 3 * x) / (1 + x) ** (11 / 6)
    return 2 * np.pi * phi


class RationalShapingFilter:
    """``G(tau s) = prod(1 + tau s / z_j) / prod(1 + tau s / p_k)`` driven by unit white noise, as a sum of
    first-order modes in time scaled by ``tau`` (module docstring: von Kármán), advanced exactly."""

    def __init__(self, poles, zeros):
        self.poles = np.array(poles, float)
        zeros = np.array(zeros, float)
        p = self.poles
        # partial fractions: G = sum r_k / (1 + tau s / p_k), r_k = prod_j (1 - p_k / z_j) / prod_m!=k (1 - p_k / p_m)
        others = 1 - p[:, None] / np.where(np.eye(len(p), dtype=bool), np.nan, p[None, :])
        self.residues = np.prod(1 - p[:, None] / zeros[None, :], axis=1) / np.nanprod(others, axis=1)
        #: y = sum_k r_k p_k m_k for the modes m_k' = -p_k m_k + white noise (scaled time)
        self.output = self.residues * p
        self._sum = p[:, None] + p[None, :]
        stationary = 1 / self._sum  # covariance of the modes in steady state
        self.stationary_root = _psd_root(stationary)
        self._last_h = self._decay = self._root = None

    def gain_squared(self, tau_omega) -> np.ndarray:
        """|G(i tau omega)|^2."""
        s = 1j * np.asarray(tau_omega, float)[..., None]
        g = np.sum(self.residues / (1 + s / self.poles), axis=-1)
        return np.abs(g) ** 2

    def variance(self) -> float:
        """Variance of the output in steady state (1 for the exact forms; the fit's own is close)."""
        return float(self.output @ (1 / self._sum) @ self.output)

    def advance(self, modes: np.ndarray, h: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """``modes`` (..., n) after a step ``h = dt / tau`` (...,), with standard normal ``noise`` (..., n)."""
        if self._last_h is None or self._last_h.shape != h.shape or not np.array_equal(self._last_h, h):
            # (the same steps again, a hover at the air speed floor or in steady wind: the same roots)
            covariance = -np.expm1(-self._sum * h[..., None, None]) / self._sum
            self._last_h, self._decay, self._root = h.copy(), np.exp(-self.poles * h[..., None]), _psd_root(covariance)
        return self._decay * modes + (self._root @ noise[..., None])[..., 0]


#: Added to each mode's noise variance, relative to the largest, before the Cholesky factorisation: over a
#: short step every mode collects nearly the same noise and the covariance is singular to working precision
#: (eigenvalues down to h^17); 1e-13 bounds its condition number, and adds that much variance.
ROOT_JITTER = 1e-13


def _psd_root(covariance: np.ndarray) -> np.ndarray:
    """A square root ``S`` with ``S S^T = covariance`` of symmetric positive semi-definite matrices (...,n,n):
    Cholesky with :data:`ROOT_JITTER` (50 times faster than an eigen-decomposition), else the latter."""
    scale = np.einsum("...ii->...i", covariance).max(axis=-1)[..., None, None]
    try:
        return np.linalg.cholesky(covariance + ROOT_JITTER * scale * np.eye(covariance.shape[-1]))
    except np.linalg.LinAlgError:
        values, vectors = np.linalg.eigh(covariance)
        return vectors * np.sqrt(np.maximum(values, 0.0))[..., None, :]




class WindField:
    """The wind every vehicle of a fleet feels at its own position (module docstring)."""

    def __init__(self, params: WindParams, vehicles: int = 1):
        if not isinstance(vehicles, int) or vehicles < 0:
            raise ParamsError(f"vehicles must be an integer >= 0, got {vehicles!r}")
        self.params = params
        self.vehicles = vehicles
        self.mean_enu_m_s = np.array(params.mean_enu_m_s, float)
        self._gust_amplitudes = np.array([g.amplitude_enu_m_s for g in params.gusts], float).reshape(-1, 3)
        self.reset()

    def reset(self) -> None:
        """Start the turbulence over (the same series again from the same seed)."""
        self._rng = np.random.default_rng(self.params.seed)
        self._u = np.zeros(self.vehicles)  # longitudinal state (m/s)
        self._lateral = np.zeros((self.vehicles, 2, 2))  # (vehicle, v/w, Jordan-block state z1/z2)
        #: von Kármán: the filters (each field its own: they keep the last step's noise roots) and their modes
        self._filters = {"u": RationalShapingFilter(**VON_KARMAN_U), "v": RationalShapingFilter(**VON_KARMAN_V)}
        self._modes = {axis: np.zeros((self.vehicles, 1 + (axis == "v"), len(f.poles)))  # u; v and w
                       for axis, f in self._filters.items()}
        self._started = False

    def resize(self, vehicles: int) -> None:
        """Serve ``vehicles`` vehicles (a vehicle added or removed): the turbulence starts over."""
        self.vehicles = int(vehicles)
        self.reset()

    def set_mean(self, mean_enu_m_s) -> None:
        """New mean wind (ENU, m/s, at the reference height) from now on."""
        try:
            mean = np.asarray(mean_enu_m_s, float).reshape(-1)
        except (TypeError, ValueError):
            mean = np.empty(0)
        if mean.shape != (3,) or not np.all(np.isfinite(mean)):
            raise ValueError(f"mean wind needs 3 finite values (ENU, m/s), got {mean_enu_m_s!r}")
        self.mean_enu_m_s = mean

    @property
    def steady(self) -> bool:
        """True when the wind is the same everywhere and at all times (no shear, gusts or turbulence)."""
        p = self.params
        return p.shear == "none" and p.turbulence == "none" and not p.gusts

    def mean_at(self, height_m) -> np.ndarray:
        """Mean wind (N, 3) at heights ``height_m`` above the ground, shear applied to its horizontal part."""
        h = np.atleast_1d(np.asarray(height_m, float))
        p = self.params
        if p.shear == "none":
            factor = np.ones_like(h)
        elif p.shear == "power_law":
            factor = np.power(np.maximum(h, 0.0) / p.reference_height_m, p.power_law_exponent)
        else:
            z0 = p.roughness_length_m
            factor = np.log(np.maximum(h, z0) / z0) / math.log(p.reference_height_m / z0)
        wind = np.empty((len(h), 3))
        wind[:, 0:2] = factor[:, None] * self.mean_enu_m_s[0:2]
        wind[:, 2] = self.mean_enu_m_s[2]
        return wind

    def gust_at(self, time_s: float) -> np.ndarray:
        """Sum of the discrete gusts at ``time_s`` (ENU, m/s), the same for every vehicle."""
        if not self.params.gusts:
            return np.zeros(3)
        shape = np.array([g.speed(time_s) for g in self.params.gusts])
        return shape @ self._gust_amplitudes

    def step(self, time_s: float, dt: float, positions, velocities=None) -> np.ndarray:
        """Advance the turbulence by ``dt`` and return each vehicle's wind (N, 3, ENU m/s) at ``time_s``.

        ``positions`` (N, 3) ENU m; ``velocities`` (N, 3) ENU m/s or None (the air speed is then
        the mean wind's, still at least ``min_airspeed_m_s``).
        """
        positions = np.asarray(positions, float).reshape(-1, 3)
        if len(positions) != self.vehicles:
            raise ValueError(f"expected {self.vehicles} positions, got {len(positions)}")
        wind = self.mean_at(positions[:, 2]) + self.gust_at(time_s)
        if self.params.turbulence != "none" and self.vehicles:
            wind += self._turbulence(positions[:, 2], wind, velocities, dt)
        return wind

    def _turbulence(self, height_m, mean, velocities, dt: float) -> np.ndarray:
        p = self.params
        lu, lw, su, sw = turbulence_scales(p.turbulence, height_m)
        air = -mean if velocities is None else np.asarray(velocities, float).reshape(-1, 3) - mean
        airspeed = np.maximum(np.linalg.norm(air, axis=1), p.min_airspeed_m_s)
        tau = np.stack([lu, lw], 1) / airspeed[:, None]  # (vehicle, v/w)
        if p.turbulence_model == "von_karman":
            u, v, w = self._von_karman(tau, np.broadcast_to(su, airspeed.shape), np.broadcast_to(sw, airspeed.shape), dt)
        else:
            u, v, w = self._dryden(tau, su, sw, dt)
        # low-altitude axes: u along the horizontal mean wind (east when there is none), v to its left, w up
        horizontal = mean[:, 0:2]
        speed = np.linalg.norm(horizontal, axis=1)
        along = np.where(speed[:, None] > 1e-9, horizontal / np.maximum(speed, 1e-9)[:, None], [1.0, 0.0])
        turbulence = np.empty((self.vehicles, 3))
        turbulence[:, 0] = u * along[:, 0] - v * along[:, 1]
        turbulence[:, 1] = u * along[:, 1] + v * along[:, 0]
        turbulence[:, 2] = w
        return turbulence

    def _von_karman(self, tau: np.ndarray, su: np.ndarray, sw: np.ndarray, dt: float):
        """(u, v, w) of the von Kármán filters (module docstring), advanced by ``dt``; ``tau`` (vehicle, v/w)."""
        u_filter, v_filter = self._filters["u"], self._filters["v"]
        u_modes, vw_modes = self._modes["u"], self._modes["v"]
        n = len(u_filter.poles)
        if not self._started:  # start from the stationary distribution, not from calm air
            self._started = True
            noise = self._rng.standard_normal((self.vehicles, 3, n))
            u_modes[:] = noise[:, 0:1] @ u_filter.stationary_root.T
            vw_modes[:] = noise[:, 1:3] @ v_filter.stationary_root.T
        elif dt > 0:  # (the same instant again: the same turbulence)
            noise = self._rng.standard_normal((self.vehicles, 3, n))
            u_modes[:] = u_filter.advance(u_modes, dt / tau[:, 0:1], noise[:, 0:1])  # L_u for u, as for Dryden
            vw_modes[:] = v_filter.advance(vw_modes, dt / tau, noise[:, 1:3])
        u = math.sqrt(2) * su * (u_modes[:, 0] @ u_filter.output)
        v = su * (vw_modes[:, 0] @ v_filter.output)
        w = sw * (vw_modes[:, 1] @ v_filter.output)
        return u, v, w

    def _dryden(self, tau: np.ndarray, su, sw, dt: float):
        """(u, v, w) of the Dryden filters (module docstring), advanced by ``dt``; ``tau`` (vehicle, v/w)."""
        if self._started and not dt > 0:
            noise = None  # the same instant again: the same turbulence
        else:
            noise = self._rng.standard_normal((self.vehicles, 5))
        if not self._started:  # start from the stationary distribution, not from calm air
            self._started = True
            self._u = su * noise[:, 0]
            self._lateral[:] = self._stationary_lateral(tau, noise[:, 1:5])
        elif noise is not None:
            x = 2 * dt / tau[:, 0]  # the u filter's scale length is L_u, as v's
            self._u = np.exp(-0.5 * x) * self._u + su * np.sqrt(-np.expm1(-x)) * noise[:, 0]
            self._advance_lateral(tau, dt, noise[:, 1:5])
        sigma = np.stack(np.broadcast_arrays(su, sw), 1)
        lam = 1.0 / tau
        gain = sigma * np.sqrt(tau) * lam**2
        z1, z2 = self._lateral[:, :, 0], self._lateral[:, :, 1]
        v, w = (gain * ((1 - math.sqrt(3)) * z1 + math.sqrt(3) * tau * z2)).T
        return self._u, v, w

    def _advance_lateral(self, tau: np.ndarray, dt: float, noise: np.ndarray) -> None:
        """z1' = -z1/tau + z2, z2' = -z2/tau + xi, exactly over ``dt`` (Jordan block; module docstring)."""
        lam = 1.0 / tau
        decay = np.exp(-lam * dt)
        z1, z2 = self._lateral[:, :, 0], self._lateral[:, :, 1]
        new_z1 = decay * (z1 + dt * z2)
        new_z2 = decay * z2
        from scipy.special import gammainc  # noqa: PLC0415 - scipy.special costs a node 0.4 CPU s at start; only turbulence needs it

        x = 2 * lam * dt
        i0 = gammainc(1, x) / (2 * lam)  # int_0^dt e^{-2 lam s} ds
        i1 = gammainc(2, x) / (4 * lam**2)  # int s e^{-2 lam s} ds
        i2 = gammainc(3, x) / (4 * lam**3)  # int s^2 e^{-2 lam s} ds
        l11 = np.sqrt(i2)
        l21 = i1 / l11
        l22 = np.sqrt(np.maximum(i0 - l21**2, 0.0))
        n1, n2 = noise[:, 0:2], noise[:, 2:4]
        self._lateral[:, :, 0] = new_z1 + l11 * n1
        self._lateral[:, :, 1] = new_z2 + l21 * n1 + l22 * n2

    @staticmethod
    def _stationary_lateral(tau: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """A draw of (z1, z2) from the stationary distribution of the double pole (the dt -> inf limit)."""
        lam = 1.0 / tau
        i0, i1, i2 = 1 / (2 * lam), 1 / (4 * lam**2), 1 / (4 * lam**3)
        l11 = np.sqrt(i2)
        l21 = i1 / l11
        l22 = np.sqrt(np.maximum(i0 - l21**2, 0.0))
        n1, n2 = noise[:, 0:2], noise[:, 2:4]
        return np.stack([l11 * n1, l21 * n1 + l22 * n2], axis=-1)


def parse_gusts(text: str) -> tuple[GustParams, ...]:
    """Gusts from one string, as a ROS parameter carries them: entries separated by ``;``, each seven numbers
    ``start_s rise_s hold_s fall_s east north up`` (spaces or commas); a bad entry is a ParamsError naming it."""
    gusts = []
    for index, entry in enumerate(e for e in text.split(";") if e.strip()):
        fields = entry.replace(",", " ").split()
        try:
            numbers = [float(f) for f in fields]
        except ValueError:
            numbers = []
        if len(numbers) != 7:
            raise ParamsError(f"gusts[{index}]: expected 7 numbers 'start_s rise_s hold_s fall_s east north up', "
                              f"got {entry.strip()!r}")
        start, rise, hold, fall, *amplitude = numbers
        try:
            gusts.append(GustParams(start, rise, hold, fall, tuple(amplitude)))
        except ParamsError as error:
            raise ParamsError(f"gusts[{index}]: {error}") from None
    return tuple(gusts)
