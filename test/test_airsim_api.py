"""The AirSim method table flying the real controller and physics in-process (no ROS, no sockets).

Each test drives :class:`aerial_sim.airsim.api.AirSimApi` exactly as a client's
calls would (wire arguments in NED, degrees where AirSim uses degrees) and
checks what the vehicle did, read back through the same API.
"""

from __future__ import annotations

import asyncio
import json
import io
import math

import numpy as np
import pytest
from PIL import Image

from aerial_sim.airsim.api import AirSimApi
from aerial_sim.airsim.camera_rig import CameraRig
from aerial_sim.airsim.image_types import NO_RETURN_DEPTH_M
from aerial_sim.airsim.rpc import RpcError, encode_response
from aerial_sim.airsim.sensors import NamedSensors
from aerial_sim.airsim.settings import parse_settings
from aerial_sim.world.camera import CameraParams
from aerial_sim.world.scene import load_scene

from airsim_inprocess import InProcessGraph  # noqa: E402 (test helper beside this file)

YAW_ANGLE = {"is_rate": False, "yaw_or_rate": 0.0}


def fly(script, scene: str | None = None, yaw: float = 0.0, settings: dict | None = None, vehicles=None):
    """Run ``script(api, graph)`` (a coroutine function) against a fresh in-process graph; ``settings``: the
    decoded JSON of an AirSim settings file, applied as the airsim_api node applies it."""

    async def main():
        parsed = parse_settings(settings) if settings is not None else None
        graph = InProcessGraph(vehicles or (("drone1", "quad_x"),), yaw=yaw, settings=parsed)
        cameras = CameraRig(load_scene(scene), CameraParams(width=64, height=48), parsed) if scene else None
        named = NamedSensors(load_scene(scene), parsed) if scene and parsed else None
        if parsed is not None:  # the settings' vehicle names are the AirSim names of the graph's vehicles
            graph.vehicles = {v.name: link for v, link in zip(parsed.vehicles, graph.vehicles.values())}
            for name, link in graph.vehicles.items():
                link.name = name
        api = AirSimApi(graph, cameras, settings=parsed, named_sensors=named)
        runner = asyncio.create_task(graph.run())
        try:
            return await script(api, graph)
        finally:
            runner.cancel()

    return asyncio.run(main())


async def call(api, method, *params):
    return await api.dispatch(method, list(params))


async def airborne(api):
    await call(api, "enableApiControl", True, "")
    assert await call(api, "armDisarm", True, "") is True
    assert await call(api, "takeoff", 20, "") is True


def position(state):
    p = state["kinematics_estimated"]["position"]
    return np.array([p["x_val"], p["y_val"], p["z_val"]])


def yaw_deg(state):
    q = state["kinematics_estimated"]["orientation"]
    w, x, y, z = q["w_val"], q["x_val"], q["y_val"], q["z_val"]
    return math.degrees(math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))


def test_arming_as_airsims_simple_flight_starts_armed_false_without_control_and_disarm_in_the_air():
    """hello_drone.py / arm.py / disarm.py: armDisarm answers False (no error) without API control; the
    vehicle starts armed (takeoff needs no armDisarm); armDisarm(False) in the air stops the motors and the
    vehicle falls; a move on the disarmed vehicle is refused at once instead of waiting for ever."""
    async def script(api, graph):
        with pytest.raises(RpcError, match="not under API control"):
            await call(api, "takeoff", 20, "")
        assert await call(api, "armDisarm", True, "") is False
        await call(api, "enableApiControl", True, "")
        assert graph.vehicles["drone1"].controller_mode == "idle"  # armed from the start
        assert await call(api, "takeoff", 20, "") is True
        assert graph.world.ground_truth("drone1").position[2] > 2.5
        assert await call(api, "armDisarm", False, "") is True
        await graph.clock.sleep(2.0)
        truth = graph.world.ground_truth("drone1")
        assert truth.position[2] < 0.2 and graph.vehicles["drone1"].controller_mode == "disarmed"  # fell
        before = graph.clock.now_s
        with pytest.raises(RpcError, match="disarmed: call armDisarm\\(True\\) first"):
            await call(api, "moveToPosition", 5.0, 0.0, -3.0, 2.0, 3e38, 0, YAW_ANGLE, -1, 1, "")
        assert graph.clock.now_s - before < 0.1
        state = await call(api, "getMultirotorState", "")
        assert state["landed_state"] == 0

    fly(script)


