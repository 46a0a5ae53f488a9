"""Closed-loop swarms in the core: the batched controller and IMU against the per-vehicle ones,
a batched closed-loop hover, commands for all vehicles at once, and dense swarms' contacts."""

import math
from dataclasses import replace

import numpy as np
import pytest

from aerial_sim.control import batched_controller as batched_module_controller
from aerial_sim.control.batched_controller import BatchedController
from aerial_sim.control.cascade_lanes import cascade_lanes
from aerial_sim.control.controller import CascadedController, ControllerParams, Setpoint, VehicleState
from aerial_sim.control.swarm_flight import SwarmFlight
from aerial_sim.environment.environment import EnvironmentParams
from aerial_sim.physics import batched as batched_module
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
from aerial_sim.sensors.batched_imu import ZIG_R, BatchedImu, _seed_state, _tail, fill_normals
from aerial_sim.sensors.mounting import Mount
from aerial_sim.sensors.truth import TruthSample
from aerial_sim.sensors.imu import Imu, ImuParams
from aerial_sim.vehicles.multirotor import load_vehicle

QUAD = load_vehicle("quad_x")
HEXA = load_vehicle("hexa_x")


def random_states(rng, count):
    q = rng.normal(size=(count, 4))
    q[:, 0] = np.abs(q[:, 0]) + 2.0  # within about 60 degrees of level
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return (rng.uniform(-20, 20, (count, 3)), q, rng.normal(0, 3, (count, 3)), rng.normal(0, 2, (count, 3)))


def test_batched_controller_gives_the_per_vehicle_controllers_rotor_inputs():
    """Mixed quads and hexas, random states and setpoints (many saturating: far targets, steep
    attitudes), velocity-mode rows, 50 steps so the integrators and their anti-windup matter."""
    rng = np.random.default_rng(4)
    count = 40
    vehicles = [QUAD if i % 3 else HEXA for i in range(count)]
    params = ControllerParams()
    batched = BatchedController(params, vehicles)
    singles = [CascadedController(params, v) for v in vehicles]
    mode = np.arange(count) % 4 != 0
    saturated_seen = False
    for _ in range(50):
        position, orientation, velocity, rates = random_states(rng, count)
        target = position + rng.normal(0, 8, (count, 3))
        velocity_ff, accel_ff = rng.normal(0, 2, (count, 3)), rng.normal(0, 1, (count, 3))
        yaw, yaw_rate = rng.uniform(-math.pi, math.pi, count), rng.normal(0, 0.5, count)
        controls = batched.update(position, orientation, velocity, rates, target, velocity_ff, accel_ff, yaw,
                                  yaw_rate, 0.004, mode)
        for i, single in enumerate(singles):
            state = VehicleState(tuple(position[i]), tuple(orientation[i]), tuple(velocity[i]), tuple(rates[i]))
            setpoint = Setpoint(tuple(target[i]) if mode[i] else None, tuple(velocity_ff[i]), tuple(accel_ff[i]),
                                float(yaw[i]), float(yaw_rate[i]))
            out = single.update(state, setpoint, 0.004)
            k = len(out.controls)
            assert controls[i, :k] == pytest.approx(out.controls, abs=1e-12)
            assert not controls[i, k:].any()
            assert batched.saturated[i] == out.saturated
            assert batched.thrust_n[i] == pytest.approx(out.thrust_n, abs=1e-9)
            assert batched.velocity_integral[i] == pytest.approx(single._integrators.velocity, abs=1e-12)
            assert batched.rate_integral[i] == pytest.approx(single._integrators.rate, abs=1e-12)
            saturated_seen |= out.saturated
    assert saturated_seen


