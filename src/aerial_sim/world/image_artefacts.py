"""AirSim's horizontal image artefacts (a camera's ``NoiseSettings`` Horz* keys), drawn on the colour image.

AirSim draws them with a post-process material, ``CameraSensorNoise`` (``Unreal/Plugins/AirSim/Content/
HUDAssets/CameraSensorNoise.uasset`` and its functions ``NoiseHorizWaveFunc``, ``ScreenXYNoiseFunc``), whose
graph blends each effect into the scene colour with the ratio of its ``*Contrib`` (0 none, 1 only the effect):
out = (1 - c) p + c e. The asset is a binary Unreal graph; what it does is taken from AirSim's settings
documentation (docs/settings.md, "Noise Settings") and the graph's node names and comments, so the shapes
below are this module's reading of them, not a copy of the material's constants:

- **Horizontal wave** (``HorzWave*``: "horizontal bumps / flickering / ghosting"). A band of rows, centred on a
  row y_0 drawn each frame uniformly over ``HorzWaveScreenSize`` x the image height (1: anywhere on the image;
  larger: the band is off the image more often, "factor > 1 applies effect to larger y"), shows the image
  shifted sideways by d(y) = ``HorzWaveStrength`` x W x exp(-((y - y_0) / (0.05 ``HorzWaveVertSize`` H))^2)
  pixels (the graph's "scale value to adjust size", "square the value", "make it negative before
  exponenting", "multiply with factor to adjust strength"): a ghost ``HorzWaveContrib`` strong, the rows
  within +-5 % x VertSize of the height of y_0 (at 1/e) moved most, the others not at all.
- **Horizontal noise lines** (``HorzNoiseLines*``: "regions of noise on horizontal lines"). Each row is a noise
  line with probability ``HorzNoiseLinesDensityXY`` ("how many lines on screen"), and each pixel of a noise line
  is noise with probability ``HorzNoiseLinesDensityY`` ("how many pixels in a horizontal line"); a noise pixel
  is grey, uniform over 0..255 (the graph's "add grey noise" where a row's random number passes a
  pixel's), blended with ``HorzNoiseLinesContrib``.
- **Horizontal distortion** (``HorzDistortion*``: "fluctuations on horizontal lines"). Every row shows the image
  shifted sideways by ``HorzDistortionStrength`` x W x r pixels, r uniform in [-1, 1] drawn per row and frame,
  blended with ``HorzDistortionContrib``.

Sideways shifts sample the row linearly between pixels, clamped at the image's edges. Each frame's random
numbers come from ``numpy.random.default_rng((seed, stamp_ns, 29))``: the same seed and stamp give the same
image, run after run (lockstep), a stream of its own beside the colour noise's (:mod:`aerial_sim.world.lens`).
AirSim's defaults (an enabled entry that leaves a key out) are :data:`AIRSIM_DEFAULTS`; with them the wave is a
3 % ghost, the lines sparse (1 % of the pixels of half the rows) and the distortion under a pixel at 460 wide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aerial_sim.config import require


@dataclass(frozen=True)
class ImageArtefacts:
    """The Horz* numbers of one ``NoiseSettings`` entry (AirSim's names in snake case); every contrib 0: none."""

    wave_contrib: float = 0.0
    wave_strength: float = 0.08
    wave_vert_size: float = 1.0
    wave_screen_size: float = 1.0
    lines_contrib: float = 0.0
    lines_density_y: float = 0.01
    lines_density_xy: float = 0.5
    distortion_contrib: float = 0.0
    distortion_strength: float = 0.002

    def __post_init__(self) -> None:
        for name in ("wave_contrib", "lines_contrib", "distortion_contrib"):
            value = getattr(self, name)
            require(math.isfinite(value) and 0.0 <= value <= 1.0, f"{name}: must be in [0, 1], got {value!r}")
        for name in ("wave_strength", "wave_vert_size", "wave_screen_size", "distortion_strength"):
            value = getattr(self, name)
            require(math.isfinite(value) and value >= 0.0, f"{name}: must be a finite number >= 0, got {value!r}")
        for name in ("lines_density_y", "lines_density_xy"):
            value = getattr(self, name)
            require(math.isfinite(value) and 0.0 <= value, f"{name}: must be a finite number >= 0, got {value!r}")

    @property
    def active(self) -> bool:
        return (self.wave_contrib > 0 and self.wave_strength > 0) or self.lines_contrib > 0 or \
            (self.distortion_contrib > 0 and self.distortion_strength > 0)


#: AirSim's NoiseSetting defaults (AirSimSettings.hpp): what an enabled entry draws for the keys it leaves out.
AIRSIM_DEFAULTS = ImageArtefacts(wave_contrib=0.03, lines_contrib=1.0, distortion_contrib=1.0)
#: NoiseSettings key -> ImageArtefacts field.
SETTINGS_KEYS = {"HorzWaveContrib": "wave_contrib", "HorzWaveStrength": "wave_strength",
                 "HorzWaveVertSize": "wave_vert_size", "HorzWaveScreenSize": "wave_screen_size",
                 "HorzNoiseLinesContrib": "lines_contrib", "HorzNoiseLinesDensityY": "lines_density_y",
                 "HorzNoiseLinesDensityXY": "lines_density_xy", "HorzDistortionContrib": "distortion_contrib",
                 "HorzDistortionStrength": "distortion_strength"}


def _shifted_rows(image: np.ndarray, shift_px: np.ndarray) -> np.ndarray:
    """Each row of ``image`` (H, W, C) float32 moved right by ``shift_px`` (H,) pixels (linear between pixels,
    clamped at the edges): pixel x shows the row at x - shift."""
    height, width = image.shape[:2]
    source = np.arange(width, dtype=np.float64)[None, :] - shift_px[:, None]
    source = np.clip(source, 0.0, width - 1.0)
    left = np.floor(source).astype(np.intp)
    right = np.minimum(left + 1, width - 1)
    fraction = (source - left).astype(np.float32)[..., None]
    rows = np.arange(height)[:, None]
    return image[rows, left] * (1.0 - fraction) + image[rows, right] * fraction


def apply_artefacts(color: np.ndarray, params: ImageArtefacts | None, seed: int, stamp_ns: int) -> np.ndarray:
    """``color`` (H, W, 3) uint8 with the wave, the distortion and the noise lines of ``params`` (module
    docstring), uint8; ``color`` itself when none is on."""
    if params is None or not params.active or color.size == 0:
        return color
    rng = np.random.default_rng((int(seed), int(stamp_ns) & 0xFFFFFFFFFFFFFFFF, 29))
    height, width = color.shape[:2]
    image = color.astype(np.float32)
    rows = (np.arange(height) + 0.5) / height  # row centres, 0 top .. 1 bottom
    centre = rng.uniform(0.0, params.wave_screen_size)
    if params.wave_contrib > 0 and params.wave_strength > 0:
        size = 0.05 * params.wave_vert_size
        profile = np.exp(-((rows - centre) / size) ** 2) if size > 0 else (np.abs(rows - centre) < 0.5 / height) * 1.0
        ghost = _shifted_rows(image, params.wave_strength * width * profile)
        image += np.float32(params.wave_contrib) * (ghost - image)
    jitter = rng.uniform(-1.0, 1.0, height)
    if params.distortion_contrib > 0 and params.distortion_strength > 0:
        moved = _shifted_rows(image, params.distortion_strength * width * jitter)
        image += np.float32(params.distortion_contrib) * (moved - image)
    line_rows = rng.uniform(size=height) < params.lines_density_xy
    noisy = line_rows[:, None] & (rng.uniform(size=(height, width)) < params.lines_density_y)
    grey = rng.uniform(0.0, 255.0, (height, width)).astype(np.float32)
    if params.lines_contrib > 0 and noisy.any():
        image[noisy] += np.float32(params.lines_contrib) * (grey[noisy][:, None] - image[noisy])
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)
