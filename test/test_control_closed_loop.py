"""The flight controller flies the pure PhysicsWorld in-process (closed loop, no ROS)."""

import math

import numpy as np
import pytest

from aerial_sim.config import ParamsError
from aerial_sim.control.controller import (
    STABLE_STATE_RATE_HZ,
    CascadedController,
    ControllerParams,
    StatePeriodMonitor,
    VehicleState,
)
from aerial_sim.control.geometry import yaw_of
from aerial_sim.control.mission import MissionParams, load_mission, pattern_path
from aerial_sim.control.supervisor import CommandRejected, FlightSupervisor, Mode, SupervisorParams
from aerial_sim.control.track import compare_tracks
from aerial_sim.control.trajectory import PathFollower, Trajectory
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
from aerial_sim.vehicles.multirotor import load_vehicle

PERIOD_S = 0.004  # 250 Hz control, 4 physics steps of 1 ms
TAKEOFF_M = 2.0


class Flight:
    """A vehicle in a PhysicsWorld with the flight supervisor closing the loop every control period.

    As in the launched graph under load, the controller may see a state refreshed only every
    ``state_every`` control periods (the physics node's ground-truth stride) and its motor
    commands may reach the vehicle ``command_lag`` periods late (transport and scheduling).
    """

    def __init__(self, vehicle_name="quad_x", state_every=1, command_lag=0):
        self.world = PhysicsWorld(PhysicsParams())
        vehicle = load_vehicle(vehicle_name)
        self.world.add_vehicle("uav", vehicle)
        self.fc = FlightSupervisor(SupervisorParams(takeoff_altitude=TAKEOFF_M), ControllerParams(), vehicle)
        self.log = []
        self.state_every, self.command_lag = state_every, command_lag
        self._periods = 0
        self._seen: VehicleState | None = None
        self._in_flight: list = []  # commands on their way to the vehicle
        self.fly(0.2)  # settle on the ground

    @property
    def state(self) -> VehicleState:
        return VehicleState.from_ground_truth(self.world.ground_truth("uav"))

    def fly(self, seconds, before_each=None):
        """Run ``seconds`` of closed loop; returns the logged (t, x, y, z, vx, vy, vz) rows as an array."""
        rows = []
        for _ in range(int(round(seconds / PERIOD_S))):
            if self._periods % self.state_every == 0:
                self._seen = self.state
            self._periods += 1
            state = self._seen
            if before_each:
                before_each(self.world.time_s, state)
            self._in_flight.append(self.fc.update(self.world.time_s, state, PERIOD_S))
            if len(self._in_flight) > self.command_lag:
                self.world.set_controls("uav", self._in_flight.pop(0))
            self.world.step(4)
            rows.append((self.world.time_s, *self.state.position, *self.state.velocity_world))
        return np.array(rows)

    def take_off(self):
        ground = self.state.position[2]
        self.fc.arm(True)
        self.fc.takeoff()
        return ground + TAKEOFF_M, self.fly(8.0)


@pytest.fixture(params=["quad_x", "hexa_x"])
def flight(request):
    return Flight(request.param)


def test_takeoff_reaches_altitude_within_2_percent_and_holds_within_10_cm(flight):
    target, log = flight.take_off()
    z = log[:, 3]
    assert abs(z[-1] - target) < 0.02 * TAKEOFF_M
    assert z.max() < target + 0.02 * TAKEOFF_M  # no overshoot beyond the band
    assert flight.fc.mode is Mode.HOLD
    hold = flight.fly(5.0)
    assert np.abs(hold[:, 3] - target).max() < 0.10
    assert np.abs(hold[:, 1:3]).max() < 0.10


def test_ten_metre_pose_step_settles_with_at_most_10_percent_overshoot(flight):
    flight.take_off()
    start = np.array(flight.state.position)
    goal = start + [10.0, 0.0, 0.0]
    flight.fc.command_pose(flight.world.time_s, goal, 0.0)
    log = flight.fly(15.0)
    x = log[:, 1] - start[0]
    assert x.max() <= 11.0
    assert abs(x[-1] - 10.0) < 0.1
    assert np.abs(log[-125:, 1:4] - goal).max() < 0.1  # settled for the last half second
    # No creep: within 5 cm for good 6 s after the command (a velocity integrator that wound up while the
    # vehicle decelerated pulled it 0.32 m back and took 10 s; benchmarks/position_step.py).
    t = log[:, 0] - log[0, 0]
    assert np.abs(x[t >= 6.0] - 10.0).max() < 0.05


