"""The MAVLink autopilot core without ROS (issue 33): PX4 mode encoding, the battery model, parameter and
mission protocols, commands with their COMMAND_ACKs, offboard rules and bad input, with pymavlink frames
both ways and the in-process physics world and flight supervisor underneath (test/mavlink_inprocess.py)."""

from __future__ import annotations

import asyncio
import math
import struct
import time

import pytest
from pymavlink.dialects.v20 import common as mav

from aerial_sim.config import ParamsError
from aerial_sim.mavlink import modes
from aerial_sim.physics.battery import Battery, BatteryParams, open_circuit_voltage, rotor_shaft_power
from aerial_sim.mavlink.modes import FlightMode
from aerial_sim.mavlink.parameters import SPECS, ParameterTable, ParamRejected, from_wire, to_wire
from aerial_sim.vehicles.multirotor import load_vehicle
from mavlink_inprocess import Harness, run, take_off

ARM, TAKEOFF = mav.MAV_CMD_COMPONENT_ARM_DISARM, mav.MAV_CMD_NAV_TAKEOFF
NAN = math.nan




# -- pure pieces ---------------------------------------------------------------------------------

def test_px4_custom_modes_encode_as_px4_and_pymavlink_decode_them():
    from pymavlink import mavutil

    px4_names = mavutil.px4_map  # pymavlink's own table of PX4 modes -> (base, main, sub)
    assert modes.custom_mode(FlightMode.MISSION) == 4 << 16 | 4 << 24
    for name, expected in (("MISSION", FlightMode.MISSION), ("RTL", FlightMode.RTL), ("LOITER", FlightMode.HOLD),
                           ("LAND", FlightMode.LAND), ("OFFBOARD", FlightMode.OFFBOARD),
                           ("POSCTL", FlightMode.POSCTL), ("TAKEOFF", FlightMode.TAKEOFF)):
        _, main, sub = px4_names[name]
        assert modes.decode(main, sub) is expected
        assert mavutil.interpret_px4_mode(modes.base_mode(expected, True), modes.custom_mode(expected)) == name
    with pytest.raises(modes.UnknownMode):
        modes.decode(9, 0)


def test_battery_sags_under_load_and_drains_by_coulomb_counting():
    params = BatteryParams(cells=3, capacity_mah=5000.0, cell_resistance_ohm=0.008, avionics_power_w=0.0,
                           drive_efficiency=1.0)
    battery = Battery(params)
    rest = battery.step(1.0, 0.0)
    assert rest.voltage_v == pytest.approx(3 * 4.20, abs=1e-9)
    loaded = battery.step(1.0, 200.0)
    # V = OCV - I R and P = V I: the terminal power is what was asked for, the voltage below open circuit.
    ocv = 3 * open_circuit_voltage(loaded.charge)
    assert loaded.voltage_v * loaded.current_a == pytest.approx(200.0, rel=1e-3)
    assert loaded.voltage_v == pytest.approx(ocv - loaded.current_a * 3 * 0.008, abs=2e-3)
    assert loaded.max_thrust_fraction < 1.0
    # One hour at 5 A from a 5000 mAh pack empties it (to within the change of current as the voltage falls).
    battery = Battery(params)
    for _ in range(360):
        state = battery.step(10.0, 5.0 * battery.state.voltage_v if battery.state.current_a == 0 else 5.0 * state.voltage_v)
    assert state.consumed_mah == pytest.approx(5000.0, rel=0.05)
    assert state.charge < 0.05
    with pytest.raises(ParamsError):
        BatteryParams(cells=0)


def test_hover_power_of_the_quadrotor_is_a_plausible_load():
    vehicle = load_vehicle("quad_x")
    rotor = vehicle.rotors[0]
    # Hover: each rotor carries m g / 4; thrust = C_T rho n^2 D^4 -> n, then P = C_P rho n^3 D^5.
    n = math.sqrt(vehicle.mass_kg * 9.81 / 4 / (rotor.thrust_coefficient * 1.225 * rotor.diameter_m ** 4))
    power = rotor_shaft_power(vehicle.rotors, [2 * math.pi * n] * 4)
    assert 20.0 < power < 200.0  # a 1 kg quadrotor hovers on tens of watts of shaft power


