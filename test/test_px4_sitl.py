"""PX4's simulator MAVLink interface (issue 33 item 2): the HIL messages as PX4's simulator_mavlink reads
them, and a hover flown through the ``px4_sitl`` node by a peer playing PX4's side
(test/data/mavlink/px4_peer.py) with the built-in controller left out of the graph."""

from __future__ import annotations

import math

import pytest
from pymavlink.dialects.v20 import common as mav

from aerial_sim.sitl import px4_hil
from aerial_sim.sitl.lockstep import StepAnswers
from conftest import requires_ros
from sitl_bridges import bridge_port, launch_bridge, peer_result, run_peer, start_peer, wait_for_bridge


def test_hil_messages_carry_frd_ned_units_as_px4_reads_them():
    # Level, facing east (ENU yaw 0 = NED heading 90 deg), at rest: specific force +g up (FLU) = -g on z (FRD).
    sensor = px4_hil.hil_sensor(2.0, (0.0, 0.0, 9.81), (0.1, 0.2, 0.3), (2e-5, 0.0, -4e-5), 100000.0, 15.0)
    assert sensor.time_usec == 2_000_000
    assert (sensor.xacc, sensor.yacc, sensor.zacc) == pytest.approx((0.0, 0.0, -9.81))
    assert (sensor.xgyro, sensor.ygyro, sensor.zgyro) == pytest.approx((0.1, -0.2, -0.3))
    assert (sensor.xmag, sensor.ymag, sensor.zmag) == pytest.approx((0.2, 0.0, 0.4))  # gauss
    assert sensor.abs_pressure == pytest.approx(1000.0)  # hPa
    assert sensor.pressure_alt == pytest.approx(110.9, abs=0.5)  # standard atmosphere at 1000 hPa
    assert sensor.fields_updated == 0b1_1011_1111_1111
    gps = px4_hil.hil_gps(2.0, 47.6, -122.1, 130.0, (0.0, 3.0, -1.0))  # 3 m/s north, sinking 1 m/s
    assert (gps.vn, gps.ve, gps.vd, gps.cog, gps.fix_type) == (300, 0, 100, 0, 3)
    assert gps.alt == 130_000 and gps.lat == 476_000_000
    state = px4_hil.hil_state_quaternion(2.0, (1.0, 0.0, 0.0, 0.0), (0, 0, 0), 47.6, -122.1, 130.0, (1.0, 0.0, 0.0),
                                         (0.0, 0.0, 9.80665))
    w, x, y, z = state.attitude_quaternion
    assert math.degrees(2 * math.atan2(z, w)) == pytest.approx(90.0)  # NED heading east
    assert (state.vx, state.vy, state.zacc) == (0, 100, -1000)
    controls = [0.5, 1.5, float("nan"), -0.2] + [0.0] * 12
    armed = mav.MAVLink_hil_actuator_controls_message(0, controls, mav.MAV_MODE_FLAG_SAFETY_ARMED, 0)
    assert px4_hil.motor_controls(armed, 4) == ((0.5, 1.0, 0.0, 0.0), True)
    disarmed = mav.MAVLink_hil_actuator_controls_message(0, controls, 0, 0)
    assert px4_hil.motor_controls(disarmed, 4) == ((0.0, 0.0, 0.0, 0.0), False)


def test_lockstep_sends_each_step_once_and_releases_it_only_with_its_own_answer():
    steps = StepAnswers()
    assert steps.send_state(0, connection=1) and steps.release_unanswered()  # PX4 silent yet: motors off
    assert steps.send_state(4000, 1) and not steps.send_state(4000, 1)  # a state re-sent by physics: not again
    assert steps.release(4000) and steps.answering  # PX4's first answer
    assert not steps.send_state(4000, 1)  # answered: the physics node's re-send goes nowhere
    assert steps.send_state(8000, 1) and not steps.release_unanswered()  # answering now: the step waits
    assert not steps.release(4000)  # a late answer to the step before does not release this one
    assert steps.release(8000) and not steps.release(8000)  # its own answer does, once
    assert steps.send_state(12000, 1) and steps.send_state(12000, 2)  # PX4 reconnected: it needs the state
    assert steps.release_unanswered()  # and until it answers on the new connection, motors off
    assert (steps.released, steps.stale) == (2, 2)