def test_reset_leaves_the_vehicle_armed_and_a_second_flight_needs_no_arming():
    """drone_stress_test.py: reset, then fly again; AirSim's reset puts back the default (armed) state."""
    async def script(api, graph):
        await call(api, "enableApiControl", True, "")
        assert await call(api, "takeoff", 20, "") is True
        await call(api, "reset")
        assert await call(api, "isApiControlEnabled", "") is False  # reset takes API control back
        assert graph.vehicles["drone1"].controller_mode == "idle"
        await call(api, "enableApiControl", True, "")
        assert await call(api, "moveToPosition", 0.0, 0.0, -3.0, 2.0, 20, 0, YAW_ANGLE, -1, 1, "") is True
        assert graph.world.ground_truth("drone1").position[2] == pytest.approx(3.0, abs=0.35)

    fly(script)


def test_manual_mode_flies_the_rc_sticks_and_rc_does_not_end_it():
    """manual_mode_demo.py: moveByManual(1e6, 1e6, z_min=-1e6, 1e10) then moveByRC(throttle=1) climbs,
    moveByRC(roll=0.5, throttle=1, yaw=0.5) moves right and turns; the manual task goes on throughout."""
    async def script(api, graph):
        await call(api, "enableApiControl", True, "")
        assert await call(api, "armDisarm", True, "") is True
        manual = asyncio.ensure_future(call(api, "moveByManual", 1e6, 1e6, -1e6, 1e10, 0, YAW_ANGLE, ""))
        await graph.clock.sleep(0.5)
        await call(api, "moveByRC", {"pitch": 0.0, "throttle": 1.0, "is_initialized": True, "is_valid": True}, "")
        await graph.clock.sleep(3.0)
        up = graph.world.ground_truth("drone1").position
        assert up[2] > 3.0 and not manual.done()  # ~3 m/s climb, still in manual mode
        await call(api, "moveByRC", {"roll": 0.5, "throttle": 1.0, "yaw": 0.5, "is_initialized": True,
                                     "is_valid": True}, "")
        await graph.clock.sleep(3.0)
        truth = graph.world.ground_truth("drone1")
        moved = np.asarray(truth.position) - up
        assert np.hypot(moved[0], moved[1]) > 3.0 and moved[2] > 3.0 and not manual.done()
        assert abs(yaw_deg(await call(api, "getMultirotorState", ""))) > 30.0  # the yaw stick turned it
        assert await call(api, "hover", "") is True
        assert await manual is False  # ended by the next command, as AirSim's

    fly(script)


def test_attitude_and_throttle_on_the_ground_take_off_when_armed():
    async def script(api, graph):
        await call(api, "enableApiControl", True, "")
        assert await call(api, "moveByRollPitchYawThrottle", 0.0, 0.0, 0.0, 0.8, 1.5, "") is True
        assert graph.world.ground_truth("drone1").position[2] > 0.5

    fly(script)


def test_a_reconnecting_client_is_not_answered_from_state_older_than_its_connection():
    async def script(api, graph):
        await call(api, "getMultirotorState", "")
        link = graph.vehicles["drone1"]
        await graph.clock.sleep(1.0)
        api.await_state_again()  # the last client left at this time
        runner_state = link.kinematics
        link.kinematics = dataclasses.replace(runner_state, time_s=runner_state.time_s - 3.5)  # a late old message
        state = await call(api, "getMultirotorState", "")
        assert state["timestamp"] >= round(runner_state.time_s * 1e9)

    import dataclasses

    fly(script)


def test_takeoff_climbs_three_metres_and_reports_flying():
    async def script(api, graph):
        await airborne(api)
        state = await call(api, "getMultirotorState", "")
        assert state["landed_state"] == 1
        assert -3.3 < position(state)[2] < -2.7  # NED: 3 m up is z = -3 (from the 2 cm resting height)

    fly(script)


def test_move_to_position_arrives_in_ned_at_the_commanded_speed():
    async def script(api, graph):
        await airborne(api)
        start = graph.clock.now_s
        assert await call(api, "moveToPosition", 10.0, -5.0, -6.0, 4.0, 60, 0, YAW_ANGLE, -1, 1, "") is True
        elapsed = graph.clock.now_s - start
        truth = graph.world.ground_truth("drone1").position
        # NED (10 north, -5 east, 6 up) is ENU (-5, 10, 6).
        assert np.linalg.norm(np.array(truth) - [-5.0, 10.0, 6.0]) < 0.35
        distance = math.dist((0.0, 0.0, 3.0), (-5.0, 10.0, 6.0))
        assert distance / 4.0 < elapsed < distance / 4.0 + 5.0  # no faster than asked; ramps at both ends
        peak = max(np.linalg.norm(c[1]) for c in graph.vehicles["drone1"].commands if c[0] == "velocity")
        assert peak <= 4.0 + 1e-9
        state = await call(api, "getMultirotorState", "")
        assert abs(yaw_deg(state)) < 3.0  # yaw_mode angle 0: facing north

    fly(script)


