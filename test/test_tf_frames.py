"""Every frame a node stamps resolves in the TF tree.

Physics, the IMU, barometer, magnetometer, GPS, camera, lidar, rangefinder and rotor-drag nodes run
together in this process (their ground truth flows between them over DDS) with the tf2_ros
broadcasters replaced by recorders (a pip-only install has no tf2_ros; under ROS the same calls go
to tf2_ros). Every ``header.frame_id`` and ``child_frame_id`` they publish must chain to ``map``
through what they broadcast: ``map`` -> ``<ns>/base_link`` on /tf, the sensor mounts on /tf_static.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time

import pytest

from conftest import requires_ros

pytestmark = [requires_ros, pytest.mark.ros]

NAMESPACE = "drone1"
#: node module -> node class: every node that stamps sensor or body frames.
NODES = {
    "physics": "PhysicsNode",
    "imu": "ImuNode",
    "barometer": "BarometerNode",
    "magnetometer": "MagnetometerNode",
    "gps": "GpsNode",
    "camera": "CameraNode",
    "lidar": "LidarNode",
    "distance": "DistanceNode",
    "rotor_drag": "RotorDragNode",
}
#: one stamped topic per node: the graph has run long enough when each has published.
EXPECTED_TOPICS = {
    f"/{NAMESPACE}/{topic}"
    for topic in ("ground_truth/odom", "imu/data", "air_pressure", "magnetic_field", "gps/fix",
                  "camera/depth/camera_info", "lidar/points", "distance/range", "rotor_drag/wrench")
}  # fmt: skip


class RecordingBroadcaster:
    """Stands in for tf2_ros.(Static)TransformBroadcaster: records (parent, child, static)."""

    def __init__(self, sink: set, lock: threading.Lock, static: bool):
        self.sink, self.lock, self.static = sink, lock, static

    def sendTransform(self, transforms) -> None:  # noqa: N802 (tf2_ros's name)
        for transform in transforms if isinstance(transforms, (list, tuple)) else [transforms]:
            with self.lock:
                self.sink.add((transform.header.frame_id, transform.child_frame_id, self.static))


def unresolved_frames(stamped: dict[str, set[str]], transforms: set[tuple[str, str, bool]], root: str = "map") -> list[str]:
    """One line per stamped frame with no chain of transforms up to ``root``."""
    parent_of: dict[str, str] = {}
    for parent, child, _ in transforms:
        parent_of.setdefault(child, parent)
    problems = []
    for frame, topics in sorted(stamped.items()):
        seen, current = set(), frame
        while current != root and current in parent_of and current not in seen:
            seen.add(current)
            current = parent_of[current]
        if current != root:
            problems.append(f"'{frame}' (stamped on {', '.join(sorted(topics))}) has no transform chain to '{root}'")
    return problems


def frames_of_cdr(data: bytes, message_type) -> list[str]:
    """header.frame_id (and an Odometry's child_frame_id) of a message published as CDR bytes."""
    from nav_msgs.msg import Odometry

    from aerial_sim.cdr.decode import ENCAPSULATION_BYTES, byte_order, decode_odometry, read_string

    if message_type is Odometry:
        odometry = decode_odometry(data)
        return [odometry.frame_id, odometry.child_frame_id]
    if "header" not in message_type.get_fields_and_field_types():
        return []
    return [read_string(data, ENCAPSULATION_BYTES + 8, byte_order(data))[0]]


def test_resolution_check_names_a_frame_without_transform():
    transforms = {("map", "drone1/base_link", False), ("drone1/base_link", "drone1/imu_link", True)}
    stamped = {"drone1/imu_link": {"/drone1/imu/data"}, "drone1/baro_link": {"/drone1/air_pressure"}, "map": {"/x"}}
    assert unresolved_frames(stamped, transforms) == [
        "'drone1/baro_link' (stamped on /drone1/air_pressure) has no transform chain to 'map'"
    ]


def test_every_stamped_frame_resolves_to_map(monkeypatch):
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.publisher import Publisher

    from aerial_sim.nodes.ros import frames, raw_publish, transport

    lock = threading.Lock()
    transforms: set[tuple[str, str, bool]] = set()
    stamped: dict[str, set[str]] = {}

    def recorder(node, static=False):
        return RecordingBroadcaster(transforms, lock, static)

    modules = {name: importlib.import_module(f"aerial_sim.nodes.{name}") for name in NODES}
    for module in [frames, importlib.import_module("aerial_sim.nodes._sensor"), *modules.values()]:
        if hasattr(module, "make_tf_broadcaster"):
            monkeypatch.setattr(module, "make_tf_broadcaster", recorder)

    original_publish, original_sender = Publisher.publish, raw_publish.raw_sender

    def note(frames, topic: str) -> None:
        with lock:
            for frame in frames:
                if isinstance(frame, str) and frame:
                    stamped.setdefault(frame, set()).add(topic)

    def recording_publish(publisher, message):
        if isinstance(message, bytes):  # the hot streams go out as CDR the node encoded (aerial_sim.cdr)
            note(frames_of_cdr(message, publisher.msg_type), publisher.topic_name)
        else:
            note([getattr(getattr(message, "header", None), "frame_id", ""), getattr(message, "child_frame_id", "")],
                 publisher.topic_name)
        return original_publish(publisher, message)

    def recording_sender(publisher, **options):
        """raw_sender's CDR bytes (the per-period streams skip Publisher.publish), noted the same way."""
        send = original_sender(publisher, **options)

        def recorded(data: bytes) -> None:
            note(frames_of_cdr(data, publisher.msg_type), publisher.topic_name)
            send(data)
        return recorded

    monkeypatch.setattr(Publisher, "publish", recording_publish)
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("aerial_sim.") and getattr(module, "raw_sender", None) is original_sender:
            monkeypatch.setattr(module, "raw_sender", recording_sender)

    transport.use_transport_profile()
    rclpy.init(args=["--ros-args", "-r", f"__ns:=/{NAMESPACE}", "-p", "scene:=empty"])
    nodes, executor = [], None
    try:
        nodes = [getattr(modules[name], cls)() for name, cls in NODES.items()]
        executor = MultiThreadedExecutor(num_threads=4)
        for node in nodes:
            executor.add_node(node)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        spinner.start()

        def published_topics():
            with lock:
                return set().union(*stamped.values()) if stamped else set()

        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline and not EXPECTED_TOPICS <= published_topics():
            time.sleep(0.1)
        assert EXPECTED_TOPICS <= published_topics(), f"never published: {sorted(EXPECTED_TOPICS - published_topics())}"
    finally:
        if executor is not None:
            executor.shutdown(timeout_sec=2.0)
        for node in nodes:
            node.destroy_node()
        rclpy.shutdown()

    with lock:
        stamped_now, transforms_now = dict(stamped), set(transforms)
    problems = unresolved_frames(stamped_now, transforms_now)
    assert problems == [], "\n".join(problems)
    assert (f"{NAMESPACE}/base_link", f"{NAMESPACE}/baro_link", True) in transforms_now
    assert ("map", f"{NAMESPACE}/base_link", False) in transforms_now  # the only dynamic transform
    assert all(static for parent, child, static in transforms_now if parent != "map")
