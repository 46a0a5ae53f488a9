"""Camera model: depth is the geometry's distance, segmentation marks exactly the object, K reprojects."""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

from aerial_sim.world.camera import CameraModel, CameraParams
from aerial_sim.world.rotations import quaternion_to_matrix
from aerial_sim.world.scene import load_scene

LEVEL = (1.0, 0.0, 0.0, 0.0)


def yaw_pitch_quaternion(yaw: float, pitch: float) -> tuple[float, float, float, float]:
    """q = q_z(yaw) * q_y(pitch), (w, x, y, z)."""
    cy, sy, cp, sp = math.cos(yaw / 2), math.sin(yaw / 2), math.cos(pitch / 2), math.sin(pitch / 2)
    return (cy * cp, -sy * sp, cy * sp, sy * cp)


def scene_from(tmp_path, objects: str):
    path = tmp_path / "test_scene.yaml"
    path.write_text("ground: {segmentation_id: 1, material: cement}\nobjects:\n" + textwrap.indent(textwrap.dedent(objects), "  "))
    return load_scene(str(path))


@pytest.fixture(scope="module")
def corridor():
    return load_scene("corridor")


@pytest.mark.parametrize("distance", [0.5, 3.0, 7.9])
def test_planar_depth_of_a_square_on_wall_is_its_distance_at_every_pixel(corridor, distance):
    camera = CameraModel(CameraParams(), corridor)
    # Plastic wall front face at x = 10; camera 0.1 m ahead of base_link; z = 6 keeps the ground out of view.
    frame = camera.render((10.0 - distance - 0.1, 0.0, 6.0), LEVEL)
    assert frame.depth.shape == (320, 460) and frame.depth.dtype == np.float32
    assert np.abs(frame.depth - distance).max() < 1e-3
    assert (frame.segmentation == 10).all()


def test_perspective_depth_is_ray_length_growing_toward_the_edges(corridor):
    distance = 4.0
    camera = CameraModel(CameraParams(depth_mode="perspective"), corridor)
    depth = camera.render((10.0 - distance - 0.1, 0.0, 6.0), LEVEL).depth
    v, u = np.mgrid[0:320, 0:460]
    expected = distance * np.sqrt(1 + ((u - camera.cx) / camera.fx) ** 2 + ((v - camera.cy) / camera.fy) ** 2)
    assert np.abs(depth - expected).max() < 1e-3
    # At the image's left/right edge the ray is 45 degrees off axis (hfov 90): sqrt(2) further.
    assert depth[160, 0] > 1.38 * distance and depth[160, 229] < 1.0001 * distance
    centre_row = depth[160]
    assert (np.diff(centre_row[:230]) < 0).all() and (np.diff(centre_row[230:]) > 0).all()


def cross_2d(a, b) -> float:
    return a[0] * b[1] - a[1] * b[0]


def convex_hull(points: np.ndarray) -> np.ndarray:
    """Andrew's monotone chain, counter-clockwise in (u, v) coordinates."""
    pts = sorted(map(tuple, points))

    def half(seq):
        out = []
        for p in seq:
            while len(out) >= 2 and cross_2d(np.subtract(out[-1], out[-2]), np.subtract(p, out[-2])) <= 0:
                out.pop()
            out.append(p)
        return out[:-1]

    return np.array(half(pts) + half(pts[::-1]))


