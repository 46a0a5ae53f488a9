"""Swarm mission node (issue 14): N vehicles take off, fly a formation around a moving centre, and land.

A client of each vehicle's flight controller like any user's: per vehicle it
calls ``/<v>/arm`` (std_srvs/SetBool) and ``/<v>/takeoff`` (std_srvs/Trigger),
streams ``/<v>/cmd_pose`` (PoseStamped in ``map``) at the formation setpoints of
:mod:`aerial_sim.control.formation` (climb to the formation altitude, a
synchronised assembly flight to the slots, the formation flight, a hold), calls
``/<v>/land`` and waits on ``/diagnostics`` for every vehicle's disarm. Then it
writes into its run folder ``swarm_summary.txt`` (per-vehicle Hausdorff distance
of the flown track against the planned path; the closest approach between any
two vehicles, with the pair and the time), ``swarm_tracks.csv``,
``swarm_top_view.png`` and ``swarm_metrics.json``, and exits (0: every vehicle
flew and landed; 1: a vehicle failed or did not land; 2: bad parameters), so a
launch file can end the simulation with ``on_exit: shutdown``.

Vehicles come from ``vehicle_names`` or, when that is empty, from the same fleet
selection as the physics node (``fleet`` or ``vehicles``). A vehicle whose
services are missing or refuse is reported (log and summary) and the others fly
on: slots are assigned among the vehicles that reached the formation altitude.
Setpoints go out on a sim-time timer (``rate_hz``); it does not drive lockstep
runs that wait for their client (``lockstep`` only matches the stream QoS).
"""

from __future__ import annotations

import csv
import json
import math
import time
from dataclasses import asdict, dataclass

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from std_srvs.srv import SetBool, Trigger

from aerial_sim.cdr.decode import OdometryFields
from aerial_sim.config import ParamsError, require, require_positive
from aerial_sim.control.formation import (
    FormationPlan,
    assembly_duration,
    assembly_setpoints,
    assign_slots,
    check_separation,
    closest_approach,
    hausdorff_per_vehicle,
    load_formation,
    planned_path,
    resample_tracks,
    summary_text,
)
from aerial_sim.control.geometry import quat_from_yaw, yaw_of
from aerial_sim.nodes.ros.parameters import declare_params, run_folder_parameter
from aerial_sim.nodes.ros.qos import COMMAND_QOS, stream_qos
from aerial_sim.nodes.ros.run import run_node
from aerial_sim.nodes.ros.services import SERVICE_QOS
from aerial_sim.nodes.ros.stamps import to_stamp
from aerial_sim.nodes.ros.subscriptions import subscribe_odometry
from aerial_sim.sensors.truth import UNUSABLE_ODOMETRY, truth_from_odometry
from aerial_sim.vehicles.fleet import FleetSelection, require_vehicle_names

#: Phases of the flight in which a track sample counts for the Hausdorff figures.
FORMATION_PHASES = ("formation", "settle")


