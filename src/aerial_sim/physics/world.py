"""The physics world: every vehicle, the environment and the colliders, stepped together.

AirSim's FastPhysicsEngine as a pure-Python core (AirSim paper, Shah et al.
2017, sec. 3.3): one :class:`~aerial_sim.physics.rigid_body.RigidBody` per
vehicle, stepped at ``rate_hz`` (1000 Hz by default) with inputs (rotor
controls, external wrench) held between calls. The ground plane ``z = 0`` is
built in; scene objects join through :meth:`PhysicsWorld.add_collider`.
Vehicles do not collide with each other. A vehicle resting exactly (landed,
motors settled) sleeps: its steps are skipped, with the same result to the
bit, until its inputs or state change (``PhysicsParams.sleep_at_rest``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from aerial_sim.config import ParamsError, require_non_negative, require_positive
from aerial_sim.environment.environment import Environment, EnvironmentParams
from aerial_sim.physics.contact import Collider, GroundPlane
from aerial_sim.physics.rigid_body import RigidBody
from aerial_sim.physics.rotation import quat_from_yaw
from aerial_sim.physics.state import GroundTruth, RotorState
from aerial_sim.vehicles.multirotor import MultirotorParams


@dataclass(frozen=True)
class PhysicsParams:
    """Engine settings (defaults here only)."""

    #: Physics steps per simulated second (AirSim: 1000 Hz).
    rate_hz: float = 1000.0
    #: AirSim's linear drag on the body; switch off to fly with a rotor-drag model alone.
    linear_drag_enabled: bool = True
    #: Height of the built-in ground plane in ``map`` (m).
    ground_height_m: float = 0.0
    #: Penetration (m) a resting body keeps, so its contact persists from step to step.
    contact_slop_m: float = 1e-6
    #: Impacts slower than this (m/s) do not bounce, and slower contacts count as resting.
    rest_speed_m_s: float = 0.1
    #: Skip the steps of a body resting exactly (they would change nothing; see
    #: ``RigidBody.at_rest``). Off: step it anyway, with the same results, slower.
    sleep_at_rest: bool = True

    def __post_init__(self):
        require_positive(self, "rate_hz", "contact_slop_m")
        require_non_negative(self, "rest_speed_m_s")

    @property
    def dt(self) -> float:
        return 1.0 / self.rate_hz


class UnknownVehicleError(KeyError):
    """No vehicle of that name was added to the world."""


class PhysicsWorld:
    """Simulates every vehicle added to it; the core behind the physics node."""

    def __init__(self, params: PhysicsParams | None = None, environment: EnvironmentParams | None = None):
        self.params = params or PhysicsParams()
        self.environment_params = environment or EnvironmentParams()
        self.environment = Environment(self.environment_params)
        self.ground = GroundPlane(self.params.ground_height_m)
        self.colliders: list[Collider] = [self.ground]
        self.bodies: dict[str, RigidBody] = {}
        self._steps = 0

    @property
    def time_s(self) -> float:
        """Simulated time (s): steps taken times dt (no accumulated rounding)."""
        return self._steps / self.params.rate_hz

    def add_vehicle(self, name: str, vehicle: MultirotorParams, position=(0.0, 0.0, 0.0), yaw: float = 0.0) -> None:
        """Place ``vehicle`` with its centre of mass at ``position`` (ENU, m), level, heading ``yaw`` (rad).

        A vehicle placed at ground level (z = 0) is lifted to rest on the ground.
        """
        if name in self.bodies:
            raise ParamsError(f"vehicle '{name}' was already added")
        position = tuple(float(v) for v in position)
        half_height = 0.5 * vehicle.body_box_m[2]
        floor = self.params.ground_height_m + half_height - self.params.contact_slop_m
        if position[2] < floor:
            position = (position[0], position[1], floor)
        body = RigidBody(vehicle, self.params.dt, position, quat_from_yaw(yaw))
        body.gravity = self.environment.gravity(position[2])
        body.air_density = self.environment.air_density(position[2])
        body.set_kinematics()  # consistent initial accelerations: free fall with the motors off
        if position[2] <= floor + 1e-9:
            # Resting on the ground from the start: no acceleration, the accelerometer reads +g.
            body.acceleration = body.reported_acceleration = (0.0, 0.0, 0.0)
        self.bodies[name] = body

    def vehicle_names(self) -> tuple[str, ...]:
        return tuple(self.bodies)

    def set_controls(self, name: str, controls: Sequence[float], spun_up: bool = False) -> None:
        """Rotor inputs u_i in [0, 1] in the vehicle's rotor order; held until changed.

        ``spun_up=True`` skips the motor lag once (start in steady flight). Raises
        :class:`~aerial_sim.physics.forces.ControlsError` (a ValueError) for a wrong
        count or a value outside [0, 1].
        """
        self._body(name).set_controls(controls, spun_up)

    def set_external_wrench(self, name: str, force_body: Sequence[float], torque_body: Sequence[float]) -> None:
        """Extra force (N) and torque (N m) in the body frame (e.g. rotor drag); held until replaced."""
        self._body(name).set_external_wrench(force_body, torque_body)

    def set_rotor_geometry(self, name: str, index: int, position_m=None, normal=None) -> None:
        """Move a rotor or tilt its normal in flight (AirSim sec. 3.1: vertices may change)."""
        self._body(name).rotors.set_geometry(index, position_m, normal)

    def set_kinematics(self, name: str, position=None, orientation=None, velocity_world=None,
                       angular_velocity_body=None) -> None:
        """Teleport vehicle ``name``: any of position (ENU, m), orientation (w, x, y, z),
        velocity (world, m/s) and body rates (rad/s); the rest is kept."""
        self._body(name).set_kinematics(position, orientation, velocity_world, angular_velocity_body)

    def add_collider(self, collider: Collider) -> None:
        """Add a scene object; it must have ``contact(position, orientation, half_extents)``."""
        if not callable(getattr(collider, "contact", None)):
            raise TypeError(f"{collider!r} has no contact(position, orientation, half_extents) method")
        self.colliders.append(collider)

    def step(self, n_steps: int = 1) -> None:
        """Advance every vehicle ``n_steps`` steps of ``1 / rate_hz`` seconds."""
        if n_steps <= 0:
            return
        params = self.params
        for body in self.bodies.values():
            body.advance(n_steps, self.environment, self.colliders, params.linear_drag_enabled,
                         params.contact_slop_m, params.rest_speed_m_s, params.sleep_at_rest)
        self._steps += n_steps

    def ground_truth(self, name: str) -> GroundTruth:
        return self._body(name).ground_truth(self.time_s)

    def rotor_states(self, name: str) -> tuple[RotorState, ...]:
        body = self._body(name)
        return body.rotors.states(body.air_density)

    def body(self, name: str) -> RigidBody:
        """The rigid body of vehicle ``name`` (for tests and tools that need more than ground truth)."""
        return self._body(name)

    def _body(self, name: str) -> RigidBody:
        try:
            return self.bodies[name]
        except KeyError:
            raise UnknownVehicleError(f"no vehicle named '{name}' (have: {', '.join(self.bodies) or 'none'})") from None
