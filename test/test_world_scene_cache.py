"""The scene cache (aerial_sim.world.scene_cache): a scene loaded from it is the scene loaded from its files,
bit for bit in images, lidar scans and collisions; a changed file rebuilds it; a broken cache file is one
warning and a rebuild; concurrent builders never leave a broken file; it can be turned off."""

from __future__ import annotations

import logging
import shutil
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from aerial_sim.sensors.lidar import LidarModel, LidarParams, LidarSweeper
from aerial_sim.sensors.params import load_preset
from aerial_sim.sensors.truth import TruthSample
from aerial_sim.world.camera import CameraModel, CameraParams
from aerial_sim.world.closed_surfaces import closed_rows
from aerial_sim.world.colliders import scene_colliders
from aerial_sim.world.scene import load_scene
from aerial_sim.world.ray_caster import ray_caster_of
from aerial_sim.world.scene_cache import ENV
from aerial_sim.world.surface_tables import render_surfaces, scene_surfaces

REPO = Path(__file__).resolve().parents[1]
ORIGIN = (60.17, 24.94)
OSM = """<?xml version='1.0' encoding='UTF-8'?>
<osm version="0.6" generator="test">
  <node id="1" lat="60.1701000" lon="24.9400000" version="1"/>
  <node id="2" lat="60.1701000" lon="24.9402000" version="1"/>
  <node id="3" lat="60.1702000" lon="24.9402000" version="1"/>
  <node id="4" lat="60.1702000" lon="24.9400000" version="1"/>
  <node id="5" lat="60.1698000" lon="24.9396000" version="1"/>
  <node id="6" lat="60.1698000" lon="24.9406000" version="1"/>
  <way id="10"><nd ref="1"/><nd ref="2"/><nd ref="3"/><nd ref="4"/><nd ref="1"/>
    <tag k="building" v="yes"/><tag k="height" v="12 m"/></way>
  <way id="13"><nd ref="5"/><nd ref="6"/><tag k="highway" v="residential"/></way>
</osm>
"""
SCENE = f"""\
    terrain: {{file: hills.png, size_m: [80, 80], height_range_m: [0, 2], texture: ground.png}}
    osm: {{file: town.osm, origin: [{ORIGIN[0]}, {ORIGIN[1]}]}}
    lighting: {{time_of_day: "2026-06-21 15:00:00", shadows: true}}
    objects:
      - {{name: kiosk, shape: mesh, file: kiosk.glb, position: [4, -6, 2.5], yaw_deg: 20, segmentation_id: 60,
         material: plastic}}
      - {{name: crate, shape: mesh, file: crate.obj, scale: 2.0, position: [-5, -4, 1.5], segmentation_id: 61}}
      - {{name: tower, shape: box, size: [2, 2, 8], position: [0, -14, 4], segmentation_id: 62, material: cement}}
"""
POSE = ((0.0, -28.0, 4.0), (float(np.cos(np.pi / 4)), 0.0, 0.0, float(np.sin(np.pi / 4))))  # looking north


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A small world of every source (PNG terrain + texture, OSM, glTF, OBJ + MTL + texture, a primitive) and an
    empty cache folder of its own."""
    folder = tmp_path / "world"
    folder.mkdir()
    rows, cols = np.mgrid[0:9, 0:9]
    Image.fromarray((6000 * (1 + np.sin(rows / 2.0) * np.cos(cols / 3.0))).astype(np.uint16)).save(folder / "hills.png")
    Image.fromarray(np.random.default_rng(1).integers(0, 255, (32, 32, 3), np.uint8)).save(folder / "ground.png")
    (folder / "town.osm").write_text(OSM)
    shutil.copy(REPO / "config" / "scenes" / "city" / "kiosk.glb", folder / "kiosk.glb")
    corners = [(x, y, z) for z in (-0.5, 0.5) for y in (-0.5, 0.5) for x in ((-0.5, 0.5) if y < 0 else (0.5, -0.5))]
    faces = ["1/1 3/3 2/2", "1/1 4/4 3/3", "5/1 6/2 7/3", "5/1 7/3 8/4", "1/1 2/2 6/3", "1/1 6/3 5/4", "2/1 3/2 7/3",
             "2/1 7/3 6/4", "3/1 4/2 8/3", "3/1 8/3 7/4", "4/1 1/2 5/3", "4/1 5/3 8/4"]
    (folder / "crate.obj").write_text("mtllib crate.mtl\n" + "".join(f"v {x} {y} {z}\n" for x, y, z in corners)
                                      + "vt 0 0\nvt 1 0\nvt 1 1\nvt 0 1\nusemtl wood\n"
                                      + "".join(f"f {face}\n" for face in faces))
    (folder / "crate.mtl").write_text("newmtl wood\nKd 1 1 1\nmap_Kd wood.png\n")
    Image.fromarray(np.full((8, 8, 3), (150, 90, 30), np.uint8)).save(folder / "wood.png")
    (folder / "town.yaml").write_text(textwrap.dedent(SCENE))
    monkeypatch.setenv(ENV, str(tmp_path / "cache"))
    return folder


def observations(scene) -> dict[str, bytes]:
    """What the sensors make of a scene: a camera frame (colour, depth, class and instance ids), a lidar sweep,
    and the colliders' contacts at seeded probe poses; as bytes, to be compared exactly."""
    frame = CameraModel(CameraParams(width=96, height=64), scene).render(*POSE, instance=True)
    preset = load_preset(LidarParams, "velodyne_vlp16")
    sweeper, scan = LidarSweeper(LidarModel(preset, scene, np.random.default_rng(0))), None
    for k in range(40):
        scans = sweeper.push(TruthSample(k / 250.0, position=(0.0, -20.0, 3.0), orientation=(1.0, 0.0, 0.0, 0.0)))
        scan = scans[-1] if scans else scan
    assert scan is not None and len(scan.points.ravel()) > 1000
    rng, contacts = np.random.default_rng(0), []
    for collider in scene_colliders(scene):
        low, high = np.asarray(collider.terrain.bounds if hasattr(collider, "terrain") else collider.bounds, float)
        for _ in range(6):
            q = rng.normal(size=4)
            contacts.append(repr(collider.contact(tuple(low + (high - low) * rng.uniform(-0.1, 1.1, 3)),
                                                  tuple(q / np.linalg.norm(q)), (0.4, 0.4, 0.2))))
    assert any(c != "None" for c in contacts)
    return {"color": frame.color.tobytes(), "depth": frame.depth.tobytes(), "segmentation": frame.segmentation.tobytes(),
            "instance": frame.instance.tobytes(), "lidar": scan.points.tobytes(), "contacts": "\n".join(contacts).encode()}


