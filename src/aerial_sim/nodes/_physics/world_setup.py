"""The physics node's world built from its parameters: vehicles, scene colliders, and a hovering copy
to measure the cost of flight with."""

from __future__ import annotations

from dataclasses import replace

from aerial_sim.config import ParamsError
from aerial_sim.environment.environment import EnvironmentParams
from aerial_sim.environment.wind import WindField
from aerial_sim.nodes._physics.params import PhysicsNodeParams
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
from aerial_sim.vehicles.multirotor import load_vehicle


def build_world(params: PhysicsNodeParams) -> PhysicsWorld:
    """Create the world, its scene colliders and its vehicles from the node parameters."""
    return build_world_on_terrain(params)[0]


def build_world_on_terrain(params: PhysicsNodeParams) -> tuple[PhysicsWorld, object]:
    """:func:`build_world`, and the scene's terrain (None without one) for vehicles added later."""
    environment = EnvironmentParams(home=params.home, wind_enu_m_s=params.wind_enu_m_s)
    colliders, ground_height_m, terrain = scene_colliders(params.scene, params.home)
    world = PhysicsWorld(PhysicsParams(rate_hz=params.rate_hz, linear_drag_enabled=params.linear_drag_enabled,
                                       stepping=params.stepping, ground_height_m=ground_height_m,
                                       drag_law=params.drag_law,
                                       battery=params.battery if params.battery_enabled else None), environment)
    for collider in colliders:
        world.add_collider(collider)
    for index, (name, kind) in enumerate(zip(params.vehicle_names, params.vehicle_types)):
        vehicle = load_vehicle(kind)
        position = start_position(terrain, vehicle, params.initial_positions[3 * index : 3 * index + 3])
        world.add_vehicle(name, vehicle, position=position, yaw=params.initial_yaws_rad[index])
    world.set_wind_field(WindField(params.wind.field_params(params.wind_enu_m_s), len(params.vehicle_names)))
    return world, terrain


def start_position(terrain, vehicle, position) -> tuple[float, float, float]:
    """Where ``vehicle`` asked at ``position`` (ENU) starts: over a terrain, a vehicle placed below its surface
    starts resting on it (the world itself lifts it onto its ground plane)."""
    position = tuple(float(v) for v in position)
    if terrain is not None:
        floor = float(terrain.height_at(position[0], position[1])) + 0.5 * vehicle.body_box_m[2]
        if floor == floor and position[2] < floor:
            position = (position[0], position[1], floor)
    return position


def scene_colliders(scene_name: str, home=None) -> tuple[list, float, object]:
    """(colliders of every object and of the terrain, height of the built-in ground plane, the terrain or None).

    Without a terrain the ground is the world's plane z = 0; over one, the plane is lowered to the
    terrain's lowest point and the terrain collider is the ground.
    """
    if scene_name in ("", "empty", "none"):
        return [], 0.0, None
    try:
        from aerial_sim.world.colliders import ground_height_below
        from aerial_sim.world.colliders import scene_colliders as colliders_of
        from aerial_sim.world.scene import load_scene
    except ImportError as error:
        raise ParamsError(f"scene '{scene_name}' needs the world module: {error}") from error
    scene = load_scene(scene_name, home=home)
    return list(colliders_of(scene)), ground_height_below(scene), scene.terrain


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
