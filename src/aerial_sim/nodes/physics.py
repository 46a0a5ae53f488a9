"""Physics node: one per world, simulates every vehicle listed in its parameters.

A thin adapter around :class:`aerial_sim.physics.world.PhysicsWorld`:

- subscribes ``/<vehicle>/motor_commands`` (u_i in [0, 1]; with many vehicles also
  ``/swarm/motor_commands``, the same for a fleet in one message) and
  ``/<vehicle>/rotor_drag/wrench`` (external wrench in the body frame);
- steps the world at ``rate_hz`` (1000 Hz) in a pacing thread — real time,
  ``clock_speed`` times real time, as fast as possible (``clock_speed: 0``), or
  ``lockstep`` (each control period waits for one new command per vehicle and for
  the outputs of every lockstep participant, :class:`LockstepOutputs`);
- publishes ``/clock``, ``ground_truth/odom``, ``ground_truth/imu`` and
  ``rotors`` once per control period (``publish_rate_hz``, 250 Hz), not on
  every 1 ms step: consumers need 250 Hz, and publishing at the step rate would
  cost more than the physics itself; and ``ground_truth/wind`` (Vector3Stamped, ``map``
  ENU m/s: the wind the engine applies to that vehicle, which the rotor drag node
  subtracts) while something reads it, every period in lockstep;
- simulation control (what AirSim's API needs; standard interfaces only):
  services ``/physics/pause`` (std_srvs/SetBool: stop or restart the clock)
  and ``/physics/reset`` (std_srvs/Trigger: every vehicle back to its start,
  at rest, said on ``set_pose/applied`` as a teleport once applied; sim time goes on), ``/physics/restart`` (std_srvs/Trigger: a new run in the
  same graph, a warm batch run's: sim time back to 0, every vehicle at its start, the wind
  from the ``wind_enu_m_s`` and ``wind.*`` parameters as they are now, lockstep participants
  owing every stamp from 0 again; call it paused, after the graph's other resets), topics ``/physics/continue_for``
  (std_msgs/Float64: run that many simulated seconds, whole control periods,
  then pause), ``/physics/wind`` (geometry_msgs/Vector3Stamped, ``map`` ENU
  m/s) and ``/<vehicle>/set_pose`` (geometry_msgs/PoseStamped in ``map``:
  teleport, at rest; once applied, published again on ``/<vehicle>/set_pose/applied`` stamped
  with the sim time at which it was applied: every later ``ground_truth/odom`` shows it, as does the
  state re-sent at that time while paused) and ``/physics/add_vehicle``
  (rcl_interfaces/SetParametersAtomically: a vehicle added to the running world,
  :mod:`aerial_sim.vehicles.spawn`; its controller and sensors are started by
  whoever asks, e.g. the AirSim server's ``simAddVehicle``; refused in lockstep).
  These edits are queued and applied by the simulation thread between control
  periods, also while paused.

Inputs are bounded (doc/robustness.md): a wrench above ``max_external_force_n`` /
``max_external_torque_nm`` or a teleport beyond ``max_position_m`` is refused with a
warning. When a vehicle's motor commands stop for ``motor_command_timeout_s`` (sim
and wall time, after the first one; not in lockstep, which waits for them) its motors are cut
to zero — the failsafe — with an ERROR on ``/diagnostics`` until commands return.
A simulation that cannot go on (a state that is no longer finite, any exception in
the loop) says why on ``/diagnostics`` and in the log, and the node exits 1.

Many vehicles (:class:`SwarmOutputs`): the vehicles come from ``vehicle_names`` or a
fleet (``fleet`` file or ``vehicles`` count, :mod:`aerial_sim.vehicles.fleet`);
ground truth goes out at ``ground_truth_rate_hz`` per vehicle, lowered at start to
what the node can publish and still keep real time (it logs what it chose), never below
``ground_truth_min_rate_hz`` (50 Hz: the controllers' stable rate; a warning says when load
forces that floor); the
whole swarm's poses go out on ``/swarm/poses``, its ground truth in one message on
``/swarm/state`` and vehicle-to-vehicle collisions on ``<vehicle>/collisions``.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import replace

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.duration import Duration
from rclpy.node import Node
from rosgraph_msgs.msg import Clock

from aerial_sim.cdr.encode import encode_battery_state_of, encode_clock, encode_diagnostics_of, encode_vector3_stamped
from aerial_sim.nodes._physics.control import SimulationControl
from aerial_sim.nodes._physics.inputs import VehicleChannel, Wakeup
from aerial_sim.nodes._physics.lockstep import LockstepOutputs
from aerial_sim.nodes._physics.lockstep_wait import LockstepWait
from aerial_sim.nodes._physics.params import PhysicsNodeParams
from aerial_sim.nodes._physics.start_gate import await_start_gate
from aerial_sim.nodes._physics.publishing import (
    PeriodTruths,
    SwarmOutputs,
    battery_message,
    imu_bytes,
    odometry_bytes,
    transform_message,
)
from aerial_sim.nodes._physics.world_setup import build_world_on_terrain
from aerial_sim.physics.world import RunControl
from aerial_sim.nodes.ros import process
from aerial_sim.nodes.ros.frames import make_tf_broadcaster
from aerial_sim.nodes.ros.parameters import declare_params
from aerial_sim.nodes.ros.qos import COMMAND_QOS, stream_qos
from aerial_sim.nodes.ros.raw_publish import raw_sender
from aerial_sim.nodes.ros.raw_take import unspun_reader_node
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.stamps import to_stamp


#: The external wrench of a vehicle without a fresh ``rotor_drag/wrench``: (force, torque), body frame.
NO_WRENCH = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0))


class SimulationDiverged(RuntimeError):
    """A vehicle's state stopped being finite: publishing it would spread NaN through the graph."""


