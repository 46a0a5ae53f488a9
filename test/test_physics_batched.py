"""The batched (arrays, compiled) path: agreement with the scalar reference, vehicle-to-vehicle
collisions and the broad phase that finds them."""

import math

import numpy as np
import pytest

from aerial_sim.environment.environment import EnvironmentParams
from aerial_sim.physics import batched
from aerial_sim.physics.batch_kernels import LANES
from aerial_sim.physics.broad_phase_kernels import close_pairs
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
from aerial_sim.vehicles.multirotor import load_vehicle

QUAD = load_vehicle("quad_x")
HEXA = load_vehicle("hexa_x")
FLIGHT_PERIODS = 2500  # 10 s of 4 ms control periods


def make_world(stepping, wind=(0.0, 0.0, 0.0), **params):
    return PhysicsWorld(PhysicsParams(stepping=stepping, **params), EnvironmentParams(wind_enu_m_s=wind))


def record(world, name):
    """Everything a user can read about one vehicle: ground truth and rotor states."""
    truth = world.ground_truth(name)
    rotors = tuple(v for r in world.rotor_states(name) for v in (r.speed_rad_s, r.thrust_n, r.torque_nm))
    return np.array(truth.position + truth.orientation + truth.velocity_world + truth.angular_velocity_body
                    + truth.linear_acceleration_world + truth.specific_force_body
                    + truth.angular_acceleration_body + rotors)


def hover(world, name, period):
    if period == 0:
        vehicle = world.body(name).vehicle
        world.set_controls(name, vehicle.hover_controls(world.environment.air_density(10.0),
                                                        world.environment.gravity(10.0)), spun_up=True)


def climb(world, name, period):
    if period == 0:
        world.set_controls(name, [0.7] * len(world.body(name).rotors))