def test_battery_status_reads_the_physics_pack_when_the_physics_flies_on_one():
    async def flight(h):
        await take_off(h, 3.0)
        await h.run_for(3.0)
        pack = h.graph.world.batteries["drone1"].state
        status, system = h.autopilot.telemetry.battery_status(), h.autopilot.telemetry.sys_status()
        assert status.voltages[0] * 3 / 1000.0 == pytest.approx(pack.voltage_v, abs=0.003)  # 3 cells, mV each
        assert status.current_battery / 100.0 == pytest.approx(pack.current_a, abs=0.01)
        assert status.current_battery > 500  # hovering draws over 5 A
        assert status.current_consumed == pytest.approx(200 * (1 - pack.charge), abs=1)  # from the full 200 mAh
        assert system.voltage_battery / 1000.0 == pytest.approx(pack.voltage_v, abs=0.001)
        assert status.battery_remaining == system.battery_remaining == round(100 * pack.charge) < 100
        assert h.autopilot.battery.consumed_mah == 0.0  # the autopilot's own model stands idle
        sent = h.last("BATTERY_STATUS")
        assert sent is not None and sent.battery_remaining < 100
        return True
    assert run(flight, battery=BatteryParams(capacity_mah=200.0))


def test_mavlink_ftp_requests_are_answered_at_once_that_there_are_no_files():
    from aerial_sim.mavlink.file_transfer import HEADER, reply_payload

    def ask(seq, opcode):
        reply = bytes(reply_payload(list(HEADER.pack(seq, 3, opcode, 0, 0, 0, 0, 0)) + [0] * 239))
        answer_seq, session, answer, size, request, *_ = HEADER.unpack_from(reply)
        return answer_seq, session, answer, request, reply[HEADER.size:HEADER.size + size]
    assert ask(41, 4) == (42, 3, 129, 4, bytes([10]))  # OpenFileRO @PARAM/param.pck: NAK FileNotFound
    assert ask(65535, 7) == (0, 3, 129, 7, bytes([7]))  # WriteFile: NAK UnknownCommand (seq wraps)
    assert ask(5, 1)[2:4] == (128, 1)  # TerminateSession: ACK
    assert reply_payload([1, 2, 3]) is None  # too short to be a request: nothing to answer

    async def session(h):
        h.send(mav.MAVLink_file_transfer_protocol_message(0, 1, 1, list(HEADER.pack(9, 0, 4, 0, 0, 0, 0, 0))
                                                          + [0] * 239))
        await h.run_until(lambda: h.of_type("FILE_TRANSFER_PROTOCOL"), 1)
        reply = h.last("FILE_TRANSFER_PROTOCOL")
        assert reply.target_system == 255 and HEADER.unpack_from(bytes(reply.payload))[2] == 129  # opcode: NAK
        return True
    assert run(session)


def test_parameters_travel_bytewise_as_px4_sends_them():
    table = ParameterTable()
    spec = SPECS[ParameterTable.index("COM_OBL_RC_ACT")]
    wire = to_wire(spec, 3)
    assert struct.pack("<f", wire) == struct.pack("<i", 3)
    assert from_wire(spec, wire, mav.MAV_PARAM_TYPE_INT32) == 3
    assert table.set("MIS_TAKEOFF_ALT", 7.5) == 7.5
    for bad in (NAN, 1e9):
        with pytest.raises(ParamRejected):
            table.set("MIS_TAKEOFF_ALT", bad)
    with pytest.raises(ParamRejected):
        table.set("NO_SUCH_PARAM", 1.0)


# -- protocols against the flying vehicle -----------------------------------------------------------

def test_arm_takeoff_to_the_commanded_altitude_then_hold():
    async def flight(h):
        await take_off(h, 3.0)
        await h.run_for(0.5)
        hold = h.autopilot._heartbeat()
        assert hold.custom_mode == modes.custom_mode(FlightMode.HOLD)
        global_position = h.last("GLOBAL_POSITION_INT")
        assert global_position.relative_alt / 1000.0 == pytest.approx(3.0, abs=0.35)
        assert h.last("EXTENDED_SYS_STATE").landed_state == mav.MAV_LANDED_STATE_IN_AIR
        local = h.last("LOCAL_POSITION_NED")
        assert local.z == pytest.approx(-h.position[2], abs=0.1)  # NED down = -ENU up
        return True
    assert run(flight)


