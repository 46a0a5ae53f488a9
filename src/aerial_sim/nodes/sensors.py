"""One process for a vehicle's IMU, barometer, magnetometer and GPS nodes (or a whole fleet's).

Each stays its own node, named and namespaced as its own executable would be
(``/drone1/imu``, ``/drone1/barometer``, ...), with its own topics, parameters and
lockstep announcement; only the process is shared, which is what saves CPU: the
physics node sends each ground-truth message once to this process instead of once to
each sensor's, and the process wakes once for all of them
(:func:`aerial_sim.nodes.ros.hosting.build_shared_nodes`; ``tools/dev.sh bench shared_process``).

Parameters: ``imu.<name>``, ``barometer.<name>``, ``magnetometer.<name>``, ``gps.<name>``
reach that node only (``imu.preset: mpu6000``); ``<member>.enabled: false`` leaves a
member out (a real driver publishes in its place); everything else (``use_sim_time``,
``seed``, ``lockstep``, ``home.*``, ``fleet``/``vehicles``) reaches all four. The
executables ``imu``, ``barometer``, ``magnetometer`` and ``gps`` still run each alone.
"""

from __future__ import annotations

from functools import partial

from aerial_sim.nodes import barometer, gps, imu, magnetometer
from aerial_sim.nodes.ros.hosting import HostedNode, build_shared_nodes
from aerial_sim.nodes.ros.run import run_nodes

#: The members, in the order they are built.
MEMBERS = (
    HostedNode(imu.ImuNode, imu.HOSTING),
    HostedNode(barometer.BarometerNode, barometer.HOSTING),
    HostedNode(magnetometer.MagnetometerNode, magnetometer.HOSTING),
    HostedNode(gps.GpsNode, gps.HOSTING),
)


def main(args=None):
    return run_nodes(partial(build_shared_nodes, "sensors", MEMBERS), "sensors", args, background=True)


if __name__ == "__main__":
    raise SystemExit(main())
