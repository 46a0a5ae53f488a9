"""Geofence and rally points (issue 33): the mission protocol's FENCE and RALLY plan types, a breach acting as
GF_ACTION says, and Return flying to the closest safe point. pymavlink frames into the autopilot core flying the
in-process physics world (test/mavlink_inprocess.py); MAVSDK's geofence and mission_raw plugins fly the same
through the launched graph in test/test_mavlink_clients.py."""

from __future__ import annotations

import math

import pytest
from pymavlink.dialects.v20 import common as mav

from aerial_sim.mavlink import geofence
from aerial_sim.mavlink.mission import MissionItem
from aerial_sim.mavlink.modes import FlightMode
from aerial_sim.mavlink.parameters import SPECS, to_wire
from mavlink_inprocess import Harness, run, take_off

REPOSITION = mav.MAV_CMD_DO_REPOSITION
FENCE, RALLY = mav.MAV_MISSION_TYPE_FENCE, mav.MAV_MISSION_TYPE_RALLY
NAN = math.nan
M_PER_DEG = 111_320.0
RELATIVE = mav.MAV_FRAME_GLOBAL_RELATIVE_ALT_INT




def lat_lon(h: Harness, north_m: float, east_m: float) -> tuple[float, float]:
    return (h.home.latitude + north_m / M_PER_DEG,
            h.home.longitude + east_m / (M_PER_DEG * math.cos(math.radians(h.home.latitude))))


async def upload(h: Harness, mission_type: int, plan: list[tuple]) -> int:
    """Upload ``plan`` [(command, north_m, east_m, param1)] as a client does; the MISSION_ACK's result."""
    h.received = [m for m in h.received if m.get_type() not in ("MISSION_REQUEST_INT", "MISSION_ACK")]
    h.send(mav.MAVLink_mission_count_message(1, 1, len(plan), mission_type))
    while await h.run_until(lambda: h.of_type("MISSION_REQUEST_INT") or h.of_type("MISSION_ACK"), 2):
        if h.of_type("MISSION_ACK"):
            break
        seq = h.of_type("MISSION_REQUEST_INT")[-1].seq
        assert h.of_type("MISSION_REQUEST_INT")[-1].mission_type == mission_type
        h.received = [m for m in h.received if m.get_type() != "MISSION_REQUEST_INT"]
        command, north, east, param1 = plan[seq]
        lat, lon = lat_lon(h, north, east)
        h.send(mav.MAVLink_mission_item_int_message(1, 1, seq, RELATIVE, command, 0, 1, param1, 0, 0, 0,
                                                    round(lat * 1e7), round(lon * 1e7), 0.0, mission_type))
    ack = h.of_type("MISSION_ACK")[-1]
    assert ack.mission_type == mission_type
    return ack.type


def set_param(h: Harness, name: str, value: float) -> None:
    spec = next(s for s in SPECS if s.name == name)
    h.send(mav.MAVLink_param_set_message(1, 1, name.encode(), to_wire(spec, value), spec.mav_type))


def square(north: float, east: float, half: float, command: int) -> list[tuple]:
    corners = [(north - half, east - half), (north - half, east + half), (north + half, east + half),
               (north + half, east - half)]
    return [(command, n, e, 4) for n, e in corners]


def test_fence_areas_follow_px4s_rules():
    inclusion = geofence.Area(True, vertices=((-10, -10), (10, -10), (10, 10), (-10, 10)))
    hole = geofence.Area(False, centre=(5.0, 0.0), radius_m=2.0)
    fence = geofence.Geofence((inclusion, hole), home=(0.0, 0.0, 0.0), max_vertical_m=30.0)
    assert fence.inside((0, 0, 5)) and fence.inside((-9, 9, 5))
    assert not fence.inside((11, 0, 5)) and not fence.inside((5.5, 0.5, 5))  # outside the square; in the hole
    assert not fence.inside((0, 0, 31))  # GF_MAX_VER_DIST
    # every inclusion must hold (PX4 main): two disjoint inclusion circles leave nowhere inside
    far = geofence.Area(True, centre=(100.0, 0.0), radius_m=5.0)
    assert not geofence.Geofence((inclusion, far)).inside((0, 0, 0))
    kept, dropped = geofence.load_areas([inclusion, far], home=(0.0, 0.0, 0.0))
    assert kept == [inclusion] and "doesn't contain Home" in dropped[0]
    # a polygon whose vertex count is not its length is refused as a whole
    items = [MissionItem(i, RELATIVE, geofence.POLYGON_INCLUSION, 1, 4, 0, 0, 0, 47.0, 8.0, 0.0) for i in range(3)]
    with pytest.raises(geofence.ItemRejected):
        geofence.check_fence_items(items)


