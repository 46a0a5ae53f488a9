"""The physics node's simulation control (:class:`SimulationControl`): pause, continue for a while, reset, a
new run, a vehicle added, the mean wind; each request is checked in the executor thread and, where it
changes the world, queued for the simulation thread (:meth:`PhysicsNode.edit_world`)."""

from __future__ import annotations

import math
import threading
from dataclasses import fields, replace
from typing import TYPE_CHECKING

from geometry_msgs.msg import Vector3Stamped
from rcl_interfaces.srv import SetParametersAtomically
from std_msgs.msg import Float64
from std_srvs.srv import SetBool, Trigger

from aerial_sim.config import ParamsError
from aerial_sim.environment.wind import WindField
from aerial_sim.nodes._physics.inputs import VehicleChannel
from aerial_sim.nodes._physics.world_setup import start_position
from aerial_sim.nodes.ros.parameters import reread_params
from aerial_sim.nodes.ros.qos import COMMAND_QOS
from aerial_sim.nodes.ros.services import serve
from aerial_sim.physics.world import warm_batched_path
from aerial_sim.vehicles.multirotor import load_vehicle
from aerial_sim.vehicles.spawn import VehicleSpawn

if TYPE_CHECKING:  # annotations only: that module imports this one
    from aerial_sim.nodes.physics import PhysicsNode


