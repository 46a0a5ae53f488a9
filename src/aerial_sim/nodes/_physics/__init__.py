"""The parts of the physics node (:mod:`aerial_sim.nodes.physics`, which holds the node, its simulation
loop and its services): ``params`` (its ROS parameters), ``world_setup`` (the world it builds),
``inputs`` (what it reads per vehicle), ``lockstep`` (which outputs the lockstep clock waits for) and
``publishing`` (ground truth, TF, swarm messages, collisions). Not executables (setup.py skips ``_*``).
"""
