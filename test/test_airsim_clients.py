"""Existing AirSim scripts fly the launched graph: the real ``airsim`` and ``cosysairsim`` clients (issue 13).

Launches physics, flight controller, sensors and the ``airsim_api`` node
(``sim.launch.yaml`` with the heavy optional nodes off), then runs the same
hello-drone script (test/data/airsim/hello_drone.py) with each real client from
PyPI in its own cached venv (test/airsim_clients.py), while this process
records ``ground_truth/odom``. What the clients read back is compared with the
ground truth converted to NED.
"""

from __future__ import annotations

import concurrent.futures
import json
import math
import re
import struct
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from airsim_clients import ClientUnavailable, client_python  # noqa: E402 (test helper beside this file)
from conftest import requires_ros, spin_until

SCRIPT = Path(__file__).parent / "data" / "airsim" / "hello_drone.py"
pytestmark = [requires_ros, pytest.mark.ros]


@pytest.fixture(scope="module")
def clients():
    try:
        return {name: client_python(name) for name in ("airsim", "cosysairsim")}
    except ClientUnavailable as error:
        pytest.skip(str(error))


def run_script(python: Path, module: str, port: int, north: float, east: float) -> dict:
    float_depth = "0" if module == "airsim" else "1"  # airsim 1.8.1's pure-Python msgpack: floats take seconds
    result = subprocess.run([str(python), str(SCRIPT), module, str(port), str(north), str(east), float_depth],
                            capture_output=True, text=True, timeout=120)
    steps = {}
    for line in result.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            steps[record.pop("step")] = record
    assert result.returncode == 0 and "done" in steps, f"{module} script failed:\n{result.stdout}\n{result.stderr}"
    return steps


def stamp_ns(data: bytes) -> int:
    """The header stamp of a CDR-serialized message, in ns (after the 4-byte encapsulation: sec int32, nanosec uint32)."""
    sec, nanosec = struct.unpack_from("<iI", data, 4)
    return sec * 1_000_000_000 + nanosec


def ned_pose(data: bytes):
    from nav_msgs.msg import Odometry
    from rclpy.serialization import deserialize_message

    message = deserialize_message(data, Odometry)
    p, q = message.pose.pose.position, message.pose.pose.orientation
    from aerial_sim.airsim.ned import orientation_to_ned, world_to_ned

    return np.array(world_to_ned((p.x, p.y, p.z))), np.array(orientation_to_ned((q.w, q.x, q.y, q.z)))


def test_hello_drone_flies_with_both_real_clients(clients, launch, ros_node):
    from nav_msgs.msg import Odometry
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    graph = launch("sim.launch.yaml", "mission:=none", "scene:=urban", "record:=false", "viewer:=false",
                   "use_camera:=false", "use_depth_noise:=false", "use_scene_markers:=false", "airsim_port:=0",
                   f"run_dir:={Path(ros_node.get_name())}")
    odometry: dict[int, bytes] = {}  # stamp (ns) -> the message as it came; only those a client read are decoded
    # Best effort as the stream is offered, but deep: this process reads while it waits for the client's
    # script, in bursts on a busy machine, and a 5-deep history dropped the states the client had read.
    deep = QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT)
    ros_node.create_subscription(Odometry, "/drone1/ground_truth/odom",
                                 lambda data: odometry.__setitem__(stamp_ns(data), data), deep, raw=True)
    port = None
    deadline = time.monotonic() + 60
    while port is None and time.monotonic() < deadline and graph.alive():
        found = re.search(r"AirSim API on 127\.0\.0\.1:(\d+)", graph.output())
        port = int(found.group(1)) if found else None
        spin_until(ros_node, lambda: False, 0.2)
    assert port, f"the airsim_api node did not start:\n{graph.output()[-3000:]}"
    assert spin_until(ros_node, lambda: len(odometry) > 10, 30), "no ground truth from the physics node"
    # No client yet: the server reads none of the vehicle's streams (it subscribes when one connects).
    # Discovery is gradual: wait until the server node and its /clock subscription are known.
    topics: list[str] = []

    def server_subscriptions_known() -> bool:
        if ("airsim_api", "/") not in ros_node.get_node_names_and_namespaces():
            return False
        topics[:] = [name for name, _ in ros_node.get_subscriber_names_and_types_by_node("airsim_api", "/")]
        return "/clock" in topics

    assert spin_until(ros_node, server_subscriptions_known, 15), f"airsim_api not discovered: {topics}"
    # (set_pose/applied is no stream: the physics node says on it when a teleport took effect.)
    assert not any(name.startswith("/drone1/") and name != "/drone1/set_pose/applied" for name in topics), topics

    for module, (north, east) in (("airsim", (4.0, 2.0)), ("cosysairsim", (-3.0, 5.0))):
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            flight = pool.submit(run_script, clients[module], module, port, north, east)
            while not flight.done():  # keep recording odometry while the client flies
                spin_until(ros_node, lambda: False, 0.1)
            try:
                steps = flight.result()  # raises the script's failure, with its output
            except AssertionError as failure:
                raise AssertionError(f"{failure}\n--- the graph's output ---\n{graph.output()[-4000:]}") from None
        try:
            check_flight(module, steps, odometry, north, east)
        except AssertionError as failure:  # what the graph said (a failsafe, a controller's warning) with it
            raise AssertionError(f"{failure}\n{steps}\n--- the graph's output ---\n{graph.output()[-4000:]}") from None
    # Each client got the streams when it connected, and they were dropped when it left.
    assert graph.output().count("AirSim client connected: reading the vehicles' state") == 2, graph.output()[-4000:]
    check_sim_add_vehicle(clients, port, graph, ros_node)  # on the same graph: one launch for both


