"""Ground and scene contact: landing, resting without jitter, take-off, bounce, friction, custom colliders."""

import math

import pytest

from aerial_sim.environment.environment import EnvironmentParams
from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.physics.contact import Contact
from aerial_sim.physics.rotation import quat_from_axis_angle
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
from aerial_sim.vehicles.multirotor import load_vehicle

QUAD = load_vehicle("quad_x")
REST_Z = 0.5 * QUAD.body_box_m[2]


def make_world(drag=True):
    return PhysicsWorld(PhysicsParams(linear_drag_enabled=drag), EnvironmentParams(home=HomePoint(altitude=0.0)))


def rest_samples(world, seconds=2.0):
    samples = []
    for _ in range(int(seconds * 100)):  # sampled every 10 ms
        world.step(10)
        samples.append(world.ground_truth("d"))
    return samples


def assert_resting_without_jitter(samples):
    heights = [s.position[2] for s in samples]
    assert max(heights) - min(heights) < 1e-9  # no jitter, no sinking
    assert max(abs(v) for s in samples for v in s.velocity_world + s.angular_velocity_body) < 1e-9
    assert len({s.position for s in samples}) == 1 and len({s.orientation for s in samples}) == 1


@pytest.mark.parametrize("height", [0.5, 2.0])
def test_level_drop_lands_rests_without_jitter_and_takes_off_again(height):
    world = make_world()
    world.add_vehicle("d", QUAD, position=(0.0, 0.0, height))
    world.step(3000)
    samples = rest_samples(world)
    assert_resting_without_jitter(samples)
    assert samples[-1].position == pytest.approx((0.0, 0.0, REST_Z), abs=2e-6)
    assert samples[-1].orientation == pytest.approx((1.0, 0.0, 0.0, 0.0), abs=1e-12)
    g = world.environment.gravity(REST_Z)
    assert samples[-1].specific_force_body == pytest.approx((0.0, 0.0, g), abs=1e-9)  # accelerometer: +g
    assert samples[-1].linear_acceleration_world == pytest.approx((0.0, 0.0, 0.0), abs=1e-12)
    world.set_controls("d", [0.8] * 4)  # above hover thrust: lifts off again
    world.step(1000)
    assert world.ground_truth("d").position[2] > REST_Z + 0.5


def test_tumbling_corner_first_crash_ends_at_rest_on_a_face():
    world = make_world()
    world.add_vehicle("d", QUAD, position=(0.0, 0.0, 2.0))
    world.set_kinematics("d", orientation=quat_from_axis_angle((1.0, 0.5, 0.0), 0.3))  # hits a corner first
    world.step(5000)
    samples = rest_samples(world)
    assert_resting_without_jitter(samples)
    w, x, y, z = samples[-1].orientation
    body_z_up = 1.0 - 2.0 * (x * x + y * y)  # z component of the body z axis in the world
    assert abs(body_z_up) > 1.0 - 1e-8  # on its top or bottom face (this crash flips it)
    assert samples[-1].position[2] == pytest.approx(REST_Z, abs=2e-5)


def test_below_hover_thrust_keeps_the_vehicle_on_the_ground_without_drift():
    world = make_world()
    world.add_vehicle("d", QUAD, position=(0.0, 0.0, 0.0))
    world.set_controls("d", [0.5, 0.5, 0.5, 0.5])  # thrust 8.4 N < weight 9.8 N
    world.step(2000)
    truth = world.ground_truth("d")
    assert truth.position == pytest.approx((0.0, 0.0, REST_Z), abs=1e-5)
    assert truth.velocity_world == (0.0, 0.0, 0.0)


def test_bounce_height_scales_with_restitution_squared():
    world = make_world(drag=False)
    drop = 1.0
    world.add_vehicle("d", QUAD, position=(0.0, 0.0, REST_Z + drop))
    apex, falling_seen = 0.0, False
    for _ in range(1000):
        world.step(1)
        truth = world.ground_truth("d")
        if truth.velocity_world[2] > 0:
            falling_seen = True
            apex = max(apex, truth.position[2] - REST_Z)
        elif falling_seen:
            break
    assert apex == pytest.approx(QUAD.restitution**2 * drop, rel=0.02)


def test_sliding_vehicle_stops_after_the_coulomb_friction_distance():
    world = make_world(drag=False)
    world.add_vehicle("d", QUAD, position=(0.0, 0.0, 0.0))
    world.set_kinematics("d", velocity_world=(2.0, 0.0, 0.0))
    world.step(1000)
    truth = world.ground_truth("d")
    g = world.environment.gravity(REST_Z)
    # Kinetic friction decelerates at mu g: stopping distance v^2 / (2 mu g).
    assert truth.position[0] == pytest.approx(2.0**2 / (2 * QUAD.friction * g), rel=0.02)
    assert abs(truth.velocity_world[0]) < 1e-9
    assert truth.position[2] == pytest.approx(REST_Z, abs=1e-5)


class Wall:
    """A vertical wall x = 3 m facing -x (a scene object as the world engineer would write it)."""

    bounds = ((3.0, -math.inf, -math.inf), (math.inf, math.inf, math.inf))

    def contact(self, position, orientation, half_extents):
        reach = position[0] + max(half_extents)
        if reach < 3.0:
            return None
        return Contact(point=(3.0, position[1], position[2]), normal=(-1.0, 0.0, 0.0), depth_m=reach - 3.0)


def test_a_scene_collider_stops_a_vehicle_with_restitution():
    world = make_world(drag=False)
    world.add_collider(Wall())
    world.add_vehicle("d", QUAD, position=(0.0, 0.0, 50.0))
    world.set_kinematics("d", velocity_world=(4.0, 0.0, 0.0))
    world.step(1500)
    truth = world.ground_truth("d")
    assert truth.position[0] < 3.0 - max(QUAD.body_box_m) / 2 + 1e-5  # never through the wall
    assert truth.velocity_world[0] == pytest.approx(-QUAD.restitution * 4.0, rel=0.02)
