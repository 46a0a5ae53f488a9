"""A pymavlink ground-station script written for PX4: arm, take off, upload and fly a mission, return to launch.

    python pymavlink_script.py PORT

Listens on udpin:127.0.0.1:PORT (as for QGroundControl's 14550) and prints one JSON line per step.
"""

import json
import math
import sys
import time

from pymavlink import mavutil

mavlink = mavutil.mavlink


def report(step, **values):
    print(json.dumps({"step": step, **values}), flush=True)


def command(m, cmd, *params, frame=None):
    p = list(params) + [0.0] * (7 - len(params))
    m.mav.command_long_send(m.target_system, m.target_component, cmd, 0, *p)
    # the final answer: a command waiting on the graph is first answered IN_PROGRESS
    ack = m.recv_match(type="COMMAND_ACK", blocking=True, timeout=10, condition=f"COMMAND_ACK.command=={cmd} and "
                       f"COMMAND_ACK.result!={mavutil.mavlink.MAV_RESULT_IN_PROGRESS}")
    assert ack is not None, f"no COMMAND_ACK for {cmd}"
    return ack.result


def wait(m, kind, condition, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = m.recv_match(type=kind, blocking=True, timeout=1)
        if message is not None and condition(message):
            return message
    raise TimeoutError(f"no {kind} meeting the condition within {timeout_s} s")


def main(port: int) -> None:
    m = mavutil.mavlink_connection(f"udpin:127.0.0.1:{port}", source_system=255)
    m.wait_heartbeat(timeout=20)
    report("heartbeat", system=m.target_system, mode=m.flightmode)
    home = wait(m, "HOME_POSITION", lambda h: True, 10)

    m.mav.param_set_send(m.target_system, m.target_component, b"RTL_RETURN_ALT", 6.0, mavlink.MAV_PARAM_TYPE_REAL32)
    value = wait(m, "PARAM_VALUE", lambda p: p.param_id == "RTL_RETURN_ALT", 5)
    report("param", rtl_return_alt=value.param_value)

    # Armable once the autopilot's preflight passes: HEARTBEAT says standby (BOOT until then, as PX4's does).
    wait(m, "HEARTBEAT", lambda h: h.system_status == mavlink.MAV_STATE_STANDBY, 20)
    assert command(m, mavlink.MAV_CMD_COMPONENT_ARM_DISARM, 1) == mavlink.MAV_RESULT_ACCEPTED
    wait(m, "HEARTBEAT", lambda h: h.base_mode & mavlink.MAV_MODE_FLAG_SAFETY_ARMED, 5)
    home = wait(m, "HOME_POSITION", lambda h: True, 10)  # PX4 sets home where it arms
    takeoff_amsl = home.altitude / 1000.0 + 3.0
    result = command(m, mavlink.MAV_CMD_NAV_TAKEOFF, 0, 0, 0, math.nan, math.nan, math.nan, takeoff_amsl)
    assert result == mavlink.MAV_RESULT_ACCEPTED, result
    up = wait(m, "GLOBAL_POSITION_INT", lambda g: g.relative_alt > 2500, 20)
    report("takeoff", relative_alt_m=up.relative_alt / 1000.0)

    d = 1e7 / 111_320.0  # 1e7 deg per metre north
    waypoints = [(home.latitude + int(5 * d), home.longitude, 4.0),
                 (home.latitude + int(5 * d), home.longitude + int(5 * d / math.cos(math.radians(home.latitude / 1e7))), 4.0)]
    m.mav.mission_count_send(m.target_system, m.target_component, len(waypoints), mavlink.MAV_MISSION_TYPE_MISSION)
    while True:
        message = m.recv_match(type=["MISSION_REQUEST_INT", "MISSION_REQUEST", "MISSION_ACK"], blocking=True, timeout=5)
        assert message is not None, "mission upload stalled"
        if message.get_type() == "MISSION_ACK":
            break
        lat, lon, alt = waypoints[message.seq]
        m.mav.mission_item_int_send(m.target_system, m.target_component, message.seq,
                                    mavlink.MAV_FRAME_GLOBAL_RELATIVE_ALT_INT, mavlink.MAV_CMD_NAV_WAYPOINT,
                                    int(message.seq == 0), 1, 0, 0.5, 0, math.nan, lat, lon, alt,
                                    mavlink.MAV_MISSION_TYPE_MISSION)
    report("mission_upload", result=message.type)
    assert message.type == mavlink.MAV_MISSION_ACCEPTED
    assert command(m, mavlink.MAV_CMD_MISSION_START, 0, 0) == mavlink.MAV_RESULT_ACCEPTED
    reached = wait(m, "MISSION_ITEM_REACHED", lambda r: r.seq == len(waypoints) - 1, 40)
    position = wait(m, "LOCAL_POSITION_NED", lambda p: True, 5)
    report("mission", reached=reached.seq, north_m=position.x, east_m=position.y)

    m.set_mode("RTL")  # pymavlink's PX4 mode mapping: MAV_CMD_DO_SET_MODE with custom main/sub mode
    wait(m, "HEARTBEAT", lambda h: h.custom_mode == (4 << 16 | 5 << 24), 5)
    wait(m, "HEARTBEAT", lambda h: not h.base_mode & mavlink.MAV_MODE_FLAG_SAFETY_ARMED, 60)
    position = wait(m, "LOCAL_POSITION_NED", lambda p: True, 5)
    report("rtl", north_m=position.x, east_m=position.y, down_m=position.z, home_north_m=home.x, home_east_m=home.y)
    report("done")


if __name__ == "__main__":
    main(int(sys.argv[1]))
