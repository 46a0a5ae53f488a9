"""An AirSim settings.json as an input (aerial_sim.airsim.settings): every supported section mapped, every
unsupported key one warning naming it, every kind of mistake one error naming the key."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from aerial_sim.airsim.settings import (SettingsError, find_settings_file, launch_arguments, load_settings,
                                        parse_settings, settings_json)

FULL = Path(__file__).parent / "data" / "airsim" / "settings_full.json"


def test_a_settings_file_with_every_supported_section_is_mapped():
    s = load_settings(FULL)
    assert s.sim_mode == "Multirotor" and s.clock_speed == 2.0 and s.api_server_port == 41460
    assert s.origin == (47.641468, -122.140165, 122.0) and s.wind_ned == (2.0, -1.0, 0.0)
    assert s.recording["RecordInterval"] == 0.05
    assert s.vehicle_names() == ("Drone1", "Drone2")
    drone1, drone2 = s.vehicles
    assert drone1.rpy_deg == (0.0, 0.0, 90.0) and drone2.position_ned == (4.0, 0.0, 0.0)
    assert drone1.default_armed and not drone2.default_armed  # "Inactive": starts disarmed
    cameras = {c.name: c for c in drone1.cameras}
    assert cameras["low_res"].position_ned == (0.5, 0.0, 0.1) and cameras["low_res"].rpy_deg == (0.0, -20.0, 0.0)
    assert (cameras["low_res"].width, cameras["low_res"].height, cameras["low_res"].fov_deg) == (256, 144, 80.0)
    assert (cameras["high_res"].width, cameras["high_res"].height, cameras["high_res"].fov_deg) == (1280, 720, 100.0)
    assert cameras["high_res"].position_ned is None  # AirSim's default mount
    (fixed1,) = s.external_cameras
    assert fixed1.external and fixed1.position_ned == (0.0, 0.0, -5.0) and fixed1.rpy_deg == (0.0, -90.0, 0.0)
    assert (fixed1.width, fixed1.height, fixed1.fov_deg, fixed1.image_types) == (128, 96, 60.0, (1,))
    sensors = {x.name: x for x in drone1.sensors}
    assert [sensors[n].kind for n in ("Imu1", "Gps1", "Distance1", "LidarTop", "LidarBottom")] == \
        ["Imu", "Gps", "Distance", "Lidar", "Lidar"]
    assert sensors["LidarTop"].params["NumberOfChannels"] == 16 and sensors["LidarBottom"].params["Range"] == 10
    assert {x.kind for x in drone2.sensors} == {"Imu", "Magnetometer", "Gps", "Barometer"}  # AirSim's defaults
    assert launch_arguments(s) == {"clock_speed": "2", "airsim_port": "41460", "vehicles": "2", "use_lidar": "true",
                                   "use_distance": "true"}
    again = json.loads(settings_json(s))
    assert set(again["Vehicles"]) == {"Drone1", "Drone2"} and "fixed1" in again["ExternalCameras"]


def test_every_unsupported_key_is_one_warning_naming_it():
    warnings = load_settings(FULL).warnings
    expected = ["SeeDocsAt", "ViewMode", "Recording/RecordOnMove", "Recording/RecordInterval",
                "CameraDefaults/CaptureSettings/0/MotionBlurAmount",
                "Vehicles/Drone1/EnableCollisionPassthrogh", "Vehicles/Drone1/Sensors/LidarTop/DrawDebugPoints"]
    assert sorted(w.split(":")[0] for w in warnings) == sorted(expected)
    assert all("ignored" in w for w in warnings)


def test_computer_vision_mode_and_the_defaults_of_an_empty_file():
    cv = parse_settings({"SettingsVersion": 1.2, "SimMode": "ComputerVision"})
    assert cv.computer_vision and cv.vehicle_names() == ("ComputerVision",)
    assert launch_arguments(cv)["mission"] == "none"
    default = parse_settings({})
    assert default.sim_mode == "Multirotor" and default.vehicle_names() == ("SimpleFlight",)
    assert default.clock_speed == 1.0 and default.api_server_port == 41451 and default.warnings == ()


@pytest.mark.parametrize("text, message", [
    ("{ \"SimMode\": \"Multirotor\", }", "is not valid JSON: .* at line 1"),
    ("[]", r"\(top level\): \[\] is not of type 'object'"),
    ('{"ClockSpeed": "fast"}', "ClockSpeed: 'fast' is not of type 'number'"),
    ('{"ClockSpeed": -1}', "ClockSpeed: -1 is less than the minimum of 0"),
    ('{"SimMode": "Car"}', "SimMode: 'Car' is not simulated here"),
    ('{"Vehicles": {"d": {"VehicleType": "PhysXCar"}}}', "Vehicles/d/VehicleType: 'PhysXCar' is not a multirotor"),
    ('{"Vehicles": {"1st drone": {}}}', "vehicle name '1st drone' cannot be a ROS namespace"),
    ('{"Vehicles": {"d": {"Sensors": {"s": {"SensorType": 9}}}}}', "Vehicles/d/Sensors/s/SensorType: 9 is not one of"),
    ('{"Vehicles": {"d": {"Sensors": {"s": {"Enabled": true}}}}}', "'SensorType' is a required property"),
    ('{"Vehicles": {"d": {"Cameras": {"c": {"CaptureSettings": [{"FOV_Degrees": 0}]}}}}}',
     "Vehicles/d/Cameras/c/CaptureSettings/0/FOV_Degrees: 0 is less than or equal to the minimum of 0"),
    ('{"OriginGeopoint": {"Latitude": 91}}', "OriginGeopoint/Latitude: 91 is greater than the maximum of 90"),
    ('{"Wind": {"X": "strong"}}', "Wind/X: 'strong' is not of type 'number'"),
])
def test_each_kind_of_mistake_is_one_clear_error(tmp_path, text, message):
    path = tmp_path / "settings.json"
    path.write_text(text)
    with pytest.raises(SettingsError, match=message):
        load_settings(path)


def test_airsims_search_order(tmp_path):
    assert find_settings_file("auto", home=str(tmp_path)) is None  # nothing there: AirSim's defaults
    documents = tmp_path / "Documents" / "AirSim"
    documents.mkdir(parents=True)
    (documents / "settings.json").write_text("{}")
    assert find_settings_file("auto", home=str(tmp_path)) == documents / "settings.json"
    assert find_settings_file(str(FULL)) == FULL and find_settings_file("none") is None
    with pytest.raises(SettingsError, match="does not exist"):
        find_settings_file(str(tmp_path / "missing.json"))
    with pytest.raises(SettingsError, match="cannot read"):
        load_settings(tmp_path)  # a folder


def test_settings_cameras_render_with_their_names_mounts_and_resolutions():
    """high_res_camera.py / external_camera.py: named vehicle cameras and an external camera fixed in the world."""
    import numpy as np

    from aerial_sim.airsim.camera_rig import EXTERNAL, EXTERNAL_POSE, CameraRig
    from aerial_sim.airsim.wire import RpcFault
    from aerial_sim.world.camera import CameraParams
    from aerial_sim.world.scene import load_scene

    settings = parse_settings({
        "CameraDefaults": {"CaptureSettings": [{"ImageType": 0, "Width": 64, "Height": 48}]},
        "ExternalCameras": {"fixed1": {"X": 3, "Y": 4, "Z": -5, "Pitch": -90,
                                       "CaptureSettings": [{"ImageType": 1, "Width": 40, "Height": 30}]}},
        "Vehicles": {"Drone1": {"Cameras": {"low_res": {"CaptureSettings": [{"Width": 32, "Height": 24}]}}}},
    })
    rig = CameraRig(load_scene("empty"), CameraParams(), settings)
    pose = ((0.0, 0.0, 1.0), (1.0, 0.0, 0.0, 0.0))
    low, front = rig.render("Drone1", [("low_res", 0, False, False), ("front_center", 0, False, False)], *pose, 0)
    assert (low["width"], low["height"]) == (32, 24) and (front["width"], front["height"]) == (64, 48)
    (fixed,) = rig.render(EXTERNAL, [("fixed1", 1, True, False)], *EXTERNAL_POSE, 0)
    import msgpack

    depth = np.array(msgpack.unpackb(fixed["image_data_float"].data), np.float32).reshape(30, 40)
    assert depth[15, 20] == pytest.approx(5.0, abs=0.02)  # 5 m up, looking straight down at the ground
    info = rig.camera_info(EXTERNAL, "fixed1", *EXTERNAL_POSE)
    position = info["pose"]["position"]
    assert (position["x_val"], position["y_val"], position["z_val"]) == pytest.approx((3.0, 4.0, -5.0), abs=1e-6)
    assert (fixed["width"], fixed["height"]) == (40, 30)
    with pytest.raises(RpcFault, match="no camera named 'low_res'"):
        rig.render("Drone2", [("low_res", 0, False, False)], *pose, 0)  # Drone1's camera only
    with pytest.raises(RpcFault, match="no external camera named 'fixed2' \\(have: fixed1\\)"):
        rig.render(EXTERNAL, [("fixed2", 0, False, False)], *EXTERNAL_POSE, 0)


def test_two_named_lidars_and_a_distance_sensor_scan_the_scene_each_with_its_own_settings():
    """Two lidars of one vehicle return two different clouds (the issue: both returned one)."""
    import numpy as np

    from aerial_sim.airsim.sensors import NamedSensors
    from aerial_sim.world.scene import load_scene

    settings = parse_settings({"Vehicles": {"Drone1": {"Sensors": {
        "LidarTop": {"SensorType": 6, "NumberOfChannels": 8, "PointsPerSecond": 8000, "Range": 50,
                     "VerticalFOVUpper": -10, "VerticalFOVLower": -40},
        "LidarDown": {"SensorType": 6, "NumberOfChannels": 4, "PointsPerSecond": 4000, "Range": 8,
                      "VerticalFOVUpper": -80, "VerticalFOVLower": -89},
        "Down": {"SensorType": 5, "Pitch": -90, "MaxDistance": 40},
        "Off": {"SensorType": 6, "Enabled": False}}}}})
    sensors = NamedSensors(load_scene("empty"), settings)
    assert sorted(sensors.names("Drone1", "Lidar")) == ["LidarDown", "LidarTop"]
    pose = ((0.0, 0.0, 5.0), (1.0, 0.0, 0.0, 0.0))  # 5 m above flat ground
    top = sensors.lidar("Drone1", "LidarTop", 1.0, *pose)
    down = sensors.lidar("Drone1", "LidarDown", 1.0, *pose)
    assert len(top.points) == 8000 / 10 and len(down.points) == 4000 / 10  # every beam hits the ground
    assert np.allclose(top.points[:, 2], -5.0, atol=0.01) and np.allclose(down.points[:, 2], -5.0, atol=0.01)
    assert np.max(np.linalg.norm(down.points[:, :2], axis=1)) < 5.0 / np.tan(np.radians(80)) + 0.01
    assert np.max(np.linalg.norm(top.points, axis=1)) > 10.0  # the other lidar reaches far out
    assert sensors.distance("Drone1", "Down", 1.0, *pose).distance_m == pytest.approx(5.0, abs=0.01)


def test_spawn_poses_replace_the_launch_poses_of_the_vehicles_that_give_one():
    from aerial_sim.airsim.settings import spawn_poses

    settings = parse_settings({"Vehicles": {"A": {"VehicleType": "SimpleFlight", "X": 3, "Y": -2, "Z": -4},
                                            "B": {"VehicleType": "SimpleFlight", "Yaw": 90},
                                            "C": {"VehicleType": "SimpleFlight"}}})
    launch = [(0.0, 0.0, 0.0), (0.0, 2.0, 0.0), (0.0, 4.0, 0.0)]
    positions, yaws = spawn_poses(settings, launch, [0.1, 0.2, 0.3])
    assert positions[0] == (-2.0, 3.0, 4.0) and yaws[0] == 0.1  # NED (3, -2, -4): ENU (-2, 3, 4); no angle given
    assert positions[1] == (0.0, 2.0, 0.0) and yaws[1] == pytest.approx(0.0)  # NED yaw 90 (east): ENU yaw 0
    assert positions[2] == (0.0, 4.0, 0.0) and yaws[2] == 0.3  # nothing given: the launch's (a fleet's grid)
    assert spawn_poses(settings, launch[:1], [0.0]) == ([(-2.0, 3.0, 4.0)], [0.0])  # fewer vehicles launched


def test_sensor_noise_keys_become_the_sensor_models_parameters_in_si_units():
    """AirLib's *SimpleParams defaults (AirSim's settings documentation) land on the datasheet values the
    MPU-6000 and AirSim GPS presets hold, which were written from the same AirSim figures."""
    from aerial_sim.airsim.sensor_noise import vehicle_sensor_parameters
    from aerial_sim.sensors.imu import ImuParams
    from aerial_sim.sensors.params import load_preset

    settings = parse_settings({"Vehicles": {"Drone1": {"VehicleType": "SimpleFlight", "Sensors": {
        "Imu": {"SensorType": 2, "AngularRandomWalk": 0.3, "GyroBiasStability": 4.6, "GyroBiasStabilityTau": 500,
                "VelocityRandomWalk": 0.24, "AccelBiasStability": 36, "AccelBiasStabilityTau": 800},
        "Baro": {"SensorType": 1, "PressureFactorSigma": 0.001825, "PressureFactorTau": 3600,
                 "UncorrelatedNoiseSigma": 2.7, "UpdateFrequency": 50, "StartupDelay": 0},
        "Mag": {"SensorType": 4, "NoiseSigma": 0.005, "NoiseBias": 0.0, "ScaleFactor": 1.0},
        "Gps": {"SensorType": 3, "EphTimeConstant": 0.9, "EphInitial": 25, "EphMin3d": 3, "UpdateLatency": 0.2}}}}})
    mpu6000 = load_preset(ImuParams, "mpu6000")
    imu = vehicle_sensor_parameters(settings, "drone1", "Imu")  # any case: Drone1 is drone1's
    assert imu["gyro_noise_density"] == pytest.approx(mpu6000.gyro_noise_density, rel=1e-6)
    assert imu["gyro_bias_stability"] == pytest.approx(mpu6000.gyro_bias_stability, rel=1e-4)  # preset rounded
    assert imu["accel_bias_stability"] == pytest.approx(mpu6000.accel_bias_stability, rel=1e-6)
    assert imu["accel_noise_density"] == pytest.approx(0.24 / 60)  # 0.24 m/s/sqrt(h)
    baro = vehicle_sensor_parameters(settings, "drone1", "Barometer")
    assert baro == {"drift_std_pa": pytest.approx(184.9, abs=0.1), "drift_tau_s": 3600.0, "noise_std_pa": 2.7,
                    "rate_hz": 50.0}
    assert vehicle_sensor_parameters(settings, "drone1", "Magnetometer") == {
        "noise_std_t": pytest.approx(5e-7), "bias_t": (0.0, 0.0, 0.0)}
    assert vehicle_sensor_parameters(settings, "drone1", "Gps") == {
        "eph_tau_s": 0.9, "eph_initial_m": 25.0, "fix_3d_max_eph_m": 3.0, "latency_s": 0.2}
    assert vehicle_sensor_parameters(settings, "drone7", "Imu") == imu  # the only settings vehicle
    warned = " ".join(settings.warnings)
    assert "Baro/StartupDelay" in warned and "Mag/ScaleFactor" in warned and "AngularRandomWalk" not in warned
    with pytest.raises(SettingsError, match="AngularRandomWalk: -1 is less than the minimum of 0"):
        parse_settings({"Vehicles": {"D": {"VehicleType": "SimpleFlight", "Sensors": {
            "Imu": {"SensorType": 2, "AngularRandomWalk": -1}}}}})


@pytest.mark.ros
def test_a_sensor_node_takes_the_settings_noise_over_its_preset(ros_node, tmp_path):
    from rclpy.parameter import Parameter

    from aerial_sim.nodes.barometer import BarometerNode

    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"Vehicles": {"Drone1": {"VehicleType": "SimpleFlight", "Sensors": {
        "Baro": {"SensorType": 1, "UncorrelatedNoiseSigma": 9.5}}}}}))
    for settings, noise in ((str(path), 9.5), ("none", 2.7), (str(tmp_path / "missing.json"), 2.7)):
        node = BarometerNode(context=ros_node.context, namespace="drone1",
                             parameter_overrides=[Parameter("airsim_settings", value=settings)])
        try:
            assert node.params.noise_std_pa == noise  # the MS5611 preset's 2.7 Pa without (or with a bad) file
        finally:
            node.destroy_node()


def test_a_node_gets_usable_settings_or_exactly_one_error_for_a_file_it_cannot_use(tmp_path):
    from aerial_sim.airsim.settings import usable_settings

    good = tmp_path / "settings.json"
    good.write_text('{"SettingsVersion": 1.2, "SimMode": "Multirotor"}')
    broken = tmp_path / "broken.json"
    broken.write_text('{"SimMode": "Multirotor",')
    for spec, expect_settings, expect_errors in ((str(good), True, 0), (str(broken), False, 1),
                                                  (str(tmp_path / "missing.json"), False, 1), ("none", False, 0)):
        errors = []
        found = usable_settings(spec, errors.append)
        assert (found is not None) == expect_settings, spec
        assert len(errors) == expect_errors and all(isinstance(e, SettingsError) for e in errors), (spec, errors)
        if found is not None:
            assert found[0] == good and found[1].sim_mode == "Multirotor"


LENS = {"K1": -0.12, "K2": 0.02, "K3": -0.001, "P1": 0.0008, "P2": -0.0005}  # simSetDistortionParams' names
LENS_D = (-0.12, 0.02, 0.0008, -0.0005, -0.001)  # the same lens as plumb_bob D (k1, k2, p1, p2, k3)


def test_a_settings_lens_is_the_servers_camera_lens_and_the_camera_nodes():
    """DistortionParams of a vehicle camera, and CameraDefaults' for the others: the server renders through
    them (simGetDistortionParams answers them until simSetDistortionParam changes one) and the camera node's
    front_center camera sees the same image as the server's front_center."""
    from aerial_sim.airsim.camera_rig import CameraRig
    from aerial_sim.airsim.settings import camera_lens
    from aerial_sim.world.camera import CameraParams
    from aerial_sim.world.lens import LensParams, camera_for
    from aerial_sim.world.scene import load_scene

    import numpy as np

    settings = parse_settings({
        "CameraDefaults": {"DistortionParams": {"K1": 0.05},
                           "CaptureSettings": [{"ImageType": 0, "Width": 96, "Height": 64, "FOV_Degrees": 90}]},
        "Vehicles": {"Drone1": {"Cameras": {"front_center": {"DistortionParams": LENS}, "side": {"Y": 0.2}}}},
    })
    assert camera_lens(settings, "drone1") == (LENS_D, "Vehicles/Drone1/Cameras/front_center/DistortionParams")
    assert camera_lens(settings, "drone1", "bottom_center") == ((0.05, 0, 0, 0, 0), "CameraDefaults/DistortionParams")
    assert camera_lens(parse_settings({}), "drone1") is None
    assert json.loads(settings_json(settings))["Vehicles"]["Drone1"]["Cameras"]["front_center"]["DistortionParams"] == LENS

    scene = load_scene("urban")
    rig = CameraRig(scene, CameraParams(), settings, lens=LensParams(distortion_d=(0.3, 0, 0, 0, 0)))
    assert rig.distortion_params("Drone1", "0") == pytest.approx([-0.12, 0.02, -0.001, 0.0008, -0.0005])  # AirSim order
    assert rig.distortion("Drone1", "side") == rig.distortion("Drone1", "back_center") == (0.05, 0.0, 0.0, 0.0, 0.0)
    # The camera node: its front_center camera at the server's size, through the lens camera_lens gives it.
    node_model = camera_for(CameraParams(width=96, height=64, hfov_deg=90.0), LensParams(distortion_d=LENS_D), scene)
    pose = ((-20.0, 3.0, 8.0), (0.9659, 0.0, 0.0, 0.2588))
    server = rig.camera("Drone1", "front_center").model.render(*pose, depth=False, color=False).segmentation
    mine = node_model.render(*pose, depth=False, color=False).segmentation
    assert server.shape == (64, 96) and len(np.unique(mine)) > 2
    assert np.array_equal(server, mine)
    rig.set_distortion_param("Drone1", "front_center", "K1", 0.0)  # the API changes it from then on
    assert rig.distortion("Drone1", "front_center")[0] == 0.0 and rig.distortion("Drone1", "front_center")[1] == 0.02


