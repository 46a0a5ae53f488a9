"""Physics core in flight: gravity, thrust, drag, rigid-body rotation, motor lag, wind, multi-vehicle."""

import math

import pytest

from aerial_sim.environment.atmosphere import standard_atmosphere
from aerial_sim.environment.environment import EnvironmentParams
from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.environment.gravity import normal_gravity
from aerial_sim.physics.forces import ControlsError
from aerial_sim.physics.rotation import rotate
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
from aerial_sim.vehicles.multirotor import MultirotorParams, RotorParams, load_vehicle

HOME = HomePoint(altitude=0.0)
QUAD = load_vehicle("quad_x")


def make_world(drag=True, wind=(0.0, 0.0, 0.0), home=HOME, law="faces"):
    return PhysicsWorld(PhysicsParams(linear_drag_enabled=drag, drag_law=law), EnvironmentParams(home=home, wind_enu_m_s=wind))


def test_free_fall_follows_wgs84_normal_gravity_at_altitude():
    world = make_world(drag=False)
    start = 10000.0
    world.add_vehicle("d", QUAD, position=(0.0, 0.0, start))
    world.step(1000)
    truth = world.ground_truth("d")
    g = normal_gravity(HOME.latitude, start)  # varies by 1.6e-6 over the 5 m fallen
    drop = start - truth.position[2]
    assert drop == pytest.approx(0.5 * g * 1.0**2, rel=2e-6)
    assert abs(drop - 0.5 * 9.80665) > 0.01  # the constant-g answer is measurably different
    assert truth.velocity_world[2] == pytest.approx(-g, rel=2e-6)
    assert truth.linear_acceleration_world[2] == pytest.approx(-normal_gravity(HOME.latitude, truth.position[2]), rel=1e-9)
    assert max(abs(f) for f in truth.specific_force_body) < 1e-9  # an accelerometer reads 0 in free fall


def test_hover_at_the_analytic_control_holds_altitude_for_ten_seconds():
    world = make_world(home=HomePoint())
    world.add_vehicle("d", QUAD, position=(0.0, 0.0, 10.0))
    environment = world.environment
    controls = QUAD.hover_controls(environment.air_density(10.0), environment.gravity(10.0))
    world.set_controls("d", controls, spun_up=True)
    lowest = highest = 10.0
    for _ in range(100):
        world.step(100)
        z = world.ground_truth("d").position[2]
        lowest, highest = min(lowest, z), max(highest, z)
    assert highest - 10.0 < 0.01 and 10.0 - lowest < 0.01
    truth = world.ground_truth("d")
    assert truth.specific_force_body[2] == pytest.approx(environment.gravity(10.0), rel=1e-4)


@pytest.mark.parametrize("altitude", [0.0, 3000.0, 8000.0])
def test_thrust_falls_with_air_density_at_altitude(altitude):
    world = make_world(drag=False)
    world.add_vehicle("d", QUAD, position=(0.0, 0.0, altitude + 1.0))
    world.set_controls("d", [0.5] * 4, spun_up=True)
    world.step(1)
    rho = standard_atmosphere(altitude + 1.0).density_kg_m3
    rotor = QUAD.rotors[0]
    expected = rotor.thrust_coefficient * rho * rotor.max_speed_rev_s**2 * rotor.diameter_m**4 * 0.5
    states = world.rotor_states("d")
    assert [s.thrust_n for s in states] == pytest.approx([expected] * 4, rel=1e-6)
    assert states[0].speed_rad_s == pytest.approx(rotor.max_speed_rad_s * math.sqrt(0.5))
    # ... and the vehicle feels it: a = 4 F / m - g
    accel = world.ground_truth("d").linear_acceleration_world[2]
    assert accel == pytest.approx(4 * expected / QUAD.mass_kg - normal_gravity(HOME.latitude, altitude + 1.0), rel=1e-5)
    assert expected / rotor.max_thrust_n(1.225) == pytest.approx(rho / 1.225 * 0.5, rel=1e-9)


def test_falling_body_reaches_the_terminal_velocity_of_the_drag_equation():
    world = make_world(drag=True)
    world.add_vehicle("d", QUAD, position=(0.0, 0.0, 3000.0))
    world.step(15000)
    truth = world.ground_truth("d")
    rho = standard_atmosphere(truth.position[2]).density_kg_m3
    g = normal_gravity(HOME.latitude, truth.position[2])
    # m g = 1/2 rho v^2 C_lin A_z for a level body falling along -z
    terminal = math.sqrt(2 * QUAD.mass_kg * g / (rho * QUAD.linear_drag_coefficient * QUAD.cross_section[2]))
    assert -truth.velocity_world[2] == pytest.approx(terminal, rel=2e-3)
    # With drag switched off the same fall is far faster.
    vacuum = make_world(drag=False)
    vacuum.add_vehicle("d", QUAD, position=(0.0, 0.0, 3000.0))
    vacuum.step(3000)
    assert -vacuum.ground_truth("d").velocity_world[2] > 1.5 * terminal