def same_scene(a, b) -> None:
    """Every object, material and array of two loads equal (dtype, shape and bytes)."""
    assert a.objects == b.objects and a.ground == b.ground and a.materials == b.materials
    assert a.lighting == b.lighting and a.lod == b.lod and a.class_names == b.class_names and a.base_dir == b.base_dir
    assert a.terrain.grid.tobytes() == b.terrain.grid.tobytes() and a.terrain.texture.tobytes() == b.terrain.texture.tobytes()
    parts_a, parts_b = a.cache["mesh_files"], b.cache["mesh_files"]
    assert list(parts_a) == list(parts_b)
    for file in parts_a:
        for part_a, part_b in zip(parts_a[file], parts_b[file], strict=True):
            for name in ("triangles", "uv", "texture", "pbr_texture", "uv1", "tangents"):
                x, y = getattr(part_a, name), getattr(part_b, name)
                assert (x is None) == (y is None), (file, name)
                assert x is None or (x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()), (file, name)
            assert (part_a.base_color, part_a.metallic, part_a.roughness, part_a.uv_sets) == \
                   (part_b.base_color, part_b.metallic, part_b.roughness, part_b.uv_sets)


def test_a_scene_from_the_cache_renders_scans_and_collides_bit_identically(world):
    path = world / "town.yaml"
    fresh = load_scene(path, cache=False)
    built, hit = load_scene(path), load_scene(path)
    assert "scene_cache" not in fresh.cache
    assert built.cache["scene_cache"][0] == "built" and hit.cache["scene_cache"][0] == "hit"
    same_scene(fresh, hit)
    assert all(part.texture is not None for part in hit.cache["mesh_files"][world / "crate.obj"])  # the MTL's map_Kd
    # one texture shared by several parts stays one (the renderer's texture table is per array)
    textures = {id(p.texture) for parts in hit.cache["mesh_files"].values() for p in parts if p.texture is not None}
    assert len(textures) == len({id(p.texture) for parts in fresh.cache["mesh_files"].values() for p in parts
                                 if p.texture is not None})
    expected, cached = observations(fresh), observations(hit)
    for name in expected:
        assert cached[name] == expected[name], name