@pytest.mark.parametrize("lens, message", [
    ('{"K1": "strong"}', r"Cameras/c/DistortionParams/K1: 'strong' is not of type 'number'"),
    ('{"K4": 0.1}', r"Cameras/c/DistortionParams: Additional properties are not allowed \('K4' was unexpected\)"),
    ('{"K1": NaN}', r"Cameras/c/DistortionParams/K1: must be a finite number, got nan"),
    ('{"K1": -2.0}', r"Cameras/c/DistortionParams \(K1 -2, .*\): the lens model does not map back onto every pixel "
                     r"of the 256x144 image"),
])
def test_a_bad_settings_lens_is_one_error_naming_the_key(tmp_path, lens, message):
    path = tmp_path / "settings.json"
    path.write_text('{"Vehicles": {"d": {"Cameras": {"c": {"DistortionParams": %s}}}}}' % lens)
    with pytest.raises(SettingsError, match=message):
        load_settings(path)
    path.write_text('{"Vehicles": {"d": {"Cameras": {"c": {"NoiseSettings": [{"LensDistortionEnable": true}]}}}}}')
    (warning,) = load_settings(path).warnings  # Cosys-AirSim's post-process lens: not a calibrated lens, warned
    assert warning.startswith("Vehicles/d/Cameras/c/NoiseSettings/0/LensDistortionEnable: not supported") and \
        "DistortionParams" in warning