@pytest.mark.parametrize("body_frame", [False, True])
def test_velocity_commands_are_tracked_within_0_2_m_s(flight, body_frame):
    flight.take_off()
    yaw = 1.0
    flight.fc.command_pose(flight.world.time_s, flight.state.position, yaw)
    flight.fly(4.0)
    assert yaw_of(flight.state.orientation) == pytest.approx(yaw, abs=0.02)
    command = (1.5, -0.8, 0.4)
    expected = (
        np.array([1.5 * math.cos(yaw) + 0.8 * math.sin(yaw), 1.5 * math.sin(yaw) - 0.8 * math.cos(yaw), 0.4])
        if body_frame
        else np.array(command)
    )
    log = flight.fly(6.0, lambda t, s: flight.fc.command_velocity(t, command, 0.0, body_frame=body_frame))
    settled = log[log[:, 0] > log[0, 0] + 3.0]
    assert np.abs(settled[:, 4:7] - expected).max() < 0.2


def test_velocity_stream_that_stops_falls_back_to_holding_position():
    flight = Flight()
    flight.take_off()
    flight.fly(1.0, lambda t, s: flight.fc.command_velocity(t, (2.0, 0.0, 0.0), 0.0))
    log = flight.fly(6.0)
    assert flight.fc.mode is Mode.HOLD
    assert np.linalg.norm(log[-1, 4:7]) < 0.05
    assert np.ptp(log[-250:, 1]) < 0.05  # stays put over the last second


def test_refused_commands_leave_the_vehicle_holding():
    flight = Flight()
    with pytest.raises(CommandRejected, match="arm first"):
        flight.fc.takeoff()
    with pytest.raises(CommandRejected, match="not armed"):
        flight.fc.command_pose(0.0, (0.0, 0.0, 5.0), 0.0)
    assert flight.fc.mode is Mode.DISARMED
    assert np.abs(flight.fly(1.0)[:, 3] - flight.state.position[2]).max() < 1e-3  # still on the ground
    target, _ = flight.take_off()
    with pytest.raises(CommandRejected, match="non-finite"):
        flight.fc.command_pose(flight.world.time_s, (math.nan, 0.0, 5.0), 0.0)
    with pytest.raises(CommandRejected, match="non-finite"):
        flight.fc.command_velocity(flight.world.time_s, (0.0, math.inf, 0.0), 0.0)
    with pytest.raises(CommandRejected, match="land"):
        flight.fc.arm(False)
    log = flight.fly(2.0)
    assert flight.fc.mode is Mode.HOLD
    assert np.abs(log[:, 3] - target).max() < 0.1


def test_land_ends_disarmed_on_the_ground(flight):
    ground = flight.state.position[2]
    flight.take_off()
    flight.fc.land()
    log = flight.fly(10.0)
    assert flight.fc.mode is Mode.DISARMED
    assert log[-1, 3] == pytest.approx(ground, abs=0.02)
    assert all(rotor.thrust_n < 1e-6 for rotor in flight.world.rotor_states("uav"))  # motors stopped


def test_setpoints_cannot_cancel_a_landing_but_takeoff_aborts_it():
    flight = Flight()
    ground = flight.state.position[2]
    flight.take_off()
    flight.fc.land()
    flight.fly(0.5)
    with pytest.raises(CommandRejected, match="while landing"):
        flight.fc.command_pose(flight.world.time_s, flight.state.position, 0.0)  # e.g. a late hold setpoint
    with pytest.raises(CommandRejected, match="while landing"):
        flight.fc.command_velocity(flight.world.time_s, (1.0, 0.0, 0.0), 0.0)
    assert flight.fc.mode is Mode.LANDING
    aborted_at = flight.state.position[2]
    flight.fc.takeoff()
    log = flight.fly(6.0)
    assert flight.fc.mode is Mode.HOLD
    assert log[-1, 3] == pytest.approx(aborted_at + TAKEOFF_M, abs=0.1)
    assert log[-1, 3] > ground + TAKEOFF_M


