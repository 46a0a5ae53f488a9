"""Barometer node: ``ground_truth/odom`` -> ``air_pressure`` (sensor_msgs/FluidPressure, Pa, ``<ns>/baro_link``).

Thin adapter around :class:`aerial_sim.sensors.barometer.Barometer`, driven by
ground truth resampled to the exact instants ``k / rate_hz`` of sim time.
``variance`` is filled from the noise model (white noise plus drift).
"""

from __future__ import annotations

from rclpy.node import Node
from nav_msgs.msg import Odometry
from sensor_msgs.msg import FluidPressure

from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.nodes.common import declare_params, frame_in_namespace, run_node, stream_qos, to_stamp
from aerial_sim.sensors.barometer import Barometer, BarometerParams
from aerial_sim.sensors.common import Resampler, SensorNodeOptions, load_preset, resample_for, truth_from_odometry


class BarometerNode(Node):
    def __init__(self):
        super().__init__("barometer")
        options = declare_params(self, SensorNodeOptions, defaults=SensorNodeOptions(preset="ms5611", frame_id="baro_link"))
        self.params = declare_params(self, BarometerParams, defaults=load_preset(BarometerParams, options.preset))
        home = declare_params(self, HomePoint, prefix="home.")
        self.frame_id = frame_in_namespace(self, options.frame_id)
        self.model = Barometer(self.params, home)
        self.resampler = Resampler(self.params.rate_hz, options.interpolation)
        self.dt = 1.0 / self.params.rate_hz
        qos = stream_qos(options.lockstep)
        self.publisher = self.create_publisher(FluidPressure, "air_pressure", qos)
        self.create_subscription(Odometry, "ground_truth/odom", self.on_truth, qos)
        self.get_logger().info(f"barometer at {self.params.rate_hz:g} Hz in {self.frame_id} (preset '{options.preset}')")

    def on_truth(self, msg: Odometry) -> None:
        truth = truth_from_odometry(msg)
        if truth is None:
            self.get_logger().warning("ground_truth/odom with non-finite values ignored", throttle_duration_sec=5)
            return
        for sample in resample_for(self.model, self.resampler, truth):
            m = self.model.step(self.dt, sample)
            out = FluidPressure(fluid_pressure=m.pressure_pa, variance=m.variance_pa2)
            out.header.stamp = to_stamp(m.time_s)
            out.header.frame_id = self.frame_id
            self.publisher.publish(out)


def main(args=None):
    return run_node(BarometerNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
