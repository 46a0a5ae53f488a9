"""Worlds you can bring: textured glTF and OBJ+MTL assets, terrain from a heightmap or a GeoTIFF DEM.

Every sensor that sees the world (camera, lidar, rangefinder) and the collisions use the same
imported geometry; a bad file is one error naming it.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest
import trimesh
from PIL import Image

from aerial_sim.config import ParamsError
from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.sensors.distance import DistanceSensor, DistanceSensorParams
from aerial_sim.sensors.mounting import Mount
from aerial_sim.sensors.truth import TruthSample
from aerial_sim.world.camera import CameraModel, CameraParams
from aerial_sim.world.colliders import scene_colliders
from aerial_sim.world.ray_caster import ray_caster_of
from aerial_sim.world.rotations import quaternion_to_matrix
from aerial_sim.world.scene import load_scene

LEVEL = (1.0, 0.0, 0.0, 0.0)
NORTH = (math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4))  # yaw 90 deg: looking north
#: Colours of the texture's four quadrants: (u < 0.5, v >= 0.5) top-left, top-right, bottom-left, bottom-right.
QUADRANTS = {(0.25, 0.75): (220, 30, 30), (0.75, 0.75): (30, 200, 40), (0.25, 0.25): (40, 60, 230), (0.75, 0.25): (240, 240, 240)}


def quadrant_texture(size: int = 16) -> np.ndarray:
    image = np.empty((size, size, 3), np.uint8)
    half = size // 2
    image[:half, :half] = QUADRANTS[(0.25, 0.75)]
    image[:half, half:] = QUADRANTS[(0.75, 0.75)]
    image[half:, :half] = QUADRANTS[(0.25, 0.25)]
    image[half:, half:] = QUADRANTS[(0.75, 0.25)]
    return image


def write_textured_quad_glb(path) -> None:
    """A 2 m x 2 m quad in glTF's x-y plane (+Y up: it stands upright, facing +z -> scene -y), uv (0,0) bottom-left."""
    vertices = np.array([[-1.0, -1.0, 0.0], [1.0, -1.0, 0.0], [1.0, 1.0, 0.0], [-1.0, 1.0, 0.0]])
    faces = np.array([[0, 1, 2], [0, 2, 3]])
    uv = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    material = trimesh.visual.material.PBRMaterial(baseColorTexture=Image.fromarray(quadrant_texture()),
                                                   baseColorFactor=[255, 255, 255, 255], metallicFactor=0.0,
                                                   roughnessFactor=1.0)
    mesh = trimesh.Trimesh(vertices, faces, visual=trimesh.visual.TextureVisuals(uv=uv, material=material),
                           process=False)
    path.write_bytes(trimesh.Scene(mesh).export(file_type="glb"))


