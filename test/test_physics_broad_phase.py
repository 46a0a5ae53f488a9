"""The broad phase's grid (physics/broad_phase.py): it offers every collider the engine's own sphere test
keeps, so a vehicle in the shipped city lands on roofs and terrain and stops at walls as it did when every
one of the city's 2,240 colliders was tested at each step."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aerial_sim.physics.broad_phase import ColliderIndex
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
from aerial_sim.vehicles.multirotor import load_vehicle


class Box:
    def __init__(self, bounds):
        self.bounds = bounds

    def contact(self, position, orientation, half_extents):
        return None


class Unbounded:
    def contact(self, position, orientation, half_extents):
        return None


def kept_by_the_engine(pairs, x, y, z, radius):
    """The colliders RigidBody.advance asks for a contact: its sphere-box test, verbatim."""
    kept = []
    for collider, box in pairs:
        if box is not None:
            low, high = box
            if (z - radius > high[2] or z + radius < low[2] or x - radius > high[0]
                    or x + radius < low[0] or y - radius > high[1] or y + radius < low[1]):
                continue
        kept.append(collider)
    return kept


def test_the_grid_offers_every_collider_the_sphere_test_keeps_in_order():
    """Random boxes (some infinite, NaN or without bounds) and spheres, many of them touching a cell's edge
    or a box's face exactly: what the engine keeps from the grid's candidates equals what it keeps from all."""
    rng = np.random.default_rng(7)
    colliders = []
    for _ in range(300):
        low = rng.uniform(-60, 60, 3)
        high = low + rng.uniform(0, 12, 3)
        colliders.append(Box((tuple(low), tuple(high))))
    colliders += [Box(((-math.inf,) * 3, (math.inf, math.inf, 0.0))), Unbounded(),
                  Box(((math.nan, 0.0, 0.0), (1.0, 1.0, 1.0))), Box(((-8.0, 4.0, 0.0), (-4.0, 8.0, 3.0)))]
    rng.shuffle(colliders)
    index = ColliderIndex(colliders, cell_m=4.0)
    everything = list(zip(colliders, [getattr(c, "bounds", None) for c in colliders]))
    points = [(rng.uniform(-70, 70), rng.uniform(-70, 70), rng.uniform(-5, 15), rng.uniform(0.05, 3.0))
              for _ in range(500)]
    points += [(4.0 * i + s * r, 4.0 * j, 1.0, r) for i in range(-3, 3) for j in range(-3, 3)
               for r in (0.3, 1e-9) for s in (-1, 1)]  # footprints ending exactly on cell edges
    points += [(-8.0 - 0.5, 5.0, 1.0, 0.5), (-4.0 + 0.5, 8.0 + 0.5, 1.0, 0.5)]  # touching a box's face
    for x, y, z, r in points:
        candidates = index.near(x, y, r)
        assert len(candidates) < len(everything) or not index.cell_m
        assert kept_by_the_engine(candidates, x, y, z, r) == kept_by_the_engine(everything, x, y, z, r)
    assert len(index.near(math.nan, 0.0, 0.3)) == len(everything)  # a NaN body is tested against all
    assert len(ColliderIndex(colliders, cell_m=0.0).near(0.0, 0.0, 0.3)) == len(everything)


@pytest.fixture(scope="module")
def city():
    from aerial_sim.world.colliders import scene_colliders
    from aerial_sim.world.scene import load_scene

    scene = load_scene("city")
    return scene, scene_colliders(scene)


def city_world(city, position, cell_m=4.0, push_n=None):
    """The city's colliders (the ground plane under the terrain, as the physics node sets it) and a quad-X at
    ``position``; with ``push_n`` it hovers and is pushed along +x (body frame) by that force."""
    scene, colliders = city
    world = PhysicsWorld(PhysicsParams(collider_cell_m=cell_m, ground_height_m=float(scene.terrain.bounds[0, 2])))
    for collider in colliders:
        world.add_collider(collider)
    vehicle = load_vehicle("quad_x")
    world.add_vehicle("drone1", vehicle, position=position)
    if push_n is not None:
        hover = vehicle.mass_kg * 9.80665 / sum(r.max_thrust_n() for r in vehicle.rotors)
        world.set_controls("drone1", [hover] * len(vehicle.rotors))
        world.set_external_wrench("drone1", (push_n, 0.0, 0.0), (0.0, 0.0, 0.0))
    return world


def fly(world, seconds):
    samples = []
    for _ in range(int(round(seconds * 250))):
        world.step(4)  # as the physics node: 4 steps a control period
        truth = world.ground_truth("drone1")
        samples.append((truth.position, truth.velocity_world, truth.orientation))
    return samples


def named(city, name):
    scene, colliders = city
    return next(c for c in colliders if c.name == name)


def test_in_the_city_a_vehicle_lands_on_a_roof_as_it_did_with_every_collider_tested(city):
    """Dropped 1 m over a flat roof (OSM building w89544457, a 9 m block) it falls, bounces, tumbles and comes
    to rest on the roof; every sample of its first second (the impact and the bounces) is bit for bit the one of
    a world that tests all 2,240 colliders each step."""
    roof = named(city, "osm_w89544457")
    (x0, y0, _), (x1, y1, top) = roof.bounds
    half_height = load_vehicle("quad_x").body_box_m[2] / 2
    start = ((x0 + x1) / 2, (y0 + y1) / 2, top + 1.0)
    assert roof.contact((start[0], start[1], top), (1.0, 0.0, 0.0, 0.0), (0.1, 0.1, 0.01)) is not None  # roof there
    gridded = fly(city_world(city, start), 2.8)
    assert gridded[:250] == fly(city_world(city, start, cell_m=0.0), 1.0)
    position, velocity, _ = gridded[-1]
    assert position[2] == pytest.approx(top + half_height, abs=0.005)
    assert np.abs(velocity).max() < 0.02
    assert min(p[2] for p, _, _ in gridded) >= top + half_height - 0.01  # never sank into the roof


def test_in_the_city_a_vehicle_lands_on_the_terrain_and_stops_at_a_building_wall(city):
    """At the start point it settles on the terrain (height from the heightmap, not the plane under it); pushed
    sideways at a building (w300626401) it bounces off its wall and never enters it by more than 1 cm."""
    scene, _ = city
    half_height = load_vehicle("quad_x").body_box_m[2] / 2
    resting = fly(city_world(city, (0.0, 0.0, 4.0)), 2.2)
    assert resting[-1][0][2] == pytest.approx(float(scene.terrain.height_at(0.0, 0.0)) + half_height, abs=0.02)
    assert np.abs(resting[-1][1]).max() < 0.01

    wall = named(city, "osm_w300626401")
    (x0, y0, _), (x1, y1, _) = wall.bounds
    vehicle = load_vehicle("quad_x")
    world = city_world(city, (x0 - 2.0, (y0 + y1) / 2, 6.0), push_n=6.0)
    samples = fly(world, 2.0)
    vx = [v[0] for _, v, _ in samples]
    assert max(vx) > 1.5 and vx[-1] < max(vx) and min(vx) < 0.0  # it hit the wall and bounced off
    half = tuple(h / 2 for h in vehicle.body_box_m)
    for position, _, orientation in samples:
        contact = wall.contact(position, orientation, half)
        assert contact is None or contact.depth_m < 0.01