def test_telemetry_rates_follow_the_defaults_and_set_message_interval():
    async def flight(h):
        await h.run_for(0.2)
        start = len(h.received)
        await h.run_for(2.0)
        counts = {}
        for message in h.received[start:]:
            counts[message.get_type()] = counts.get(message.get_type(), 0) + 1
        assert counts["ATTITUDE"] == pytest.approx(200, abs=3)  # 100 Hz of sim time (PX4's onboard link)
        assert counts["LOCAL_POSITION_NED"] == pytest.approx(100, abs=3)
        assert counts["GPS_RAW_INT"] == pytest.approx(10, abs=1)
        assert await h.command(mav.MAV_CMD_SET_MESSAGE_INTERVAL, mav.MAVLINK_MSG_ID_ATTITUDE, 100_000) == 0
        start = len(h.received)
        await h.run_for(2.0)
        attitude = sum(m.get_type() == "ATTITUDE" for m in h.received[start:])
        assert attitude == pytest.approx(20, abs=2)  # 10 Hz now
        assert await h.command(mav.MAV_CMD_REQUEST_MESSAGE, mav.MAVLINK_MSG_ID_AUTOPILOT_VERSION) == 0
        await h.run_for(0.1)
        version = h.last("AUTOPILOT_VERSION")
        assert version.capabilities & mav.MAV_PROTOCOL_CAPABILITY_MISSION_INT
        return True
    assert run(flight)


def test_mission_upload_download_fly_and_a_bad_item_is_refused():
    async def flight(h):
        await take_off(h, 3.0)
        home = h.last("HOME_POSITION")
        d = 1e7 / 111_320.0
        items = [(mav.MAV_CMD_NAV_WAYPOINT, home.latitude + int(4 * d), home.longitude, 3.0),
                 (mav.MAV_CMD_NAV_LOITER_TIME, home.latitude + int(4 * d), home.longitude, 4.0),
                 (mav.MAV_CMD_NAV_LAND, 0, 0, 0.0)]

        async def upload(plan, bad_at=None):
            h.send(mav.MAVLink_mission_count_message(1, 1, len(plan), 0))
            for _ in range(len(plan)):
                if not await h.run_until(lambda: h.of_type("MISSION_REQUEST_INT") or h.of_type("MISSION_ACK"), 2):
                    break
                requests = h.of_type("MISSION_REQUEST_INT")
                if not requests:
                    break
                seq = requests[-1].seq
                h.received = [m for m in h.received if m.get_type() != "MISSION_REQUEST_INT"]
                command, lat, lon, alt = plan[seq]
                frame = mav.MAV_FRAME_GLOBAL_RELATIVE_ALT_INT if seq != bad_at else 99
                h.send(mav.MAVLink_mission_item_int_message(1, 1, seq, frame, command, 0, 1, 1.0, 0.5, 0, NAN,
                                                            lat, lon, alt, 0))
            await h.run_until(lambda: h.of_type("MISSION_ACK"), 2)
            ack = h.of_type("MISSION_ACK")[-1]
            h.received = [m for m in h.received if m.get_type() != "MISSION_ACK"]
            return ack.type

        warnings_before = len(h.logger.warnings())
        assert await upload(items[:2], bad_at=1) == mav.MAV_MISSION_UNSUPPORTED_FRAME
        assert len(h.logger.warnings()) == warnings_before + 1  # one line naming the item
        assert "item 1" in h.logger.warnings()[-1]
        assert h.autopilot.mission.items == []  # the bad upload stored nothing
        assert await upload(items) == mav.MAV_MISSION_ACCEPTED
        h.send(mav.MAVLink_mission_request_list_message(1, 1, 0))
        await h.run_until(lambda: h.of_type("MISSION_COUNT"), 1)
        assert h.of_type("MISSION_COUNT")[-1].count == 3
        h.send(mav.MAVLink_mission_request_int_message(1, 1, 1, 0))
        await h.run_until(lambda: h.of_type("MISSION_ITEM_INT"), 1)
        assert h.of_type("MISSION_ITEM_INT")[-1].command == mav.MAV_CMD_NAV_LOITER_TIME
        assert await h.command(mav.MAV_CMD_MISSION_START, 0, 0) == mav.MAV_RESULT_ACCEPTED
        landed = await h.run_until(lambda: h.link.controller_mode == "disarmed"
                                   and len(h.of_type("MISSION_ITEM_REACHED")) >= 3, 40)
        assert landed, h.logger.lines[-5:]
        assert [r.seq for r in h.of_type("MISSION_ITEM_REACHED")][:3] == [0, 1, 2]
        assert h.position[1] == pytest.approx(4.0, abs=0.6) and h.position[2] < 0.3
        return True
    assert run(flight)