def scene_file(tmp_path, body: str, name: str = "world.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


@pytest.fixture(scope="module")
def quad_scene(tmp_path_factory):
    folder = tmp_path_factory.mktemp("quad")
    write_textured_quad_glb(folder / "quad.glb")
    return load_scene(str(scene_file(folder, """\
        objects:
          - {name: poster, shape: mesh, file: quad.glb, scale: 2.0, position: [0, 10, 5], segmentation_id: 7}
    """)))


@pytest.mark.parametrize("reference", [False, True])
def test_textured_gltf_quad_shows_its_texture_at_known_uvs(quad_scene, reference):
    # Lit head-on with no ambient, a rough dielectric (glTF BRDF, render_kernels): the texture c, less the 4 % its
    # surface reflects (F0 = 0.04 at normal incidence), plus that 4 % spread by roughness 1 (pi D G / 4 = 1 / 4).
    camera = CameraModel(CameraParams(sun_direction_enu=(0.0, -1.0, 0.0), ambient=0.0), quad_scene)
    position = (0.0, 0.0, 5.0)
    frame = camera.render(position, NORTH, reference=reference)
    for (u, v), colour in QUADRANTS.items():
        # scale 2: the quad spans x, z in [-2, 2] about (0, 10, 5); uv (0, 0) at its bottom-left (west, low).
        point = np.array([-2.0 + 4.0 * u, 10.0, 3.0 + 4.0 * v])
        col, row = np.round(camera.project(point, position, NORTH)[0]).astype(int)
        assert frame.segmentation[row, col] == 7
        expected = 0.96 * np.asarray(colour) + 0.04 * 255 / 4
        assert np.abs(frame.color[row, col] - expected).max() <= 1, ((u, v), frame.color[row, col])


def write_sphere_glb(path, metallic: float | None, roughness: float | None) -> None:
    """A unit icosphere of base colour (200, 200, 200); a factor None is left out of the file."""
    factors = {name: value for name, value in (("metallicFactor", metallic), ("roughnessFactor", roughness))
               if value is not None}
    material = trimesh.visual.material.PBRMaterial(baseColorFactor=[200, 200, 200, 255], **factors)
    mesh = trimesh.creation.icosphere(subdivisions=5)
    mesh.visual = trimesh.visual.TextureVisuals(material=material)
    path.write_bytes(trimesh.Scene(mesh).export(file_type="glb"))


def test_the_metallic_roughness_texture_makes_each_part_of_one_quad_the_material_its_texels_say(tmp_path):
    """A quad whose metallicRoughnessTexture is a smooth metal (blue 255, green 77: roughness 0.3) on its left
    half and a rough dielectric (blue 0, green 255) on its right shades each half as a quad of those factors
    does (the texture multiplies metallicFactor = roughnessFactor = 1), in the kernel and the NumPy reference."""
    vertices = np.array([[-1.0, -1.0, 0.0], [1.0, -1.0, 0.0], [1.0, 1.0, 0.0], [-1.0, 1.0, 0.0]])
    faces = np.array([[0, 1, 2], [0, 2, 3]])
    uv = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    texels = np.zeros((8, 8, 3), np.uint8)
    texels[:, :4] = (0, 77, 255)
    texels[:, 4:] = (0, 255, 0)
    quads = {"mapped": dict(metallicRoughnessTexture=Image.fromarray(texels), metallicFactor=1.0, roughnessFactor=1.0),
             "metal": dict(metallicFactor=1.0, roughnessFactor=77 / 255), "rough": dict(metallicFactor=0.0,
                                                                                      roughnessFactor=1.0)}
    frames = {}
    sun = (0.3, -0.8, 0.5)
    for name, factors in quads.items():
        material = trimesh.visual.material.PBRMaterial(baseColorFactor=[180, 120, 90, 255], **factors)
        mesh = trimesh.Trimesh(vertices, faces, visual=trimesh.visual.TextureVisuals(uv=uv, material=material),
                               process=False)
        (tmp_path / f"{name}.glb").write_bytes(trimesh.Scene(mesh).export(file_type="glb"))
        scene = load_scene(str(scene_file(tmp_path, f"""\
            objects:
              - {{name: quad, shape: mesh, file: {name}.glb, scale: 2.0, position: [0, 6, 5], segmentation_id: 7}}
        """, name=f"{name}.yaml")))
        camera = CameraModel(CameraParams(width=120, height=90, sun_direction_enu=sun, ambient=0.1), scene)
        frames[name] = [camera.render((0.0, 0.0, 5.0), NORTH, reference=r).color.astype(int) for r in (False, True)]
        assert np.abs(frames[name][0] - frames[name][1]).max() <= 1  # kernel and reference agree
    # The quad, 4 m wide 5.9 m ahead, spans columns 40-80 and rows 25-65 (f = 60 px); a texel is 5 px wide.
    left, right, rows = slice(42, 54), slice(66, 78), slice(28, 62)
    mapped, metal, rough = frames["mapped"][0], frames["metal"][0], frames["rough"][0]
    assert np.abs(mapped[rows, left] - metal[rows, left]).max() <= 2
    assert np.abs(mapped[rows, right] - rough[rows, right]).max() <= 2
    assert np.abs(metal[rows, right] - rough[rows, right]).mean() > 10  # the two materials do look different


def test_gltf_metallic_roughness_smooth_metal_shines_at_the_mirror_point_and_rough_dielectric_is_lambertian(tmp_path):
    """Two spheres under the same sun, seen by one camera: the smooth metal (metallic 1, roughness 0.3) is brightest
    where its normal is the half vector of sun and view (the mirror point) and near black where it faces the sun
    away from it (a metal has no diffuse light); the rough dielectric (metallic 0, roughness 1) is brightest where
    its normal is the sun (Lambert's law) at about its base colour. A material with no factors is the glTF
    default, a rough metal. The NumPy reference shades them alike."""
    from aerial_sim.world.assets import load_asset

    write_sphere_glb(tmp_path / "metal.glb", 1.0, 0.3)
    write_sphere_glb(tmp_path / "plastic.glb", 0.0, 1.0)
    write_sphere_glb(tmp_path / "default.glb", None, None)
    part = load_asset(tmp_path / "default.glb", "default.glb")[0]
    assert (part.metallic, part.roughness) == (1.0, 1.0)  # the glTF spec's defaults, which trimesh reports as None
    scene = load_scene(str(scene_file(tmp_path, """\
        objects:
          - {name: metal, shape: mesh, file: metal.glb, position: [-1.5, 8, 5], segmentation_id: 7}
          - {name: plastic, shape: mesh, file: plastic.glb, position: [1.5, 8, 5], segmentation_id: 8}
        lod: {enabled: false}  # the reference render draws the full spheres: so must the compiled one here
    """)))
    sun = np.array([0.5, -0.6, 0.62])
    sun /= np.linalg.norm(sun)
    camera = CameraModel(CameraParams(width=320, height=240, sun_direction_enu=tuple(sun), ambient=0.1), scene)
    position = (0.0, 0.0, 5.0)
    frame = camera.render(position, NORTH)
    reference = camera.render(position, NORTH, reference=True)
    assert np.mean(np.abs(frame.color.astype(int) - reference.color) > 1) < 1e-3
    eye = np.array(position) + (0.0, 0.1, 0.0)  # the camera: mounted 0.1 m ahead (north) of base_link
    brightness = frame.color.astype(float).mean(axis=2)
    for seg_id, centre, normal_of_peak in ((7, (-1.5, 8, 5), "half"), (8, (1.5, 8, 5), "sun")):
        centre = np.asarray(centre, float)
        view = (eye - centre) / np.linalg.norm(eye - centre)
        half = (sun + view) / np.linalg.norm(sun + view)
        normal = half if normal_of_peak == "half" else sun
        predicted = camera.project(centre + normal, position, NORTH)[0]
        mine = np.where(frame.segmentation == seg_id, brightness, -1)
        row, col = np.unravel_index(np.argmax(mine), mine.shape)
        # Facets of a 5-times subdivided icosphere span about 2 deg: the brightest lies within a few pixels.
        assert np.hypot(col - predicted[0], row - predicted[1]) <= 4.0, (seg_id, (col, row), predicted)
    metal_peak = brightness[frame.segmentation == 7].max()
    plastic_peak = brightness[frame.segmentation == 8].max()
    assert metal_peak >= 250 and 180 <= plastic_peak <= 215  # Lambert at n = s: 200 (0.1 + 0.9) x 0.96 + specular
    # Where each sphere faces the sun (Lambert's peak), the metal's mirror lobe is far: it is much darker there.
    at_sun = {seg: np.round(camera.project(np.asarray(c, float) + sun, position, NORTH)[0]).astype(int)
              for seg, c in ((7, (-1.5, 8, 5)), (8, (1.5, 8, 5)))}
    (mc, mr), (pc, pr) = at_sun[7], at_sun[8]
    assert brightness[mr, mc] < 0.5 * brightness[pr, pc]


def test_obj_with_mtl_texture_is_textured_like_the_gltf(tmp_path):
    (tmp_path / "quad.mtl").write_text("newmtl poster\nKd 1 1 1\nmap_Kd poster.png\n")
    Image.fromarray(quadrant_texture()).save(tmp_path / "poster.png")
    (tmp_path / "quad.obj").write_text(textwrap.dedent("""\
        mtllib quad.mtl
        v -1 0 -1
        v 1 0 -1
        v 1 0 1
        v -1 0 1
        vt 0 0
        vt 1 0
        vt 1 1
        vt 0 1
        usemtl poster
        f 1/1 2/2 3/3
        f 1/1 3/3 4/4
    """))
    scene = load_scene(str(scene_file(tmp_path, """\
        objects:
          - {name: poster, shape: mesh, file: quad.obj, scale: 2.0, position: [0, 10, 5], segmentation_id: 7}
    """)))
    camera = CameraModel(CameraParams(sun_direction_enu=(0.0, -1.0, 0.0), ambient=0.0), scene)
    frame = camera.render((0.0, 0.0, 5.0), NORTH)
    for (u, v), colour in QUADRANTS.items():
        col, row = np.round(camera.project(np.array([-2.0 + 4 * u, 10.0, 3.0 + 4 * v]), (0, 0, 5), NORTH)[0]).astype(int)
        assert np.abs(frame.color[row, col].astype(int) - colour).max() <= 1


def test_instance_ids_are_unique_per_object_while_class_ids_repeat(tmp_path):
    scene = load_scene(str(scene_file(tmp_path, """\
        objects:
          - {name: a, shape: box, size: [1, 1, 1], position: [6, -1.5, 0.5], segmentation_id: 5}
          - {name: b, shape: box, size: [1, 1, 1], position: [6, 0, 0.5], segmentation_id: 5}
          - {name: c, shape: box, size: [1, 1, 1], position: [6, 1.5, 0.5], segmentation_id: 5}
    """)))
    frame = CameraModel(CameraParams(width=120, height=80), scene).render((0.0, 0.0, 0.5), LEVEL, instance=True)
    assert set(np.unique(frame.segmentation[frame.segmentation > 1]).tolist()) == {5}
    instances = {scene.instance_id(k) for k in range(3)}
    assert set(np.unique(frame.instance).tolist()) >= instances and len(instances) == 3
    # Each instance is one of the three boxes: its pixels are a contiguous column band, left to right c, b, a.
    centres = [np.argwhere(frame.instance == scene.instance_id(k))[:, 1].mean() for k in range(3)]
    assert centres[2] < centres[1] < centres[0]


def test_lidar_rangefinder_and_collisions_hit_imported_geometry(quad_scene):
    caster = ray_caster_of(quad_scene)
    hits = caster.cast((0.0, 0.0, 5.0), np.array([[0.0, 1.0, 0.0]]))
    assert hits.distance[0] == pytest.approx(10.0, abs=1e-4) and hits.surface[0] == 2
    # Rangefinder mounted looking left (north for a vehicle heading east), 1 m west of the poster's centre.
    sensor = DistanceSensor(DistanceSensorParams(mount=Mount(rpy_rad=(0.0, 0.0, math.pi / 2))), quad_scene)
    range_m = sensor.step(0.02, TruthSample(0.0, position=(-1.0, 0.0, 5.0), orientation=LEVEL)).range_m
    assert range_m == pytest.approx(10.0, abs=1e-4)
    # Lidar: the shared ray caster's hits are the lidar's; its points on the poster lie in the plane y = 10.
    from aerial_sim.sensors.lidar import LidarModel, LidarParams, LidarSweeper

    sweeper = LidarSweeper(LidarModel(LidarParams(vertical_fov_upper_deg=10.0, vertical_fov_lower_deg=-10.0), quad_scene))
    scans = []
    for k in range(40):
        scans += sweeper.push(TruthSample(k / 250.0, position=(0.0, 0.0, 5.0), orientation=LEVEL))
    points = scans[0].points[0]
    on_poster = points[points["segmentation_id"] == 7]
    assert len(on_poster) > 10 and np.allclose(on_poster["y"], 10.0, atol=0.02)
    collider = scene_colliders(quad_scene)[0]
    contact = collider.contact((0.0, 10.0 - 0.15, 5.0), LEVEL, (0.2, 0.2, 0.05))
    assert contact is not None and contact.depth_m == pytest.approx(0.05, abs=1e-3)


def write_heightmap(path, values: np.ndarray) -> None:
    Image.fromarray(values.astype(np.uint16)).save(path)


def test_png_terrain_is_the_ground_for_camera_rangefinder_and_collisions(tmp_path):
    # 3 x 3 heightmap over 20 m x 20 m: a 6 m hill in the middle, flat 0 at the rim.
    values = np.zeros((3, 3))
    values[1, 1] = 65535
    write_heightmap(tmp_path / "hill.png", values)
    scene = load_scene(str(scene_file(tmp_path, """\
        ground: {material: grass}
        terrain: {file: hill.png, size_m: [20, 20], height_range_m: [0, 6]}
    """)))
    terrain = scene.terrain
    assert terrain.height_at(0.0, 0.0) == pytest.approx(6.0, abs=1e-4)
    assert terrain.height_at(5.0, 0.0) == pytest.approx(3.0, abs=1e-4)  # halfway down the facet
    assert np.isnan(terrain.height_at(50.0, 0.0))
    # The ground plane z = 0 is gone: beyond the terrain a downward ray sees nothing.
    hits = ray_caster_of(scene).cast(np.array([[0.0, 0.0, 20.0], [50.0, 0.0, 20.0]]), np.array([[0, 0, -1.0]] * 2))
    assert hits.distance[0] == pytest.approx(14.0, abs=1e-4) and hits.surface.tolist() == [1, 0]
    sensor = DistanceSensor(DistanceSensorParams(), scene)
    assert sensor.step(0.02, TruthSample(0.0, position=(0.0, 0.0, 10.0), orientation=LEVEL)).range_m == pytest.approx(
        4.0, abs=1e-4)
    frame = CameraModel(CameraParams(width=64, height=48, mount_rpy_deg=(0, 90, 0)), scene).render((0, 0, 10.0), LEVEL)
    # The camera is 0.1 m ahead of base_link, on the hill's 0.6 slope.
    assert frame.depth[24, 32] == pytest.approx(4.0 + 0.6 * 0.1, abs=0.02) and frame.segmentation[24, 32] == 1
    collider = [c for c in scene_colliders(scene) if "Terrain" in repr(c)][0]
    contact = collider.contact((0.0, 0.0, 6.0 + 0.05 - 0.02), LEVEL, (0.2, 0.2, 0.05))
    assert contact.depth_m == pytest.approx(0.02, abs=1e-3)  # the apex pokes into the middle of the bottom face
    assert collider.contact((0.0, 0.0, 7.0), LEVEL, (0.2, 0.2, 0.05)) is None
    level = collider.contact((8.0, 8.0, 0.05 - 0.01), LEVEL, (0.2, 0.2, 0.05))  # on the flat rim (a lower facet)
    assert level is not None and level.normal[2] > 0.5


def test_geotiff_dem_height_under_a_latitude_longitude_is_the_dem_value(tmp_path):
    import pymap3d
    import rasterio
    from rasterio.transform import from_origin

    home = HomePoint()
    step = 0.0002  # deg, ~15-22 m
    rows, cols = 6, 7
    rng = np.random.default_rng(3)
    dem = (home.altitude + rng.uniform(-5.0, 25.0, (rows, cols))).astype(np.float32)
    west, north = home.longitude - 3 * step, home.latitude + 3 * step
    profile = dict(driver="GTiff", width=cols, height=rows, count=1, dtype="float32",
                   transform=from_origin(west, north, step, step))
    with rasterio.open(tmp_path / "dem.tif", "w", crs="EPSG:4326", **profile) as out:
        out.write(dem, 1)
    scene = load_scene(str(scene_file(tmp_path, "terrain: {file: dem.tif}\n")), home=home)
    for row, col in [(1, 1), (2, 4), (4, 5), (3, 3)]:
        lat, lon = north - (row + 0.5) * step, west + (col + 0.5) * step
        east, north_m, up = pymap3d.geodetic2enu(lat, lon, float(dem[row, col]), home.latitude, home.longitude,
                                                 home.altitude)
        assert scene.terrain.height_at(east, north_m) == pytest.approx(up, abs=1e-3)
    # Without a CRS the DEM cannot be placed: one error naming the file.
    with rasterio.open(tmp_path / "bare.tif", "w", **profile) as out:
        out.write(dem, 1)
    with pytest.raises(ParamsError, match=r"bare\.tif.*no coordinate reference system"):
        load_scene(str(scene_file(tmp_path, "terrain: {file: bare.tif}\n", "bare.yaml")))


@pytest.mark.parametrize("files, error", [
    ({"broken.glb": b"glTF\x02\x00\x00\x00garbage"}, r"broken\.glb"),
    ({"broken.gltf": b"{not json"}, r"broken\.gltf.*not valid glTF"),
    ({"broken.gltf": b'{"asset": {"version": "2.0"}, "images": [{"uri": "gone.png"}]}'}, r"texture not found.*gone\.png"),
    ({"broken.obj": b"mtllib broken.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n",
      "broken.mtl": b"newmtl m\nmap_Kd missing.jpg\n"}, r"texture not found.*missing\.jpg"),
    ({"broken.obj": b"this is not a mesh\n"}, r"broken\.obj"),
])
def test_bad_asset_files_are_one_clear_error_naming_the_file(tmp_path, files, error):
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    mesh = next(name for name in files if not name.endswith(".mtl"))
    with pytest.raises(ParamsError, match=error):
        load_scene(str(scene_file(tmp_path, f"""\
            objects:
              - {{name: thing, shape: mesh, file: {mesh}, segmentation_id: 3}}
        """)))


def test_bad_terrain_files_are_one_clear_error_naming_the_file(tmp_path):
    (tmp_path / "rgb.png").write_bytes(b"")
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "colour.png")
    cases = [("{file: nowhere.png, size_m: [10, 10]}", r"no such terrain file.*nowhere\.png"),
             ("{file: colour.png, size_m: [10, 10]}", r"colour\.png.*single-channel"),
             ("{file: colour.png}", r"size_m: required"),
             ("{file: rgb.png, size_m: [10, 10]}", r"rgb\.png")]
    for body, error in cases:
        with pytest.raises(ParamsError, match=error):
            load_scene(str(scene_file(tmp_path, f"terrain: {body}\n")))


