"""A body at rest sleeps (its steps are skipped) and wakes on any change, with unchanged results."""

import struct

import pytest

from aerial_sim.environment.environment import EnvironmentParams
from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.physics.rotation import quat_from_axis_angle
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
from aerial_sim.vehicles.multirotor import load_vehicle

QUAD = load_vehicle("quad_x")
REST_Z = 0.5 * QUAD.body_box_m[2]
ZERO = (0.0, 0.0, 0.0)


def make_world(sleep=True):
    return PhysicsWorld(PhysicsParams(sleep_at_rest=sleep), EnvironmentParams(home=HomePoint(altitude=0.0)))


def bits(value):
    """Floats as their 8 bytes, so that comparisons are exact to the bit (0.0 differs from -0.0)."""
    if isinstance(value, float):
        return struct.pack("<d", value)
    if isinstance(value, (tuple, list)):
        return tuple(bits(v) for v in value)
    return value


def snapshot(world, name="d"):
    truth = world.ground_truth(name)
    rotors = [(r.speed_rad_s, r.thrust_n, r.torque_nm, r.control) for r in world.rotor_states(name)]
    return bits((truth.time_s, truth.position, truth.orientation, truth.velocity_world, truth.angular_velocity_body,
                 truth.linear_acceleration_world, truth.specific_force_body, truth.angular_acceleration_body, rotors))


def test_landed_vehicle_sleeps_rests_exactly_and_wakes_to_take_off():
    world = make_world()
    world.add_vehicle("d", QUAD, position=(0.0, 0.0, 0.5))
    body = world.body("d")
    world.step(2000)  # dropped, bounced, settled
    assert body.at_rest
    resting = world.ground_truth("d")
    for _ in range(100):  # what the physics node does every period: the same inputs again
        world.set_controls("d", [0.0] * 4)
        world.set_external_wrench("d", ZERO, ZERO)
        world.step(4)
        assert body.at_rest
    truth = world.ground_truth("d")
    assert bits(truth.position) == bits(resting.position) and bits(truth.orientation) == bits(resting.orientation)
    assert truth.specific_force_body == pytest.approx((0.0, 0.0, world.environment.gravity(REST_Z)), abs=1e-9)
    assert truth.time_s == pytest.approx(resting.time_s + 0.4)

    world.set_controls("d", [0.8] * 4)  # above hover thrust
    world.step(1)
    assert not body.at_rest
    world.step(999)
    assert world.ground_truth("d").position[2] > REST_Z + 0.5


@pytest.mark.parametrize("change", ["wrench", "teleport", "rotor_tilt", "spun_up"])
def test_any_change_of_input_or_state_wakes_a_sleeping_body(change):
    world = make_world()
    world.add_vehicle("d", QUAD, position=(0.0, 0.0, 0.0))
    world.step(10)
    body = world.body("d")
    assert body.at_rest
    before = world.ground_truth("d")
    if change == "wrench":
        world.set_external_wrench("d", (0.0, 0.0, 12.0), ZERO)  # lifts the 1 kg body
    elif change == "teleport":
        world.set_kinematics("d", position=(0.0, 0.0, 1.0))
    elif change == "rotor_tilt":
        world.set_controls("d", [0.5] * 4, spun_up=True)
        world.step(10)
        assert body.at_rest  # thrust below weight: back to rest
        for index in range(4):
            world.set_rotor_geometry("d", index, normal=(0.866, 0.0, 0.5))  # pushes it forward, beyond friction
    elif change == "spun_up":
        world.set_controls("d", [0.8] * 4, spun_up=True)
    world.step(200)
    assert not body.at_rest
    assert world.ground_truth("d").position != before.position


def test_sleeping_changes_no_result_to_the_bit():
    """Land, rest, get pushed, rest again on a tilted-then-level landing, take off: the same
    trajectory, bit for bit, with and without sleeping, stepped in single steps and in chunks."""

    def fly(sleep, chunk):
        world = make_world(sleep)
        world.add_vehicle("d", QUAD, position=(0.0, 0.0, 1.0))
        world.set_kinematics("d", orientation=quat_from_axis_angle((1.0, 0.5, 0.0), 0.2))
        schedule = {
            3000: lambda: world.set_external_wrench("d", (4.0, 0.0, 0.0), ZERO),
            3200: lambda: world.set_external_wrench("d", ZERO, ZERO),
            4500: lambda: world.set_controls("d", [0.8] * 4),
        }
        samples = []
        for step in range(0, 5000, chunk):
            if step in schedule:
                schedule[step]()
            world.step(chunk)
            samples.append(snapshot(world))
        return samples, world.body("d")

    for chunk in (1, 4):
        reference, _ = fly(sleep=False, chunk=chunk)
        sleeping, body = fly(sleep=True, chunk=chunk)
        assert sleeping == reference
        assert not body.at_rest  # it took off at the end
