"""The QoS profiles every node uses: reliable commands, latched descriptions, and sensor streams
that are best effort in real time and reliable in lockstep (REP-2003)."""

from __future__ import annotations

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)


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