def test_return_to_launch_climbs_flies_home_and_lands():
    async def flight(h):
        await take_off(h, 2.0)
        h.autopilot.parameters.set("RTL_RETURN_ALT", 5.0)
        h.autopilot.parameters.set("RTL_DESCEND_ALT", 3.0)
        home = h.autopilot.home_enu
        h.link.send_pose((6.0, 0.0, 2.0), 0.0)
        await h.run_until(lambda: h.position[0] > 5.5, 10)
        peak = [0.0]

        def track():
            peak[0] = max(peak[0], h.position[2])
            return h.link.controller_mode == "disarmed"
        assert await h.command(mav.MAV_CMD_NAV_RETURN_TO_LAUNCH) == mav.MAV_RESULT_ACCEPTED
        assert await h.run_until(track, 40)
        assert peak[0] == pytest.approx(home[2] + 5.0, abs=0.4)  # climbed to RTL_RETURN_ALT first
        assert math.hypot(h.position[0] - home[0], h.position[1] - home[1]) < 0.6
        return True
    assert run(flight)


def test_offboard_needs_a_stream_flies_velocity_and_fails_safe_to_hold_when_it_stops():
    async def flight(h):
        await take_off(h, 3.0)
        offboard = (1 << 7 | 1, 6, 0)  # DO_SET_MODE: custom | base, main OFFBOARD
        assert await h.command(mav.MAV_CMD_DO_SET_MODE, *offboard) == mav.MAV_RESULT_DENIED  # no stream yet
        velocity_only = 0b110111000111  # ignore position, acceleration, yaw

        def setpoint():  # 2 m/s north in MAV_FRAME_LOCAL_NED
            h.send(mav.MAVLink_set_position_target_local_ned_message(0, 1, 1, mav.MAV_FRAME_LOCAL_NED, velocity_only,
                                                                      0, 0, 0, 2.0, 0, 0, 0, 0, 0, 0, 0))
        setpoint()
        assert await h.command(mav.MAV_CMD_DO_SET_MODE, *offboard) == mav.MAV_RESULT_ACCEPTED
        for _ in range(20):  # 2 s of 10 Hz setpoints
            setpoint()
            await h.run_for(0.1)
        north_speed = h.link.kinematics.velocity_world[1]
        assert north_speed == pytest.approx(2.0, abs=0.3)
        assert await h.run_until(lambda: h.autopilot.mode == FlightMode.HOLD, 3)  # COM_OF_LOSS_T = 1 s
        assert any("offboard setpoints lost" in w for w in h.logger.warnings())
        await h.run_for(2.0)
        assert math.hypot(*h.link.kinematics.velocity_world[:2]) < 0.3  # holding
        return True
    assert run(flight)


