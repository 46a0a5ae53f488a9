"""CDR bytes of ROS 2 messages, read and written without rclpy message objects: :mod:`aerial_sim.cdr.decode`
reads the fields the nodes need straight from the bytes, :mod:`aerial_sim.cdr.encode` writes the messages
they publish at high rate.

A raw subscription (``create_subscription(..., raw=True)``) hands the callback the serialized
message; decoding the handful of fields a node reads costs 7-9 us per nav_msgs/Odometry here,
where rclpy builds the whole message object in 134-188 us (``deserialize_message``, on the slow
development machine; ``tools/dev.sh bench cdr``). A barometer node fed 250 Hz odometry went from
0.16-0.20 to 0.11-0.16 cores (``tools/dev.sh bench executor --before``, two interleaved runs).
:func:`aerial_sim.nodes.ros.subscriptions.subscribe_odometry` and its siblings create such subscriptions.

What is implemented: the OMG CDR rules (CORBA 3.0, 15.3 "CDR Transfer Syntax"; DDS-XTYPES 1.3,
7.4 "Data Representation", encoding version 1, "XCDR1") as the ROS 2 middleware writes messages
(rmw_fastrtps through Fast-CDR, rmw_cyclonedds: plain XCDR1 of the ROS IDL types; what rclpy's
``serialize_message`` returns and a ``raw=True`` subscription receives):

- a 4-byte encapsulation header (DDSI-RTPS 2.x, 10 "Serialized Payload Representation"):
  ``0x00 0x00`` = CDR_BE (big endian), ``0x00 0x01`` = CDR_LE, then 2 option bytes (ignored).
  Anything else (PL_CDR parameter lists, XCDR2) is refused;
- primitives aligned to their own size (float64: 8, uint32: 4), the alignment counted from the
  start of the payload, i.e. after the encapsulation header;
- ``string``: uint32 length including the terminating NUL, then the bytes (UTF-8) and the NUL;
- ``sequence<T>``: uint32 element count, then the elements (aligned once, before the first);
- fixed arrays (``float64[36]``) and nested structures: their elements in order, no length prefix;
- padding bytes are not read (Fast-CDR leaves them uninitialised), and bytes after the message are
  ignored (rclpy's serialized JointState can carry a few).
"""
