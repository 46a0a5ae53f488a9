"""Services that answer every call of a burst: the QoS of their servers and of their callers.

rclpy's default service QoS (``qos_profile_services_default``) keeps the last 10
messages, on both sides of a call, and a burst loses calls on both:

- the server keeps the last 10 requests not yet taken, so a burst of more
  callers than that lost the oldest inside the middleware;
- Fast DDS delivers every reply of a service to every client of it (each client
  keeps only the replies that answer its own request), so a client keeping 10
  lost its own reply behind the others' when more than 10 callers were answered
  before it took it.

Either way a blocking ``call()`` then waited for good. Measured with 50 callers
at once on one flight controller's services: 17 never answered with the defaults,
15 with only the server's queue deepened, none with both
(``test/test_service_bursts.py``). :data:`SERVICE_QOS` keeps every request and
reply of any burst a machine sends (a message is a few bytes): every server here
uses it (:func:`serve`), and so does every client here. A caller outside
aerial_sim that fires more than 10 calls at once needs a deep client queue too
(``qos_profile=SERVICE_QOS``, or any keep-last depth above the burst; doc/reliability.md).
"""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

#: Requests a server keeps before it takes them: more than any burst of callers (each call is one).
SERVICE_QUEUE_DEPTH = 1000
SERVICE_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=SERVICE_QUEUE_DEPTH,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)


def serve(node, srv_type, name: str, callback):
    """``node.create_service`` with :data:`SERVICE_QOS`: every request of a burst is answered."""
    return node.create_service(srv_type, name, callback, qos_profile=SERVICE_QOS)