def test_forward_only_faces_the_direction_of_travel():
    async def script(api, graph):
        await airborne(api)
        # East (NED y) at 3 m/s, ForwardOnly: the nose turns to 90 deg while flying.
        task = asyncio.ensure_future(call(api, "moveToPosition", 0.0, 20.0, -3.0, 3.0, 60, 1, YAW_ANGLE, -1, 1, ""))
        await graph.clock.sleep(5.0)
        assert abs(yaw_deg(await call(api, "getMultirotorState", "")) - 90.0) < 5.0
        assert await task is True

    fly(script)


def test_forward_only_with_a_yaw_rate_is_refused():
    async def script(api, graph):
        await airborne(api)
        with pytest.raises(RpcError, match="Yaw cannot be specified as rate if drivetrain is ForwardOnly"):
            await call(api, "moveByVelocity", 1.0, 0.0, 0.0, 1.0, 1, {"is_rate": True, "yaw_or_rate": 10.0}, "")

    fly(script)


def test_move_on_path_passes_every_corner_within_the_lookahead():
    async def script(api, graph):
        await airborne(api)
        corners = [(5.0, 0.0, -3.0), (5.0, 5.0, -3.0), (0.0, 5.0, -3.0)]
        path = [{"x_val": n, "y_val": e, "z_val": d} for n, e, d in corners]
        track = []

        async def record():
            while True:
                track.append(graph.world.ground_truth("drone1").position)
                await graph.clock.sleep(0.05)

        recorder = asyncio.ensure_future(record())
        assert await call(api, "moveOnPath", path, 2.0, 60, 0, YAW_ANGLE, 1.0, 1, "") is True
        recorder.cancel()
        track = np.array(track)
        for north, east, down in corners:
            closest = np.min(np.linalg.norm(track - [east, north, -down], axis=1))
            assert closest < 1.0  # the carrot cuts corners by at most about the 1 m lookahead

    fly(script)


def test_a_closed_path_is_flown_and_corners_are_cut_no_more_than_airsims_carrot():
    """path.py's closed path (last point = start) flies the whole square; at 5 m/s with the automatic
    lookahead (AirSim's getAutoLookahead: 0.6 s of travel, 3 m) the vehicle passes each corner no farther
    than an ideal point chasing the same carrot does (0.46 x lookahead for a right angle)."""
    from aerial_sim.airsim.flight import GuidanceParams, auto_lookahead

    async def script(api, graph):
        await airborne(api)
        start = np.array(graph.world.ground_truth("drone1").position)
        north0, east0, down0 = start[1], start[0], -start[2]
        corners = [(north0 + 10, east0, down0), (north0 + 10, east0 + 10, down0), (north0, east0 + 10, down0)]
        path = [{"x_val": n, "y_val": e, "z_val": d} for n, e, d in corners + [(north0, east0, down0)]]
        track = []

        async def record():
            while True:
                track.append(graph.world.ground_truth("drone1").position)
                await graph.clock.sleep(0.02)

        recorder = asyncio.ensure_future(record())
        begin = graph.clock.now_s
        assert await call(api, "moveOnPath", path, 5.0, 60, 0, YAW_ANGLE, -1, 1, "") is True
        recorder.cancel()
        assert graph.clock.now_s - begin > 40.0 / 5.0  # flown, not declared done at the start
        track = np.array(track)
        lookahead = auto_lookahead(GuidanceParams(), 5.0, True)
        for north, east, down in corners:
            assert np.min(np.linalg.norm(track - [east, north, -down], axis=1)) < 0.46 * lookahead
        assert np.linalg.norm(track[-1] - start) < 0.5  # back where it started

    fly(script)


def test_a_new_command_cancels_the_running_one_which_answers_false():
    async def script(api, graph):
        await airborne(api)
        long_move = asyncio.ensure_future(call(api, "moveToPosition", 50.0, 0.0, -3.0, 2.0, 60, 0, YAW_ANGLE, -1, 1, ""))
        await graph.clock.sleep(1.0)
        assert await call(api, "hover", "") is True
        assert await long_move is False
        await graph.clock.sleep(2.0)
        speed = np.linalg.norm(graph.world.ground_truth("drone1").velocity_world)
        assert speed < 0.5  # hovering, not still flying north

    fly(script)


def test_a_timeout_answers_false():
    async def script(api, graph):
        await airborne(api)
        start = graph.clock.now_s
        assert await call(api, "moveToPosition", 100.0, 0.0, -3.0, 2.0, 1.0, 0, YAW_ANGLE, -1, 1, "") is False
        assert 1.0 <= graph.clock.now_s - start < 1.1

    fly(script)


