"""MANUAL_CONTROL in PX4's stick modes (issue 33): pymavlink frames into the autopilot core flying the in-process
physics world (test/mavlink_inprocess.py). Stabilized (and Manual) lean by the stick, Altitude holds the altitude
but not the position, Acro turns at the stick's rate; the stick mapping itself against PX4's formulas."""

from __future__ import annotations

import math

import pytest
from pymavlink.dialects.v20 import common as mav

from aerial_sim.airsim.ned import quaternion_to_euler
from aerial_sim.mavlink import modes, stick_mapping
from aerial_sim.mavlink.modes import FlightMode
from mavlink_inprocess import Harness, run, take_off

ARM, SET_MODE = mav.MAV_CMD_COMPONENT_ARM_DISARM, mav.MAV_CMD_DO_SET_MODE
TILT_MAX = math.radians(35.0)  # MPC_MAN_TILT_MAX default




async def switch(h: Harness, mode: FlightMode) -> None:
    main, sub = modes._ENCODING[mode]
    assert await h.command(SET_MODE, 1, main, sub) == mav.MAV_RESULT_ACCEPTED
    assert h.autopilot.mode == mode


async def sticks(h: Harness, seconds: float, x=0, y=0, z=500, r=0) -> None:
    """Stream MANUAL_CONTROL at 50 Hz (as QGroundControl's joystick does) for ``seconds`` of sim time."""
    end = h.graph.clock.now_s + seconds
    while h.graph.clock.now_s < end:
        h.send(mav.MAVLink_manual_control_message(1, x, y, z, r, 0))
        await h.graph.clock.sleep(0.02)


# -- the mapping --------------------------------------------------------------------------------------

def test_stick_mapping_follows_px4s_formulas():
    # Stabilized: a half roll stick leans half MPC_MAN_TILT_MAX to the right; full diagonal is limited to the maximum.
    roll, pitch, yaw = quaternion_to_euler(stick_mapping.tilted_attitude(0.3, 0.0, 0.5, stick_mapping.stabilized_tilt(0, 0.5, TILT_MAX)))
    assert (roll, pitch, yaw) == pytest.approx((0.5 * TILT_MAX, 0.0, 0.3), abs=1e-9)  # FLU: right side down = +roll
    _, pitch, _ = quaternion_to_euler(stick_mapping.tilted_attitude(0.0, 1.0, 0.0, stick_mapping.stabilized_tilt(1, 0, TILT_MAX)))
    assert pitch == pytest.approx(TILT_MAX)  # FLU: nose down = +pitch
    assert stick_mapping.stabilized_tilt(1.0, 1.0, TILT_MAX) == pytest.approx(TILT_MAX)
    # Altitude: acceleration |s| g tan(tilt_max) -> tilt atan(|s| tan(tilt_max)): equal at full stick, more at half.
    assert stick_mapping.altitude_tilt(1.0, 0.0, TILT_MAX) == pytest.approx(TILT_MAX)
    assert math.tan(stick_mapping.altitude_tilt(0.5, 0.0, TILT_MAX)) == pytest.approx(0.5 * math.tan(TILT_MAX))
    # Throttle: (0, min), (0.5, hover), (1, max), linear between (PX4's gradual3).
    curve = [stick_mapping.throttle_curve(s, 0.08, 0.4, 1.0) for s in (0.0, 0.25, 0.5, 0.75, 1.0, 7.0)]
    assert curve == pytest.approx([0.08, 0.24, 0.4, 0.7, 1.0, 1.0])
    assert stick_mapping.climb_rate(0.5, 0.05, 3.0, 1.5) == 0.0
    assert stick_mapping.climb_rate(1.0, 0.05, 3.0, 1.5) == 3.0 and stick_mapping.climb_rate(0.0, 0.05, 3.0, 1.5) == -1.5
    assert stick_mapping.acro_rates(0.5, -1.0, 1.0, (720, 720, 540)) == pytest.approx(
        (-4 * math.pi, 2 * math.pi, -3 * math.pi))
    assert modes.base_mode(FlightMode.ACRO, False) & modes.MAV_MODE_FLAG_STABILIZE_ENABLED == 0
    assert modes.decode(modes.MAIN_ACRO) is FlightMode.ACRO


# -- flown ------------------------------------------------------------------------------------------