class SimulationControl:
    """Services ``/physics/pause`` (std_srvs/SetBool), ``/physics/reset`` and ``/physics/restart``
    (std_srvs/Trigger), ``/physics/add_vehicle`` (rcl_interfaces/SetParametersAtomically) and topics
    ``/physics/continue_for`` (std_msgs/Float64, s) and ``/physics/wind`` (geometry_msgs/Vector3Stamped);
    :mod:`aerial_sim.nodes.physics` says what each does."""

    def __init__(self, node: "PhysicsNode"):
        self.node = node
        self.adding: set[str] = set()  # names of vehicles added but not yet in the world
        serve(node, SetBool, "/physics/pause", self.on_pause)
        serve(node, Trigger, "/physics/reset", self.on_reset)
        serve(node, Trigger, "/physics/restart", self.on_restart)
        serve(node, SetParametersAtomically, "/physics/add_vehicle", self.on_add_vehicle)
        node.create_subscription(Float64, "/physics/continue_for", self.on_continue_for, COMMAND_QOS)
        node.create_subscription(Vector3Stamped, "/physics/wind", self.on_wind, COMMAND_QOS)

    def on_pause(self, request, response):
        node = self.node
        with node.inputs_lock:
            node.run_control.pause(request.data)
        node.command_arrived.set()
        response.success = True
        response.message = "paused" if request.data else "running"
        node.get_logger().info(f"simulation {response.message} at t = {node.world.time_s:.3f} s")
        return response

    def on_continue_for(self, message: Float64) -> None:
        node = self.node
        seconds = message.data
        if not math.isfinite(seconds) or seconds < 0 or seconds > 86400.0:
            node.get_logger().warning(f"/physics/continue_for {seconds!r} refused: need 0..86400 s",
                                      throttle_duration_sec=2.0)
            return
        period_s = node.params.steps_per_period / node.params.rate_hz
        with node.inputs_lock:
            node.run_control.continue_for(math.ceil(seconds / period_s - 1e-9))
        node.command_arrived.set()

    def on_reset(self, request, response):
        node = self.node

        def reset(world):
            for vehicle in node.vehicles:
                world.reset_vehicle(vehicle.name)
                vehicle.pending_controls, vehicle.wrench = None, None
                body = world.bodies[vehicle.name]  # back at its start: said as a teleport is
                vehicle.say_pose_applied(world, body.position, body.orientation)

        node.edit_world(reset)
        response.success, response.message = True, "every vehicle back at its start"
        node.get_logger().info("reset: every vehicle back at its start")
        return response

    def on_add_vehicle(self, request, response):
        """``/physics/add_vehicle``: a new vehicle (:class:`VehicleSpawn`) in the world from the next control
        period on (a world that turns batched with it: once the batched kernels are loaded), with its own topics;
        a bad request is refused with the reason, the world unchanged."""
        node = self.node
        result = response.result
        try:
            values = {p.name: _parameter_value(p.value) for p in request.parameters}
            spawn = VehicleSpawn.from_values(values, node.params.max_position_m)
            if node.params.lockstep:
                raise ParamsError("not in lockstep (the clock would wait for a controller that starts in seconds)")
            if spawn.name in node.world.bodies or spawn.name in self.adding:
                raise ParamsError(f"a vehicle named '{spawn.name}' exists")
            vehicle = load_vehicle(spawn.vehicle_type)
        except (ParamsError, ValueError, TypeError) as error:
            result.successful, result.reason = False, f"add_vehicle refused: {error}"
            node.get_logger().warning(result.reason)
            return response
        self.adding.add(spawn.name)
        channel = VehicleChannel(node, spawn.name, len(vehicle.rotors), False, node.params.battery_enabled)
        position = start_position(node.terrain, vehicle, spawn.position)

        def add(world):
            world.add_vehicle(spawn.name, vehicle, position=position, yaw=spawn.yaw)
            node.swarm.add_vehicle(spawn.name)
            node.vehicles.append(channel)
            self.adding.discard(spawn.name)

        stepping, batched_from = node.world.params.stepping, node.world.params.batched_min_vehicles
        if stepping == "batched" or (stepping == "auto" and len(node.world.bodies) + len(self.adding) >= batched_from):
            # The world turns batched with this vehicle: its kernels are loaded first, in a thread beside the
            # simulation (about 1 CPU s; 12 with no precompiled cache), and the vehicle joins after. Loaded by
            # the simulation thread's first batched step instead, they held the clock and every vehicle's
            # ground truth for that long (at load 10-15, 5-10 s of wall time).
            def warm_then_add() -> None:
                try:
                    warm_batched_path()
                finally:
                    node.edit_world(add)

            threading.Thread(target=warm_then_add, name="physics-warm-up", daemon=True).start()
        else:
            node.edit_world(add)
        result.successful = True
        result.reason = (f"{spawn.name} ({spawn.vehicle_type}) added at ({position[0]:.2f}, {position[1]:.2f}, "
                         f"{position[2]:.2f}) m, yaw {spawn.yaw:.3f} rad")
        node.get_logger().info(result.reason)
        return response

    def on_restart(self, request, response):
        """A new run in this graph (``/physics/restart``): see the module doc. Parameters other than the
        wind's that changed since the start shape the graph (scene, vehicles, rates): refused, relaunch."""
        node = self.node
        try:
            params = node._with_airsim_spawns(reread_params(node, node.params).with_fleet(), quiet=True)
            same_shape = replace(params, wind_enu_m_s=node.params.wind_enu_m_s, wind=node.params.wind)
            if same_shape != node.params:
                changed = [f.name for f in fields(params) if getattr(same_shape, f.name) != getattr(node.params, f.name)]
                raise ParamsError(f"{', '.join(changed)} changed: that needs a relaunch, not a restart")
            wind_field = WindField(params.wind.field_params(params.wind_enu_m_s), len(params.vehicle_names))
        except ParamsError as error:
            node.get_logger().warning(f"restart refused: {error}")
            response.success, response.message = False, str(error)
            return response
        node.params = params

        def restart(world):
            world.restart(wind_field)
            node.periods_done = 0
            if node.params.lockstep:
                node.lockstep_wait.take_commands()  # answers to the run before's last state: dropped below
            for vehicle in node.vehicles:
                vehicle.pending_controls, vehicle.wrench = None, None
            if node.lockstep_outputs is not None:
                node.lockstep_outputs.restart()

        with node.inputs_lock:
            node._restart_queued = True
        node.edit_world(restart)
        response.success, response.message = True, "a new run from t = 0"
        node.get_logger().info(f"restart: a new run from t = 0, wind {tuple(params.wind_enu_m_s)} m/s")
        return response

    def on_wind(self, message: Vector3Stamped) -> None:
        node = self.node
        wind = (message.vector.x, message.vector.y, message.vector.z)
        if message.header.frame_id not in ("", "map") or not all(math.isfinite(v) and abs(v) < 200.0 for v in wind):
            node.get_logger().warning(f"/physics/wind refused: needs frame 'map' and |v| < 200 m/s, got {wind}",
                                      throttle_duration_sec=2.0)
            return
        node.edit_world(lambda world: world.set_wind(wind))


def _parameter_value(value):
    """The Python value of an ``rcl_interfaces/ParameterValue`` (string, double, integer or their arrays)."""
    from rcl_interfaces.msg import ParameterType  # noqa: PLC0415

    kinds = {ParameterType.PARAMETER_STRING: "string_value", ParameterType.PARAMETER_DOUBLE: "double_value",
             ParameterType.PARAMETER_INTEGER: "integer_value",
             ParameterType.PARAMETER_DOUBLE_ARRAY: "double_array_value",
             ParameterType.PARAMETER_INTEGER_ARRAY: "integer_array_value"}
    if value.type not in kinds:
        raise ParamsError(f"a value of parameter type {value.type} (use string, double, integer or their arrays)")
    got = getattr(value, kinds[value.type])
    return list(got) if value.type in (ParameterType.PARAMETER_DOUBLE_ARRAY,
                                       ParameterType.PARAMETER_INTEGER_ARRAY) else got