@pytest.mark.parametrize("change", ["obj texture (named by the MTL)", "terrain heightmap", "osm extract", "glb",
                                    "scene file"])
def test_a_changed_file_rebuilds_the_cache(world, change):
    path = world / "town.yaml"
    load_scene(path)
    assert load_scene(path).cache["scene_cache"][0] == "hit"
    if change.startswith("obj texture"):
        Image.fromarray(np.full((8, 8, 3), (20, 200, 20), np.uint8)).save(world / "wood.png")
    elif change == "terrain heightmap":
        Image.fromarray(np.full((9, 9), 30000, np.uint16)).save(world / "hills.png")
    elif change == "osm extract":
        (world / "town.osm").write_text(OSM.replace("12 m", "20 m"))
    elif change == "glb":
        shutil.copy(REPO / "config" / "scenes" / "city" / "bench.glb", world / "kiosk.glb")
    else:
        path.write_text(path.read_text().replace("size: [2, 2, 8]", "size: [2, 2, 9]"))
    rebuilt = load_scene(path)
    assert rebuilt.cache["scene_cache"][0] == "built"
    same_scene(load_scene(path, cache=False), rebuilt)
    assert load_scene(path).cache["scene_cache"][0] == "hit"


def _garbage(data: bytes) -> bytes:
    return bytes(np.random.default_rng(3).integers(0, 256, len(data), np.uint8))


def _flipped(data: bytes) -> bytes:
    return data[:-100] + bytes([data[-100] ^ 0x10]) + data[-99:]


