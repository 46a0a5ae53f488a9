"""Software-in-the-loop bridges: external autopilots fly the simulated vehicle (pure modules, no ROS)."""
