"""The physics node's wait, each lockstep period, for its inputs: one new motor command per vehicle
and the participants' outputs up to the clock (:class:`LockstepWait`, run by the simulation thread
of :mod:`aerial_sim.nodes.physics`; which outputs count is :class:`~aerial_sim.nodes._physics.lockstep.LockstepOutputs`'s).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

from aerial_sim.nodes._physics.lockstep import LockstepOutputs
from aerial_sim.nodes.ros.raw_take import waiting_cdr

if TYPE_CHECKING:  # annotations only: that module imports this one
    from aerial_sim.nodes.physics import PhysicsNode


class LockstepWait:
    """Lockstep: when the physics node may step its next period (:meth:`ready`), and the hold before
    the first one (:meth:`await_settled_subscribers`).

    The simulation thread waits on the middleware itself (a wait set over the motor-command and
    participants' subscriptions and the node's :class:`~aerial_sim.nodes._physics.inputs.Wakeup`), takes
    what arrived, and releases the clock once every vehicle has its command and no participant holds it
    (the rule of :mod:`aerial_sim.physics.lockstep`)."""

    #: The most periods in a row released on the participants' outputs known, without taking the new ones
    #: (:meth:`ready`).
    TAKE_PERIODS = 16

    def __init__(self, node: PhysicsNode):
        self.node = node
        self.outputs: LockstepOutputs = node.lockstep_outputs
        self._wrench_topics = frozenset(vehicle.wrench_topic for vehicle in node.vehicles)
        self._wait_s = 0.05
        self._wait_set = None  # (participant topics read, (handles, WaitSet): all, commands only)
        self._periods_untaken = 0  # periods released on the outputs known, without taking (ready)
        self._command_reader_cache = None  # (subscriptions, what _command_readers returns)

    def await_settled_subscribers(self) -> None:
        """Lockstep: hold the first step until the graph's subscribers to /clock and ground truth (at
        least one; a fleet's processes with the swarm link read ``/swarm/state`` instead), and every
        topic's publisher and subscriber counts, have stopped changing for ``lockstep_settle_s`` and
        every known lockstep participant is being read (wall time; at most ``lockstep_settle_max_s``).

        Lockstep paces the clock by the controllers alone. A sensor or recorder that joins after
        the first steps misses them, and its noise stream and bag then start elsewhere than in
        another run of the same inputs; waiting for the graph to be complete keeps runs identical.
        """
        node = self.node
        params = node.params
        publishers = [node.clock_pub] + [p for v in node.vehicles for p in (v.odom_pub, v.imu_pub, v.rotors_pub)]
        if node.swarm.many:
            # With the swarm link nobody reads /clock or a vehicle's ground truth (the nodes take their time
            # from their input's stamps): without /swarm/state here, "at least one" never held and every
            # such fleet waited the whole lockstep_settle_max_s (20 s) before its first step.
            publishers.append(node.swarm.state_pub)
        start = changed = time.monotonic()
        counts = last_graph = None
        while not node._stop.is_set() and node.context.ok():
            now = time.monotonic()
            current = [p.get_subscription_count() for p in publishers]
            graph = self._graph_snapshot()
            if (current, graph) != (counts, last_graph):
                counts, last_graph, changed = current, graph, now
            # Nobody yet is no graph yet: DDS discovery can take longer than lockstep_settle_s.
            settled = (now - changed >= params.lockstep_settle_s and any(current)
                       and self.outputs.all_armed())
            if settled or now - start >= params.lockstep_settle_max_s:
                break
            # No state yet: a participant answers t = 0 once, and only a reader already there hears it.
            time.sleep(0.05)
        participants = " ".join(p.topic for p in self.outputs.gate.participants()) or "none"
        swarm = f" and {counts[-1]} to /swarm/state" if counts and node.swarm.many else ""
        node.get_logger().info(f"lockstep: starting with {counts[1] if counts else 0} subscribers to ground "
                               f"truth{swarm} after {time.monotonic() - start:.1f} s; participants: {participants}")
        self.outputs.started = True

    def _graph_snapshot(self) -> list[tuple[str, int, int]]:
        """Every topic in the graph with its publisher and subscriber counts.

        Lockstep starts once this stops changing too: nodes that subscribe to each other's outputs
        (depth noise to the camera, the recorder to every topic it discovers) must be connected
        before the first outputs go out, or one run's bag starts with frames another run's lacks.
        """
        return sorted((name, self.node.count_publishers(name), self.node.count_subscribers(name))
                      for name, _ in self.node.get_topic_names_and_types())

    def ready(self) -> bool:
        """Lockstep: true once every vehicle has a new command for this period and every
        participant has produced its output for the last due time up to now.

        A command or an output wakes this thread through the middleware (:meth:`_wait_for_inputs`),
        and it takes both here; while a participant holds the clock it also looks every
        ``LockstepOutputs.POLL_S``."""
        node = self.node
        with node.inputs_lock:
            commands_only = any(v.pending_controls is None for v in node.vehicles)
        ready = self._wait_for_inputs(self._wait_s, commands_only)
        node.command_arrived.clear()  # before looking: whatever arrives from now on wakes the next wait
        self.take_commands(ready)
        with node.inputs_lock:
            commands = all(v.pending_controls is not None for v in node.vehicles)
        if not commands:
            self._wait_s = 0.05
            return False
        # The outputs are taken only when those known so far hold the clock: stamps only grow, so what
        # releases the clock now also releases it after taking, and with the participants some lockstep_slack_s
        # behind, most periods need no take at all (about ten takes a period otherwise, half of them empty).
        # A wait that woke on outputs takes them (or they would end every wait at once), and at least every
        # TAKE_PERIODS periods the queues are emptied all the same (the end-of-run marker, bounded queues).
        awaited_ns = self._awaited_clock_ns()
        holdups = self.outputs.holdups_from_known(awaited_ns)
        if holdups or not commands_only or self._periods_untaken >= self.TAKE_PERIODS:
            # A wait for the commands alone did not look at the outputs: take from every participant's topic.
            self.outputs.take_arrived(None if commands_only else ready)
            self._periods_untaken = 0
            holdups = self.outputs.holdups_from_known(awaited_ns)
        else:
            self._periods_untaken += 1
        feedback = self._feedback_holdups()
        if (holdups or feedback) and self.outputs.started and self.outputs.drop_overdue(awaited_ns, feedback):
            holdups, feedback = self.outputs.holdups(awaited_ns), self._feedback_holdups()
        held = bool(holdups or feedback)
        if held and (ended := self.outputs.end_reached(holdups)):
            node.get_logger().info(ended)
            node._publish_status(DiagnosticStatus.OK, "physics: lockstep", ended)
        self._wait_s = LockstepOutputs.POLL_S if held else 0.05
        return not held and not node._stop.is_set()

    def _wait_for_inputs(self, timeout_s: float, commands_only: bool = False) -> set[int] | None:
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
        outputs = len(self.outputs.taken)
        if self._wait_set is None or self._wait_set[0] != outputs:  # a participant's topic joined
            commands = [v.command_subscription.handle for v in self.node.vehicles]
            if self.node.swarm.commands_subscription is not None:
                commands.append(self.node.swarm.commands_subscription.handle)
            handles = commands + [s.handle for s in self.outputs.taken.values()]
            self._wait_set = (outputs, (handles, self._new_wait_set(len(handles))),
                              (commands, self._new_wait_set(len(commands))))
        handles, wait_set = self._wait_set[2 if commands_only else 1]
        try:
            wait_set.clear_entities()
            for handle in handles:
                wait_set.add_subscription(handle)
            wait_set.add_guard_condition(self.node.command_arrived.guard)
            wait_set.wait(int(timeout_s * 1e9))
            return set(wait_set.get_ready_entities("subscription"))
        except Exception:  # noqa: BLE001 - the context is going away: the loop's own checks end it
            time.sleep(min(timeout_s, 0.01))
            return None

    def _new_wait_set(self, subscriptions: int):
        return _rclpy.WaitSet(subscriptions, 1, 0, 0, 0, 0, self.node.context.handle)

    def take_commands(self, ready: set[int] | None = None) -> None:
        """Lockstep: hand every motor command waiting to its vehicle (simulation thread). A message
        that is no Float64MultiArray, or an unusable row, is dropped with one line, as InputGuard would.
        ``ready``: only these subscriptions (``handle.pointer``) hold messages (None: try every one)."""
        for handle, pointer, message_type, on_bytes, topic in self._command_readers():
            if ready is not None and pointer not in ready:
                continue
            for cdr in waiting_cdr(handle, message_type):
                try:
                    on_bytes(cdr)
                except Exception as error:  # noqa: BLE001 - no message may stop the simulation
                    self.node.get_logger().warning(f"{topic}: message dropped "
                                                   f"(Float64MultiArray: {type(error).__name__}: {error})",
                                                   throttle_duration_sec=2.0)

    def _command_readers(self) -> list[tuple]:
        """(handle, its pointer, message type, handler, topic) of each motor-command subscription, looked
        up once (every lockstep period takes from them; each is a Python property)."""
        if self._command_reader_cache is None or self._command_reader_cache[0] != len(self.node.vehicles):
            subscriptions = [(v.command_subscription, v.on_motor_commands) for v in self.node.vehicles]
            if self.node.swarm.commands_subscription is not None:
                subscriptions.append((self.node.swarm.commands_subscription, self.node.swarm.on_commands))
            self._command_reader_cache = (len(self.node.vehicles), [
                (s.handle, s.handle.pointer, s.msg_type, on_bytes, s.topic_name) for s, on_bytes in subscriptions])
        return self._command_reader_cache[1]

    def awaited(self) -> str:
        """Who lockstep is waiting for, for the log."""
        with self.node.inputs_lock:
            waiting = [f"/{v.name}/motor_commands" for v in self.node.vehicles if v.pending_controls is None]
        waiting += [holdup.describe() + self.outputs.why_silent(holdup.participant.topic)
                    for holdup in self.outputs.holdups(self._awaited_clock_ns()) + self._feedback_holdups()]
        return ", ".join(waiting) or "nothing (released)"

    def _feedback_holdups(self) -> list:
        """Lockstep: the participants whose output this node applies to the next step (each vehicle's
        ``rotor_drag/wrench``) that have not answered the state just sent. They are awaited at the clock
        itself, not ``lockstep_slack_s`` behind as the sensors are: the step then applies the wrench of its
        own state in every run. (With the slack, the step applied whichever wrench had arrived: two runs with
        rotor drag recorded different flights.) No wrench can be newer than that state's: the next state is
        sent after the step. A rotor drag node that leaves, or stays silent past ``lockstep_timeout_s``, is
        dropped from the participants like any other and holds nothing."""
        return self.outputs.holdups_of(self.node.clock_ns(), self._wrench_topics)

    def _awaited_clock_ns(self) -> int:
        """The clock the participants' outputs must have caught up with: ``lockstep_slack_s`` behind."""
        return self.node.clock_ns() - int(round(self.node.params.lockstep_slack_s * 1e9))