@dataclass(frozen=True)
class SwarmMissionNodeParams:
    #: Swarm mission under config/missions/ (swarm_ring, swarm_grid) or a YAML path.
    mission: str = "swarm_ring"
    #: The vehicles to fly (their namespaces); empty = the fleet selected by ``fleet`` or ``vehicles``.
    vehicle_names: tuple[str, ...] = ()
    fleet: str = ""
    vehicles: int = 0
    #: Results folder; auto (or empty) = the launch's run folder, runs/<date-time>/ (aerial_sim.run_folder).
    output_dir: str = "auto"
    #: Match the physics node's stream QoS.
    lockstep: bool = False
    #: Setpoints per simulated second.
    rate_hz: float = 50.0
    #: A vehicle has reached its climb target within this distance and below ``settle_speed_m_s``.
    arrive_tolerance_m: float = 0.25
    settle_speed_m_s: float = 0.3
    #: Wall-clock seconds to wait for a vehicle's services and first odometry.
    wait_for_services_s: float = 30.0
    #: Sim-time seconds from the first takeoff until every vehicle must be at the formation altitude.
    climb_timeout_s: float = 40.0
    #: Sim-time seconds allowed from land to disarm.
    land_timeout_s: float = 60.0
    #: Tracks are resampled to common instants at this rate for the closest approach, Hz.
    track_rate_hz: float = 50.0

    def __post_init__(self):
        require_positive(self, "rate_hz", "arrive_tolerance_m", "settle_speed_m_s", "wait_for_services_s",
                         "climb_timeout_s", "land_timeout_s", "track_rate_hz")
        require_vehicle_names(self.vehicle_names)
        require(len(set(self.vehicle_names)) == len(self.vehicle_names),
                f"vehicle_names must be unique, got {list(self.vehicle_names)}")

    def names(self) -> tuple[str, ...]:
        """The vehicles to fly: ``vehicle_names``, else the selected fleet's (ParamsError when none)."""
        if self.vehicle_names:
            return self.vehicle_names
        selection = FleetSelection(fleet=self.fleet, vehicles=self.vehicles)
        if not selection.given:
            raise ParamsError("no vehicles: give vehicle_names (e.g. [drone1, drone2]), fleet or vehicles")
        return tuple(v.name for v in selection.load())


class SwarmVehicle:
    """One vehicle of the swarm: its clients, publisher, state, phase and recorded track."""

    def __init__(self, node: "SwarmMissionNode", name: str, qos):
        self.name = name
        self.phase = "wait"  # wait, arm, takeoff, climb, ready, landing, landed, failed
        self.outcome = "did not start"
        self.pending = False
        self.position: np.ndarray | None = None
        self.speed = math.inf
        self.yaw = 0.0
        self.target: np.ndarray | None = None
        self.slot: int | None = None
        self.track: list[tuple] = []  # (t, x, y, z, mission phase, ref x, ref y, ref z)
        self.pose_pub = node.create_publisher(PoseStamped, f"/{name}/cmd_pose", COMMAND_QOS)
        self.arm_client = node.create_client(SetBool, f"/{name}/arm", qos_profile=SERVICE_QOS)
        self.takeoff_client = node.create_client(Trigger, f"/{name}/takeoff", qos_profile=SERVICE_QOS)
        self.land_client = node.create_client(Trigger, f"/{name}/land", qos_profile=SERVICE_QOS)
        subscribe_odometry(node, f"/{name}/ground_truth/odom", self.on_odom, qos)
        self._node = node

    @property
    def alive(self) -> bool:
        return self.phase not in ("failed", "landed")

    def services_ready(self) -> bool:
        return all(c.service_is_ready() for c in (self.arm_client, self.takeoff_client, self.land_client))

    def on_odom(self, odom: OdometryFields) -> None:
        truth = truth_from_odometry(odom)
        if truth is None:
            self._node.get_logger().warning(f"{self.name}: {UNUSABLE_ODOMETRY}", throttle_duration_sec=5)
            return
        position = np.array(truth.position)
        if self.position is None:
            self.yaw = yaw_of(truth.orientation)
        self.position, self.speed = position, float(np.linalg.norm(truth.velocity_world))
        ref = self.target if self.target is not None else (math.nan,) * 3
        self.track.append((odom.time_s, *map(float, position), self._node.phase, *map(float, ref)))

    def send_pose(self, stamp: float, position) -> None:
        self.target = np.asarray(position, dtype=float)
        message = PoseStamped()
        message.header.stamp = to_stamp(stamp)
        message.header.frame_id = "map"
        message.pose.position.x, message.pose.position.y, message.pose.position.z = map(float, self.target)
        q = message.pose.orientation
        q.w, q.x, q.y, q.z = quat_from_yaw(self.yaw)
        self.pose_pub.publish(message)

    def samples(self, phases=None) -> tuple[np.ndarray, np.ndarray]:
        rows = [r for r in self.track if phases is None or r[4] in phases]
        times = np.array([r[0] for r in rows], dtype=float)
        points = np.array([r[1:4] for r in rows], dtype=float).reshape(-1, 3)
        if len(times):  # strictly increasing (a repeated stamp would break interpolation)
            keep = np.concatenate([[True], np.diff(times) > 0])
            times, points = times[keep], points[keep]
        return times, points


