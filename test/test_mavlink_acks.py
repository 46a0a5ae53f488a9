"""A command whose answer waits on the ROS graph, as a real MAVSDK sees it (CI ci20: one of three MAVSDK clients
got ``arm(): TIMEOUT``). MAVSDK waits 0.5 s for a COMMAND_ACK and re-sends three times, so it gives up after
2 s; the MAVLink node answers ARM_DISARM once the flight controller's ``arm`` service has. Here that service
(served by this test, the only flight controller in the graph) takes 2.5 s: the node answers MAVSDK's first
retry IN_PROGRESS, MAVSDK waits on, and the node calls the service once, not once per retry. About 10 s (the node
alone, no simulation)."""

from __future__ import annotations

import threading
import time

import pytest

from conftest import requires_ros
from test_mavlink_clients import ports, run_client

pytestmark = [requires_ros, pytest.mark.ros]

#: How long the flight controller takes to answer ``arm``: longer than MAVSDK's four tries (4 x 0.5 s).
SLOW_ARM_S = 2.5


def test_mavsdk_arms_through_a_flight_controller_slow_to_answer(launch, ros_node):
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
    from nav_msgs.msg import Odometry
    from pymavlink import mavutil
    from rclpy.executors import SingleThreadedExecutor
    from std_srvs.srv import SetBool

    from aerial_sim.nodes.ros.qos import COMMAND_QOS, stream_qos
    from aerial_sim.nodes.ros.services import serve

    gcs, api = (port + 2 for port in ports())  # away from the other MAVLink tests' ports
    calls = []

    def on_arm(request, response):
        calls.append(request.data)
        time.sleep(SLOW_ARM_S)
        response.success, response.message = True, "armed (slowly)"
        return response

    serve(ros_node, SetBool, "/drone1/arm", on_arm)
    odom_pub = ros_node.create_publisher(Odometry, "/drone1/ground_truth/odom", stream_qos())
    diagnostics_pub = ros_node.create_publisher(DiagnosticArray, "/diagnostics", COMMAND_QOS)
    stop = threading.Event()

    def report_state():  # what a flight controller on the ground reports, while the service sleeps too
        odom = Odometry()
        odom.header.frame_id, odom.pose.pose.orientation.w = "map", 1.0
        status = DiagnosticStatus(level=DiagnosticStatus.OK, name="/drone1/flight_controller: flight control",
                                  hardware_id="drone1", values=[KeyValue(key="mode", value="disarmed")])
        while not stop.wait(0.05):
            odom_pub.publish(odom)
            diagnostics_pub.publish(DiagnosticArray(status=[status]))

    executor = SingleThreadedExecutor(context=ros_node.context)
    executor.add_node(ros_node)
    threads = [threading.Thread(target=report_state, daemon=True), threading.Thread(target=executor.spin, daemon=True)]
    for thread in threads:
        thread.start()
    try:
        graph = launch("mavlink.launch.yaml", f"gcs_port:={gcs}", f"api_port:={api}", "gcs_local_port:=0",
                       "api_local_port:=0")
        ground_station = mavutil.mavlink_connection(f"udpin:127.0.0.1:{gcs}", source_system=255)
        try:  # the node has the vehicle's state and the controller's mode: armable (STANDBY, not BOOT)
            assert ground_station.recv_match(type="HEARTBEAT", blocking=True, timeout=30,
                                             condition=f"HEARTBEAT.system_status=={mavutil.mavlink.MAV_STATE_STANDBY}")
        finally:
            ground_station.close()
        steps = run_client("mavsdk_arm.py", str(api), timeout_s=60)
    finally:
        stop.set()
        executor.shutdown(timeout_sec=5)
        for thread in threads:
            thread.join(timeout=5)
    assert steps["connected"]["system_id"] == 1
    assert SLOW_ARM_S < steps["arm"]["took_s"] < SLOW_ARM_S + 5.0
    assert calls == [True]  # MAVSDK's retries started no second call
    assert "ARM_DISARM refused" not in graph.output() and graph.alive()
