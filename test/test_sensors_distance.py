"""Distance sensor against geometry with a known answer: height over the ground, the reading over a box
edge (first return and spot-mean), REP-117 limits, noise statistics, bad parameters."""

from __future__ import annotations

import dataclasses
import math
import textwrap

import numpy as np
import pytest

from aerial_sim.config import ParamsError, params_from_mapping
from aerial_sim.sensors.params import load_preset
from aerial_sim.sensors.quaternions import quat_from_rpy
from aerial_sim.sensors.truth import TruthSample
from aerial_sim.sensors.distance import DistanceSensor, DistanceSensorParams
from aerial_sim.world.scene import load_scene

BOX_TOP = 1.0  # the test box: x >= 0 (its edge on the line x = 0), top at z = 1 m
HEIGHT = 3.0  # the sensor's height: 2 m above the box top


@pytest.fixture(scope="module")
def box_scene(tmp_path_factory):
    path = tmp_path_factory.mktemp("scene") / "box.yaml"
    path.write_text(textwrap.dedent("""\
        ground: {segmentation_id: 1, material: cement}
        objects:
          - {name: box, shape: box, size: [20, 20, 1], position: [10, 0, 0.5], segmentation_id: 2, material: plastic}
    """))
    return load_scene(str(path))


def reading(sensor: DistanceSensor, x: float, z: float = HEIGHT, orientation=(1.0, 0.0, 0.0, 0.0)) -> float:
    return sensor.step(0.02, TruthSample(0.0, position=(x, 0.0, z), orientation=orientation)).range_m


def test_the_airsim_single_ray_reads_the_height_and_the_slant_when_tilted():
    sensor = DistanceSensor(DistanceSensorParams(), load_scene("empty"))
    assert reading(sensor, 0.0, z=7.5) == pytest.approx(7.5, abs=1e-5)  # mount: looking straight down
    assert reading(sensor, 0.0, z=7.5, orientation=quat_from_rpy(math.radians(30), 0, 0)) == pytest.approx(
        7.5 / math.cos(math.radians(30)), abs=1e-4)
    assert reading(sensor, 0.0, z=0.1) == -math.inf  # nearer than 0.2 m (REP-117)
    assert reading(sensor, 0.0, z=41.0) == math.inf  # beyond 40 m
    assert reading(sensor, 0.0, z=5.0, orientation=quat_from_rpy(math.pi, 0, 0)) == math.inf  # upside down: sky


def first_return_over_a_box_edge(d: float, half_fov: float) -> float:
    """Nearest point of the box inside the cone, the sensor ``d`` beside the edge (> 0) or over the box (< 0)."""
    depth = HEIGHT - BOX_TOP
    if d <= 0:
        return depth  # over the box top
    if d <= depth * math.tan(half_fov):
        return math.hypot(d, depth)  # the top edge is inside the cone: it is the nearest point
    if d < HEIGHT * math.tan(half_fov):
        return d / math.sin(half_fov)  # only the side face is: nearest along the cone's rim
    return HEIGHT  # the box is out of the cone: the ground below


def test_a_first_return_cone_over_a_box_edge_reads_the_nearest_point_of_the_box(box_scene):
    fov = 20.0
    sensor = DistanceSensor(DistanceSensorParams(field_of_view_deg=fov, cone_rays=400), box_scene)
    half = math.radians(fov / 2)
    # edge enters the cone at d = 0.353 m; the side face leaves it at d = 0.529 m
    for d in (-0.5, 0.0, 0.05, 0.15, 0.25, 0.34, 0.4, 0.5, 0.6, 1.0):
        expected = first_return_over_a_box_edge(d, half)
        got = reading(sensor, -d)
        # 400 rays sample the cone: the nearest ray that meets the box lies up to about one ray spacing
        # (tan(fov / 2) sqrt(pi / 400) = 0.016 rad) beyond the exact nearest direction, a longer path by < 2 %
        assert expected - 1e-4 <= got <= expected * 1.02, (d, got, expected)
    readings = [reading(sensor, -d) for d in np.linspace(-0.2, 0.8, 41)]
    assert np.all(np.diff(readings) >= -1e-3)  # moving off the box the reading only grows, and smoothly:
    assert max(np.diff(readings)) < 0.3  # no jump from 2 m to 3 m as a single ray would make (see below)
    single = DistanceSensor(DistanceSensorParams(), box_scene)
    assert reading(single, -0.01) == pytest.approx(HEIGHT, abs=1e-4)  # AirSim's single ray: ground just past the edge