def aggressive(world, name, period):
    """Full-authority roll, pitch and yaw pulses that keep the vehicle flying (tumbling) for 10 s."""
    count = len(world.body(name).rotors)
    phase = (period // 40) % 4
    high = [0.95 if (i + phase) % 2 else 0.25 for i in range(count)]
    world.set_controls(name, high if phase != 3 else [0.8] * count)


def land_and_take_off(world, name, period):
    """Fall onto the ground, bounce, rest (asleep), take off, land again, motors off."""
    count = len(world.body(name).rotors)
    schedule = {0: 0.3, 500: 0.0, 1200: 0.8, 1500: 0.5, 2200: 0.0}
    if period in schedule:
        world.set_controls(name, [schedule[period]] * count)
    if period == 800:
        world.set_external_wrench(name, (0.2, 0.0, 0.0), (0.0, 0.0, 0.01))


FLIGHTS = {
    "hover": (hover, (0.0, 0.0, 10.0)),
    "climb": (climb, (0.0, 0.0, 0.0)),
    "aggressive": (aggressive, (0.0, 0.0, 150.0)),
    "landing": (land_and_take_off, (0.0, 0.0, 2.0)),
}


def fly(stepping, script, start, vehicle=QUAD, wind=(2.0, -1.0, 0.0)):
    world = make_world(stepping, wind)
    world.add_vehicle("d", vehicle, position=start, yaw=0.3)
    samples = []
    for period in range(FLIGHT_PERIODS):
        script(world, "d", period)
        world.step(4)
        samples.append(record(world, "d"))
    return np.array(samples), world


@pytest.mark.parametrize("flight", sorted(FLIGHTS))
@pytest.mark.parametrize("vehicle", [QUAD, HEXA], ids=["quad_x", "hexa_x"])
def test_one_vehicle_batched_agrees_with_the_scalar_path_for_ten_seconds(flight, vehicle):
    script, start = FLIGHTS[flight]
    scalar, _ = fly("scalar", script, start, vehicle)
    batched, world = fly("batched", script, start, vehicle)
    assert world.batched
    assert np.abs(batched - scalar).max() < 1e-9
    assert np.linalg.norm(scalar[:, :3] - scalar[0, :3], axis=1).max() > 0.2  # the flights do go somewhere


def fly_fleet(drag, vector, monkeypatch, hexas=True):
    """37 quads and hexas (or quads only) for 60 control periods with new random rotor inputs each period: some tumbling
    faster than the step's series covers (200 rad/s), some with no body rate at all, some falling or climbing
    at 40 m/s through the 20 m air-density bands; wind and an external wrench. Returns every vehicle's
    ground truth and rotor speeds, one row each."""
    monkeypatch.setattr(batched, "VECTOR_STEP", vector)
    params = {"linear_drag_enabled": False} if drag == "off" else {"drag_law": drag}
    world = make_world("batched", wind=(2.0, -1.0, 0.5), **params)
    rng = np.random.default_rng(7)
    names = [f"v{n}" for n in range(2 * LANES + 5)]
    for n, name in enumerate(names):
        world.add_vehicle(name, HEXA if hexas and n % 3 == 0 else QUAD, position=(5.0 * n, 0.0, 200.0 + 3.0 * n), yaw=0.1 * n)
        rates = (200.0, 0.0, 0.0) if n % 7 == 0 else (0.0, 0.0, 0.0) if n % 7 == 1 else tuple(rng.normal(0, 2, 3))
        world.set_kinematics(name, velocity_world=(0.0, 0.0, 40.0 * (n % 5 - 2)), angular_velocity_body=rates)
    world.set_external_wrench(names[4], (0.3, 0.0, -0.2), (0.0, 0.01, 0.0))
    for _ in range(60):
        world.set_all_controls(rng.uniform(0.0, 1.0, (len(names), 6 if hexas else 4)))
        world.step(4)
    truth = world.truth_arrays()
    rotors = [world.rotor_speeds_and_thrusts(name)[0] + [0.0] * (6 - len(world.body(name).rotors)) for name in names]
    return np.hstack([truth[field] for field in sorted(truth)] + [np.array(rotors)])


@pytest.mark.parametrize("drag, hexas", [("projected", True), ("faces", True), ("rotor", True), ("off", True),
                                         ("faces", False)])
def test_the_vectorised_free_step_gives_the_same_bits_as_one_vehicle_at_a_time(drag, hexas, monkeypatch):
    """batched.VECTOR_STEP steps 16 vehicles per SIMD loop and hands the vehicles it cannot take (libm's
    rotation, a density band left) to the one-vehicle kernel: every bit of every vehicle is the same."""
    vector = fly_fleet(drag, True, monkeypatch, hexas)
    one_by_one = fly_fleet(drag, False, monkeypatch, hexas)
    assert np.array_equal(vector, one_by_one)
    assert np.isfinite(vector).all() and np.abs(vector[:, :3]).max() > 1.0

def test_a_mixed_fleet_steps_each_vehicle_as_its_own_scalar_flight():
    """quad_x and hexa_x in one batched world match two one-vehicle scalar worlds."""
    scripts = {"q": (QUAD, (0.0, 0.0, 150.0), aggressive), "h": (HEXA, (50.0, 0.0, 2.0), land_and_take_off)}
    together = make_world("batched")
    alone = {}
    for name, (vehicle, start, _) in scripts.items():
        together.add_vehicle(name, vehicle, position=start)
        alone[name] = make_world("scalar")
        alone[name].add_vehicle(name, vehicle, position=start)
    for period in range(1000):
        for name, (_, _, script) in scripts.items():
            script(together, name, period)
            script(alone[name], name, period)
            alone[name].step(4)
        together.step(4)
        for name in scripts:
            assert np.abs(record(together, name) - record(alone[name], name)).max() < 1e-9


def test_scene_contacts_on_the_batched_path_agree_with_the_scalar_path():
    """One vehicle pushed into a building of the urban scene, another dropped onto a roof."""
    from aerial_sim.world.colliders import scene_colliders
    from aerial_sim.world.scene import load_scene

    colliders = list(scene_colliders(load_scene("urban")))
    starts = {"wall": (15.0, 9.0, 6.0), "roof": (30.0, -15.0, 11.0)}  # building_s2: 9 m high
    together = make_world("batched")
    alone = {name: make_world("scalar") for name in starts}
    for world in (together, *alone.values()):
        for collider in colliders:
            world.add_collider(collider)
    for name, start in starts.items():
        for world in (together, alone[name]):
            world.add_vehicle(name, QUAD, position=start)
            world.set_controls(name, [0.45 if name == "wall" else 0.0] * 4)
            if name == "wall":
                world.set_external_wrench(name, (0.0, 8.0, 0.0), (0.0, 0.0, 0.0))  # toward the wall at y = 11
    touched = set()
    for _ in range(750):
        together.step(4)
        for name, world in alone.items():
            world.step(4)
            assert np.abs(record(together, name) - record(world, name)).max() < 1e-9
            if world.ground_truth(name).velocity_world[1 if name == "wall" else 2] < -0.3:
                touched.add(name)  # bounced back off the wall / started falling
    assert together.ground_truth("wall").position[1] < 11.0 - 0.05  # never inside building_n1
    assert together.ground_truth("roof").position[2] == pytest.approx(9.0 + QUAD.body_box_m[2] / 2, abs=1e-3)
    assert together.body("roof").at_rest
    assert touched == {"wall", "roof"}


def test_two_or_more_vehicles_step_batched_and_sleep_at_rest_with_unchanged_results():
    world = make_world("auto")
    for index in range(3):
        world.add_vehicle(f"d{index}", QUAD, position=(3.0 * index, 0.0, 0.5))
    world.step(3000)
    assert world.batched and all(world.body(f"d{i}").at_rest for i in range(3))
    resting = world.poses()
    world.step(1000)
    assert all(np.array_equal(a, b) for a, b in zip(world.poses(), resting))
    world.set_controls("d1", [0.8] * 4)  # wakes only d1
    world.step(1000)
    positions, orientations = world.poses()
    assert positions[1, 2] > 0.5
    for index in (0, 2):
        assert np.array_equal(positions[index], resting[0][index])
        assert np.array_equal(orientations[index], resting[1][index])


def head_on(speed_a, speed_b, separation=2.0, height=5.0):
    world = make_world("auto")
    hover_u = QUAD.hover_controls(world.environment.air_density(height), world.environment.gravity(height))
    for name, x, speed in (("a", -separation / 2, speed_a), ("b", separation / 2, speed_b)):
        world.add_vehicle(name, QUAD, position=(x, 0.0, height))
        world.set_controls(name, hover_u, spun_up=True)
        world.set_kinematics(name, velocity_world=(speed, 0.0, 0.0))
    return world


def fly_until_apart(world, seconds=1.0):
    records = []
    for _ in range(int(seconds * 250)):
        world.step(4)
        records += world.take_collisions()
    return records


def test_two_vehicles_flown_into_each_other_bounce_with_restitution_and_report_it():
    world = head_on(2.0, -2.0)
    records = fly_until_apart(world)
    a, b = world.ground_truth("a"), world.ground_truth("b")
    # Equal masses, head on: each rebounds at e times its approach speed (e = 0.55; drag takes a little).
    assert a.velocity_world[0] == pytest.approx(-0.55 * 2.0, rel=0.03)
    assert b.velocity_world[0] == pytest.approx(0.55 * 2.0, rel=0.03)
    assert a.position[0] < -0.1 and b.position[0] > 0.1  # apart again; they never passed through
    first = {r.vehicle: r for r in records}
    assert set(first) == {"a", "b"} and first["a"].other == "b" and first["b"].other == "a"
    assert first["a"].normal == pytest.approx((-1.0, 0.0, 0.0), abs=1e-6)  # out of b, toward a
    assert first["b"].normal == pytest.approx((1.0, 0.0, 0.0), abs=1e-6)
    assert first["a"].point[0] == pytest.approx(0.0, abs=0.02)  # the front faces meet in the middle
    assert 0.0 <= first["a"].depth_m < 0.02 and first["a"].closing_speed_m_s == pytest.approx(4.0, rel=0.02)


def test_a_vehicle_hitting_a_hovering_one_passes_on_its_momentum():
    world = head_on(3.0, 0.0)
    fly_until_apart(world)
    a, b = world.ground_truth("a"), world.ground_truth("b")
    assert a.velocity_world[0] + b.velocity_world[0] == pytest.approx(3.0, rel=0.03)  # momentum (equal masses)
    assert b.velocity_world[0] - a.velocity_world[0] == pytest.approx(0.55 * 3.0, rel=0.03)  # restitution
    assert world.ground_truth("b").linear_acceleration_world[0] == pytest.approx(0.0, abs=1.0)  # the jolt is over


def test_a_vehicle_teleported_into_another_between_control_periods_collides_at_once():
    """The broad phase is planned for several control periods; a teleport in between must drop
    that plan: the collision is found in the period it happens, not when the plan runs out."""
    world = head_on(0.0, 0.0, separation=20.0)
    world.step(4)  # far apart: a plan that could serve the next two periods
    touching_x = -10.0 + 2.0 * world.body("a").half_extents[0]
    world.set_kinematics("b", position=(touching_x + 0.005, 0.0, 5.0), velocity_world=(-3.0, 0.0, 0.0))
    start = world.time_s
    world.step(4)
    records = world.take_collisions()
    assert {r.vehicle for r in records} == {"a", "b"}
    assert min(r.time_s for r in records) <= start + 0.004 and max(r.depth_m for r in records) < 0.01


def test_the_scalar_path_keeps_vehicles_apart_only_when_asked_for_batched():
    world = make_world("scalar")
    for name, x, speed in (("a", -1.0, 2.0), ("b", 1.0, -2.0)):
        world.add_vehicle(name, QUAD, position=(x, 0.0, 5.0))
        world.set_kinematics(name, velocity_world=(speed, 0.0, 0.0))
    assert fly_until_apart(world, 0.6) == [] and world.ground_truth("a").position[0] > 0.0


def test_grid_broad_phase_finds_exactly_the_overlapping_pairs():
    rng = np.random.default_rng(7)
    positions = rng.uniform(-20.0, 20.0, size=(600, 3))
    radii = rng.uniform(0.1, 1.0, size=600)
    found = {tuple(p) for p in close_pairs(positions, radii).tolist()}
    distance = np.linalg.norm(positions[:, None] - positions[None], axis=2)
    expected = {(i, j) for i, j in zip(*np.nonzero(distance < radii[:, None] + radii[None])) if i < j}
    assert found == expected and len(expected) > 10


def test_set_all_controls_refuses_wrong_shapes_and_values():
    world = make_world("batched")
    for index in range(2):
        world.add_vehicle(f"d{index}", QUAD, position=(3.0 * index, 0.0, 5.0))
    for bad in (np.zeros((2, 3)), np.full((2, 4), np.nan), np.full((2, 4), 1.5), np.zeros((3, 4))):
        with pytest.raises(ValueError):
            world.set_all_controls(bad)
    world.set_all_controls(np.full((2, 4), 0.9))
    world.step(500)
    assert all(z > 5.0 for z in world.poses()[0][:, 2])
