"""The AirSim RPC server's core, without ROS: the wire format, the RPC transport, and AirSim's methods
(:mod:`aerial_sim.airsim.api`) on top of a graph of vehicle links; ``nodes/airsim_api.py`` connects it to ROS."""
