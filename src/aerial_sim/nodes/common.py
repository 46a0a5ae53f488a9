"""Shared plumbing for the thin ROS 2 adapters in ``aerial_sim.nodes``.

Only nodes import this module (it imports rclpy). It gives every node the same
QoS choices, the same way to turn a params dataclass into declared ROS
parameters, the same stamp conversions and the same ``main()`` behaviour: a bad
parameter is one clear log line and exit code 2, Ctrl-C is a clean exit.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from typing import Any, Callable, TypeVar

import rclpy
from builtin_interfaces.msg import Time
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)

from aerial_sim.config import ParamsError, flatten_params, params_from_mapping, unflatten

T = TypeVar("T")

#: Commands and services: every message matters (REP-2003 style reliable QoS).
COMMAND_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
#: Latched data (scene markers, static descriptions): late joiners get the last message.
LATCHED_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
#: Streams in lockstep mode: reliable with room for a burst, so no sample is lost
#: and runs repeat bit for bit.
LOCKSTEP_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=200, reliability=ReliabilityPolicy.RELIABLE)


def stream_qos(lockstep: bool = False) -> QoSProfile:
    """QoS for sensor and ground-truth streams: sensor-data (best effort) unless lockstep."""
    return LOCKSTEP_QOS if lockstep else qos_profile_sensor_data


def to_stamp(seconds: float) -> Time:
    """Simulation time in seconds -> ``builtin_interfaces/Time``."""
    nanoseconds = int(round(seconds * 1e9))
    return Time(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def from_stamp(stamp: Time) -> float:
    """``builtin_interfaces/Time`` -> seconds."""
    return stamp.sec + stamp.nanosec * 1e-9


def frame_in_namespace(node: Node, frame: str) -> str:
    """Prefix a relative frame name with the node's namespace: ``imu_link`` -> ``drone1/imu_link``.

    Frames that already contain a ``/`` or are world frames (``map``, ``odom``,
    ``earth``) are returned unchanged.
    """
    if "/" in frame or frame in ("map", "odom", "earth", "world"):
        return frame.lstrip("/")
    namespace = node.get_namespace().strip("/")
    return f"{namespace}/{frame}" if namespace else frame


def declare_params(node: Node, cls: type[T], prefix: str = "", defaults: T | None = None) -> T:
    """Declare every field of params dataclass ``cls`` as a ROS parameter and build ``cls``.

    Defaults come from the dataclass, or from ``defaults`` (an instance of
    ``cls``, e.g. a datasheet preset loaded from YAML) when given; values given
    with ``--params-file`` or ``-p`` override them. Nested dataclasses become
    dotted names (``home.latitude``). Validation is the dataclass's own, so a
    bad value is a :class:`ParamsError` naming the parameter.
    """
    defaults = flatten_params(defaults if defaults is not None else cls())
    values: dict[str, Any] = {}
    for name, default in defaults.items():
        full_name = f"{prefix}{name}"
        if dataclasses.is_dataclass(default) or _is_tuple_of_dataclasses(default):
            continue
        descriptor = ParameterDescriptor(dynamic_typing=True)
        ros_default = list(default) if isinstance(default, tuple) else default
        node.declare_parameter(full_name, ros_default, descriptor)
        value = node.get_parameter(full_name).value
        values[name] = list(value) if isinstance(value, (tuple, list)) or _is_array(value) else value
    return params_from_mapping(cls, unflatten(values), where=node.get_name())


def run_node(node_factory: Callable[[], Node], args: list[str] | None = None) -> int:
    """Standard ``main()`` for every node: init, build, spin, and shut down cleanly.

    A :class:`ParamsError` while building the node is logged as one line and
    gives exit code 2 (the launcher shows it); Ctrl-C gives exit code 0. A node
    may set ``exit_code`` (and shut the context down) to end with a failure.
    """
    use_transport_profile()
    rclpy.init(args=args if args is not None else sys.argv)
    node = None
    try:
        node = node_factory()
        rclpy.spin(node)
    except ParamsError as error:
        name = node.get_name() if node else getattr(node_factory, "__name__", "node")
        print(f"[FATAL] [{name}]: invalid parameter: {error}", file=sys.stderr, flush=True)
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:  # noqa: BLE001
        if node is not None and not node.context.ok():
            pass  # a callback interrupted by shutdown (rclpy raises from take_message): not a failure
        else:
            raise
    finally:
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.try_shutdown()
    return int(getattr(node, "exit_code", 0))


def use_transport_profile() -> None:
    """Point Fast DDS at ``config/fastdds.xml`` unless the user chose a profile or another RMW.

    The default Fast DDS transports drop most best-effort camera images bigger
    than 512 kB between processes; the profile enlarges the shared-memory
    segment and socket buffers (measurements in the file). Call before rclpy.init.
    """
    if os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp") != "rmw_fastrtps_cpp":
        return
    if os.environ.get("FASTDDS_DEFAULT_PROFILES_FILE") or os.environ.get("FASTRTPS_DEFAULT_PROFILES_FILE"):
        return
    from aerial_sim.paths import config_path

    profile = config_path("fastdds.xml")
    if profile.is_file():
        os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = str(profile)


def make_tf_broadcaster(node: Node, static: bool = False):
    """A tf2_ros broadcaster when tf2_ros is importable, else None (logged once).

    In a pip-only install tf2_ros does not exist; the simulation runs on without
    TF and says so once, instead of failing.
    """
    try:
        import tf2_ros
    except ImportError:
        node.get_logger().info("tf2_ros is not installed (pip-only install): TF is skipped")
        return None
    return tf2_ros.StaticTransformBroadcaster(node) if static else tf2_ros.TransformBroadcaster(node)


def publish_static_mount(node: Node, child_frame: str, position_m, orientation_wxyz) -> None:
    """Broadcast the fixed pose of a sensor frame in ``<ns>/base_link`` on ``/tf_static``.

    ``orientation_wxyz`` rotates child-frame vectors into base_link. Without
    tf2_ros (pip-only install) this only logs, once, that TF is skipped.
    """
    broadcaster = make_tf_broadcaster(node, static=True)
    if broadcaster is None:
        return
    from geometry_msgs.msg import TransformStamped

    transform = TransformStamped()
    transform.header.stamp = node.get_clock().now().to_msg()
    transform.header.frame_id = frame_in_namespace(node, "base_link")
    transform.child_frame_id = child_frame
    t, r = transform.transform.translation, transform.transform.rotation
    t.x, t.y, t.z = (float(v) for v in position_m)
    r.w, r.x, r.y, r.z = (float(v) for v in orientation_wxyz)
    broadcaster.sendTransform(transform)
    node._aerial_sim_static_broadcaster = broadcaster  # keep it alive for late subscribers


def is_finite_sequence(values) -> bool:
    """True when every element of ``values`` is a finite float."""
    return all(math.isfinite(v) for v in values)


def _is_array(value: Any) -> bool:
    return hasattr(value, "tolist") and not isinstance(value, (str, bytes))


def _is_tuple_of_dataclasses(value: Any) -> bool:
    return isinstance(value, tuple) and bool(value) and dataclasses.is_dataclass(value[0])

