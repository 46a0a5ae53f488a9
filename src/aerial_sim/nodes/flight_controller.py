"""Flight controller node: services and setpoint topics in, ``motor_commands`` out.

A thin adapter around :class:`aerial_sim.control.supervisor.FlightSupervisor`
(modes, safety) and its cascaded controller and mixer:

- state from ``ground_truth/odom`` (pose in ``map``, twist in ``base_link``);
  with ``attitude_source: imu`` the attitude and body rates come from
  ``imu/data`` instead (its frame is assumed aligned with ``base_link``);
- services ``arm`` (SetBool), ``takeoff``, ``land``, ``kill`` (motors off now,
  even in flight) and ``reset`` (Trigger; after a simulation reset: disarm); topics ``cmd_pose`` (PoseStamped, ``map``)
  and ``cmd_vel`` (TwistStamped, ``map`` or ``<ns>/base_link``); refused
  requests are one clear log line and the vehicle keeps holding;
- lower-level streams (AirSim's attitude, rate and PWM commands):
  ``cmd_attitude`` (PoseStamped: ``orientation`` = attitude; ``position.z`` =
  altitude in ``map`` when the frame is ``map``, collective throttle 0..1 when
  it is ``<ns>/base_link``), ``cmd_rates`` (TwistStamped: ``angular`` = body
  rates FLU; ``linear.z`` = altitude or throttle, chosen by the frame in the
  same way) and ``cmd_motors`` (Float64MultiArray, u_i in [0, 1], passed to
  ``motor_commands`` unchanged);
- publishes ``motor_commands`` (Float64MultiArray, reliable; in a fleet process with ``swarm_link``,
  its vehicle's row of ``/swarm/motor_commands`` instead, see :mod:`aerial_sim.nodes.ros.swarm_link`) as each new
  odometry stamp arrives, at most ``rate_hz`` of simulation time (so at the
  ground-truth rate: 250 Hz for one vehicle, the physics node's choice for a
  fleet), or in ``lockstep`` exactly one per new odometry stamp, and
  ``/diagnostics`` (armed, mode, last command age). Driven by odometry rather
  than a sim-time timer: a command is computed from the freshest state as soon
  as it arrives, and a fleet's 50 Hz vehicles cost 50 steps/s each, not 250.

Lockstep with a streaming client (``lockstep_wait_for_client``): for runs that
repeat bit for bit, the answer to odometry stamp t_k waits until the client has
either sent a setpoint stamped >= t_k or made a service call, so every request
takes effect at the same simulated step on every run (the mission runner works
this way). With ``lockstep_client_rate_hz`` (the client's setpoint rate) it waits only at
the stamps that rate makes due (:func:`aerial_sim.control.mission.is_setpoint_due`) and flies
the setpoint in force at the others. A client silent for ``lockstep_client_timeout_s`` of wall time is
no longer waited for until it sends another setpoint; ``land`` also ends the
waiting (the vehicle lands on its own).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, fields
from typing import Callable, Literal

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped, TwistStamped
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from sensor_msgs.msg import Imu
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool, Trigger

from aerial_sim.cdr.encode import encode_diagnostics_of
from aerial_sim.config import require_positive
from aerial_sim.control.controller import STABLE_STATE_RATE_HZ, ControllerParams, StatePeriodMonitor, VehicleState
from aerial_sim.control.geometry import yaw_of
from aerial_sim.control.mission import is_setpoint_due, require_setpoint_rate
from aerial_sim.control.supervisor import CommandRejected, FlightSupervisor, Mode, SupervisorParams
from aerial_sim.nodes.ros.clocks import InputStampClock
from aerial_sim.nodes.ros.hosting import FleetHosting
from aerial_sim.nodes.ros.motor_commands import motor_command_output
from aerial_sim.nodes.ros.parameters import declare_params
from aerial_sim.nodes.ros.qos import COMMAND_QOS, stream_qos
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.services import serve
from aerial_sim.nodes.ros.stamps import from_stamp, to_stamp
from aerial_sim.nodes.ros.subscriptions import subscribe_odometry
from aerial_sim.nodes.ros.throttle import ThrottledWarning
from aerial_sim.sensors.truth import UNUSABLE_ODOMETRY, last_truth_from_odometry
from aerial_sim.vehicles.multirotor import load_vehicle

#: Odometry stamps are whole nanoseconds: a period measured between two of them may fall short by this much.
STAMP_TOLERANCE_S = 1e-6
#: Lockstep: setpoints stamped ahead of this node's odometry wait for it (FlightControllerNode.is_early), within bounds.
MAX_EARLY_S = 1.0
MAX_EARLY_SETPOINTS = 64


@dataclass(frozen=True)
class FlightControllerNodeParams(SupervisorParams):
    """ROS parameters: the supervisor's (``takeoff_altitude``, ...) plus these; gains under ``controller.``."""

    #: Vehicle config (config/vehicles/<name>.yaml or a path): the mixer is built from its rotors.
    vehicle: str = "quad_x"
    #: Highest control rate in simulation time, Hz (the physics node's 250 Hz control period): one
    #: step per new odometry stamp, skipping stamps less than 1 / rate_hz after the last step.
    rate_hz: float = 250.0
    #: One motor command per received odometry stamp, each waited for by the physics node.
    lockstep: bool = False
    lockstep_wait_for_client: bool = False
    #: The client's setpoint rate in sim time (the mission runner's setpoint_rate_hz; 0: one per odometry
    #: stamp): the wait is only at the first stamp at or after each k / rate (control.mission.is_setpoint_due).
    lockstep_client_rate_hz: float = 0.0
    #: Wall-clock seconds a lockstep step waits for a streaming client before giving up on it.
    lockstep_client_timeout_s: float = 10.0
    #: Where attitude and body rates come from.
    attitude_source: Literal["odom", "imu"] = "odom"
    diagnostics_period_s: float = 1.0
    controller: ControllerParams = field(default_factory=ControllerParams)

    def __post_init__(self):
        super().__post_init__()
        require_positive(self, "rate_hz", "lockstep_client_timeout_s", "diagnostics_period_s")
        require_setpoint_rate(self, "lockstep_client_rate_hz")

    def supervisor_params(self) -> SupervisorParams:
        return SupervisorParams(**{f.name: getattr(self, f.name) for f in fields(SupervisorParams)})