def test_lane_cascade_equals_the_one_vehicle_kernel_to_the_last_bit(monkeypatch):
    """The SIMD cascade (control/cascade_lanes) against the one-vehicle kernel: 203 rows in runs of quads
    and hexas (blocks of one kind and mixed ones), steep attitudes, yaw near 180 degrees (Shepperd's other
    branches), far and absurd targets (1e200 m: the squares overflow), NaN rows, velocity-mode rows; every
    output and integrator equal over 40 steps, and most rows really went through the lanes."""
    rng = np.random.default_rng(11)
    count = 203
    vehicles = [HEXA if (i // 37) % 3 == 2 or i % 29 == 0 else QUAD for i in range(count)]
    params = ControllerParams()
    lanes, reference = BatchedController(params, vehicles), BatchedController(params, vehicles)
    mode = np.arange(count) % 5 != 0
    for step in range(40):
        position, orientation, velocity, rates = random_states(rng, count)
        target = position + rng.normal(0, 8, (count, 3))
        target[::17] = 1e200
        target[3::41] = np.nan
        velocity_ff, accel_ff = rng.normal(0, 2, (count, 3)), rng.normal(0, 1, (count, 3))
        yaw = rng.uniform(-0.5, 0.5, count)
        yaw[(np.arange(count) // 16) % 4 == 3] = math.pi - 0.01
        yaw_rate = rng.normal(0, 0.5, count)
        arguments = (position, orientation, velocity, rates, target, velocity_ff, accel_ff, yaw, yaw_rate, 0.004, mode)
        monkeypatch.setattr(batched_module_controller, "LANE_CASCADE", True)
        lanes.update(*arguments)
        monkeypatch.setattr(batched_module_controller, "LANE_CASCADE", False)
        reference.update(*arguments)
        for name in ("controls", "saturated", "thrust_n", "valid", "velocity_integral", "rate_integral"):
            assert np.array_equal(getattr(lanes, name), getattr(reference, name)), (step, name)
    unusable = np.isnan(target).any(axis=1) & mode
    assert np.isfinite(lanes.controls).all() and unusable.any() and np.array_equal(lanes.valid, ~unusable)
    left = cascade_lanes(position, orientation, velocity, rates, target, mode, velocity_ff, accel_ff, yaw, yaw_rate,
                         0.004, lanes.kind, lanes.const, lanes.mixing, lanes.kind_rotors, lanes.gains,
                         lanes.velocity_integral, lanes.rate_integral, lanes.controls, lanes.saturated,
                         lanes.thrust_n, lanes.valid)
    assert 0 < len(left) < count // 2


@pytest.mark.parametrize("lane_cascade", [True, False])
def test_batched_controller_keeps_a_row_whose_setpoint_or_state_is_unusable(lane_cascade, monkeypatch):
    """NaN or infinite setpoints, a zero or NaN quaternion, a NaN body rate: those rows keep their last
    inputs and are flagged, the other 16 (one block of lanes) fly on; a bad dt is refused."""
    monkeypatch.setattr(batched_module_controller, "LANE_CASCADE", lane_cascade)
    count = 20
    batched = BatchedController(ControllerParams(), [QUAD] * count)
    position, level = np.zeros((count, 3)) + [0, 0, 5], np.tile([1.0, 0, 0, 0], (count, 1))
    zeros3, zeros = np.zeros((count, 3)), np.zeros(count)
    target = position + [0, 0, 1.0]
    first = batched.update(position, level, zeros3, zeros3, target, zeros3, zeros3, zeros, zeros, 0.004).copy()
    orientation, rates, target = level.copy(), zeros3.copy(), target.copy()
    target[1, 0], target[2, 2] = np.nan, np.inf
    orientation[3], orientation[4, 1], rates[5, 2] = 0.0, np.nan, np.nan
    second = batched.update(position, orientation, zeros3, rates, target, zeros3, zeros3, zeros, zeros, 0.004)
    assert np.flatnonzero(~batched.valid).tolist() == [1, 2, 3, 4, 5]
    assert np.array_equal(second[1:6], first[1:6]) and np.isfinite(second).all()
    with pytest.raises(ValueError, match="dt"):
        batched.update(position, level, zeros3, zeros3, target, zeros3, zeros3, zeros, zeros, 0.0)


def imu_inputs(rng, count):
    return rng.normal(0, 1, (count, 3)), rng.normal(0, 3, (count, 3)) + [0, 0, 9.8], rng.normal(0, 5, (count, 3))


def test_batched_imu_with_numpy_noise_equals_each_vehicles_own_imu_bit_for_bit():
    """Each row draws from the generators of ``Imu(seed)`` in its order (lever arm and tilted mount too)."""
    params = ImuParams(mount=Mount(position_m=(0.05, -0.02, 0.01), rpy_rad=(0.1, -0.2, 0.3)),
                       gyro_bias_stability=1e-3, accel_bias_stability=1e-2)
    seeds = [3, 17, 0, 99]
    batched = BatchedImu(params, seeds, block_samples=7, noise="numpy")  # several refills in 30 samples
    singles = [Imu(replace(params, seed=s)) for s in seeds]
    rng = np.random.default_rng(1)
    for sample in range(30):
        omega, force, alpha = imu_inputs(rng, len(seeds))
        gyro, accel = batched.step(0.005, omega, force, alpha)
        for i, imu in enumerate(singles):
            truth = TruthSample(time_s=sample * 0.005, angular_velocity_body=tuple(omega[i]),
                                specific_force_body=tuple(force[i]), angular_acceleration_body=tuple(alpha[i]))
            out = imu.step(0.005, truth)
            assert tuple(gyro[i]) == out.angular_velocity
            assert tuple(accel[i]) == out.linear_acceleration
    assert batched.variances(0.005) == (out.angular_velocity_variance, out.linear_acceleration_variance)
    batched.reset()
    singles[1].reset()
    again, _ = batched.step(0.005, omega, force, alpha)
    truth = TruthSample(time_s=0.0, angular_velocity_body=tuple(omega[1]), specific_force_body=tuple(force[1]),
                        angular_acceleration_body=tuple(alpha[1]))
    assert tuple(again[1]) == singles[1].step(0.005, truth).angular_velocity


def test_batched_imu_fast_noise_has_the_models_statistics_and_depends_only_on_each_seed():
    """White noise variance r^2 / dt and bias-walk increments b0^2 dt / t_a per axis (the model of
    sensors/imu), within the sampling error of 4,000 samples x 3 axes x 50 vehicles."""
    params = ImuParams(gyro_bias_stability=0.01, gyro_bias_tau_s=1.0, accel_bias_stability=0.0)
    count, samples, dt = 50, 4000, 0.004
    imu = BatchedImu(params, range(count))
    zeros = np.zeros((count, 3))
    gyro = np.empty((samples, count, 3))
    accel = np.empty((samples, count, 3))
    bias = np.empty((samples, count, 3))
    for k in range(samples):
        bias[k] = imu.gyro_bias
        g, a = imu.step(dt, zeros, zeros)
        gyro[k], accel[k] = g, a
    white_accel = accel.var()
    expected = params.accel_white_variance(dt)
    tolerance = 4 * expected * math.sqrt(2.0 / accel.size)
    assert abs(white_accel - expected) < tolerance
    steps = np.diff(bias, axis=0)
    expected_step = params.gyro_bias_stability**2 * dt / params.gyro_bias_tau_s
    assert abs(steps.var() - expected_step) < 4 * expected_step * math.sqrt(2.0 / steps.size)
    assert abs(np.corrcoef(accel[:, 0, 0], accel[:, 1, 0])[0, 1]) < 4 / math.sqrt(samples)  # rows independent
    # vehicle 7's samples do not depend on who else flies, nor on its row
    alone = BatchedImu(params, [7])
    for k in range(5):
        g, _ = alone.step(dt, zeros[:1], zeros[:1])
        assert np.array_equal(g[0], gyro[k, 7] - 0.0)
    with pytest.raises(ValueError, match="vibration"):
        BatchedImu(replace(params, vibration_enabled=True), [0])


def test_batched_imu_fast_normals_follow_the_normal_law_into_the_tails():
    """3.6 million draws of the fast source (ziggurat: rectangles, wedges and the tail beyond r):
    mean, variance, the fractions beyond 3 sigma, 4 sigma and r, and a chi-square over 92 bins, each
    within the sampling error of the normal law; the two halves of a word uncorrelated; and the tail
    sampler's draws distributed as the normal law beyond r."""
    rows, calls = 1000, 300
    states = np.array([_seed_state(seed) for seed in range(rows)], dtype=np.uint64)
    out = np.empty((rows, 12))
    draws = np.empty((calls, rows, 12))
    for k in range(calls):
        fill_normals(states, out)
        draws[k] = out
    x = draws.ravel()
    n = x.size
    assert abs(x.mean()) < 4 / math.sqrt(n)
    assert abs(x.var() - 1.0) < 4 * math.sqrt(2 / n)
    for beyond in (3.0, 4.0, ZIG_R):
        expected = n * math.erfc(beyond / math.sqrt(2))
        assert abs(np.count_nonzero(np.abs(x) > beyond) - expected) < 4 * math.sqrt(expected), beyond
    edges = np.linspace(-4.5, 4.5, 91)
    counts, _ = np.histogram(x, bins=np.concatenate([[-np.inf], edges, [np.inf]]))
    cdf = np.array([0.0] + [0.5 * math.erfc(-e / math.sqrt(2)) for e in edges] + [1.0])
    expected = n * np.diff(cdf)
    chi2, dof = np.sum((counts - expected) ** 2 / expected), counts.size - 1
    assert chi2 < dof + 5 * math.sqrt(2 * dof)
    assert abs(np.corrcoef(draws[..., 0].ravel(), draws[..., 1].ravel())[0, 1]) < 4 / math.sqrt(rows * calls)
    # the tail sampler alone (3.6 million draws reach it about 190 times): P(X > r + t | X > r)
    tail = np.array([_tail(states, 0, True) for _ in range(50_000)])
    for t in (0.1, 0.25, 0.5, 1.0):
        p = math.erfc((ZIG_R + t) / math.sqrt(2)) / math.erfc(ZIG_R / math.sqrt(2))
        assert abs(np.count_nonzero(tail > ZIG_R + t) - p * tail.size) < 4 * math.sqrt(tail.size * p * (1 - p)), t
    assert _tail(states, 0, False) < -ZIG_R
    with pytest.raises(ValueError, match="even"):
        fill_normals(states, np.empty((rows, 3)))


def grid_world(count, spacing, height=10.0, stepping="batched"):
    world = PhysicsWorld(PhysicsParams(stepping=stepping), EnvironmentParams())
    side = math.ceil(math.sqrt(count))
    starts = np.array([(spacing * (i % side), spacing * (i // side), height) for i in range(count)])
    hover = QUAD.hover_controls(world.environment.air_density(height), world.environment.gravity(height))
    for i, start in enumerate(starts):
        world.add_vehicle(f"d{i}", QUAD, position=tuple(start))
        world.set_controls(f"d{i}", hover, spun_up=True)
    return world, starts


def test_closed_loop_swarm_holds_its_hover_and_flies_the_per_vehicle_loops_path():
    """16 quads hover 2 s in the batched loop (IMU gyro in the rate loop), then head for a point
    2.4 m away; a per-vehicle loop (CascadedController, Imu with the same noise, set_controls one by
    one) flies the same: the hover holds within 5 cm and both loops agree to round-off."""
    count = 16
    world, starts = grid_world(count, 3.0)
    flight = SwarmFlight(world, imu_params=ImuParams(rate_hz=250.0), imu_seeds=range(count))
    flight.imu = BatchedImu(flight.imu.params, range(count), noise="numpy")  # the per-vehicle Imu's draws
    reference, _ = grid_world(count, 3.0)
    controllers = [CascadedController(ControllerParams(), QUAD) for _ in range(count)]
    imus = [Imu(ImuParams(rate_hz=250.0, seed=i)) for i in range(count)]
    names = reference.vehicle_names()
    worst = 0.0
    for period in range(750):
        target = starts + ([2.0, -1.0, 1.0] if period >= 500 else 0.0)
        flight.period(target)
        for i, name in enumerate(names):
            truth = reference.ground_truth(name)
            gyro = imus[i].step(0.004, truth).angular_velocity
            state = VehicleState(truth.position, truth.orientation, truth.velocity_world, gyro)
            out = controllers[i].update(state, Setpoint(tuple(target[i])), 0.004)
            reference.set_controls(name, out.controls)
        reference.step(4)
        if period == 499:
            hover_error = np.abs(world.truth_arrays()["position"] - starts).max()
        if period % 50 == 49:
            expected, _ = reference.poses()
            worst = max(worst, np.abs(world.truth_arrays()["position"] - expected).max())
    assert hover_error < 0.05
    assert worst < 1e-9
    left = np.linalg.norm(world.truth_arrays()["position"] - (starts + [2.0, -1.0, 1.0]), axis=1)
    assert left.max() < 0.8 * math.sqrt(6.0)  # 1 s into the move every vehicle is well on its way


def test_commands_for_all_vehicles_at_once_reach_each_vehicles_body():
    world, _ = grid_world(3, 3.0)
    world.step(4)
    controls = np.array([[0.6, 0.6, 0.6, 0.6], [0.5, 0.5, 0.5, 0.5], [0.7, 0.7, 0.7, 0.7]])
    world.set_all_controls(controls)
    assert world.body("d1").rotors.commands == [0.5] * 4
    world.set_kinematics("d2", position=(0.0, 50.0, 20.0))  # a state change keeps the new commands
    world.step(4)
    assert world.body("d2").rotors.commands == [0.7] * 4
    assert world._batch.commands[2].tolist() == [0.7] * 4
    with pytest.raises(ValueError, match="controls in"):
        world.set_all_controls(np.full((3, 4), np.nan))


def contact_run(spacing, prefilter, periods=60):
    """A 4 x 4 grid at ``spacing`` m with random pushes (dense: spheres and some boxes touch)."""
    batched_module.NARROW_PREFILTER = prefilter
    try:
        world, _ = grid_world(16, spacing)
        rng = np.random.default_rng(5)
        for i, name in enumerate(world.vehicle_names()):
            world.set_kinematics(name, velocity_world=tuple(rng.normal(0, 0.4, 3)),
                                 angular_velocity_body=tuple(rng.normal(0, 1.0, 3)))
        records = []
        for _ in range(periods):
            world.step(4)
            records += world.take_collisions()
        return world.truth_arrays(), records
    finally:
        batched_module.NARROW_PREFILTER = True


@pytest.mark.parametrize("spacing", [0.2, 0.3, 3.0])
def test_dense_and_sparse_swarms_contacts_equal_the_fcl_only_path(spacing):
    truth_new, records_new = contact_run(spacing, True)
    truth_old, records_old = contact_run(spacing, False)
    assert records_new == records_old
    for field in truth_new:
        assert np.array_equal(truth_new[field], truth_old[field])
    if spacing == 0.2:
        assert len(records_new) > 4  # the dense grid did collide
    if spacing == 3.0:
        assert not records_new


@pytest.mark.parametrize("spacing", [0.3, 1.0])
def test_a_held_broad_phase_plan_still_catches_a_vehicle_flown_into_its_neighbour(spacing, monkeypatch):
    """A 4 x 4 grid under the batched controller; at 0.3 m the safety spheres overlap (boxes apart), at
    1 m they do not, and either way the broad-phase plan is held across windows. Mid-flight one quad is
    sent to its neighbour's position (new setpoints only: no state change, so no new plan): states and
    contacts equal a run that makes a fresh plan every window (PLAN_STEPS 1, no long plans), and the held
    run made a small share of the plans."""
    from aerial_sim.physics import broad_phase_kernels

    def run(fresh_plans):
        if fresh_plans:
            monkeypatch.setattr(batched_module, "PLAN_STEPS", 1)
            monkeypatch.setattr(batched_module, "LONG_PLAN_STEPS", 0)
        plans = []
        close_pairs = broad_phase_kernels.close_pairs
        monkeypatch.setattr(broad_phase_kernels, "close_pairs", lambda *a: plans.append(1) or close_pairs(*a))
        world, starts = grid_world(16, spacing)
        flight = SwarmFlight(world)
        setpoints = starts.copy()
        records = []
        for period in range(350):
            if period == 20:
                setpoints[5] = starts[6]
            flight.period(setpoints)
            records += world.take_collisions()
        monkeypatch.undo()
        return world.truth_arrays(), records, len(plans)

    truth_held, records_held, plans_held = run(False)
    truth_fresh, records_fresh, plans_fresh = run(True)
    assert records_held and records_held == records_fresh
    for field in truth_held:
        assert np.array_equal(truth_held[field], truth_fresh[field]), field
    assert plans_fresh == 350 and plans_held < 175, (plans_fresh, plans_held)
