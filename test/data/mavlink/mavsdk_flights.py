"""MAVSDK (native 4.x binding) flying aerial_sim as it would fly PX4: the flows of MAVSDK-Python's
examples takeoff_and_land, goto, mission, offboard_position_ned and offboard_velocity_body, plus param,
a geofence (the geofence plugin, as its example geofence.py) and rally points (mission_raw).

    python mavsdk_flights.py PORT STEP [STEP ...]
    (steps: param takeoff goto mission offboard fence rally rtl land)

Listens on udpin://127.0.0.1:PORT (MAVSDK's default for PX4 SITL is udpin://0.0.0.0:14540) and prints
one JSON line per step with what the client saw; exits non-zero if a step fails.
"""

import asyncio
import json
import math
import sys

from mavsdk.asyncio import ComponentType, Configuration, Mavsdk
from mavsdk.asyncio.plugins.action import ActionAsync
from mavsdk.asyncio.plugins.geofence import GeofenceAsync
from mavsdk.asyncio.plugins.mission_raw import MissionRawAsync
from mavsdk.asyncio.plugins.mission import MissionAsync
from mavsdk.asyncio.plugins.offboard import OffboardAsync
from mavsdk.asyncio.plugins.param import ParamAsync
from mavsdk.asyncio.plugins.telemetry import TelemetryAsync
from mavsdk.plugins import mission_raw
from mavsdk.plugins.geofence import Circle, FenceType, GeofenceData, Point, Polygon
from mavsdk.plugins.mission import MissionItem, MissionPlan
from mavsdk.plugins.offboard import PositionNedYaw, VelocityBodyYawspeed


async def _until(condition, period_s=0.1):
    while not condition():
        await asyncio.sleep(period_s)


def report(step, **values):
    print(json.dumps({"step": step, **values}), flush=True)


async def wait_for(generator_factory, condition, timeout_s):
    async def watch():
        async for value in generator_factory():
            if condition(value):
                return value
    return await asyncio.wait_for(watch(), timeout_s)