class FlightControllerNode(Node):
    def __init__(self, **node_options):
        super().__init__("flight_controller", **node_options)
        self.params = params = declare_params(self, FlightControllerNodeParams)
        self.vehicle = vehicle = load_vehicle(params.vehicle)
        self.period_s = 1.0 / params.rate_hz
        namespace = self.get_namespace().strip("/")
        self.namespace = namespace
        self.body_frames = {"base_link", f"{namespace}/base_link"}
        self.warn_slow_odometry = ThrottledWarning(self, period_s=10.0)
        self._refused_at: dict[str, float] = {}
        self._start_run()

        self.send_controls = motor_command_output(self, "motor_commands")
        self.diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", COMMAND_QOS)
        qos = stream_qos(params.lockstep)
        subscribe_odometry(self, "ground_truth/odom", self.on_odom, qos, clock=InputStampClock(self), shared=True)
        if params.attitude_source == "imu":
            self.create_subscription(Imu, "imu/data", self.on_imu, qos)
        self.create_subscription(PoseStamped, "cmd_pose", self.on_cmd_pose, COMMAND_QOS)
        self.create_subscription(TwistStamped, "cmd_vel", self.on_cmd_vel, COMMAND_QOS)
        self.create_subscription(PoseStamped, "cmd_attitude", self.on_cmd_attitude, COMMAND_QOS)
        self.create_subscription(TwistStamped, "cmd_rates", self.on_cmd_rates, COMMAND_QOS)
        self.create_subscription(Float64MultiArray, "cmd_motors", self.on_cmd_motors, COMMAND_QOS)
        serve(self, Trigger, "reset", self.on_reset)
        serve(self, SetBool, "arm", self.on_arm)
        serve(self, Trigger, "takeoff", self.on_takeoff)
        serve(self, Trigger, "land", self.on_land)
        serve(self, Trigger, "kill", self.on_kill)
        if params.lockstep:
            self.create_timer(0.05, self.check_client_timeout, clock=Clock(clock_type=ClockType.STEADY_TIME))
        pacing = (("lockstep" + (" (waits for its client)" if self._gate else "")) if params.lockstep
                  else f"on each odometry stamp, at most {params.rate_hz:g} Hz")
        self.get_logger().info(f"flight controller for '{vehicle.name}' ({self.fc.rotor_count} rotors), {pacing}, "
                               f"attitude from {params.attitude_source}")

    def _start_run(self) -> None:
        """The state of a run's start: a new supervisor (disarmed, no setpoint, integrators empty) and
        no lockstep bookkeeping. At start-up, and when sim time goes back (:meth:`on_odom`)."""
        params = self.params
        self.fc = FlightSupervisor(params.supervisor_params(), params.controller, self.vehicle)
        self._odom_state: VehicleState | None = None
        self._odom_time = -math.inf
        self.odometry_period = StatePeriodMonitor()
        self._imu: tuple | None = None
        self._answered_time = -math.inf
        self._stepped_time = -math.inf
        self._pending_time: float | None = None
        self._pending_due = True  # whether the client answers the pending stamp (is_setpoint_due)
        self._pending_since = 0.0
        self._gate = params.lockstep and params.lockstep_wait_for_client
        self._client_stamp = -math.inf
        self._service_release = False
        self._early_setpoints: list[tuple[float, Callable[[], None]]] = []
        self._last_diagnostics = -math.inf
        # Lockstep, from a land call to the disarm: /diagnostics at every stamp due from the client, so
        # the client knows, stamp by stamp, whether the vehicle has disarmed (:meth:`try_step`).
        self._landing_reports = False

    # -- state in --------------------------------------------------------------

    def on_odom(self, odom) -> None:
        truth = last_truth_from_odometry(odom)
        if truth is None:
            self.get_logger().warning(UNUSABLE_ODOMETRY, throttle_duration_sec=5)
            return
        stamp = truth.time_s  # the odometry's stamp (s), as OdometryFields.time_s computes it
        if stamp < self._odom_time - STAMP_TOLERANCE_S:
            # Sim time went back: /physics/restart began a new run in this graph (a warm batch run).
            # It starts as under a freshly launched controller, so it repeats a cold run bit for bit.
            self._start_run()
            self.get_logger().info(f"sim time went back to {stamp:.3f} s: a new run, controller as at start")
        orientation, rates = truth.orientation, truth.angular_velocity_body
        if self._imu is not None:
            orientation, rates = self._imu
        self._odom_state = VehicleState(truth.position, orientation, truth.velocity_world, rates)
        self.fc.observe(self._odom_state)
        self.note_odometry_period(stamp)
        self._odom_time = stamp
        self.apply_early_setpoints()
        if self.params.lockstep and stamp > self._answered_time:
            if self._pending_time is None:
                self._pending_since = time.monotonic()
            self._pending_due = is_setpoint_due(stamp, self._answered_time, self.params.lockstep_client_rate_hz)
            self._pending_time = stamp
            self.try_step()
        elif not self.params.lockstep:
            self.step_if_due(stamp)

    def note_odometry_period(self, stamp_s: float) -> None:
        """Warn (throttled) while odometry arrives slower than the controller is known to fly at.

        The controller acts on the latest odometry; below STABLE_STATE_RATE_HZ it is not known to be
        stable (the physics node never lowers ground truth below that on its own; a user's
        ground_truth_min_rate_hz, or messages lost on a loaded machine, can).
        """
        if self.odometry_period.update(stamp_s) and not self.params.lockstep:
            period = self.odometry_period.period_s
            self.warn_slow_odometry(lambda: (
                f"ground_truth/odom arrives every {period * 1e3:.0f} ms of sim time ({1.0 / period:.0f} Hz), "
                f"below the {STABLE_STATE_RATE_HZ:g} Hz this controller is known to fly at: expect oscillation "
                "or a lost vehicle (lower the load, or use lockstep)"))

    def on_imu(self, message: Imu) -> None:
        q = message.orientation
        w = message.angular_velocity
        orientation, rates = (q.w, q.x, q.y, q.z), (w.x, w.y, w.z)
        if (message.orientation_covariance[0] == -1.0 or not all(map(math.isfinite, orientation + rates))
                or not 0.5 < math.sqrt(sum(c * c for c in orientation)) < 1.5):
            self.get_logger().warning("imu/data has no usable orientation (unit quaternion) or rates; ignored", throttle_duration_sec=5)
            return
        self._imu = (orientation, rates)

    # -- the control step ------------------------------------------------------

    def step_if_due(self, stamp: float) -> None:
        """Step on this odometry unless the last step is less than one control period ago (ground
        truth faster than ``rate_hz``); a stamp earlier than the last step (a simulation reset) steps."""
        since = stamp - self._stepped_time
        if since < 0.0 or since >= self.period_s - STAMP_TOLERANCE_S:
            self._stepped_time = stamp
            self.step(stamp)

    def try_step(self) -> None:
        """Lockstep: answer the pending odometry stamp unless the streaming client still owes its request."""
        if self._pending_time is None:
            return
        if self._gate and self._pending_due and self._client_stamp < self._pending_time and not self._service_release:
            return
        stamp, self._pending_time, self._service_release = self._pending_time, None, False
        self._answered_time = stamp
        self.step(stamp)
        if self._landing_reports:
            # The mission holds its lockstep progress after its land call until it knows the vehicle's
            # state at that stamp: the clock then stops at the same stamp in every run, however late
            # the disarm's message reaches it (issue 32: one run of three ran 33 periods longer).
            if self._pending_due and self._last_diagnostics != stamp:
                self.publish_diagnostics(stamp)
            self._landing_reports = self.fc.armed

    def check_client_timeout(self) -> None:
        if self._gate and self._pending_time is not None:
            if time.monotonic() - self._pending_since > self.params.lockstep_client_timeout_s:
                self.get_logger().warning(
                    "lockstep: no setpoint from the client for "
                    f"{self.params.lockstep_client_timeout_s:g} s; no longer waiting for it"
                )
                self._gate = False
                self.try_step()

    def step(self, time_s: float) -> None:
        controls = self.fc.update(time_s, self._odom_state, self.period_s)
        self.send_controls(controls)
        self.log_events(time_s)
        if time_s - self._last_diagnostics >= self.params.diagnostics_period_s:
            self.publish_diagnostics(time_s)

    # -- requests --------------------------------------------------------------

    def on_cmd_pose(self, message: PoseStamped) -> None:
        if self.is_early(message.header.stamp, lambda: self.on_cmd_pose(message)):
            return
        if message.header.frame_id != "map":
            self.refuse(f"cmd_pose refused: frame '{message.header.frame_id}' is not 'map'")
        else:
            p, q = message.pose.position, message.pose.orientation
            orientation = (q.w, q.x, q.y, q.z)
            if not 0.9 < math.sqrt(sum(c * c for c in orientation)) < 1.1:
                self.refuse(f"cmd_pose refused: orientation {orientation} is not a unit quaternion")
            else:
                self.apply(lambda now: self.fc.command_pose(now, (p.x, p.y, p.z), yaw_of(orientation)))
        self.client_message(message.header.stamp)

    def on_cmd_vel(self, message: TwistStamped) -> None:
        if self.is_early(message.header.stamp, lambda: self.on_cmd_vel(message)):
            return
        frame = message.header.frame_id
        if frame != "map" and frame not in self.body_frames:
            self.refuse(
                f"cmd_vel refused: unknown frame '{frame}' (use 'map' or '{self.namespace}/base_link')"
            )
        else:
            v, w = message.twist.linear, message.twist.angular
            body = frame in self.body_frames
            self.apply(lambda now: self.fc.command_velocity(now, (v.x, v.y, v.z), w.z, body_frame=body))
        self.client_message(message.header.stamp)

    def on_cmd_attitude(self, message: PoseStamped) -> None:
        if self.is_early(message.header.stamp, lambda: self.on_cmd_attitude(message)):
            return
        vertical = self.vertical_channel("cmd_attitude", message.header.frame_id, message.pose.position.z)
        if vertical is not None:
            q = message.pose.orientation
            self.apply(lambda now: self.fc.command_attitude(now, (q.w, q.x, q.y, q.z), *vertical))
        self.client_message(message.header.stamp)

    def on_cmd_rates(self, message: TwistStamped) -> None:
        if self.is_early(message.header.stamp, lambda: self.on_cmd_rates(message)):
            return
        vertical = self.vertical_channel("cmd_rates", message.header.frame_id, message.twist.linear.z)
        if vertical is not None:
            w = message.twist.angular
            self.apply(lambda now: self.fc.command_rates(now, (w.x, w.y, w.z), *vertical))
        self.client_message(message.header.stamp)

    def on_cmd_motors(self, message: Float64MultiArray) -> None:
        self.apply(lambda now: self.fc.command_motors(now, list(message.data)))

    def is_early(self, stamp, apply: Callable[[], None]) -> bool:
        """Lockstep: a setpoint stamped after the newest odometry this node has answers a state it has
        not received yet (the client read that odometry first). Keep it (``apply`` replays it) until
        that odometry is in, so that it meets the same vehicle state in every run: a velocity command
        takes its heading from the state when it switches modes, and which state that was decided
        between two identical runs (seen in a CI run of two concurrent batches). At most
        ``MAX_EARLY_SETPOINTS`` are kept, none stamped more than ``MAX_EARLY_S`` ahead (those are applied now)."""
        if not self.params.lockstep:
            return False
        stamp_s = from_stamp(stamp)
        if not 0.0 < stamp_s - self._odom_time <= MAX_EARLY_S or len(self._early_setpoints) >= MAX_EARLY_SETPOINTS:
            return False
        self._early_setpoints.append((stamp_s, apply))
        return True

    def apply_early_setpoints(self) -> None:
        """Apply the kept setpoints whose odometry has now arrived, in the order they came."""
        due = [apply for stamp_s, apply in self._early_setpoints if stamp_s <= self._odom_time]
        if due:
            self._early_setpoints = [(s, a) for s, a in self._early_setpoints if s > self._odom_time]
            for apply in due:
                apply()

    def vertical_channel(self, topic: str, frame: str, value: float):
        """(altitude, throttle) from a stream's frame: ``map`` -> altitude, base_link -> throttle; None if unknown."""
        if frame == "map":
            return value, None
        if frame in self.body_frames:
            return None, value
        self.refuse(f"{topic} refused: unknown frame '{frame}' (use 'map' or '{self.namespace}/base_link')")
        return None

    def on_reset(self, request, response):
        return self.service(response, self.fc.reset)

    def on_arm(self, request, response):
        return self.service(response, lambda: self.fc.arm(request.data))

    def on_kill(self, request, response):
        return self.service(response, self.fc.kill)

    def on_takeoff(self, request, response):
        return self.service(response, self.fc.takeoff)

    def on_land(self, request, response):
        if self.params.lockstep:
            self._landing_reports = True  # before the service answers the pending stamp (:meth:`try_step`)
        response = self.service(response, self.fc.land)
        if response.success:
            self._gate = False  # the vehicle lands on its own; no client stream to wait for
        else:
            self._landing_reports = False
        return response

    def apply(self, command) -> bool:
        try:
            command(self._odom_time)
        except CommandRejected as error:
            self.refuse(str(error))
            return False
        self.log_events_now()
        return True

    def service(self, response, command):
        try:
            response.message = command()
            response.success = True
        except CommandRejected as error:
            response.success, response.message = False, str(error)
            self.get_logger().warning(response.message)
        self.log_events_now()
        if self.params.lockstep and self._odom_state is not None:
            self._service_release = True  # the client's request for this step has been handled
            self.try_step()
        return response

    def client_message(self, stamp) -> None:
        if self.params.lockstep:
            self._client_stamp = max(self._client_stamp, from_stamp(stamp))
            if self.params.lockstep_wait_for_client:
                self._gate = self._gate or self.fc.mode is not Mode.LANDING
            self.try_step()

    def refuse(self, why: str) -> None:
        """Each distinct refusal at most once every 5 s (a stream of bad setpoints must not flood the log)."""
        now = time.monotonic()
        if now - self._refused_at.get(why, -math.inf) >= 5.0:
            self._refused_at[why] = now
            self.get_logger().warning(f"{why}; vehicle keeps {self.fc.mode.value}")

    # -- reporting -------------------------------------------------------------

    def log_events_now(self) -> None:
        """A request's events (mode changes): at once, or in lockstep with the step the request takes
        effect at, stamped with that step's time. Stamped with the newest odometry on arrival they said
        16 ms in one run and 20 ms in another, as the request came before or after that odometry."""
        if not self.params.lockstep:
            self.log_events(self._odom_time)

    def log_events(self, time_s: float) -> None:
        if self.fc.events:
            for event in self.fc.events:
                self.get_logger().info(event)
            self.fc.events.clear()
            self.publish_diagnostics(time_s)

    def publish_diagnostics(self, time_s: float) -> None:
        self._last_diagnostics = time_s
        age = self.fc.command_age_s(time_s)
        output = self.fc.last_output
        status = DiagnosticStatus(
            level=DiagnosticStatus.OK if self._odom_state is not None else DiagnosticStatus.WARN,
            name=f"{self.get_fully_qualified_name()}: flight control",
            message=self.fc.mode.value if self._odom_state is not None else "no ground_truth/odom received",
            hardware_id=self.namespace,
            values=[
                KeyValue(key="armed", value=str(self.fc.armed).lower()),
                KeyValue(key="mode", value=self.fc.mode.value),
                KeyValue(key="last_command_age_s", value=f"{age:.3f}" if math.isfinite(age) else "none"),
                KeyValue(key="saturated", value=str(bool(output and output.saturated)).lower()),
                KeyValue(key="state_source", value=self.params.attitude_source),
            ],
        )
        message = DiagnosticArray(status=[status])
        # Stamped with the control step's own (odometry) time, not the clock's latest tick: in lockstep
        # a mission that decides by this stamp decides the same way in every run.
        message.header.stamp = to_stamp(time_s) if math.isfinite(time_s) else self.get_clock().now().to_msg()
        self.diagnostics_pub.publish(encode_diagnostics_of(message))


def main(args=None):
    return run_node(FlightControllerNode, args, FleetHosting("flight_controller", type_parameter="vehicle"))


if __name__ == "__main__":
    raise SystemExit(main())