def test_torque_free_asymmetric_body_conserves_angular_momentum_and_energy():
    body = MultirotorParams(
        inertia_kg_m2=((0.01, 0.001, 0.0), (0.001, 0.02, 0.002), (0.0, 0.002, 0.03)),
        angular_drag_coefficient=0.0,
        rotors=(RotorParams(),),
    )
    world = make_world(drag=False)
    world.add_vehicle("d", body, position=(0.0, 0.0, 5000.0))
    world.set_kinematics("d", angular_velocity_body=(1.0, 0.3, 2.0))

    def invariants():
        truth = world.ground_truth("d")
        omega = truth.angular_velocity_body
        momentum = tuple(sum(body.inertia_kg_m2[i][j] * omega[j] for j in range(3)) for i in range(3))
        energy = 0.5 * sum(w * h for w, h in zip(omega, momentum))
        return energy, rotate(truth.orientation, momentum), omega

    energy0, momentum0, omega0 = invariants()
    world.step(10000)
    energy, momentum, omega = invariants()
    size = math.sqrt(sum(h * h for h in momentum0))
    assert abs(energy - energy0) / energy0 < 1e-6
    assert max(abs(a - b) for a, b in zip(momentum, momentum0)) / size < 1e-6
    assert max(abs(a - b) for a, b in zip(omega, omega0)) > 0.1  # it really tumbled (body rates changed)


def test_quaternion_stays_unit_while_tumbling_under_torque():
    world = make_world()
    world.add_vehicle("d", QUAD, position=(0.0, 0.0, 500.0))
    world.set_controls("d", [1.0, 0.2, 0.9, 0.0])
    for _ in range(20):
        world.step(250)
        w, x, y, z = world.ground_truth("d").orientation
        assert abs(w * w + x * x + y * y + z * z - 1.0) < 1e-12
    assert abs(world.ground_truth("d").angular_velocity_body[0]) > 1.0


def test_a_teleport_with_an_overflowing_quaternion_is_normalised_and_a_zero_one_changes_nothing():
    world = make_world()
    world.add_vehicle("d", QUAD, position=(0.0, 0.0, 500.0))
    world.set_kinematics("d", position=(1.0, 2.0, 30.0), orientation=(1e200, 0.0, 0.0, 1e200))  # |q|^2 overflows
    world.step(250)
    w, x, y, z = world.ground_truth("d").orientation
    assert abs(w * w + x * x + y * y + z * z - 1.0) < 1e-12 and abs(z) == pytest.approx(math.sqrt(0.5), abs=1e-3)
    before = world.ground_truth("d")
    with pytest.raises(ValueError, match="cannot normalise"):
        world.set_kinematics("d", position=(9.0, 9.0, 9.0), orientation=(0.0, 0.0, 0.0, 0.0))
    assert world.ground_truth("d").position == before.position  # refused as a whole: nothing moved


def test_motor_lag_is_first_order_with_the_configured_time_constant():
    world = make_world(drag=False)
    world.add_vehicle("d", QUAD, position=(0.0, 0.0, 100.0))
    world.set_controls("d", [0.8] * 4)
    world.step(5)  # one time constant (5 ms)
    assert world.rotor_states("d")[0].control == pytest.approx(0.8 * (1 - math.exp(-1)), rel=1e-9)
    world.step(45)
    assert world.rotor_states("d")[0].control == pytest.approx(0.8, rel=1e-4)
    # The rotors message's lists are the states' speeds and thrusts, bit for bit (physics node, every period),
    # also while the air density changes with the altitude every period (a climb, then a fall).
    for period in range(300):
        world.set_controls("d", [1.0 if period < 150 else 0.1, 0.9, 1.0 if period < 150 else 0.0, 0.95])
        world.step(4)
        states = world.rotor_states("d")
        assert world.rotor_speeds_and_thrusts("d") == ([s.speed_rad_s for s in states], [s.thrust_n for s in states])


def test_reaction_torques_yaw_the_vehicle_against_the_faster_rotors():
    world = make_world()
    world.add_vehicle("d", QUAD, position=(0.0, 0.0, 100.0))
    # Counter-clockwise rotors (0, 1) faster: their clockwise reaction torque wins, yaw rate < 0.
    world.set_controls("d", [0.7, 0.7, 0.5, 0.5], spun_up=True)
    world.step(100)
    rates = world.ground_truth("d").angular_velocity_body
    assert rates[2] < -0.05 and abs(rates[0]) < 1e-9 and abs(rates[1]) < 1e-9
    torque = 2 * (0.7 - 0.5) * QUAD.rotors[0].max_torque_nm(world.body("d").air_density)
    assert world.ground_truth("d").angular_acceleration_body[2] == pytest.approx(
        -torque / QUAD.inertia_kg_m2[2][2], rel=0.02  # less the angular drag at this rate
    )


