"""IMU node: ``ground_truth/imu`` (+ ``rotors``) -> ``imu/data`` (sensor_msgs/Imu in ``<ns>/imu_link``).

Thin adapter around :class:`aerial_sim.sensors.imu.Imu`. Driven by incoming
ground truth, not by a timer: every truth message is resampled to the exact
instants ``k / rate_hz`` of sim time and each instant gives one stamped sample.
No orientation is reported (an MPU-6000 has none): ``orientation_covariance[0]
= -1`` as REP-145 asks; the other two covariances come from the noise model.
"""

from __future__ import annotations

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import Imu as ImuMsg

from aerial_sim.cdr import ImuFields, JointStateFields
from aerial_sim.nodes.common import (FleetHosting, InputStampClock, announce_lockstep_participant, declare_params,
                                     frame_in_namespace, is_finite_sequence, publish_static_mount, run_node, stream_qos,
                                     subscribe_imu, subscribe_joint_state, to_stamp)
from aerial_sim.sensors.common import Resampler, SensorNodeOptions, TruthSample, load_preset, resample_for
from aerial_sim.sensors.imu import Imu, ImuParams


class ImuNode(Node):
    def __init__(self, **node_options):
        super().__init__("imu", **node_options)
        options = declare_params(self, SensorNodeOptions, defaults=SensorNodeOptions(preset="mpu6000", frame_id="imu_link"))
        self.params = declare_params(self, ImuParams, defaults=load_preset(ImuParams, options.preset))
        self.frame_id = frame_in_namespace(self, options.frame_id)
        publish_static_mount(self, self.frame_id, self.params.mount.position_m, self.params.mount.orientation)
        self.model = Imu(self.params)
        self.resampler = Resampler(self.params.rate_hz, options.interpolation)
        self.dt = 1.0 / self.params.rate_hz
        self.rotor_speeds: tuple[float, ...] = ()
        self._previous: tuple[float, np.ndarray] | None = None
        qos = stream_qos(options.lockstep)
        self.publisher = self.create_publisher(ImuMsg, "imu/data", qos)
        if options.lockstep:
            self.lockstep_announcement = announce_lockstep_participant(self, "imu/data", self.params.rate_hz)
        subscribe_imu(self, "ground_truth/imu", self.on_truth, qos, clock=InputStampClock(self))
        if self.params.vibration_enabled:
            subscribe_joint_state(self, "rotors", self.on_rotors, qos)
        self.get_logger().info(f"IMU at {self.params.rate_hz:g} Hz in {self.frame_id} (preset '{options.preset}')")

    def on_rotors(self, rotors: JointStateFields) -> None:
        if is_finite_sequence(rotors.velocity):
            self.rotor_speeds = rotors.velocity

    def on_truth(self, imu: ImuFields) -> None:
        values = imu.orientation_wxyz + imu.angular_velocity + imu.linear_acceleration
        if not is_finite_sequence(values):
            self.get_logger().warning("ground_truth/imu with non-finite values ignored", throttle_duration_sec=5)
            return
        time_s = imu.time_s
        omega = np.array(values[4:7])
        alpha = (0.0, 0.0, 0.0)  # angular acceleration by finite difference, for the lever-arm term
        if self._previous is not None and time_s > self._previous[0]:
            alpha = tuple((omega - self._previous[1]) / (time_s - self._previous[0]))
        self._previous = (time_s, omega)
        truth = TruthSample(time_s, orientation=values[0:4], angular_velocity_body=values[4:7],
                            specific_force_body=values[7:10], angular_acceleration_body=alpha)
        for sample in resample_for(self.model, self.resampler, truth):
            self.publisher.publish(self.to_msg(self.model.step(self.dt, sample, self.rotor_speeds)))

    def to_msg(self, m) -> ImuMsg:
        msg = ImuMsg()
        msg.header.stamp = to_stamp(m.time_s)
        msg.header.frame_id = self.frame_id
        msg.orientation_covariance[0] = -1.0
        msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z = m.angular_velocity
        msg.linear_acceleration.x, msg.linear_acceleration.y, msg.linear_acceleration.z = m.linear_acceleration
        for i in (0, 4, 8):
            msg.angular_velocity_covariance[i] = m.angular_velocity_variance
            msg.linear_acceleration_covariance[i] = m.linear_acceleration_variance
        return msg


def main(args=None):
    return run_node(ImuNode, args, FleetHosting("imu", sensor="imu", seeded=True))


if __name__ == "__main__":
    raise SystemExit(main())
