"""aerial_sim: AirSim-class aerial-vehicle simulation as ROS 2 Python nodes.

Pure models live in ``physics``, ``vehicles``, ``environment``, ``sensors``,
``control`` and ``world`` and never import rclpy; ``nodes`` holds the thin
ROS 2 adapters and ``cli`` the ``aerial_sim`` command.
"""

__version__ = "0.1.0"