def test_each_2d_box_is_the_extent_of_its_object_in_the_image_and_the_3d_box_its_pose(tmp_path):
    from aerial_sim.world.labels import boxes_2d, boxes_3d

    scene = load_scene(str(scene_file(tmp_path, """\
        objects:
          - {name: crate, shape: box, size: [2, 1, 1.5], position: [10, 1, 1.0], yaw_deg: 25, segmentation_id: 5}
          - {name: ball, shape: sphere, radius: 0.8, position: [12, -3, 2.0], segmentation_id: 6}
    """)))
    camera = CameraModel(CameraParams(width=200, height=150), scene)
    position = (0.0, 0.0, 1.5)
    frame = camera.render(position, LEVEL, instance=True)
    boxes = boxes_2d(frame.instance)
    assert set(boxes) == {2, 3}
    crate = boxes_3d(scene)[2]
    assert crate.center == (10.0, 1.0, 1.0) and crate.size == (2.0, 1.0, 1.5) and crate.class_id == 5
    # The crate is fully in view: its 2D box is the extent of its 8 projected corners (to a pixel).
    R = quaternion_to_matrix(crate.orientation)
    signs = np.array([(x, y, z) for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    corners = np.asarray(crate.center) + (signs * np.asarray(crate.size) / 2) @ R.T
    uv = camera.project(corners, position, LEVEL)
    u_min, v_min, u_max, v_max, count = boxes[2]
    assert abs(u_min - uv[:, 0].min()) <= 1 and abs(u_max - uv[:, 0].max()) <= 1
    assert abs(v_min - uv[:, 1].min()) <= 1 and abs(v_max - uv[:, 1].max()) <= 1
    assert count == (frame.instance == 2).sum()
    ball = boxes_3d(scene)[3]
    assert np.allclose(ball.center, (12, -3, 2.0), atol=1e-6) and np.allclose(ball.size, 1.6, atol=0.01)
