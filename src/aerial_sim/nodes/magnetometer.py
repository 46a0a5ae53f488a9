"""Magnetometer node: ``ground_truth/odom`` -> ``magnetic_field`` (sensor_msgs/MagneticField, T, ``<ns>/mag_link``).

Thin adapter around :class:`aerial_sim.sensors.magnetometer.Magnetometer`
(tilted dipole or WMM, ``field.model``), driven by ground truth resampled to the
exact instants ``k / rate_hz`` of sim time. The covariance diagonal is the
white-noise variance.
"""

from __future__ import annotations

from sensor_msgs.msg import MagneticField

from aerial_sim.cdr.encode import encode_magnetic_field
from aerial_sim.nodes._sensor import OdometrySensorNode
from aerial_sim.nodes.ros.hosting import FleetHosting
from aerial_sim.nodes.ros.message_fields import diagonal_covariance
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.stamps import to_stamp_ns
from aerial_sim.sensors.magnetometer import Magnetometer, MagnetometerMeasurement, MagnetometerParams


class MagnetometerNode(OdometrySensorNode):
    def __init__(self, **node_options):
        super().__init__("magnetometer", MagnetometerParams, Magnetometer, preset="hmc5883l", frame_id="mag_link", **node_options)
        self.publisher = self.output_publisher(MagneticField, "magnetic_field")
        self.get_logger().info(
            f"magnetometer ({self.params.field.model}) at {self.params.rate_hz:g} Hz in {self.frame_id} "
            f"(preset '{self.options.preset}')"
        )

    def publish(self, m: MagnetometerMeasurement) -> None:
        self.publisher.publish(encode_magnetic_field(to_stamp_ns(m.time_s), self.frame_id, m.magnetic_field_t,
                                                     diagonal_covariance(m.variance_t2)))


#: How one process serves a fleet's magnetometers (also inside the shared ``sensors`` process).
HOSTING = FleetHosting("magnetometer", sensor="magnetometer", seeded=True)


def main(args=None):
    return run_node(MagnetometerNode, args, HOSTING, background=True)


if __name__ == "__main__":
    raise SystemExit(main())
