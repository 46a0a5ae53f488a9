"""A hello-drone flow as AirSim users write it, run by test_airsim_clients.py with a real client.

    python hello_drone.py airsim|cosysairsim PORT NORTH EAST FLOAT_DEPTH

FLOAT_DEPTH 0 asks for depth as a PNG instead of floats (airsim 1.8.1's pure-Python msgpack
takes many seconds to decode 147,200 floats on a loaded machine).

Prints one JSON object per line: {"step": ..., ...}; the test reads and checks them.
Written against the public client API only (no aerial_sim import), like any AirSim script.
"""

import importlib
import json
import sys
import time

import numpy as np

module_name, port, north, east = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
float_depth = sys.argv[5] == "1"
airsim = importlib.import_module(module_name)


def emit(step, **values):
    print(json.dumps({"step": step, **values}), flush=True)


def vector(v):
    return [v.x_val, v.y_val, v.z_val]


def quaternion(q):
    return [q.w_val, q.x_val, q.y_val, q.z_val]


client = airsim.MultirotorClient(port=port)
client.confirmConnection()
client.enableApiControl(True)
emit("api_control", enabled=client.isApiControlEnabled())
emit("arm", ok=client.armDisarm(True))

started = time.time()
client.takeoffAsync().join()
emit("takeoff", wall_s=time.time() - started, z=client.getMultirotorState().kinematics_estimated.position.z_val)

# Poll the state while the move is under way: replies must not wait for the move.
move = client.moveToPositionAsync(north, east, -2.5, 3)
polls = []
for _ in range(5):
    sent = time.time()
    client.getMultirotorState()
    polls.append(time.time() - sent)
move.join()
emit("move", poll_max_s=max(polls))

# Ten states over about 1.5 s: the test matches them with the ground truth it recorded (best effort), and on
# a loaded machine it lost every message of a shorter window (ci11).
samples = []
for _ in range(10):
    state = client.getMultirotorState()
    k = state.kinematics_estimated
    samples.append({"timestamp": int(state.timestamp), "position": vector(k.position), "orientation": quaternion(k.orientation),
                    "landed_state": state.landed_state})
    time.sleep(0.15)
pose = client.simGetVehiclePose()
emit("state", samples=samples, pose_position=vector(pose.position), pose_orientation=quaternion(pose.orientation))

imu = client.getImuData()
baro = client.getBarometerData()
mag = client.getMagnetometerData()
gps = client.getGpsData()
emit("sensors", imu_accel=vector(imu.linear_acceleration), baro_altitude=baro.altitude, baro_pressure=baro.pressure,
     mag=vector(mag.magnetic_field_body), gps=[gps.gnss.geo_point.latitude, gps.gnss.geo_point.longitude,
                                              gps.gnss.geo_point.altitude], gps_valid=gps.is_valid,
     home=[client.getHomeGeoPoint().latitude, client.getHomeGeoPoint().longitude])

responses = client.simGetImages([
    airsim.ImageRequest("0", airsim.ImageType.DepthPlanar, float_depth, not float_depth),
    airsim.ImageRequest("0", airsim.ImageType.Segmentation, False, False),
    airsim.ImageRequest("0", airsim.ImageType.Scene, False, False),
    airsim.ImageRequest("front_center", airsim.ImageType.Scene),
])
depth = responses[0]
depth_values = np.array(depth.image_data_float, dtype=np.float32) if float_depth else np.array([np.nan])
segmentation = np.frombuffer(responses[1].image_data_uint8, dtype=np.uint8).reshape(responses[1].height, responses[1].width, 3)
scene = np.frombuffer(responses[2].image_data_uint8, dtype=np.uint8).reshape(responses[2].height, responses[2].width, 3)
png = responses[3].image_data_uint8
emit("images", sizes=[[r.width, r.height] for r in responses], depth_float=float_depth,
     depth_count=int(depth_values.size), depth_min=float(depth_values.min()),
     depth_png_magic=depth.image_data_uint8[:8].hex(), segmentation_colors=len(np.unique(segmentation.reshape(-1, 3), axis=0)),
     scene_mean=float(scene.mean()), png_magic=png[:8].hex(), single_png_magic=client.simGetImage("0", airsim.ImageType.Scene)[:8].hex())

try:
    client.getLidarData()
    emit("lidar", error=None)
except Exception as error:  # noqa: BLE001 - the script reports what the client raised
    emit("lidar", error=str(error))

client.simPause(True)
first = client.getMultirotorState().timestamp
time.sleep(0.3)
second = client.getMultirotorState().timestamp
client.simContinueForTime(0.2)
third = client.getMultirotorState().timestamp
emit("pause", paused=client.simIsPause(), frozen_ns=int(second - first), continued_ns=int(third - second))
client.simPause(False)

started = time.time()
client.landAsync().join()
state = client.getMultirotorState()
emit("land", wall_s=time.time() - started, landed_state=state.landed_state, z=state.kinematics_estimated.position.z_val)
emit("disarm", ok=client.armDisarm(False))

# A teleport while the simulation runs: the physics takes the vehicle over from the new pose at once
# (AirSim's setPose ungrounds the body: a disarmed vehicle falls), so a read a wall-clock moment later
# finds it on the vertical below the new pose, however loaded the machine.
client.simSetVehiclePose(airsim.Pose(airsim.Vector3r(1.0, 2.0, -5.0), airsim.Quaternionr()), True)
running = client.simGetVehiclePose()
# Paused, nothing moves it: it is exactly where it was put; 0.5 s of simulation later it has fallen.
client.simPause(True)
client.simSetVehiclePose(airsim.Pose(airsim.Vector3r(-1.0, 3.0, -6.0), airsim.Quaternionr()), True)  # facing north
teleported = client.simGetVehiclePose()
q = teleported.orientation
client.simContinueForTime(0.5)
fallen = client.simGetVehiclePose()
client.simPause(False)
client.reset()
time.sleep(0.3)
emit("teleport_reset", running=vector(running.position), teleported=vector(teleported.position),
     teleported_yaw=float(np.arctan2(2 * (q.w_val * q.z_val + q.x_val * q.y_val), 1 - 2 * (q.y_val ** 2 + q.z_val ** 2))),
     fallen=vector(fallen.position),
     after_reset=vector(client.getMultirotorState().kinematics_estimated.position), api_control=client.isApiControlEnabled())
emit("done")
