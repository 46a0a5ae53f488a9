"""Barometer node: ``ground_truth/odom`` -> ``air_pressure`` (sensor_msgs/FluidPressure, Pa, ``<ns>/baro_link``).

Thin adapter around :class:`aerial_sim.sensors.barometer.Barometer`, driven by
ground truth resampled to the exact instants ``k / rate_hz`` of sim time.
``variance`` is filled from the noise model (white noise plus drift).
"""

from __future__ import annotations

from sensor_msgs.msg import FluidPressure

from aerial_sim.cdr.encode import encode_fluid_pressure
from aerial_sim.nodes._sensor import OdometrySensorNode
from aerial_sim.nodes.ros.hosting import FleetHosting
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.stamps import to_stamp_ns
from aerial_sim.sensors.barometer import Barometer, BarometerMeasurement, BarometerParams


class BarometerNode(OdometrySensorNode):
    def __init__(self, **node_options):
        super().__init__("barometer", BarometerParams, Barometer, preset="ms5611", frame_id="baro_link", **node_options)
        self.publisher = self.output_publisher(FluidPressure, "air_pressure")
        self.get_logger().info(f"barometer at {self.params.rate_hz:g} Hz in {self.frame_id} (preset '{self.options.preset}')")

    def publish(self, m: BarometerMeasurement) -> None:
        self.publisher.publish(encode_fluid_pressure(to_stamp_ns(m.time_s), self.frame_id, m.pressure_pa,
                                                     m.variance_pa2))


#: How one process serves a fleet's barometers (also inside the shared ``sensors`` process).
HOSTING = FleetHosting("barometer", sensor="barometer", seeded=True)


def main(args=None):
    return run_node(BarometerNode, args, HOSTING, background=True)


if __name__ == "__main__":
    raise SystemExit(main())
