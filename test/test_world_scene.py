"""Scene files: the shipped scenes load, materials map ids to seed-004 coefficients, bad files say where."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from aerial_sim.config import ParamsError
from aerial_sim.world.colliders import scene_colliders
from aerial_sim.world.ray_caster import ray_caster_of
from aerial_sim.world.scene import load_scene
from aerial_sim.world.surface_tables import SURFACE_GROUND


def write_scene(tmp_path, body: str):
    path = tmp_path / "scene.yaml"
    path.write_text(textwrap.dedent(body))
    return path


@pytest.mark.parametrize("name", ["empty", "urban", "corridor"])
def test_shipped_scenes_load_with_unique_names(name):
    scene = load_scene(name)
    assert scene.name == name
    assert len({o.name for o in scene.objects}) == len(scene.objects)
    assert len(scene_colliders(scene)) == len(scene.objects)


def test_corridor_walls_carry_the_seed_004_material_coefficients():
    scene = load_scene("corridor")
    by_name = {o.name: o for o in scene.objects}
    expected = {"wall_plastic": 0.85, "wall_cement": 0.50, "wall_formboard": 0.55}
    for name, m in expected.items():
        assert scene.material_of_id(by_name[name].segmentation_id).depth_noise_m == m
    lut = scene.depth_noise_lut()
    assert lut.shape == (65536,)
    assert lut[by_name["wall_plastic"].segmentation_id] == np.float32(0.85)
    assert lut[scene.ground.segmentation_id] == np.float32(scene.material(scene.ground.material).depth_noise_m)
    with pytest.raises(KeyError):
        scene.material_of_id(999)


def test_urban_mesh_object_is_where_the_file_and_pose_put_it():
    scene = load_scene("urban")
    roof = next(o for o in scene.objects if o.shape == "mesh")
    # pyramid.obj: apex 1 m above its origin; scaled 8x and placed at the roof position.
    apex = np.array(roof.position) + (0.0, 0.0, roof.scale * 1.0)
    hits = ray_caster_of(scene).cast(apex + (0.0, 0.0, 5.0), np.array([[0.0, 0.0, -1.0]]))
    assert hits.distance[0] == pytest.approx(5.0, abs=1e-4)
    assert hits.surface[0] == 2 + scene.objects.index(roof)


def test_ground_plane_is_hit_from_above_and_missed_when_looking_up():
    scene = load_scene("empty")
    hits = ray_caster_of(scene).cast((1.0, 2.0, 3.0), np.array([[0.6, 0.0, -0.8], [0.0, 0.0, 1.0]]))
    assert hits.distance[0] == pytest.approx(3.0 / 0.8, rel=1e-6)
    assert hits.surface.tolist() == [SURFACE_GROUND, 0]
    assert np.isinf(hits.distance[1])


@pytest.mark.parametrize(
    "objects, expected",
    [
        ("- {name: pole, shape: cylinder, height: 3, position: [5, 0, 1.5], segmentation_id: 2}",
         "objects[0] 'pole'.radius"),
        ("- {name: a, shape: box, size: [1, 1, 1], segmentation_id: 2}\n"
         "- {name: ball, shape: sphere, radius: -1, segmentation_id: 3}",
         "objects[1] 'ball'.radius"),
        ("- {name: crate, shape: box, size: [1, 1], segmentation_id: 2}", "objects[0] 'crate'.size"),
        ("- {name: crate, shape: box, size: [1, 1, 1], segmentation_id: 2, colour: [1, 2, 3]}",
         "objects[0] 'crate'.colour: unknown parameter"),
        ("- {name: crate, shape: box, size: [1, 1, 1], segmentation_id: 70000}", "objects[0] 'crate'.segmentation_id"),
        ("- {name: crate, shape: box, size: [1, 1, 1], segmentation_id: 2, material: unobtainium}",
         "objects[0] 'crate'.material: unknown material 'unobtainium'"),
        ("- {name: crate, shape: box, size: [1, 1, 1], segmentation_id: 2, orientation: [1, 1, 0, 0]}",
         "objects[0] 'crate'.orientation"),
        ("- {name: statue, shape: mesh, file: nowhere.obj, segmentation_id: 2}", "objects[0] 'statue'.file"),
        ("- {name: a, shape: box, size: [1, 1, 1], segmentation_id: 2, material: plastic}\n"
         "- {name: b, shape: box, size: [1, 1, 1], segmentation_id: 2, material: cement}",
         "objects[1] 'b'.segmentation_id"),
        ("- {name: a, shape: sphere, radius: 1, size: [1, 1, 1], segmentation_id: 2}", "objects[0] 'a'.size"),
    ],
)
def test_bad_scene_files_name_the_object_and_field(tmp_path, objects, expected):
    path = write_scene(tmp_path, "objects:\n" + textwrap.indent(objects, "  ") + "\n")
    with pytest.raises(ParamsError) as error:
        load_scene(str(path))
    assert expected in str(error.value)
    assert "scene.yaml" in str(error.value)


def test_missing_scene_and_unknown_top_level_key_are_params_errors(tmp_path):
    with pytest.raises(ParamsError, match="not_a_scene"):
        load_scene("not_a_scene")
    path = write_scene(tmp_path, "ground: {segmentation_id: 1}\nobstacles: []\n")
    with pytest.raises(ParamsError, match="obstacles: unknown key"):
        load_scene(str(path))