class SwarmMissionNode(Node):
    PHASES = ("startup", "assemble", "formation", "settle", "landing", "done")

    def __init__(self):
        super().__init__("swarm_mission")
        self.params = declare_params(self, SwarmMissionNodeParams)
        self.mission = load_formation(self.params.mission)
        self.names = list(self.params.names())
        self.separation = check_separation(self.mission, len(self.names))  # bad geometry: one line, exit 2
        self.output_dir = run_folder_parameter(self.params.output_dir)
        self.exit_code: int | None = None
        self.phase = "startup"
        self.phase_started = math.nan
        self.started_wall = time.monotonic()
        self.first_takeoff: float | None = None
        self.plan: FormationPlan | None = None
        self.flyers: list[SwarmVehicle] = []
        self.assembly = None  # (starts, goals, duration)
        qos = stream_qos(self.params.lockstep)
        self.vehicles = [SwarmVehicle(self, name, qos) for name in self.names]
        self.by_name = {v.name: v for v in self.vehicles}
        self.create_subscription(DiagnosticArray, "/diagnostics", self.on_diagnostics, COMMAND_QOS)
        self.create_timer(1.0 / self.params.rate_hz, self.tick)  # sim time (use_sim_time)
        self.create_timer(0.5, self.check_wall_timeouts, clock=Clock(clock_type=ClockType.STEADY_TIME))
        m = self.mission
        self.get_logger().info(
            f"swarm mission '{m.name}': {len(self.names)} vehicles ({', '.join(self.names)}) in a {m.formation} "
            f"({self.separation:.2f} m between slots) at z = {m.altitude_m:g} m; waiting for their flight controllers"
        )

    @property
    def done(self) -> bool:
        """The mission has finished (landed or failed); :func:`run_node` then stops spinning."""
        return self.exit_code is not None

    # -- the clock -----------------------------------------------------------------

    def now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def tick(self) -> None:
        if self.exit_code is not None:
            return
        now = self.now()
        getattr(self, f"phase_{self.phase}")(now)

    def check_wall_timeouts(self) -> None:
        """Vehicles whose services or odometry never appeared (wall clock: also when no /clock runs)."""
        if self.exit_code is not None or self.phase != "startup":
            return
        if time.monotonic() - self.started_wall > self.params.wait_for_services_s:
            for vehicle in self.vehicles:
                if vehicle.phase == "wait":
                    missing = "odometry" if vehicle.services_ready() else "arm/takeoff/land services"
                    self.fail(vehicle, f"no {missing} after {self.params.wait_for_services_s:g} s")
            if not any(v.alive for v in self.vehicles):
                self.finish(1, "no vehicle could be flown")

    # -- phases ----------------------------------------------------------------------

    def phase_startup(self, now: float) -> None:
        for vehicle in self.vehicles:
            if vehicle.pending or not vehicle.alive:
                continue
            if vehicle.phase == "wait" and vehicle.position is not None and vehicle.services_ready():
                self.call(vehicle, vehicle.arm_client, SetBool.Request(data=True), "arm", now)
            elif vehicle.phase == "arm":  # armed: take off
                self.call(vehicle, vehicle.takeoff_client, Trigger.Request(), "takeoff", now)
            elif vehicle.phase == "takeoff":  # taking off: climb straight up to the formation altitude
                if self.first_takeoff is None:
                    self.first_takeoff = now
                vehicle.phase = "climb"
                vehicle.target = np.array([*vehicle.position[:2], self.mission.altitude_m])
            if vehicle.phase in ("climb", "ready"):
                vehicle.send_pose(now, vehicle.target)
                if vehicle.phase == "climb" and self.arrived(vehicle):
                    vehicle.phase = "ready"
                    self.get_logger().info(f"[{now:7.2f} s] {vehicle.name} at the formation altitude")
        alive = [v for v in self.vehicles if v.alive]
        if not alive:
            self.finish(1, "no vehicle could be flown")
            return
        if self.first_takeoff is not None and now - self.first_takeoff > self.params.climb_timeout_s:
            for vehicle in alive:
                if vehicle.phase != "ready":
                    self.fail(vehicle, f"not at the formation altitude {self.params.climb_timeout_s:g} s after the first takeoff")
            alive = [v for v in self.vehicles if v.alive]
        if alive and all(v.phase == "ready" for v in alive):
            if math.isnan(self.phase_started):
                self.phase_started = now  # everyone is up: hold, then assemble
            if now - self.phase_started >= self.mission.hold_s:
                self.start_assembly(now, alive)
        elif not alive:
            self.finish(1, "no vehicle reached the formation altitude")

    def start_assembly(self, now: float, flyers: list[SwarmVehicle]) -> None:
        self.flyers = flyers
        self.plan = FormationPlan.build(self.mission, len(flyers))
        starts = np.array([v.target for v in flyers])
        slots = self.plan.setpoints(0.0)
        for vehicle, slot in zip(flyers, assign_slots(starts, slots)):
            vehicle.slot = int(slot)
        goals = np.array([slots[v.slot] for v in flyers])
        duration = assembly_duration(self.mission, starts, goals)
        self.assembly = (starts, goals, duration)
        assigned = ", ".join(f"{v.name} -> slot {v.slot}" for v in flyers)
        self.set_phase("assemble", now, f"assembling the {self.mission.formation} in {duration:.1f} s ({assigned})")

    def phase_assemble(self, now: float) -> None:
        starts, goals, duration = self.assembly
        setpoints = assembly_setpoints(starts, goals, now - self.phase_started, duration)
        self.send_all(now, setpoints)
        if now - self.phase_started >= duration + self.mission.hold_s:
            self.set_phase("formation", now, f"formation flight: {self.plan.centre.length_m:.1f} m of centre path, "
                                             f"about {self.plan.duration_s:.1f} s of sim time")

    def phase_formation(self, now: float) -> None:
        elapsed = now - self.phase_started
        self.send_all(now, np.array([self.plan.setpoint(v.slot, elapsed) for v in self.flyers]))
        if elapsed >= self.plan.duration_s:
            self.set_phase("settle", now, "formation flight done; holding the last slots")

    def phase_settle(self, now: float) -> None:
        self.send_all(now, np.array([self.plan.setpoint(v.slot, self.plan.duration_s) for v in self.flyers]))
        if now - self.phase_started < self.mission.hold_s:
            return
        if not self.mission.land:
            self.finish(0 if all(v.phase == "ready" for v in self.vehicles) else 1, "mission done (no landing requested)")
            return
        self.set_phase("landing", now, "landing every vehicle")
        for vehicle in self.vehicles:
            if vehicle.alive and vehicle.phase == "ready":
                self.call(vehicle, vehicle.land_client, Trigger.Request(), "land", now)

    def phase_landing(self, now: float) -> None:
        waiting = [v for v in self.vehicles if v.phase in ("ready", "landing") or (v.pending and v.alive)]
        if not waiting:
            landed = all(v.phase == "landed" for v in self.vehicles)
            self.finish(0 if landed else 1, "every vehicle landed and disarmed" if landed
                        else "mission done, but not every vehicle flew and landed")
        elif now - self.phase_started > self.params.land_timeout_s:
            for vehicle in waiting:
                self.fail(vehicle, f"not disarmed {self.params.land_timeout_s:g} s after land", land=False)
            self.finish(1, "not every vehicle landed")

    def phase_done(self, now: float) -> None:
        pass

    # -- helpers ---------------------------------------------------------------------

    def arrived(self, vehicle: SwarmVehicle) -> bool:
        return (float(np.linalg.norm(vehicle.position - vehicle.target)) < self.params.arrive_tolerance_m
                and vehicle.speed < self.params.settle_speed_m_s)

    def send_all(self, now: float, setpoints) -> None:
        for vehicle, setpoint in zip(self.flyers, setpoints):
            if vehicle.alive:
                vehicle.send_pose(now, setpoint)

    def set_phase(self, phase: str, now: float, why: str) -> None:
        self.phase, self.phase_started = phase, now
        self.get_logger().info(f"[{now:7.2f} s] {why}")

    def call(self, vehicle: SwarmVehicle, client, request, name: str, now: float) -> None:
        """One service call of ``vehicle``; its answer moves the vehicle on (or fails it, the rest fly on)."""
        self.get_logger().info(f"[{now:7.2f} s] {vehicle.name}: calling {name}")
        vehicle.pending = True

        def done(future):
            vehicle.pending = False
            try:
                response = future.result()
            except Exception as error:  # noqa: BLE001 - a broken call is that vehicle's failure only
                response, reason = None, f"{type(error).__name__}: {error}"
            else:
                reason = response.message if response is not None else "no response"
            if response is None or not response.success:
                waited = time.monotonic() - self.started_wall
                if name == "arm" and "no vehicle state" in reason and waited < self.params.wait_for_services_s:
                    vehicle.phase = "wait"  # the flight controller has not seen odometry yet: ask again
                    return
                self.fail(vehicle, f"{name} failed: {reason}", land=name != "land")
                return
            vehicle.phase = {"arm": "arm", "takeoff": "takeoff", "land": "landing"}[name]

        client.call_async(request).add_done_callback(done)

    def fail(self, vehicle: SwarmVehicle, why: str, land: bool = True) -> None:
        """Report a vehicle's failure and go on without it (a vehicle in the air is asked to land)."""
        if not vehicle.alive:
            return
        airborne = vehicle.phase in ("takeoff", "climb", "ready")
        vehicle.phase, vehicle.outcome = "failed", f"failed: {why}"
        self.get_logger().error(f"{vehicle.name}: {why}; the others fly on")
        if land and airborne:
            vehicle.land_client.call_async(Trigger.Request())  # best effort: it lands on its own

    def on_diagnostics(self, message: DiagnosticArray) -> None:
        for status in message.status:
            vehicle = self.by_name.get(status.hardware_id)
            if vehicle is None or not status.name.endswith("flight control"):
                continue
            values = {kv.key: kv.value for kv in status.values}
            if values.get("armed") == "false" and vehicle.phase == "landing":
                vehicle.phase, vehicle.outcome = "landed", "landed and disarmed"
                self.get_logger().info(f"{vehicle.name} landed and disarmed")

    def finish(self, code: int, why: str) -> None:
        if self.exit_code is not None:
            return
        self.phase = "done"
        if code == 0:  # (two call sites: rclpy refuses a second severity at one)
            self.get_logger().info(why)
        else:
            self.get_logger().error(why)
        for vehicle in self.vehicles:
            if vehicle.phase not in ("landed", "failed"):
                vehicle.outcome = f"not landed (last phase {vehicle.phase})" if self.mission.land else "flew (no landing)"
        try:
            self.write_results()
        except Exception as error:  # results are a courtesy; report, do not mask the mission's outcome
            self.get_logger().error(f"could not write the results: {error}")
            code = code or 1
        self.exit_code = code

    # -- results -----------------------------------------------------------------------

    def write_results(self) -> None:
        folder = self.output_dir
        folder.mkdir(parents=True, exist_ok=True)
        paths, tracks = {}, {}
        if self.plan is not None:
            for vehicle in self.flyers:
                paths[vehicle.name] = planned_path(self.plan, vehicle.slot)
                tracks[vehicle.name] = vehicle.samples(FORMATION_PHASES)[1]
        metrics = hausdorff_per_vehicle(tracks, paths)
        recorded = [v for v in self.vehicles if len(v.track) >= 2]
        grid, positions = resample_tracks([v.samples() for v in recorded], self.params.track_rate_hz)
        approach = closest_approach(grid, positions)
        pair = (recorded[approach.first].name, recorded[approach.second].name) if approach is not None else None
        flight_s = self.plan.duration_s if self.plan is not None else 0.0
        outcomes = {v.name: v.outcome for v in self.vehicles}
        text = summary_text(self.mission, self.names, metrics, approach, pair, self.separation, outcomes, flight_s)
        (folder / "swarm_summary.txt").write_text(text + "\n")
        self.write_tracks(folder / "swarm_tracks.csv")
        (folder / "swarm_metrics.json").write_text(json.dumps({
            "mission": asdict(self.mission),
            "planned_separation_m": self.separation,
            "closest_approach": None if approach is None else {
                "distance_m": approach.distance_m, "vehicles": list(pair), "time_s": approach.time_s},
            "vehicles": {name: {"outcome": outcomes[name], "slot": self.by_name[name].slot,
                                **(asdict(metrics[name]) if name in metrics else {})} for name in self.names},
        }, indent=2))
        if recorded:
            write_top_view(folder / "swarm_top_view.png", self.mission.name, self.vehicles, paths,
                           self.plan, approach, pair, grid, positions, recorded)
        print(f"\n{text}\nresults in {folder.resolve()}\n", flush=True)

    def write_tracks(self, path) -> None:
        with open(path, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["time_s", "vehicle", "x_m", "y_m", "z_m", "phase", "ref_x_m", "ref_y_m", "ref_z_m"])
            rows = sorted(((r, v.name) for v in self.vehicles for r in v.track), key=lambda item: item[0][0])
            for row, name in rows:
                t, x, y, z, phase, rx, ry, rz = row
                writer.writerow([f"{t:.6f}", name, f"{x:.6f}", f"{y:.6f}", f"{z:.6f}", phase,
                                 f"{rx:.6f}", f"{ry:.6f}", f"{rz:.6f}"])


