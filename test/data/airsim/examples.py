"""The call sequences of AirSim's PythonClient examples, run by a real client against a server (issue 30).

    python examples.py MODULE PORT SCENARIO      (MODULE: airsim or cosysairsim)

Each scenario makes the calls its example makes (own code, same calls; waits shortened) and prints one
JSON line per result the test checks, then {"step": "done"}. The test checks what the vehicle did from
the server's ground truth.
"""

import json
import math
import sys
import time

START = time.monotonic()
module, port, scenario = sys.argv[1], int(sys.argv[2]), sys.argv[3]
airsim = __import__(module)


def say(step, **values):
    print(json.dumps({"step": step, "t": round(time.monotonic() - START, 2), **values}), flush=True)


def multirotor():
    client = airsim.MultirotorClient(port=port)
    client.confirmConnection()
    return client


if scenario == "hello":  # hello_drone.py
    client = multirotor()
    client.enableApiControl(True)
    say("arm", result=client.armDisarm(True))
    client.takeoffAsync().join()
    client.moveToPositionAsync(-10, 10, -10, 5).join()
    p = client.getMultirotorState().kinematics_estimated.position
    say("moved", position=[p.x_val, p.y_val, p.z_val])
    client.reset()
    say("disarm_after_reset", result=client.armDisarm(False))  # reset took API control back: False
    client.enableApiControl(False)
elif scenario == "disarm_in_air":  # disarm.py, called while flying
    client = multirotor()
    client.enableApiControl(True)
    client.takeoffAsync().join()
    say("disarm", result=client.armDisarm(False))
    time.sleep(1.0)
    say("landed_state", value=client.getMultirotorState().landed_state)
elif scenario == "stress":  # drone_stress_test.py (two rounds)
    client = multirotor()
    client.enableApiControl(True)
    client.armDisarm(True)
    for index in range(2):
        client.moveToPositionAsync(0, 0, -10, 5).join()
        p = client.getMultirotorState().kinematics_estimated.position
        say(f"round{index}", position=[p.x_val, p.y_val, p.z_val])
        client.reset()
        client.enableApiControl(True)
    client.enableApiControl(False)
elif scenario == "path":  # path.py, on a smaller closed square
    client = multirotor()
    client.enableApiControl(True)
    client.armDisarm(True)
    if client.getMultirotorState().landed_state == airsim.LandedState.Landed:
        client.takeoffAsync().join()
    z = -5
    client.moveToZAsync(z, 1).join()
    result = client.moveOnPathAsync([airsim.Vector3r(20, 0, z), airsim.Vector3r(20, -20, z),
                                     airsim.Vector3r(0, -20, z), airsim.Vector3r(0, 0, z)],
                                    5, 120, airsim.DrivetrainType.ForwardOnly, airsim.YawMode(False, 0), 4, 1)
    result.join()
    say("path", result=result.get())
    client.moveToPositionAsync(0, 0, z, 1).join()
    client.landAsync().join()
    say("disarm", result=client.armDisarm(False))
    client.enableApiControl(False)
elif scenario == "manual":  # manual_mode_demo.py
    client = multirotor()
    client.enableApiControl(True)
    client.armDisarm(True)
    client.moveByManualAsync(vx_max=1e6, vy_max=1e6, z_min=-1e6, duration=1e10)
    client.moveByRC(rcdata=airsim.RCData(pitch=0.0, throttle=1.0, is_initialized=True, is_valid=True))
    time.sleep(1.0)
    client.moveByRC(rcdata=airsim.RCData(roll=0.5, throttle=1.0, yaw=0.5, is_initialized=True, is_valid=True))
    time.sleep(1.0)
elif scenario == "cv":  # cv_mode.py (SimMode ComputerVision)
    client = airsim.VehicleClient(port=port)
    client.confirmConnection()
    client.simSetCameraPose("0", airsim.Pose(airsim.Vector3r(0, 0, 0), airsim.to_quaternion(math.radians(15), 0, 0)))
    for camera in range(5):
        client.simGetCameraInfo(str(camera))
    for x in range(3):
        z = x * -5 - 5
        client.simSetVehiclePose(airsim.Pose(airsim.Vector3r(z, z, z), airsim.to_quaternion(x / 3.0, 0, x / 3.0)), True)
        responses = client.simGetImages([
            airsim.ImageRequest("0", airsim.ImageType.DepthVis),
            airsim.ImageRequest("1", airsim.ImageType.DepthPerspective, True),
            airsim.ImageRequest("1", airsim.ImageType.Segmentation),
            airsim.ImageRequest("1", airsim.ImageType.Scene),
            airsim.ImageRequest("1", airsim.ImageType.DisparityNormalized),
            airsim.ImageRequest("1", airsim.ImageType.SurfaceNormals),
            airsim.ImageRequest("1", airsim.ImageType.OpticalFlow),
            airsim.ImageRequest("1", airsim.ImageType.Infrared)])
        say(f"images{x}", sizes=[(r.width, r.height, len(r.image_data_uint8) + len(r.image_data_float))
                                 for r in responses])
    time.sleep(1.0)
    p = client.simGetVehiclePose().position
    say("pose", position=[p.x_val, p.y_val, p.z_val])
elif scenario == "add":  # add_drone.py, then what a user does with the new vehicle, and three bad requests
    client = multirotor()
    pose = airsim.Pose(airsim.Vector3r(2, 3, 0), airsim.to_quaternion(0, 0, math.radians(90)))
    say("add", result=client.simAddVehicle("Drone2", "simpleflight", pose))
    client.enableApiControl(True, "Drone2")
    say("arm", result=client.armDisarm(True, "Drone2"))
    say("takeoff", result=client.takeoffAsync(10.0, "Drone2").join())
    # Where it holds: takeoff ends within 0.3 m of its 3 m, still climbing, and a controller fed late
    # odometry (a busy machine) overshoots before it settles back.
    deadline = time.monotonic() + 15.0
    state = client.getMultirotorState("Drone2")
    while abs(state.kinematics_estimated.linear_velocity.z_val) > 0.1 and time.monotonic() < deadline:
        time.sleep(0.1)
        state = client.getMultirotorState("Drone2")
    p, q = state.kinematics_estimated.position, state.kinematics_estimated.orientation
    say("state", position=[p.x_val, p.y_val, p.z_val], yaw=airsim.to_eularian_angles(q)[2],
        landed=state.landed_state)
    say("vehicles", names=client.listVehicles())
    responses = client.simGetImages([airsim.ImageRequest("0", airsim.ImageType.DepthVis),
                                     airsim.ImageRequest("1", airsim.ImageType.Scene)], vehicle_name="Drone2")
    say("images", sizes=[(r.width, r.height) for r in responses])
    for label, args in (("existing", ("Drone2", "simpleflight", pose)), ("type", ("Drone3", "Car", pose)),
                        ("nan", ("Drone4", "simpleflight", airsim.Pose(airsim.Vector3r(float("nan"), 0, 0))))):
        try:
            say(f"refused_{label}", result=client.simAddVehicle(*args), message="")
        except Exception as error:  # the client's RPCError: the server's reason
            say(f"refused_{label}", result=None, message=str(error))
    say("alive", result=client.ping(), vehicles=client.listVehicles())
say("done")
