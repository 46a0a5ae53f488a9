"""MAVLink: aerial_sim's flight controller as a PX4-style MAVLink 2 autopilot (pure modules, no ROS)."""
