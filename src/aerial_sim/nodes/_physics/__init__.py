"""The parts of the physics node (:mod:`aerial_sim.nodes.physics`, which holds the node and its simulation
loop): ``params`` (its ROS parameters), ``world_setup`` (the world it builds), ``inputs`` (what it reads per
vehicle), ``control`` (its simulation-control services and topics), ``start_gate`` (whom the clock waits for
at 0), ``lockstep`` (which outputs the lockstep clock waits for), ``lockstep_wait`` (the simulation
thread's wait for each lockstep period's inputs) and ``publishing`` (ground truth, TF, swarm
messages, collisions). Not executables (setup.py skips ``_*``).
"""
