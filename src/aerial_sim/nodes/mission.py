"""Mission runner node: flies a mission file through the flight controller's public interface.

It is a client like any user's: it calls ``arm`` and ``takeoff``, streams
``cmd_pose`` while climbing and holding and ``cmd_vel`` (``map``) along the
pattern, calls ``land``, waits on ``/diagnostics`` for the disarm, then writes
the run's results (track CSV, Hausdorff distance and RMS cross-track error
against the commanded path, plots, summary) and exits, so a launch file can end
the whole simulation with ``on_exit: shutdown``.

Everything is driven by ``ground_truth/odom`` callbacks (no blocking loop): every
stamp goes into the track, and for the first stamp at or after each ``1 /
setpoint_rate_hz`` of sim time (50 Hz; 0: every stamp) the runner either sends one
setpoint stamped with it or makes one service call
(:func:`aerial_sim.control.mission.is_setpoint_due`). That is the contract the flight
controller's ``lockstep_wait_for_client`` (with ``lockstep_client_rate_hz`` set to the
same rate) relies on for bit-for-bit repeatable runs.

In lockstep the runner is also a lockstep participant: ``mission/progress`` (std_msgs/Header) is
stamped with each setpoint stamp it has handled, and the clock waits for it like for a sensor.
When the mission ends (``tail_s`` after the disarm), progress stops, so the clock stops at a sim
time fixed by the run itself; the runner waits ``drain_s`` of wall time for the graph's last
outputs to reach the recorder, then exits. Without it, the flight controller no longer waits for
its client once the vehicle lands on its own, and how far the clock ran before the launch
stopped the graph (so how long the bag was) was wall-clock timing (issue 32).

Kept for the next run (``exit_when_done: false``, a warm batch run) it ends each run the same way (the
``end_of_run`` progress frame, so the clock stops where a cold run's would and the recorder's bag ends
where a cold run's does) but stays; once the physics node says the clock stopped it writes
``mission_end.json`` (:data:`aerial_sim.run_folder.MISSION_END_FILE`) in the run folder: landed, or
failed and why. A new run whose ``mission`` or ``output_dir`` is unusable is refused, and says so there
at once.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped, TwistStamped
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from std_msgs.msg import Header
from std_srvs.srv import SetBool, Trigger

from aerial_sim.cdr.decode import OdometryFields
from aerial_sim.cdr.encode import encode_header, encode_pose_stamped, encode_twist_stamped
from aerial_sim.config import ParamsError, require_non_negative, require_positive
from aerial_sim.control.geometry import quat_from_yaw, yaw_of
from aerial_sim.control.mission import is_setpoint_due, load_mission, pattern_path, require_setpoint_rate
from aerial_sim.control.track import TrackRecorder, compare_tracks, summary_text, write_plots
from aerial_sim.control.trajectory import PathFollower, Trajectory
from aerial_sim.physics.rotation import rotate
from aerial_sim.run_folder import MISSION_END_FILE
from aerial_sim.nodes.ros.clocks import InputStampClock
from aerial_sim.nodes.ros.parameters import declare_params, reread_params, run_folder_parameter
from aerial_sim.nodes.ros.lockstep import END_OF_RUN_FRAME, END_OF_RUN_TEXT, END_OF_RUN_WAIT_S, participant_publisher
from aerial_sim.nodes.ros.qos import COMMAND_QOS, LOCKSTEP_QOS, stream_qos
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.services import SERVICE_QOS
from aerial_sim.nodes.ros.stamps import from_stamp, to_stamp, to_stamp_ns
from aerial_sim.nodes.ros.subscriptions import subscribe_odometry

#: The AirSim paper's sim-vs-real Hausdorff distances (FSR 2017, sec. 4), shown beside ours.
PAPER_HAUSDORFF_M = {"square_5m": 0.65, "circle_10m": 1.47}


@dataclass(frozen=True)
class MissionNodeParams:
    #: Mission under config/missions/ (square_5m, circle_10m, figure_eight) or a YAML path.
    mission: str = "square_5m"
    #: Results folder; auto (or empty) = the launch's run folder, runs/<date-time>/ (aerial_sim.run_folder).
    output_dir: str = "auto"
    #: Match the physics node's QoS (reliable streams in lockstep).
    lockstep: bool = False
    #: Altitude is reached within this distance and below ``settle_speed_m_s``, m.
    arrive_tolerance_m: float = 0.1
    settle_speed_m_s: float = 0.2
    #: Wall-clock seconds to wait for the flight controller's services and its first state (an arm refused
    #: for want of it is asked again), counted from the first odometry this node receives.
    wait_for_services_s: float = 30.0
    #: Sim-time seconds allowed from land to disarm.
    land_timeout_s: float = 60.0
    #: Draw xy_over_time.png and top_view.png on landing. False leaves them to a later step that reads
    #: track.csv (``aerial_sim batch``'s post-processing): matplotlib then does not hold up the launch's end
    #: (about 1.5 s of wall time, the whole graph still simulating, on a loaded 2-core machine).
    write_plots: bool = True
    #: Sim-time seconds the mission lets the graph run on after the disarm before it ends the launch:
    #: every stream up to the landing reaches the bag, including outputs a lockstep participant may
    #: still owe within the physics node's ``lockstep_slack_s`` (at most 0.4 s).
    tail_s: float = 0.5
    #: Sim-time rate of the setpoints and service calls (0: one per odometry stamp). In lockstep the
    #: flight controller's lockstep_client_rate_hz must be the same (the launch files set both).
    setpoint_rate_hz: float = 50.0
    #: Lockstep: wall seconds the runner waits, with the clock held at the run's end, before it exits and
    #: so ends the launch: the last outputs of the graph (stamped up to that end) reach the recorder.
    drain_s: float = 0.5
    #: End the node (and with ``on_exit: shutdown`` the launch) when the mission is done. False keeps it
    #: for the next run in the same graph (a warm batch run): when sim time goes back (``/physics/restart``)
    #: it flies a new run, with ``mission`` and ``output_dir`` as they are then (``ros2 param set``).
    exit_when_done: bool = True

    def __post_init__(self):
        require_positive(self, "arrive_tolerance_m", "settle_speed_m_s", "wait_for_services_s", "land_timeout_s")
        require_non_negative(self, "tail_s", "drain_s")
        require_setpoint_rate(self, "setpoint_rate_hz")


class MissionNode(Node):
    PHASES = ("wait", "arm", "takeoff", "climb", "pattern", "settle", "land", "landing", "done")

    def __init__(self):
        super().__init__("mission")
        self.params = declare_params(self, MissionNodeParams)
        self.mission = load_mission(self.params.mission)
        self.output_dir = run_folder_parameter(self.params.output_dir)
        self.namespace = self.get_namespace().strip("/")
        self.exit_code: int | None = None
        self.run_number = 0
        self.refused_at: float | None = None  # the restart's stamp whose new run was refused
        self._start_run()

        self.pose_pub = self.create_publisher(PoseStamped, "cmd_pose", COMMAND_QOS)
        self.vel_pub = self.create_publisher(TwistStamped, "cmd_vel", COMMAND_QOS)
        self.arm_client = self.create_client(SetBool, "arm", qos_profile=SERVICE_QOS)
        self.takeoff_client = self.create_client(Trigger, "takeoff", qos_profile=SERVICE_QOS)
        self.land_client = self.create_client(Trigger, "land", qos_profile=SERVICE_QOS)
        subscribe_odometry(self, "ground_truth/odom", self.on_odom, stream_qos(self.params.lockstep),
                           clock=InputStampClock(self), shared=True)
        self.create_subscription(DiagnosticArray, "/diagnostics", self.on_diagnostics, COMMAND_QOS)
        self.progress = None  # lockstep: this runner's own participant output (module doc)
        if self.params.lockstep and self.params.setpoint_rate_hz > 0:
            self.progress = participant_publisher(self, Header, "mission/progress", LOCKSTEP_QOS, True,
                                                  self.params.setpoint_rate_hz, inputs=("ground_truth/odom",))
        self.create_timer(0.2, self.check_ending, clock=Clock(clock_type=ClockType.STEADY_TIME))
        m = self.mission
        self.get_logger().info(
            f"mission '{m.name}': {m.pattern} size {m.size_m:g} m at {m.speed_m_s:g} m/s, "
            f"takeoff to {m.takeoff_altitude_m:g} m; waiting for the flight controller"
        )

    def _start_run(self) -> None:
        """The state of a mission's start: at start-up, and for each new run in the same graph."""
        self.run_number += 1
        self.finished = False
        self.recorder = TrackRecorder()
        self.phase = "wait"
        self.answered: str | None = None  # a service answer's phase, waiting for the next due stamp
        self.phase_started = 0.0
        self.pending = None  # an in-flight service call
        self.deferred = None  # odometry that arrived while a call was in flight
        self.last_stamp = -math.inf
        self.last_due = -math.inf  # the last stamp answered (a re-sent one is answered again)
        self.target = None
        self.yaw = 0.0
        self.path = None
        self.follower = None
        self.reference = None
        self.disarmed_at: float | None = None  # sim time of the flight controller's disarm (its diagnostics stamp)
        self.next_progress = 0.25
        # Lockstep, after the land call: progress stamps held until the flight controller has reported
        # its state at them (its /diagnostics, at every due stamp until the disarm): ``release_progress``.
        self.land_called_at: float | None = None
        self.fc_reported = -math.inf
        self.progress_held: list[float] = []
        self.last_progress = -math.inf
        self.outcome: tuple[int, str] | None = None  # (exit code, why) once finished
        self.ending = None  # lockstep: (exit code, wall time) until the clock stops
        # Wall time of the first state seen (the run's start): the service waits count from there. A
        # lockstep graph starts its clock only once every node is up, which under load took 30 s.
        self.started_wall: float | None = None

    def _restart(self, stamp: float) -> bool:
        """Sim time went back to ``stamp`` (``/physics/restart``): a new run with the ``mission`` and
        ``output_dir`` parameters as they are now; false (and one line) when they are unusable."""
        try:
            params = reread_params(self, self.params)
            mission, output_dir = load_mission(params.mission), run_folder_parameter(params.output_dir)
        except (ParamsError, OSError, ValueError) as error:
            self.get_logger().error(f"new run refused: {error}", throttle_duration_sec=5.0)
            if self.refused_at != stamp and not self.params.exit_when_done:
                self.refused_at = stamp  # once per restart: whoever started it learns at once
                try:
                    folder = run_folder_parameter(str(self.get_parameter("output_dir").value))
                except (ParamsError, OSError, ValueError):
                    folder = self.output_dir
                self.write_end(2, f"new run refused: {error}", folder, self.run_number + 1)
            return False
        self.refused_at = None
        self.params, self.mission, self.output_dir = params, mission, output_dir
        self._start_run()
        self.get_logger().info(f"sim time went back to {stamp:.3f} s: run {self.run_number}, mission '{mission.name}', "
                               f"results in {output_dir}")
        return True

    @property
    def done(self) -> bool:
        """The mission has finished (landed or failed); :func:`run_node` then stops spinning."""
        return self.exit_code is not None

    # -- driven by odometry ----------------------------------------------------

    def on_odom(self, odom: OdometryFields) -> None:
        stamp = odom.time_s
        if stamp < self.last_stamp - 1e-6 and self.exit_code is None and not self._restart(stamp):
            return
        # Lockstep re-sends while it waits for us (an answer not yet in effect counts as out of "wait").
        repeated = stamp == self.last_stamp and self.phase == "wait" and self.answered is None
        if (stamp <= self.last_stamp and not repeated) or self.exit_code is not None or self.finished:
            return
        due = is_setpoint_due(stamp, self.last_stamp, self.params.setpoint_rate_hz) or stamp == self.last_due
        self.last_stamp = stamp
        if due and self.pending is None and self.answered is not None:
            self.phase, self.answered = self.answered, None  # a service's answer takes effect at a due stamp
        orientation = odom.orientation_wxyz
        velocity = rotate(orientation, odom.linear_velocity)  # body -> world, in plain floats: every message
        if not repeated:
            self.recorder.add(stamp, odom.position, velocity, self.phase, self.reference)
        if not due:
            return  # the controller flies the last setpoint; the next one goes out on the grid
        self.last_due = stamp
        sample = (stamp, np.array(odom.position), orientation, np.array(velocity))
        if self.pending is not None:
            self.deferred = sample  # one request per step: act on it when the service answers
        else:
            self.act(sample)
        if self.progress is not None and not self.finished:  # none once finished: the clock stops
            self.progress_held.append(stamp)
            self.release_progress()

    def release_progress(self) -> None:
        """Publish the held progress stamps the run has settled: all before the land call; after it,
        those the flight controller has reported its state at (so whether the vehicle had disarmed by
        then is known here), and none from ``tail_s`` past the disarm on. The clock, which waits for
        this progress, then stops at the same stamp in every run, however late the disarm's message
        reaches this node (issue 32)."""
        while self.progress_held and not self.finished:
            stamp = self.progress_held[0]
            if self.disarmed_at is not None and stamp >= self.disarmed_at + self.params.tail_s:
                self.progress_held.clear()
                return
            if (self.land_called_at is not None and stamp > self.land_called_at and self.disarmed_at is None
                    and stamp > self.fc_reported):
                return
            self.progress_held.pop(0)
            self.progress.publish(encode_header(to_stamp_ns(stamp), ""))  # CDR: half the typed Header's cost
            self.last_progress = stamp

    def act(self, sample) -> None:
        getattr(self, f"phase_{self.phase}")(*sample)

    def phase_wait(self, stamp, position, orientation, velocity):
        if self.started_wall is None:
            self.started_wall = time.monotonic()
        if all(c.service_is_ready() for c in (self.arm_client, self.takeoff_client, self.land_client)):
            self.call(self.arm_client, SetBool.Request(data=True), "arm", stamp)
        elif time.monotonic() - self.started_wall > self.params.wait_for_services_s:
            self.finish(1, f"flight controller services not available after {self.params.wait_for_services_s:g} s")

    def phase_arm(self, stamp, position, orientation, velocity):
        self.call(self.takeoff_client, Trigger.Request(), "takeoff", stamp)
        self.target = position + [0.0, 0.0, self.mission.takeoff_altitude_m]
        self.yaw = yaw_of(orientation)

    def phase_takeoff(self, stamp, position, orientation, velocity):
        self.set_phase("climb", stamp, f"climbing to z = {self.target[2]:.2f} m")
        self.phase_climb(stamp, position, orientation, velocity)

    def phase_climb(self, stamp, position, orientation, velocity):
        self.send_pose(stamp, self.target)
        if not self.arrived(position, velocity):
            self.phase_started = stamp  # the hold time counts from arrival
        elif stamp - self.phase_started >= self.mission.hold_s:
            self.path = pattern_path(self.mission, self.target)
            trajectory = Trajectory(self.path, self.mission.speed_m_s, self.mission.acceleration_m_s2)
            m = self.mission
            self.follower = PathFollower(trajectory, m.tracking_gain, m.max_correction_m_s, m.lookahead_s)
            self.set_phase(
                "pattern", stamp,
                f"flying {m.pattern}: {trajectory.length_m:.1f} m, about {trajectory.duration_s:.1f} s of sim time",
            )

    def phase_pattern(self, stamp, position, orientation, velocity):
        elapsed = stamp - self.phase_started
        command, self.reference = self.follower.command(elapsed, position)
        self.send_velocity(stamp, command)
        duration = self.follower.trajectory.duration_s
        if elapsed >= self.next_progress * duration:
            self.get_logger().info(f"pattern {int(self.next_progress * 100)}% ({elapsed:.1f} s)")
            self.next_progress += 0.25
        if elapsed >= duration:
            self.target = self.path[-1]
            self.set_phase("settle", stamp, "pattern done; holding the last point")

    def phase_settle(self, stamp, position, orientation, velocity):
        if stamp - self.phase_started < self.mission.hold_s:
            self.send_pose(stamp, self.target)
        elif self.mission.land:
            self.set_phase("land", stamp, "landing")
            self.call(self.land_client, Trigger.Request(), "land", stamp)  # this step's one request
            self.land_called_at = stamp
        else:
            self.finish(0, "mission done (no landing requested)")

    def phase_land(self, stamp, position, orientation, velocity):
        self.set_phase("landing", stamp, "descending")

    def phase_landing(self, stamp, position, orientation, velocity):
        if self.disarmed_at is not None:
            self.end_after_tail(stamp)
        elif stamp - self.phase_started > self.params.land_timeout_s:
            self.finish(1, f"not disarmed {self.params.land_timeout_s:g} s after land")

    def end_after_tail(self, stamp: float) -> None:
        """Finish once ``stamp`` is ``tail_s`` past the disarm (the graph runs on for the tail)."""
        if stamp < self.disarmed_at + self.params.tail_s or self.finished:
            return
        # The track ends at the disarm's own stamp, however late its message arrived: runs repeat exactly.
        self.recorder.truncate_after(self.disarmed_at)
        self.finish(0, f"landed and disarmed at t = {self.disarmed_at:.3f} s")

    def phase_done(self, *args):
        pass

    # -- helpers ---------------------------------------------------------------

    def arrived(self, position, velocity) -> bool:
        return (
            np.linalg.norm(position - self.target) < self.params.arrive_tolerance_m
            and np.linalg.norm(velocity) < self.params.settle_speed_m_s
        )

    def set_phase(self, phase: str, stamp: float, why: str) -> None:
        self.phase, self.phase_started = phase, stamp
        self.get_logger().info(f"[{stamp:7.2f} s] {why}")

    def call(self, client, request, name: str, stamp: float) -> None:
        self.get_logger().info(f"[{stamp:7.2f} s] calling {name}")
        future = client.call_async(request)
        self.pending, self.deferred, self.answered = name, None, None
        run = self.run_number

        def done(result_future):
            if run != self.run_number:
                return  # answers a call of the run before a restart
            self.pending = None
            # The phase an answer starts takes effect at the first due stamp after the call, whenever
            # the answer arrives: the samples' phase labels (track.csv) repeat from run to run.
            deferred, self.deferred = self.deferred, None
            response = result_future.result()
            if response is None or not response.success:
                reason = response.message if response is not None else "no response"
                waited = time.monotonic() - self.started_wall
                if name == "arm" and "no vehicle state" in reason and waited < self.params.wait_for_services_s:
                    # The flight controller has not seen odometry yet: ask again at once, on the re-sent stamp
                    # (the phase label stays "wait" either way).
                    self.phase, self.deferred = "wait", deferred
                    return
                self.finish(1, f"{name} failed: {reason}")
                return
            self.take_effect(name, deferred, stamp)

        future.add_done_callback(done)

    def take_effect(self, phase: str, deferred, call_stamp: float) -> None:
        """A service's answer: ``phase`` from the first due stamp after the call. If that sample came
        in before the answer (``deferred``), its samples are relabelled and it is acted on now (or the
        flight controller, waiting for this client in lockstep, would wait in vain); else the next due
        sample starts the phase (:meth:`on_odom`)."""
        if deferred is not None and deferred[0] > call_stamp:
            self.recorder.relabel_from(deferred[0], phase)
            self.phase = phase
            self.act(deferred)
            # Samples that came after it while the answer was on its way (the flight controller, which
            # counts the call as this client's move, let the clock go on): labelled as if the answer had
            # come first (issue 32: two runs' tracks said `land` and `landing` at the same two stamps).
            self.recorder.relabel_from(deferred[0], self.phase, after=True)
        else:
            self.answered = phase

    def send_pose(self, stamp: float, position) -> None:
        self.reference = point = tuple(map(float, position))
        # CDR bytes, as the typed PoseStamped serializes (test_cdr): building and publishing that cost 4x as much
        self.pose_pub.publish(encode_pose_stamped(to_stamp_ns(stamp), "map", point, quat_from_yaw(self.yaw)))

    def send_velocity(self, stamp: float, velocity) -> None:
        """``cmd_vel`` in ``map``, written as CDR bytes (the typed message cost a quarter of this node's CPU)."""
        linear = tuple(map(float, velocity))
        self.vel_pub.publish(encode_twist_stamped(to_stamp_ns(stamp), "map", linear, (0.0, 0.0, 0.0)))

    def on_diagnostics(self, message: DiagnosticArray) -> None:
        for status in message.status:
            if self.ending is not None and status.name == "physics: lockstep" and status.message.startswith(END_OF_RUN_TEXT):
                self.exit_after_drain(self.ending[0])  # the clock has stopped where the run ends
                return
            if status.hardware_id == self.namespace and status.name.endswith("flight control"):
                values = {kv.key: kv.value for kv in status.values}
                if values.get("armed") == "false" and self.phase in ("land", "landing") and self.disarmed_at is None:
                    self.disarmed_at = from_stamp(message.header.stamp)
                self.fc_reported = max(self.fc_reported, from_stamp(message.header.stamp))
                if self.progress_held:
                    self.release_progress()
                if self.disarmed_at is not None and self.phase == "landing" and self.exit_code is None:
                    self.end_after_tail(self.last_stamp)  # its stamps came before the disarm's message

    def finish(self, code: int, why: str) -> None:
        if self.exit_code is not None or self.finished:
            return
        self.finished = True
        self.phase = "done"
        if code == 0:  # (two call sites: rclpy refuses a second severity at one, and a kept node ends many runs)
            self.get_logger().info(why)
        else:
            self.get_logger().error(why)
        try:
            self.write_results()
        except Exception as error:  # results are a courtesy; report, do not mask the mission's outcome
            self.get_logger().error(f"could not write the results: {error}")
            code = code or 1
        self.outcome = (code, why)
        if self.progress is not None and math.isfinite(self.last_progress):
            # The run ends here: its last progress stamp again, marked (END_OF_RUN_FRAME). The physics node
            # then stops the clock for good where the next would be due, and says so: exit after that (or,
            # kept for the next run, write MISSION_END_FILE: the graph is where a cold run's would stop).
            header = Header(frame_id=END_OF_RUN_FRAME)
            header.stamp = to_stamp(self.last_progress)
            self.progress.publish(header)
            self.ending = (code, time.monotonic())
            return
        self.exit_after_drain(code)

    def exit_after_drain(self, code: int) -> None:
        self.ending = None
        if not self.params.exit_when_done:
            self.write_end(code)  # the graph stays for the next run; whoever starts it drains (doc/batch.md)
            return
        if self.progress is not None:
            time.sleep(self.params.drain_s)  # the clock is held: let the last outputs reach the recorder
        self.exit_code = code

    def write_end(self, code: int, why: str | None = None, folder=None, run: int | None = None) -> None:
        """Kept for the next run (``exit_when_done: false``): MISSION_END_FILE in the run folder, written
        last (renamed into place) once the clock has stopped where the run ends (or at once, for a new run
        refused): the run's outcome for a warm batch worker, which starts the next run (or retries this
        one) from here."""
        if why is None:
            why = self.outcome[1] if self.outcome is not None else ""
        folder = self.output_dir if folder is None else folder
        end = {"run": self.run_number if run is None else run, "code": code,
               "outcome": "landed" if code == 0 else "failed", "why": why}
        try:
            folder.mkdir(parents=True, exist_ok=True)
            partial = folder / f".{MISSION_END_FILE}.partial"
            partial.write_text(json.dumps(end) + "\n")
            partial.replace(folder / MISSION_END_FILE)
        except OSError as error:
            self.get_logger().error(f"could not write {MISSION_END_FILE}: {error}")

    def check_ending(self) -> None:
        """Lockstep: exit after END_OF_RUN_WAIT_S without the physics node's word that the clock stopped."""
        if self.ending is not None and time.monotonic() - self.ending[1] > END_OF_RUN_WAIT_S:
            self.get_logger().warning(f"lockstep: the physics node did not say the clock stopped in "
                                      f"{END_OF_RUN_WAIT_S:g} s; ending the run anyway (the bag's end may differ "
                                      "between runs)")
            self.exit_after_drain(self.ending[0])

    def write_results(self) -> None:
        if self.path is None or len(self.recorder.positions("pattern")) < 2:
            self.get_logger().warning("no pattern was flown: no track to evaluate")
            return
        folder = self.output_dir
        folder.mkdir(parents=True, exist_ok=True)
        metrics = compare_tracks(self.recorder.positions("pattern"), self.path)
        times = self.recorder.times("pattern")
        self.recorder.write_csv(folder / "track.csv")
        np.savetxt(folder / "commanded_path.csv", self.path, delimiter=",", header="x_m,y_m,z_m", comments="")
        if self.params.write_plots:
            write_plots(self.recorder, self.path, folder, self.mission.name)
        trajectory = self.follower.trajectory
        text = summary_text(
            self.mission.name, metrics, self.mission.speed_m_s, float(times[-1] - times[0]), trajectory.length_m,
            PAPER_HAUSDORFF_M.get(self.mission.name),
        )
        (folder / "summary.txt").write_text(text + "\n")
        (folder / "metrics.json").write_text(json.dumps({"mission": asdict(self.mission), **asdict(metrics)}, indent=2))
        print(f"\n{text}\nresults in {folder.resolve()}\n", flush=True)


def run_mission(args: list[str] | None = None) -> int:
    """Fly the mission: 0 when it landed (or was stopped by SIGINT/SIGTERM), 1 when it failed, 2 on bad parameters."""
    return run_node(MissionNode, args)


def main(args=None):
    return run_mission(args)


if __name__ == "__main__":
    raise SystemExit(main())
