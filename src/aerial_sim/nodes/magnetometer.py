"""Magnetometer node: ``ground_truth/odom`` -> ``magnetic_field`` (sensor_msgs/MagneticField, T, ``<ns>/mag_link``).

Thin adapter around :class:`aerial_sim.sensors.magnetometer.Magnetometer`
(tilted dipole or WMM, ``field.model``), driven by ground truth resampled to the
exact instants ``k / rate_hz`` of sim time. The covariance diagonal is the
white-noise variance.
"""

from __future__ import annotations

from rclpy.node import Node
from nav_msgs.msg import Odometry
from sensor_msgs.msg import MagneticField

from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.nodes.common import declare_params, frame_in_namespace, publish_static_mount, run_node, stream_qos, to_stamp
from aerial_sim.sensors.common import Resampler, SensorNodeOptions, load_preset, resample_for, truth_from_odometry
from aerial_sim.sensors.magnetometer import Magnetometer, MagnetometerParams


class MagnetometerNode(Node):
    def __init__(self):
        super().__init__("magnetometer")
        options = declare_params(self, SensorNodeOptions, defaults=SensorNodeOptions(preset="hmc5883l", frame_id="mag_link"))
        self.params = declare_params(self, MagnetometerParams, defaults=load_preset(MagnetometerParams, options.preset))
        home = declare_params(self, HomePoint, prefix="home.")
        self.frame_id = frame_in_namespace(self, options.frame_id)
        publish_static_mount(self, self.frame_id, self.params.mount.position_m, self.params.mount.orientation)
        self.model = Magnetometer(self.params, home)
        self.resampler = Resampler(self.params.rate_hz, options.interpolation)
        self.dt = 1.0 / self.params.rate_hz
        qos = stream_qos(options.lockstep)
        self.publisher = self.create_publisher(MagneticField, "magnetic_field", qos)
        self.create_subscription(Odometry, "ground_truth/odom", self.on_truth, qos)
        self.get_logger().info(
            f"magnetometer ({self.params.field.model}) at {self.params.rate_hz:g} Hz in {self.frame_id} (preset '{options.preset}')"
        )

    def on_truth(self, msg: Odometry) -> None:
        truth = truth_from_odometry(msg)
        if truth is None:
            self.get_logger().warning("ground_truth/odom with non-finite values ignored", throttle_duration_sec=5)
            return
        for sample in resample_for(self.model, self.resampler, truth):
            m = self.model.step(self.dt, sample)
            out = MagneticField()
            out.header.stamp = to_stamp(m.time_s)
            out.header.frame_id = self.frame_id
            out.magnetic_field.x, out.magnetic_field.y, out.magnetic_field.z = m.magnetic_field_t
            for i in (0, 4, 8):
                out.magnetic_field_covariance[i] = m.variance_t2
            self.publisher.publish(out)


def main(args=None):
    return run_node(MagnetometerNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