@pytest.mark.parametrize("damage", [lambda d: d[: len(d) // 2], lambda d: d[:10], lambda d: b"", _flipped, _garbage,
                                    lambda d: d[:16] + b"\xff" * 8 + d[24:],
                                    lambda d: d.replace(b'"@c": "SceneObject"', b'"@c": "os.system"')],
                         ids=["truncated", "cut in the magic", "empty", "a flipped bit", "foreign", "huge header length",
                              "a foreign class"])
def test_a_broken_cache_file_is_one_warning_and_a_rebuild(world, damage, caplog):
    path = world / "town.yaml"
    built = load_scene(path)
    file = built.cache["scene_cache"][1]
    file.write_bytes(damage(file.read_bytes()))
    with caplog.at_level(logging.WARNING, logger="aerial_sim.scene_cache"):
        scene = load_scene(path)
    warnings = [r for r in caplog.records if r.name == "aerial_sim.scene_cache"]
    assert len(warnings) == 1 and str(file) in warnings[0].getMessage() and "rebuilding" in warnings[0].getMessage()
    assert scene.cache["scene_cache"][0] == "built"
    same_scene(built, scene)
    assert load_scene(path).cache["scene_cache"][0] == "hit"


def test_loads_at_the_same_time_build_once_and_leave_one_whole_file(world, caplog):
    path, scenes = world / "town.yaml", []
    threads = [threading.Thread(target=lambda: scenes.append(load_scene(path))) for _ in range(4)]
    with caplog.at_level(logging.WARNING, logger="aerial_sim.scene_cache"):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(scenes) == 4 and not [r for r in caplog.records if r.name == "aerial_sim.scene_cache"]
    # one builds; the others wait for its file (the lock) and read it
    assert sorted(scene.cache["scene_cache"][0] for scene in scenes) == ["built", "hit", "hit", "hit"]
    folder = scenes[0].cache["scene_cache"][1].parent
    assert sorted(f.suffix for f in folder.iterdir()) == [".lock", ".scene"]  # no temporary file left
    for scene in scenes[1:]:
        same_scene(scenes[0], scene)
    assert load_scene(path).cache["scene_cache"][0] == "hit"


def test_the_cache_can_be_turned_off_and_an_unwritable_folder_is_one_warning(world, monkeypatch, tmp_path, caplog):
    path = world / "town.yaml"
    monkeypatch.setenv(ENV, "off")
    assert "scene_cache" not in load_scene(path).cache
    monkeypatch.setenv(ENV, str(tmp_path / "cache"))
    assert "scene_cache" not in load_scene(path, cache=False).cache
    assert not (tmp_path / "cache").exists()
    (tmp_path / "not_a_folder").write_text("")
    monkeypatch.setenv(ENV, str(tmp_path / "not_a_folder" / "cache"))
    with caplog.at_level(logging.WARNING, logger="aerial_sim.scene_cache"):
        scene = load_scene(path)
    warnings = [r for r in caplog.records if r.name == "aerial_sim.scene_cache"]
    assert len(warnings) == 1 and "not written" in warnings[0].getMessage()
    assert scene.cache["scene_cache"][0] == "unwritten"
    same_scene(load_scene(path, cache=False), scene)


def _with_ball(world: Path) -> Path:
    """The world plus a textured 1 280-triangle ball, which the camera draws by level of detail from 20 m."""
    import trimesh

    sphere = trimesh.creation.icosphere(subdivisions=3, radius=1.5)
    uv = np.stack([np.arctan2(sphere.vertices[:, 1], sphere.vertices[:, 0]) / (2 * np.pi) + 0.5,
                   sphere.vertices[:, 2] / 3.0 + 0.5], axis=1)
    image = Image.fromarray(np.random.default_rng(2).integers(0, 255, (16, 16, 3), np.uint8))
    sphere.visual = trimesh.visual.TextureVisuals(uv=uv, image=image)
    (world / "ball.glb").write_bytes(trimesh.Scene(sphere).export(file_type="glb"))
    path = world / "town.yaml"
    path.write_text(path.read_text() + "  - {name: ball, shape: mesh, file: ball.glb, position: [-2, -8, 2], "
                    "segmentation_id: 63}\n")
    return path


def camera_tables(scene) -> list[bytes]:
    """The camera's drawn rows (the scene's, then the simplified levels') and their groups, which rows are closed
    surfaces, and the scene's own rows (every sensor's), as bytes with their dtypes and shapes."""
    surfaces, lod = render_surfaces(scene)
    tables = []
    for table in (surfaces, scene_surfaces(scene)):
        for name in ("triangles", "surface", "uv", "texture", "albedo", "texels", "texture_table", "pbr", "pbr_texture"):
            array = np.asarray(getattr(table, name))
            tables.append(f"{name} {array.dtype} {array.shape}".encode() + array.tobytes())
    return tables + [lod.group.tobytes(), lod.level.tobytes(), lod.lift.tobytes(), closed_rows(scene).tobytes()]


def test_the_cameras_levels_and_the_colliders_hulls_come_from_the_cache_bit_identically(world, caplog):
    path = _with_ball(world)
    fresh = load_scene(path, cache=False)
    expected = observations(fresh)
    assert "lod_cache" not in fresh.cache and len(fresh.cache["lod_levels"][world / "ball.glb"]) > 2
    built = load_scene(path)
    observations(built)
    assert built.cache["lod_cache"][0] == "built" and built.cache["hulls_cache"][0] == "built"
    assert built.cache["surfaces_cache"][0] == "built" and built.cache["draw_cache"][0] == "built"
    hit = load_scene(path)
    cached = observations(hit)
    # the camera's and lidar's tables and the colliders' hulls from their files; the levels are in the draw tables
    assert hit.cache["surfaces_cache"][0] == "hit" and hit.cache["draw_cache"][0] == "hit"
    assert hit.cache["raster_cache"][0] == "hit"  # the camera's rasteriser (its hierarchies) too
    assert hit.cache["hulls_cache"][0] == "hit" and "lod_cache" not in hit.cache
    assert camera_tables(hit) == camera_tables(fresh)
    for name in expected:
        assert cached[name] == expected[name], name
    # a broken levels, surface or draw table file is one warning and a rebuild
    for kind, damage in (("lod", _flipped), ("surfaces", _flipped), ("draw", lambda d: d[: len(d) // 2]),
                         ("raster", _flipped)):
        file = built.cache[f"{kind}_cache"][1]
        file.write_bytes(damage(file.read_bytes()))
        if kind == "lod":  # read only to make the draw tables
            built.cache["draw_cache"][1].unlink()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="aerial_sim.scene_cache"):
            rebuilt = load_scene(path)
            assert camera_tables(rebuilt) == camera_tables(fresh)
            ray_caster_of(rebuilt).rasterizer  # noqa: B018 - made (or read) on first use
        warnings = [r for r in caplog.records if r.name == "aerial_sim.scene_cache"]
        assert len(warnings) == 1 and str(file) in warnings[0].getMessage() and "rebuilding" in warnings[0].getMessage()
        assert rebuilt.cache[f"{kind}_cache"][0] == "built"
    hulls = hit.cache["hulls_cache"][1]
    hulls.write_bytes(hulls.read_bytes()[: hulls.stat().st_size // 2])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="aerial_sim.scene_cache"):
        again = load_scene(path)
        assert observations(again) == expected
    warnings = [r for r in caplog.records if r.name == "aerial_sim.scene_cache"]
    assert len(warnings) == 1 and str(hulls) in warnings[0].getMessage() and "truncated" in warnings[0].getMessage()
    assert again.cache["hulls_cache"][0] == "built" and again.cache["draw_cache"][0] == "hit"
    path.write_text(path.read_text() + "lod: {min_triangles: 5000}\n")  # the ball is then drawn whole
    coarse = load_scene(path)
    render_surfaces(coarse)
    assert coarse.cache["lod_cache"][0] == "built" and len(coarse.cache["lod_levels"][world / "ball.glb"]) == 1


def test_the_scene_markers_come_from_the_cache_bit_identically(world, caplog):
    from aerial_sim.viewer.marker_array import encode_marker_array, scene_marker_array
    from aerial_sim.viewer.scene_view import scene_primitives

    path = world / "town.yaml"
    fresh = load_scene(path, cache=False)
    primitives = scene_primitives(fresh, 80.0)
    expected = (encode_marker_array(primitives, "map", 0.5), len(primitives))
    assert scene_marker_array(fresh, "map", 0.5, 80.0) == expected and "markers_cache" not in fresh.cache
    built = load_scene(path)
    assert scene_marker_array(built, "map", 0.5, 80.0) == expected and built.cache["markers_cache"][0] == "built"
    hit = load_scene(path)
    assert scene_marker_array(hit, "map", 0.5, 80.0) == expected and hit.cache["markers_cache"][0] == "hit"
    # other arguments are another message
    other = scene_marker_array(load_scene(path), "odom", 0.5, 80.0)
    assert other[0] == encode_marker_array(primitives, "odom", 0.5)
    file = hit.cache["markers_cache"][1]
    file.write_bytes(_flipped(file.read_bytes()))
    with caplog.at_level(logging.WARNING, logger="aerial_sim.scene_cache"):
        again = load_scene(path)
        assert scene_marker_array(again, "odom", 0.5, 80.0) == other
    warnings = [r for r in caplog.records if r.name == "aerial_sim.scene_cache"]
    assert len(warnings) == 1 and str(file) in warnings[0].getMessage() and "rebuilding" in warnings[0].getMessage()
    assert again.cache["markers_cache"][0] == "built"
