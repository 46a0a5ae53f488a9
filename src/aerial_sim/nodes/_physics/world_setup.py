"""The physics node's world built from its parameters: vehicles, scene colliders, and a hovering copy
to measure the cost of flight with."""

from __future__ import annotations

from dataclasses import replace

from aerial_sim.config import ParamsError
from aerial_sim.environment.environment import EnvironmentParams
from aerial_sim.nodes._physics.params import PhysicsNodeParams
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
from aerial_sim.vehicles.multirotor import load_vehicle


def build_world(params: PhysicsNodeParams) -> PhysicsWorld:
    """Create the world, its scene colliders and its vehicles from the node parameters."""
    environment = EnvironmentParams(home=params.home, wind_enu_m_s=params.wind_enu_m_s)
    world = PhysicsWorld(PhysicsParams(rate_hz=params.rate_hz, linear_drag_enabled=params.linear_drag_enabled,
                                       stepping=params.stepping), environment)
    for collider in scene_colliders(params.scene):
        world.add_collider(collider)
    for index, (name, kind) in enumerate(zip(params.vehicle_names, params.vehicle_types)):
        position = tuple(params.initial_positions[3 * index : 3 * index + 3])
        world.add_vehicle(name, load_vehicle(kind), position=position, yaw=params.initial_yaws_rad[index])
    return world


def scene_colliders(scene_name: str) -> list:
    """Colliders for every object of the scene (the ground plane is built into the world)."""
    if scene_name in ("", "empty", "none"):
        return []
    try:
        from aerial_sim.world.scene import load_scene
    except ImportError as error:
        raise ParamsError(f"scene '{scene_name}' needs the world module: {error}") from error
    return list(load_scene(scene_name).colliders())


def hovering_copy(params: PhysicsNodeParams) -> PhysicsWorld:
    """The node's vehicles hovering 10 m above their start points, no scene: the cost of flight."""
    lifted = tuple(v + 10.0 if i % 3 == 2 else v for i, v in enumerate(params.initial_positions))
    world = build_world(replace(params, scene="empty", initial_positions=lifted))
    for name in world.vehicle_names():
        vehicle = world.body(name).vehicle
        environment = world.environment
        world.set_controls(name, vehicle.hover_controls(environment.air_density(10.0), environment.gravity(10.0)),
                           spun_up=True)
    world.step(params.steps_per_period)  # builds the arrays
    return world
