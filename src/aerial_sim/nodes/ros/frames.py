"""TF frames: frame names in a vehicle's namespace (REP-105), broadcasters, fixed sensor mounts."""

from __future__ import annotations

from rclpy.node import Node


def frame_in_namespace(node: Node, frame: str) -> str:
    """Prefix a relative frame name with the node's namespace: ``imu_link`` -> ``drone1/imu_link``.

    Frames that already contain a ``/`` or are world frames (``map``, ``odom``,
    ``earth``) are returned unchanged.
    """
    if "/" in frame or frame in ("map", "odom", "earth", "world"):
        return frame.lstrip("/")
    namespace = node.get_namespace().strip("/")
    return f"{namespace}/{frame}" if namespace else frame


_tf_missing_reported = False


def make_tf_broadcaster(node: Node, static: bool = False):
    """A tf2_ros broadcaster when tf2_ros is importable, else None (logged once).

    In a pip-only install tf2_ros does not exist; the simulation runs on without
    TF and says so once, instead of failing.
    """
    global _tf_missing_reported
    try:
        import tf2_ros
    except ImportError:
        if not _tf_missing_reported:  # once per process (one that serves a fleet has many nodes)
            node.get_logger().info("tf2_ros is not installed (pip-only install): TF is skipped")
            _tf_missing_reported = True
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