def test_wind_carries_a_falling_vehicle_downwind_up_to_the_wind_speed():
    # The projected law couples the fall into the sideways drag (its area along v is mostly the rotor discs'):
    # the body takes the wind's speed within 20 s. Face by face (AirSim's code) only the small side face
    # drags sideways, 1/2 rho C A_x u^2: the same drift takes minutes.
    drifts = {}
    for law in ("projected", "faces"):
        world = make_world(wind=(3.0, 0.0, 0.0), law=law)
        world.add_vehicle("d", QUAD, position=(0.0, 0.0, 2000.0))
        world.step(20000)
        velocity = world.ground_truth("d").velocity_world
        drifts[law] = velocity[0]
        assert abs(velocity[1]) < 1e-9
    assert drifts["projected"] == pytest.approx(3.0, abs=0.05)  # a falling body drifts with the air
    assert 0.3 < drifts["faces"] < 1.5


def test_external_wrench_and_tilted_rotor_normals_push_the_body():
    world = make_world(drag=False)
    world.add_vehicle("a", QUAD, position=(0.0, 0.0, 100.0))
    world.add_vehicle("b", QUAD, position=(5.0, 0.0, 100.0), yaw=math.pi / 2)
    world.set_external_wrench("a", (2.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    tilt = (math.sin(0.3), 0.0, math.cos(0.3))
    for index in range(4):
        world.set_rotor_geometry("b", index, normal=tilt)
    world.set_controls("b", [0.5] * 4, spun_up=True)
    world.step(1)
    # a: 2 N forward on 1 kg. b: faces north, so its forward-tilted thrust accelerates it north.
    assert world.ground_truth("a").linear_acceleration_world[0] == pytest.approx(2.0, rel=1e-9)
    thrust = 4 * QUAD.rotors[0].max_thrust_n(world.body("b").air_density) * 0.5
    accel_b = world.ground_truth("b").linear_acceleration_world
    # (rel 1e-4: the rotors sit 2.5 cm above the centre of mass, so tilting them also pitches
    # the body, by 4e-6 rad in this first step)
    assert accel_b[1] == pytest.approx(thrust * math.sin(0.3), rel=1e-4)
    assert abs(accel_b[0]) < 1e-9
    with pytest.raises(ControlsError, match="outside"):
        world.set_controls("a", [0.5, 0.5, 0.5, 1.5])


def test_core_modules_never_import_rclpy():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import aerial_sim.physics.world, aerial_sim.physics.drag, aerial_sim.vehicles.multirotor\n"
        "import aerial_sim.environment.environment\n"
        "assert 'rclpy' not in sys.modules, 'the physics core imported rclpy'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_spinning_body_is_slowed_by_angular_drag_integrated_over_its_box():
    from aerial_sim.physics.drag import angular_drag_constants

    world = make_world(drag=False)
    world.add_vehicle("d", QUAD, position=(0.0, 0.0, 100.0))
    world.set_kinematics("d", angular_velocity_body=(0.0, 0.0, 20.0))
    world.step(1)
    constants = angular_drag_constants(QUAD.body_box_m, QUAD.angular_drag_coefficient)
    # The quadrature converges: a finer grid changes K by < 1e-4.
    assert angular_drag_constants(QUAD.body_box_m, QUAD.angular_drag_coefficient, samples=400) == pytest.approx(
        constants, rel=1e-4
    )
    truth = world.ground_truth("d")
    rate = truth.angular_velocity_body[2]
    rho = world.body("d").air_density
    # (rel 1e-4: drag is evaluated at the step's predicted rate, 1.4e-4 rad/s from the final one)
    expected = -rho * constants[2] * rate**2 / QUAD.inertia_kg_m2[2][2]
    assert truth.angular_acceleration_body[2] == pytest.approx(expected, rel=1e-4)
    assert truth.angular_acceleration_body[2] < 0.0


def test_linear_drag_at_10_m_s_forward_is_airsims():
    # AirSim's generic quad at 10 m/s along body x (AirLib FastPhysicsEngine::getDragWrench with the
    # drag faces of MultiRotorPhysicsBody::createDragVertices): 1/2 rho v^2 (1.3/4) (0.11*0.04 + 4 pi D h),
    # D = 0.2286 m, h = 0.01 m: 0.66 N at sea level.
    world = make_world(drag=True)
    world.add_vehicle("d", QUAD, position=(0.0, 0.0, 100.0))
    rho = world.environment.air_density(100.0)
    world.set_kinematics("d", velocity_world=(10.0, 0.0, 0.0))
    world.set_controls("d", QUAD.hover_controls(rho, world.environment.gravity(100.0)), spun_up=True)  # level, no sink
    world.step(1)
    expected = 0.5 * rho * 10.0**2 * 0.325 * (0.11 * 0.04 + 4 * math.pi * 0.2286 * 0.01)
    assert expected == pytest.approx(0.66, abs=0.01)
    drag = -world.ground_truth("d").linear_acceleration_world[0] * QUAD.mass_kg
    assert drag == pytest.approx(expected, rel=1e-3)  # v changes by 1 cm/s in the 1 ms step