async def main(port: int, steps: list[str]) -> None:
    config = Configuration.create_with_component_type(ComponentType.GROUND_STATION)
    async with Mavsdk(config) as mavsdk:
        await mavsdk.add_any_connection(f"udpin://127.0.0.1:{port}")
        drone = await mavsdk.first_autopilot(timeout_s=60.0)  # three clients start beside a three-vehicle graph
        assert drone is not None, f"no autopilot found on udp port {port} within 60 s"
        action, telemetry = ActionAsync(drone), TelemetryAsync(drone)
        mission, offboard, param = MissionAsync(drone), OffboardAsync(drone), ParamAsync(drone)
        fence, plans = GeofenceAsync(drone), MissionRawAsync(drone)
        d = 1.0 / 111_320.0
        health = await wait_for(telemetry.subscribe_health, lambda h: h.is_global_position_ok
                                and h.is_home_position_ok, 20)
        report("connected", system_id=await drone.get_system_id(), armable=health.is_armable)
        home = await wait_for(telemetry.subscribe_home, lambda h: True, 10)
        d_east = d / math.cos(math.radians(home.latitude_deg))

        def offset_m(p):
            return ((p.latitude_deg - home.latitude_deg) / d, (p.longitude_deg - home.longitude_deg) / d_east)
        for step in steps:
            if step == "param":
                await param.set_param_float("MIS_TAKEOFF_ALT", 4.0)
                await param.set_param_float("RTL_RETURN_ALT", 6.0)
                await param.set_param_float("RTL_DESCEND_ALT", 3.0)
                all_params = await param.get_all_params()
                report("param", takeoff_alt=await param.get_param_float("MIS_TAKEOFF_ALT"),
                       sysid=await param.get_param_int("MAV_SYS_ID"),
                       count=len(all_params.float_params) + len(all_params.int_params))
            elif step == "takeoff":
                await action.arm()
                await action.takeoff()
                await wait_for(telemetry.subscribe_in_air, bool, 10)
                position = await wait_for(telemetry.subscribe_position, lambda p: p.relative_altitude_m > 3.7, 20)
                report("takeoff", relative_altitude_m=position.relative_altitude_m)
            elif step == "goto":
                target_lat = home.latitude_deg + 8.0 / 111_320.0  # 8 m north
                await action.goto_location(target_lat, home.longitude_deg, home.absolute_altitude_m + 5.0, 0.0)

                def arrived(p):
                    return abs(p.latitude_deg - target_lat) * 111_320.0 < 0.5 and abs(
                        p.absolute_altitude_m - home.absolute_altitude_m - 5.0) < 0.5
                position = await wait_for(telemetry.subscribe_position, arrived, 25)
                report("goto", north_m=(position.latitude_deg - home.latitude_deg) * 111_320.0,
                       relative_altitude_m=position.relative_altitude_m)
            elif step == "mission":
                d = 1.0 / 111_320.0
                items = [MissionItem(home.latitude_deg + 4 * d, home.longitude_deg, 5.0, 4.0, True, math.nan, math.nan,
                                     None, math.nan, math.nan, 1.0, math.nan, math.nan, None),
                         MissionItem(home.latitude_deg + 4 * d, home.longitude_deg + 6 * d / math.cos(
                             math.radians(home.latitude_deg)), 5.0, 4.0, True, math.nan, math.nan, None, math.nan,
                             math.nan, 1.0, math.nan, math.nan, None)]
                await mission.set_return_to_launch_after_mission(False)
                await mission.upload_mission(MissionPlan(items))
                downloaded = await mission.download_mission()
                await mission.start_mission()
                progress = await wait_for(mission.subscribe_mission_progress, lambda p: p.current == p.total, 40)
                position = await wait_for(telemetry.subscribe_position, lambda p: True, 5)
                report("mission", uploaded=len(items), downloaded=len(downloaded.mission_items),
                       current=progress.current, total=progress.total,
                       north_m=(position.latitude_deg - home.latitude_deg) * 111_320.0)
            elif step == "offboard":
                ned = await wait_for(telemetry.subscribe_position_velocity_ned, lambda p: True, 5)
                start = ned.position
                await offboard.set_position_ned(PositionNedYaw(start.north_m, start.east_m, start.down_m, 0.0))
                await offboard.start()
                await offboard.set_position_ned(PositionNedYaw(start.north_m, start.east_m + 3.0, start.down_m, 0.0))
                reached = await wait_for(telemetry.subscribe_position_velocity_ned,
                                         lambda p: abs(p.position.east_m - start.east_m - 3.0) < 0.3, 20)
                await offboard.set_velocity_body(VelocityBodyYawspeed(0.0, 0.0, -1.0, 0.0))  # climb at 1 m/s
                climbing = await wait_for(telemetry.subscribe_position_velocity_ned,
                                          lambda p: p.velocity.down_m_s < -0.7, 10)
                await offboard.set_velocity_body(VelocityBodyYawspeed(0.0, 0.0, 0.0, 0.0))
                await offboard.stop()
                report("offboard", east_m=reached.position.east_m - start.east_m,
                       climb_m_s=-climbing.velocity.down_m_s)
            elif step == "fence":
                # an inclusion circle of 12 m about the vehicle and an exclusion square 20-24 m east of it: a goto
                # 30 m north stops at the circle (GF_ACTION 2, Hold, PX4's default)
                start = await wait_for(telemetry.subscribe_position, lambda p: True, 5)
                lat0, lon0 = start.latitude_deg, start.longitude_deg
                square = [Point(lat0 + n * d, lon0 + e * d_east) for n, e in ((-2, 20), (-2, 24), (2, 24), (2, 20))]
                await fence.upload_geofence(GeofenceData([Polygon(square, FenceType.EXCLUSION)],
                                                         [Circle(Point(lat0, lon0), 12.0, FenceType.INCLUSION)]))
                stored = await fence.download_geofence()
                texts = []

                async def collect():
                    async for text in telemetry.subscribe_status_text():
                        texts.append(text.text)
                watcher = asyncio.ensure_future(collect())
                await action.goto_location(lat0 + 30 * d, lon0, start.absolute_altitude_m, 0.0)
                await asyncio.wait_for(_until(lambda: any("Geofence" in t for t in texts)), 30)
                await asyncio.sleep(3.0)
                position = await wait_for(telemetry.subscribe_position, lambda p: True, 5)
                watcher.cancel()
                await fence.clear_geofence()
                report("fence", polygons=len(stored.polygons), circles=len(stored.circles),
                       north_m=(position.latitude_deg - lat0) / d, east_m=(position.longitude_deg - lon0) / d_east,
                       texts=[t for t in texts if "Geofence" in t])
            elif step == "rally":
                # a rally point 6 m east of where the vehicle is: Return lands there, not at home
                position = await wait_for(telemetry.subscribe_position, lambda p: True, 5)
                north, east = offset_m(position)
                rally = mission_raw.MissionItem(0, 6, 5100, 0, 1, 0.0, 0.0, 0.0, 0.0, round(position.latitude_deg * 1e7),
                                                round((position.longitude_deg + 6 * d_east) * 1e7), 0.0, 2)
                await plans.upload_rally_points([rally])
                await action.return_to_launch()
                await wait_for(telemetry.subscribe_in_air, lambda v: not v, 60)
                landed = offset_m(await wait_for(telemetry.subscribe_position, lambda p: True, 5))
                report("rally", rally_north_m=north, rally_east_m=east + 6.0, north_m=landed[0], east_m=landed[1])
            elif step == "rtl":
                await action.return_to_launch()
                await wait_for(telemetry.subscribe_in_air, lambda v: not v, 60)
                position = await wait_for(telemetry.subscribe_position, lambda p: True, 5)
                report("rtl", from_home_m=math.hypot((position.latitude_deg - home.latitude_deg) * 111_320.0,
                       (position.longitude_deg - home.longitude_deg) * 111_320.0 * math.cos(math.radians(
                           home.latitude_deg))))
            elif step == "land":
                if await wait_for(telemetry.subscribe_in_air, lambda v: True, 5):
                    await action.land()
                await wait_for(telemetry.subscribe_in_air, lambda v: not v, 30)
                armed = await wait_for(telemetry.subscribe_armed, lambda a: not a, 10)
                report("land", armed=armed)
        report("done")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2:]))