def test_velocity_z_holds_altitude_and_body_frame_turns_with_the_heading():
    async def script(api, graph):
        await airborne(api)
        assert await call(api, "rotateToYaw", 90.0, 20, 3, "") is True  # face east
        assert await call(api, "moveByVelocityZBodyFrame", 2.0, 0.0, -5.0, 4.0, 0, YAW_ANGLE | {"yaw_or_rate": 90.0}, "") is True
        truth = graph.world.ground_truth("drone1")
        assert truth.velocity_world[0] > 1.5 and abs(truth.velocity_world[1]) < 0.3  # forward = east
        assert abs(truth.position[2] - 5.0) < 0.5

    fly(script)


def test_roll_pitch_yaw_z_holds_the_attitude_and_the_altitude():
    async def script(api, graph):
        await airborne(api)
        # Wire values (the client negates pitch and yaw): pitch -0.1 rad = nose down in FRD.
        assert await call(api, "moveByRollPitchYawZ", 0.0, -0.1, math.radians(90.0), -3.0, 2.0, "") is True
        kinematics = (await call(api, "getMultirotorState", ""))["kinematics_estimated"]
        q = kinematics["orientation"]
        w, x, y, z = q["w_val"], q["x_val"], q["y_val"], q["z_val"]
        pitch = math.asin(2 * (w * y - z * x))
        assert abs(pitch + 0.1) < 0.02
        velocity = kinematics["linear_velocity"]
        assert velocity["y_val"] > 0.5  # nose down while facing east: accelerating east
        assert abs(kinematics["position"]["z_val"] + 3.0) < 0.3

    fly(script)


def test_angle_rates_with_throttle_spin_the_vehicle():
    async def script(api, graph):
        await airborne(api)
        hover = graph.vehicles["drone1"].vehicle.hover_controls(1.225, 9.80665)[0]
        assert await call(api, "moveByAngleRatesThrottle", 0.0, 0.0, 1.0, hover, 1.0, "") is True
        rates = (await call(api, "getMultirotorState", ""))["kinematics_estimated"]["angular_velocity"]
        assert abs(rates["z_val"] - 1.0) < 0.15  # FRD yaw rate (clockwise seen from above)

    fly(script)


def test_motor_pwms_reach_the_rotors_unchanged():
    async def script(api, graph):
        await airborne(api)
        task = asyncio.ensure_future(call(api, "moveByMotorPWMs", 0.6, 0.6, 0.6, 0.6, 0.5, ""))
        await graph.clock.sleep(0.3)
        rotors = await call(api, "getRotorStates", "")
        link = graph.vehicles["drone1"]
        expected = link.vehicle.rotors[0].max_thrust_n(graph.world.body("drone1").air_density) * 0.6
        assert all(abs(r["thrust"] - expected) < 0.01 * expected for r in rotors["rotors"])
        assert await task is True

    fly(script)


def test_land_ends_landed_and_disarm_then_succeeds():
    async def script(api, graph):
        await airborne(api)
        assert await call(api, "land", 60, "") is True
        state = await call(api, "getMultirotorState", "")
        assert state["landed_state"] == 0
        assert position(state)[2] > -0.1
        assert await call(api, "armDisarm", False, "") is True

    fly(script)


def test_pause_stops_sim_time_and_continue_for_time_advances_exactly():
    async def script(api, graph):
        await graph.clock.sleep(0.1)
        await call(api, "simPause", True)
        assert await call(api, "simIsPaused") is True
        before = graph.clock.now_s
        await asyncio.sleep(0.05)
        assert graph.clock.now_s == before
        await call(api, "simContinueForTime", 0.2)
        assert math.isclose(graph.clock.now_s - before, 0.2, abs_tol=1e-9)
        await call(api, "simContinueForFrames", 10)
        assert math.isclose(graph.clock.now_s - before, 0.24, abs_tol=1e-9)
        await call(api, "simPause", False)

    fly(script)


def test_teleport_keeps_nan_components_and_reset_answers_with_the_vehicle_back():
    async def script(api, graph):
        await airborne(api)
        nan = math.nan
        pose = {"position": {"x_val": 4.0, "y_val": nan, "z_val": -7.0},
                "orientation": {"w_val": nan, "x_val": nan, "y_val": nan, "z_val": nan}}
        east_before = graph.world.ground_truth("drone1").position[0]
        await call(api, "simSetVehiclePose", pose, True, "")
        read = (await call(api, "simGetVehiclePose", ""))["position"]
        assert abs(read["x_val"] - 4.0) < 0.05 and abs(read["z_val"] + 7.0) < 0.05
        assert abs(read["y_val"] - east_before) < 0.05
        await call(api, "reset")
        # Read at once: reset answers when the state shows the vehicle back, not when the physics queued it
        # (hello_drone read where the vehicle had been falling, at a load of 39).
        state = await call(api, "getMultirotorState", "")
        assert np.linalg.norm(position(state)[:2]) < 1e-6 and state["landed_state"] == 0
        assert await call(api, "isApiControlEnabled", "") is False

    fly(script)


