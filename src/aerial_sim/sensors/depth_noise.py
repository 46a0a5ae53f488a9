"""Stereo-IR depth-camera noise: per-material, distance-dependent Gaussian noise and fill-rate dropouts.

The model of the follow-on paper (seed 004, "depth camera modeling", sec. 2),
identified on an Intel RealSense D435 facing plastic, cement and formboard
walls from 0.5 m to 8 m:

- eq. (4): the depth error is zero-mean Gaussian with standard deviation
  ``std = c * exp(m * d)``, ``c = 0.005 m``, ``d`` the true depth (m) and ``m``
  a per-material coefficient (1/m): plastic 0.85, cement 0.50, formboard 0.55
  (sec. 2.3, Table 1);
- fill-rate error (sec. 2.3): 1 % of the pixels, at random, have no depth (0).

Each pixel's material comes from the segmentation image: a lookup array
indexed by segmentation id gives ``m`` for the whole frame in one gather.

Beyond the paper (each off by default, see :class:`DepthNoiseParams`):

- ``stereo_geometry``: std from the stereo range equation instead of eq. (4).
  Differentiating eq. (2) ``Z = b f / disparity`` gives
  ``sigma_Z = Z**2 * sigma_disparity / (b * f)`` (b baseline in m, f focal
  length in pixels, sigma_disparity the sub-pixel matching noise in pixels);
- ``incidence_enabled``: noise growing with the angle of incidence theta between
  the viewing axis and the surface normal, which is estimated from the depth
  image gradient. The factor ``1 + gain * theta**2 / (pi/2 - theta)**2`` has the
  shape of the angular term of Nguyen, Izadi & Lovell (2012), "Modeling Kinect
  sensor noise for improved 3D reconstruction and tracking" (3DIMPVT), axial model; surfaces
  seen at more than ``max_incidence_deg`` give no return. The paper lists the
  angle of the observed surface as future work (sec. 4.3);
- ``edge_invalidation_enabled``: no return on pixels next to a depth
  discontinuity (a jump larger than ``edge_jump_fraction`` of the depth), where
  stereo matching fails on real cameras (the paper's "edges of detected
  materials", sec. 4.3).

The working range ``[min_range_m, max_range_m]`` (D435: 0.2-10 m) applies to the
true depth and to the noisy reading: a pixel whose true or noisy depth lies
outside it (or is non-finite) gives no return (0), as a real D435 never reports
a depth beyond its range. Where eq. (4)'s std is comparable to the distance to
a range limit (plastic beyond about 6 m: std 0.82 m at 6 m, 4.5 m at 8 m) the
camera therefore reports a normal truncated to the range, on fewer pixels:
at 8 m on plastic 63 % of the pixels return, with std 2.4 m instead of 4.5 m.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from aerial_sim.config import ParamsError, require, require_non_negative, require_positive

#: Material coefficients m (1/m) identified in seed 004, sec. 2.3 / Table 1.
PAPER_MATERIALS: dict[str, float] = {"plastic": 0.85, "cement": 0.50, "formboard": 0.55}
#: Segmentation images are mono16: ids 0..65535.
ID_COUNT = 1 << 16


@dataclass(frozen=True)
class DepthNoiseParams:
    """Parameters of :class:`DepthNoiseModel` (defaults here only; SI units)."""

    seed: int = 0
    #: c of eq. (4), m (seed 004, sec. 2.3).
    noise_coefficient_m: float = 0.005
    #: m (1/m) for segmentation ids missing from the material table: the mean of the
    #: paper's three materials, as the 'default' entry of config/materials.yaml.
    default_material_m: float = 0.63
    #: Fraction of pixels with no depth (seed 004, sec. 2.3: 1 %, citing the D435 datasheet).
    fill_rate_error: float = 0.01
    #: D435 minimum depth at full resolution is about 0.2 m; range ends at 10 m (datasheet).
    min_range_m: float = 0.2
    max_range_m: float = 10.0
    #: Stereo mode: sigma_Z = Z**2 * sigma_disparity / (b f), from eq. (2).
    stereo_geometry: bool = False
    #: D435 baseline 50 mm; focal length of a 460-px-wide image with the D435's
    #: 87 deg horizontal field of view: 230 / tan(43.5 deg) = 242.7 px.
    baseline_m: float = 0.050
    focal_length_px: float = 242.7
    #: Sub-pixel disparity noise (px); 0.08 px is the D435's typical subpixel RMS.
    disparity_std_px: float = 0.08
    #: Angle-of-incidence noise growth (off by default).
    incidence_enabled: bool = False
    incidence_gain: float = 1.0
    max_incidence_deg: float = 80.0
    #: No return next to depth discontinuities (off by default).
    edge_invalidation_enabled: bool = False
    edge_jump_fraction: float = 0.05

    def __post_init__(self):
        # numpy's own refusal of a negative seed ("expected non-negative integer") names no parameter.
        require(isinstance(self.seed, int) and self.seed >= 0, f"seed must be an integer >= 0, got {self.seed!r}")
        require_positive(self, "noise_coefficient_m", "baseline_m", "focal_length_px", "max_range_m")
        require_non_negative(
            self, "default_material_m", "disparity_std_px", "min_range_m", "incidence_gain", "edge_jump_fraction"
        )
        require(0.0 <= self.fill_rate_error < 1.0, f"fill_rate_error must be in [0, 1), got {self.fill_rate_error!r}")
        require(self.min_range_m < self.max_range_m, "min_range_m must be below max_range_m")
        require(0.0 < self.max_incidence_deg < 90.0, "max_incidence_deg must be in (0, 90)")


@dataclass
class FrameBuffers:
    """Work arrays reused from frame to frame (one allocation per image size)."""

    shape: tuple[int, int]
    sigma: np.ndarray = field(init=False)
    invalid: np.ndarray = field(init=False)
    known: np.ndarray = field(init=False)  # unknown_ids' gather

    def __post_init__(self):
        self.sigma = np.empty(self.shape, np.float32)
        self.invalid = np.empty(self.shape, bool)
        self.known = np.empty(self.shape, bool)


class DepthNoiseModel:
    """Turns an ideal depth image (metres, float32) into what a stereo-IR camera delivers.

    ``materials`` maps segmentation id -> material coefficient m (1/m); ids not
    in it use ``params.default_material_m``. ``rng`` defaults to a Generator
    seeded with ``params.seed``.
    """

    def __init__(self, params: DepthNoiseParams, rng: np.random.Generator | None = None,
                 materials: dict[int, float] | None = None):
        self.params = params
        self._rng = rng if rng is not None else np.random.default_rng(params.seed)
        self._seed_rng_given = rng is not None
        self.focal_length_px = params.focal_length_px
        self._material_lut = np.full(ID_COUNT, params.default_material_m, np.float32)
        self._known = np.zeros(ID_COUNT, bool)
        # Id 0 marks pixels where the camera hit nothing (sky): their depth is "no
        # return", so they need no material and are not reported as unknown.
        self._known[0] = True
        for segmentation_id, m in (materials or {}).items():
            self.set_material(segmentation_id, m)
        self._buffers: FrameBuffers | None = None
        #: Smallest depth the camera reports: min_range_m, and never 0 or below (0 means no return).
        self._lowest_reading = np.float32(max(params.min_range_m, np.finfo(np.float32).tiny))

    def reset(self) -> None:
        """Restart the random stream from ``params.seed`` (when the model made its own Generator)."""
        if not self._seed_rng_given:
            self._rng = np.random.default_rng(self.params.seed)

    def set_material(self, segmentation_id: int, m: float) -> None:
        """Use material coefficient ``m`` (1/m) for pixels of ``segmentation_id``."""
        if not 0 <= int(segmentation_id) < ID_COUNT:
            raise ParamsError(f"segmentation id {segmentation_id} is outside 0..{ID_COUNT - 1}")
        if not (math.isfinite(m) and m >= 0.0):
            raise ParamsError(f"material coefficient for id {segmentation_id} must be >= 0, got {m!r}")
        self._material_lut[int(segmentation_id)] = m
        self._known[int(segmentation_id)] = True

    def unknown_ids(self, segmentation: np.ndarray) -> np.ndarray:
        """Segmentation ids in ``segmentation`` that are not in the material table (sorted)."""
        known = np.take(self._known, segmentation, out=self._buffers_for(segmentation.shape).known)
        if known.all():  # every frame but a misconfigured one's: one gather into a kept buffer, no unique
            return np.empty(0, np.uint16)
        return np.unique(segmentation[~known])

    def std_m(self, depth, m=None):
        """Noise standard deviation (m) before incidence effects: eq. (4), or eq. (2) in stereo mode.

        ``m`` defaults to ``default_material_m``; works on floats and arrays.
        """
        p = self.params
        if p.stereo_geometry:
            return p.disparity_std_px / (p.baseline_m * self.focal_length_px) * np.square(depth)
        return p.noise_coefficient_m * np.exp((p.default_material_m if m is None else m) * np.asarray(depth))

    def apply(self, depth: np.ndarray, segmentation: np.ndarray | None = None) -> np.ndarray:
        """Noisy depth image (new float32 array, 0 = no return) for ``depth`` (H x W, metres).

        ``segmentation`` (H x W ids) selects each pixel's material; without it
        every pixel uses ``default_material_m``.
        """
        p = self.params
        depth = np.asarray(depth, dtype=np.float32)
        if depth.ndim != 2:
            raise ValueError(f"depth must be a 2-D image, got shape {depth.shape}")
        if segmentation is not None and segmentation.shape != depth.shape:
            raise ValueError(f"segmentation shape {segmentation.shape} differs from depth shape {depth.shape}")
        buffers = self._buffers_for(depth.shape)
        sigma, invalid = buffers.sigma, buffers.invalid

        # Standard deviation per pixel: eq. (4) c*exp(m*d), or eq. (2) in stereo mode.
        if p.stereo_geometry:
            np.multiply(depth, depth, out=sigma)
            sigma *= np.float32(p.disparity_std_px / (p.baseline_m * self.focal_length_px))
        else:
            if segmentation is None:
                np.multiply(depth, np.float32(p.default_material_m), out=sigma)
            else:
                np.take(self._material_lut, segmentation, out=sigma)
                sigma *= depth
            with np.errstate(over="ignore", invalid="ignore"):  # far or non-finite depth: no return below
                np.exp(sigma, out=sigma)
                sigma *= np.float32(p.noise_coefficient_m)

        # No return: non-finite depth or outside the working range.
        with np.errstate(invalid="ignore"):
            np.less(depth, np.float32(p.min_range_m), out=invalid)
            invalid |= ~(depth <= np.float32(p.max_range_m))  # also catches NaN
        if p.incidence_enabled or p.edge_invalidation_enabled:
            self._surface_effects(depth, sigma, invalid)

        # Noisy depth = ideal + N(0, sigma^2). A reading outside the working range (or non-finite:
        # sigma overflows far away) is no return, as a D435 never reports beyond its range.
        noisy = self._rng.standard_normal(dtype=np.float32, out=np.empty(depth.shape, np.float32))
        with np.errstate(invalid="ignore", over="ignore"):  # inf depth/sigma: no return below
            noisy *= sigma
            noisy += depth
            invalid |= ~((noisy >= self._lowest_reading) & (noisy <= np.float32(p.max_range_m)))  # also NaN
        noisy[invalid] = 0.0

        # Fill-rate error: a binomial number of distinct random pixels give no depth.
        if p.fill_rate_error > 0.0:
            count = int(self._rng.binomial(noisy.size, p.fill_rate_error))
            dropped = self._rng.choice(noisy.size, size=count, replace=False, shuffle=False)
            noisy.reshape(-1)[dropped] = 0.0
        return noisy

    def _surface_effects(self, depth: np.ndarray, sigma: np.ndarray, invalid: np.ndarray) -> None:
        """Incidence-angle noise growth and discontinuity dropouts, both from depth gradients."""
        p = self.params
        with np.errstate(invalid="ignore"):
            grad_v, grad_u = np.gradient(depth)  # metres per pixel (central differences)
        if p.incidence_enabled:
            # A pixel spans d/f metres laterally, so the surface slope is |grad| * f / d.
            with np.errstate(invalid="ignore", divide="ignore"):
                tan_theta = np.hypot(grad_u, grad_v) * np.float32(self.focal_length_px) / depth
                theta = np.arctan(tan_theta)
                limit = np.float32(math.radians(p.max_incidence_deg))
                invalid |= theta > limit
                theta = np.minimum(theta, limit)
                sigma *= 1.0 + np.float32(p.incidence_gain) * (theta / (np.float32(math.pi / 2) - theta)) ** 2
        if p.edge_invalidation_enabled:
            # A jump to a 4-neighbour larger than edge_jump_fraction of the depth.
            threshold = np.float32(p.edge_jump_fraction) * depth
            with np.errstate(invalid="ignore"):
                jump_u = np.abs(np.diff(depth, axis=1))
                jump_v = np.abs(np.diff(depth, axis=0))
                edge = np.zeros(depth.shape, bool)
                edge[:, 1:] |= jump_u > threshold[:, 1:]
                edge[:, :-1] |= jump_u > threshold[:, :-1]
                edge[1:, :] |= jump_v > threshold[1:, :]
                edge[:-1, :] |= jump_v > threshold[:-1, :]
            invalid |= edge

    def _buffers_for(self, shape: tuple[int, int]) -> FrameBuffers:
        if self._buffers is None or self._buffers.shape != shape:
            self._buffers = FrameBuffers(shape)
        return self._buffers


def materials_from_scene(scene_name: str) -> dict[int, float]:
    """Segmentation id -> material coefficient m (1/m) for the ground and every object of a scene.

    Ids and materials come from ``config/scenes/<scene>.yaml`` and
    ``config/materials.yaml`` (:mod:`aerial_sim.world.scene`).
    """
    from aerial_sim.world.scene import load_scene

    scene = load_scene(scene_name)
    return {s.segmentation_id: scene.material_of_id(s.segmentation_id).depth_noise_m for s in (scene.ground, *scene.objects)}
