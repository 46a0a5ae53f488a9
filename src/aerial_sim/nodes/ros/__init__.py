"""The ROS side every node executable shares: one module per concept, as rclpy lays out its own.

Only node code imports this package (it imports rclpy); the models under ``aerial_sim`` never do.
Nothing here is an executable (executables are the modules of :mod:`aerial_sim.nodes`).

=====================  ==========================================================================
``qos``                the QoS profiles: commands, latched data, sensor and lockstep streams
``lockstep``           a lockstep participant's announcements and its connected-inputs publisher
``raw_take``           reading CDR bytes from a node no executor spins
``subscriptions``      subscriptions whose callbacks get fields decoded once per message
``motor_commands``     a flight controller's motor-command output
``services``           the QoS of service servers and callers that answers every call of a burst
``stamps``             sim time <-> ``builtin_interfaces/Time``
``message_fields``     covariances and finite-value checks of message fields
``frames``             TF frame names in a namespace, broadcasters, fixed sensor mounts
``throttle``           warnings logged at most once per period
``parameters``         params dataclasses as declared ROS parameters, run-folder parameters
``clocks``             sim time from input stamps, one ``/clock`` subscription per process
``hosting``            a fleet's nodes, or several kinds of node, in one process
``executors``          the executor, the spin loop, the niceness of background processes
``input_guard``        no message, request or timer tick may end a node
``transport``          the Fast DDS transport profile
``run``                ``run_node``: the ``main()`` of every node executable
``log_caller``         rclpy's logger finds its caller without reading source files
``type_support``       message type support without the message code generator's imports
``process``            signals, start-up and exit rules of a node process
``swarm_link``         a fleet process's ``/swarm/state`` and ``/swarm/motor_commands``
``zero_padding``       CDR bytes of a typed message with zero padding (identical bags)
=====================  ==========================================================================
"""