def test_sensors_that_never_published_answer_an_error_naming_them():
    async def script(api, graph):
        for method, sensor in (("getLidarData", "lidar"), ("getDistanceSensorData", "distance sensor"),
                               ("getImuData", "IMU"), ("getGpsData", "GPS")):
            with pytest.raises(RpcError, match=f"no {sensor} data for 'drone1'"):
                await call(api, method, "", "")

    fly(script)


def test_images_of_every_supported_type_decode_as_an_airsim_client_would():
    async def script(api, graph):
        requests = [{"camera_name": "front_center", "image_type": kind, "pixels_as_float": as_float, "compress": compress}
                    for kind, as_float, compress in ((0, False, True), (0, False, False), (1, True, False),
                                                     (2, True, False), (3, False, True), (5, False, False),
                                                     (5, False, True))]
        responses = await call(api, "simGetImages", requests, "")  # cosys's 2-argument form
        assert [r["image_type"] for r in responses] == [0, 0, 1, 2, 3, 5, 5]
        packed = msgpack_roundtrip(responses)
        scene_png, scene_raw, planar, perspective, vis, seg, seg_png = packed
        png = np.asarray(Image.open(io.BytesIO(scene_png["image_data_uint8"])))
        raw = np.frombuffer(scene_raw["image_data_uint8"], np.uint8).reshape(48, 64, 3)
        assert np.array_equal(raw[:, :, ::-1], png)  # uncompressed is BGR, the PNG is RGB
        planar = np.array(planar["image_data_float"], np.float32).reshape(48, 64)
        perspective = np.array(perspective["image_data_float"], np.float32).reshape(48, 64)
        ground = planar < NO_RETURN_DEPTH_M
        assert ground[-1].all() and not ground[0].any()  # the camera 2 cm up sees ground below, sky above
        assert np.all(perspective[ground] >= planar[ground] - 1e-4)
        assert np.allclose(perspective[24, 31], planar[24, 31], rtol=1e-3)  # on the optical axis they agree
        assert len(vis["image_data_uint8"]) > 0 and len(seg["image_data_uint8"]) == 48 * 64 * 3
        seg_raw = np.frombuffer(seg["image_data_uint8"], np.uint8).reshape(48, 64, 3)
        assert np.array_equal(seg_raw[:, :, ::-1], np.asarray(Image.open(io.BytesIO(seg_png["image_data_uint8"]))))
        # cv_mode.py's list: one type not rendered here answers an empty image, the others as usual.
        mixed = await call(api, "simGetImages", [{"camera_name": "0", "image_type": kind, "pixels_as_float": f,
                                                  "compress": False}
                                                 for kind, f in ((10, False), (4, True), (6, False), (0, False),
                                                                 (7, False), (5, True))], "", False)
        lighting, disparity, normals, scene, infrared, ids = msgpack_roundtrip(mixed)
        assert lighting["width"] == lighting["height"] == 0 and lighting["image_data_uint8"] == b""
        assert "image type 10 (Lighting) is not rendered" in lighting["message"]
        assert len(scene["image_data_uint8"]) == 48 * 64 * 3
        # Infrared: AirSim's segmentation id as grey level (ground 1, sky 0).
        grey = np.frombuffer(infrared["image_data_uint8"], np.uint8).reshape(48, 64, 3)[:, :, 0]
        assert np.array_equal(grey, np.minimum(np.array(ids["image_data_float"]).reshape(48, 64), 255))
        # DisparityNormalized = fx B / (z W) of the planar depth (fx = W / 2 at 90 deg), 0 where nothing is hit.
        disparity = np.array(disparity["image_data_float"], np.float32).reshape(48, 64)
        with np.errstate(divide="ignore"):
            expected = np.where(ground, np.clip((64 / 2) * 0.10 / (planar * 64), 0.0, 1.0), 0.0)  # too near: 1
        assert np.allclose(disparity, expected, rtol=1e-3, atol=1e-6)
        # SurfaceNormals of the ground seen by a level camera: up = -z of AirSim's camera frame -> (128, 128, 0).
        normals = np.frombuffer(normals["image_data_uint8"], np.uint8).reshape(48, 64, 3)[:, :, ::-1]  # BGR -> RGB
        seen = ground & (planar > 0)  # ground farther than the minimum range
        inside = seen[1:-1, 1:-1] & seen[:-2, 1:-1] & seen[2:, 1:-1] & seen[1:-1, :-2] & seen[1:-1, 2:]
        ground_normals = normals[1:-1, 1:-1][inside].astype(int)
        assert len(ground_normals) > 100 and np.all(np.abs(ground_normals - [128, 128, 0]) <= 3)
        # The depth-gradient fallback (a renderer without hit normals) agrees inside the ground.
        from aerial_sim.airsim.image_types import normals_to_rgb, surface_normals

        fallback = normals_to_rgb(surface_normals(np.where(ground, planar, np.inf), 32.0, 32.0, 31.5, 23.5))
        assert np.all(np.abs(fallback[1:-1, 1:-1][inside].astype(int) - [128, 128, 0]) <= 3)
        assert not normals[0].any()  # sky: no surface, black
        with pytest.raises(RpcError, match="no camera named 'nose'"):
            await call(api, "simGetImage", "nose", 0, "", False)

    fly(script, scene="empty")


