"""Lens distortion (plumb_bob) and colour sensor noise of the camera: where a point appears, what CameraInfo says,
what the noise measures, and each bad parameter refused naming it (no ROS graph)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aerial_sim.config import ParamsError
from aerial_sim.world.camera import CameraModel, CameraParams
from aerial_sim.world.lens import LensCamera, LensParams, camera_for, color_noise
from aerial_sim.world.scene import load_scene

D = (-0.28, 0.09, 0.0012, -0.0008, -0.01)  # a wide-angle lens's barrel distortion
LEVEL = (1.0, 0.0, 0.0, 0.0)
CAMERA = CameraParams(width=240, height=160, hfov_deg=90.0, mount_position_m=(0.0, 0.0, 0.0))
# Small balls 12 m ahead (+x) of the camera at 6 m height, toward the corners and edges of the view.
BALLS = [(y, z) for y in (-9.0, 0.0, 9.0) for z in (-4.0, 0.0, 4.0)]


def plumb_bob(x, y, d):
    """The textbook forward model (Brown 1966 / OpenCV), written out here independently of the module."""
    k1, k2, p1, p2, k3 = d
    r2 = x * x + y * y
    radial = 1 + k1 * r2 + k2 * r2 ** 2 + k3 * r2 ** 3
    return x * radial + 2 * p1 * x * y + p2 * (r2 + 2 * x * x), y * radial + p1 * (r2 + 2 * y * y) + 2 * p2 * x * y


@pytest.fixture(scope="module")
def ball_scene(tmp_path_factory):
    path = tmp_path_factory.mktemp("lens") / "balls.yaml"
    lines = ["objects:"] + [f"  - {{name: ball{i}, shape: sphere, radius: 0.12, position: [12, {y}, {6 + z}], "
                            f"segmentation_id: {10 + i}}}" for i, (y, z) in enumerate(BALLS)]
    path.write_text("\n".join(lines) + "\n")
    return load_scene(str(path))


def centroids(segmentation):
    found = {}
    for i in range(len(BALLS)):
        rows, columns = np.nonzero(segmentation == 10 + i)
        if len(rows):
            found[i] = (columns.mean(), rows.mean())
    return found


def test_a_point_appears_where_the_plumb_bob_model_puts_it_and_camera_info_says_so(ball_scene):
    ideal = CameraModel(CAMERA, ball_scene)
    lens = LensCamera(CAMERA, LensParams(distortion_d=D), ball_scene)
    pose = ((0.0, 0.0, 6.0), LEVEL)
    frame = lens.render(*pose, depth=True, segmentation=True, color=True, instance=True, normals=True)
    assert frame.color.shape == (160, 240, 3) and frame.depth.shape == frame.instance.shape == (160, 240)
    seen = centroids(frame.segmentation)
    assert len(seen) == len(BALLS)
    uv = ideal.project(np.array([(12.0, y, 6.0 + z) for y, z in BALLS]), *pose)
    moved = 0.0
    for i, (u, v) in enumerate(uv):
        x_d, y_d = plumb_bob((u - ideal.cx) / ideal.fx, (v - ideal.cy) / ideal.fy, D)
        expected = (ideal.fx * x_d + ideal.cx, ideal.fy * y_d + ideal.cy)
        assert np.hypot(*np.subtract(seen[i], expected)) < 0.5, (i, seen[i], expected)
        moved = max(moved, np.hypot(*np.subtract(expected, (u, v))))
    assert moved > 10.0  # the corners moved by many pixels: the test sees the distortion
    # The depth of a ball's pixels is still its distance (nearest ideal sample), the labels are labels.
    centre = seen[4]
    assert 12.0 - 0.12 - 1e-3 <= frame.depth[int(round(centre[1])), int(round(centre[0]))] <= 12.0  # on the ball
    assert set(np.unique(frame.instance)) <= {0, 1} | {2 + i for i in range(len(BALLS))}
    info = lens.camera_info()
    assert info["distortion_model"] == "plumb_bob" and info["d"] == list(D)
    assert info["k"] == pytest.approx(ideal.K.flatten().tolist()) and (info["width"], info["height"]) == (240, 160)


def test_distorted_optical_flow_is_how_far_a_point_moved_in_the_distorted_image(ball_scene):
    lens = LensCamera(CAMERA, LensParams(distortion_d=D), ball_scene)
    before, after = ((0.0, 0.0, 6.0), LEVEL), ((0.0, 0.6, 6.2), LEVEL)  # 0.6 m left, 0.2 m up
    first = centroids(lens.render(*before, depth=False, color=False).segmentation)
    second = centroids(lens.render(*after, depth=False, color=False).segmentation)
    flow = lens.optical_flow(*after, *before)
    for i in second:
        u, v = second[i]
        at = flow[int(round(v)), int(round(u))]
        assert np.hypot(*(np.subtract(second[i], first[i]) - at)) < 0.5, (i, second[i], first[i], at)


def test_without_distortion_the_camera_is_the_ideal_pinhole():
    scene = load_scene("urban")
    assert type(camera_for(CAMERA, LensParams(), scene)) is CameraModel
    assert CameraModel(CAMERA, scene).camera_info()["d"] == [0.0] * 5


def test_colour_noise_has_its_standard_deviation_and_repeats_with_seed_and_stamp():
    grey = np.full((160, 240, 3), 128, np.uint8)
    noisy = color_noise(grey, 6.0, seed=7, stamp_ns=1_000_000_000)
    difference = noisy.astype(float) - 128.0
    assert difference.std() == pytest.approx(6.0, rel=0.02)  # 115200 samples: 0.2 % sampling error, +rounding
    assert abs(difference.mean()) < 0.1
    assert np.array_equal(noisy, color_noise(grey, 6.0, seed=7, stamp_ns=1_000_000_000))
    assert not np.array_equal(noisy, color_noise(grey, 6.0, seed=8, stamp_ns=1_000_000_000))
    assert not np.array_equal(noisy, color_noise(grey, 6.0, seed=7, stamp_ns=1_033_333_333))
    assert color_noise(grey, 0.0, seed=7, stamp_ns=5) is grey
    white = color_noise(np.full((10, 10, 3), 255, np.uint8), 20.0, seed=1, stamp_ns=0)
    assert white.dtype == np.uint8 and white.max() == 255  # clipped, not wrapped


@pytest.mark.parametrize("values, message", [
    ({"distortion_d": (math.nan, 0.0, 0.0, 0.0, 0.0)}, "distortion_d must be 5 finite numbers"),
    ({"color_noise_std": -1.0}, "color_noise_std must be a finite number >= 0"),
    ({"color_noise_std": math.inf}, "color_noise_std"),
    ({"noise_seed": -3}, "noise_seed must be >= 0"),
])
def test_bad_lens_parameters_are_refused_naming_them(values, message):
    with pytest.raises(ParamsError, match=message):
        LensParams(**values)


def test_wrong_sizes_and_a_lens_that_cannot_be_inverted_are_refused_naming_distortion_d():
    from aerial_sim.config import params_from_mapping

    with pytest.raises(ParamsError, match=r"distortion_d: expected 5 values, got 4"):
        params_from_mapping(LensParams, {"distortion_d": [0.1, 0.0, 0.0, 0.0]})
    with pytest.raises(ParamsError, match=r"distortion_d \[-2\.0.*does not map back"):
        LensCamera(CAMERA, LensParams(distortion_d=(-2.0, 0.0, 0.0, 0.0, 0.0)), load_scene("empty"))
