"""Optional lens distortion (plumb_bob) and colour sensor noise over the ideal pinhole camera, both off by default.

Distortion: the Brown-Conrady model ROS calls ``plumb_bob`` (Brown, *Decentering distortion of lenses*,
Photogrammetric Engineering 1966; the form of OpenCV and of REP-104's CameraInfo ``d``): a point of the
optical frame at normalised coordinates (x, y) = (X / Z, Y / Z), r^2 = x^2 + y^2, appears at

    x_d = x (1 + k1 r^2 + k2 r^4 + k3 r^6) + 2 p1 x y + p2 (r^2 + 2 x^2)
    y_d = y (1 + k1 r^2 + k2 r^4 + k3 r^6) + p1 (r^2 + 2 y^2) + 2 p2 x y

and at pixel (f_x x_d + c_x, f_y y_d + c_y), with D = (k1, k2, p1, p2, k3) and K those of the ideal camera.
:class:`LensCamera` renders an ideal pinhole image with the same focal length over a field of view
widened to hold every ray the distorted image needs, then resamples it once per output pixel through a
table built when the camera starts (the inverse of the model, by OpenCV's fixed-point iteration):
colour bilinearly, depth, segmentation, instance ids and normals from the nearest ideal pixel (labels stay
labels), optical flow as the distorted position of each pixel's point in the previous frame. Its
CameraInfo carries D and ``plumb_bob`` with the K of the output image, so a user's
``cv2.undistort(image, K, D)`` gives the ideal image back.

Noise: Gaussian read noise of ``color_noise_std`` 8-bit levels, independent per pixel and channel, added to
the colour image and rounded and clipped to 0..255 (the signal-independent term of the EMVA 1288 sensor
model). Its random numbers come from ``numpy.random.default_rng((noise_seed, stamp_ns))``: the same seed and
frame stamp give the same image (a lockstep re-send, a re-run), another seed other noise.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from aerial_sim.config import require
from aerial_sim.world.camera import CameraFrame, CameraModel, CameraParams
from aerial_sim.world.scene import Scene


@dataclass(frozen=True)
class LensParams:
    """Lens distortion and sensor noise of the camera (defaults: none, the ideal pinhole)."""

    distortion_d: tuple[float, float, float, float, float] = (0.0, 0.0, 0.0, 0.0, 0.0)  # plumb_bob k1 k2 p1 p2 k3
    color_noise_std: float = 0.0  # Gaussian read noise of the colour image, 8-bit levels (0: none)
    noise_seed: int = 0  # seed of the colour noise (with each frame's stamp)

    def __post_init__(self) -> None:
        require(all(math.isfinite(v) for v in self.distortion_d),
                f"distortion_d must be 5 finite numbers (k1, k2, p1, p2, k3), got {list(self.distortion_d)}")
        require(math.isfinite(self.color_noise_std) and self.color_noise_std >= 0,
                f"color_noise_std must be a finite number >= 0 (8-bit levels), got {self.color_noise_std}")
        require(self.noise_seed >= 0, f"noise_seed must be >= 0, got {self.noise_seed}")

    @property
    def distorted(self) -> bool:
        return any(v != 0.0 for v in self.distortion_d)


def distort(x: np.ndarray, y: np.ndarray, d: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """plumb_bob: ideal normalised coordinates -> distorted ones (module docstring)."""
    k1, k2, p1, p2, k3 = d
    r2 = x * x + y * y
    radial = 1.0 + r2 * (k1 + r2 * (k2 + r2 * k3))
    return (x * radial + 2.0 * p1 * x * y + p2 * (r2 + 2.0 * x * x),
            y * radial + p1 * (r2 + 2.0 * y * y) + 2.0 * p2 * x * y)


def undistort(x_d: np.ndarray, y_d: np.ndarray, d: Sequence[float], iterations: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """The ideal normalised coordinates whose :func:`distort` is (x_d, y_d) (fixed-point iteration, as OpenCV's
    ``undistortPoints``)."""
    k1, k2, p1, p2, k3 = d
    x, y = x_d.copy(), y_d.copy()
    for _ in range(iterations):
        r2 = x * x + y * y
        radial = 1.0 + r2 * (k1 + r2 * (k2 + r2 * k3))
        dx = 2.0 * p1 * x * y + p2 * (r2 + 2.0 * x * x)
        dy = p1 * (r2 + 2.0 * y * y) + 2.0 * p2 * x * y
        x, y = (x_d - dx) / radial, (y_d - dy) / radial
    return x, y


def color_noise(color: np.ndarray, std: float, seed: int, stamp_ns: int) -> np.ndarray:
    """``color`` + N(0, std^2) per pixel and channel, rounded and clipped to uint8 (module docstring)."""
    if std == 0:
        return color
    rng = np.random.default_rng((int(seed), int(stamp_ns) & 0xFFFFFFFFFFFFFFFF))
    noisy = color.astype(np.float32) + rng.standard_normal(color.shape, dtype=np.float32) * np.float32(std)
    return np.clip(np.rint(noisy), 0, 255).astype(np.uint8)


def lens_problem(d: Sequence[float], width: int, height: int, hfov_deg: float) -> str | None:
    """Why a lens D cannot serve a ``width`` x ``height`` image of ``hfov_deg`` (None: it can): the check
    :class:`LensCamera` makes at start, on a 33 x 33 grid of pixels that includes the image's edges and
    corners (where a lens that cannot be inverted fails first), cheap enough to check a settings file with."""
    f = (width / 2.0) / math.tan(math.radians(hfov_deg) / 2.0)
    u = np.unique(np.rint(np.linspace(0.0, width - 1.0, 33)))
    v = np.unique(np.rint(np.linspace(0.0, height - 1.0, 33)))
    uu, vv = np.meshgrid(u, v)
    x_d, y_d = (uu - (width - 1) / 2.0) / f, (vv - (height - 1) / 2.0) / f
    x, y = undistort(x_d, y_d, d)
    back_x, back_y = distort(x, y, d)
    error_px = np.hypot(back_x - x_d, back_y - y_d) * f
    if not (np.all(np.isfinite(error_px)) and error_px.max() < 1e-3):
        return (f"the lens model does not map back onto every pixel of the {width}x{height} image (too strong a "
                "distortion for this field of view)")
    inner_half_width = (width - 1) / 2.0 + np.max(np.abs(x)) * f + 2.0
    hfov = 2.0 * math.degrees(math.atan(inner_half_width / f))
    if hfov >= 179.0:
        return f"the ideal image behind it would need a {hfov:.0f} deg field of view"
    return None


class LensCamera:
    """A :class:`~aerial_sim.world.camera.CameraModel` seen through a plumb_bob lens (module docstring).

    Offers what the camera node uses of a CameraModel: ``render``, ``optical_flow``, ``camera_info``,
    ``t_base_camera``, ``R_base_optical``, ``caster``, ``params`` (the output camera's).
    """

    def __init__(self, params: CameraParams, lens: LensParams, scene: Scene):
        self.params, self.lens = params, lens
        d = lens.distortion_d
        width, height = params.width, params.height
        self.fx = self.fy = (width / 2.0) / math.tan(math.radians(params.hfov_deg) / 2.0)
        self.cx, self.cy = (width - 1) / 2.0, (height - 1) / 2.0
        u, v = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
        x_d, y_d = (u - self.cx) / self.fx, (v - self.cy) / self.fy
        x, y = undistort(x_d, y_d, d)
        back_x, back_y = distort(x, y, d)
        error_px = np.hypot(back_x - x_d, back_y - y_d) * self.fx
        require(bool(np.all(np.isfinite(error_px)) and error_px.max() < 1e-3),
                f"distortion_d {list(d)}: the lens model does not map back onto every pixel of the "
                f"{width}x{height} image (too strong a distortion for this field of view)")
        # The ideal image: same focal length, padded to hold every source pixel (+1 for bilinear sampling).
        pad_u = max(0, int(math.ceil(np.max(np.abs(x)) * self.fx - self.cx)) + 2)
        pad_v = max(0, int(math.ceil(np.max(np.abs(y)) * self.fy - self.cy)) + 2)
        inner_width = width + 2 * pad_u
        hfov = 2.0 * math.degrees(math.atan((inner_width / 2.0) / self.fx))
        require(hfov < 179.0, f"distortion_d {list(d)}: the ideal image behind it would need a {hfov:.0f} deg field of view")
        self.inner = CameraModel(dataclasses.replace(params, width=inner_width, height=height + 2 * pad_v,
                                                     hfov_deg=hfov), scene)
        self.source_u = x * self.fx + self.inner.cx  # (H, W) ideal pixel of each output pixel
        self.source_v = y * self.fy + self.inner.cy
        # Flat indices into the ideal image (one np.take per image) and bilinear weights.
        inner_w = self.inner.params.width
        self._nearest = (np.rint(self.source_v).astype(np.intp) * inner_w + np.rint(self.source_u).astype(np.intp)).ravel()
        u0, v0 = np.floor(self.source_u).astype(np.intp), np.floor(self.source_v).astype(np.intp)
        top_left = (v0 * inner_w + u0).ravel()
        self._corners = np.stack([top_left, top_left + 1, top_left + inner_w, top_left + inner_w + 1])
        fu, fv = (self.source_u - u0).ravel(), (self.source_v - v0).ravel()
        self._weights = np.stack([(1 - fu) * (1 - fv), fu * (1 - fv), (1 - fu) * fv, fu * fv]).astype(np.float32)[..., None]
        self.t_base_camera, self.R_base_optical = self.inner.t_base_camera, self.inner.R_base_optical
        self.caster, self.scene = self.inner.caster, scene
        self._rays = np.stack([x, y, np.ones_like(x)], axis=-1).astype(np.float32)

    def optical_rays(self) -> np.ndarray:
        """(H, W, 3) float32: the ray (x, y, 1) in the optical frame each output pixel sees (undistorted)."""
        return self._rays

    # The lighting and label controls of the ideal camera behind the lens.
    def set_time_of_day(self, moment):
        return self.inner.set_time_of_day(moment)

    def set_fog(self, density_per_m) -> None:
        self.inner.set_fog(density_per_m)

    def set_surface_segmentation_id(self, surface: int, segmentation_id: int) -> None:
        self.inner.set_surface_segmentation_id(surface, segmentation_id)

    @property
    def sun_direction(self) -> np.ndarray:
        return self.inner.sun_direction

    def camera_info(self) -> dict:
        K = [self.fx, 0.0, self.cx, 0.0, self.fy, self.cy, 0.0, 0.0, 1.0]
        return {"width": self.params.width, "height": self.params.height, "distortion_model": "plumb_bob",
                "d": [float(v) for v in self.lens.distortion_d], "k": K, "r": np.eye(3).flatten().tolist(),
                "p": [self.fx, 0.0, self.cx, 0.0, 0.0, self.fy, self.cy, 0.0, 0.0, 0.0, 1.0, 0.0]}

    def nearest(self, image: np.ndarray | None) -> np.ndarray | None:
        if image is None:
            return None
        shape = (self.params.height, self.params.width) + image.shape[2:]
        return np.take(image.reshape((-1,) + image.shape[2:]), self._nearest, axis=0).reshape(shape)

    def bilinear(self, color: np.ndarray | None) -> np.ndarray | None:
        if color is None:
            return None
        samples = np.take(color.reshape(-1, color.shape[2]), self._corners, axis=0)  # (4, N, 3) uint8
        w = self._weights
        mixed = samples[0] * w[0] + samples[1] * w[1] + samples[2] * w[2] + samples[3] * w[3]
        out = np.minimum(mixed + 0.5, 255.0).astype(np.uint8)
        return out.reshape(self.params.height, self.params.width, color.shape[2])

    def render(self, position, orientation, **asked) -> CameraFrame:
        frame = self.inner.render(position, orientation, **asked)
        return CameraFrame(self.nearest(frame.depth), self.nearest(frame.segmentation), self.bilinear(frame.color),
                           self.nearest(frame.instance), self.nearest(frame.normals))

    def optical_flow(self, position, orientation, previous_position, previous_orientation) -> np.ndarray:
        """Flow in the distorted image: each pixel minus the distorted position its point had in the previous frame."""
        ideal = self.nearest(self.inner.optical_flow(position, orientation, previous_position, previous_orientation))
        previous_u = self.source_u - ideal[..., 0] - self.inner.cx  # the point's ideal pixel then, centred
        previous_v = self.source_v - ideal[..., 1] - self.inner.cy
        x_d, y_d = distort(previous_u / self.fx, previous_v / self.fy, self.lens.distortion_d)
        u, v = np.meshgrid(np.arange(self.params.width), np.arange(self.params.height))
        return np.stack([u - (x_d * self.fx + self.cx), v - (y_d * self.fy + self.cy)], axis=-1).astype(np.float32)


def camera_for(params: CameraParams, lens: LensParams, scene: Scene):
    """The node's camera: the plain :class:`CameraModel` without distortion, else a :class:`LensCamera`."""
    return LensCamera(params, lens, scene) if lens.distorted else CameraModel(params, scene)