def test_land_holds_where_the_vehicle_is_at_the_next_step_whether_its_state_came_before_or_after():
    """In lockstep a land request and the odometry of the step it belongs to race each other; the
    landing target (and so every motor command after it) must not depend on which one won."""
    flight = Flight()
    flight.take_off()
    flight.fc.command_velocity(flight.world.time_s, (1.0, 0.0, 0.0), 0.0)
    flight.fly(1.0)  # moving at about 1 m/s: consecutive states differ by about 4 mm
    before = flight.state
    flight.world.step(4)
    after = flight.state
    outputs = []
    for state_first in (True, False):
        fc = FlightSupervisor(SupervisorParams(takeoff_altitude=TAKEOFF_M), ControllerParams(), load_vehicle("quad_x"))
        fc.observe(before)
        fc.arm(True)
        fc.takeoff()
        fc.update(0.0, before, PERIOD_S)
        if state_first:
            fc.observe(after)
        fc.land()
        outputs.append(fc.update(PERIOD_S, after, PERIOD_S))
        assert fc.mode is Mode.LANDING
        assert np.allclose(fc._target_position[:2], after.position[:2])
    assert outputs[0] == outputs[1]


def test_mixer_refuses_a_vehicle_that_cannot_hover():
    heavy = load_vehicle("quad_x").__class__(**{**load_vehicle("quad_x").__dict__, "mass_kg": 3.0})
    with pytest.raises(ParamsError, match="cannot hover"):
        FlightSupervisor(SupervisorParams(), ControllerParams(), heavy)


