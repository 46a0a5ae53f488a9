"""The physics world: every vehicle, the environment and the colliders, stepped together.

AirSim's FastPhysicsEngine as a pure-Python core (AirSim paper, Shah et al.
2017, sec. 3.3): one :class:`~aerial_sim.physics.rigid_body.RigidBody` per
vehicle, stepped at ``rate_hz`` (1000 Hz by default) with inputs (rotor
controls, external wrench) held between calls. The ground plane ``z = 0`` is
built in; scene objects join through :meth:`PhysicsWorld.add_collider`.
A vehicle resting exactly (landed, motors settled) sleeps: its steps are
skipped, with the same result to the bit, until its inputs or state change
(``PhysicsParams.sleep_at_rest``).

The world picks how to step (``PhysicsParams.stepping``): one vehicle steps
through its ``RigidBody`` (the scalar reference path); two or more step as rows
of arrays in compiled code (:mod:`aerial_sim.physics.batched`), with the same
model, and collide with each other (body boxes; :meth:`PhysicsWorld.take_collisions`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Sequence

import numpy as np

from aerial_sim.config import ParamsError, require, require_non_negative, require_positive
from aerial_sim.environment.environment import Environment, EnvironmentParams
from aerial_sim.environment.wind import WindField
from aerial_sim.physics.battery import Battery, BatteryParams, rotor_shaft_power
from aerial_sim.physics.broad_phase import ColliderIndex
from aerial_sim.physics.contact import Collider, GroundPlane
from aerial_sim.physics.drag import DRAG_LAWS
from aerial_sim.physics.rigid_body import RigidBody
from aerial_sim.physics.rotation import quat_from_yaw
from aerial_sim.physics.state import GroundTruth, RotorState
from aerial_sim.physics.vehicle_contact import CollisionRecord
from aerial_sim.vehicles.multirotor import MultirotorParams

if TYPE_CHECKING:
    from aerial_sim.physics.batched import BatchedBodies


@dataclass(frozen=True)
class PhysicsParams:
    """Engine settings (defaults here only)."""

    #: Physics steps per simulated second (AirSim: 1000 Hz).
    rate_hz: float = 1000.0
    #: Drag on the body, on its air-relative velocity (off: fly with a rotor-drag node's wrench alone).
    linear_drag_enabled: bool = True
    #: Which drag law (physics/drag.py): ``projected`` (the AirSim paper's statement), ``faces``
    #: (AirSim's code, face by face) or ``rotor`` (seed 004 eq. 13 rotor drag, computed in the step).
    drag_law: Literal["projected", "faces", "rotor"] = "faces"
    #: Height of the built-in ground plane in ``map`` (m).
    ground_height_m: float = 0.0
    #: Penetration (m) a resting body keeps, so its contact persists from step to step.
    contact_slop_m: float = 1e-6
    #: Impacts slower than this (m/s) do not bounce, and slower contacts count as resting.
    rest_speed_m_s: float = 0.1
    #: Skip the steps of a body resting exactly (they would change nothing; see
    #: ``RigidBody.at_rest``). Off: step it anyway, with the same results, slower.
    sleep_at_rest: bool = True
    #: How vehicles are stepped: ``auto`` (scalar below ``batched_min_vehicles``, else batched),
    #: ``scalar`` (one RigidBody after another; vehicles do not collide with each other) or
    #: ``batched`` (arrays, compiled; vehicles collide).
    stepping: Literal["auto", "scalar", "batched"] = "auto"
    #: Fewest vehicles for which ``auto`` steps them batched.
    batched_min_vehicles: int = 2
    #: Each vehicle's battery pack (physics/battery.py): its sagging voltage caps the rotors' speed and
    #: thrust, and the rotors' power drains it. None: an ideal supply (full thrust for ever).
    battery: BatteryParams | None = None
    #: Edge (m) of the broad phase's grid cells (physics/broad_phase.py): a step tests only the colliders
    #: whose bounds reach the cells under the body. 0: no grid, every collider each step (the same
    #: contacts, slower in a big scene).
    collider_cell_m: float = 4.0

    def __post_init__(self):
        require_positive(self, "rate_hz", "contact_slop_m")
        require_non_negative(self, "rest_speed_m_s", "collider_cell_m")
        require(self.stepping in ("auto", "scalar", "batched"), f"stepping must be auto, scalar or batched, got {self.stepping!r}")
        require(self.batched_min_vehicles >= 1, f"batched_min_vehicles must be >= 1, got {self.batched_min_vehicles!r}")
        require(self.drag_law in DRAG_LAWS, f"drag_law must be one of {', '.join(DRAG_LAWS)}, got {self.drag_law!r}")

    @property
    def dt(self) -> float:
        return 1.0 / self.rate_hz


#: With batteries, :meth:`PhysicsWorld.step` drains them and applies their caps every this many steps at most
#: (4 ms at 1000 Hz: the physics node's control period).
BATTERY_STEPS = 4


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
        self._collider_index: ColliderIndex | None = None  # self.colliders with their grid (collider_set)
        self.bodies: dict[str, RigidBody] = {}
        self._placements: dict[str, tuple] = {}
        self._steps = 0
        self._index: dict[str, int] = {}
        #: The arrays of the batched path while it is in use, else None.
        self._batch: BatchedBodies | None = None
        #: Each vehicle's air-density band while the batched path is not in use (see batched.py).
        self._density_lines: dict[str, tuple[float, float, float]] = {}
        #: The wind field every vehicle samples at its own position (set_wind_field), else None.
        self.wind_field: WindField | None = None
        self._wind_sampled_s = -math.inf
        self._wind_resample = False
        #: Each vehicle's pack (with ``params.battery``) and the rotor inputs last asked for, before its cap.
        self.batteries: dict[str, Battery] = {}
        self._asked_controls: dict[str, list[float]] = {}

    @property
    def batched(self) -> bool:
        """Whether the vehicles step as arrays (see ``PhysicsParams.stepping``)."""
        stepping = self.params.stepping
        if stepping == "auto":
            return len(self.bodies) >= self.params.batched_min_vehicles and _kernels().COMPILED
        return stepping == "batched"

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
        self._placements[name] = (vehicle, tuple(float(v) for v in position), float(yaw))
        self._index[name] = len(self._index)
        self.reset_vehicle(name)

    def reset_vehicle(self, name: str) -> None:
        """Put vehicle ``name`` back where it was added, at rest, motors off: exactly as a fresh start."""
        try:
            vehicle, position, yaw = self._placements[name]
        except KeyError:
            raise UnknownVehicleError(f"no vehicle named '{name}' (have: {', '.join(self.bodies) or 'none'})") from None
        self._density_lines.update(self._retire_batch())
        self._density_lines.pop(name, None)
        half_height = 0.5 * vehicle.body_box_m[2]
        floor = self.params.ground_height_m + half_height - self.params.contact_slop_m
        if position[2] < floor:
            position = (position[0], position[1], floor)
        body = RigidBody(vehicle, self.params.dt, position, quat_from_yaw(yaw))
        body.drag_law = self.params.drag_law
        body.gravity = self.environment.gravity(position[2])
        body.air_density = self.environment.air_density(position[2])
        body.set_kinematics()  # consistent initial accelerations: free fall with the motors off
        if position[2] <= floor + 1e-9:
            # Resting on the ground from the start: no acceleration, the accelerometer reads +g.
            body.acceleration = body.reported_acceleration = (0.0, 0.0, 0.0)
        self.bodies[name] = body
        if self.params.battery is not None:  # a fresh start: a fresh pack
            self.batteries[name] = Battery(self.params.battery)
            self._asked_controls.pop(name, None)

    def restart(self, wind_field: WindField | None = None) -> None:
        """A new run in this world: simulated time back to 0, every vehicle back where it was added (at
        rest, motors off, no external wrench or wind of its own), collisions not yet taken forgotten, and
        the wind from ``wind_field`` (started over, :meth:`WindField.reset`) or, without one, the
        environment's configured constant wind. Scene, colliders and vehicles stay: the world is then
        in the state a freshly built one with the same parameters has, so the same inputs give the
        same run bit for bit (a warm batch run, doc/batch.md)."""
        self._steps = 0
        for name in self._placements:
            self.reset_vehicle(name)
        self.take_collisions()
        self.environment.wind_enu_m_s = tuple(float(v) for v in self.environment_params.wind_enu_m_s)
        if wind_field is not None:
            wind_field.reset()
        self.set_wind_field(wind_field)

    def set_wind(self, wind_enu_m_s: Sequence[float]) -> None:
        """Constant wind (ENU, m/s) from now on (AirSim's ``simSetWind``); drag acts on the air-relative velocity."""
        wind = tuple(float(v) for v in wind_enu_m_s)
        if len(wind) != 3 or not all(math.isfinite(v) for v in wind):
            raise ValueError(f"wind needs 3 finite values (ENU, m/s), got {wind_enu_m_s!r}")
        self.environment.wind_enu_m_s = wind
        if self.wind_field is not None:
            self.wind_field.set_mean(wind)
            self._wind_resample = True  # the new mean from the next step on

    def set_wind_field(self, field: WindField | None) -> None:
        """Let every vehicle feel ``field`` (mean wind with shear, gusts, turbulence) at its own position from
        now on, sampled at the start of each :meth:`step` call at most every ``field.params.update_period_s``
        and held in between; None: back to the environment's one constant wind. The field's mean
        becomes the environment's wind (``set_wind`` changes both)."""
        self.wind_field = field
        self._wind_sampled_s = -math.inf
        self._wind_resample = True
        if field is None:
            self._use_environment_wind()
            return
        if field.vehicles != len(self.bodies):
            field.resize(len(self.bodies))
        self.environment.wind_enu_m_s = tuple(float(v) for v in field.mean_enu_m_s)

    def winds(self) -> np.ndarray:
        """The wind each vehicle feels now (N, 3; ENU, m/s), in the order of :meth:`vehicle_names`."""
        bodies = list(self.bodies.values())
        if self._batch is not None:
            return self._batch.winds()
        default = self.environment.wind_enu_m_s
        return np.array([body.wind_enu_m_s or default for body in bodies], dtype=float).reshape(-1, 3)

    def winds_as_tuples(self) -> list[tuple[float, float, float]]:
        """:meth:`winds` as a list of float triples (the same values): without the batched core, no array is
        built for a vehicle's three numbers (the physics node publishes each vehicle's every period)."""
        if self._batch is not None:
            return [tuple(row) for row in self._batch.winds().tolist()]
        default = self.environment.wind_enu_m_s
        return [tuple(map(float, body.wind_enu_m_s or default)) for body in self.bodies.values()]

    def _use_environment_wind(self) -> None:
        """Every vehicle feels the environment's one wind again (no per-vehicle wind)."""
        for body in self.bodies.values():
            body.wind_enu_m_s = None
        if self._batch is not None:
            self._batch.set_winds(None)

    def _sample_wind(self) -> None:
        """Each vehicle's wind from the field at its position (and air speed) now."""
        field = self.wind_field
        if field is None:
            return
        now = self.time_s
        due = now - self._wind_sampled_s >= field.params.update_period_s - 1e-12
        if not (self._wind_resample or due and not field.steady):
            return
        self._wind_resample = False
        if field.steady:  # the same wind everywhere: the environment's, as without a field
            self.environment.wind_enu_m_s = tuple(float(v) for v in field.mean_enu_m_s)
            self._use_environment_wind()
            return
        if field.vehicles != len(self.bodies):
            field.resize(len(self.bodies))
        dt = now - self._wind_sampled_s if math.isfinite(self._wind_sampled_s) else 0.0
        self._wind_sampled_s = now
        batch = self._ensure_batch()
        if batch is not None:
            positions, velocities = batch.state[:, 0:3], batch.state[:, 7:10]
        else:
            bodies = list(self.bodies.values())
            positions = np.array([b.position for b in bodies], dtype=float).reshape(-1, 3)
            velocities = np.array([b.velocity for b in bodies], dtype=float).reshape(-1, 3)
        winds = field.step(now, dt, positions, velocities)
        if batch is not None:
            batch.set_winds(winds)
        else:
            for body, wind in zip(self.bodies.values(), winds.tolist()):
                body.wind_enu_m_s = tuple(wind)

    def vehicle_names(self) -> tuple[str, ...]:
        return tuple(self.bodies)

    def index_of(self, name: str) -> int:
        """Row of vehicle ``name`` in the world's arrays (:meth:`winds`, :meth:`poses`)."""
        return self._index[name]

    def set_controls(self, name: str, controls: Sequence[float], spun_up: bool = False) -> None:
        """Rotor inputs u_i in [0, 1] in the vehicle's rotor order; held until changed.

        ``spun_up=True`` skips the motor lag once (start in steady flight). Raises
        :class:`~aerial_sim.physics.forces.ControlsError` (a ValueError) for a wrong
        count or a value outside [0, 1].
        """
        body = self._body(name)
        battery = self.batteries.get(name)
        if battery is not None:
            self._asked_controls[name] = [float(u) for u in controls]
            cap = battery.state.max_thrust_fraction
            controls = [min(float(u), cap) if math.isfinite(u) else u for u in controls]
        body.set_controls(controls, spun_up)
        if self._batch is not None:
            if spun_up:
                self._batch.state_changed(self._index[name])
            else:
                self._batch.controls_changed(self._index[name])

    def set_all_controls(self, controls) -> None:
        """Rotor inputs of every vehicle at once: an (N, K) array in the order of
        :meth:`vehicle_names` (K the most rotors of any vehicle; extra columns ignored)."""
        batch = self._ensure_batch()
        if batch is not None and not self.batteries:
            batch.set_controls_array(controls)
            return
        for name, row in zip(self.bodies, np.asarray(controls, dtype=float)):
            self.set_controls(name, row[: len(self.bodies[name].rotors)].tolist())

    def set_external_wrench(self, name: str, force_body: Sequence[float], torque_body: Sequence[float]) -> None:
        """Extra force (N) and torque (N m) in the body frame (e.g. rotor drag); held until replaced."""
        self._body(name).set_external_wrench(force_body, torque_body)
        if self._batch is not None:
            self._batch.wrench_changed(self._index[name])

    def set_rotor_geometry(self, name: str, index: int, position_m=None, normal=None) -> None:
        """Move a rotor or tilt its normal in flight (AirSim sec. 3.1: vertices may change)."""
        self._body(name).rotors.set_geometry(index, position_m, normal)
        if self._batch is not None:
            self._batch.state_changed(self._index[name])

    def set_kinematics(self, name: str, position=None, orientation=None, velocity_world=None,
                       angular_velocity_body=None) -> None:
        """Teleport vehicle ``name``: any of position (ENU, m), orientation (w, x, y, z),
        velocity (world, m/s) and body rates (rad/s); the rest is kept."""
        self._body(name).set_kinematics(position, orientation, velocity_world, angular_velocity_body)
        if self._batch is not None:
            self._batch.state_changed(self._index[name])

    def add_collider(self, collider: Collider) -> None:
        """Add a scene object; it must have ``contact(position, orientation, half_extents)``."""
        if not callable(getattr(collider, "contact", None)):
            raise TypeError(f"{collider!r} has no contact(position, orientation, half_extents) method")
        self.colliders.append(collider)
        self._collider_index = None

    def collider_set(self) -> ColliderIndex:
        """:attr:`colliders` as the broad phase's :class:`~aerial_sim.physics.broad_phase.ColliderIndex`
        (built again after :meth:`add_collider`, or when the list's length or ends changed)."""
        index, colliders = self._collider_index, self.colliders
        if (index is None or len(index) != len(colliders)
                or (colliders and (index[0] is not colliders[0] or index[-1] is not colliders[-1]))):
            index = self._collider_index = ColliderIndex(colliders, self.params.collider_cell_m)
        return index

    def step(self, n_steps: int = 1) -> None:
        """Advance every vehicle ``n_steps`` steps of ``1 / rate_hz`` seconds."""
        if n_steps <= 0:
            return
        if self.batteries and n_steps > BATTERY_STEPS:  # the packs are drained, and cap the motors, this often
            for start in range(0, n_steps, BATTERY_STEPS):
                self.step(min(BATTERY_STEPS, n_steps - start))
            return
        params = self.params
        settings = (params.linear_drag_enabled, params.contact_slop_m, params.rest_speed_m_s, params.sleep_at_rest)
        self._sample_wind()
        batch = self._ensure_batch()
        if batch is not None:
            batch.advance(n_steps, self._steps, self.collider_set(), settings)
        else:
            colliders = self.collider_set()
            for body in self.bodies.values():
                body.advance(n_steps, self.environment, colliders, *settings)
        self._steps += n_steps
        if self.batteries:
            self._drain_batteries(n_steps * params.dt)
        # A sample due now is taken now, from the state at this instant: the wind ``winds()`` returns after
        # a step is the one the next step applies (what the physics node publishes on ground_truth/wind).
        self._sample_wind()

    def _drain_batteries(self, dt_s: float) -> None:
        """Each pack gives the rotors' power over the steps just taken; a lower cap applies at once."""
        for name, battery in self.batteries.items():
            speeds = [state.speed_rad_s for state in self.rotor_states(name)]
            cap_before = battery.state.max_thrust_fraction
            battery.step(dt_s, rotor_shaft_power(self._placements[name][0].rotors, speeds))
            asked = self._asked_controls.get(name)
            if asked is not None and battery.state.max_thrust_fraction != cap_before:
                self.set_controls(name, asked)

    def ground_truth(self, name: str) -> GroundTruth:
        return self.body(name).ground_truth(self.time_s)

    def rotor_states(self, name: str) -> tuple[RotorState, ...]:
        body = self.body(name)
        return body.rotors.states(body.air_density)

    def rotor_speeds_and_thrusts(self, name: str) -> tuple[list[float], list[float]]:
        """:meth:`rotor_states`' speeds (rad/s) and thrusts (N) as two lists (the ``rotors`` message's)."""
        body = self.body(name)
        return body.rotors.speeds_and_thrusts(body.air_density)

    def poses(self) -> tuple[np.ndarray, np.ndarray]:
        """Positions (N, 3; ENU, m) and orientations (N, 4; w, x, y, z) of every vehicle, in the
        order of :meth:`vehicle_names` (one copy of the arrays, for swarm-wide consumers)."""
        batch = self._ensure_batch()
        if batch is not None:
            return batch.state[:, 0:3].copy(), batch.state[:, 3:7].copy()
        bodies = list(self.bodies.values())
        return (np.array([b.position for b in bodies], dtype=float).reshape(-1, 3),
                np.array([b.orientation for b in bodies], dtype=float).reshape(-1, 4))

    def take_collisions(self) -> list[CollisionRecord]:
        """Vehicle-to-vehicle collision records since the last call (two per contact and step,
        one per party), oldest first. Only the batched path detects them."""
        if self._batch is None:
            return []
        records = list(self._batch.records)
        self._batch.records.clear()
        return records

    def body(self, name: str) -> RigidBody:
        """The rigid body of vehicle ``name`` (for tests and tools that need more than ground truth).

        On the batched path it holds the state as of this call (ask again after stepping).
        """
        body = self._body(name)
        if self._batch is not None:
            return self._batch.body(self._index[name])
        return body

    def _ensure_batch(self) -> BatchedBodies | None:
        """The batched path's arrays when the world steps batched (built on first use), else None."""
        if not self.batched:
            self._retire_batch()
            return None
        if self._batch is None and self.bodies:
            from aerial_sim.physics.batched import BatchedBodies

            self._batch = BatchedBodies(list(self.bodies), list(self.bodies.values()), self.environment,
                                        self.params.linear_drag_enabled, self._density_lines)
            if self.wind_field is not None:
                self._batch.set_winds(np.array([b.wind_enu_m_s or self.environment.wind_enu_m_s
                                                for b in self.bodies.values()], dtype=float))
        return self._batch

    def _retire_batch(self) -> dict:
        """Leave the batched path: every RigidBody gets the arrays' state; returns the density bands."""
        batch, self._batch = self._batch, None
        if batch is None:
            return {}
        for index in range(len(batch.bodies)):
            body = batch.body(index)
            body.wind_enu_m_s = tuple(batch.winds()[index].tolist()) if self.wind_field is not None else None
        anchor_up = _kernels().ANCHOR_UP
        return {name: tuple(batch.state[i, anchor_up : anchor_up + 3].tolist())
                for i, name in enumerate(batch.names)}

    def _body(self, name: str) -> RigidBody:
        try:
            body = self.bodies[name]
        except KeyError:
            raise UnknownVehicleError(f"no vehicle named '{name}' (have: {', '.join(self.bodies) or 'none'})") from None
        if self._batch is not None:
            self._batch.sync_commands(self._index[name])  # commands set for all at once reach the body
        return body

    def truth_arrays(self) -> dict[str, np.ndarray]:
        """Every vehicle's ground truth as arrays, rows in the order of :meth:`vehicle_names` (the
        fields of :class:`~aerial_sim.physics.state.GroundTruth` but ``time_s``: see
        ``BatchedBodies.truth_arrays``); on the scalar path built from each vehicle's ground truth."""
        batch = self._ensure_batch()
        if batch is not None:
            return batch.truth_arrays()
        truths = [body.ground_truth(self.time_s) for body in self.bodies.values()]
        fields = ("position", "orientation", "velocity_world", "angular_velocity_body", "linear_acceleration_world",
                  "specific_force_body", "angular_acceleration_body")
        return {field: np.array([getattr(t, field) for t in truths], dtype=float).reshape(len(truths), -1)
                for field in fields}


def _kernels():
    """The batched path's compiled kernels, imported on first need: importing numba costs about 0.6 s of
    CPU, which a one-vehicle world (every single-vehicle launch's physics node) never needs."""
    from aerial_sim.physics import batch_kernels

    return batch_kernels


_batched_path_warm = False


def warm_batched_path() -> None:
    """Load the batched path's kernels into this process by stepping a throwaway world of two hovering quads
    on it: numba's import and its cached machine code, about 1 CPU s (12 where no cache holds them yet:
    ``aerial_sim precompile``). Once per process. A world that turns batched (a vehicle added to a running
    one) then steps on at once, where it would first spend that time in its own step."""
    global _batched_path_warm
    if _batched_path_warm:
        return
    from aerial_sim.vehicles.multirotor import load_vehicle

    world = PhysicsWorld(PhysicsParams(stepping="batched"), EnvironmentParams())
    for index in range(2):
        world.add_vehicle(f"vehicle{index}", load_vehicle("quad_x"), position=(4.0 * index, 0.0, 10.0))
    environment = world.environment
    for name in world.vehicle_names():
        vehicle = world.body(name).vehicle
        world.set_controls(name, vehicle.hover_controls(environment.air_density(10.0), environment.gravity(10.0)),
                           spun_up=True)
    world.step(4)
    _batched_path_warm = True


class RunControl:
    """Pause and stepping of the simulation loop (AirSim's ``simPause`` and ``simContinueForTime``).

    The loop asks :meth:`may_step` before each control period. Paused, it steps
    only the periods granted by :meth:`continue_for`, then stays paused: the
    simulation clock stops, so everything that runs on sim time waits.
    """

    def __init__(self):
        self.paused = False
        self._granted = 0

    def pause(self, paused: bool) -> None:
        self.paused = bool(paused)
        self._granted = 0

    def continue_for(self, periods: int) -> None:
        """Run ``periods`` more control periods, then pause (also when running: AirSim pauses after)."""
        self.paused = True
        self._granted += max(0, int(periods))

    @property
    def blocked(self) -> bool:
        """True while paused with no granted period left."""
        return self.paused and self._granted == 0

    def stepped(self) -> None:
        """One control period was simulated (uses up a granted one while paused)."""
        if self.paused and self._granted > 0:
            self._granted -= 1
