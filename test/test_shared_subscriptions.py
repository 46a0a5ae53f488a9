"""The nodes of one process that read a stream the same way share one subscription (issue 34: a vehicle's
odometry read by five nodes of a node container cost five readers' deliveries every 4 ms period)."""

import time
from types import SimpleNamespace

import pytest

from aerial_sim.nodes._physics.publishing import odometry_bytes
from aerial_sim.nodes.ros.lockstep import ConnectedInputsPublisher
from aerial_sim.nodes.ros.qos import stream_qos
from aerial_sim.nodes.ros.shared_subscriptions import SHARED_READERS
from aerial_sim.nodes.ros.subscriptions import subscribe_odometry

TOPIC = "/shared_test/ground_truth/odom"


class StampLog:
    """An InputStampClock's interface: the stamps it was advanced to."""

    def __init__(self):
        self.stamps = []

    def advance(self, stamp_ns):
        self.stamps.append(stamp_ns)


def truth(z):
    return SimpleNamespace(position=(0.0, 0.0, z), orientation=(1.0, 0.0, 0.0, 0.0), velocity_world=(0.0, 0.0, 0.5),
                           angular_velocity_body=(0.0, 0.0, 0.1))


@pytest.fixture()
def nodes(ros_node):
    from rclpy.node import Node

    made = [Node(f"shared_{name}", context=ros_node.context) for name in ("controller", "barometer", "gps")]
    yield made
    for node in made:
        node.destroy_node()


def test_nodes_of_a_process_share_one_reader_and_each_gets_every_message_with_its_clock_first(ros_node, nodes):
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor

    received = {node.get_name(): [] for node in nodes}
    clocks = {node.get_name(): StampLog() for node in nodes}
    for node in nodes:
        name = node.get_name()
        subscribe_odometry(node, TOPIC, lambda fields, name=name: received[name].append(fields), stream_qos(True),
                           clock=clocks[name], shared=True)
    # One middleware reader for the three: the graph shows one subscriber, owned by the first node.
    assert [len(list(node.subscriptions)) for node in nodes] == [1, 0, 0]
    publisher = ros_node.create_publisher(Odometry, TOPIC, stream_qos(True))
    executor = SingleThreadedExecutor(context=ros_node.context)
    for node in nodes:
        executor.add_node(node)
    deadline = time.monotonic() + 10.0
    while publisher.get_subscription_count() < 1 and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    assert publisher.get_subscription_count() == 1
    stamps = [1_000_000_000 + 4_000_000 * k for k in range(5)]
    for k, stamp in enumerate(stamps):
        publisher.publish(odometry_bytes(truth(1.0 + k), stamp, "shared_test/base_link"))
    while len(received["shared_gps"]) < len(stamps) and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    executor.shutdown()
    # Every node got every message, in order, as the same decoded fields (decoded once), its clock at the stamp.
    assert [[f.position[2] for f in fields] for fields in received.values()] == [[1.0, 2.0, 3.0, 4.0, 5.0]] * 3
    assert all(a is b is c for a, b, c in zip(*received.values()))
    assert all(clock.stamps == stamps for clock in clocks.values())
    # A lockstep output made from this stream counts it as connected for every node, not just the owner.
    for node in nodes:
        output = ConnectedInputsPublisher(node, Odometry, "out", stream_qos(True), (TOPIC,), None)
        assert output.unconnected_inputs() == []


def test_a_node_whose_callback_fails_does_not_keep_the_message_from_the_others(ros_node, nodes):
    got = []

    def fails(fields):
        raise RuntimeError("a value no check foresaw")

    subscribe_odometry(nodes[0], TOPIC, got.append, stream_qos(True), shared=True)
    subscribe_odometry(nodes[1], TOPIC, fails, stream_qos(True), shared=True)
    subscribe_odometry(nodes[2], TOPIC, got.append, stream_qos(True), shared=True)
    reader = next(r for r in SHARED_READERS.readers.values() if r.owner is nodes[0])
    with pytest.raises(ValueError, match="shared_barometer: RuntimeError: a value no check foresaw"):
        reader.on_bytes(odometry_bytes(truth(2.0), 5_000_000, "shared_test/base_link"))
    assert [f.position[2] for f in got] == [2.0, 2.0]
    with pytest.raises(ValueError):  # bytes that are no odometry: refused whole, as a subscription of its own would
        reader.on_bytes(b"\x00\x01\x00\x00\x07")


def test_a_reader_whose_owner_is_gone_is_not_joined(ros_node, nodes):
    """Tests (and any process) that destroy their nodes and build new ones start a new reader."""
    from rclpy.node import Node

    subscribe_odometry(nodes[0], TOPIC, lambda fields: None, stream_qos(True), shared=True)
    nodes[0].destroy_node()
    later = Node("shared_later", context=ros_node.context)
    try:
        subscribe_odometry(later, TOPIC, lambda fields: None, stream_qos(True), shared=True)
        assert len(list(later.subscriptions)) == 1
    finally:
        later.destroy_node()
