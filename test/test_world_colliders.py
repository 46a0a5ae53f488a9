"""Scene colliders: contact point, outward normal and penetration depth; a vehicle cannot pass a wall."""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

from aerial_sim.world.colliders import scene_colliders
from aerial_sim.world.scene import load_scene

LEVEL = (1.0, 0.0, 0.0, 0.0)
BODY_HALF = (0.2, 0.2, 0.05)


def scene_from(tmp_path, objects: str):
    path = tmp_path / "collide.yaml"
    path.write_text("objects:\n" + textwrap.indent(textwrap.dedent(objects), "  "))
    return load_scene(str(path))


def test_box_wall_contact_has_penetration_depth_and_outward_normal():
    wall = scene_colliders(load_scene("corridor"))[0]  # plastic wall, front face x = 10
    assert wall.contact((10.0 - 0.25, 0.0, 6.0), LEVEL, BODY_HALF) is None
    contact = wall.contact((10.0 - 0.15, 0.5, 6.0), LEVEL, BODY_HALF)
    assert contact.depth_m == pytest.approx(0.05, abs=1e-6)
    assert np.allclose(contact.normal, (-1.0, 0.0, 0.0), atol=1e-6)
    assert contact.point[0] == pytest.approx(10.0, abs=0.05)
    # Body yawed 45 degrees: its corner reaches 0.2*sqrt(2) ahead of its centre.
    yawed = (math.cos(math.pi / 8), 0.0, 0.0, math.sin(math.pi / 8))
    contact = wall.contact((10.0 - 0.25, 0.0, 6.0), yawed, BODY_HALF)
    assert contact.depth_m == pytest.approx(0.2 * math.sqrt(2) - 0.25, abs=1e-3)


@pytest.mark.parametrize("shape, expected_depth", [
    ("{name: ball, shape: sphere, radius: 1.0, position: [0, 0, 1.0], segmentation_id: 2}", 0.03),
    ("{name: post, shape: cylinder, radius: 0.5, height: 2.0, position: [0, 0, 1.0], segmentation_id: 2}", 0.03),
    ("{name: crate, shape: box, size: [1, 1, 2], position: [0, 0, 1.0], yaw_deg: 20, segmentation_id: 2}", 0.03),
])
def test_body_resting_on_top_of_an_object_is_pushed_up(tmp_path, shape, expected_depth):
    collider = scene_colliders(scene_from(tmp_path, f"- {shape}\n"))[0]
    # Body bottom face 3 cm below the object's top (z = 2).
    contact = collider.contact((0.0, 0.0, 2.0 + 0.05 - expected_depth), LEVEL, BODY_HALF)
    assert contact.depth_m == pytest.approx(expected_depth, abs=2e-3)
    assert np.allclose(contact.normal, (0.0, 0.0, 1.0), atol=1e-2)
    assert collider.contact((0.0, 0.0, 2.0 + 0.06), LEVEL, BODY_HALF) is None
    if "box" in shape:  # the body's whole bottom face rests on the crate: a patch of its half-diagonal
        assert contact.patch_radius_m == pytest.approx(math.hypot(*BODY_HALF[:2]), abs=1e-3)


def test_mesh_collider_pushes_out_of_the_surface(tmp_path):
    scene = scene_from(tmp_path, """
        - {name: roof, shape: mesh, file: %s, scale: 4.0, position: [0, 0, 0], segmentation_id: 2}
    """ % (load_scene("urban").base_dir / "meshes" / "pyramid.obj"))
    collider = scene_colliders(scene)[0]
    assert collider.contact((0.0, 0.0, 4.2), LEVEL, BODY_HALF) is None
    # Body over the +x face (slope 2:1 -> outward normal (2, 0, 1)/sqrt(5)), sunk into it.
    contact = collider.contact((1.0, 0.0, 2.0 + 0.05 - 0.02), LEVEL, BODY_HALF)
    assert contact is not None and contact.depth_m > 0
    assert np.dot(contact.normal, np.array([2.0, 0.0, 1.0]) / math.sqrt(5)) > 0.9


# -- with the physics engine ---------------------------------------------------------------------

def make_world(scene, x, y, z):
    from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
    from aerial_sim.vehicles.multirotor import load_vehicle

    world = PhysicsWorld(PhysicsParams())
    for collider in scene_colliders(scene):
        world.add_collider(collider)
    vehicle = load_vehicle("quad_x")
    world.add_vehicle("drone1", vehicle, position=(x, y, z))
    return world, vehicle