class PhysicsNode(Node):
    def __init__(self):
        super().__init__("physics")
        self.params = self._with_airsim_spawns(declare_params(self, PhysicsNodeParams).with_fleet())
        self.world, self.terrain = build_world_on_terrain(self.params)
        process.stop_point()  # a stop asked while the world was built ends the start here (process.stop_point)
        self.inputs_lock = threading.Lock()
        self.command_arrived = Wakeup(self.context if self.params.lockstep else None)
        # Lockstep: the simulation thread takes the motor commands itself (LockstepWait.ready).
        self.command_reader = unspun_reader_node(self, "commands") if self.params.lockstep else None
        self.lockstep_outputs: LockstepOutputs | None = None
        self.clock_pub = self.create_publisher(Clock, "/clock", stream_qos(self.params.lockstep))
        self.send_clock = raw_sender(self.clock_pub, tap=True)
        self._battery_due_s = -math.inf
        self.vehicles = [
            VehicleChannel(self, name, len(self.world.rotor_states(name)), self.params.lockstep,
                           self.params.battery_enabled)
            for name in self.params.vehicle_names
        ]
        self.tf_broadcaster = make_tf_broadcaster(self) if self.params.publish_tf else None
        process.stop_point()
        self.run_control = RunControl()
        self._world_edits: list = []
        self._restart_queued = False  # a /physics/restart edit not yet applied (the lockstep wait applies it too)
        self.control = SimulationControl(self)  # /physics/pause, reset, restart, add_vehicle, continue_for, wind
        self.diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", COMMAND_QOS)
        self.swarm = SwarmOutputs(self)
        self.lockstep_wait: LockstepWait | None = None  # lockstep: when the next period may be stepped
        if self.params.lockstep:
            self.lockstep_outputs = LockstepOutputs(self)
            self.lockstep_wait = LockstepWait(self)
        process.stop_point()  # the last one before the simulation thread starts
        self._published_at = time.monotonic()
        self.periods_done = 0
        self.exit_code = 0
        self.done = False  # set by the simulation thread when it cannot go on
        self._stop = threading.Event()
        self.simulation_thread = threading.Thread(target=self._run, name="physics-loop", daemon=True)
        self.simulation_thread.start()
        mode = "lockstep" if self.params.lockstep else (
            "as fast as possible" if self.params.clock_speed == 0 else f"clock_speed {self.params.clock_speed:g}"
        )
        self.get_logger().info(
            f"simulating {', '.join(self.params.vehicle_names)} at {self.params.rate_hz:g} Hz "
            f"({mode}), publishing at {self.params.publish_rate_hz:g} Hz, scene '{self.params.scene}'"
        )

    def _with_airsim_spawns(self, params: PhysicsNodeParams, quiet: bool = False) -> PhysicsNodeParams:
        """``params`` with the start poses of an AirSim settings file (``airsim_settings``); a file that cannot
        be used is one error line and the launch's poses (the AirSim server says what is wrong with it)."""
        from aerial_sim.airsim.settings import spawn_poses, usable_settings

        found = usable_settings(params.airsim_settings,
                                lambda error: self.get_logger().error(f"{error}; vehicles start at the launch's poses"))
        if found is None:
            return params
        path, settings = found
        count = len(params.vehicle_names)
        positions, yaws = spawn_poses(settings, [params.initial_positions[3 * i: 3 * i + 3] for i in range(count)],
                                      params.initial_yaws_rad)
        moved = [name for i, name in enumerate(params.vehicle_names)
                 if positions[i] != tuple(params.initial_positions[3 * i: 3 * i + 3]) or yaws[i] != params.initial_yaws_rad[i]]
        if moved and not quiet:
            self.get_logger().info(f"AirSim settings {path}: {', '.join(moved)} start at the settings' poses")
        return replace(params, initial_positions=tuple(c for p in positions for c in p), initial_yaws_rad=tuple(yaws))

    def destroy_node(self):
        # Also for a node whose __init__ failed part way (rclpy's shutdown destroys every node of its context):
        # only what was built is stopped.
        if hasattr(self, "_stop"):
            self._stop.set()
            self.command_arrived.set()
        thread = getattr(self, "simulation_thread", None)
        if thread is not None and thread.is_alive() and threading.current_thread() is not thread:
            thread.join(timeout=2.0)
        if getattr(self, "lockstep_outputs", None) is not None:
            self.lockstep_outputs.reader.destroy_node()
        if getattr(self, "command_reader", None) is not None:
            self.command_reader.destroy_node()
        return super().destroy_node()

    # -- simulation control (executor thread; applied by the simulation thread) --

    def edit_world(self, edit) -> None:
        """Queue ``edit(world)`` for the simulation thread (it must not change the world mid-step)."""
        with self.inputs_lock:
            self._world_edits.append(edit)
        self.command_arrived.set()

    def _apply_world_edits(self) -> bool:
        with self.inputs_lock:
            edits, self._world_edits = self._world_edits, []
            self._restart_queued = False
        for edit in edits:
            try:
                edit(self.world)
            except ValueError as error:  # a request its checks let through and the world refuses: dropped
                self.get_logger().warning(f"world edit refused: {error}", throttle_duration_sec=2.0)
        if edits:
            for vehicle in self.vehicles:  # a reset, restart or teleport may have changed the held wrench
                vehicle.applied_wrench = None
        return bool(edits)

    # -- the simulation loop (its own thread; callbacks run in the executor) --

    def _run(self) -> None:
        """Thread body: simulate until stopped; a crash ends the node with exit code 1."""
        process.name_os_thread()
        try:
            self._simulate()
        except Exception as error:  # noqa: BLE001 - any failure must end the node visibly
            if not self.context.ok():
                return  # shutting down (Ctrl-C): publishers are gone, nothing is lost
            why = f"physics loop stopped at t = {self.world.time_s:.3f} s: {type(error).__name__}: {error}"
            self.get_logger().fatal(why)
            self._publish_status(DiagnosticStatus.ERROR, "physics", why)
            self._flush_diagnostics()  # the process ends next: let every subscriber have the ERROR
            self.exit_code = 1
            self.done = True  # run_node's spin loop ends the node from the main thread

    def _simulate(self) -> None:
        params = self.params
        period_s = params.steps_per_period / params.rate_hz
        await_start_gate(self)
        if params.lockstep:
            self.lockstep_wait.await_settled_subscribers()
        wall_start = time.monotonic()
        self._publish_state()
        waiting_since = time.monotonic()
        was_paused = False
        while not self._stop.is_set() and self.context.ok():
            with self.inputs_lock:
                blocked = self.run_control.blocked
            if blocked:
                if self._apply_world_edits():
                    self._publish_state()  # a teleport or reset while paused is seen at once
                self.command_arrived.wait(timeout=0.05)
                self.command_arrived.clear()
                was_paused = True
                continue
            if was_paused:  # pace from here on: no catching up on the time spent paused
                was_paused = False
                if params.clock_speed > 0:
                    wall_start = time.monotonic() - self.periods_done * period_s / params.clock_speed
            if params.lockstep:
                if self._restart_queued and self._apply_world_edits():
                    # A restart un-paused before this thread saw the pause (a warm batch run calls restart,
                    # then un-pause): the run before's participants would hold this wait for ever.
                    self._publish_state()
                    waiting_since = time.monotonic()
                    continue
                if not self.lockstep_wait.ready():
                    if time.monotonic() - self._published_at > 0.5:
                        # Re-send this period's state: a controller or sensor that joined late (DDS
                        # discovery) must still get it. Each answers a stamp once.
                        self._publish_state()
                    if time.monotonic() - waiting_since > 5.0:
                        self.get_logger().info(f"lockstep: waiting at t = {self.world.time_s:.3f} s for "
                                               f"{self.lockstep_wait.awaited()}", throttle_duration_sec=5.0)
                    continue
                waiting_since = time.monotonic()
            elif params.clock_speed > 0:
                due = wall_start + (self.periods_done + 1) * period_s / params.clock_speed
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                elif delay < -0.25:
                    wall_start -= delay  # fell far behind (e.g. suspended): do not try to catch up
                    self.get_logger().warning(
                        f"real time: {-delay:.2f} s behind the wall clock at t = {self.world.time_s:.3f} s, not "
                        f"caught up (the machine too busy, or the process stopped): sim time runs slower",
                        throttle_duration_sec=10.0)
            self._apply_inputs()
            self.world.step(params.steps_per_period)
            with self.inputs_lock:
                self.run_control.stepped()
            self.periods_done += 1
            self.swarm.collect_collisions()
            self._publish_state()

    def clock_ns(self) -> int:
        """The simulation clock in integer nanoseconds (the stamps of everything this node publishes)."""
        return int(round(self.world.time_s * 1e9))

    def _apply_inputs(self) -> None:
        self._apply_world_edits()
        now = self.world.time_s
        with self.inputs_lock:
            for vehicle in self.vehicles:
                if vehicle.pending_controls is not None:
                    self.world.set_controls(vehicle.name, vehicle.pending_controls)
                    vehicle.pending_controls = None
                    if vehicle.failsafe:
                        self._end_failsafe(vehicle)
                elif self._commands_stale(vehicle, now):
                    self._start_failsafe(vehicle)
                fresh = vehicle.wrench is not None and now - vehicle.wrench_received_at <= self.params.wrench_timeout_s
                wrench = vehicle.wrench if fresh else NO_WRENCH
                if wrench is not vehicle.applied_wrench:  # the world holds a wrench until it is replaced
                    self.world.set_external_wrench(vehicle.name, *wrench)
                    vehicle.applied_wrench = wrench
            self.command_arrived.clear()

    def _commands_stale(self, vehicle: VehicleChannel, now: float) -> bool:
        timeout = self.params.motor_command_timeout_s
        # Both clocks: sim time alone would fire when the simulation outruns a live controller
        # (clock_speed 0 or > 1), wall time alone when it runs slower than real time.
        return (not vehicle.failsafe and not self.params.lockstep and timeout > 0 and vehicle.commands_received > 0
                and now - vehicle.command_received_at > timeout
                and time.monotonic() - vehicle.command_received_wall > timeout)

    def _start_failsafe(self, vehicle: VehicleChannel) -> None:
        """Motor commands stopped (a dead or stuck flight controller): cut the motors and say so."""
        vehicle.failsafe = True
        self.world.set_controls(vehicle.name, [0.0] * vehicle.rotor_count)
        why = (f"{vehicle.name}: no motor_commands for {self.params.motor_command_timeout_s:g} s; "
               "failsafe: motors cut to zero")
        self.get_logger().error(why)
        self._publish_status(DiagnosticStatus.ERROR, f"physics: {vehicle.name} motor commands", why, vehicle.name)

    def _end_failsafe(self, vehicle: VehicleChannel) -> None:
        vehicle.failsafe = False
        why = f"{vehicle.name}: motor_commands again; failsafe over"
        self.get_logger().info(why)
        self._publish_status(DiagnosticStatus.OK, f"physics: {vehicle.name} motor commands", why, vehicle.name)

    def report_lockstep_drop(self, why: str) -> None:
        """A lockstep participant was dropped (:meth:`LockstepOutputs.drop_overdue`): an ERROR on /diagnostics."""
        self._publish_status(DiagnosticStatus.ERROR, "physics: lockstep", why)

    def _publish_status(self, level, name: str, message: str, hardware_id: str = "physics") -> None:
        status = DiagnosticStatus(level=level, name=name, message=message, hardware_id=hardware_id)
        array = DiagnosticArray(status=[status])
        array.header.stamp = to_stamp(self.world.time_s)
        try:
            self.diagnostics_pub.publish(encode_diagnostics_of(array))
        except Exception:  # noqa: BLE001 - the context may be going away; the log line was written
            pass

    def _flush_diagnostics(self, timeout_s: float = 2.0) -> None:
        """Wait (bounded) until the reliable /diagnostics subscribers have acknowledged what was sent."""
        try:
            self.diagnostics_pub.wait_for_all_acked(Duration(nanoseconds=int(timeout_s * 1e9)))
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass

    def _publish_state(self) -> None:
        """Ground truth first, ``/clock`` last: the controllers start on their odometry while the rest
        goes out. Nodes driven by ground truth take their time from its stamps
        (:class:`~aerial_sim.nodes.ros.clocks.InputStampClock`), not from ``/clock``.

        In lockstep, where the next step waits for the controllers anyway, ``/clock`` goes first: then
        every answer to this period's state (a motor command) is sent after this ``/clock`` and before
        the next, and a recorder logs an unstamped answer at the stamp of the ``/clock`` sent before it,
        the same in every run (:mod:`aerial_sim.recording.send_clock`). It costs one small message's
        latency a period."""
        self._published_at = time.monotonic()
        stamp_ns = self.clock_ns()
        if self.params.lockstep:
            self.send_clock(encode_clock(stamp_ns))
        # The message stamp only where one is built (collisions, TF, battery): to_stamp's rclpy Time was a
        # tenth of this method's own time every period.
        stamp = (to_stamp(self.world.time_s) if self.swarm.pending or self.tf_broadcaster is not None
                 or self.params.battery_enabled else None)
        truths = PeriodTruths(self.world)
        due = self.swarm.publish(stamp, stamp_ns, self.periods_done, truths)
        self._publish_ground_truth(stamp, stamp_ns, due, truths=truths)
        if self.params.battery_enabled and self.world.time_s >= self._battery_due_s - 1e-9:
            period = 1.0 / self.params.battery_rate_hz  # on whole periods of simulation time
            self._battery_due_s = (math.floor(self.world.time_s / period + 1e-6) + 1) * period
            for vehicle in self.vehicles:
                pack = getattr(self.world, "batteries", {}).get(vehicle.name)
                if pack is not None and vehicle.battery_pub is not None:
                    vehicle.battery_pub.publish(encode_battery_state_of(battery_message(pack, stamp, vehicle.frame)))
        if not self.params.lockstep:
            self.send_clock(encode_clock(stamp_ns))

    def _publish_ground_truth(self, stamp, stamp_ns: int, vehicles, unread_too: bool = False,
                              truths: "PeriodTruths | None" = None) -> None:
        """Odometry, IMU, rotors and TF of ``vehicles`` (VehicleChannel objects).

        In a fleet a topic nobody reads is not built (unless ``unread_too``: the start-up cost probe):
        its sensors and controllers read ``/swarm/state``, and at 64 vehicles building and publishing
        every vehicle's three messages unread was a quarter of this node's CPU. A reader that comes
        later (a recorder, RViz) gets them within :attr:`VehicleChannel.READERS_REFRESH_S`. One
        vehicle's topics always go out, as do every vehicle's in lockstep (a bag's first messages must
        not depend on when discovery matched its recorder)."""
        transforms = []
        every = unread_too or self.params.lockstep or len(self.vehicles) == 1
        truths = truths if truths is not None else PeriodTruths(self.world)
        winds = None
        for vehicle in vehicles:
            truth = truths[vehicle.name]
            if not all(map(math.isfinite, (*truth.position, *truth.velocity_world, *truth.orientation))):
                raise SimulationDiverged(f"{vehicle.name}: state is no longer finite (position {truth.position})")
            # The wind goes first, then the odometry the rotor drag node pairs it with (issue 31). Built only
            # when read (nothing else costs it) except in lockstep, where every stamp's outputs go out (and
            # nobody is asked who reads them).
            if unread_too or self.params.lockstep:
                odom_read = imu_read = rotors_read = wind_read = True
            else:
                odom_read, imu_read, rotors_read, wind_read = vehicle.readers()
                if every:
                    odom_read = imu_read = rotors_read = True
            if wind_read:
                if winds is None:
                    winds = self.world.winds_as_tuples()
                vehicle.send_wind(encode_vector3_stamped(stamp_ns, "map", winds[self.world.index_of(vehicle.name)]))
            if odom_read:
                vehicle.send_odom(odometry_bytes(truth, stamp_ns, vehicle.frame))
            if imu_read:
                vehicle.send_imu(imu_bytes(truth, stamp_ns, vehicle.frame))
            if rotors_read:  # (JointState: velocity = speed, rad/s; effort = thrust, N)
                speeds, thrusts = self.world.rotor_speeds_and_thrusts(vehicle.name)
                vehicle.send_rotors(vehicle.encode_rotors(stamp_ns, vehicle.rotor_positions, speeds, thrusts))
            if self.tf_broadcaster is not None:
                transforms.append(transform_message(truth, stamp, vehicle.frame))
        if transforms:
            self.tf_broadcaster.sendTransform(transforms)


def main(args=None):
    return run_node(PhysicsNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
