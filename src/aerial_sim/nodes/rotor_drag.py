"""Rotor drag node: rotor thrusts, ground-truth odometry and the vehicle's wind in, the rotor drag wrench out.

Subscribes ``rotors`` (JointState, effort = thrust N), ``ground_truth/odom``
(twist in the body frame) and ``ground_truth/wind`` (Vector3Stamped, ``map``
ENU m/s: the wind the physics node's engine applies to this vehicle, turbulence,
gusts and shear included) and publishes ``rotor_drag/wrench`` (WrenchStamped,
``<ns>/base_link``) with :class:`aerial_sim.physics.rotor_drag.RotorDragModel`
(seed 004, eq. (13), or eq. (11) rotor by rotor), at most ``rate_hz`` in sim
time and stamped with the odometry it was computed from. The air-relative
velocity is the odometry's minus the wind of the same stamp (in lockstep the
three inputs are paired by stamp, whichever arrives first; otherwise the wind of
that stamp, else the latest one within ``max_input_age_s``). The physics node
adds the wrench to the body and holds it until a newer one arrives; run it with
``linear_drag_enabled: false`` to fly on rotor drag alone.

Why the physics node publishes the wind rather than this node sampling the field
itself: the wind field's turbulence is a random process whose state depends on
every vehicle's position and air speed at each sample, so a second copy here
would need the same seed, the same sample instants and the same states to stay
identical, and would drift apart at the first message lost. One source (the
engine's field) and one direction of flow (physics to this node, like the
odometry) keeps the drag this node computes and the drag the engine's own laws
compute on the same air, by construction.

``wind_source: mean`` restores the old behaviour (only the mean wind:
``wind_enu_m_s``, then whatever ``/physics/wind`` sets), for a physics node that
publishes no ``ground_truth/wind``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from geometry_msgs.msg import Vector3Stamped, WrenchStamped
from rclpy.node import Node

from aerial_sim.cdr.decode import JointStateFields, OdometryFields
from aerial_sim.config import require, require_positive
from aerial_sim.physics.rotor_drag import RotorDragModel, RotorDragParams, air_velocity_body
from aerial_sim.nodes.ros.clocks import InputStampClock
from aerial_sim.nodes.ros.frames import frame_in_namespace
from aerial_sim.nodes.ros.lockstep import participant_publisher
from aerial_sim.nodes.ros.parameters import declare_params
from aerial_sim.nodes.ros.qos import COMMAND_QOS, stream_qos
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.stamps import from_stamp, stamp_from_fields
from aerial_sim.nodes.ros.subscriptions import subscribe_joint_state, subscribe_odometry
from aerial_sim.sensors.truth import UNUSABLE_ODOMETRY, truth_from_odometry


@dataclass(frozen=True)
class RotorDragNodeParams:
    """Node-level parameters (the model's own are :class:`RotorDragParams`)."""

    #: Vehicle config (config/vehicles/<name>.yaml): rotor positions for the per-rotor form.
    vehicle: str = "quad_x"
    #: Largest publishing rate, Hz of sim time (one wrench per odometry message at most).
    rate_hz: float = 250.0
    #: ``physics``: the wind of each stamp from ``ground_truth/wind`` (the engine's wind field at this
    #: vehicle). ``mean``: the constant ``wind_enu_m_s``, then what ``/physics/wind`` sets.
    wind_source: Literal["physics", "mean"] = "physics"
    #: Constant wind (ENU, m/s) for ``wind_source: mean``; config/environment.yaml sets it for every node.
    wind_enu_m_s: tuple[float, float, float] = (0.0, 0.0, 0.0)
    #: Rotor thrusts (and winds) older than this (sim time) relative to the odometry are not used.
    max_input_age_s: float = 0.1
    frame_id: str = "base_link"
    lockstep: bool = False

    def __post_init__(self):
        require_positive(self, "rate_hz", "max_input_age_s")
        require(self.wind_source in ("physics", "mean"),
                f"wind_source must be 'physics' or 'mean', got {self.wind_source!r}")
        require(len(self.wind_enu_m_s) == 3, f"wind_enu_m_s needs 3 values, got {self.wind_enu_m_s!r}")


class RotorDragNode(Node):
    def __init__(self):
        super().__init__("rotor_drag")
        self.node_params = declare_params(self, RotorDragNodeParams)
        self.drag_params = declare_params(self, RotorDragParams)
        positions = ()
        if self.drag_params.per_rotor:
            from aerial_sim.vehicles.multirotor import load_vehicle

            positions = tuple(r.position_m for r in load_vehicle(self.node_params.vehicle).rotors)
        self.model = RotorDragModel(self.drag_params, positions)
        self.wind = tuple(float(v) for v in self.node_params.wind_enu_m_s)
        self.wind_from_physics = self.node_params.wind_source == "physics"
        self.frame_id = frame_in_namespace(self, self.node_params.frame_id)
        self.period_s = 1.0 / self.node_params.rate_hz
        self.thrusts: tuple[float, ...] | None = None
        self.thrusts_time_s = -math.inf
        self.wind_time_s = -math.inf  # stamp of the last ground_truth/wind
        self.first_odom_s: float | None = None
        self.latest_stamp_s = -math.inf
        #: Each stamp's inputs ("odom", "wind", in lockstep "rotors") until all it needs have come.
        self.waiting: dict[float, dict[str, object]] = {}
        self.needed = ("odom",) + (("rotors",) if self.node_params.lockstep else ()) + (
            ("wind",) if self.wind_from_physics else ())
        self.last_publish_s = -math.inf
        self.wrenches_published = 0
        qos = stream_qos(self.node_params.lockstep)
        inputs = ("rotors", "ground_truth/odom") + (("ground_truth/wind",) if self.wind_from_physics else ())
        # In lockstep the physics node then applies the wrench of each period's own state.
        self.publisher = participant_publisher(self, WrenchStamped, "rotor_drag/wrench", qos, self.node_params.lockstep,
                                               self.node_params.rate_hz, inputs=inputs)
        subscribe_joint_state(self, "rotors", self.on_rotors, qos)
        if self.wind_from_physics:
            self.create_subscription(Vector3Stamped, "ground_truth/wind", self.on_vehicle_wind, qos)
            wind_text = "the physics node's wind at this vehicle (ground_truth/wind)"
        subscribe_odometry(self, "ground_truth/odom", self.on_odom, qos, clock=InputStampClock(self))
        if not self.wind_from_physics:
            # The mean wind follows the physics node's: /physics/wind (and AirSim's simSetWind) set it at run time.
            self.create_subscription(Vector3Stamped, "/physics/wind", self.on_wind, COMMAND_QOS)
            wind_text = f"mean wind {self.wind} m/s"
        form = "eq. (11), per rotor" if self.drag_params.per_rotor else "eq. (13)"
        self.get_logger().info(
            f"rotor drag {form}: k={self.drag_params.k:g}, b={self.drag_params.b:g}, "
            f"c_d1={self.drag_params.c_d1:g}, {wind_text}, up to {self.node_params.rate_hz:g} Hz"
        )

    def on_wind(self, message: Vector3Stamped) -> None:
        wind = (message.vector.x, message.vector.y, message.vector.z)
        if message.header.frame_id not in ("", "map") or not all(math.isfinite(v) and abs(v) < 200.0 for v in wind):
            self.get_logger().warning(f"/physics/wind refused: needs frame 'map' and |v| < 200 m/s, got {wind}",
                                      throttle_duration_sec=2.0)
            return
        self.wind = tuple(float(v) for v in wind)

    def on_vehicle_wind(self, message: Vector3Stamped) -> None:
        wind = (message.vector.x, message.vector.y, message.vector.z)
        if message.header.frame_id not in ("", "map") or not all(math.isfinite(v) and abs(v) < 200.0 for v in wind):
            self.get_logger().warning(f"ground_truth/wind refused: needs frame 'map' and |v| < 200 m/s, got {wind}",
                                      throttle_duration_sec=2.0)
            return
        self.wind_time_s = from_stamp(message.header.stamp)  # bit for bit the odometry's time_s
        self.arrived(self.wind_time_s, "wind", (float(wind[0]), float(wind[1]), float(wind[2])))

    def on_rotors(self, rotors: JointStateFields) -> None:
        thrusts = rotors.effort
        if not thrusts or not all(math.isfinite(t) for t in thrusts):
            self.get_logger().warning("rotors: effort (thrust) missing or not finite; ignored", throttle_duration_sec=5)
            return
        if self.drag_params.per_rotor and len(thrusts) != len(self.model.rotor_positions):
            self.get_logger().warning(
                f"rotors: {len(thrusts)} thrusts for a {len(self.model.rotor_positions)}-rotor vehicle; ignored",
                throttle_duration_sec=5,
            )
            return
        self.thrusts = thrusts
        self.thrusts_time_s = rotors.time_s
        if self.node_params.lockstep:
            self.arrived(rotors.time_s, "rotors", thrusts)

    def on_odom(self, odom: OdometryFields) -> None:
        if self.first_odom_s is None or odom.time_s < self.first_odom_s:  # the first, or a restart
            self.first_odom_s = odom.time_s
        silent_s = odom.time_s - max(self.wind_time_s, self.first_odom_s)
        if self.wind_from_physics and not self.node_params.lockstep and silent_s > self.node_params.max_input_age_s:
            self.get_logger().warning("ground_truth/wind: no recent wind from the physics node; no drag published "
                                      "(wind_source: mean uses the constant wind_enu_m_s)", throttle_duration_sec=5)
        self.arrived(odom.time_s, "odom", odom)

    def arrived(self, stamp_s: float, what: str, value) -> None:
        """Each odometry is paired with its own period's wind (and in lockstep its thrusts), whichever
        arrives first: with the latest ones instead (arrival order, which the executor and the load
        decide), the wrench of a gust's edge would use the wind of the period before, and two lockstep
        runs of the same inputs would differ. Not in lockstep the thrusts are the latest."""
        if stamp_s + self.node_params.max_input_age_s < self.latest_stamp_s:  # time went back: a restarted run
            self.waiting.clear()  # (what waits is the old run's: its stamps come again)
        self.latest_stamp_s = stamp_s
        inputs = self.waiting.get(stamp_s)
        if inputs is None:
            inputs = {}
            remember(self.waiting, stamp_s, inputs)
        inputs[what] = value
        if not all(key in inputs for key in self.needed):
            return
        del self.waiting[stamp_s]
        if self.node_params.lockstep:
            thrusts = inputs["rotors"]
        elif self.thrusts is None:
            return
        elif abs(stamp_s - self.thrusts_time_s) > self.node_params.max_input_age_s:
            self.get_logger().warning("rotors: no recent thrusts; no drag published", throttle_duration_sec=5)
            return
        else:
            thrusts = self.thrusts
        self.publish_wrench(inputs["odom"], thrusts, inputs.get("wind", self.wind))

    def publish_wrench(self, odom: OdometryFields, thrusts: tuple[float, ...] | None,
                       wind: tuple[float, float, float]) -> None:
        """The drag wrench for ``odom``'s state, ``thrusts`` and ``wind``, at most ``rate_hz`` in sim time."""
        now_s = odom.time_s
        if now_s < self.last_publish_s:  # simulation restarted
            self.last_publish_s = -math.inf
        if thrusts is None or now_s - self.last_publish_s < self.period_s - 1e-9:
            return
        if truth_from_odometry(odom) is None:
            self.get_logger().warning(UNUSABLE_ODOMETRY, throttle_duration_sec=5)
            return
        velocity_body, rates_body = odom.linear_velocity, odom.angular_velocity
        force, torque = self.model.wrench(thrusts, air_velocity_body(velocity_body, odom.orientation_wxyz, wind),
                                          rates_body)
        out = WrenchStamped()
        out.header.stamp = stamp_from_fields(odom)
        out.header.frame_id = self.frame_id
        out.wrench.force.x, out.wrench.force.y, out.wrench.force.z = force
        out.wrench.torque.x, out.wrench.torque.y, out.wrench.torque.z = torque
        self.publisher.publish(out)
        self.last_publish_s = now_s
        self.wrenches_published += 1


#: Stamps whose inputs are kept waiting for the rest (a few periods; older ones have lost their partner).
PAIRING_DEPTH = 64


def remember(waiting: dict, stamp_s: float, value) -> None:
    """Keep ``value`` under ``stamp_s``, forgetting the oldest beyond :data:`PAIRING_DEPTH`."""
    waiting[stamp_s] = value
    while len(waiting) > PAIRING_DEPTH:
        del waiting[next(iter(waiting))]


def main(args=None):
    return run_node(RotorDragNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
