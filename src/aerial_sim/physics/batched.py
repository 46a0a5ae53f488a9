"""Many vehicles as rows of arrays, stepped together (the batched path of :class:`PhysicsWorld`).

The scalar path steps one :class:`~aerial_sim.physics.rigid_body.RigidBody` after
another in Python. Here the state of every vehicle is a row of one array and a
window of steps (the physics node's control period, at most
:data:`MAX_WINDOW_STEPS`) goes in three parts:

1. broad phase (:mod:`.broad_phase_kernels`): a sphere that holds each body box for the
   whole window (speed, an acceleration bound, a slack); vehicles whose sphere
   meets a collider's bounding box (the ground plane included) are *near*, and
   pairs of vehicles whose spheres meet are *coupled*; a grid keeps this near-linear
   in the number of vehicles;
2. every other vehicle flies the whole window in the compiled contact-free step, in one call
   (:func:`~aerial_sim.physics.batch_kernels.advance_free_lanes`: 16 vehicles per SIMD loop, the same
   bits as :func:`~aerial_sim.physics.batch_kernels.advance_free`, which takes the vehicles it cannot);
3. near vehicles step through their own ``RigidBody.advance`` (the scalar reference,
   with its ground and scene contacts and sleeping at rest), and coupled vehicles
   step one step at a time in lockstep, each step followed by the box-box test and
   the two-body impulse of :mod:`.vehicle_contact`.

The per-vehicle constants (mass, inertia, drag areas and coefficients, rotor
wrenches and lag gains, box) are read from the vehicles' ``RigidBody`` objects, and
gravity and air density from the world's :class:`Environment`, so both paths always
share one model. Air density keeps the scalar path's interpolation band, one band
per vehicle (in the scalar path the vehicles share one): for one vehicle both paths
agree to round-off.

The arrays hold the state; a vehicle's ``RigidBody`` is brought up to date when it
is read (:meth:`BatchedBodies.body`) or stepped by the scalar path.
"""

from __future__ import annotations

import copy
from collections import deque
from typing import Sequence

import numpy as np

from aerial_sim.environment.environment import Environment
from aerial_sim.physics import batch_kernels as kernels
from aerial_sim.physics import broad_phase_kernels as broad_kernels
from aerial_sim.physics.broad_phase import ColliderIndex, collider_index
from aerial_sim.physics.drag import DRAG_LAWS
from aerial_sim.physics.batch_kernels import (
    ANCHOR_UP,
    ANG_DRAG,
    AREAS,
    CONST_COLUMNS,
    EXT_FORCE,
    HALF_EXTENTS,
    INERTIA,
    INV_MASS,
    INV_INERTIA,
    LIN_DRAG,
    DRAG_LAW,
    ROTOR_DRAG,
    MASS,
    MAX_LIFT,
    RA,
    RADIUS,
    RB,
    ROTOR_COLUMNS,
    STATE_COLUMNS,
    P,
    Q,
    V,
    W,
)
from aerial_sim.physics.rigid_body import RigidBody
from aerial_sim.physics.vehicle_contact import BodyView, CollisionRecord, box_box_contact, resolve

