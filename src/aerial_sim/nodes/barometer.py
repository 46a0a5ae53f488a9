"""Barometer node: ``ground_truth/odom`` -> ``air_pressure`` (sensor_msgs/FluidPressure, Pa, ``<ns>/baro_link``).

Thin adapter around :class:`aerial_sim.sensors.barometer.Barometer`, driven by
ground truth resampled to the exact instants ``k / rate_hz`` of sim time.
``variance`` is filled from the noise model (white noise plus drift).
"""

from __future__ import annotations

from sensor_msgs.msg import FluidPressure

from aerial_sim.nodes._sensor import OdometrySensorNode
from aerial_sim.nodes.common import FleetHosting, run_node, to_stamp
from aerial_sim.sensors.barometer import Barometer, BarometerMeasurement, BarometerParams


class BarometerNode(OdometrySensorNode):
    def __init__(self, **node_options):
        super().__init__("barometer", BarometerParams, Barometer, preset="ms5611", frame_id="baro_link", **node_options)
        self.publisher = self.create_publisher(FluidPressure, "air_pressure", self.qos)
        self.take_part_in_lockstep("air_pressure")
        self.get_logger().info(f"barometer at {self.params.rate_hz:g} Hz in {self.frame_id} (preset '{self.options.preset}')")

    def publish(self, m: BarometerMeasurement) -> None:
        out = FluidPressure(fluid_pressure=m.pressure_pa, variance=m.variance_pa2)
        out.header.stamp = to_stamp(m.time_s)
        out.header.frame_id = self.frame_id
        self.publisher.publish(out)


def main(args=None):
    return run_node(BarometerNode, args, FleetHosting("barometer", sensor="barometer", seeded=True))


if __name__ == "__main__":
    raise SystemExit(main())
