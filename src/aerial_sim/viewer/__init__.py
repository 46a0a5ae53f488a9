"""Seeing a run: scene primitives for markers and the web viewer, depth to points (pure, no rclpy)."""
