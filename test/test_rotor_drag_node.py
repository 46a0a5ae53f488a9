"""The rotor drag node across processes: rotor thrusts + odometry in, the eq. (13) wrench out."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO, requires_ros, spin_until

pytestmark = [requires_ros, pytest.mark.ros]


def test_node_publishes_drag_opposing_the_flight_in_the_body_frame(ros_node, tmp_path):
    from geometry_msgs.msg import WrenchStamped
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import JointState

    from aerial_sim.physics.rotor_drag import RotorDragParams
    from aerial_sim.nodes.ros.qos import LOCKSTEP_QOS

    log_path = tmp_path / "rotor_drag.log"
    log = open(log_path, "w")
    node = subprocess.Popen(
        [sys.executable, "-m", "aerial_sim.nodes.rotor_drag", "--ros-args", "-r", "__ns:=/drone1",
         "-p", "lockstep:=true", "-p", "rate_hz:=100.0"],
        stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
    )
    try:
        rotors_pub = ros_node.create_publisher(JointState, "/drone1/rotors", LOCKSTEP_QOS)
        odom_pub = ros_node.create_publisher(Odometry, "/drone1/ground_truth/odom", LOCKSTEP_QOS)
        received = []
        ros_node.create_subscription(WrenchStamped, "/drone1/rotor_drag/wrench", received.append, LOCKSTEP_QOS)
        connected = lambda: (rotors_pub.get_subscription_count() and odom_pub.get_subscription_count()
                             and ros_node.count_publishers("/drone1/rotor_drag/wrench"))
        assert spin_until(ros_node, connected, timeout_s=20), log_path.read_text()

        def thrust(step: int) -> float:
            return 2.5 + 0.1 * step

        for step in range(10):  # 250 Hz of sim time: at 100 Hz the node answers every 3rd odometry
            odom = Odometry()
            odom.header.stamp.sec, odom.header.stamp.nanosec = 1, step * 4_000_000
            odom.pose.pose.orientation.w = 1.0
            odom.twist.twist.linear.x, odom.twist.twist.linear.y, odom.twist.twist.linear.z = 6.0, -2.0, 1.0
            rotors = JointState(name=[f"rotor_{i}" for i in range(4)], effort=[thrust(step)] * 4)
            rotors.header.stamp = odom.header.stamp
            odom_pub.publish(odom)  # as the physics node does: a period's odometry, then its thrusts
            rotors_pub.publish(rotors)
        assert spin_until(ros_node, lambda: len(received) >= 4, timeout_s=10), log_path.read_text()
        spin_until(ros_node, lambda: False, timeout_s=0.5)

        stamps_ms = [(m.header.stamp.nanosec // 1_000_000) for m in received]
        assert stamps_ms == [0, 12, 24, 36]  # every 3rd of the 4 ms odometry: at most 100 Hz
        p = RotorDragParams()
        assert received[0].header.frame_id == "drone1/base_link"
        for wrench in received:  # in lockstep each wrench uses its own period's thrusts, never the previous ones
            gain = (p.k * 4 * thrust(wrench.header.stamp.nanosec // 4_000_000) + p.b) * p.c_d1
            force = wrench.wrench.force
            assert (force.x, force.y, force.z) == pytest.approx((-gain * 6.0, gain * 2.0, 0.0), rel=1e-9)

        # /physics/wind sets the mean wind the drag sees: 2 m/s from the west leaves 4 m/s of air speed along x
        from geometry_msgs.msg import Vector3Stamped

        from aerial_sim.nodes.ros.qos import COMMAND_QOS

        wind_pub = ros_node.create_publisher(Vector3Stamped, "/physics/wind", COMMAND_QOS)
        assert spin_until(ros_node, lambda: wind_pub.get_subscription_count() > 0, timeout_s=10), log_path.read_text()
        wind = Vector3Stamped()
        wind.header.frame_id = "map"
        wind.vector.x = 2.0
        wind_pub.publish(wind)
        spin_until(ros_node, lambda: False, timeout_s=0.5)
        received.clear()
        odom = Odometry()
        odom.header.stamp.sec, odom.header.stamp.nanosec = 2, 0
        odom.pose.pose.orientation.w = 1.0
        odom.twist.twist.linear.x, odom.twist.twist.linear.y = 6.0, -2.0
        rotors = JointState(name=[f"rotor_{i}" for i in range(4)], effort=[2.5] * 4)
        rotors.header.stamp = odom.header.stamp
        odom_pub.publish(odom)
        rotors_pub.publish(rotors)
        assert spin_until(ros_node, lambda: len(received) >= 1, timeout_s=10), log_path.read_text()
        gain = (p.k * 4 * 2.5 + p.b) * p.c_d1
        force = received[0].wrench.force
        assert (force.x, force.y) == pytest.approx((-gain * 4.0, gain * 2.0), rel=1e-9)
    finally:
        node.terminate()
        node.wait(timeout=10)
        log.close()
