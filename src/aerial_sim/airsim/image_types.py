"""AirSim's image types (its ``ImageType`` enum) and the pixels each is served as (AIRSIM_API.md,
"ImageType enum" and "ImageResponse"; AirSim's and Cosys-AirSim's docs/image_apis.md).

A request's ``pixels_as_float`` picks floats over bytes, as AirSim's ``RenderRequest`` does:
with it the response carries ``image_data_float`` (one value a pixel, row-major; OpticalFlow
two, SurfaceNormals three) and no bytes, whatever ``compress`` says; without it
``image_data_uint8`` holds H x W x 3 uint8, a PNG file when ``compress``
(:mod:`aerial_sim.airsim.png`, an ordinary RGB PNG) and else the raw pixels in **BGR** order
for an ``airsim`` client (what AirSim's ``RenderRequest`` writes: its examples save them with
``cv2.imwrite``) and in **RGB** order for a ``cosysairsim`` client (what Cosys-AirSim's
writes, and its docs read with ``Image.fromarray(..., 'RGB')``), told apart by the
``annotation_name`` only cosysairsim's ImageRequest carries.

- Scene (0): colour. As floats, AirSim's: the red channel in [0, 1] (its ``RenderRequest``
  reads the R of each pixel of the 8-bit render target as a normalised float).
- DepthPlanar (1), DepthPerspective (2): metres as floats (optical z, or distance along the
  ray); no return -> ``NO_RETURN_DEPTH_M``, nearer than the minimum range -> 0. As bytes,
  the DepthVis grey image.
- DepthVis (3): grey, black = 0 m to white = 100 m of planar depth (AirSim's scale); as
  floats, that fraction in [0, 1].
- DisparityNormalized (4): ``(x_left - x_right) / width`` of the stereo pair
  front_left/front_right (``STEREO_BASELINE_M`` apart), from planar depth:
  ``fx * baseline / (z * width)``, in [0, 1] (0 where nothing is hit); as floats (what
  AirSim's docs advise) or grey bytes (1 = white).
- Segmentation (5): one colour per segmentation id (:func:`segmentation_palette`);
  ``pixels_as_float`` gives the ids themselves (AirSim: the red of the colour / 255, which
  names no object; the ids are the ground truth a user wants).
- SurfaceNormals (6): the surface normal of each pixel, the renderer's hit normal
  (:func:`hit_normals`; or, from a renderer without them, :func:`surface_normals` from the
  gradients of the depth image), turned toward the camera, in the camera frame AirSim uses
  (x forward, y right, z down), as colour ``(n + 1) / 2 * 255``; black where nothing is hit.
  As floats, the unit normal itself, H x W x 3 values interleaved (x, y, z; zero where nothing
  is hit): reshape with ``(height, width, 3)``.
- Infrared (7): AirSim's, each object's segmentation id (0-255) as its grey level
  (``simSetSegmentationObjectID`` sets it); as floats, that level.
- OpticalFlow (8): the motion of each pixel since the camera's previous image request, in
  pixels (:meth:`~aerial_sim.world.camera.CameraModel.optical_flow`). As floats, H x W x 2
  values interleaved (u, v): reshape with ``(height, width, 2)`` (Cosys-AirSim: "a 2-channel
  image where the channels correspond to vx and vy"); as bytes, the OpticalFlowVis colours.
- OpticalFlowVis (9): flow as colour (:func:`flow_to_rgb`); as floats, the length in pixels.

Cosys-AirSim's Lighting (10) and Annotation (11) are not rendered: a request for one (or for
any number outside the enum) is answered with an empty image whose ``message`` says why
(:func:`refusal`), as AirSim answers an image it cannot capture.
"""

from __future__ import annotations

import colorsys
import functools

import numpy as np