def run(world, seconds):
    samples = []
    for _ in range(int(round(seconds * 1000))):
        world.step()
        truth = world.ground_truth("drone1")
        samples.append((truth.position, truth.velocity_world))
    return samples


def first_reversal(velocities):
    """(speed just before, speed just after) the first sign change of a velocity component."""
    for before, after in zip(velocities, velocities[1:]):
        if before > 0.5 and after < 0 or before < -0.5 and after > 0:
            return abs(before), abs(after)
    raise AssertionError("no impact")


def test_vehicle_pushed_into_a_wall_bounces_with_its_restitution_and_never_passes():
    scene = load_scene("corridor")  # plastic wall, front face x = 10
    world, vehicle = make_world(scene, 7.0, 0.0, 6.0)
    hover = vehicle.mass_kg * 9.80665 / sum(r.max_thrust_n() for r in vehicle.rotors)
    world.set_controls("drone1", [hover] * len(vehicle.rotors))
    world.set_external_wrench("drone1", (6.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    samples = run(world, 2.5)
    half_x = vehicle.body_box_m[0] / 2
    x = np.array([p[0] for p, _ in samples])
    vx = np.array([v[0] for _, v in samples])
    assert x.max() <= 10.0 - half_x + 0.01, "the body passed into the wall"
    before, after = first_reversal(vx)
    assert before > 2.0
    assert after / before == pytest.approx(vehicle.restitution, abs=0.05)


def test_vehicle_dropped_on_a_box_bounces_and_comes_to_rest_on_top(tmp_path):
    scene = scene_from(tmp_path, "- {name: crate, shape: box, size: [1, 1, 2], position: [0, 0, 1.0], segmentation_id: 2}\n")
    world, vehicle = make_world(scene, 0.0, 0.0, 3.0)
    samples = run(world, 3.0)
    resting_z = 2.0 + vehicle.body_box_m[2] / 2
    z = np.array([p[2] for p, _ in samples])
    vz = np.array([v[2] for _, v in samples])
    assert z.min() >= resting_z - 0.01, "the body sank into the box"
    before, after = first_reversal(vz)
    assert after / before == pytest.approx(vehicle.restitution, abs=0.05)
    assert z[-1] == pytest.approx(resting_z, abs=0.005)
    assert np.abs(samples[-1][1]).max() < 0.01


def test_instances_of_one_mesh_file_collide_as_the_hull_of_their_own_placed_triangles(tmp_path):
    """The hull is built once per file and placed per instance (issue 29: the city's 1 800 props): each
    instance must answer exactly what a hull built from its own world-frame triangles answers."""
    import fcl

    from aerial_sim.physics.fcl_contact import FclCollider
    from aerial_sim.world.colliders import convex_hull
    from aerial_sim.world.object_meshes import merged_surface, object_parts

    car = load_scene("urban").base_dir / "city" / "car_red.glb"
    scene = scene_from(tmp_path, f"""
        - {{name: car_a, shape: mesh, file: {car}, position: [0, 0, 0], segmentation_id: 2}}
        - {{name: car_b, shape: mesh, file: {car}, scale: 1.7, position: [30.5, -12.25, 3], orientation: [0.8924, 0.0784, 0.0358, 0.4427], segmentation_id: 2}}
    """)
    rng = np.random.default_rng(1)
    for obj, collider in zip(scene.objects, scene_colliders(scene)):
        vertices, _ = merged_surface(np.concatenate([p.triangles for p in object_parts(obj, scene)]))
        points, faces = convex_hull(vertices)
        own = FclCollider(obj.name, fcl.Convex(points, len(faces), np.hstack([np.full((len(faces), 1), 3), faces]).ravel()),
                          np.eye(3), np.zeros(3), np.array([points.min(0), points.max(0)]))
        assert collider.bounds == own.bounds
        low, high = np.array(own.bounds)
        touching = 0
        for _ in range(40):
            q = rng.normal(size=4)
            pose = (tuple(low + (high - low) * rng.uniform(-0.1, 1.1, 3)), tuple(q / np.linalg.norm(q)), BODY_HALF)
            placed, reference = collider.contact(*pose), own.contact(*pose)
            assert placed == reference
            touching += placed is not None
        assert touching > 10