def test_line_of_sight_and_scene_objects_come_from_the_scene():
    async def script(api, graph):
        names = await call(api, "simListSceneObjects", ".*")
        assert "ground" in names and len(names) > 5
        obj = next(o for o in api.cameras.scene.objects if o.shape == "box")
        pose = await call(api, "simGetObjectPose", obj.name)
        assert abs(pose["position"]["x_val"] - obj.position[1]) < 1e-9  # north = ENU y
        home = await call(api, "getHomeGeoPoint", "")
        from aerial_sim.environment.geodesy import HomePoint, enu_to_geodetic
        lat, lon, alt = enu_to_geodetic(*obj.position, HomePoint())
        inside = {"latitude": lat, "longitude": lon, "altitude": alt}
        above = {"latitude": home["latitude"], "longitude": home["longitude"], "altitude": home["altitude"] + 200}
        assert await call(api, "simTestLineOfSightBetweenPoints", inside, above) is False
        assert await call(api, "simSetSegmentationObjectID", obj.name, 77, False) is True
        assert await call(api, "simGetSegmentationObjectID", obj.name) == 77

    fly(script, scene="urban")


def msgpack_roundtrip(responses):
    """What a client receives: the packed reply (float arrays pre-packed) unpacked again."""
    import msgpack

    from aerial_sim.airsim.rpc import ContainsPrepacked

    reply = msgpack.unpackb(encode_response(1, None, ContainsPrepacked(responses)), raw=False)
    return reply[3]


def test_a_settings_file_names_vehicles_sensors_and_cameras_and_sets_their_start():
    """high_res_camera.py, external_camera.py, two lidars, DefaultVehicleState, spawn poses, wind."""
    settings = {
        "Wind": {"X": 0, "Y": 3, "Z": 0},
        "ExternalCameras": {"fixed1": {"X": 0, "Y": 0, "Z": -10, "Pitch": -90,
                                       "CaptureSettings": [{"ImageType": 1, "Width": 32, "Height": 24}]}},
        "Vehicles": {
            "Alpha": {"VehicleType": "SimpleFlight", "X": 2, "Y": 1, "Yaw": 90,
                      "Cameras": {"low_res": {"CaptureSettings": [{"ImageType": 0, "Width": 40, "Height": 30}]},
                                  "mixed": {"CaptureSettings": [{"ImageType": 0, "Width": 80, "Height": 60},
                                                                {"ImageType": 1, "Width": 32, "Height": 24,
                                                                 "FOV_Degrees": 60}]}},
                      "Sensors": {"LidarA": {"SensorType": 6, "NumberOfChannels": 4, "PointsPerSecond": 4000},
                                  "LidarB": {"SensorType": 6, "NumberOfChannels": 2, "PointsPerSecond": 1000}}},
            "Beta": {"VehicleType": "SimpleFlight", "DefaultVehicleState": "Inactive"}}}

    async def script(api, graph):
        assert await call(api, "listVehicles") == ["Alpha", "Beta"]
        alpha = graph.world.ground_truth("drone1")  # the graph's first vehicle is the settings' first
        assert alpha.position[:2] == pytest.approx((1.0, 2.0), abs=0.01)  # NED (2, 1) is ENU (1, 2)
        assert yaw_deg(await call(api, "getMultirotorState", "Alpha")) == pytest.approx(90.0, abs=1.0)
        assert graph.vehicles["Alpha"].controller_mode == "idle" and graph.vehicles["Beta"].controller_mode == "disarmed"
        assert graph.wind == pytest.approx((3.0, 0.0, 0.0))  # NED east 3 m/s
        (low,) = await call(api, "simGetImages", [{"camera_name": "low_res", "image_type": 0, "compress": False}],
                            "Alpha")
        assert (low["width"], low["height"]) == (40, 30)
        # high_res_camera.py's kind of camera: each CaptureSettings entry its own size and FOV, in one request;
        # a type without an entry at the camera's size (the largest asked).
        scene, depth, segmentation = await call(api, "simGetImages", [
            {"camera_name": "mixed", "image_type": t, "compress": False} for t in (0, 1, 5)], "Alpha")
        assert [(r["width"], r["height"]) for r in (scene, depth, segmentation)] == [(80, 60), (32, 24), (80, 60)]
        info = await call(api, "simGetCameraInfo", "mixed", "Alpha")
        assert info["fov"] == pytest.approx(60.0)  # the last entry's FOV is the camera's
        assert json.loads(await call(api, "getSettingsString"))["Vehicles"]["Alpha"]["Cameras"]["mixed"][
            "CaptureSettings"][1] == {"ImageType": 1, "Width": 32, "Height": 24, "FOV_Degrees": 60.0}
        (fixed,) = msgpack_roundtrip(await call(api, "simGetImages", [{"camera_name": "fixed1", "image_type": 1,
                                                                      "pixels_as_float": True}], "", True))
        depth = np.array(fixed["image_data_float"], np.float32).reshape(24, 32)
        assert depth[12, 16] == pytest.approx(10.0, abs=0.05)  # 10 m up, looking down
        up = {"position": {"x_val": 2.0, "y_val": 1.0, "z_val": -10.0},
              "orientation": {"w_val": math.nan, "x_val": math.nan, "y_val": math.nan, "z_val": math.nan}}
        await call(api, "simSetVehiclePose", up, True, "Alpha")  # 10 m up: every beam hits the ground
        a = await call(api, "getLidarData", "LidarA", "Alpha")
        b = await call(api, "getLidarData", "LidarB", "Alpha")
        assert len(a["point_cloud"]) == 3 * 400 and len(b["point_cloud"]) == 3 * 100  # two lidars, two clouds
        with pytest.raises(RpcError, match="no Lidar named 'LidarC' on 'Alpha' \\(have: LidarA, LidarB\\)"):
            await call(api, "getLidarData", "LidarC", "Alpha")
        assert "fixed1" in json.loads(await call(api, "getSettingsString"))["ExternalCameras"]

    fly(script, scene="empty", settings=settings, vehicles=(("drone1", "quad_x"), ("drone2", "quad_x")))