SCENE, DEPTH_PLANAR, DEPTH_PERSPECTIVE, DEPTH_VIS, DISPARITY, SEGMENTATION, SURFACE_NORMALS, INFRARED = range(8)
OPTICAL_FLOW, OPTICAL_FLOW_VIS = 8, 9
IMAGE_TYPE_NAMES = {0: "Scene", 1: "DepthPlanar", 2: "DepthPerspective", 3: "DepthVis", 4: "DisparityNormalized",
                    5: "Segmentation", 6: "SurfaceNormals", 7: "Infrared", 8: "OpticalFlow", 9: "OpticalFlowVis",
                    10: "Lighting", 11: "Annotation"}
SUPPORTED_TYPES = (SCENE, DEPTH_PLANAR, DEPTH_PERSPECTIVE, DEPTH_VIS, DISPARITY, SEGMENTATION, SURFACE_NORMALS, INFRARED,
                   OPTICAL_FLOW, OPTICAL_FLOW_VIS)
#: The types that need the camera's motion since its previous request, and those drawn from its depth.
FLOW_TYPES = {OPTICAL_FLOW, OPTICAL_FLOW_VIS}
DEPTH_TYPES = {DEPTH_PLANAR, DEPTH_PERSPECTIVE, DEPTH_VIS, DISPARITY, SURFACE_NORMALS}
#: DisparityNormalized: the stereo baseline (m), front_left to front_right (5 cm either side of the centre).
STEREO_BASELINE_M = 0.10
#: Depth reported where a ray hits nothing within range (the largest half-float: finite, far).
NO_RETURN_DEPTH_M = 65504.0
#: DepthVis: white at this depth (AirSim: 100 m).
DEPTH_VIS_RANGE_M = 100.0


def refusal(image_type: int) -> str:
    """The ``message`` of the empty image answered for a type this server does not render."""
    name = IMAGE_TYPE_NAMES.get(image_type, "unknown")
    supported = ", ".join(IMAGE_TYPE_NAMES[t] for t in SUPPORTED_TYPES)
    return f"image type {image_type} ({name}) is not rendered by aerial_sim (supported: {supported})"


def encode(image_type: int, frame, flow: np.ndarray | None, color: np.ndarray | None, model,
           planar_factor: np.ndarray, as_float: bool, rgb: bool) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(floats, pixels) of one image (module docstring): floats when ``as_float`` (else None), else the
    H x W x 3 uint8 pixels, in RGB order when ``rgb`` (a PNG, or a cosysairsim client) and BGR when not.

    ``frame``: the camera's :class:`~aerial_sim.world.camera.CameraFrame` (REP-117 depth along the ray,
    segmentation ids, hit normals); ``flow``: (H, W, 2) pixels since the previous request (flow types);
    ``color``: the Scene colour, its noise applied; ``model``: the camera (its intrinsics and rays);
    ``planar_factor``: optical z per metre along each pixel's ray."""
    if image_type == SCENE:
        if as_float:  # AirSim's: the red channel of its 8-bit target read as unsigned-normalised floats
            return color[:, :, 0].astype(np.float32) / np.float32(255.0), None
        return None, color if rgb else color[:, :, ::-1]  # BGR: tobytes copies it once
    if image_type in (DEPTH_PLANAR, DEPTH_PERSPECTIVE):
        depth = frame.depth * planar_factor if image_type == DEPTH_PLANAR else frame.depth
        return (airsim_depth(depth), None) if as_float else (None, depth_vis(depth))
    if image_type == DEPTH_VIS:
        depth = frame.depth * planar_factor
        if as_float:
            return np.clip(airsim_depth(depth) / DEPTH_VIS_RANGE_M, 0.0, 1.0), None
        return None, depth_vis(depth)
    if image_type == DISPARITY:
        disparity = disparity_normalized(frame.depth * planar_factor, model.fx, model.params.width)
        return (disparity, None) if as_float else (None, grey_pixels((disparity * 255.0 + 0.5).astype(np.uint8)))
    if image_type == INFRARED:
        grey = np.minimum(frame.segmentation, 255).astype(np.uint8)
        return (grey.astype(np.float32), None) if as_float else (None, grey_pixels(grey))
    if image_type == SURFACE_NORMALS:
        planar = frame.depth * planar_factor
        if frame.normals is not None:  # the renderer's hit normals (exact, sharp at edges)
            normals = hit_normals(frame.normals, planar, model.optical_rays())
        else:
            normals = surface_normals(planar, model.fx, model.fy, model.cx, model.cy)
        if as_float:
            return normals, None  # (H, W, 3): interleaved x, y, z
        colour = normals_to_rgb(normals)
        return None, colour if rgb else colour[:, :, ::-1]
    if image_type == OPTICAL_FLOW and as_float:
        return flow, None  # (H, W, 2): interleaved u, v
    if image_type in FLOW_TYPES:
        if as_float:
            return np.hypot(flow[:, :, 0], flow[:, :, 1]), None
        colour = flow_to_rgb(flow)
        return None, colour if rgb else colour[:, :, ::-1]
    if image_type == SEGMENTATION:
        if as_float:
            return frame.segmentation.astype(np.float32), None
        rgb_items, bgr_items = _palette_items()
        return None, np.take(rgb_items if rgb else bgr_items, frame.segmentation)
    raise ValueError(f"image type {image_type} is not rendered here")


