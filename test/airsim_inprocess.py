"""An in-process Graph for the AirSim API core: the real physics world and flight supervisor, no ROS.

Implements :class:`aerial_sim.airsim.graph.Graph` / ``VehicleLink`` the way
the ``airsim_api`` node does on topics, but by calling the physics world and
the flight supervisor directly, stepped as fast as possible by an asyncio task
(one control period, 4 ms of sim time, per step). Flight tasks of the API can
so be tested end to end in a fraction of a second, with the same controller
that flies the launched graph.
"""

from __future__ import annotations

import asyncio

from aerial_sim.airsim.settings import spawn_poses
from aerial_sim.airsim.graph import BatteryReading, KinematicsReading, RotorReading, ServiceAnswer, SimClock
from aerial_sim.control.controller import ControllerParams, VehicleState
from aerial_sim.control.supervisor import CommandRejected, FlightSupervisor, SupervisorParams
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld, RunControl
from aerial_sim.vehicles.multirotor import load_vehicle

PERIOD_S = 0.004


class InProcessVehicle:
    def __init__(self, graph: "InProcessGraph", name: str, vehicle_type: str):
        self.graph = graph
        self.name = name  # the AirSim name (a settings file may rename it)
        self.world_name = name  # the physics world's
        self.vehicle = load_vehicle(vehicle_type)
        self.supervisor = FlightSupervisor(SupervisorParams(), ControllerParams(), self.vehicle)
        self.kinematics = self.imu = self.pressure = self.magnetic = self.gps = None
        self.rotors = self.lidar = self.distance = self.battery = None
        self.pose_set = None
        self.commands: list[tuple] = []  # every command sent, for assertions

    @property
    def controller_mode(self) -> str:
        return self.supervisor.mode.value

    def refresh(self) -> None:
        truth = self.graph.world.ground_truth(self.world_name)
        self.kinematics = KinematicsReading(truth.time_s, truth.position, truth.orientation, truth.velocity_world,
                                            truth.angular_velocity_body, truth.linear_acceleration_world,
                                            truth.angular_acceleration_body)
        rotors = self.graph.world.rotor_states(self.world_name)
        self.rotors = RotorReading(truth.time_s, tuple(r.speed_rad_s for r in rotors), tuple(r.thrust_n for r in rotors))
        pack = self.graph.world.batteries.get(self.world_name)
        if pack is not None:  # as the physics node publishes it on <ns>/battery
            self.battery = BatteryReading(truth.time_s, pack.state.voltage_v, pack.state.current_a, pack.state.charge,
                                          pack.params.capacity_mah, pack.params.cells)
        self.supervisor.observe(VehicleState.from_ground_truth(truth))

    def _service(self, command) -> ServiceAnswer:
        try:
            return ServiceAnswer(True, command())
        except CommandRejected as error:
            return ServiceAnswer(False, str(error))

    async def arm(self, arm):
        return self._service(lambda: self.supervisor.arm(arm))

    async def takeoff(self):
        return self._service(self.supervisor.takeoff)

    async def land(self):
        return self._service(self.supervisor.land)

    async def reset_controller(self):
        return self._service(self.supervisor.reset)

    async def kill(self):
        return self._service(self.supervisor.kill)

    def _command(self, kind, command):
        self.commands.append(kind)
        try:
            command(self.graph.world.time_s)
        except CommandRejected:
            pass  # the node logs it; the vehicle keeps its mode

    def send_pose(self, position, yaw):
        self._command(("pose", tuple(position), yaw), lambda t: self.supervisor.command_pose(t, position, yaw))

    def send_velocity(self, velocity, yaw_rate):
        self._command(("velocity", tuple(velocity), yaw_rate),
                      lambda t: self.supervisor.command_velocity(t, velocity, yaw_rate))

    def send_attitude(self, orientation, altitude, throttle):
        self._command(("attitude", tuple(orientation), altitude, throttle),
                      lambda t: self.supervisor.command_attitude(t, orientation, altitude, throttle))

    def send_rates(self, rates, altitude, throttle):
        self._command(("rates", tuple(rates), altitude, throttle),
                      lambda t: self.supervisor.command_rates(t, rates, altitude, throttle))

    def send_motors(self, controls):
        self._command(("motors", tuple(controls)), lambda t: self.supervisor.command_motors(t, controls))

    def teleport(self, position, orientation):
        self.graph.world.set_kinematics(self.world_name, position, orientation, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
        self.pose_set = (self.graph.world.time_s, tuple(position), tuple(orientation))
        self.refresh()


class InProcessGraph:
    """Physics + one flight supervisor per vehicle, stepped by :meth:`run` (start it as a task)."""

    def __init__(self, vehicles=(("drone1", "quad_x"),), yaw: float = 0.0, settings=None, battery=None):
        """``settings``: an AirSim settings file's spawn poses, applied as the physics node applies them;
        ``battery``: every vehicle's pack (BatteryParams; None: an ideal supply)."""
        self.world = PhysicsWorld(PhysicsParams(battery=battery))
        self.vehicles = {}
        positions, yaws = [(0.0, 0.0, 0.0)] * len(vehicles), [yaw] * len(vehicles)
        if settings is not None:
            positions, yaws = spawn_poses(settings, positions, yaws)
        for (name, kind), position, heading in zip(vehicles, positions, yaws):
            self.world.add_vehicle(name, load_vehicle(kind), position=position, yaw=heading)
        for name, kind in vehicles:
            self.vehicles[name] = InProcessVehicle(self, name, kind)
            self.vehicles[name].refresh()
        self.clock = SimClock()
        self.run_control = RunControl()
        self.wind = (0.0, 0.0, 0.0)
        self._edits: list = []  # world edits for the next step (the physics node's reset)

    @property
    def paused(self) -> bool:
        return self.run_control.paused

    async def run(self, real_time_factor: float | None = None) -> None:
        """Step for ever: as fast as possible, or at most ``real_time_factor`` x real time (for a real
        client in another process, whose own sleeps are in wall time)."""
        import time

        self.clock.advance(self.world.time_s)
        wall0, sim0 = time.monotonic(), self.world.time_s
        while True:
            while self._edits:  # also while paused, as the physics node applies them
                self._edits.pop(0)()
            if real_time_factor is not None:
                ahead = (self.world.time_s - sim0) / real_time_factor - (time.monotonic() - wall0)
                if ahead > 0:
                    await asyncio.sleep(ahead)
            if self.run_control.blocked:
                await asyncio.sleep(0.001)
                continue
            for link in self.vehicles.values():
                controls = link.supervisor.update(self.world.time_s, VehicleState.from_ground_truth(
                    self.world.ground_truth(link.world_name)), PERIOD_S)
                self.world.set_controls(link.world_name, controls)
            self.world.step(round(PERIOD_S * self.world.params.rate_hz))
            self.run_control.stepped()
            for link in self.vehicles.values():
                link.refresh()
            self.clock.advance(self.world.time_s)
            await asyncio.sleep(0)

    async def pause(self, paused):
        self.run_control.pause(paused)
        return ServiceAnswer(True, "paused" if paused else "running")

    async def continue_for(self, seconds):
        start = self.clock.now_s
        self.run_control.continue_for(round(seconds / PERIOD_S))
        await self.clock.wait_until(start + seconds - 1e-6)

    async def reset(self):
        """As the physics node's: answered once queued; the simulation applies it before its next step (paused
        or not) and says so on each vehicle's ``set_pose/applied``."""
        self._edits.append(self._reset_now)
        return ServiceAnswer(True, "reset")

    def _reset_now(self) -> None:
        for link in self.vehicles.values():
            self.world.reset_vehicle(link.world_name)
            body = self.world.bodies[link.world_name]
            link.pose_set = (self.world.time_s, tuple(body.position), tuple(body.orientation))
            link.refresh()

    async def add_vehicle(self, spawn):
        if spawn.name in self.world.bodies:
            return ServiceAnswer(False, f"a vehicle named '{spawn.name}' exists")
        self.world.add_vehicle(spawn.name, load_vehicle(spawn.vehicle_type), spawn.position, spawn.yaw)
        link = InProcessVehicle(self, spawn.name, spawn.vehicle_type)
        link.refresh()
        self.vehicles[spawn.name] = link
        return ServiceAnswer(True, f"{spawn.name} ({spawn.vehicle_type}) added")

    def set_wind(self, wind_enu):
        self.wind = tuple(wind_enu)
        self.world.set_wind(wind_enu)

