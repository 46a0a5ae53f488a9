"""IMU node: ``ground_truth/imu`` (+ ``rotors``) -> ``imu/data`` (sensor_msgs/Imu in ``<ns>/imu_link``).

Thin adapter around :class:`aerial_sim.sensors.imu.Imu`. Driven by incoming
ground truth, not by a timer: every truth message is resampled to the exact
instants ``k / rate_hz`` of sim time and each instant gives one stamped sample.
No orientation is reported (an MPU-6000 has none): ``orientation_covariance[0]
= -1`` as REP-145 asks; the other two covariances come from the noise model.
"""

from __future__ import annotations

from rclpy.node import Node
from sensor_msgs.msg import Imu as ImuMsg

from aerial_sim.cdr.decode import ImuFields, JointStateFields
from aerial_sim.cdr.encode import imu_encoder
from aerial_sim.nodes._sensor import sensor_defaults, serve_sensor_reset
from aerial_sim.nodes.ros.clocks import InputStampClock
from aerial_sim.nodes.ros.frames import frame_in_namespace, publish_static_mount
from aerial_sim.nodes.ros.hosting import FleetHosting
from aerial_sim.nodes.ros.lockstep import participant_publisher
from aerial_sim.nodes.ros.message_fields import diagonal_covariance, is_finite_sequence
from aerial_sim.nodes.ros.parameters import declare_params
from aerial_sim.nodes.ros.qos import stream_qos
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.stamps import to_stamp_ns
from aerial_sim.nodes.ros.subscriptions import subscribe_imu, subscribe_joint_state
from aerial_sim.sensors.params import SensorNodeOptions
from aerial_sim.sensors.resampling import Resampler, resample_for
from aerial_sim.sensors.truth import TruthSample
from aerial_sim.sensors.imu import Imu, ImuParams


IDENTITY_WXYZ = (1.0, 0.0, 0.0, 0.0)
ZERO3 = (0.0, 0.0, 0.0)
#: REP-145: no orientation estimate.
NO_ORIENTATION = (-1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


class ImuNode(Node):
    def __init__(self, **node_options):
        super().__init__("imu", **node_options)
        options = declare_params(self, SensorNodeOptions, defaults=SensorNodeOptions(preset="mpu6000", frame_id="imu_link"))
        self.params = declare_params(self, ImuParams, defaults=sensor_defaults(self, ImuParams, options))
        self.frame_id = frame_in_namespace(self, options.frame_id)
        self._encode = imu_encoder(self.frame_id)
        publish_static_mount(self, self.frame_id, self.params.mount.position_m, self.params.mount.orientation)
        self.model = Imu(self.params)
        self.resampler = Resampler(self.params.rate_hz, options.interpolation)
        self.dt = 1.0 / self.params.rate_hz
        self.rotor_speeds: tuple[float, ...] = ()
        self._previous: tuple[float, tuple[float, float, float]] | None = None
        self._covariances: tuple = ((None, None), (), ())
        qos = stream_qos(options.lockstep)
        self.publisher = participant_publisher(self, ImuMsg, "imu/data", qos, options.lockstep, self.params.rate_hz,
                                               inputs=("ground_truth/imu",))
        subscribe_imu(self, "ground_truth/imu", self.on_truth, qos, clock=InputStampClock(self))
        if self.params.vibration_enabled:
            subscribe_joint_state(self, "rotors", self.on_rotors, qos)

        def rebuild(params) -> None:
            self.model = Imu(params)
            self.resampler = Resampler(params.rate_hz, options.interpolation)
            self._previous, self.rotor_speeds = None, ()

        serve_sensor_reset(self, rebuild)
        self.get_logger().info(f"IMU at {self.params.rate_hz:g} Hz in {self.frame_id} (preset '{options.preset}')")

    def on_rotors(self, rotors: JointStateFields) -> None:
        if is_finite_sequence(rotors.velocity):
            self.rotor_speeds = rotors.velocity

    def on_truth(self, imu: ImuFields) -> None:
        orientation, omega, force = imu.orientation_wxyz, imu.angular_velocity, imu.linear_acceleration
        if not is_finite_sequence(orientation + omega + force):
            self.get_logger().warning("ground_truth/imu with non-finite values ignored", throttle_duration_sec=5)
            return
        time_s = imu.stamp_sec + imu.stamp_nanosec * 1e-9
        alpha = (0.0, 0.0, 0.0)  # angular acceleration by finite difference, for the lever-arm term
        if self._previous is not None and time_s > self._previous[0]:
            before_s, (x, y, z) = self._previous  # plain floats: NumPy on three numbers cost more than the sums
            span = time_s - before_s
            alpha = ((omega[0] - x) / span, (omega[1] - y) / span, (omega[2] - z) / span)
        self._previous = (time_s, omega)
        truth = TruthSample(time_s, ZERO3, orientation, ZERO3, omega, force, alpha)
        model, dt, rotors, send, to_bytes = self.model, self.dt, self.rotor_speeds, self.publisher.publish, self.to_bytes
        for sample in resample_for(model, self.resampler, truth):
            send(to_bytes(model.step(dt, sample, rotors)))

    def to_bytes(self, m) -> bytes:
        """The sensor_msgs/Imu of one measurement as CDR (:func:`aerial_sim.cdr.encode.imu_encoder`: a sixth of the
        cost of building and publishing the typed message); no orientation (covariance[0] = -1, REP-145).
        The covariances of the last variances are kept (the same at every sample of a fixed rate)."""
        variances = (m.angular_velocity_variance, m.linear_acceleration_variance)
        if variances != self._covariances[0]:
            self._covariances = (variances, diagonal_covariance(variances[0]), diagonal_covariance(variances[1]))
        _, gyro, accel = self._covariances
        return self._encode(to_stamp_ns(m.time_s), IDENTITY_WXYZ, NO_ORIENTATION, m.angular_velocity, gyro,
                            m.linear_acceleration, accel)


#: How one process serves a fleet's imus (also inside the shared ``sensors`` process).
HOSTING = FleetHosting("imu", sensor="imu", seeded=True)


def main(args=None):
    return run_node(ImuNode, args, HOSTING, background=True)


if __name__ == "__main__":
    raise SystemExit(main())
