"""Lockstep announcements cannot freeze the clock (issue 32): forged entries on /lockstep/participants
against a lockstep physics node and flight controller, in their own processes."""

from __future__ import annotations

import time

import pytest

from conftest import requires_ros, spin_until

pytestmark = [requires_ros, pytest.mark.ros]

TIMEOUT_S = 3.0  # lockstep_timeout_s given to the physics node


def test_forged_participant_entries_leave_the_clock_running_with_an_error(launch, ros_node, tmp_path):
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from rclpy.node import Node
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import String

    from aerial_sim.nodes.ros.lockstep import LOCKSTEP_PARTICIPANTS_TOPIC
    from aerial_sim.nodes.ros.qos import COMMAND_QOS, LATCHED_QOS

    params = tmp_path / "physics.yaml"
    params.write_text(f"/**/physics:\n  ros__parameters:\n    lockstep_timeout_s: {TIMEOUT_S}\n")
    physics = launch("physics.launch.yaml", "lockstep:=true", "--params-file", str(params),
                     "lockstep_participants:=/drone1/ground_truth/odom@50")
    control = launch("control.launch.yaml", "lockstep:=true")
    clock = []
    errors = []
    ros_node.create_subscription(Clock, "/clock", lambda m: clock.append(m.clock.sec + m.clock.nanosec * 1e-9), 10)
    ros_node.create_subscription(
        DiagnosticArray, "/diagnostics",
        lambda m: errors.extend(s.message for s in m.status if s.level == DiagnosticStatus.ERROR), COMMAND_QOS)
    assert spin_until(ros_node, lambda: clock and clock[-1] > 0.5, 40.0), physics.output() + control.output()

    forger = ros_node.create_publisher(String, LOCKSTEP_PARTICIPANTS_TOPIC, LATCHED_QOS)
    leaver = Node("leaving_announcer", context=ros_node.context)
    leaving = leaver.create_publisher(String, LOCKSTEP_PARTICIPANTS_TOPIC, LATCHED_QOS)
    for entry in ("/ghost/never_published@250",         # nobody ever publishes it: silent, dropped
                  "/clock@250",                          # published, but not by the announcer: refused
                  "/drone1/ground_truth/odom@0.0001",    # the physics node's configured entry: not replaced
                  "/" + "x" * 1_000_000 + "@250"):       # a 1 MB name: refused in a short line
        forger.publish(String(data=entry))
    leaving.publish(String(data="/ghost/left_behind@250"))
    spin_until(ros_node, lambda: False, 1.0)
    leaver.destroy_node()  # its entry expires with it
    started = clock[-1]
    # The clock stops at most TIMEOUT_S (wall) for the silent entry, then runs on.
    assert spin_until(ros_node, lambda: clock[-1] > started + 1.0, TIMEOUT_S + 30.0), physics.output()
    assert spin_until(ros_node, lambda: any("/ghost/never_published" in e for e in errors), 10.0), physics.output()
    moving_from = clock[-1]
    assert spin_until(ros_node, lambda: clock[-1] > moving_from + 0.5, 20.0), physics.output()
    log = physics.output()
    dropped = [line for line in log.splitlines() if "lockstep: participant dropped" in line]
    assert len(dropped) == 1 and "[ERROR]" in dropped[0] and "/ghost/never_published" in dropped[0], log
    assert "lockstep: entry /clock refused:" in log and "does not publish it" in log, log
    assert "lockstep participant /drone1/ground_truth/odom is the lockstep_participants parameter's entry" in log
    assert "at most 256 characters" in log and max(len(line) for line in log.splitlines()) < 2000
    assert "no longer waiting for /ghost/left_behind" in log and "has left the graph" in log, log
    assert physics.alive() and control.alive()