@pytest.mark.ros
def test_the_camera_node_takes_the_settings_lens_or_its_own_when_the_file_cannot_be_used(ros_node, tmp_path):
    from rclpy.parameter import Parameter

    from aerial_sim.nodes.camera import CameraNode

    good, broken = tmp_path / "settings.json", tmp_path / "broken.json"
    good.write_text(json.dumps({"Vehicles": {"Drone1": {"Cameras": {"0": {"DistortionParams": LENS, "NoiseSettings": [
        {"Enabled": True, "ImageType": 0, "RandContrib": 0.1, **NO_HORIZONTAL}]}}}}}))
    broken.write_text('{"Vehicles": {"Drone1": {"Cameras": {"0": {"DistortionParams": {"K1": "x"}}}}}}')
    own, own_noise = [0.01, 0.0, 0.0, 0.0, 0.0], 2.0
    for settings, d, noise in ((str(good), list(LENS_D), 0.1 * 255 / math.sqrt(12)), (str(broken), own, own_noise),
                               ("none", own, own_noise)):
        node = CameraNode(context=ros_node.context, namespace="drone1", parameter_overrides=[
            Parameter("airsim_settings", value=settings), Parameter("scene", value="empty"),
            Parameter("width", value=48), Parameter("height", value=32), Parameter("distortion_d", value=own),
            Parameter("color_noise_std", value=own_noise)])
        try:
            assert list(node.camera_info.d) == pytest.approx(d) and node.camera_info.distortion_model == "plumb_bob"
            assert node.lens_params.color_noise_std == pytest.approx(noise)  # the settings' NoiseSettings, or its own
        finally:
            node.destroy_node()


