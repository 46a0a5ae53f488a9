"""Datasets at scale: sweep files expanded into isolated headless lockstep runs (``aerial_sim batch``).

The core (sweep parsing and expansion, manifest and resume, retry policy,
ROS domain allocation) is plain Python with no rclpy import; each run is an
``aerial_sim launch`` process tree started and watched by :mod:`.execute`, on
local worker threads (:mod:`.local`) or as Ray tasks (:mod:`.ray_backend`).
"""
