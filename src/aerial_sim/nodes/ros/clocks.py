"""Sim time without a ``/clock`` subscription per node: from the stamps of a node's input
(:class:`InputStampClock`), or from one node's subscription for every node of a process (:func:`share_clock`)."""

from __future__ import annotations

from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node


#: The last time point :meth:`InputStampClock.advance` built: (stamp ns, clock type, ``rcl_time_point_t``).
_LAST_POINT: tuple = (None, None, None)


class InputStampClock:
    """Simulation time for a node driven by stamped data, without a ``/clock`` subscription of its own.

    A node that only transforms input stamped in sim time (a sensor resampling ground
    truth, the flight controller answering odometry, the camera rendering at odometry
    stamps, depth post-processing) uses its clock for nothing but log throttling. Its
    ``/clock`` subscription still cost a whole callback per physics period: 250 messages/s
    and about 0.05-0.09 cores per node on this machine (an idle subscriber's CPU), for a
    time its input already carries, since the physics node stamps ground truth with the
    very ``/clock`` value it publishes with it. Used by the sensors, the flight controller, the
    mission runner, camera, depth noise, depth points, lidar, rotor drag, the web viewer and
    scene markers (through :func:`subscribe_odometry`'s ``clock``, or by hand), and by the
    recorder and the AirSim server, which read ``/clock`` anyway. With ``use_sim_time`` true this drops the
    subscription and sets the node's ROS time from :meth:`advance` (the stamp of the input
    just handled; a simulation reset sends it back, as ``/clock`` would); with
    ``use_sim_time`` false it does nothing (wall time, as before).
    """

    def __init__(self, node: Node):
        self._clock = node.get_clock()
        source = getattr(node, "_time_source", None)  # rclpy's TimeSource (absent: keep /clock)
        self.active = source is not None and source.ros_time_is_active
        if self.active:
            source.detach_node()  # drops the /clock subscription; the clock stays in ROS-time mode
        self._last_ns = 0
        # The clock's handle and type, looked up once: both are Python properties (the type an enum), and
        # a container's nodes advance some six clocks a lockstep period.
        self._handle = self._clock.handle
        self._clock_type = self._clock.clock_type

    @property
    def latest_ns(self) -> int:
        """The stamp last advanced to (ns; 0 before the first): the node's sim time now."""
        return self._last_ns

    def advance(self, stamp_ns: int) -> None:
        """Set the node's time to ``stamp_ns`` (sim time, ns); a negative stamp is no sim time and is
        left to the node's own checks of the message."""
        if self.active and stamp_ns != self._last_ns and stamp_ns >= 0:
            self._last_ns = stamp_ns
            # What Clock.set_ros_time_override does, without building a checked rclpy Time first: a
            # fleet process sets some 10,000 clocks a second (1.5 instead of 2.5 us each here).
            # The time point of the stamp is built once for all the clocks set to it (the nodes of a process
            # that read one odometry message: 1.2 of 2.9 us an advance); it is a value, never changed.
            global _LAST_POINT
            last_ns, clock_type, point = _LAST_POINT
            if last_ns != stamp_ns or clock_type is not self._clock_type:
                point = _rclpy.rcl_time_point_t(stamp_ns, self._clock_type)
                _LAST_POINT = (stamp_ns, self._clock_type, point)
            handle = self._handle
            with handle:
                handle.set_ros_time_override(point)


def share_clock(nodes: list[Node]) -> None:
    """Let the first node's ``/clock`` subscription drive every node's clock.

    Each rclpy node subscribes to ``/clock`` itself (250 messages/s from the physics node);
    for N nodes in one process that is N deserialisations per tick for the same time. Uses
    rclpy's TimeSource (``Node._time_source``): where that is missing, every node keeps its own.
    """
    source = getattr(nodes[0], "_time_source", None)
    if source is None or not source.ros_time_is_active:
        return
    for node in nodes[1:]:
        own = getattr(node, "_time_source", None)
        if own is None or not own.ros_time_is_active:
            continue
        own.detach_node()  # drops its /clock subscription; its clock stays in ROS-time mode
        source.attach_clock(node.get_clock())