def test_a_retried_command_slow_to_answer_is_in_progress_until_its_result_and_runs_once():
    """ARM_DISARM waits on the flight controller's service (here 1.5 s of wall time, longer than MAVSDK's four
    tries): a client that sends it once gets only the final ACK (MAVROS takes the first ACK as the answer); a retry
    (confirmation 1) is answered IN_PROGRESS at once, then every second until ACCEPTED; a copy arriving just after
    gets ACCEPTED again, and arm runs once. A mode switch queued behind it and retried is not run twice and never
    answered IN_PROGRESS (MAVSDK's mission and manual-control mode switches would take that for the answer)."""
    in_progress, accepted = mav.MAV_RESULT_IN_PROGRESS, mav.MAV_RESULT_ACCEPTED
    position = (modes.MAV_MODE_FLAG_CUSTOM_MODE_ENABLED, 3, 0)  # PX4 main mode 3: Position

    async def flight(h):
        await h.run_for(0.2)
        answer, calls = h.link.arm, []

        async def slow_arm(arm):  # the graph's own arm, answered late
            calls.append(arm)
            await asyncio.sleep(1.5)
            return await answer(arm)

        h.link.arm = slow_arm

        def send(command, confirmation, *params):
            p = list(params) + [NAN] * (7 - len(params))
            h.send(mav.MAVLink_command_long_message(1, 1, command, confirmation, *p))

        async def until(condition, wall_s=5.0):
            deadline = time.monotonic() + wall_s
            while not condition() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            return condition()

        send(ARM, 0, 1)
        send(mav.MAV_CMD_DO_SET_MODE, 0, *position)  # waits behind the arm
        await asyncio.sleep(0.3)
        assert h.acks(ARM) == [] and h.acks(mav.MAV_CMD_DO_SET_MODE) == []
        send(ARM, 1, 1)  # MAVSDK's retry (it sends confirmation 0 again; the spec says 1)
        send(mav.MAV_CMD_DO_SET_MODE, 1, *position)
        assert h.acks(ARM) == [in_progress] and h.acks(mav.MAV_CMD_DO_SET_MODE) == []
        assert await until(lambda: accepted in h.acks(ARM))
        assert h.acks(ARM) == [in_progress, in_progress, accepted]  # the retry's, at 1 s, the answer at 1.5 s
        assert await until(lambda: h.acks(mav.MAV_CMD_DO_SET_MODE) == [accepted], 1.0)
        send(ARM, 2, 1)  # a retry that crossed the answer: the same answer, nothing run
        assert h.acks(ARM)[-1] == accepted and len(h.acks(ARM)) == 4
        assert calls == [True] and h.autopilot.armed and h.autopilot.mode == FlightMode.POSCTL
        assert h.autopilot.commands.runs == 2
        h.link.arm = answer
        before = len(h.of_type("COMMAND_ACK"))
        assert await h.command(mav.MAV_CMD_SET_MESSAGE_INTERVAL, mav.MAVLINK_MSG_ID_ATTITUDE, 100_000) == accepted
        assert await h.command(ARM, 0) == accepted and not h.autopilot.armed  # a new request: run, not remembered
        assert [m.result for m in h.of_type("COMMAND_ACK")[before:]] == [accepted, accepted]
        return True
    assert run(flight)


def test_bad_input_is_refused_with_a_nack_and_one_log_line_and_nothing_dies():
    async def flight(h):
        await h.run_for(0.2)
        warnings = h.logger.warnings
        count = len(warnings())
        # Malformed frames: garbage, a frame with its checksum broken, a truncated frame.
        frame = bytearray(mav.MAVLink_command_long_message(1, 1, ARM, 0, 1, 0, 0, 0, 0, 0, 0).pack(h.client))
        frame[-1] ^= 0xFF
        for data in (b"\xfd\x09garbage-not-mavlink", bytes(frame), bytes(frame[:7])):
            h.send_raw(data)
        await h.run_for(0.3)
        assert h.acks(ARM) == [] and not h.autopilot.armed  # the broken ARM did nothing
        assert len(warnings()) > count and all("malformed" in w for w in warnings()[count:])
        # A command for another system: ignored with one line, no ACK (it is not ours to answer).
        count = len(warnings())
        h.send(mav.MAVLink_command_long_message(7, 1, ARM, 0, 1, 0, 0, 0, 0, 0, 0))
        await h.run_for(0.3)
        assert h.acks(ARM) == [] and len(warnings()) == count + 1 and "system 7" in warnings()[-1]
        # Out of range, wrong mode, unknown: NACKs.
        assert await h.command(ARM, 5) == mav.MAV_RESULT_DENIED
        assert await h.command(TAKEOFF, 0, 0, 0, NAN, NAN, NAN, 130.0) == mav.MAV_RESULT_TEMPORARILY_REJECTED
        assert await h.command(mav.MAV_CMD_DO_SET_MODE, 1, 42, 0) == mav.MAV_RESULT_DENIED
        assert await h.command(mav.MAV_CMD_DO_REPOSITION, -1, 1, 0, NAN, 91.0, 0.0, 130.0) == mav.MAV_RESULT_DENIED
        assert await h.command(mav.MAV_CMD_DO_CHANGE_SPEED, 1, 1e6, -1) == mav.MAV_RESULT_DENIED
        assert await h.command(31999) == mav.MAV_RESULT_UNSUPPORTED
        assert await h.command(mav.MAV_CMD_MISSION_START) == mav.MAV_RESULT_DENIED  # no mission
        # A bad parameter value: refused, the value in force sent back.
        h.send(mav.MAVLink_param_set_message(1, 1, b"MIS_TAKEOFF_ALT", float("nan"), mav.MAV_PARAM_TYPE_REAL32))
        await h.run_until(lambda: h.of_type("PARAM_VALUE"), 1)
        assert h.of_type("PARAM_VALUE")[-1].param_value == pytest.approx(2.5)
        # Setpoints with NaN and sticks out of range: refused with a line each.
        count = len(warnings())
        h.send(mav.MAVLink_set_position_target_local_ned_message(0, 1, 1, 1, 0b110111111000, NAN, 0, 0,
                                                                  0, 0, 0, 0, 0, 0, 0, 0))
        h.send(mav.MAVLink_manual_control_message(1, 5000, 0, 500, 0, 0))
        await h.run_for(0.1)
        assert len(warnings()) == count + 2
        # Still alive and well: it arms and flies.
        await take_off(h, 2.0)
        assert h.autopilot.errors >= 10
        return True
    assert run(flight)


