"""The physics node across processes: launched by the embedded launcher, driven over topics."""

from __future__ import annotations

import math

import pytest
from conftest import requires_ros, spin_until

from aerial_sim.environment.atmosphere import standard_atmosphere
from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.environment.gravity import normal_gravity
from aerial_sim.vehicles.multirotor import load_vehicle

pytestmark = [requires_ros, pytest.mark.ros]

SPAWN_ALTITUDE_M = 5.0


def hover_control(vehicle_type: str = "quad_x", altitude_m: float = SPAWN_ALTITUDE_M) -> float:
    """u at which total thrust equals weight at this altitude (the physics model's own law)."""
    vehicle = load_vehicle(vehicle_type)
    geometric_altitude = HomePoint().altitude + altitude_m
    density = standard_atmosphere(geometric_altitude).density_kg_m3
    max_thrust = sum(rotor.max_thrust_n(density) for rotor in vehicle.rotors)
    return vehicle.mass_kg * normal_gravity(HomePoint().latitude, geometric_altitude) / max_thrust


def subscribe_truth(ros_node, namespace: str = "drone1"):
    from nav_msgs.msg import Odometry
    from rosgraph_msgs.msg import Clock

    from aerial_sim.nodes.common import stream_qos

    seen = {"odom": [], "clock": []}
    ros_node.create_subscription(Odometry, f"/{namespace}/ground_truth/odom", seen["odom"].append, stream_qos())
    ros_node.create_subscription(Clock, "/clock", seen["clock"].append, stream_qos())
    return seen


def stamp_seconds(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def test_launched_physics_runs_in_real_time_and_publishes_at_250_hz(launch, ros_node):
    import time

    graph = launch("physics.launch.yaml", f"spawn_z:={SPAWN_ALTITUDE_M}")
    seen = subscribe_truth(ros_node)
    assert spin_until(ros_node, lambda: len(seen["clock"]) > 10, timeout_s=20), graph.output()
    wall_start, sim_start, odom_start = time.monotonic(), stamp_seconds(seen["clock"][-1].clock), len(seen["odom"])
    spin_until(ros_node, lambda: False, timeout_s=3.0)
    wall_elapsed = time.monotonic() - wall_start
    sim_elapsed = stamp_seconds(seen["clock"][-1].clock) - sim_start
    assert graph.alive(), graph.output()
    assert 0.9 < sim_elapsed / wall_elapsed < 1.1, (sim_elapsed, wall_elapsed)
    odom_rate = (len(seen["odom"]) - odom_start) / wall_elapsed
    assert 0.9 * 250 < odom_rate < 1.1 * 250, odom_rate
    clock = [stamp_seconds(m.clock) for m in seen["clock"]]
    assert all(b > a for a, b in zip(clock, clock[1:]))


def run_lockstep_flight(launch, ros_node, periods: int, climb: bool = True) -> list[tuple]:
    """Fly in lockstep, answering each state with one command; return the odometry sequence.

    ``climb``: a P-D altitude law toward 6 m (the command depends on the state, so any
    non-determinism in the loop shows up in the track); otherwise the analytic hover u.
    """
    from nav_msgs.msg import Odometry
    from std_msgs.msg import Float64MultiArray

    from aerial_sim.nodes.common import COMMAND_QOS, stream_qos

    graph = launch("physics.launch.yaml", "lockstep:=true", f"spawn_z:={SPAWN_ALTITUDE_M}")
    commands = ros_node.create_publisher(Float64MultiArray, "/drone1/motor_commands", COMMAND_QOS)
    u_hover = hover_control()
    track: list[tuple] = []
    answered: set = set()

    def on_odom(message: Odometry):
        stamp = (message.header.stamp.sec, message.header.stamp.nanosec)
        if stamp in answered:
            return  # the physics node re-sends a period's state while it waits
        answered.add(stamp)
        p, q = message.pose.pose.position, message.pose.pose.orientation
        track.append((stamp, p.x, p.y, p.z, q.w, q.x, q.y, q.z, message.twist.twist.linear.z))
        if climb:
            error = 6.0 - p.z
            u = min(1.0, max(0.0, u_hover * (1.0 + 0.3 * error - 0.3 * message.twist.twist.linear.z)))
            commands.publish(Float64MultiArray(data=[u, u, u, u * 0.999]))
        else:
            commands.publish(Float64MultiArray(data=[u_hover] * 4))

    subscription = ros_node.create_subscription(Odometry, "/drone1/ground_truth/odom", on_odom, stream_qos(lockstep=True))
    try:
        assert spin_until(ros_node, lambda: len(track) >= periods, timeout_s=60), graph.output()
    finally:
        graph.stop()
        ros_node.destroy_subscription(subscription)
        ros_node.destroy_publisher(commands)
    return track[:periods]


def test_hover_command_balances_weight_for_ten_seconds(launch, ros_node):
    """At the analytic hover u, thrust equals weight: vertical speed stays constant.

    The rotors start at rest, so while they spin up (first-order lag tau) the vehicle
    loses g*tau of vertical speed; after that only the drag on the slow sink and the
    thrust gained in the denser air below slow it, by a few mm/s in 10 s.
    """
    track = run_lockstep_flight(launch, ros_node, periods=2500, climb=False)  # 10 s of sim time
    assert track[-1][0] == (9, 996_000_000)
    quad = load_vehicle("quad_x")
    altitude = HomePoint().altitude + SPAWN_ALTITUDE_M
    g = normal_gravity(HomePoint().latitude, altitude)
    sag_speed = -g * quad.rotors[0].time_constant_s
    after_spin_up = [entry[-1] for entry in track[50:]]  # from t = 0.2 s
    assert after_spin_up[0] == pytest.approx(sag_speed, rel=0.2)
    # Bound on the change: drag 1/2 rho C A_z v^2 / m for 10 s, plus thrust growing linearly to
    # g * (relative density gain over the metre or so sunk) by the end.
    rho = standard_atmosphere(altitude).density_kg_m3
    drag = 0.5 * rho * quad.linear_drag_coefficient * quad.cross_section[2] * sag_speed**2 / quad.mass_kg
    sunk = -sag_speed * 10.0
    denser = g * (standard_atmosphere(altitude - sunk).density_kg_m3 / rho - 1.0)
    assert 0.0 < max(after_spin_up) - min(after_spin_up) < 10.0 * (drag + denser / 2)


def test_lockstep_runs_with_the_same_inputs_are_identical(launch, ros_node):
    first = run_lockstep_flight(launch, ros_node, periods=400)
    second = run_lockstep_flight(launch, ros_node, periods=400)
    assert first[0][0] == (0, 0) and first[-1][0] == (1, 596_000_000)  # one state per 4 ms period
    assert first[-1][3] > SPAWN_ALTITUDE_M + 0.2  # it really flew (climbing toward 6 m)
    assert first == second