@pytest.mark.parametrize("vehicle_name", ["quad_x", "hexa_x"])
def test_a_yaw_rate_the_rotors_cannot_reach_leaves_no_yaw_torque_once_the_request_ends(vehicle_name):
    """Rate anti-windup: while the mixer cannot give the requested yaw, the yaw integrator does not
    grow, so a vehicle held still (on a test stand) gets equal rotor inputs, no yaw torque, back at once."""
    controller = CascadedController(ControllerParams(), load_vehicle(vehicle_name))
    held = VehicleState((0.0, 0.0, 2.0), (1.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    for _ in range(500):  # 2 s asking for the largest yaw rate
        turning = controller.update_rates(held, (0.0, 0.0, 1.5), PERIOD_S, altitude=2.0)
    assert turning.saturated and turning.torque_nm[2] > 0.05
    released = controller.update_rates(held, (0.0, 0.0, 0.0), PERIOD_S, altitude=2.0)
    assert released.torque_nm == pytest.approx((0.0, 0.0, 0.0), abs=1e-9)
    assert max(released.controls) - min(released.controls) < 1e-9


def fly_mission(flight, mission: MissionParams):
    flight.take_off()
    path = pattern_path(mission, flight.state.position)
    trajectory = Trajectory(path, mission.speed_m_s, mission.acceleration_m_s2)
    follower = PathFollower(trajectory, mission.tracking_gain, mission.max_correction_m_s, mission.lookahead_s)
    start = flight.world.time_s

    def follow(t, state):
        velocity, _ = follower.command(t - start, state.position)
        flight.fc.command_velocity(t, velocity, 0.0)

    log = flight.fly(trajectory.duration_s + 1.0, follow)
    return compare_tracks(log[:, 1:4], path), trajectory


@pytest.mark.parametrize(
    "mission_name, paper_hausdorff_m",
    [("square_5m", 0.65), ("circle_10m", 1.47)],
)
def test_paper_missions_stay_within_the_papers_hausdorff_distance(mission_name, paper_hausdorff_m):
    """Shipped missions (square 2 m/s, circle 5 m/s) against the sim-vs-real figures of AirSim sec. 4."""
    mission = load_mission(mission_name)
    metrics, trajectory = fly_mission(Flight(), mission)
    assert trajectory.speeds.max() == pytest.approx(mission.speed_m_s)
    assert metrics.hausdorff_m < paper_hausdorff_m
    assert metrics.rms_cross_track_m < metrics.hausdorff_m


def lateral_step(flight, metres=4.0, seconds=6.0):
    """Take off (5 s), then a ``metres`` step along x: (peak x, final error, largest body rate) of the step."""
    flight.fc.arm(True)
    flight.fc.takeoff()
    flight.fly(5.0)
    start = np.array(flight.state.position)
    flight.fc.command_pose(flight.world.time_s, start + [metres, 0.0, 0.0], 0.0)
    rates = []
    log = flight.fly(seconds, lambda t, s: rates.append(np.abs(flight.state.angular_velocity_body).max()))
    return log[:, 1].max() - start[0], abs(log[-1, 1] - start[0] - metres), max(rates)


def test_ground_truth_at_the_floor_rate_with_late_commands_flies_like_full_rate():
    """The physics node never lowers ground truth below STABLE_STATE_RATE_HZ: at that rate, with
    commands 20 ms late as well, a 4 m step is flown as at 250 Hz (overshoot, settling, body rates)."""
    stride = round(1.0 / (PERIOD_S * STABLE_STATE_RATE_HZ))
    peak, error, rate = lateral_step(Flight(state_every=stride, command_lag=5))
    assert peak < 4.4  # at most 10 % overshoot
    assert error < 0.1
    assert rate < 6.0  # 250 Hz without lag: about 3 rad/s; a ringing loop reaches 9 and more


def test_ground_truth_at_10_hz_loses_the_vehicle():
    """Why the floor exists: fed 10 Hz odometry, the same controller cannot fly the same step."""
    peak, error, rate = lateral_step(Flight(state_every=25))
    assert error > 1.0 or rate > 10.0


def test_the_state_period_monitor_flags_a_sustained_slow_stream_not_one_late_message():
    """What the flight controller node warns on: odometry slower than the rate it is known to fly at."""
    monitor = StatePeriodMonitor()
    stamps = [0.004 * k for k in range(200)]  # 250 Hz
    assert not any(monitor.update(t) for t in stamps)
    assert not monitor.update(stamps[-1] + 0.1)  # one message 100 ms late (lost ones before it)
    floor_period = 1.0 / STABLE_STATE_RATE_HZ
    assert not any(monitor.update(1.0 + floor_period * k) for k in range(200))  # at the floor: fine
    assert [monitor.update(6.0 + 0.1 * k) for k in range(100)][-1]  # 10 Hz for 10 s: flagged
    assert monitor.period_s == pytest.approx(0.1, rel=0.01)


@pytest.mark.parametrize("vehicle_name", ["quad_x", "hexa_x"])
def test_the_one_function_cascade_gives_the_staged_cascades_bits(vehicle_name):
    """``CascadedController.update`` (the cascade written out in one function, issue 34's flight CPU) against
    ``update_by_stages`` (each stage a function): the same rotor inputs, outputs and integrators, bit for bit
    (repr tells -0.0 from 0.0), step after step, over hover, steps, velocity mode and every saturation."""
    from aerial_sim.control.controller import Setpoint

    vehicle = load_vehicle(vehicle_name)
    one, staged = (CascadedController(ControllerParams(), vehicle) for _ in range(2))
    rng = np.random.default_rng(34)
    for step in range(3000):
        scale = (0.01, 0.3, 3.0, 30.0)[step % 4]  # hover to far beyond every limit
        quaternion = rng.normal(size=4)
        quaternion *= rng.uniform(0.98, 1.02) / np.linalg.norm(quaternion)  # odometry's quaternions are near unit
        if step % 7 == 0:
            quaternion = np.array([1.0, 0.0, 0.0, 0.0])  # level: exact zeros on the way
        state = VehicleState(tuple(rng.normal(0, scale, 3).tolist()), tuple(quaternion.tolist()),
                             tuple(rng.normal(0, scale, 3).tolist()), tuple(rng.normal(0, scale / 3, 3).tolist()))
        position = None if step % 3 == 0 else tuple(rng.normal(0, scale, 3).tolist())
        setpoint = Setpoint(position, tuple(rng.normal(0, scale / 3, 3).tolist()),
                            tuple(rng.normal(0, scale / 5, 3).tolist()), float(rng.uniform(-4, 4)),
                            float(rng.normal(0, 0.5)))
        if step % 500 == 0:
            one.reset(), staged.reset()
        assert repr(one.update(state, setpoint, 0.004)) == repr(staged.update_by_stages(state, setpoint, 0.004))
        assert repr(one._integrators) == repr(staged._integrators)
