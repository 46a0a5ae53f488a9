"""``aerial_sim launch``: ROS 2 YAML launch files without the ``ros2`` tool chain.

- :mod:`.substitutions`: ``$(var ...)``-style substitutions, parsed and evaluated;
- :mod:`.description`: a launch file evaluated into the processes to start (pure);
- :mod:`.commands`: executables looked up and command lines built as ``ros2 launch`` does;
- :mod:`.runner`: the processes started, their output relayed, stopped on Ctrl-C;
- :mod:`.cli`: the ``aerial_sim launch`` command.

Nothing here imports rclpy.
"""