def test_stabilized_and_manual_lean_by_the_roll_stick_and_acro_turns_at_the_stick_rate():
    async def flight(h):
        await take_off(h, 10.0)
        await h.run_for(1.0)  # settle in Hold
        hover = h.autopilot.parameters["MPC_THR_HOVER"]
        assert 0.1 < hover < 0.8 and hover != 0.5  # from the vehicle, as PX4's hover thrust estimator finds it
        for mode in (FlightMode.STABILIZED, FlightMode.MANUAL):
            await switch(h, mode)
            await sticks(h, 1.0, y=500)  # half roll stick right
            assert h.link.controller_mode == "attitude"
            attitude = h.last("ATTITUDE")  # NED/FRD: right wing down = +roll
            assert math.degrees(attitude.roll) == pytest.approx(17.5, abs=1.5), mode
            assert abs(math.degrees(attitude.pitch)) < 1.5
            await sticks(h, 1.0)  # centred: level again
            assert abs(math.degrees(h.last("ATTITUDE").roll)) < 1.5
        # Stabilized does not hold the position: the second of leaning carried the vehicle to the right (south)
        assert h.position[1] < -1.0
        await switch(h, FlightMode.ACRO)
        await sticks(h, 1.0, r=100)  # 10 % yaw stick clockwise: 54 deg/s
        assert h.link.controller_mode == "rates"
        assert math.degrees(h.last("ATTITUDE").yawspeed) == pytest.approx(54.0, abs=3.0)
        return True
    assert run(flight)


def test_altitude_mode_holds_the_altitude_but_drifts_with_the_wind_and_a_pitch_stick_accelerates():
    async def flight(h):
        await take_off(h, 5.0)
        await h.run_for(1.0)  # settle in Hold
        await switch(h, FlightMode.ALTCTL)
        h.graph.set_wind((0.0, 8.0, 0.0))  # 8 m/s from the south, blowing north
        start = h.position
        await sticks(h, 4.0)  # centred sticks
        assert h.position[2] == pytest.approx(start[2], abs=0.3)  # altitude held
        drift = h.position[1] - start[1]
        assert drift > 2.0  # ... the position is not: carried downwind, and still going with the wind
        assert h.link.kinematics.velocity_world[1] > 1.0
        h.graph.set_wind((0.0, 0.0, 0.0))
        await sticks(h, 3.0)  # let the drag bring it nearly to rest
        # A half pitch stick: tilt atan(0.5 tan 35 deg) = 19.3 deg forward, accelerating east (heading 0 = east).
        speeds = []
        for _ in range(4):
            await sticks(h, 0.5, x=500)
            speeds.append(h.link.kinematics.velocity_world[0])
        assert all(b > a + 0.5 for a, b in zip(speeds, speeds[1:])), speeds  # still accelerating
        assert math.degrees(-h.last("ATTITUDE").pitch) == pytest.approx(19.3, abs=1.5)  # NED: nose down = -pitch
        released = h.position
        await sticks(h, 1.0)  # centred: levels off and coasts on, no braking back to a held position
        assert h.position[0] - released[0] > 0.5 * speeds[-1]
        assert h.position[2] == pytest.approx(start[2], abs=0.5)
        # the throttle climbs at (0.75 - 0.5) x 2 x MPC_Z_VEL_MAX_UP = 1.5 m/s, then centred it locks the altitude
        await sticks(h, 1.5, z=750)
        before = h.position[2]
        await sticks(h, 1.0, z=750)
        assert h.position[2] - before == pytest.approx(1.5, abs=0.15)  # the steady climb rate, m/s
        await sticks(h, 2.0)
        locked = h.autopilot.manual.altitude_setpoint
        assert locked is not None and h.position[2] == pytest.approx(locked, abs=0.2)
        return True
    assert run(flight)


def test_the_throttle_takes_off_in_altitude_mode_and_the_sticks_wait_on_the_ground_in_stabilized():
    async def flight(h):
        await h.run_for(0.2)
        await switch(h, FlightMode.STABILIZED)
        assert await h.command(ARM, 1) == mav.MAV_RESULT_ACCEPTED
        ground = h.position[2]
        await sticks(h, 0.5, z=0)  # throttle down: stays idle on the ground
        assert h.link.controller_mode == "idle"
        await switch(h, FlightMode.ALTCTL)
        await sticks(h, 0.5, z=600)  # 60 %: below PX4's 65 % takeoff threshold
        assert h.link.controller_mode == "idle"
        await sticks(h, 2.0, z=1000)  # full throttle: climbs at MPC_Z_VEL_MAX_UP
        assert h.position[2] - ground > 2.0
        return True
    assert run(flight)


def test_throttle_down_in_altitude_mode_lands_and_disarms_after_com_disarm_land():
    async def flight(h):
        await take_off(h, 3.0)
        await h.run_for(1.0)  # settle in Hold
        await switch(h, FlightMode.ALTCTL)
        await sticks(h, 2.5, z=0)  # full descent, 1.5 m/s: on the ground after about 2 s
        assert h.link.controller_mode != "disarmed"  # resting, but not yet for COM_DISARM_LAND (2 s)
        await sticks(h, 3.5, z=0)
        assert h.link.controller_mode == "disarmed" and not h.autopilot.armed
        assert h.position[2] < 0.2 and any("landed (Altitude" in line for _, line in h.logger.lines)
        return True
    assert run(flight)