#: Longest window of steps planned at once (s = steps / rate): the broad phase's look-ahead.
MAX_WINDOW_STEPS = 10
#: Steps a broad phase is planned for (12 ms at 1000 Hz: three 4 ms control periods); a plan
#: with no awake vehicle near a collider serves the windows that follow until these steps are used
#: up, two vehicles touch, or an input that moves its bound changes (``_broad_phase``).
PLAN_STEPS = 12
#: Steps of a long plan (48 ms at 1000 Hz: twelve control periods), tried while plans can be held:
#: when the last plan was reusable and no long plan failed in the last :data:`LONG_PLAN_WAIT` plans.
#: It is kept only when it is reusable too; else the plan of :data:`PLAN_STEPS` is made at once, the
#: same as without the try (``_broad_phase``). 10,000 hovering quads: sweep radii 0.17 m -> 0.30 m.
LONG_PLAN_STEPS = 48
#: Plans made with :data:`PLAN_STEPS` after a long plan could not be kept, before the next try.
LONG_PLAN_WAIT = 16
#: Slack added to every sweep sphere (m): the broad phase may call a pair close too early, never too late.
SWEEP_SLACK_M = 0.05
#: Heights (m above home) of the three samples the gravity polynomial is fitted through.
GRAVITY_FIT_SPAN_M = 1000.0
#: Collision records kept until read (oldest dropped first).
MAX_RECORDS = 10000
#: Dense swarms (safety spheres overlapping, boxes apart): a plan's close pairs step one step at a
#: time only while their sweep spheres for the window itself may meet, and coupled pairs go to
#: FCL's exact box-box test only when the compiled separating-axis test
#: (:func:`~aerial_sim.physics.broad_phase_kernels.boxes_may_touch`) cannot show their boxes apart by
#: more than :data:`PREFILTER_MARGIN_M` (FCL from Python costs about 30 us a pair and step).
#: False: every close pair steps singly and goes to FCL (the path before, kept for the
#: agreement test: both give the same states and records).
NARROW_PREFILTER = True
PREFILTER_MARGIN_M = 1e-6
#: Free flight through :func:`~aerial_sim.physics.batch_kernels.advance_free_lanes` (the step vectorised
#: across vehicles, the same bits); False: :func:`~aerial_sim.physics.batch_kernels.advance_free` alone,
#: one vehicle after another (kept for the agreement test).
VECTOR_STEP = True
#: Slack of the sweep spheres that decide, window by window, which of a plan's close pairs must step
#: one step at a time (m; the plan's own is :data:`SWEEP_SLACK_M` over :data:`PLAN_STEPS`).
WINDOW_SLACK_M = 0.01


def gravity_polynomial(environment: Environment) -> np.ndarray:
    """``g(h) = c0 + c1 h + c2 h^2`` through ``environment.gravity`` at -1 km, 0 and +1 km.

    Exact for the gravity model of the scalar path (linear in h, sec. 3.2.1) and for any
    quadratic one, so a change of that model reaches both paths.
    """
    span = GRAVITY_FIT_SPAN_M
    low, mid, high = (environment.gravity(h) for h in (-span, 0.0, span))
    return np.array([mid, (high - low) / (2.0 * span), (high - 2.0 * mid + low) / (2.0 * span * span)])