@requires_ros
@pytest.mark.ros
def test_a_peer_playing_px4_hovers_the_vehicle_through_the_bridge(launch, tmp_path):
    # Out of lockstep the peer's lag is wall time: at half speed a peer starved of CPU on a loaded machine
    # lags half as far in simulated time (at full speed under load ~12 on 2 cores it climbed 0.2-1.2 m of 2).
    graph = launch_bridge(launch, tmp_path, "px4", "clock_speed:=0.5")
    wait_for_bridge(graph, "px4")
    # 7 s of simulation, however slowly a loaded machine runs it (the peer waits for the first ground truth);
    # a peer starved of CPU flies on the newest state, as a real-time autopilot does
    seen = run_peer("px4", "80", "--sim-seconds", "7", "--keep-up")
    counts = seen["counts"]
    assert counts["HIL_SENSOR"] > 5 * counts["HIL_GPS"] > 0 and counts["HIL_STATE_QUATERNION"] > 0
    assert seen["accel_at_start"][2] == pytest.approx(-9.8, abs=0.5)
    assert seen["sim_s"] >= 6.9  # the 7 s flown, not cut short by the wall-clock limit
    start, final = seen["start"], seen["final"]
    assert final[2] - start[2] == pytest.approx(2.0, abs=0.3), graph.output()[-3000:]
    assert math.hypot(final[0] - start[0], final[1] - start[1]) < 0.6  # the peer flies on 2-core-loaded timing
    assert "PX4 connected" in graph.output() and graph.alive()


@requires_ros
@pytest.mark.ros
def test_in_lockstep_a_slow_px4_holds_the_simulation_and_flies_the_same_trajectory(launch, spare_domain, tmp_path):
    # Sensors off: HIL_SENSOR then carries ground truth, so each step's inputs are the step's own. Two graphs
    # side by side: a PX4 that answers at once, and one 3x slower than a 4 ms step.
    delays, graphs, peers, climbs = ("0", "0.012"), [], [], {}
    for second, delay_s in enumerate(delays):
        graphs.append(launch_bridge(launch, tmp_path, "px4", "lockstep:=true", "use_imu:=false", "use_gps:=false",
                                    "use_magnetometer:=false", "use_barometer:=false", port=bridge_port("px4", second),
                                    domain_id=spare_domain() if second else None))
    for second, (delay_s, graph) in enumerate(zip(delays, graphs)):
        wait_for_bridge(graph, "px4")
        # 200 steps from liftoff (those answered before it depend on how fast the first answer came)
        peers.append(start_peer("px4", "60", "--delay", delay_s, "--steps", "200", port=bridge_port("px4", second)))
    for delay_s, peer in zip(delays, peers):
        seen = peer_result(peer)
        steps = [b - a for a, b in zip(seen["sensor_times"], seen["sensor_times"][1:])]
        assert steps == [4000] * len(steps)  # every step's HIL_SENSOR once, none skipped, none twice
        assert max(seen["batches"][20:]) == 1  # one step per answer: the simulation never ran ahead of PX4
        climbs[delay_s] = climb(seen["path"])
    fast, slow = climbs["0"], climbs["0.012"]
    common = sorted(set(fast) & set(slow))
    assert len(common) > 150 and fast[common[-1]][2] > 500  # 150 steps of flight, half a metre up (mm)
    assert [fast[t] for t in common] == [slow[t] for t in common]  # step for step the same flight


def climb(path: list) -> dict:
    """HIL_STATE_QUATERNION's (lat, lon, alt) less the resting one, by time (us) since the vehicle first moved.
    Until PX4's first answer the bridge steps with the motors off (PX4 is booting), as Gazebo's plugin does,
    so the climb starts at a step that depends on how fast that answer came; from there on it is lockstep."""
    states = {t: (lat, lon, alt) for t, lat, lon, alt in path}
    times = sorted(states)
    rest = states[times[0]]
    liftoff = next(t for t in times if states[t] != rest)
    return {t - liftoff: tuple(v - r for v, r in zip(states[t], rest)) for t in times if t >= liftoff}