NO_HORIZONTAL = {"HorzWaveContrib": 0, "HorzNoiseLinesContrib": 0, "HorzDistortionContrib": 0}


def test_noise_settings_make_the_colour_noise_the_model_predicts_and_one_seed_repeats_it(tmp_path):
    """An enabled Scene entry of NoiseSettings with RandContrib c gives the server's Scene images (and the camera
    node's, camera_noise) Gaussian noise of std c x 255 / sqrt(12) levels, zero mean, over every pixel the
    clipping at 0 and 255 leaves alone; the same noise_seed and stamp give the same bytes, another seed others."""
    import numpy as np

    from aerial_sim.airsim.camera_rig import CameraRig
    from aerial_sim.airsim.settings import camera_noise
    from aerial_sim.world.camera import CameraParams
    from aerial_sim.world.lens import LensParams
    from aerial_sim.world.scene import load_scene

    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"Vehicles": {"Drone1": {"Cameras": {"0": {"NoiseSettings": [
        {"Enabled": False, "ImageType": 0, "RandContrib": 0.9},  # off: ignored, not warned
        {"Enabled": True, "ImageType": 0, "RandContrib": 0.15, "RandSpeed": 1e6, **NO_HORIZONTAL}]}}}}}))
    settings = load_settings(path)
    std = 0.15 * 255.0 / math.sqrt(12.0)  # 11.04 levels
    assert settings.warnings == ()
    assert camera_noise(settings, "drone1") == (pytest.approx(std), "Vehicles/Drone1/Cameras/0/NoiseSettings")
    assert camera_noise(settings, "drone1", "bottom_center") is None
    scene = load_scene("empty")
    pose = ((0.0, 0.0, 2.0), (1.0, 0.0, 0.0, 0.0))

    def scene_image(settings, seed: int = 7, stamp_ns: int = 123):
        rig = CameraRig(scene, CameraParams(), settings, lens=LensParams(noise_seed=seed))
        response = rig.render("Drone1", [("0", 0, False, False)], *pose, stamp_ns)[0]
        return np.frombuffer(response["image_data_uint8"], np.uint8).reshape(response["height"], response["width"], 3)

    clean = scene_image(parse_settings({"Vehicles": {"Drone1": {"Cameras": {"0": {}}}}})).astype(float)
    noisy = scene_image(settings)
    inside = (clean > 4 * std) & (clean < 255 - 4 * std)  # where clipping cannot bite
    difference = noisy.astype(float)[inside] - clean[inside]
    assert inside.sum() > 10_000
    # std of the sample std ~ sigma / sqrt(2 N) (0.07 levels); rounding adds variance 1/12.
    assert np.std(difference) == pytest.approx(math.sqrt(std ** 2 + 1 / 12), abs=0.4)
    assert abs(np.mean(difference)) < 4 * std / math.sqrt(inside.sum())
    assert np.array_equal(scene_image(settings), noisy)  # same seed, same stamp: same image
    assert not np.array_equal(scene_image(settings, seed=8), noisy)
    assert not np.array_equal(scene_image(settings, stamp_ns=124), noisy)  # new each frame
    assert json.loads(settings_json(settings))["Vehicles"]["Drone1"]["Cameras"]["0"]["NoiseSettings"][0][
        "RandContrib"] == pytest.approx(0.15)