def signed_distance_inside(hull: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Distance of points inside the convex polygon from its border (negative outside)."""
    best = np.full(len(points), np.inf)
    for a, b in zip(hull, np.roll(hull, -1, axis=0)):
        edge = b - a
        normal = np.array([-edge[1], edge[0]]) / np.linalg.norm(edge)  # inward for counter-clockwise
        best = np.minimum(best, (points - a) @ normal)
    return best


def test_segmentation_marks_exactly_the_pixels_of_a_box(tmp_path):
    scene = scene_from(tmp_path, """
        - {name: crate, shape: box, size: [1.5, 1.0, 2.0], position: [6.0, 1.2, 2.5], yaw_deg: 30,
           segmentation_id: 42, material: plastic}
    """)
    camera = CameraModel(CameraParams(), scene)
    pose = ((0.0, 0.0, 2.0), yaw_pitch_quaternion(math.radians(5), math.radians(-3)))
    segmentation = camera.render(*pose).segmentation
    corners = np.array([[sx, sy, sz] for sx in (-0.75, 0.75) for sy in (-0.5, 0.5) for sz in (-1.0, 1.0)])
    R = quaternion_to_matrix(scene.objects[0].quaternion)
    hull = convex_hull(camera.project(corners @ R.T + scene.objects[0].position, *pose))
    v, u = np.mgrid[0:320, 0:460]
    inside = signed_distance_inside(hull, np.stack([u.ravel(), v.ravel()], axis=1)).reshape(u.shape)
    marked = segmentation == 42
    assert marked.sum() > 1000
    assert marked[inside > 0.5].all(), "pixels well inside the projected box are not marked"
    assert not marked[inside < -0.5].any(), "pixels outside the projected box are marked"
    u_min, v_min = hull.min(axis=0)
    u_max, v_max = hull.max(axis=0)
    rows, cols = np.nonzero(marked)
    assert cols.min() >= math.floor(u_min) and cols.max() <= math.ceil(u_max)
    assert rows.min() >= math.floor(v_min) and rows.max() <= math.ceil(v_max)
    # Around the box: ground below the horizon (id 1), sky above (id 0).
    assert segmentation[-1, 0] == 1 and segmentation[0, 0] == 0


@pytest.mark.parametrize("yaw_deg, pitch_deg", [(0.0, 0.0), (20.0, 10.0), (-25.0, -15.0)])
def test_camera_info_reprojects_a_point_to_where_it_appears(tmp_path, yaw_deg, pitch_deg):
    target = np.array([4.0, 1.0, 3.0])
    scene = scene_from(tmp_path, f"""
        - {{name: marker, shape: sphere, radius: 0.04, position: {target.tolist()}, segmentation_id: 7}}
    """)
    camera = CameraModel(CameraParams(width=640, height=480, hfov_deg=70.0), scene)
    # Aim the vehicle at the target, then turn it by (yaw, pitch), within the 70 x 55 degree field of view.
    position = np.array([0.5, -0.5, 1.8])
    bearing = target - position
    yaw = math.atan2(bearing[1], bearing[0]) + math.radians(yaw_deg)
    pitch = -math.atan2(bearing[2], math.hypot(*bearing[:2])) + math.radians(pitch_deg)
    orientation = yaw_pitch_quaternion(yaw, pitch)
    frame = camera.render(position, orientation)
    rows, cols = np.nonzero(frame.segmentation == 7)
    assert len(rows) > 5
    # Reproject with nothing but CameraInfo's K and the documented optical frame convention.
    info = camera.camera_info()
    K = np.array(info["k"]).reshape(3, 3)
    assert np.allclose(np.array(info["p"]).reshape(3, 4)[:, :3], K) and info["d"] == [0.0] * 5
    R_world_base = quaternion_to_matrix(orientation)
    camera_origin = position + R_world_base @ np.array([0.1, 0.0, 0.0])
    x_fwd, y_left, z_up = R_world_base.T @ (target - camera_origin)
    uvw = K @ np.array([-y_left, -z_up, x_fwd])
    u, v = uvw[:2] / uvw[2]
    assert abs(cols.mean() - u) < 0.5 and abs(rows.mean() - v) < 0.5
    assert frame.depth[int(round(v)), int(round(u))] == pytest.approx(x_fwd - 0.04, abs=0.01)


def test_no_return_is_plus_inf_and_too_near_is_minus_inf(corridor):
    camera = CameraModel(CameraParams(min_range_m=0.2), corridor)
    up = yaw_pitch_quaternion(0.0, -math.pi / 2)  # camera axis straight up, walls out of view: sky only
    assert np.isposinf(camera.render((-30.0, 0.0, 2.0), up).depth).all()
    assert np.isneginf(camera.render((10.0 - 0.1 - 0.1, 0.0, 6.0), LEVEL).depth).all()
    far = CameraModel(CameraParams(max_range_m=5.0), corridor)
    assert np.isposinf(far.render((10.0 - 6.0 - 0.1, 0.0, 6.0), LEVEL).depth).all()


def test_colour_follows_lambert_shading_and_sky(tmp_path):
    scene = scene_from(tmp_path, "[]")
    params = CameraParams(sun_direction_enu=(0.0, 0.0, 1.0), ambient=0.3)
    camera = CameraModel(params, scene)
    pitch_down = yaw_pitch_quaternion(0.0, math.radians(30))
    colour = camera.render((0.0, 0.0, 5.0), pitch_down).color
    assert colour.shape == (320, 460, 3) and colour.dtype == np.uint8
    assert (colour[0, 0] == params.sky_color).all()
    # Sun overhead: ground at full brightness, in the material's two checker tones.
    albedo = np.array(scene.material("cement").color, float)
    tones = {tuple(np.round(albedo * k).astype(int)) for k in (1.0, 0.85)}
    bottom = {tuple(int(c) for c in px) for px in colour[-1]}
    assert bottom <= {tuple(t + d for t in tone) for tone in tones for d in (-1, 0, 1)} | tones
    # Sun at the horizon: ground only gets the ambient share.
    dim = CameraModel(CameraParams(sun_direction_enu=(1.0, 0.0, 0.0), ambient=0.3), scene)
    assert dim.render((0.0, 0.0, 5.0), pitch_down).color[-1].max() <= round(0.3 * albedo.max()) + 1


@pytest.mark.parametrize("scene_name", ["urban", "corridor", "empty"])
def test_compiled_renderer_gives_the_numpy_reference_images(scene_name):
    """The compiled path (rasteriser and numba shading) against the Embree ray caster and NumPy shading it
    replaced: the same surface at every pixel but those within rounding of a silhouette edge, the same
    depth to float32 rounding of the plane intersection, colour within one level but on facet edges."""
    camera = CameraModel(CameraParams(width=96, height=64), load_scene(scene_name))
    poses = [((0.0, 0.0, 2.0), LEVEL), ((5.9, 0.0, 1.5), yaw_pitch_quaternion(0.4, 0.3)),
             ((3.0, -2.0, 15.0), (0.92, 0.1, 0.3, 0.2)), ((1.0, 1.0, -0.5), yaw_pitch_quaternion(2.0, -0.6))]
    for position, orientation in poses:  # the last one looks at the ground from below
        compiled = camera.render(position, orientation)
        reference = camera.render(position, orientation, reference=True)
        same = compiled.segmentation == reference.segmentation
        assert same.mean() > 0.999
        assert_same_depth(compiled.depth[same], reference.depth[same])
        assert (np.abs(compiled.color.astype(int) - reference.color) > 1).any(axis=-1).mean() < 2e-3
        depth_only = camera.render(position, orientation, segmentation=False, color=False)  # no normals
        np.testing.assert_array_equal(depth_only.depth, compiled.depth)
    hits = camera.caster.cast((0.0, 0.0, 2.0), camera._unit_rays_optical)
    expected = camera.caster.cast((0.0, 0.0, 2.0), camera._unit_rays_optical, reference=True)
    np.testing.assert_array_equal(hits.normal, expected.normal)


def assert_same_depth(depth, expected):
    """Equal infinities, finite depths within a few float32 roundings (relative 1e-5)."""
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(depth[~finite], expected[~finite])
    np.testing.assert_allclose(depth[finite], expected[finite], rtol=1e-5)


@pytest.mark.parametrize("yaw_deg, pitch_deg", [(0.0, 0.0), (37.0, 21.0), (-80.0, -40.0)])
def test_camera_inside_a_box_sees_its_walls_at_their_distance_in_every_direction(tmp_path, yaw_deg, pitch_deg):
    """Every wall triangle crosses the camera's plane here, so each is clipped at the near plane before it is
    drawn: no pixel may show the sky or a gap, and depth must be the analytic distance to the nearest wall."""
    scene = scene_from(tmp_path, """
        - {name: room, shape: box, size: [8.0, 6.0, 4.0], position: [0.0, 0.0, 3.0], segmentation_id: 5}
    """)
    camera = CameraModel(CameraParams(width=120, height=90, depth_mode="perspective", max_range_m=50.0), scene)
    position = np.array([0.7, -0.4, 2.6])
    orientation = yaw_pitch_quaternion(math.radians(yaw_deg), math.radians(pitch_deg))
    frame = camera.render(position, orientation)
    assert (frame.segmentation == 5).all()
    R_world_optical, origin = camera.optical_pose(position, orientation)
    rays = camera._unit_rays_optical.astype(float) @ R_world_optical.T
    low, high = np.array([-4.0, -3.0, 1.0]), np.array([4.0, 3.0, 5.0])
    with np.errstate(divide="ignore"):
        exits = np.where(rays > 0, (high - origin) / rays, (low - origin) / rays)
    expected = exits.min(axis=1).reshape(frame.depth.shape)
    np.testing.assert_allclose(frame.depth, expected, rtol=1e-5)
    reference = camera.render(position, orientation, reference=True)
    assert_same_depth(frame.depth, reference.depth)


def test_back_faces_of_closed_objects_are_skipped_and_the_images_stay_the_same():
    """A closed, outward-wound mesh's faces turned away from a camera outside it are never the first hit: the
    rasteriser skips them (back-face culling), and the visibility buffer is what drawing both sides gives."""
    import trimesh

    from aerial_sim.world.closed_surfaces import closed_outward, closed_rows
    from aerial_sim.world.pinhole_rasterizer import PinholeRasterizer
    from aerial_sim.world.surface_tables import render_surfaces

    box = np.asarray(trimesh.creation.box(extents=(2.0, 3.0, 4.0)).triangles)
    assert closed_outward(box)
    assert not closed_outward(box[:-1])  # a face missing: open
    assert not closed_outward(box[:, ::-1])  # wound inward
    scene = load_scene("urban")
    closed = closed_rows(scene)
    surfaces, lod = render_surfaces(scene)
    assert closed[surfaces.surface >= 2].mean() > 0.9 and not closed[surfaces.surface == 1].any()
    camera = CameraModel(CameraParams(width=96, height=64), scene)
    both_sides = PinholeRasterizer(surfaces.triangles, surfaces.surface, camera.caster.ground_plane, lod)
    p = camera.params
    for position, orientation in [((0.0, 0.0, 2.0), LEVEL), ((3.0, -2.0, 15.0), (0.92, 0.1, 0.3, 0.2))]:
        R_world_optical, origin = camera.optical_pose(position, orientation)
        directions = camera._world_rays(R_world_optical)
        args = (origin, R_world_optical, (camera.fx, camera.fy, camera.cx, camera.cy), (p.width, p.height),
                directions, camera._unit_rays_optical)
        culled = camera.caster.rasterizer.hits(*args).triangle.copy()
        np.testing.assert_array_equal(culled, both_sides.hits(*args).triangle)


def test_a_pose_renders_the_same_images_whatever_the_camera_rendered_before(tmp_path):
    """The camera node renders a warm-up frame before its first odometry (its renderer builds the rasteriser,
    the levels of detail and the sun's view on its first frame): every image of a pose must be what a fresh
    camera's first frame at that pose is, to the bit, in a lit, shadowed, fogged scene."""
    from aerial_sim.paths import config_path

    urban = config_path("scenes/urban.yaml")
    text = urban.read_text().replace("file: meshes/", f"file: {urban.parent}/meshes/")
    path = tmp_path / "urban_lit.yaml"
    path.write_text(text + 'lighting: {time_of_day: "2026-06-21 17:00:00", shadows: true, fog_density_per_m: 0.002}\n')
    images = dict(depth=True, segmentation=True, color=True, instance=True, normals=True)
    pose = ((3.0, -2.0, 15.0), (0.92, 0.1, 0.3, 0.2))
    cold = CameraModel(CameraParams(width=96, height=64), load_scene(str(path)))
    first = cold.render(*pose, **images)
    warm = CameraModel(CameraParams(width=96, height=64), load_scene(str(path)))
    warm.render((0.0, 0.0, 20.0), (math.cos(math.radians(15)), 0.0, math.sin(math.radians(15)), 0.0), **images)
    again = warm.render(*pose, **images)
    assert (first.segmentation > 1).mean() > 0.2 and (first.color.std() > 10)  # buildings in view, not a flat image
    for name in images:
        np.testing.assert_array_equal(getattr(again, name), getattr(first, name), err_msg=name)
