"""The other direction (issue 33 item 3): the ``mavlink_vehicle`` node serves the flight controller's
contract (arm/takeoff/land services, cmd_pose/cmd_vel, odom, /diagnostics) by commanding a MAVLink
autopilot. The far end here is aerial_sim's own PX4-style autopilot (the ``mavlink`` node in front of
the simulated drone1) over loopback UDP: the driver in namespace /px4 flies /drone1, and what it
publishes as the autopilot's estimate must match drone1's ground truth at the estimate's stamp (the
autopilot's time_boot_ms, simulation time, mapped to the driver's ROS clock, here /clock)."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections import deque

import pytest

from conftest import requires_ros, spin_until
from test_mavlink_clients import ports

pytestmark = [requires_ros, pytest.mark.ros]


def test_mavlink_vehicle_flies_the_simulated_px4_through_the_controller_contract(launch, ros_node, tmp_path):
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import PoseStamped, TwistStamped
    from nav_msgs.msg import Odometry
    from rclpy.qos import qos_profile_sensor_data
    from std_srvs.srv import SetBool, Trigger

    from aerial_sim.nodes.ros.qos import COMMAND_QOS

    gcs, api = ports()
    gcs, api = gcs + 5, api + 5  # away from the other MAVLink tests' ports
    graph = launch("sim.launch.yaml", "mission:=none", "scene:=empty", "record:=false", "viewer:=false",
                   "use_camera:=false", "use_depth_noise:=false", "airsim_api:=false", "mavlink:=true",
                   f"mavlink_gcs_port:={gcs}", f"mavlink_api_port:={api}", "mavlink_gcs_local_port:=0",
                   "mavlink_api_local_port:=0", f"run_dir:={tmp_path / 'run'}")
    log = open(tmp_path / "vehicle.log", "w")
    driver = subprocess.Popen([sys.executable, "-m", "aerial_sim.nodes.mavlink_vehicle", "--ros-args",
                               "-r", "__ns:=/px4", "-p", f"url:=udpin:127.0.0.1:{api}", "-p", "use_sim_time:=true"],
                              stdout=log,
                              stderr=subprocess.STDOUT)
    try:
        latest = {}
        truth_track = deque(maxlen=500)  # the last 2 s of ground truth (250 Hz): (stamp, position)

        def on_truth(message):
            latest["truth"] = message
            p = message.pose.pose.position
            truth_track.append((stamp_s(message), (p.x, p.y, p.z)))

        def stamp_s(message):
            return message.header.stamp.sec + 1e-9 * message.header.stamp.nanosec

        def truth_at_estimate():
            """The newest estimate, the ground truth at its stamp (interpolated between the two truths this process
            received around it: it drops some under load), and the gap between those two (None: none around it)."""
            estimate = latest["estimate"]
            t = stamp_s(estimate)
            spin_until(ros_node, lambda: truth_track[-1][0] >= t, 2.0)
            p = estimate.pose.pose.position
            track = list(truth_track)
            for (t0, a), (t1, b) in zip(track, track[1:]):
                if t0 <= t <= t1:
                    f = (t - t0) / (t1 - t0) if t1 > t0 else 0.0
                    return (p.x, p.y, p.z), tuple(u + f * (v - u) for u, v in zip(a, b)), t1 - t0
            return (p.x, p.y, p.z), track[-1][1], None
        ros_node.create_subscription(Odometry, "/px4/odom", lambda m: latest.__setitem__("estimate", m), 10)
        ros_node.create_subscription(Odometry, "/drone1/ground_truth/odom", on_truth, qos_profile_sensor_data)

        def on_diagnostics(message):
            for status in message.status:
                if status.hardware_id == "px4":
                    latest["px4"] = {v.key: v.value for v in status.values}
        ros_node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, COMMAND_QOS)
        assert spin_until(ros_node, lambda: "estimate" in latest and "truth" in latest and "px4" in latest, 60), \
            f"no estimate from the driver:\n{(tmp_path / 'vehicle.log').read_text()[-2000:]}\n{graph.output()[-2000:]}"
        assert latest["px4"]["mode"] == "disarmed"

        def call(service_type, name, request):
            client = ros_node.create_client(service_type, name)
            assert client.wait_for_service(timeout_sec=20)
            future = client.call_async(request)
            assert spin_until(ros_node, future.done, 15)
            return future.result()

        def position(kind):
            p = latest[kind].pose.pose.position
            return p.x, p.y, p.z

        refused = call(Trigger, "/px4/takeoff", Trigger.Request())
        assert not refused.success and "not armed" in refused.message
        # Armable once the autopilot says standby (its preflight: vehicle state and a reporting controller).
        assert spin_until(ros_node, lambda: latest["px4"]["system_status"] == "standby", 30), latest["px4"]
        assert call(SetBool, "/px4/arm", SetBool.Request(data=True)).success
        assert call(Trigger, "/px4/takeoff", Trigger.Request()).success
        assert spin_until(ros_node, lambda: position("estimate")[2] > 1.8, 20)

        pose = PoseStamped()
        pose.header.frame_id = "map"
        pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = 3.0, -2.0, 2.5
        pose.pose.orientation.w = 1.0
        pose_pub = ros_node.create_publisher(PoseStamped, "/px4/cmd_pose", COMMAND_QOS)
        # Sent once, reliably: only to a reader this publisher has matched (a new publisher has none yet).
        assert spin_until(ros_node, lambda: pose_pub.get_subscription_count() > 0, 10)
        pose_pub.publish(pose)
        arrived = spin_until(ros_node, lambda: math.dist(position("estimate"), (3.0, -2.0, 2.5)) < 0.2, 25)
        assert arrived, (position("estimate"), latest["px4"], (tmp_path / "vehicle.log").read_text()[-2000:])
        # The driver's estimate is the autopilot's (here: ground truth through MAVLink and back), so it is the
        # truth of a moment ago: a telemetry period and the UDP and DDS hops behind the newest truth (the vehicle,
        # still moving as it arrives, was 0.16 m further on at CI's load 30). Its stamp is when the autopilot
        # measured it (time_boot_ms, sim time here), so it is the truth at that stamp, to the mapping's error
        # (milliseconds on an idle host, tens of them on a loaded one: the vehicle is slowing down here).
        for _ in range(20):  # an estimate whose truth this process received around it (it drops some under load)
            estimate, truth, gap = truth_at_estimate()
            if gap is not None and gap < 0.1:
                break
            spin_until(ros_node, lambda: False, 0.05)
        assert gap is not None and gap < 0.1 and math.dist(estimate, truth) < 0.1, (estimate, truth, gap)
        assert spin_until(ros_node, lambda: latest["px4"]["autopilot_mode"] == "Offboard", 5)

        velocity = TwistStamped()
        velocity.header.frame_id = "map"
        velocity.twist.linear.y = 1.0  # north at 1 m/s
        vel_pub = ros_node.create_publisher(TwistStamped, "/px4/cmd_vel", COMMAND_QOS)
        start = position("estimate")[1]
        deadline = time.monotonic() + 6
        errors = []  # moving at 1 m/s, a stamp 10 ms off is 1 cm off the truth at it
        while time.monotonic() < deadline and position("estimate")[1] < start + 2.0:
            vel_pub.publish(velocity)
            spin_until(ros_node, lambda: False, 0.1)
            estimate, truth, gap = truth_at_estimate()
            if gap is not None and gap < 0.2:
                errors.append(math.dist(estimate, truth))
        assert position("estimate")[1] >= start + 2.0
        # Mostly within millimetres. On a loaded host the driver's /clock (read by its executor) lags now and then
        # and frames wait to be read, so the offset learned from them strays for a while (load 15 on 2 cores: up to
        # 0.26 s, 0.26 m here, with a 5 s window; with 20 s, at load 11-17: medians 3-18 mm, at most 38 mm; stamped on
        # receipt, frames were up to 1 s late).
        assert len(errors) >= 5 and sorted(errors)[len(errors) // 2] < 0.05, errors
        assert latest["px4"]["mode"] == "velocity"

        assert call(Trigger, "/px4/land", Trigger.Request()).success
        assert spin_until(ros_node, lambda: latest["px4"]["armed"] == "false", 30)
        assert position("truth")[2] < 0.3
        assert driver.poll() is None and graph.alive()
    finally:
        driver.terminate()
        driver.wait(timeout=10)
        log.close()