class BatchedBodies:
    """The state of every vehicle of a world as arrays, and the windowed batched step."""

    def __init__(self, names: Sequence[str], bodies: Sequence[RigidBody], environment: Environment,
                 linear_drag_enabled: bool, density_lines: dict | None = None):
        self.names = list(names)
        self.bodies = list(bodies)
        self.environment = environment
        self.linear_drag_enabled = linear_drag_enabled
        count = len(self.bodies)
        rotors = max(len(body.rotors) for body in self.bodies)
        self.dt = self.bodies[0].dt
        self.state = np.zeros((count, STATE_COLUMNS))
        self.const = np.zeros((count, CONST_COLUMNS))
        self.rotor_const = np.zeros((count, rotors, ROTOR_COLUMNS))
        self.commands = np.zeros((count, rotors))
        self.filtered = np.zeros((count, rotors))
        self.rotor_count = np.array([len(body.rotors) for body in self.bodies], dtype=np.int64)
        #: The distinct rows of (const, rotor_const), one per kind of vehicle, and each vehicle's row there:
        #: the vectorised step reads its constants from these few rows (10,000 quads: one), not from
        #: 5 MB of per-vehicle copies each period (:meth:`set_constants` keeps them).
        self.type_const = np.zeros((0, CONST_COLUMNS))
        self.type_rotor_const = np.zeros((0, rotors, ROTOR_COLUMNS))
        self.type_of = np.zeros(count, dtype=np.int64)
        #: Whether each kind's inertia is diagonal (``batch_kernels.is_diagonal``, once per kind).
        self.type_diagonal = np.zeros(0, dtype=np.bool_)
        self._types: dict[bytes, int] = {}
        self.steps_left = np.zeros(count, dtype=np.int64)
        self.stop_up = np.zeros(count)
        #: Resting exactly (the body's own ``at_rest``): skipped until an input or its state changes.
        self.asleep = np.zeros(count, dtype=bool)
        #: The RigidBody's attributes are older than the arrays.
        self.stale = np.zeros(count, dtype=bool)
        #: The RigidBody's rotor commands are older than the arrays' (set by :meth:`set_controls_array`).
        self.commands_newer = np.zeros(count, dtype=bool)
        self.records: deque[CollisionRecord] = deque(maxlen=MAX_RECORDS)
        self._scratch = copy.copy(environment)  # carries one vehicle's density band into a scalar step
        self._colliders_seen: tuple = ()
        self._bounds = (np.zeros((0, 3)), np.zeros((0, 3)))
        self._world_inputs = None
        self._plan: tuple | None = None  # (near, pairs) of the last broad phase, while reusable
        self._plan_steps_left = 0
        self._last_reusable = False  # the last plan made could be held (a long plan may be tried)
        self._long_wait = 0  # plans still to make before a long plan is tried again
        self._gravity = gravity_polynomial(environment)
        #: Each vehicle's wind (ENU, m/s): the environment's, or its own from a wind field (set_winds).
        self._wind = np.tile(np.array(environment.wind_enu_m_s, dtype=float), (count, 1))
        self._own_winds = False
        lines = density_lines or {}
        # A vehicle's band starts where a fresh environment's does, moved to where the vehicle is
        # (as the scalar path's shared band is for a world's first vehicle).
        fresh_line = Environment(environment.params).density_line
        for index, body in enumerate(self.bodies):
            self.set_constants(index)
            self.store(index)
            self.commands[index, : len(body.rotors)] = body.rotors.commands
            line = lines.get(self.names[index])
            if line is None:
                self._scratch.density_line = fresh_line
                self._scratch.air_density(body.position[2])
                line = self._scratch.density_line
            self.state[index, ANCHOR_UP : ANCHOR_UP + 3] = line

    # -- constants and the two-way copy between arrays and RigidBody objects ----------

    def set_constants(self, index: int) -> None:
        """Copy the vehicle's constants from its RigidBody (again after a rotor moved)."""
        body = self.bodies[index]
        row = self.const[index]
        row[MASS] = body.mass
        row[INV_MASS] = 1.0 / body.mass
        row[INERTIA : INERTIA + 9] = [v for line in body.inertia for v in line]
        row[INV_INERTIA : INV_INERTIA + 9] = [v for line in body.inverse_inertia for v in line]
        row[AREAS : AREAS + 3] = body.areas
        row[LIN_DRAG] = -0.5 * body.vehicle.linear_drag_coefficient if self.linear_drag_enabled else 0.0
        row[DRAG_LAW] = DRAG_LAWS.index(body.drag_law) if self.linear_drag_enabled else -1
        row[ROTOR_DRAG : ROTOR_DRAG + 3] = body.rotor_drag
        row[ANG_DRAG : ANG_DRAG + 3] = body.angular_drag
        row[RADIUS] = body.bounding_radius
        row[HALF_EXTENTS : HALF_EXTENTS + 3] = body.half_extents
        constants = body.rotors.constants
        self.rotor_const[index, : len(constants)] = constants
        row[MAX_LIFT] = sum(float(np.linalg.norm(c[1:4])) for c in constants)
        key = row.tobytes() + self.rotor_const[index].tobytes()
        kind = self._types.get(key)
        if kind is None:
            kind = self._types[key] = len(self._types)
            self.type_const = np.vstack([self.type_const, row[None, :]])
            self.type_rotor_const = np.concatenate([self.type_rotor_const, self.rotor_const[index][None]])
            inertia = np.concatenate([row[INERTIA : INERTIA + 9], row[INV_INERTIA : INV_INERTIA + 9]]).reshape(2, 3, 3)
            diagonal = not np.any(inertia[:, ~np.eye(3, dtype=bool)])
            self.type_diagonal = np.append(self.type_diagonal, diagonal)
        self.type_of[index] = kind

    def store(self, index: int) -> None:
        """RigidBody -> arrays (after the scalar path stepped it or an input reset its state)."""
        body = self.bodies[index]
        self.state[index, :ANCHOR_UP] = (
            *body.position, *body.orientation, *body.velocity, *body.angular_velocity, *body.acceleration,
            *body.angular_acceleration, *body.torque, *body.reported_acceleration,
            *body.reported_angular_acceleration, body.gravity, body.air_density,
        )
        self.state[index, EXT_FORCE : EXT_FORCE + 6] = (*body.external_force, *body.external_torque)
        self.filtered[index, : len(body.rotors)] = body.rotors.filtered
        self.stale[index] = False

    def sync_commands(self, index: int) -> None:
        """Rotor commands set for every vehicle at once reach the vehicle's RigidBody (before anything
        reads or changes that body: the world calls this whenever it hands a body out)."""
        if self.commands_newer[index]:
            body = self.bodies[index]
            body.rotors.commands = self.commands[index, : len(body.rotors)].tolist()
            self.commands_newer[index] = False

    def body(self, index: int) -> RigidBody:
        """The vehicle's RigidBody with the arrays' state (arrays -> RigidBody when stale)."""
        self.sync_commands(index)
        body = self.bodies[index]
        if self.stale[index]:
            v = self.state[index, :ANCHOR_UP].tolist()
            body.position = tuple(v[P : P + 3])
            body.orientation = tuple(v[Q : Q + 4])
            body.velocity = tuple(v[V : V + 3])
            body.angular_velocity = tuple(v[W : W + 3])
            body.acceleration = tuple(v[13:16])
            body.angular_acceleration = tuple(v[16:19])
            body.torque = tuple(v[19:22])
            body.reported_acceleration = tuple(v[RA : RA + 3])
            body.reported_angular_acceleration = tuple(v[RB : RB + 3])
            body.gravity, body.air_density = v[28], v[29]
            body.rotors.filtered = self.filtered[index, : len(body.rotors)].tolist()
            self.stale[index] = False
        return body

    # -- inputs (the RigidBody validates and keeps its copy; the arrays follow) -------

    def controls_changed(self, index: int) -> None:
        """The RigidBody's rotor commands were set: the arrays follow."""
        self.commands_newer[index] = False
        body = self.bodies[index]
        commands = body.rotors.commands
        if self.asleep[index] and self.commands[index, : len(commands)].tolist() != commands:
            self.asleep[index] = False
        self.commands[index, : len(commands)] = commands

    def wrench_changed(self, index: int) -> None:
        self._plan = None  # the external force is part of the sweep bound
        body = self.bodies[index]
        wrench = (*body.external_force, *body.external_torque)
        if self.asleep[index] and self.state[index, EXT_FORCE : EXT_FORCE + 6].tolist() != list(wrench):
            self.asleep[index] = False
        self.state[index, EXT_FORCE : EXT_FORCE + 6] = wrench

    def state_changed(self, index: int) -> None:
        """The RigidBody's state was set directly (teleport, spun-up motors, rotor geometry)."""
        self._plan = None
        self.set_constants(index)
        self.store(index)
        self.controls_changed(index)
        self.asleep[index] = False

    def set_controls_array(self, controls: np.ndarray) -> None:
        """Every vehicle's rotor inputs at once, rows in vehicle order (values must be in [0, 1]).

        Array operations only: the vehicles' RigidBody objects get their commands when next read
        (:meth:`sync_commands`), not here, so a controller commanding 10,000 vehicles every 4 ms
        costs no Python per vehicle. Columns past a vehicle's rotor count are ignored.
        """
        controls = np.asarray(controls, dtype=float)
        if controls.shape != self.commands.shape or not kernels.take_commands(
                controls, self.commands, self.asleep, self.commands_newer):
            raise ValueError(f"expected a {self.commands.shape} array of controls in [0, 1]")

    def truth_arrays(self) -> dict[str, np.ndarray]:
        """Every vehicle's ground truth as (N, 3) / (N, 4) arrays, what ``RigidBody.ground_truth``
        gives one vehicle: position, orientation, velocity_world, angular_velocity_body,
        linear_acceleration_world, specific_force_body, angular_acceleration_body (views of the
        state, valid until the next step, except the specific force, computed here)."""
        state = self.state
        return {
            "position": state[:, P : P + 3], "orientation": state[:, Q : Q + 4], "velocity_world": state[:, V : V + 3],
            "angular_velocity_body": state[:, W : W + 3], "linear_acceleration_world": state[:, RA : RA + 3],
            "specific_force_body": kernels.specific_forces(state),
            "angular_acceleration_body": state[:, RB : RB + 3],
        }

    # -- stepping ----------------------------------------------------------------------

    def advance(self, steps: int, first_step: int, colliders: list, settings: tuple) -> None:
        """Advance every vehicle ``steps`` steps; ``first_step`` numbers the first (for record times)."""
        colliders = collider_index(colliders)
        self._refresh_world_inputs(colliders)
        done = 0
        while done < steps:
            window = min(steps - done, MAX_WINDOW_STEPS)
            self._advance_window(window, first_step + done, colliders, settings)
            done += window

    def _refresh_world_inputs(self, colliders: ColliderIndex) -> None:
        """Collider bounds, wind and gravity, re-read when they change (and then every vehicle wakes)."""
        environment = self.environment
        inputs = (colliders, environment.wind_enu_m_s, environment.home_altitude_m)
        if inputs == self._world_inputs:
            return
        self._world_inputs = inputs
        self._plan = None
        self.asleep[:] = False
        lows, highs = [], []
        for _, bounds in colliders.pairs:
            low, high = bounds if bounds is not None else ((-np.inf,) * 3, (np.inf,) * 3)
            lows.append(low)
            highs.append(high)
        self._bounds = (np.array(lows, dtype=float).reshape(-1, 3), np.array(highs, dtype=float).reshape(-1, 3))
        if not self._own_winds:
            self._wind[:] = environment.wind_enu_m_s
        self._gravity = gravity_polynomial(environment)

    def set_winds(self, winds: np.ndarray | None) -> None:
        """Each vehicle's own wind (N, 3; ENU, m/s) from a wind field; None: the environment's for all."""
        if winds is None:
            self._own_winds = False
            self._wind[:] = self.environment.wind_enu_m_s
        else:
            self._own_winds = True
            changed = np.any(self._wind != winds, axis=1)
            self._wind[:] = winds
            self.asleep &= ~changed
        self._plan = None

    def winds(self) -> np.ndarray:
        """The wind each vehicle feels (N, 3; ENU, m/s), a copy."""
        return self._wind.copy()

    def _broad_phase(self, window: int) -> tuple[np.ndarray, np.ndarray]:
        """Near vehicles and close pairs for the next ``window`` steps: the plan still held when it
        covers them, else a new one for ``max(window, PLAN_STEPS)`` steps (or, while plans can be
        held, for :data:`LONG_PLAN_STEPS`, kept only when it can be held).

        A plan is held only while nothing can leave its spheres early: no awake vehicle near a
        collider (contacts change velocities), no contact between two vehicles (its impulse does:
        :meth:`_collide` drops the plan), and no new external wrench, state, collider, wind or home
        altitude (these drop it). Rotor commands do not: the sweep bound already allows full thrust.
        Close pairs do not either: a dense swarm whose spheres overlap but whose boxes never touch
        holds its plan, and each window still steps singly only the pairs that can meet within it.
        A plan's spheres grow by the speed times the extra steps (8 ms at 1000 Hz; 44 ms for a long
        plan), so a few more vehicles may count as near or coupled. A long plan that finds an awake
        vehicle near a collider is dropped before it is used: the window then gets the plan of
        ``PLAN_STEPS``, as it would without the try, so a long plan is only ever used where the short
        plans it stands for would have been held too (its spheres hold theirs).
        """
        plan = self._plan
        if plan is not None and self._plan_steps_left >= window and not np.any(plan[0] & ~self.asleep):
            self._plan_steps_left -= window
            return plan
        steps = max(window, PLAN_STEPS)
        if self._last_reusable and not self._long_wait and LONG_PLAN_STEPS > steps:
            near, pairs, reusable = self._plan_for(LONG_PLAN_STEPS)
            if reusable:
                self._plan = (near, pairs)
                self._plan_steps_left = LONG_PLAN_STEPS - window
                return near, pairs
            self._long_wait = LONG_PLAN_WAIT
        near, pairs, reusable = self._plan_for(steps)
        self._long_wait = max(0, self._long_wait - 1)
        self._last_reusable = reusable
        self._plan = (near, pairs) if reusable else None
        self._plan_steps_left = steps - window
        return near, pairs

    def _plan_for(self, steps: int) -> tuple[np.ndarray, np.ndarray, bool]:
        """Near vehicles and close pairs for the next ``steps`` steps, and whether that plan may be held."""
        radii = broad_kernels.sweep_radii(self.state, self.type_of, self.type_const, steps, self.dt, SWEEP_SLACK_M,
                                          self._wind)
        near = broad_kernels.near_colliders(self.state, radii, *self._bounds)
        pairs = broad_kernels.close_pairs(np.ascontiguousarray(self.state[:, P : P + 3]), radii)
        return near, pairs, not np.any(near & ~self.asleep)

    def _advance_window(self, window: int, first_step: int, colliders: list, settings: tuple) -> None:
        near, pairs = self._broad_phase(window)
        if pairs.size and NARROW_PREFILTER:
            # A plan's pairs are close over PLAN_STEPS with the full slack; of those, a pair whose
            # spheres cannot meet within this window (its own steps, a small slack) flies it whole.
            woken = np.zeros(len(self.bodies), dtype=bool)
            woken[pairs.ravel()] = True
            self.asleep &= ~woken  # as coupling them would have
            radii = broad_kernels.sweep_radii(self.state, self.type_of, self.type_const, window, self.dt,
                                              WINDOW_SLACK_M, self._wind)
            pairs = pairs[broad_kernels.spheres_meet(self.state, radii, pairs)]
        coupled = np.zeros(len(self.bodies), dtype=bool)
        coupled[pairs.ravel()] = True
        self.asleep &= ~coupled
        alone = ~coupled & ~self.asleep
        self._fly(np.flatnonzero(alone & ~near), window)
        for index in np.flatnonzero(alone & near):
            self._scalar_step(index, window, colliders, settings)
        if not pairs.size:
            return
        members = np.flatnonzero(coupled)
        flying, touching = members[~near[members]], members[near[members]]
        for step in range(window):
            self._fly(flying, 1)
            for index in touching:
                self._scalar_step(index, 1, colliders, settings)
            self._collide(pairs, first_step + step + 1, settings)

    def _fly(self, indices: np.ndarray, steps: int) -> None:
        """Contact-free steps in the compiled kernel; re-anchors density bands where it stops."""
        if not indices.size:
            return
        if indices.size == self.stale.size:  # every vehicle (indices are unique): slices, not an index array
            self.steps_left[:] = steps
            self.stale[:] = True
        else:
            self.steps_left[indices] = steps
            self.stale[indices] = True
        step = kernels.advance_free_lanes if VECTOR_STEP else None  # first the whole window, vectorised
        while True:
            arguments = (self.steps_left, self.state, self.const, self.rotor_const, self.commands, self.filtered,
                         self.rotor_count, self._wind, self._gravity, self.dt, self.environment.params.density_band_m,
                         self.stop_up)
            if step is not None:
                stopped = step(indices, steps, self.type_of, self.type_const, self.type_rotor_const,
                               self.type_diagonal, *arguments)
                step = None
            else:
                stopped = kernels.advance_free(indices, *arguments)
            if not stopped:
                return
            indices = indices[self.steps_left[indices] > 0]
            for index in indices:
                self._scratch.density_line = tuple(self.state[index, ANCHOR_UP : ANCHOR_UP + 3].tolist())
                self._scratch.air_density(float(self.stop_up[index]))  # leaves the band: re-anchors it
                self.state[index, ANCHOR_UP : ANCHOR_UP + 3] = self._scratch.density_line

    def _scalar_step(self, index: int, steps: int, colliders: list, settings: tuple) -> None:
        """The scalar reference step (contacts, sleeping) for one vehicle, with its own density band."""
        body = self.body(index)
        scratch = self._scratch
        scratch.wind_enu_m_s = self.environment.wind_enu_m_s
        body.wind_enu_m_s = tuple(self._wind[index].tolist()) if self._own_winds else None
        scratch.home_altitude_m = self.environment.home_altitude_m
        scratch.density_line = tuple(self.state[index, ANCHOR_UP : ANCHOR_UP + 3].tolist())
        body.advance(steps, scratch, colliders, *settings)
        self.store(index)
        self.state[index, ANCHOR_UP : ANCHOR_UP + 3] = scratch.density_line
        self.asleep[index] = body.at_rest

    def _collide(self, pairs: np.ndarray, step: int, settings: tuple) -> None:
        """Box-box test of every coupled pair; impulses and records for those that touch."""
        _, slop_m, bounce_speed, _ = settings
        time_s = step * self.dt
        if NARROW_PREFILTER:  # drops only pairs whose boxes are apart: FCL would find no contact
            pairs = pairs[broad_kernels.boxes_may_touch(self.state, self.const, pairs, PREFILTER_MARGIN_M)]
        for i, j in pairs.tolist():
            a, b = self._view(i), self._view(j)
            contact = box_box_contact(a, b)
            if contact is None:
                continue
            closing = resolve(a, b, contact, slop_m, bounce_speed)
            self._plan = None  # an impulse: the sweep bounds of the plan no longer hold for these two
            self._write_back(i, a)
            self._write_back(j, b)
            n = contact.normal
            self.records.append(CollisionRecord(time_s, self.names[j], self.names[i], contact.point, n,
                                                contact.depth_m, b.position, closing))
            self.records.append(CollisionRecord(time_s, self.names[i], self.names[j], contact.point,
                                                (-n[0], -n[1], -n[2]), contact.depth_m, a.position, closing))

    def _view(self, index: int) -> BodyView:
        v = self.state[index].tolist()
        body = self.bodies[index]
        return BodyView(tuple(v[P : P + 3]), tuple(v[Q : Q + 4]), tuple(v[V : V + 3]), tuple(v[W : W + 3]),
                        1.0 / body.mass, body.inverse_inertia, body.half_extents,
                        body.vehicle.restitution, body.vehicle.friction)

    def _write_back(self, index: int, view: BodyView) -> None:
        """Store a collision's new position and velocities; the velocity jump shows in the accelerations."""
        row = self.state[index]
        before = row[V : V + 3].copy(), row[W : W + 3].copy()
        row[P : P + 3] = view.position
        row[V : V + 3] = view.velocity
        row[W : W + 3] = view.angular_velocity
        row[RA : RA + 3] += (row[V : V + 3] - before[0]) / self.dt
        row[RB : RB + 3] += (row[W : W + 3] - before[1]) / self.dt
        self.stale[index] = True
        self.asleep[index] = False