def write_top_view(path, title, vehicles, paths, plan, approach, pair, grid, positions, recorded) -> None:
    """Top view: every vehicle's flown track and planned path, the centre's path, the closest approach."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    if plan is not None:
        centre = plan.centre.position(np.linspace(0.0, plan.duration_s, 400))
        axis.plot(centre[:, 0], centre[:, 1], ":", color="0.4", linewidth=1, label="formation centre")
    for index, vehicle in enumerate(vehicles):
        color = colors[index % len(colors)]
        _, points = vehicle.samples()
        if len(points):
            axis.plot(points[:, 0], points[:, 1], color=color, linewidth=1.2, label=f"{vehicle.name} flown")
            axis.plot(points[0, 0], points[0, 1], "o", color=color, markersize=4)
        if vehicle.name in paths:
            planned = paths[vehicle.name]
            axis.plot(planned[:, 0], planned[:, 1], "--", color=color, linewidth=0.8)
    if approach is not None:
        row = int(np.searchsorted(grid, approach.time_s))
        a, b = positions[row, approach.first], positions[row, approach.second]
        axis.plot([a[0], b[0]], [a[1], b[1]], "k-", linewidth=2,
                  label=f"closest approach {approach.distance_m:.2f} m ({pair[0]}-{pair[1]})")
    axis.set_aspect("equal", adjustable="datalim")
    axis.set_xlabel("x (east) [m]")
    axis.set_ylabel("y (north) [m]")
    axis.grid(True, alpha=0.3)
    axis.legend(loc="best", fontsize=7)
    axis.set_title(f"{title}: top view (dashed: planned)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(args=None):
    """Fly the swarm mission: 0 when every vehicle landed, 1 when one failed, 2 on bad parameters."""
    return run_node(SwarmMissionNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
