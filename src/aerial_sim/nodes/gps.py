"""GPS node: ``ground_truth/odom`` -> ``gps/fix`` (NavSatFix) and ``gps/vel`` (TwistStamped, ENU, horizontal).

Thin adapter around :class:`aerial_sim.sensors.gps.Gps`, driven by ground truth
resampled to the exact instants ``k / rate_hz`` of sim time; each fix is
published ``latency_s`` after the instant it describes, stamped with its output
time (as a real driver stamps a fix on arrival). Status is STATUS_FIX for a 2D
or 3D fix, STATUS_NO_FIX before; the covariance is ``diag(eph^2, eph^2, epv^2)``
(ENU, DIAGONAL_KNOWN).
"""

from __future__ import annotations

import math

from geometry_msgs.msg import TwistStamped
from sensor_msgs.msg import NavSatFix, NavSatStatus

from aerial_sim.cdr.encode import encode_nav_sat_fix, encode_twist_stamped
from aerial_sim.nodes._sensor import OdometrySensorNode
from aerial_sim.nodes.ros.hosting import FleetHosting
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.stamps import to_stamp_ns
from aerial_sim.sensors.gps import FIX_NONE, Gps, GpsParams


class GpsNode(OdometrySensorNode):
    def __init__(self, **node_options):
        super().__init__("gps", GpsParams, Gps, preset="airsim_gps", frame_id="gps_link", **node_options)
        self.fix_publisher = self.create_publisher(NavSatFix, "gps/fix", self.qos)
        # gps/vel goes out last. Fixes are stamped k / rate_hz + latency_s and leave at the first
        # sample instant at or after their stamp.
        latency, rate = self.params.latency_s, self.params.rate_hz
        self.vel_publisher = self.output_publisher(TwistStamped, "gps/vel", first_s=latency,
                                                   lag_s=max(0.0, math.ceil(latency * rate - 1e-6) / rate - latency))
        self.get_logger().info(
            f"GPS at {self.params.rate_hz:g} Hz, latency {self.params.latency_s:g} s, in {self.frame_id} "
            f"(preset '{self.options.preset}')"
        )

    def publish(self, fixes) -> None:
        """The fixes that came due this sample (the model delays each by ``latency_s``)."""
        for fix in fixes:
            self.publish_fix(fix)

    def publish_fix(self, fix) -> None:
        stamp_ns = to_stamp_ns(fix.time_s)
        status = NavSatStatus.STATUS_NO_FIX if fix.fix_type == FIX_NONE else NavSatStatus.STATUS_FIX
        horizontal, vertical = fix.eph_m**2, fix.epv_m**2
        self.fix_publisher.publish(encode_nav_sat_fix(
            stamp_ns, self.frame_id, status, NavSatStatus.SERVICE_GPS, fix.latitude_deg, fix.longitude_deg,
            fix.altitude_m, (horizontal, 0.0, 0.0, 0.0, horizontal, 0.0, 0.0, 0.0, vertical),
            NavSatFix.COVARIANCE_TYPE_DIAGONAL_KNOWN))
        self.vel_publisher.publish(encode_twist_stamped(stamp_ns, self.frame_id, fix.velocity_enu, (0.0, 0.0, 0.0)))


#: How one process serves a fleet's gpss (also inside the shared ``sensors`` process).
HOSTING = FleetHosting("gps", sensor="gps", seeded=True)


def main(args=None):
    return run_node(GpsNode, args, HOSTING, background=True)


if __name__ == "__main__":
    raise SystemExit(main())
