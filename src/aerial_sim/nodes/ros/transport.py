"""The DDS transport profile node processes use (``config/fastdds.xml``)."""

from __future__ import annotations

import os


def use_transport_profile() -> None:
    """Point Fast DDS at ``config/fastdds.xml`` unless the user chose a profile or another RMW.

    The default Fast DDS transports drop most best-effort camera images bigger
    than 512 kB between processes; the profile enlarges the shared-memory
    segment and socket buffers (measurements in the file). Call before rclpy.init.
    """
    if os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp") != "rmw_fastrtps_cpp":
        return
    if os.environ.get("FASTDDS_DEFAULT_PROFILES_FILE") or os.environ.get("FASTRTPS_DEFAULT_PROFILES_FILE"):
        return
    from aerial_sim.paths import config_path

    profile = config_path("fastdds.xml")
    if profile.is_file():
        os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = str(profile)