def test_a_spot_mean_over_a_box_edge_weights_each_surface_by_its_returned_energy(box_scene):
    params = DistanceSensorParams(field_of_view_deg=10.0, cone_rays=301, return_mode="mean")
    sensor = DistanceSensor(params, box_scene)
    depth, ground = HEIGHT - BOX_TOP, HEIGHT
    x0 = -0.05  # the sensor just beside the edge: the rays leaning far enough toward +x land on the box top
    cos_down = sensor.directions_sensor[:, 0]  # the sensor's x axis points down: a ray's downward cosine
    toward_box = sensor.directions_sensor[:, 2]  # its sensor z component points along world +x
    # A ray leaning toward +x reaches the box's plane x = 0 after dropping -x0 cos_down / toward_box: on the top if
    # it has dropped less than `depth` by then, on the side face if it is still above the ground, else the ground.
    drop_at_edge = np.where(toward_box > 0, -x0 * cos_down / np.maximum(toward_box, 1e-12), np.inf)
    on_top, on_side = drop_at_edge <= depth, (drop_at_edge > depth) & (drop_at_edge < ground)
    assert 0.2 < on_top.mean() < 0.8 and on_side.any()
    r = np.where(on_top, depth / cos_down, np.where(on_side, -x0 / np.maximum(toward_box, 1e-12), ground / cos_down))
    cos_incidence = np.where(on_side, toward_box, cos_down)
    plastic, cement = (box_scene.material(m).lidar_reflectivity for m in ("plastic", "cement"))
    weight = np.where(on_top | on_side, plastic, cement) * cos_incidence / r**2  # lidar equation: rho |cos theta| / r^2
    expected = float(np.sum(weight * r) / np.sum(weight))
    got = reading(sensor, x0)
    assert got == pytest.approx(expected, abs=1e-3)
    assert depth + 0.1 < got < ground - 0.1  # between the two surfaces, as a time-of-flight module's mixed pixel
    assert reading(sensor, 1.0) == pytest.approx(depth, rel=2e-3)  # whole spot on the box


def test_noise_has_the_configured_spread_and_the_same_seed_repeats_it():
    params = load_preset(DistanceSensorParams, "tfmini_plus")
    sensor = DistanceSensor(params, load_scene("empty"))
    values = np.array([reading(sensor, 0.0, z=4.0) for _ in range(2000)])
    assert values.std() == pytest.approx(params.noise_std_m, rel=0.1)
    assert abs(values.mean() - 4.0) < 4 * params.noise_std_m / math.sqrt(len(values)) + 4.0 * 5e-4  # + the cone's slant
    sensor.reset()
    assert reading(sensor, 0.0, z=4.0) == values[0]


@pytest.mark.parametrize("height", [0.11, 11.99])  # TFmini Plus: 0.1-12 m, sigma 2.5 cm; 0.4 sigma inside a limit
def test_a_noisy_reading_near_a_limit_is_in_range_or_rep117_infinity_never_outside(height):
    params = load_preset(DistanceSensorParams, "tfmini_plus")
    sensor = DistanceSensor(params, load_scene("empty"))
    values = np.array([reading(sensor, 0.0, z=height) for _ in range(2000)])
    finite = values[np.isfinite(values)]
    assert np.all((finite >= params.min_range_m) & (finite <= params.max_range_m))
    near_min = height < 1
    beyond = values == (-math.inf if near_min else math.inf)
    assert not np.any(np.isinf(values) & ~beyond)  # only -inf near the near limit, only +inf near the far one
    # The noise acts on what is measured, so the share pushed past the limit is the normal tail beyond it
    # (the noise-free reading includes the cone's slant, a few mm at 12 m).
    true = reading(DistanceSensor(dataclasses.replace(params, noise_std_m=0.0), load_scene("empty")), 0.0, z=height)
    margin = (true - params.min_range_m) if near_min else (params.max_range_m - true)
    expected = 0.5 * math.erfc(margin / params.noise_std_m / math.sqrt(2))
    assert 0.25 < expected < 0.45
    assert beyond.mean() == pytest.approx(expected, abs=4 * math.sqrt(expected * (1 - expected) / len(values)))


@pytest.mark.parametrize("values, name", [
    ({"field_of_view_deg": 200.0}, "field_of_view_deg"),
    ({"cone_rays": 0}, "cone_rays"),
    ({"cone_rays": 9}, "cone_rays > 1 needs field_of_view_deg"),
    ({"min_range_m": 50.0}, "min_range_m"),
    ({"noise_std_m": -1.0}, "noise_std_m"),
    ({"return_mode": "strongest"}, "return_mode"),
    ({"rate_hz": 0.0}, "rate_hz"),
])  # fmt: skip
def test_bad_parameters_are_one_clear_error(values, name):
    with pytest.raises(ParamsError, match=name):
        params_from_mapping(DistanceSensorParams, values)