def test_computer_vision_mode_holds_a_teleported_vehicle_in_the_air():
    """cv_mode.py: SimMode ComputerVision, simSetVehiclePose 10 m up: it stays there (AirSim's kinematic
    camera vehicle), and flight commands say why they are not served."""
    async def script(api, graph):
        pose = {"position": {"x_val": 3.0, "y_val": 0.0, "z_val": -10.0},
                "orientation": {"w_val": 1.0, "x_val": 0.0, "y_val": 0.0, "z_val": 0.0}}
        await call(api, "simSetVehiclePose", pose, True, "")
        await graph.clock.sleep(3.0)
        truth = graph.world.ground_truth("drone1")
        assert truth.position == pytest.approx((0.0, 3.0, 10.0), abs=0.02)
        await call(api, "enableApiControl", True, "")
        with pytest.raises(RpcError, match="ComputerVision vehicle"):
            await call(api, "takeoff", 20, "")

    fly(script, settings={"SimMode": "ComputerVision"})


def test_set_time_of_day_moves_the_sun_of_the_scene_images():
    """simSetTimeOfDay at midnight darkens the ground of the Scene image (no direct sun, ambient fades);
    at noon it is lit again; a bad date is one RPC error naming the argument."""

    async def script(api, graph):
        request = [{"camera_name": "front_center", "image_type": 0, "compress": False}]

        async def ground_brightness():
            (response,) = await call(api, "simGetImages", request, "")
            image = np.frombuffer(response["image_data_uint8"], np.uint8).reshape(48, 64, 3)
            return image[-8:].mean()  # the bottom rows: ground

        before = await ground_brightness()
        await call(api, "simSetTimeOfDay", True, "2026-12-21 00:00:00", False, 1.0, 60.0, True)
        night = await ground_brightness()
        await call(api, "simSetTimeOfDay", True, "2026-06-21 12:00:00", False, 1.0, 60.0, True)
        noon = await ground_brightness()
        with pytest.raises(RpcError, match="start_datetime"):
            await call(api, "simSetTimeOfDay", True, "yesterday", False, 1.0, 60.0, True)
        return before, night, noon

    before, night, noon = fly(script, scene="urban")
    assert night < 0.5 * before and noon > 2 * night


