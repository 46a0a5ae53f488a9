"""Images that look like the world: the sun from the time of day, shadows, fog, exposure, antialiasing.

Depth and segmentation never change with the lighting; the same pose renders the same image.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

from aerial_sim.config import ParamsError
from aerial_sim.world.camera import CameraModel, CameraParams
from aerial_sim.world.lighting import parse_time_of_day, sun_position
from aerial_sim.world.scene import load_scene

DOWN = (math.cos(math.pi / 4), 0.0, math.sin(math.pi / 4), 0.0)  # pitch +90 deg: camera looking straight down
LEVEL = (1.0, 0.0, 0.0, 0.0)


def scene_from(tmp_path, lighting: str, objects: str = "[]"):
    path = tmp_path / "lit.yaml"
    path.write_text(textwrap.dedent(f"""\
        ground: {{material: cement, checker_size_m: 0}}
        lighting: {lighting}
        objects: {objects}
    """))
    return load_scene(str(path))


def test_sun_at_local_solar_noon_of_the_june_solstice_is_due_south_at_90_minus_latitude_plus_tilt():
    latitude, longitude = 47.641468, -122.140165
    azimuth, elevation = sun_position(parse_time_of_day("2026-06-21 12:00:00", longitude), latitude, longitude)
    # Solar noon: the sun crosses the meridian at 90 - (latitude - declination), declination 23.44 deg;
    # the equation of time (-1.7 min on 21 June, 0.4 deg of hour angle) moves it about 1 deg in azimuth
    # this high in the sky.
    assert azimuth == pytest.approx(180.0, abs=2.0)
    assert elevation == pytest.approx(90.0 - latitude + 23.44, abs=0.3)
    # An explicit UTC offset is that instant: 12:00 at UTC-8 is 20:00 UTC.
    assert parse_time_of_day("2026-06-21T12:00:00-08:00", 0.0).hour == 20
    with pytest.raises(ParamsError, match="time_of_day"):
        parse_time_of_day("noon", 0.0)


def test_a_box_shadow_falls_where_the_sun_direction_puts_it(tmp_path):
    scene = scene_from(tmp_path, '{time_of_day: "2026-06-21 16:00:00", shadows: true}',
                       "[{name: tower, shape: box, size: [2, 2, 4], position: [0, 0, 2], segmentation_id: 5}]")
    params = CameraParams(width=200, height=200, hfov_deg=90.0, ambient=0.3, mount_position_m=(0.0, 0.0, 0.0))
    camera = CameraModel(params, scene)
    sun = camera.sun_direction
    assert 0.2 < sun[2] < 0.9 and sun[0] < -0.3  # afternoon: the sun in the west, part way up
    position = (0.0, 0.0, 30.0)
    frame = camera.render(position, DOWN)
    away = -sun[:2] / np.linalg.norm(sun[:2])  # the shadow points away from the sun
    reach = 4.0 / math.tan(math.asin(sun[2]))  # the top edge's shadow is this far beyond the foot
    albedo = np.array(scene.material("cement").color, float)
    lit = np.round(albedo * (0.3 + 0.7 * sun[2]))
    dark = np.round(albedo * 0.3)

    def colour_at(distance):
        # Centre line of the shadow, measured from the box's centre.
        point = np.array([*(away * distance), 0.0])
        col, row = np.round(camera.project(point, position, DOWN)[0]).astype(int)
        assert frame.segmentation[row, col] == 1  # the ground, not the box
        return frame.color[row, col].astype(float)

    for distance in (2.0, 1.0 + 0.5 * reach, 0.5 + reach):
        assert np.abs(colour_at(distance) - dark).max() <= 1, distance
    for distance in (1.5 + reach, 3.0 + reach):
        assert np.abs(colour_at(distance) - lit).max() <= 1, distance
    point = np.array([*(-away * 3.0), 0.0])  # on the sunny side
    col, row = np.round(camera.project(point, position, DOWN)[0]).astype(int)
    assert np.abs(frame.color[row, col] - lit).max() <= 1
    # The NumPy reference casts the same shadow rays.
    reference = camera.render(position, DOWN, reference=True)
    assert (np.abs(reference.color.astype(int) - frame.color) > 1).any(axis=-1).mean() < 2e-3


def test_shadows_answered_in_the_suns_view_are_the_ray_casters_shadows(tmp_path):
    """The compiled shadow test (in the sun's view, against the casters binned per sun direction) hides exactly the
    points Embree's occlusion query hides, over towers at odd angles, spheres and a sunlit wall seen up close."""
    rng = np.random.default_rng(7)
    objects = [f"{{name: t{k}, shape: box, size: [{rng.uniform(1, 6):.2f}, {rng.uniform(1, 6):.2f}, "
               f"{rng.uniform(3, 25):.2f}], position: [{rng.uniform(-60, 60):.1f}, {rng.uniform(5, 120):.1f}, 8], "
               f"yaw_deg: {rng.uniform(0, 90):.0f}, segmentation_id: 5}}" for k in range(40)]
    objects += [f"{{name: s{k}, shape: sphere, radius: 2, position: [{rng.uniform(-30, 30):.1f}, "
                f"{rng.uniform(5, 60):.1f}, 3], segmentation_id: 6}}" for k in range(6)]
    scene = scene_from(tmp_path, '{time_of_day: "2026-06-21 17:30:00", shadows: true}', "[" + ", ".join(objects) + "]")
    camera = CameraModel(CameraParams(width=160, height=120), scene)
    checked = shadowed = 0
    for yaw in (60.0, 90.0, 135.0):
        orientation = (math.cos(math.radians(yaw) / 2), 0.0, 0.0, math.sin(math.radians(yaw) / 2))
        R_world_optical, origin = camera.optical_pose((0.0, 0.0, 6.0), orientation)
        directions = camera._world_rays(R_world_optical)
        hits = camera.caster.cast(origin, directions)
        compiled = camera._sun_visibility(origin, directions, hits)
        reference = camera._sun_visibility(origin, directions, hits, reference=True)
        assert (compiled != reference).mean() < 1e-3, yaw  # at most a pixel on an edge, in rounding
        checked, shadowed = checked + len(compiled), shadowed + int((reference == 0).sum())
    assert shadowed > 0.03 * checked  # the towers really cast shadows into the view


@pytest.mark.parametrize("relief_m, samples", [(1.0, 17), (40.0, 17), (40.0, 129)])
def test_terrain_shadows_are_the_ray_casters_whether_or_not_the_terrain_is_steeper_than_the_sun(tmp_path, relief_m,
                                                                                                  samples):
    """A gentle terrain (every slope below the sun's) is left out of the shadow test, a steep one is not; either
    way the shadows are the ones Embree's shadow rays find (a steep relief shades itself in a low sun), also over a
    fine steep relief (many casters near every ray)."""
    from PIL import Image

    rng = np.random.default_rng(11)
    Image.fromarray((rng.uniform(0, 1, (samples, samples)) * 65535).astype(np.uint16)).save(tmp_path / "relief.png")
    path = tmp_path / "relief.yaml"
    path.write_text(textwrap.dedent(f"""\
        ground: {{material: grass}}
        terrain: {{file: relief.png, size_m: [160, 160], height_range_m: [0, {relief_m}]}}
        lighting: {{time_of_day: "2026-06-21 18:30:00", shadows: true}}
        objects: [{{name: tower, shape: box, size: [4, 4, 30], position: [0, 30, 15], segmentation_id: 5}}]
    """))
    scene = load_scene(str(path))
    camera = CameraModel(CameraParams(width=120, height=90, mount_rpy_deg=(0.0, 30.0, 0.0)), scene)
    orientation = (math.cos(math.radians(45)), 0.0, 0.0, math.sin(math.radians(45)))  # looking north
    R_world_optical, origin = camera.optical_pose((0.0, -50.0, relief_m + 25.0), orientation)
    directions = camera._world_rays(R_world_optical)
    hits = camera.caster.cast(origin, directions)
    compiled = camera._sun_visibility(origin, directions, hits)
    reference = camera._sun_visibility(origin, directions, hits, reference=True)
    assert (compiled != reference).mean() < 1e-3
    terrain_in_shadow = ((reference == 0) & (hits.surface == 1)).mean()
    sun = camera.sun_direction
    sun_slope = sun[2] / math.hypot(sun[0], sun[1])
    if relief_m > 10:
        assert camera.caster._terrain_slope > sun_slope and terrain_in_shadow > 0.05  # hills shade the ground
    else:
        assert camera.caster._terrain_slope < sun_slope and 0 < terrain_in_shadow < 0.05  # only the tower's shadow


def test_night_has_no_direct_light_and_depth_and_segmentation_ignore_the_lighting(tmp_path):
    objects = "[{name: tower, shape: box, size: [2, 2, 4], position: [8, 0, 2], segmentation_id: 5}]"
    plain = CameraModel(CameraParams(width=96, height=64), scene_from(tmp_path, "{}", objects))
    night = CameraModel(CameraParams(width=96, height=64), scene_from(
        tmp_path, '{time_of_day: "2026-12-21 01:00:00", shadows: true, fog_density_per_m: 0.05, exposure_ev: 1,'
                  ' antialiasing: 2, sky_zenith_color: [10, 20, 40]}', objects))
    a, b = plain.render((0.0, 0.0, 1.5), LEVEL), night.render((0.0, 0.0, 1.5), LEVEL)
    assert np.array_equal(a.depth, b.depth) and np.array_equal(a.segmentation, b.segmentation)
    assert b.color.shape == a.color.shape
    ground = a.segmentation == 1
    assert b.color[ground].mean() < 0.6 * a.color[ground].mean()
    # Lockstep: the same pose renders the same image, byte for byte.
    assert np.array_equal(night.render((0.0, 0.0, 1.5), LEVEL).color, b.color)


def test_fog_takes_far_surfaces_to_the_fog_colour_by_beer_lambert(tmp_path):
    fog = (200, 210, 225)
    scene = scene_from(tmp_path, "{fog_density_per_m: 0.1}",
                       "[{name: wall, shape: box, size: [0.2, 40, 40], position: [20.1, 0, 0], segmentation_id: 5}]")
    camera = CameraModel(CameraParams(width=64, height=48, sun_direction_enu=(-1.0, 0.0, 0.0), ambient=0.0), scene)
    frame = camera.render((0.0, 0.0, 5.0), LEVEL)
    row, col = 24, 32
    distance = frame.depth[row, col] / camera._planar_per_metre.reshape(48, 64)[row, col]
    albedo = np.array(scene.material("default").color, float)
    transmittance = math.exp(-0.1 * distance)
    expected = albedo * transmittance + np.array(fog) * (1 - transmittance)
    assert np.abs(frame.color[row, col] - expected).max() <= 1.5


def test_bad_lighting_is_one_error_naming_the_field(tmp_path):
    for body, error in [('{time_of_day: "dawn"}', "time_of_day"), ("{fog_density_per_m: -1}", "fog_density_per_m"),
                        ("{antialiasing: 9}", "antialiasing"), ("{sun: 3}", "sun: unknown parameter")]:
        with pytest.raises(ParamsError, match=error):
            scene_from(tmp_path, body)


def test_optical_flow_of_a_camera_translating_over_a_plane_is_the_analytic_flow(tmp_path):
    """Looking straight down from h over the ground, a translation t (no rotation) moves every ground point by
    -f t / h pixels: flow = (-f_x t_x, -f_y t_y) / h in the optical frame (x right = world -y here, y down = -x)."""
    scene = scene_from(tmp_path, "{}")
    params = CameraParams(width=120, height=90, mount_position_m=(0.0, 0.0, 0.0))
    camera = CameraModel(params, scene)
    height, step = 12.0, np.array([0.3, -0.2, 0.0])  # metres east, north per frame
    previous, current = np.array([1.0, 2.0, height]), np.array([1.0, 2.0, height]) + step
    flow = camera.optical_flow(current, DOWN, previous, DOWN)
    R_world_optical, _ = camera.optical_pose(current, DOWN)
    t_optical = R_world_optical.T @ step
    expected = (-camera.fx * t_optical[0] / height, -camera.fy * t_optical[1] / height)
    assert np.allclose(flow[..., 0], expected[0], atol=1e-3) and np.allclose(flow[..., 1], expected[1], atol=1e-3)
    assert abs(expected[0]) > 1.0 and abs(expected[1]) > 1.0  # a real motion of several pixels
    # A pure rotation moves the sky too: turning left by one pixel column's angle at the centre shifts it one
    # pixel to the right.
    level = camera.optical_flow((0.0, 0.0, 5.0), (1.0, 0.0, 0.0, 0.0), (0.0, 0.0, 5.0),
                                (math.cos(-0.5 / camera.fx), 0.0, 0.0, math.sin(-0.5 / camera.fx)))
    assert level[0, 60, 0] == pytest.approx(1.0, abs=0.01)