def test_noise_keys_the_model_cannot_make_are_one_warning_line_naming_them():
    settings = parse_settings({"CameraDefaults": {"NoiseSettings": [
        {"Enabled": True, "RandContrib": 0.2, "RandSize": 500, "RandSpeed": 10, "HorzWaveStrength": 0.08,
         "HorzWaveContrib": 0.03},
        {"Enabled": True, "ImageType": 1}]}})
    mapped, depth = settings.warnings
    assert mapped.startswith("CameraDefaults/NoiseSettings/0: mapped to colour noise of 14.7 levels")
    assert "not simulated: RandSpeed, RandSize (the random noise's spatial structure and slower fluctuation)" in mapped
    assert "Horz" not in mapped  # the horizontal artefacts are drawn (test_image_artefacts.py)
    assert depth.startswith("CameraDefaults/NoiseSettings/1: noise on ImageType 1 (DepthPlanar) is not simulated")
    from aerial_sim.airsim.settings import camera_noise

    assert camera_noise(settings, "anyone", "left") == (pytest.approx(0.2 * 255 / math.sqrt(12)),
                                                         "CameraDefaults/NoiseSettings")


@pytest.mark.parametrize("entry, message", [
    ('{"Enabled": true, "RandContrib": 1.5}', r"Cameras/c/NoiseSettings/0/RandContrib: must be a finite number in "
                                              r"\[0, 1\], got 1\.5"),
    ('{"Enabled": true, "RandContrib": NaN}', r"Cameras/c/NoiseSettings/0/RandContrib: must be a finite number"),
    ('{"Enabled": true, "HorzWaveStrength": -1}', r"Cameras/c/NoiseSettings/0/HorzWaveStrength: must be a finite "
                                                  r"number in \[0, inf\]"),
    ('{"Enabled": "yes"}', r"Cameras/c/NoiseSettings/0/Enabled: 'yes' is not of type 'boolean'"),
    ('{"RandSize": "coarse"}', r"Cameras/c/NoiseSettings/0/RandSize: 'coarse' is not of type 'number'"),
])
def test_a_bad_noise_value_is_one_error_naming_the_key(tmp_path, entry, message):
    path = tmp_path / "settings.json"
    path.write_text('{"Vehicles": {"d": {"Cameras": {"c": {"NoiseSettings": [%s]}}}}}' % entry)
    with pytest.raises(SettingsError, match=message):
        load_settings(path)
