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
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rosgraph_msgs.msg import Clock

from aerial_sim.cdr.encode import encode_battery_state_of, encode_clock, encode_diagnostics_of, encode_vector3_stamped
from aerial_sim.nodes._physics.control import SimulationControl
from aerial_sim.nodes._physics.inputs import VehicleChannel, Wakeup
from aerial_sim.nodes._physics.lockstep import LockstepOutputs
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
    #: Lockstep: the most periods in a row released on the participants' outputs known, without taking
    #: the new ones (:meth:`_lockstep_ready`).
    TAKE_PERIODS = 16

    def __init__(self):
        super().__init__("physics")
        self.params = self._with_airsim_spawns(declare_params(self, PhysicsNodeParams).with_fleet())
        self.world, self.terrain = build_world_on_terrain(self.params)
        process.stop_point()  # a stop asked while the world was built ends the start here (process.stop_point)
        self.inputs_lock = threading.Lock()
        self.command_arrived = Wakeup(self.context if self.params.lockstep else None)
        # Lockstep: the simulation thread takes the motor commands itself (_wait_for_lockstep_inputs).
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
        self._wrench_topics = frozenset(vehicle.wrench_topic for vehicle in self.vehicles)
        if self.params.lockstep:
            self.lockstep_outputs = LockstepOutputs(self)
        process.stop_point()  # the last one before the simulation thread starts
        self._published_at = time.monotonic()
        self._lockstep_wait_s = 0.05
        self._wait_set = None  # lockstep: (participant topics read, (handles, WaitSet): all, commands only)
        self._periods_untaken = 0  # lockstep: periods released on the outputs known, without taking (_lockstep_ready)
        self._command_reader_cache = None  # lockstep: (subscriptions, what _command_readers returns)
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
            self._await_settled_subscribers()
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
                if not self._lockstep_ready():
                    if time.monotonic() - self._published_at > 0.5:
                        # Re-send this period's state: a controller or sensor that joined late (DDS
                        # discovery) must still get it. Each answers a stamp once.
                        self._publish_state()
                    if time.monotonic() - waiting_since > 5.0:
                        self.get_logger().info(f"lockstep: waiting at t = {self.world.time_s:.3f} s for "
                                               f"{self._lockstep_awaited()}", throttle_duration_sec=5.0)
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

    def _await_settled_subscribers(self) -> None:
        """Lockstep: hold the first step until the graph's subscribers to /clock and ground truth (at
        least one; a fleet's processes with the swarm link read ``/swarm/state`` instead), and every
        topic's publisher and subscriber counts, have stopped changing for ``lockstep_settle_s`` and
        every known lockstep participant is being read (wall time; at most ``lockstep_settle_max_s``).

        Lockstep paces the clock by the controllers alone. A sensor or recorder that joins after
        the first steps misses them, and its noise stream and bag then start elsewhere than in
        another run of the same inputs; waiting for the graph to be complete keeps runs identical.
        """
        params = self.params
        publishers = [self.clock_pub] + [p for v in self.vehicles for p in (v.odom_pub, v.imu_pub, v.rotors_pub)]
        if self.swarm.many:
            # With the swarm link nobody reads /clock or a vehicle's ground truth (the nodes take their time
            # from their input's stamps): without /swarm/state here, "at least one" never held and every
            # such fleet waited the whole lockstep_settle_max_s (20 s) before its first step.
            publishers.append(self.swarm.state_pub)
        start = changed = time.monotonic()
        counts = last_graph = None
        while not self._stop.is_set() and self.context.ok():
            now = time.monotonic()
            current = [p.get_subscription_count() for p in publishers]
            graph = self._graph_snapshot()
            if (current, graph) != (counts, last_graph):
                counts, last_graph, changed = current, graph, now
            # Nobody yet is no graph yet: DDS discovery can take longer than lockstep_settle_s.
            settled = (now - changed >= params.lockstep_settle_s and any(current)
                       and self.lockstep_outputs.all_armed())
            if settled or now - start >= params.lockstep_settle_max_s:
                break
            # No state yet: a participant answers t = 0 once, and only a reader already there hears it.
            time.sleep(0.05)
        participants = " ".join(p.topic for p in self.lockstep_outputs.gate.participants()) or "none"
        swarm = f" and {counts[-1]} to /swarm/state" if counts and self.swarm.many else ""
        self.get_logger().info(f"lockstep: starting with {counts[1] if counts else 0} subscribers to ground truth"
                               f"{swarm} after {time.monotonic() - start:.1f} s; participants: {participants}")
        self.lockstep_outputs.started = True

    def _graph_snapshot(self) -> list[tuple[str, int, int]]:
        """Every topic in the graph with its publisher and subscriber counts.

        Lockstep starts once this stops changing too: nodes that subscribe to each other's outputs
        (depth noise to the camera, the recorder to every topic it discovers) must be connected
        before the first outputs go out, or one run's bag starts with frames another run's lacks.
        """
        return sorted((name, self.count_publishers(name), self.count_subscribers(name))
                      for name, _ in self.get_topic_names_and_types())

    def _lockstep_ready(self) -> bool:
        """Lockstep: true once every vehicle has a new command for this period and every
        participant has produced its output for the last due time up to now.

        A command or an output wakes this thread through the middleware (:meth:`_wait_for_lockstep_inputs`),
        and it takes both here; while a participant holds the clock it also looks every
        ``LockstepOutputs.POLL_S``."""
        with self.inputs_lock:
            commands_only = any(v.pending_controls is None for v in self.vehicles)
        ready = self._wait_for_lockstep_inputs(self._lockstep_wait_s, commands_only)
        self.command_arrived.clear()  # before looking: whatever arrives from now on wakes the next wait
        self._take_commands(ready)
        with self.inputs_lock:
            commands = all(v.pending_controls is not None for v in self.vehicles)
        if not commands:
            self._lockstep_wait_s = 0.05
            return False
        # The outputs are taken only when those known so far hold the clock: stamps only grow, so what
        # releases the clock now also releases it after taking, and with the participants some lockstep_slack_s
        # behind, most periods need no take at all (about ten takes a period otherwise, half of them empty).
        # A wait that woke on outputs takes them (or they would end every wait at once), and at least every
        # TAKE_PERIODS periods the queues are emptied all the same (the end-of-run marker, bounded queues).
        awaited_ns = self._awaited_clock_ns()
        holdups = self.lockstep_outputs.holdups_from_known(awaited_ns)
        if holdups or not commands_only or self._periods_untaken >= self.TAKE_PERIODS:
            # A wait for the commands alone did not look at the outputs: take from every participant's topic.
            self.lockstep_outputs.take_arrived(None if commands_only else ready)
            self._periods_untaken = 0
            holdups = self.lockstep_outputs.holdups_from_known(awaited_ns)
        else:
            self._periods_untaken += 1
        feedback = self._feedback_holdups()
        if (holdups or feedback) and self.lockstep_outputs.started and self.lockstep_outputs.drop_overdue(awaited_ns, feedback):
            holdups, feedback = self.lockstep_outputs.holdups(awaited_ns), self._feedback_holdups()
        held = bool(holdups or feedback)
        if held and (ended := self.lockstep_outputs.end_reached(holdups)):
            self.get_logger().info(ended)
            self._publish_status(DiagnosticStatus.OK, "physics: lockstep", ended)
        self._lockstep_wait_s = LockstepOutputs.POLL_S if held else 0.05
        return not held and not self._stop.is_set()

    def _wait_for_lockstep_inputs(self, timeout_s: float, commands_only: bool = False) -> set[int] | None:
        """Block until a motor command or a participant's output is waiting, or anything else wakes
        the simulation (:class:`Wakeup`), at most ``timeout_s``. The middleware wakes this thread
        directly: no executor callback and no handing over between threads on the critical path of
        every period (physics publishes, the controller answers, physics steps).

        ``commands_only``: while a vehicle's command for this period is missing, the outputs cannot
        release the clock, so only the commands (and the wake-up) end the wait: a sensor's output
        arriving before the controller's answer no longer wakes this thread for nothing (issue 34:
        nearly one such wake-up a period, about 0.2 ms of CPU each).

        Returns the subscriptions (``handle.pointer``) that hold a message, so only those are taken
        from (some ten empty takes a period otherwise); None where the middleware could not say (take
        from all). One that receives after the wait is taken after the next, which returns at once."""
        outputs = len(self.lockstep_outputs.taken)
        if self._wait_set is None or self._wait_set[0] != outputs:  # a participant's topic joined
            commands = [v.command_subscription.handle for v in self.vehicles]
            if self.swarm.commands_subscription is not None:
                commands.append(self.swarm.commands_subscription.handle)
            handles = commands + [s.handle for s in self.lockstep_outputs.taken.values()]
            self._wait_set = (outputs, (handles, self._new_wait_set(len(handles))),
                              (commands, self._new_wait_set(len(commands))))
        handles, wait_set = self._wait_set[2 if commands_only else 1]
        try:
            wait_set.clear_entities()
            for handle in handles:
                wait_set.add_subscription(handle)
            wait_set.add_guard_condition(self.command_arrived.guard)
            wait_set.wait(int(timeout_s * 1e9))
            return set(wait_set.get_ready_entities("subscription"))
        except Exception:  # noqa: BLE001 - the context is going away: the loop's own checks end it
            time.sleep(min(timeout_s, 0.01))
            return None

    def _new_wait_set(self, subscriptions: int):
        return _rclpy.WaitSet(subscriptions, 1, 0, 0, 0, 0, self.context.handle)

    def _take_commands(self, ready: set[int] | None = None) -> None:
        """Lockstep: hand every motor command waiting to its vehicle (simulation thread). A message
        that is no Float64MultiArray, or an unusable row, is dropped with one line, as InputGuard would.
        ``ready``: only these subscriptions (``handle.pointer``) hold messages (None: try every one)."""
        for handle, pointer, message_type, on_bytes, topic in self._command_readers():
            if ready is not None and pointer not in ready:
                continue
            while True:  # take_raw's take, without two calls and three properties per message
                try:
                    with handle:
                        taken = handle.take_message(message_type, True)
                except Exception:  # noqa: BLE001 - destroyed while stopping, or a middleware error: nothing to take
                    taken = None
                if taken is None:
                    break
                try:
                    on_bytes(taken[0])
                except Exception as error:  # noqa: BLE001 - no message may stop the simulation
                    self.get_logger().warning(f"{topic}: message dropped "
                                              f"(Float64MultiArray: {type(error).__name__}: {error})",
                                              throttle_duration_sec=2.0)

    def _command_readers(self) -> list[tuple]:
        """(handle, its pointer, message type, handler, topic) of each motor-command subscription, looked
        up once (every lockstep period takes from them; each is a Python property)."""
        if self._command_reader_cache is None or self._command_reader_cache[0] != len(self.vehicles):
            subscriptions = [(v.command_subscription, v.on_motor_commands) for v in self.vehicles]
            if self.swarm.commands_subscription is not None:
                subscriptions.append((self.swarm.commands_subscription, self.swarm.on_commands))
            self._command_reader_cache = (len(self.vehicles), [
                (s.handle, s.handle.pointer, s.msg_type, on_bytes, s.topic_name) for s, on_bytes in subscriptions])
        return self._command_reader_cache[1]

    def _lockstep_awaited(self) -> str:
        """Who lockstep is waiting for, for the log."""
        with self.inputs_lock:
            waiting = [f"/{v.name}/motor_commands" for v in self.vehicles if v.pending_controls is None]
        waiting += [holdup.describe() + self.lockstep_outputs.why_silent(holdup.participant.topic)
                    for holdup in self.lockstep_outputs.holdups(self._awaited_clock_ns()) + self._feedback_holdups()]
        return ", ".join(waiting) or "nothing (released)"

    def _clock_ns(self) -> int:
        return int(round(self.world.time_s * 1e9))

    def _feedback_holdups(self) -> list:
        """Lockstep: the participants whose output this node applies to the next step (each vehicle's
        ``rotor_drag/wrench``) that have not answered the state just sent. They are awaited at the clock
        itself, not ``lockstep_slack_s`` behind as the sensors are: the step then applies the wrench of its
        own state in every run. (With the slack, the step applied whichever wrench had arrived: two runs with
        rotor drag recorded different flights.) No wrench can be newer than that state's: the next state is
        sent after the step. A rotor drag node that leaves, or stays silent past ``lockstep_timeout_s``, is
        dropped from the participants like any other and holds nothing."""
        return self.lockstep_outputs.holdups_of(self._clock_ns(), self._wrench_topics)

    def _awaited_clock_ns(self) -> int:
        """The clock the participants' outputs must have caught up with: ``lockstep_slack_s`` behind."""
        return self._clock_ns() - int(round(self.params.lockstep_slack_s * 1e9))

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
        stamp_ns = self._clock_ns()
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