def check_flight(module: str, steps: dict, odometry: dict, north: float, east: float) -> None:
    assert steps["api_control"]["enabled"] is True and steps["arm"]["ok"] is True, module
    assert -3.5 < steps["takeoff"]["z"] < -2.5, module  # AirSim's takeoff: 3 m up
    assert steps["move"]["poll_max_s"] < 1.0, f"{module}: state polls waited for the move"

    samples = steps["state"]["samples"]
    matched = 0
    for sample in samples:
        message = odometry.get(sample["timestamp"])
        if message is None:
            continue  # the test's best-effort subscription missed that one
        matched += 1
        position, orientation = ned_pose(message)
        assert np.allclose(sample["position"], position, atol=1e-5), module
        assert abs(abs(np.dot(sample["orientation"], orientation)) - 1.0) < 1e-6, module
        assert sample["landed_state"] == 1, module
    assert matched >= 1, f"{module}: no state timestamp matched a ground_truth/odom stamp"
    final = np.array(samples[-1]["position"])
    assert np.linalg.norm(final - [north, east, -2.5]) < 0.5, f"{module}: ended at {final}"
    assert np.allclose(steps["state"]["pose_position"], final, atol=0.3), module

    sensors = steps["sensors"]
    assert -10.5 < sensors["imu_accel"][2] < -9.0, module  # FRD specific force hovering: -g on z
    assert 122.0 + 0.5 < sensors["baro_altitude"] < 122.0 + 5.5, module  # home 122 m + 2.5 m (+ noise, drift)
    assert 0.4 < math.hypot(*sensors["mag"]) < 0.7, module  # Gauss, Redmond
    assert sensors["gps_valid"] is True and abs(sensors["gps"][0] - sensors["home"][0]) < 1e-3, module

    images = steps["images"]
    assert images["sizes"] == [[460, 320]] * 4, module
    assert images["png_magic"] == images["single_png_magic"] == "89504e470d0a1a0a", module
    if images["depth_float"]:
        assert images["depth_count"] == 460 * 320 and 0.0 < images["depth_min"] < 200.0, module
    else:
        assert images["depth_png_magic"] == "89504e470d0a1a0a", module
    assert images["segmentation_colors"] >= 2, module  # street, buildings, sky...
    assert "no lidar data for 'drone1'" in steps["lidar"]["error"], module

    pause = steps["pause"]
    assert pause["paused"] is True and pause["frozen_ns"] == 0, f"{module}: time ran while paused: {pause}"
    assert abs(pause["continued_ns"] - 200_000_000) <= 4_000_000, f"{module}: {pause}"  # one control period

    assert steps["land"]["landed_state"] == 0 and steps["land"]["z"] > -0.2, module
    assert steps["disarm"]["ok"] is True, module

    moved = steps["teleport_reset"]
    # Running: read back on the vertical below the new pose (a loaded machine lets it fall longer, no
    # further than the ground it landed on before: z of the landed vehicle -0.17 m, bounces excluded).
    assert np.allclose(moved["running"][:2], [1.0, 2.0], atol=0.05) and -5.0 - 1e-3 < moved["running"][2] < 0.0, \
        f"{module}: {moved}"
    # Paused: exactly the pose asked for, then 0.5 s of sim time falling from rest: g t^2 / 2 = 1.23 m, less
    # what drag takes off (air drag only shortens a fall from rest; the quad's takes 5 % off this one).
    assert np.allclose(moved["teleported"], [-1.0, 3.0, -6.0], atol=1e-3), f"{module}: {moved}"
    assert abs(moved["teleported_yaw"]) < 0.01, module  # to_quaternion(0, 0, 0): facing north
    fall = moved["fallen"][2] - moved["teleported"][2]
    assert np.allclose(moved["fallen"][:2], moved["teleported"][:2], atol=1e-3), f"{module}: {moved}"
    free = 0.5 * 9.806 * 0.5 ** 2
    assert 0.9 * free < fall < free, f"{module}: fell {fall} m in 0.5 s"
    assert np.linalg.norm(moved["after_reset"][:2]) < 1e-6 and abs(moved["after_reset"][2]) < 0.1, module
    assert moved["api_control"] is False, module  # reset takes API control away, as in AirSim


