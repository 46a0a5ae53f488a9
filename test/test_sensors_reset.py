"""A sensor node's ``~/reset`` service (std_srvs/Trigger), what a warm batch run calls between runs:
after it, the same ground truth from t = 0 gives the same samples as a fresh node; a new ``seed`` set
through the standard parameter service first gives other noise; a bad seed or a new rate is refused
with ``success`` false and the node keeps its model."""

from __future__ import annotations

import math
import time

import pytest

from conftest import requires_ros

pytestmark = [requires_ros, pytest.mark.ros]

TRUTH_RATE_HZ = 250.0
PERIODS = 100  # 0.4 s: 80 IMU samples; GPS fixes (50 Hz) from its 0.2 s latency on


class Bench:
    """An IMU and a GPS node in this process, fed ground truth by a probe node in one executor."""

    def __init__(self, context, namespace: str, seed: int):
        import rclpy
        from nav_msgs.msg import Odometry
        from rclpy.node import Node
        from rclpy.parameter import Parameter
        from sensor_msgs.msg import Imu, NavSatFix

        from aerial_sim.nodes.gps import GpsNode
        from aerial_sim.nodes.imu import ImuNode
        from aerial_sim.nodes.ros.qos import stream_qos

        overrides = [Parameter("seed", value=seed), Parameter("lockstep", value=True)]
        self.imu = ImuNode(context=context, namespace=namespace, parameter_overrides=overrides)
        self.gps = GpsNode(context=context, namespace=namespace, parameter_overrides=overrides)
        self.probe = Node("reset_probe", context=context, namespace=namespace)
        qos = stream_qos(True)
        self.truth_imu = self.probe.create_publisher(Imu, "ground_truth/imu", qos)
        self.truth_odom = self.probe.create_publisher(Odometry, "ground_truth/odom", qos)
        self.received = {"imu/data": [], "gps/fix": []}
        for topic, msg_type in (("imu/data", Imu), ("gps/fix", NavSatFix)):
            self.probe.create_subscription(msg_type, topic, self.received[topic].append, qos)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=context)
        for node in (self.imu, self.gps, self.probe):
            self.executor.add_node(node)
        self._types = (Imu, Odometry)
        # Lockstep outputs enter the graph once their inputs are connected: wait for both.
        subscriptions = list(self.probe.subscriptions)
        assert self.spin_until(lambda: all(s.get_publisher_count() > 0 for s in subscriptions)), "outputs never appeared"

    def spin_until(self, condition, timeout_s: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not condition():
            self.executor.spin_once(timeout_sec=0.01)
        return condition()

    def fly(self) -> dict[str, list[tuple]]:
        """The same 0.4 s of ground truth from t = 0; the samples it gave (stamp and values)."""
        from aerial_sim.nodes.ros.stamps import to_stamp

        Imu, Odometry = self._types
        for topic in self.received:
            self.received[topic].clear()
        for k in range(PERIODS + 1):
            t = k / TRUTH_RATE_HZ
            imu, odom = Imu(), Odometry()
            imu.header.stamp = odom.header.stamp = to_stamp(t)
            odom.header.frame_id = "map"
            imu.orientation.w = odom.pose.pose.orientation.w = 1.0
            imu.linear_acceleration.z = 9.80665
            imu.angular_velocity.z = 0.1 * math.sin(t)
            odom.pose.pose.position.x, odom.pose.pose.position.z = t, 5.0
            odom.twist.twist.linear.x = 1.0
            self.truth_imu.publish(imu)
            self.truth_odom.publish(odom)
            self.spin_until(lambda: False, 0.004)
        expected = {"imu/data": 80, "gps/fix": 10}
        assert self.spin_until(lambda: all(len(self.received[t]) >= n for t, n in expected.items())), \
            {t: len(v) for t, v in self.received.items()}
        self.spin_until(lambda: False, 0.1)  # nothing more may come
        return {
            "imu/data": [(m.header.stamp.sec, m.header.stamp.nanosec,
                          (m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z),
                          (m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z)) for m in self.received["imu/data"]],
            "gps/fix": [(m.header.stamp.sec, m.header.stamp.nanosec, m.latitude, m.longitude, m.altitude)
                        for m in self.received["gps/fix"]],
        }

    def call(self, node_name: str, service_type, name: str, request):
        client = self.probe.create_client(service_type, f"{node_name}/{name}")
        assert self.spin_until(lambda: client.service_is_ready(), 10.0), f"{node_name}/{name} not served"
        future = client.call_async(request)
        assert self.spin_until(future.done, 10.0), f"{node_name}/{name} not answered"
        self.probe.destroy_client(client)
        return future.result()

    def reset(self, node_name: str):
        from std_srvs.srv import Trigger

        return self.call(node_name, Trigger, "reset", Trigger.Request())

    def set_parameter(self, node_name: str, name: str, value):
        """Through rcl_interfaces/SetParameters, as ``ros2 param set`` does."""
        from rcl_interfaces.srv import SetParameters
        from rclpy.parameter import Parameter

        request = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
        result = self.call(node_name, SetParameters, "set_parameters", request)
        assert all(r.successful for r in result.results), result

    def close(self):
        for node in (self.imu, self.gps, self.probe):
            self.executor.remove_node(node)
            node.destroy_node()


@pytest.fixture
def bench():
    import os

    import rclpy

    from aerial_sim.nodes.ros.transport import use_transport_profile

    use_transport_profile()
    context = rclpy.context.Context()
    rclpy.init(context=context)
    bench = Bench(context, f"reset_{os.getpid()}", seed=3)
    try:
        yield bench
    finally:
        bench.close()
        rclpy.shutdown(context=context)


def test_reset_repeats_a_run_and_a_new_seed_gives_new_noise(bench):
    namespace = bench.probe.get_namespace()
    imu, gps = f"{namespace}/imu", f"{namespace}/gps"
    first = bench.fly()
    for node in (imu, gps):
        answer = bench.reset(node)
        assert answer.success and answer.message == "reset, seed 3", answer
    assert bench.fly() == first  # the same samples, bit for bit, as the fresh nodes gave

    for node in (imu, gps):
        bench.set_parameter(node, "seed", 4)
        assert bench.reset(node).success
    reseeded = bench.fly()
    for topic in first:  # same stamps, other noise
        assert [s[:2] for s in reseeded[topic]] == [s[:2] for s in first[topic]]
        assert all(a[2:] != b[2:] for a, b in zip(reseeded[topic], first[topic])), topic

    bench.set_parameter(imu, "seed", -1)
    refused = bench.reset(imu)
    assert not refused.success and "seed" in refused.message
    bench.set_parameter(imu, "seed", 4)
    bench.set_parameter(gps, "rate_hz", 10.0)
    refused = bench.reset(gps)
    assert not refused.success and "rate_hz" in refused.message and "relaunch" in refused.message
    bench.set_parameter(gps, "rate_hz", 50.0)
    for node in (imu, gps):
        assert bench.reset(node).success
    assert bench.fly() == reseeded  # the refused resets left nothing behind