def test_fence_and_rally_plans_upload_download_and_bad_ones_are_refused_with_one_line():
    async def flight(h):
        await h.run_for(0.2)
        plan = square(0, 0, 20, geofence.POLYGON_INCLUSION) + [(geofence.CIRCLE_EXCLUSION, 10, 10, 3.0)]
        assert await upload(h, FENCE, plan) == mav.MAV_MISSION_ACCEPTED
        assert await upload(h, RALLY, [(mav.MAV_CMD_NAV_RALLY_POINT, 5, 5, 0)]) == mav.MAV_MISSION_ACCEPTED
        assert len(h.autopilot.fence_plan.items) == 5 and len(h.autopilot.rally_plan.items) == 1
        assert h.autopilot.mission.items == []  # each plan type its own store
        h.send(mav.MAVLink_mission_request_list_message(1, 1, FENCE))
        await h.run_until(lambda: h.of_type("MISSION_COUNT"), 1)
        assert h.of_type("MISSION_COUNT")[-1].count == 5 and h.of_type("MISSION_COUNT")[-1].mission_type == FENCE
        h.send(mav.MAVLink_mission_request_int_message(1, 1, 4, FENCE))
        await h.run_until(lambda: h.of_type("MISSION_ITEM_INT"), 1)
        item = h.of_type("MISSION_ITEM_INT")[-1]
        assert item.command == geofence.CIRCLE_EXCLUSION and item.param1 == 3.0 and item.mission_type == FENCE
        warnings = len(h.logger.warnings())
        bad = square(0, 0, 20, geofence.POLYGON_INCLUSION)[:3]  # says 4 vertices, gives 3
        assert await upload(h, FENCE, bad) == mav.MAV_MISSION_INVALID_PARAM1
        assert await upload(h, FENCE, [(geofence.CIRCLE_INCLUSION, 0, 0, -5.0)]) == mav.MAV_MISSION_INVALID_PARAM1
        assert await upload(h, RALLY, [(mav.MAV_CMD_NAV_WAYPOINT, 5, 5, 0)]) == mav.MAV_MISSION_UNSUPPORTED
        assert len(h.logger.warnings()) == warnings + 3 and "fence item 0" in h.logger.warnings()[-2]
        assert len(h.autopilot.fence_plan.items) == 5  # the stored fence survived the bad uploads
        h.send(mav.MAVLink_mission_count_message(1, 1, 1, 7))  # no such plan type
        await h.run_until(lambda: h.of_type("MISSION_ACK"), 1)
        assert h.of_type("MISSION_ACK")[-1].type == mav.MAV_MISSION_UNSUPPORTED
        h.send(mav.MAVLink_mission_clear_all_message(1, 1, mav.MAV_MISSION_TYPE_ALL))
        await h.run_for(0.05)
        assert h.autopilot.fence_plan.items == [] and h.autopilot.rally_plan.items == []
        return True
    assert run(flight, 90.0)


def test_a_breach_holds_by_default_and_returns_home_with_gf_action_3():
    async def flight(h):
        await take_off(h, 3.0)
        assert await upload(h, FENCE, [(geofence.CIRCLE_INCLUSION, 0, 0, 12.0)]) == mav.MAV_MISSION_ACCEPTED
        lat, lon = lat_lon(h, 40, 0)
        assert await h.command(REPOSITION, -1, 0, 0, NAN, lat, lon, NAN) == mav.MAV_RESULT_ACCEPTED
        geofence_bit = mav.MAV_SYS_STATUS_GEOFENCE
        status = h.autopilot.telemetry.sys_status()
        assert status.onboard_control_sensors_present & status.onboard_control_sensors_health & geofence_bit
        assert await h.run_until(lambda: h.autopilot.failsafes.breached, 20)
        assert h.autopilot.mode == FlightMode.HOLD  # GF_ACTION 2 (PX4's default)
        assert not h.autopilot.telemetry.sys_status().onboard_control_sensors_health & geofence_bit  # the breach
        assert any("Geofence breached" in m.text for m in h.of_type("STATUSTEXT"))
        await h.run_for(3.0)
        assert 12.0 <= h.position[1] < 16.0 and math.hypot(*h.link.kinematics.velocity_world[:2]) < 0.3
        set_param(h, "RTL_RETURN_ALT", 4.0)
        set_param(h, "RTL_DESCEND_ALT", 2.0)
        set_param(h, "GF_ACTION", 3)
        lat, lon = lat_lon(h, 0, 0)  # back inside, then out again to the east
        assert await h.command(REPOSITION, -1, 0, 0, NAN, lat, lon, NAN) == mav.MAV_RESULT_ACCEPTED
        assert await h.run_until(lambda: not h.autopilot.failsafes.breached, 10)
        lat, lon = lat_lon(h, 0, 40)
        assert await h.command(REPOSITION, -1, 0, 0, NAN, lat, lon, NAN) == mav.MAV_RESULT_ACCEPTED
        assert await h.run_until(lambda: h.autopilot.mode == FlightMode.RTL, 20)
        assert await h.run_until(lambda: h.link.controller_mode == "disarmed", 40)
        assert math.hypot(h.position[0], h.position[1]) < 0.6  # home
        return True
    assert run(flight, 90.0)


def test_return_flies_to_the_rally_point_when_it_is_closer_than_home():
    async def flight(h):
        await take_off(h, 3.0)
        set_param(h, "RTL_RETURN_ALT", 4.0)
        set_param(h, "RTL_DESCEND_ALT", 2.0)
        plan = [(mav.MAV_CMD_NAV_RALLY_POINT, 0, 30, 0), (mav.MAV_CMD_NAV_RALLY_POINT, -40, -40, 0)]
        assert await upload(h, RALLY, plan) == mav.MAV_MISSION_ACCEPTED
        lat, lon = lat_lon(h, 0, 20)
        assert await h.command(REPOSITION, -1, 0, 0, NAN, lat, lon, NAN) == mav.MAV_RESULT_ACCEPTED
        assert await h.run_until(lambda: h.position[0] > 19.5, 15)
        assert await h.command(mav.MAV_CMD_NAV_RETURN_TO_LAUNCH) == mav.MAV_RESULT_ACCEPTED
        assert await h.run_until(lambda: h.link.controller_mode == "disarmed", 40)
        assert h.position[0] == pytest.approx(30.0, abs=0.6) and h.position[1] == pytest.approx(0.0, abs=0.6)
        return True
    assert run(flight, 90.0)