EXAMPLES = Path(__file__).parent / "data" / "airsim" / "examples.py"


def check_sim_add_vehicle(clients, port: int, graph, ros_node) -> None:
    """add_drone.py's calls on the launched graph: the physics node adds Drone2, the server starts its
    controller and sensors (launch/vehicle.launch.yaml), the client flies it; bad requests are refused and
    the server stays; stopping the graph stops the added vehicle's processes too."""
    from nav_msgs.msg import Odometry
    from rclpy.qos import qos_profile_sensor_data

    heights: list[float] = []
    ros_node.create_subscription(Odometry, "/Drone2/ground_truth/odom",
                                 lambda m: heights.append(m.pose.pose.position.z), qos_profile_sensor_data)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        run = pool.submit(subprocess.run, [str(clients["airsim"]), str(EXAMPLES), "airsim", str(port), "add"],
                          capture_output=True, text=True, timeout=150)
        while not run.done():
            spin_until(ros_node, lambda: False, 0.1)
        result = run.result()
    steps = {}
    for line in result.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            steps[record.pop("step")] = record
    assert result.returncode == 0 and "done" in steps, \
        f"{result.stdout}\n{result.stderr}\n--- graph ---\n{graph.output()[-5000:]}"
    assert steps["add"]["result"] is True and steps["arm"]["result"] is True
    assert steps["state"]["position"] == pytest.approx([2.0, 3.0, -3.0], abs=0.4) and steps["state"]["landed"] == 1
    assert steps["vehicles"]["names"] == ["drone1", "Drone2"]
    assert steps["images"]["sizes"] == [[460, 320], [460, 320]]  # the default cameras on the new vehicle
    assert "a vehicle named 'Drone2' exists" in steps["refused_existing"]["message"]
    assert "unknown vehicle_type 'Car'" in steps["refused_type"]["message"]
    assert "pose.position.x_val" in steps["refused_nan"]["message"]
    assert steps["alive"]["result"] is True
    # The graph's own topic for the new vehicle: its ground truth, 3 m up after the takeoff.
    assert spin_until(ros_node, lambda: heights and heights[-1] > 2.5, 10), heights[-5:]
    pid = int(re.search(r"simAddVehicle: Drone2 \(quad_x\) added.*pid (\d+)", graph.output()).group(1))
    graph.stop()
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower(), \
        "the added vehicle's launch outlived the graph"
