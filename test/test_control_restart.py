"""The flight controller across a simulation restart (``/physics/restart``, a warm batch run): when sim
time goes back it starts the new run as a freshly launched controller would, so the same odometry and
the same requests at the same stamps give the same motor commands bit for bit; without that it would
wait for stamps past the run before's end and never answer."""

from __future__ import annotations

import os
import time

import pytest

from conftest import requires_ros

pytestmark = [requires_ros, pytest.mark.ros]

RATE_HZ = 250.0
PERIODS = 60
ARM_AT, TAKEOFF_AT = 5, 10  # periods at which the client calls arm and takeoff


@pytest.fixture
def stack():
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from std_msgs.msg import Float64MultiArray

    from aerial_sim.nodes.flight_controller import FlightControllerNode
    from aerial_sim.nodes.ros.qos import COMMAND_QOS, stream_qos
    from aerial_sim.nodes.ros.transport import use_transport_profile

    use_transport_profile()
    context = rclpy.context.Context()
    rclpy.init(context=context)
    namespace = f"restart_{os.getpid()}"
    controller = FlightControllerNode(context=context, namespace=namespace,
                                      parameter_overrides=[Parameter("lockstep", value=True)])
    probe = Node("restart_probe", context=context, namespace=namespace)
    commands: list = []
    probe.create_subscription(Float64MultiArray, "motor_commands", lambda m: commands.append(tuple(m.data)), COMMAND_QOS)
    odometry = probe.create_publisher(Odometry, "ground_truth/odom", stream_qos(True))
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(controller)
    executor.add_node(probe)
    try:
        yield controller, probe, odometry, commands, executor
    finally:
        for node in (controller, probe):
            executor.remove_node(node)
            node.destroy_node()
        rclpy.shutdown(context=context)


def spin_until(executor, condition, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not condition():
        executor.spin_once(timeout_sec=0.01)
    return condition()


def fly(stack) -> list[tuple]:
    """A vehicle resting at the origin for PERIODS periods from t = 0; arm and takeoff on the way.
    Returns the motor command answering each period."""
    from nav_msgs.msg import Odometry
    from std_srvs.srv import SetBool, Trigger

    from aerial_sim.nodes.ros.stamps import to_stamp

    controller, probe, publisher, commands, executor = stack
    commands.clear()
    clients = {"arm": probe.create_client(SetBool, "arm"), "takeoff": probe.create_client(Trigger, "takeoff")}
    assert spin_until(executor, lambda: all(c.service_is_ready() for c in clients.values()))
    assert spin_until(executor, lambda: publisher.get_subscription_count() > 0)
    for k in range(PERIODS):
        odom = Odometry()
        odom.header.stamp, odom.header.frame_id = to_stamp(k / RATE_HZ), "map"
        odom.pose.pose.position.z = 0.05 + 0.001 * k  # lifting off slowly
        odom.pose.pose.orientation.w = 1.0
        odom.twist.twist.linear.z = 0.25
        publisher.publish(odom)
        assert spin_until(executor, lambda: len(commands) > k), f"no command for period {k} (t = {k / RATE_HZ} s)"
        for name, at, request in (("arm", ARM_AT, SetBool.Request(data=True)), ("takeoff", TAKEOFF_AT, Trigger.Request())):
            if k == at:
                future = clients[name].call_async(request)
                assert spin_until(executor, future.done) and future.result().success, name
    for client in clients.values():
        probe.destroy_client(client)
    return list(commands)


def test_a_restarted_run_gets_the_commands_of_a_fresh_controller(stack):
    first = fly(stack)
    assert first[0] == (0.0,) * 4 and max(first[-1]) > 0.3  # disarmed at first, then taking off
    second = fly(stack)  # sim time back to 0 (a restart), the same inputs
    assert second == first