def test_weather_fog_greys_the_distance_and_switching_weather_off_clears_it():
    async def script(api, graph):
        request = [{"camera_name": "front_center", "image_type": 0, "compress": False}]

        async def horizon_band():
            (response,) = await call(api, "simGetImages", request, "")
            image = np.frombuffer(response["image_data_uint8"], np.uint8).reshape(48, 64, 3).astype(float)
            return image[26:30]  # just below the horizon: far ground

        await airborne(api)  # a few metres up: the rows below the horizon see ground 15-40 m away
        clear = await horizon_band()
        await call(api, "simEnableWeather", True)
        await call(api, "simSetWeatherParameter", 7, 1.0)
        foggy = await horizon_band()
        await call(api, "simEnableWeather", False)
        again = await horizon_band()
        with pytest.raises(RpcError, match="val"):
            await call(api, "simSetWeatherParameter", 7, 3.0)
        return clear, foggy, again

    clear, foggy, again = fly(script, scene="urban")
    fog = np.array((200, 210, 225), float)
    assert np.abs(foggy - fog).mean() < 0.5 * np.abs(clear - fog).mean()  # far ground toward the fog colour
    assert np.abs(again - clear).mean() < 2.0  # the same view (hovering) without fog


def test_the_images_follow_the_cameras_plumb_bob_lens_and_the_distortion_calls_read_and_change_it():
    """A rig given the camera node's lens (``camera.distortion_d``) serves distorted images: each ground pixel's
    planar depth is h / y of the ideal ray the lens bends onto it (x_d = distort(x), plumb_bob); AirSim's
    simGetDistortionParams answers [K1, K2, K3, P1, P2], simSetDistortionParam changes one coefficient (the
    images follow), and an unknown name or a lens too strong for the image is one RPC error, the lens kept."""
    from aerial_sim.airsim.image_types import DEPTH_PLANAR
    from aerial_sim.world.lens import LensParams, distort, undistort

    d = (-0.08, 0.01, 0.001, -0.002, 0.002)  # k1 k2 p1 p2 k3
    rig = CameraRig(load_scene("empty"), CameraParams(width=64, height=48), lens=LensParams(distortion_d=d))
    height_m = 2.0
    (planar,) = msgpack_roundtrip(rig.render("drone1", [("0", DEPTH_PLANAR, True, False)], (0.0, 0.0, height_m),
                                             (1, 0, 0, 0), 0))
    depth = np.array(planar["image_data_float"], np.float32).reshape(48, 64)
    fx = 32.0
    u, v = np.meshgrid(np.arange(64.0), np.arange(48.0))
    x, y = undistort((u - 31.5) / fx, (v - 23.5) / fx, d)
    assert np.allclose(np.stack(distort(x, y, d)), np.stack([(u - 31.5) / fx, (v - 23.5) / fx]), atol=1e-9)
    ground = depth < NO_RETURN_DEPTH_M
    assert ground[-1].all() and not ground[0].any()
    # Depth is taken from the nearest ideal pixel: the ray it saw is within about half an ideal pixel of y.
    assert np.abs(height_m / depth[ground] - y[ground]).max() <= 0.75 / fx
    pinhole_y = (v - 23.5) / fx
    assert np.abs(height_m / depth[-1] - pinhole_y[-1]).max() > 2.0 / fx  # a pinhole would see the ground elsewhere

    async def script(api, graph):
        api.cameras = rig
        assert await call(api, "simGetDistortionParams", "front_center", "") == pytest.approx([-0.08, 0.01, 0.002,
                                                                                                0.001, -0.002])
        await call(api, "simSetDistortionParam", "front_center", "K1", 0.0, "")
        await call(api, "simSetDistortionParam", "0", "P2", 0.0, "")
        assert await call(api, "simGetDistortionParams", "0", "") == pytest.approx([0.0, 0.01, 0.002, 0.001, 0.0])
        assert (await call(api, "simGetDistortionParams", "back_center", ""))[0] == pytest.approx(-0.08)  # own
        with pytest.raises(RpcError, match="K1, K2, K3, P1, P2"):
            await call(api, "simSetDistortionParam", "0", "K4", 0.1, "")
        with pytest.raises(RpcError, match="K2 = 40 refused"):
            await call(api, "simSetDistortionParam", "0", "K2", 40.0, "")
        assert await call(api, "simGetDistortionParams", "0", "") == pytest.approx([0.0, 0.01, 0.002, 0.001, 0.0])
        (response,) = msgpack_roundtrip(await call(api, "simGetImages", [{"camera_name": "0", "image_type": 1,
                                                                          "pixels_as_float": True}], ""))
        return np.array(response["image_data_float"], np.float32).reshape(48, 64)

    after = fly(script, scene="empty")
    d_after = (0.0, 0.01, 0.001, 0.0, 0.002)
    x, y = undistort((u - 31.5) / fx, (v - 23.5) / fx, d_after)
    seen = (after < NO_RETURN_DEPTH_M) & (after > 0)
    camera_z = float(np.median(after[seen] * y[seen]))  # planar depth x y = the camera's height, at every pixel
    assert np.abs(camera_z / after[seen] - y[seen]).max() <= 0.75 / fx