async def upload_mission(h: Harness, plan: list[tuple]) -> int:
    """Upload ``plan`` (command, latitude e7, longitude e7, altitude above home, param1, param2) as a ground
    station does; the MISSION_ACK type."""
    h.received = [m for m in h.received if m.get_type() not in ("MISSION_REQUEST_INT", "MISSION_ACK")]
    h.send(mav.MAVLink_mission_count_message(1, 1, len(plan), 0))
    while await h.run_until(lambda: h.of_type("MISSION_REQUEST_INT") or h.of_type("MISSION_ACK"), 2):
        requests = h.of_type("MISSION_REQUEST_INT")
        if h.of_type("MISSION_ACK") or not requests:
            break
        seq = requests[-1].seq
        h.received = [m for m in h.received if m.get_type() != "MISSION_REQUEST_INT"]
        command, lat, lon, alt, param1, param2 = plan[seq]
        h.send(mav.MAVLink_mission_item_int_message(1, 1, seq, mav.MAV_FRAME_GLOBAL_RELATIVE_ALT_INT, command, 0, 1,
                                                    param1, param2, 0, NAN, lat, lon, alt, 0))
    return h.of_type("MISSION_ACK")[-1].type


def test_do_jump_flies_the_loop_its_repeat_count_times_then_goes_on_and_a_jump_nowhere_is_refused():
    async def flight(h):
        await take_off(h, 3.0)
        home = h.last("HOME_POSITION")
        d = 1e7 / 111_320.0
        north, east = home.latitude + int(4 * d), home.longitude + int(4 * d / math.cos(math.radians(home.latitude / 1e7)))
        loop = [(mav.MAV_CMD_NAV_WAYPOINT, north, home.longitude, 3.0, 0.0, 0.3),
                (mav.MAV_CMD_NAV_WAYPOINT, north, east, 3.0, 0.0, 0.3)]
        nowhere = loop + [(mav.MAV_CMD_DO_JUMP, 0, 0, 0.0, 7.0, 1.0)]
        assert await upload_mission(h, nowhere) == mav.MAV_MISSION_INVALID_PARAM1  # item 7 does not exist
        assert "jump target 7" in h.logger.warnings()[-1] and h.autopilot.mission.items == []
        plan = loop + [(mav.MAV_CMD_DO_JUMP, 0, 0, 0.0, 0.0, 1.0),  # back to item 0, once
                       (mav.MAV_CMD_NAV_LAND, 0, 0, 0.0, 0.0, 0.0)]
        assert await upload_mission(h, plan) == mav.MAV_MISSION_ACCEPTED
        assert await h.command(mav.MAV_CMD_MISSION_START, 0, 0) == mav.MAV_RESULT_ACCEPTED
        landed = await h.run_until(lambda: h.link.controller_mode == "disarmed", 60)
        assert landed, h.logger.lines[-5:]
        assert [r.seq for r in h.of_type("MISSION_ITEM_REACHED")] == [0, 1, 0, 1, 3]  # the loop twice, then land
        assert h.position[0] == pytest.approx(4.0, abs=0.6) and h.position[1] == pytest.approx(4.0, abs=0.6)
        return True
    assert run(flight, 90.0)
