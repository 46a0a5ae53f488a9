"""The parts of the recorder node (:mod:`aerial_sim.nodes.recorder`, which holds the node, its discovery
round and its taker thread): ``subscriptions`` (a recorded topic's QoS and its raw, loss-counting
subscription), ``rates`` (each stream's configured rate, asked from its publishers), ``lockstep`` (the
recorder as a lockstep participant: ``~/written``), ``bags`` (the bag and log bag: where and when each
message is written, a new bag, the close). Not executables (setup.py skips ``_*``). What needs no ROS
stands below, in :mod:`aerial_sim.recording`.
"""
