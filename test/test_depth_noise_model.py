"""Depth-noise model (seed 004, sec. 2): statistics a user of the depth image would notice."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from aerial_sim.config import ParamsError
from aerial_sim.sensors.depth_noise import PAPER_MATERIALS, DepthNoiseModel, DepthNoiseParams, materials_from_scene

# The corridor scene re-creates the paper's wall experiment (Fig. 3): one wall per material.
MATERIAL_IDS = {"plastic": 10, "cement": 11, "formboard": 12}
TABLE = materials_from_scene("corridor")
DISTANCES = np.linspace(0.5, 8.0, 16)
TILE = 64  # pixels per side of one (distance, material) patch


def planes(material_id: int) -> tuple[np.ndarray, np.ndarray]:
    """One 64x64 fronto-parallel wall patch per distance, side by side (ideal depth, segmentation)."""
    depth = np.repeat(DISTANCES.astype(np.float32), TILE)[None, :].repeat(TILE, axis=0)
    return depth, np.full(depth.shape, material_id, np.uint16)


def robust_std(values: np.ndarray) -> float:
    """Std of a Gaussian from its interquartile range: unaffected by the few noisy depths that fall
    below 0 and become 'no return' (they stay in the lower tail, below the first quartile)."""
    q25, q75 = np.percentile(values, [25, 75])
    return float((q75 - q25) / 1.3489795)


def test_corridor_walls_carry_the_papers_material_coefficients():
    assert {name: TABLE[i] for name, i in MATERIAL_IDS.items()} == pytest.approx(PAPER_MATERIALS)


@pytest.mark.parametrize("material", sorted(PAPER_MATERIALS))
def test_std_grows_as_exp_of_material_times_distance(material):
    m_true = PAPER_MATERIALS[material]
    # The law itself: the 10 m range limit would cut plastic's 4.5 m std at 8 m (tested below).
    model = DepthNoiseModel(DepthNoiseParams(seed=3, fill_rate_error=0.0, max_range_m=50.0), materials=TABLE)
    depth, segmentation = planes(MATERIAL_IDS[material])
    error = model.apply(depth, segmentation) - depth
    stds = np.array([robust_std(error[:, i * TILE:(i + 1) * TILE]) for i in range(len(DISTANCES))])

    # Fit log(std) = log(c) + m d, as the paper fitted eq. (4) to its D435 data.
    m_fit, log_c = np.polyfit(DISTANCES, np.log(stds), 1)
    assert m_fit == pytest.approx(m_true, rel=0.05)
    assert np.exp(log_c) == pytest.approx(0.005, rel=0.10)
    expected = 0.005 * np.exp(m_true * DISTANCES)
    r_squared = 1.0 - np.sum((stds - expected) ** 2) / np.sum((stds - stds.mean()) ** 2)
    assert r_squared >= 0.95


def test_fill_rate_error_zeroes_one_percent_of_pixels():
    model = DepthNoiseModel(DepthNoiseParams(seed=5))
    depth = np.full((320, 460), 2.0, np.float32)  # within range, noise std 18 mm: never <= 0
    zero_fraction = np.mean(model.apply(depth) == 0.0)
    assert zero_fraction == pytest.approx(0.01, abs=0.001)


def test_unknown_segmentation_id_uses_the_default_material():
    model = DepthNoiseModel(DepthNoiseParams(seed=1, fill_rate_error=0.0, default_material_m=0.85), materials={5: 0.0})
    depth = np.full((200, 200), 6.0, np.float32)
    unknown = np.full(depth.shape, 999, np.uint16)
    known = np.full(depth.shape, 5, np.uint16)
    assert model.unknown_ids(unknown).tolist() == [999]
    assert model.unknown_ids(known).size == 0
    # Default m = 0.85 at 6 m: std 0.82 m; the known id has m = 0: std 5 mm.
    assert robust_std(model.apply(depth, unknown) - depth) == pytest.approx(0.005 * np.exp(0.85 * 6.0), rel=0.05)
    assert robust_std(model.apply(depth, known) - depth) == pytest.approx(0.005, rel=0.05)


def test_same_seed_same_image_and_different_seed_different_image():
    depth = np.random.default_rng(0).uniform(0.5, 8.0, (120, 160)).astype(np.float32)
    first = DepthNoiseModel(DepthNoiseParams(seed=7)).apply(depth)
    again = DepthNoiseModel(DepthNoiseParams(seed=7)).apply(depth)
    other = DepthNoiseModel(DepthNoiseParams(seed=8)).apply(depth)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_out_of_range_and_invalid_depth_give_no_return():
    model = DepthNoiseModel(DepthNoiseParams(fill_rate_error=0.0, min_range_m=0.3, max_range_m=5.0))
    depth = np.array([[0.1, 0.29, 5.01, 20.0, np.inf, np.nan, 1.0, 4.9]], np.float32)
    noisy = model.apply(depth)
    assert noisy[0, :6].tolist() == [0.0] * 6
    assert np.all(noisy[0, 6:] > 0.0)
    assert noisy.dtype == np.float32


def test_noisy_depths_outside_the_range_give_no_return_as_on_a_d435():
    # Plastic at 8 m: eq. (4) gives std 0.005 e^(0.85 * 8) = 4.49 m, so e ~ N(0, 4.49^2) reaches 30 m.
    # A D435 never reports beyond its 0.2-10 m range: such readings are no return (0), so the camera
    # reports a normal truncated to [0.2, 10] m, on the fraction of pixels that falls inside it.
    model = DepthNoiseModel(DepthNoiseParams(seed=11, fill_rate_error=0.0), materials={1: PAPER_MATERIALS["plastic"]})
    depth = np.full((320, 460), 8.0, np.float32)
    noisy = model.apply(depth, np.ones(depth.shape, np.uint16))
    reported = noisy[noisy > 0].astype(np.float64)
    assert reported.min() >= 0.2 and reported.max() <= 10.0

    sigma = 0.005 * math.exp(0.85 * 8.0)
    reference = scipy.stats.truncnorm((0.2 - 8.0) / sigma, (10.0 - 8.0) / sigma, loc=8.0, scale=sigma)
    inside = scipy.stats.norm(8.0, sigma).cdf(10.0) - scipy.stats.norm(8.0, sigma).cdf(0.2)
    assert inside == pytest.approx(0.63, abs=0.01)  # 37 % of the wall gives no return
    assert reported.size / depth.size == pytest.approx(inside, abs=4 * math.sqrt(inside * (1 - inside) / depth.size))
    assert reported.mean() == pytest.approx(reference.mean(), abs=0.02)
    assert reported.std() == pytest.approx(reference.std(), rel=0.02)  # 2.39 m, not 4.49 m


def test_stereo_geometry_std_follows_eq2():
    # sigma_Z = Z^2 sigma_d / (b f): 4 m, 0.08 px, 50 mm, 242.7 px -> 0.1055 m.
    params = DepthNoiseParams(seed=2, fill_rate_error=0.0, stereo_geometry=True)
    model = DepthNoiseModel(params, materials={1: 0.85})
    depth = np.full((200, 200), 4.0, np.float32)
    segmentation = np.ones(depth.shape, np.uint16)  # material is ignored in stereo mode
    expected = 16.0 * 0.08 / (0.050 * 242.7)
    assert robust_std(model.apply(depth, segmentation) - depth) == pytest.approx(expected, rel=0.05)


def test_incidence_angle_increases_noise_on_a_slanted_wall():
    params = DepthNoiseParams(seed=4, fill_rate_error=0.0, incidence_enabled=True, incidence_gain=1.0)
    model = DepthNoiseModel(params)
    f = params.focal_length_px
    # A wall tilted 45 deg about the camera's vertical axis: depth rises 1 pixel-footprint (d/f) per column.
    columns = np.arange(200, dtype=np.float64)
    depth_row = 3.0 * np.exp(columns / f)  # d' = d / f  <=>  tan(theta) = 1
    slanted = np.tile(depth_row.astype(np.float32), (200, 1))
    flat = np.full_like(slanted, 3.0)
    inner = (slice(5, -5), slice(5, -5))
    # theta = 45 deg: factor 1 + (pi/4)^2 / (pi/4)^2 = 2 at the same depth.
    ratio = robust_std((model.apply(slanted) - slanted)[inner] / model.std_m(slanted[inner])) / robust_std(
        (model.apply(flat) - flat)[inner] / model.std_m(flat[inner])
    )
    assert ratio == pytest.approx(2.0, rel=0.08)


def test_depth_discontinuities_give_no_return_when_enabled():
    depth = np.full((50, 50), 2.0, np.float32)
    depth[:, 25:] = 6.0  # an occluding edge between columns 24 and 25
    plain = DepthNoiseModel(DepthNoiseParams(fill_rate_error=0.0)).apply(depth)
    edged = DepthNoiseModel(DepthNoiseParams(fill_rate_error=0.0, edge_invalidation_enabled=True)).apply(depth)
    assert np.all(plain[:, 24:26] > 0.0)
    assert np.all(edged[:, 24:26] == 0.0)
    assert np.all(edged[:, :23] > 0.0) and np.all(edged[:, 27:] > 0.0)


def test_bad_parameters_and_materials_are_params_errors():
    with pytest.raises(ParamsError, match="fill_rate_error"):
        DepthNoiseParams(fill_rate_error=1.5)
    with pytest.raises(ParamsError, match="min_range_m"):
        DepthNoiseParams(min_range_m=5.0, max_range_m=4.0)
    with pytest.raises(ParamsError, match="material coefficient"):
        DepthNoiseModel(DepthNoiseParams(), materials={3: -1.0})
    with pytest.raises(ValueError, match="shape"):
        DepthNoiseModel(DepthNoiseParams()).apply(np.ones((4, 4), np.float32), np.ones((4, 5), np.uint16))


def test_core_module_does_not_import_rclpy():
    source = Path(__file__).resolve().parents[1] / "src/aerial_sim/sensors/depth_noise.py"
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])
    }
    assert "rclpy" not in imported


LANE_Y = {"plastic": 0.0, "cement": 40.0, "formboard": -40.0}


@pytest.mark.parametrize("material", sorted(PAPER_MATERIALS))
def test_rendered_corridor_walls_give_the_papers_noise_curve(material):
    """End to end, as the paper's wall experiment: the camera renders the corridor scene's wall at
    0.5-8 m, the noise model uses the rendered segmentation to pick the material, and the std of
    image_raw - image_ideal follows c*e^(m*d)."""
    from aerial_sim.world.camera import CameraModel, CameraParams
    from aerial_sim.world.scene import load_scene

    camera = CameraModel(CameraParams(), load_scene("corridor"))
    model = DepthNoiseModel(DepthNoiseParams(seed=5, fill_rate_error=0.0, max_range_m=50.0), materials=TABLE)  # law, no clip
    distances = np.linspace(0.5, 8.0, 8)
    stds = []
    for d in distances:
        base_x = 10.0 - d - camera.params.mount_position_m[0]
        images = camera.render((base_x, LANE_Y[material], 6.0), (1.0, 0.0, 0.0, 0.0), color=False)
        ideal, segmentation = images.depth, images.segmentation
        assert np.all(segmentation == MATERIAL_IDS[material])  # the whole frame is that wall
        assert np.abs(ideal - d).max() < 1e-3
        stds.append(robust_std((model.apply(ideal, segmentation) - ideal).ravel()))
    m_fit, _ = np.polyfit(distances, np.log(stds), 1)
    assert m_fit == pytest.approx(PAPER_MATERIALS[material], rel=0.05)