def grey_pixels(grey: np.ndarray) -> np.ndarray:
    """H x W uint8 -> H x W x 3 (the same bytes in RGB and BGR)."""
    return np.repeat(grey[:, :, None], 3, axis=2)


def segmentation_palette(size: int = 65536) -> np.ndarray:
    """RGB colour per segmentation id: 0 black, then well-separated hues (golden-ratio steps), the same on
    every run. AirSim's colours come from its own fixed palette image (seg_color_pallet.png); ids, not
    colours, are what a user relies on, and ``pixels_as_float`` gives them."""
    ids = np.arange(size)
    hue = (ids * 0.618033988749895) % 1.0
    value = 0.55 + 0.45 * ((ids * 7) % 5) / 4.0
    palette = np.array([colorsys.hsv_to_rgb(h, 0.85, v) for h, v in zip(hue[:256], value[:256])]) * 255.0
    colors = np.tile(palette, (size // 256 + 1, 1))[:size]
    colors[0] = 0.0
    return np.round(colors).astype(np.uint8)


@functools.cache
def _palette_items() -> tuple[np.ndarray, np.ndarray]:
    """The palette as one 3-byte item per id, RGB (PNG) and BGR (raw bytes): np.take of these gives the image
    bytes in one pass."""
    palette = segmentation_palette()
    return palette.view("V3").ravel(), np.ascontiguousarray(palette[:, ::-1]).view("V3").ravel()


def disparity_normalized(planar_depth: np.ndarray, fx: float, width: int,
                         baseline_m: float = STEREO_BASELINE_M) -> np.ndarray:
    """AirSim's DisparityNormalized ``(x_l - x_r) / x_max`` = ``fx * baseline / (z * width)``, clipped to [0, 1]
    (a rectified stereo pair; disparity d = f B / z, Hartley & Zisserman eq. 11.1); no return (+inf) -> 0,
    nearer than the minimum range (-inf, REP-117) -> 1."""
    z = np.where(planar_depth == -np.inf, 0.0, planar_depth)
    with np.errstate(divide="ignore"):
        return np.clip(fx * baseline_m / (z * width), 0.0, 1.0).astype(np.float32)


def surface_normals(planar_depth: np.ndarray, fx: float, fy: float, cx: float, cy: float) -> np.ndarray:
    """Unit normals (H, W, 3) in AirSim's camera frame (x forward, y right, z down) from a planar depth image:
    back-project each pixel to P = z ((u - cx) / fx, (v - cy) / fy, 1) (optical frame), take
    n = dP/du x dP/dv by central differences and turn it toward the camera. No return (or a neighbour
    without one): zero."""
    height, width = planar_depth.shape
    valid = np.isfinite(planar_depth) & (planar_depth > 0)
    z = np.where(valid, planar_depth, np.nan).astype(np.float64)
    u, v = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
    points = np.stack([z * (u - cx) / fx, z * (v - cy) / fy, z], axis=2)  # optical: x right, y down, z forward
    du = np.gradient(points, axis=1)
    dv = np.gradient(points, axis=0)
    normal = np.cross(du, dv)
    facing = np.einsum("ijk,ijk->ij", normal, points)
    normal[facing > 0] *= -1.0  # toward the camera
    norm = np.linalg.norm(normal, axis=2, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        normal = normal / norm
    normal[~np.isfinite(normal).all(axis=2)] = 0.0
    # optical (right, down, forward) -> AirSim camera (forward, right, down)
    return np.stack([normal[:, :, 2], normal[:, :, 0], normal[:, :, 1]], axis=2).astype(np.float32)


def hit_normals(optical: np.ndarray, planar_depth: np.ndarray, rays: np.ndarray) -> np.ndarray:
    """The renderer's unit hit normals (optical frame) turned toward the camera, in AirSim's camera frame
    (x forward, y right, z down); zero where nothing is hit. ``rays`` (H, W, 3): each pixel's optical-frame ray."""
    normal = np.array(optical, np.float32, copy=True)
    normal[np.einsum("ijk,ijk->ij", normal, rays) > 0] *= -1.0
    normal[~(np.isfinite(planar_depth) & (planar_depth > 0)) | ~np.isfinite(normal).all(axis=2)] = 0.0
    return np.stack([normal[:, :, 2], normal[:, :, 0], normal[:, :, 1]], axis=2)


def flow_to_rgb(flow: np.ndarray) -> np.ndarray:
    """Optical flow (H, W, 2) as colour (the colour-wheel coding of Baker et al., *A Database and Evaluation
    Methodology for Optical Flow*, IJCV 2011, in HSV): hue = direction, saturation = length / the longest
    finite length in the image, full value; still = white, NaN (no flow: a point behind the previous
    camera) = black."""
    from matplotlib.colors import hsv_to_rgb

    u, v = flow[:, :, 0].astype(np.float64), flow[:, :, 1].astype(np.float64)
    length = np.hypot(u, v)
    finite = np.isfinite(length)
    longest = float(length[finite].max()) if finite.any() else 0.0
    hsv = np.ones(flow.shape[:2] + (3,))
    hsv[:, :, 0] = np.where(finite, (np.arctan2(v, u) / (2 * np.pi)) % 1.0, 0.0)
    hsv[:, :, 1] = np.where(finite, length / longest, 0.0) if longest > 0 else 0.0
    rgb = (hsv_to_rgb(np.clip(hsv, 0.0, 1.0)) * 255.0 + 0.5).astype(np.uint8)
    rgb[~finite] = 0
    return rgb


def normals_to_rgb(normals: np.ndarray) -> np.ndarray:
    """(n + 1) / 2 * 255 per axis; zero normals (no surface) black."""
    rgb = ((normals + 1.0) * 127.5 + 0.5).astype(np.uint8)
    rgb[~normals.any(axis=2)] = 0
    return rgb


def airsim_depth(depth: np.ndarray) -> np.ndarray:
    """REP-117 depth (+inf no return, -inf too near) -> AirSim floats (far constant, 0), in one pass."""
    return np.clip(depth, 0.0, NO_RETURN_DEPTH_M).astype(np.float32, copy=False)


def depth_vis(depth: np.ndarray) -> np.ndarray:
    """Grey H x W x 3 uint8: 0 m black, DEPTH_VIS_RANGE_M or farther white."""
    return grey_pixels((np.clip(airsim_depth(depth) / DEPTH_VIS_RANGE_M, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8))
