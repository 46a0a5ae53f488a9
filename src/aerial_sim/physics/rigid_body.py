"""The rigid body of one vehicle and its physics step (AirSim paper, Shah et al. 2017, sec. 3.3).

Per step of length ``dt`` (default 1 ms):

1. velocity Verlet for the position (sec. 3.3.3):
   ``p_{k+1} = p_k + v_k dt + a_k dt^2 / 2``;
2. orientation: the body-frame angle-axis increment of the mid-step angular
   velocity ``omega_k + alpha_k dt / 2``, as a quaternion ``q_dt``, composed
   ``q_{k+1} = q_k * q_dt`` and renormalised (sec. 3.3.3);
3. forces at the new pose (sec. 3.3.2): rotor thrusts and reaction torques
   after the motor lag (:mod:`.forces`), linear drag against the air-relative
   velocity and angular drag (:mod:`.drag`), the external wrench (e.g. rotor
   drag from another model) and, for contacts, the support force
   (:mod:`.contact`); ``F_net = sum F_i + F_d``,
   ``tau_net = sum (tau_i + r_i x F_i) + tau_d``;
4. Newton plus gravity ``a = F_net / m + g(h)`` (sec. 3.2.1; WGS-84 normal gravity
   at the home latitude, :mod:`aerial_sim.environment.gravity`) and
   Euler's rotation equation with the full inertia tensor
   ``alpha = I^-1 (tau_net - omega x (I omega))``;
5. velocity Verlet for the velocity: ``v_{k+1} = v_k + (a_k + a_{k+1}) dt / 2``;
   for the body rates its rotational form on the body angular momentum
   ``L = I omega``: half the torque impulse, transport into the rotated body frame
   ``L <- R(q_dt)^T L`` (the discrete form of Euler's gyroscopic term), the other
   half of the torque impulse. A torque-free body then conserves its world angular
   momentum to round-off and its energy to 1e-7 over 10 s (plain Verlet on
   ``omega``: 3e-4);
6. contact impulses (restitution, Coulomb friction) and depth projection;
7. rest: a step in contact that returns exactly the state it started from
   (a landed vehicle, its motors settled) is a fixed point. The body then
   sleeps: further steps are skipped, at no cost and with the same result to
   the bit, until its state, an input (rotor command or geometry, external
   wrench, wind, colliders) or its air density changes.

Velocity-dependent terms (drag, gyroscopic term) use the predicted velocities
``v_k + a_k dt`` and ``omega_k + alpha_k dt``. The step is written with plain
floats and local variables: NumPy on 3-vectors would cost ten times more.
"""

from __future__ import annotations

import math
from typing import Sequence

from aerial_sim.environment.environment import Environment
from aerial_sim.environment.gravity import STANDARD_GRAVITY_M_S2
from aerial_sim.physics.broad_phase import collider_index
from aerial_sim.physics.contact import Contact
from aerial_sim.physics.drag import DRAG_LAWS, angular_drag_constants, rotor_drag_coefficients
from aerial_sim.physics.forces import RotorArray
from aerial_sim.physics.rotation import (
    add,
    add_scaled,
    cross,
    dot,
    half_angle_series,
    invert3,
    matrix_vector,
    norm,
    quat_normalize,
    rotate,
    rotate_inverse,
    rotation_matrix,
    scale,
    sub,
    sub_scaled,
    transpose_vector,
)
from aerial_sim.physics.state import GroundTruth
from aerial_sim.vehicles.multirotor import MultirotorParams

Vector3 = tuple[float, float, float]
ZERO: Vector3 = (0.0, 0.0, 0.0)
#: A contact that supports nothing: no normal force, no spare friction, spin or tipping torque.
NO_SPARE = (0.0, 0.0, 0.0, 0.0)


class RigidBody:
    """State, constants and stepping of one multirotor (world ``map`` ENU, body FLU)."""

    def __init__(self, vehicle: MultirotorParams, dt: float, position: Vector3, orientation):
        self.vehicle = vehicle
        self.dt = float(dt)
        self.mass = vehicle.mass_kg
        self.inertia = tuple(tuple(float(v) for v in row) for row in vehicle.inertia_kg_m2)
        self.inverse_inertia = invert3(self.inertia)
        self.half_extents = tuple(0.5 * s for s in vehicle.body_box_m)
        self.bounding_radius = math.sqrt(sum(h * h for h in self.half_extents))
        self.areas = vehicle.cross_section
        self.angular_drag = angular_drag_constants(vehicle.body_box_m, vehicle.angular_drag_coefficient)
        self.rotors = RotorArray(vehicle.rotors, self.dt)
        self.external_force = ZERO
        self.external_torque = ZERO
        #: The wind this body feels (ENU, m/s) when a wind field sets it per vehicle; None: the environment's.
        self.wind_enu_m_s: Vector3 | None = None
        #: Drag law (:data:`aerial_sim.physics.drag.DRAG_LAWS`) and, for ``rotor``, (k, b, c_d1) of seed 004 eq. (13).
        self.drag_law = "projected"
        self.rotor_drag = rotor_drag_coefficients(vehicle)
        # The six kinematic quantities (sec. 3.3). ``acceleration`` is the one the integrator
        # uses; ``reported_acceleration`` adds the contact impulses of the step (what an IMU feels).
        self.position = tuple(float(v) for v in position)
        self.orientation = quat_normalize(tuple(float(v) for v in orientation))
        self.velocity = ZERO
        self.angular_velocity = ZERO
        self.acceleration = ZERO
        self.angular_acceleration = ZERO
        self.reported_acceleration = ZERO
        self.reported_angular_acceleration = ZERO
        #: Net torque applied in the last step (body frame, N m), for the next half torque impulse.
        self.torque = ZERO
        #: Whether the last step touched a collider.
        self._in_contact = False
        #: At rest: the (state, held inputs) that one more step leaves unchanged; else None.
        self._rest = None
        self.gravity = STANDARD_GRAVITY_M_S2  # until the world sets its environment's (PhysicsWorld.add_vehicle)
        self.air_density = 1.225

    # -- inputs ------------------------------------------------------------

    def set_external_wrench(self, force_body: Sequence[float], torque_body: Sequence[float]) -> None:
        force = tuple(float(v) for v in force_body)
        torque = tuple(float(v) for v in torque_body)
        if len(force) != 3 or len(torque) != 3 or not all(map(math.isfinite, force + torque)):
            raise ValueError(f"external wrench needs finite 3-vectors, got {force_body!r}, {torque_body!r}")
        self.external_force = force
        self.external_torque = torque

    def set_controls(self, controls: Sequence[float], spun_up: bool = False) -> None:
        """Hold rotor inputs; ``spun_up`` also jumps the motors to them (and the accelerations with them)."""
        if not spun_up:
            self.rotors.set_commands(controls)
            return
        before = list(self.rotors.filtered)
        self.rotors.set_commands(controls, spun_up)
        self._rest = None
        delta = [0.0] * 6
        for old, new, constants in zip(before, self.rotors.filtered, self.rotors.constants):
            for k in range(6):
                delta[k] += (new - old) * self.air_density * constants[k + 1]
        force = rotate(self.orientation, tuple(delta[:3]))
        torque = tuple(delta[3:])
        self.acceleration = tuple(a + f / self.mass for a, f in zip(self.acceleration, force))
        self.angular_acceleration = tuple(
            a + d for a, d in zip(self.angular_acceleration, matrix_vector(self.inverse_inertia, torque))
        )
        self.torque = tuple(t + d for t, d in zip(self.torque, torque))
        self.reported_acceleration = self.acceleration
        self.reported_angular_acceleration = self.angular_acceleration

    def set_kinematics(self, position=None, orientation=None, velocity=None, angular_velocity=None) -> None:
        """Place the body (teleport); accelerations are recomputed from gravity and Euler's equation.
        A quaternion that cannot be normalised raises ``ValueError`` before anything is changed."""
        if orientation is not None:
            orientation = quat_normalize(tuple(float(v) for v in orientation))
        self._rest = None
        if position is not None:
            self.position = tuple(float(v) for v in position)
        if orientation is not None:
            self.orientation = orientation
        if velocity is not None:
            self.velocity = tuple(float(v) for v in velocity)
        if angular_velocity is not None:
            self.angular_velocity = tuple(float(v) for v in angular_velocity)
        omega = self.angular_velocity
        momentum = matrix_vector(self.inertia, omega)
        gyro = cross(omega, momentum)
        self.angular_acceleration = matrix_vector(self.inverse_inertia, tuple(t - c for t, c in zip(self.torque, gyro)))
        self.acceleration = (0.0, 0.0, -self.gravity)
        self.reported_acceleration = self.acceleration
        self.reported_angular_acceleration = self.angular_acceleration

    # -- outputs -----------------------------------------------------------

    def ground_truth(self, time_s: float) -> GroundTruth:
        ax, ay, az = self.reported_acceleration
        # A perfect accelerometer measures a - g_vector = a + (0, 0, g), in the body frame.
        specific_force = rotate_inverse(self.orientation, (ax, ay, az + self.gravity))
        return GroundTruth(
            time_s=time_s,
            position=self.position,
            orientation=self.orientation,
            velocity_world=self.velocity,
            angular_velocity_body=self.angular_velocity,
            linear_acceleration_world=self.reported_acceleration,
            specific_force_body=specific_force,
            angular_acceleration_body=self.reported_angular_acceleration,
        )

    # -- rest: a step that changes nothing -----------------------------------

    @property
    def at_rest(self) -> bool:
        """True while the body sleeps: resting exactly, its steps skipped until something changes."""
        return self._rest is not None

    def _state(self) -> tuple:
        """Everything of the body a step reads and writes (its reported accelerations follow from it)."""
        return (self.position, self.orientation, self.velocity, self.angular_velocity, self.acceleration,
                self.angular_acceleration, self.torque, tuple(self.rotors.filtered))

    def _held_inputs(self, environment: Environment, colliders: list, settings: tuple) -> tuple:
        """Everything else a step reads: rotor commands and geometry, external wrench, wind, gravity,
        colliders and the engine settings (air density is checked apart)."""
        rotors = self.rotors
        return (tuple(rotors.commands), rotors.constants, self.external_force, self.external_torque,
                self.wind_enu_m_s or environment.wind_enu_m_s, environment.gravity_coefficients, collider_index(colliders),
                settings, self.drag_law)

    def _still_resting(self, environment: Environment, colliders: list, settings: tuple) -> bool:
        """Is the body still at the fixed point :meth:`advance` found?

        A physics step is a deterministic function of the state, the held inputs and the
        air density at the new position (colliders are static). When one step in contact
        returned exactly the state it started from, every further step would too, so
        while none of them has changed the body sleeps: it rests exactly, to the bit, and
        costs nothing. A new command, wrench, teleport or collider wakes it.
        """
        state, inputs = self._rest
        return (
            state == self._state()
            and inputs == self._held_inputs(environment, colliders, settings)
            and environment.air_density(self.position[2]) == self.air_density  # shared, interpolated cache
        )

    # -- the step ----------------------------------------------------------

    def advance(self, steps: int, environment: Environment, colliders: list, linear_drag_enabled: bool,
                slop_m: float, bounce_speed_m_s: float, sleep: bool = True) -> None:
        """Advance ``steps`` physics steps of ``self.dt`` with inputs held.

        With ``sleep``, a body at rest (see :meth:`_still_resting`) returns at once: its
        steps would change nothing.
        """
        settings = (linear_drag_enabled, slop_m, bounce_speed_m_s)
        colliders = collider_index(colliders)  # the broad phase: the colliders near the body, per grid square
        if self._rest is not None:
            if sleep and self._still_resting(environment, colliders, settings):
                return
            self._rest = None
        # State before the first step, to recognise a step that changes nothing (only in contact).
        previous = self._state() if sleep and self._in_contact else None
        contacts = None
        dt = self.dt
        half_dt = 0.5 * dt
        half_dt2 = 0.5 * dt * dt
        mass = self.mass
        inv_mass = 1.0 / mass
        (i00, i01, i02), (i10, i11, i12), (i20, i21, i22) = self.inertia
        (j00, j01, j02), (j10, j11, j12), (j20, j21, j22) = self.inverse_inertia
        area_x, area_y, area_z = self.areas
        lin_c = -0.5 * self.vehicle.linear_drag_coefficient if linear_drag_enabled else 0.0
        law = DRAG_LAWS.index(self.drag_law) if linear_drag_enabled else -1
        rotor_k, rotor_b, rotor_c = self.rotor_drag
        kdx, kdy, kdz = self.angular_drag
        efx, efy, efz = self.external_force
        etx, ety, etz = self.external_torque
        wind_x, wind_y, wind_z = self.wind_enu_m_s or environment.wind_enu_m_s
        density_at = environment.air_density
        g0, g1, g2 = environment.gravity_coefficients
        radius = self.bounding_radius
        near = colliders.near
        rotors = self.rotors
        constants = rotors.constants
        commands = rotors.commands
        filtered = rotors.filtered
        rotor_range = range(len(constants))

        px, py, pz = self.position
        qw, qx, qy, qz = self.orientation
        vx, vy, vz = self.velocity
        wx, wy, wz = self.angular_velocity
        ax, ay, az = self.acceleration
        bx, by, bz = self.angular_acceleration
        ptx, pty, ptz = self.torque
        rax = ray = raz = rbx = rby = rbz = 0.0
        g = self.gravity
        rho = self.air_density

        for _ in range(steps):
            # 1. position (velocity Verlet)
            px += vx * dt + ax * half_dt2
            py += vy * dt + ay * half_dt2
            pz += vz * dt + az * half_dt2
            # 2. orientation: q <- q * q_dt(angle-axis of the mid-step body rate), renormalised
            hx = wx + bx * half_dt
            hy = wy + by * half_dt
            hz = wz + bz * half_dt
            rate_squared = hx * hx + hy * hy + hz * hz
            if rate_squared > 1e-24:  # a body rate over 1e-12 rad/s
                cw, s = half_angle_series(rate_squared, dt)  # the batched path's terms, bit for bit
                dx = hx * s
                dy = hy * s
                dz = hz * s
                nw = qw * cw - qx * dx - qy * dy - qz * dz
                nx = qw * dx + qx * cw + qy * dz - qz * dy
                ny = qw * dy - qx * dz + qy * cw + qz * dx
                nz = qw * dz + qx * dy - qy * dx + qz * cw
                inv = 1.0 / math.sqrt(nw * nw + nx * nx + ny * ny + nz * nz)
                qw = nw * inv
                qx = nx * inv
                qy = ny * inv
                qz = nz * inv
            else:
                cw = 1.0
                dx = dy = dz = 0.0
            # body->world rotation matrix
            xx = qx * qx
            yy = qy * qy
            zz = qz * qz
            xy = qx * qy
            xz = qx * qz
            yz = qy * qz
            wxq = qw * qx
            wyq = qw * qy
            wzq = qw * qz
            r00 = 1.0 - 2.0 * (yy + zz)
            r01 = 2.0 * (xy - wzq)
            r02 = 2.0 * (xz + wyq)
            r10 = 2.0 * (xy + wzq)
            r11 = 1.0 - 2.0 * (xx + zz)
            r12 = 2.0 * (yz - wxq)
            r20 = 2.0 * (xz - wyq)
            r21 = 2.0 * (yz + wxq)
            r22 = 1.0 - 2.0 * (xx + yy)

            # 3. environment at the new altitude
            rho = density_at(pz)
            g = g0 + pz * (g1 + pz * g2)  # = environment.gravity(pz), inlined

            # rotors: first-order motor lag, then the wrench per unit density
            fx = fy = fz = tx = ty = tz = 0.0
            for i in rotor_range:
                gain, cfx, cfy, cfz, ctx, cty, ctz = constants[i]
                u = filtered[i]
                u += gain * (commands[i] - u)
                filtered[i] = u
                fx += u * cfx
                fy += u * cfy
                fz += u * cfz
                tx += u * ctx
                ty += u * cty
                tz += u * ctz
            thrust = fz * rho  # the rotors' total thrust (normals along body z), for rotor drag
            fx = fx * rho + efx
            fy = fy * rho + efy
            fz = fz * rho + efz
            tx = tx * rho + etx
            ty = ty * rho + ety
            tz = tz * rho + etz

            # predicted velocities at k+1 for the velocity-dependent terms
            ux = vx + ax * dt - wind_x
            uy = vy + ay * dt - wind_y
            uz = vz + az * dt - wind_z
            ox = wx + bx * dt
            oy = wy + by * dt
            oz = wz + bz * dt
            # drag on the air-relative velocity, body frame (physics/drag.py)
            if law >= 0:
                lx = r00 * ux + r10 * uy + r20 * uz
                ly = r01 * ux + r11 * uy + r21 * uz
                lz = r02 * ux + r12 * uy + r22 * uz
                if law == 0:  # projected (sec. 3.3.1): -1/2 rho C (Ax|vx| + Ay|vy| + Az|vz|) v
                    scale = lin_c * rho * (area_x * abs(lx) + area_y * abs(ly) + area_z * abs(lz))
                    fx += scale * lx
                    fy += scale * ly
                    fz += scale * lz
                elif law == 1:  # faces (AirSim's code): -1/2 rho C A_k v_k |v_k| per body axis
                    fx += lin_c * rho * area_x * lx * abs(lx)
                    fy += lin_c * rho * area_y * ly * abs(ly)
                    fz += lin_c * rho * area_z * lz * abs(lz)
                else:  # rotor (seed 004 eq. 13): -(k T + b) c_d1 (I - e3 e3^T) v
                    scale = -(rotor_k * thrust + rotor_b) * rotor_c
                    fx += scale * lx
                    fy += scale * ly
            # angular drag integrated over the body box (sec. 3.3.1)
            tx -= rho * kdx * ox * abs(ox)
            ty -= rho * kdy * oy * abs(oy)
            tz -= rho * kdz * oz * abs(oz)

            # 4. Newton plus gravity, world frame
            nax = (r00 * fx + r01 * fy + r02 * fz) * inv_mass
            nay = (r10 * fx + r11 * fy + r12 * fz) * inv_mass
            naz = (r20 * fx + r21 * fy + r22 * fz) * inv_mass - g

            contacts = None
            for collider, box in near(px, py, radius):
                if box is not None:
                    low, high = box
                    if (pz - radius > high[2] or pz + radius < low[2] or px - radius > high[0]
                            or px + radius < low[0] or py - radius > high[1] or py + radius < low[1]):
                        continue
                found = collider.contact((px, py, pz), (qw, qx, qy, qz), self.half_extents)
                if found is not None:
                    if contacts is None:
                        contacts = []
                    contacts.append(found)

            if contacts is not None:
                rotation = rotation_matrix((qw, qx, qy, qz))
                spares, (nax, nay, naz), (tx, ty, tz) = self._support(
                    contacts, rotation, (px, py, pz), (nax, nay, naz), (tx, ty, tz),
                    (vx + ax * dt, vy + ay * dt, vz + az * dt), (ox, oy, oz), bounce_speed_m_s,
                )

            # 5. velocity Verlet for the linear velocity
            vx += (ax + nax) * half_dt
            vy += (ay + nay) * half_dt
            vz += (az + naz) * half_dt
            ax, ay, az = nax, nay, naz
            # ... and its rotational counterpart on the body angular momentum L = I omega:
            # half torque impulse, transport into the rotated body frame (L <- R(q_dt)^T L, which is
            # where Euler's gyroscopic term -omega x I omega comes from), half torque impulse.
            lx = i00 * wx + i01 * wy + i02 * wz + ptx * half_dt
            ly = i10 * wx + i11 * wy + i12 * wz + pty * half_dt
            lz = i20 * wx + i21 * wy + i22 * wz + ptz * half_dt
            cx = dy * lz - dz * ly
            cy = dz * lx - dx * lz
            cz = dx * ly - dy * lx
            lx += 2.0 * (dy * cz - dz * cy - cw * cx) + tx * half_dt
            ly += 2.0 * (dz * cx - dx * cz - cw * cy) + ty * half_dt
            lz += 2.0 * (dx * cy - dy * cx - cw * cz) + tz * half_dt
            wx = j00 * lx + j01 * ly + j02 * lz
            wy = j10 * lx + j11 * ly + j12 * lz
            wz = j20 * lx + j21 * ly + j22 * lz
            ptx, pty, ptz = tx, ty, tz
            # Euler's rotation equation: alpha = I^-1 (tau - omega x (I omega))
            lx = i00 * wx + i01 * wy + i02 * wz
            ly = i10 * wx + i11 * wy + i12 * wz
            lz = i20 * wx + i21 * wy + i22 * wz
            mx = tx - (wy * lz - wz * ly)
            my = ty - (wz * lx - wx * lz)
            mz = tz - (wx * ly - wy * lx)
            bx = j00 * mx + j01 * my + j02 * mz
            by = j10 * mx + j11 * my + j12 * mz
            bz = j20 * mx + j21 * my + j22 * mz
            rax, ray, raz, rbx, rby, rbz = ax, ay, az, bx, by, bz

            # 6. contact impulses and projection
            if contacts is not None:
                (px, py, pz), (nvx, nvy, nvz), (nwx, nwy, nwz) = self._impulses(
                    contacts, spares, rotation, (px, py, pz), (vx, vy, vz), (wx, wy, wz), slop_m, bounce_speed_m_s
                )
                rax += (nvx - vx) / dt
                ray += (nvy - vy) / dt
                raz += (nvz - vz) / dt
                rbx += (nwx - wx) / dt
                rby += (nwy - wy) / dt
                rbz += (nwz - wz) / dt
                vx, vy, vz, wx, wy, wz = nvx, nvy, nvz, nwx, nwy, nwz
                # 7. at rest? A step that leaves the state unchanged leaves it unchanged forever
                # (inputs held): remember the fixed point and skip the remaining steps.
                if sleep:
                    state = ((px, py, pz), (qw, qx, qy, qz), (vx, vy, vz), (wx, wy, wz), (ax, ay, az),
                             (bx, by, bz), (tx, ty, tz), tuple(filtered))
                    if state == previous:
                        self._rest = (state, self._held_inputs(environment, colliders, settings))
                        break
                    previous = state
            else:
                previous = None

        self.position = (px, py, pz)
        self.orientation = (qw, qx, qy, qz)
        self.velocity = (vx, vy, vz)
        self.angular_velocity = (wx, wy, wz)
        self.acceleration = (ax, ay, az)
        self.angular_acceleration = (bx, by, bz)
        self.torque = (ptx, pty, ptz)
        if steps > 0:
            self.reported_acceleration = (rax, ray, raz)
            self.reported_angular_acceleration = (rbx, rby, rbz)
            self._in_contact = contacts is not None
        self.gravity = g
        self.air_density = rho

    # -- contact response (only runs while touching something) ---------------
    # Vectors are 3-tuples combined with the helpers of :mod:`.rotation`; the body->world
    # rotation matrix R(q) of the step is computed once and passed in.

    def _support(self, contacts, rotation, position, accel, torque, velocity, omega, rest_speed):
        """Support force, sliding and spinning friction, tipping torque of resting contacts (sec. 3.3.4).

        Returns, per contact, its normal force (N) and what it could still give (unused
        friction force, N; unused spin-friction and tipping torques, N m) so the impulse
        stage can stop residual sliding, spinning and rocking with it; then the corrected
        linear acceleration (world) and applied torque (body).
        """
        mass = self.mass
        mu = self.vehicle.friction
        force = scale(mass, accel)  # net force on the body (world), gravity included
        omega_world = matrix_vector(rotation, omega)
        spares = []
        for contact in contacts:
            n = contact.normal
            radius = contact.patch_radius_m
            r_world, r_body, n_body = _contact_geometry(contact, rotation, position)
            point_velocity = add(velocity, cross(omega_world, r_world))
            normal_speed = dot(point_velocity, n)
            push = dot(force, n)
            if normal_speed > rest_speed or push >= 0.0:
                spares.append(NO_SPARE)
                continue
            support = -push
            # Coulomb friction against sliding: stick if the tangential load is within mu N.
            tangential_load = add_scaled(force, support, n)  # normal part now cancelled
            sliding = sub_scaled(point_velocity, normal_speed, n)
            slide_speed = math.sqrt(dot(sliding, sliding))
            load = math.sqrt(dot(tangential_load, tangential_load))
            if slide_speed < rest_speed and load <= mu * support:
                friction = (-tangential_load[0], -tangential_load[1], -tangential_load[2])
                spare_friction = mu * support - load
            else:
                friction = _kinetic_friction(mu * support, sliding if slide_speed > 1e-9 else tangential_load)
                spare_friction = 0.0
            applied = add_scaled(friction, support, n)
            force = add(force, applied)
            torque = add(torque, cross(r_body, transpose_vector(rotation, applied)))
            # Spinning friction: a disc-shaped patch of radius R resists up to (2/3) mu N R about the
            # normal. Tipping: a face in contact shifts its support point to cancel up to N R.
            spin_limit = mu * support * radius * 2.0 / 3.0
            spin = dot(torque, n_body)
            spin_rate = dot(omega, n_body)
            if abs(spin_rate) * radius < rest_speed and abs(spin) <= spin_limit:
                spin_correction, spare_spin = -spin, spin_limit - abs(spin)
            else:
                against = spin_rate if abs(spin_rate) > 1e-9 else spin
                spin_correction, spare_spin = -math.copysign(min(abs(spin), spin_limit), against), 0.0
            torque = add_scaled(torque, spin_correction, n_body)
            tip_limit = support * radius
            tip = sub_scaled(torque, dot(torque, n_body), n_body)
            tip_size = math.sqrt(dot(tip, tip))
            rocking = sub_scaled(omega, spin_rate, n_body)
            spare_tip = 0.0
            if tip_size <= tip_limit and math.sqrt(dot(rocking, rocking)) * radius < rest_speed:
                torque = sub(torque, tip)
                spare_tip = tip_limit - tip_size
            spares.append((support, spare_friction, spare_spin, spare_tip))
        return spares, (force[0] / mass, force[1] / mass, force[2] / mass), torque

    def _impulses(self, contacts, spares, rotation, position, velocity, omega, slop_m, bounce_speed):
        """Projection out of each collider, then restitution and Coulomb friction impulses.

        The normal impulse ``j`` (restitution, none below the bounce speed) allows a
        tangential impulse up to ``mu j`` and, on a face of radius R, angular impulses up
        to ``(2/3) mu j R`` against spinning and ``j R`` against rocking; the support's
        unused friction and torques add their share over the step.
        """
        dt = self.dt
        mu = self.vehicle.friction
        inv_mass = 1.0 / self.mass
        inv_inertia = self.inverse_inertia
        for contact, (support, spare_friction, spare_spin, spare_tip) in zip(contacts, spares):
            n = contact.normal
            radius = contact.patch_radius_m
            if contact.depth_m > slop_m:
                position = add_scaled(position, contact.depth_m - slop_m, n)
            r_world, r_body, n_body = _contact_geometry(contact, rotation, position)
            point_velocity = add(velocity, cross(matrix_vector(rotation, omega), r_world))
            normal_speed = dot(point_velocity, n)
            if normal_speed >= 0.0 and support == 0.0:
                continue
            normal_impulse = 0.0
            if support > 0.0 and 0.0 < normal_speed:
                # Pressed onto the collider, yet drifting off it (round-off of the other impulses):
                # the support that cancelled gravity this step must not lift the body.
                normal_impulse = -normal_speed / _effective_inverse_mass(inv_mass, inv_inertia, r_body, n_body)
            elif normal_speed < 0.0:
                restitution = self.vehicle.restitution if normal_speed < -bounce_speed else 0.0
                normal_impulse = -(1.0 + restitution) * normal_speed / _effective_inverse_mass(
                    inv_mass, inv_inertia, r_body, n_body
                )
            sliding = sub_scaled(point_velocity, normal_speed, n)
            slide_speed = math.sqrt(dot(sliding, sliding))
            budget = mu * max(normal_impulse, 0.0) + spare_friction * dt
            impulse = scale(normal_impulse, n)
            if slide_speed > 0.0 and budget > 0.0:
                t = (sliding[0] / slide_speed, sliding[1] / slide_speed, sliding[2] / slide_speed)
                stop = slide_speed / _effective_inverse_mass(inv_mass, inv_inertia, r_body, transpose_vector(rotation, t))
                impulse = sub_scaled(impulse, min(stop, budget), t)
            impulse_body = transpose_vector(rotation, impulse)
            velocity = add_scaled(velocity, inv_mass, impulse)
            omega = add(omega, matrix_vector(inv_inertia, cross(r_body, impulse_body)))
            if radius > 0.0:
                pressing = max(normal_impulse, 0.0)
                omega = self._stop_rotation(omega, n_body, (2.0 / 3.0) * mu * pressing * radius + spare_spin * dt,
                                            pressing * radius + spare_tip * dt)
        return position, velocity, omega

    def _stop_rotation(self, omega, n_body, spin_budget, tip_budget):
        """Angular impulses (bounded by the budgets, N m s) against spinning about and rocking off a face."""
        inertia = self.inertia
        spin_rate = dot(omega, n_body)
        rocking = sub_scaled(omega, spin_rate, n_body)
        spin_momentum = abs(spin_rate) * dot(n_body, matrix_vector(inertia, n_body))
        if spin_momentum > 0.0:
            spin_rate *= max(0.0, 1.0 - spin_budget / spin_momentum)
        rocking_momentum = norm(matrix_vector(inertia, rocking))
        if rocking_momentum > 0.0:
            rocking = scale(max(0.0, 1.0 - tip_budget / rocking_momentum), rocking)
        return add_scaled(rocking, spin_rate, n_body)


def _contact_geometry(contact: Contact, rotation, position: Vector3):
    """Lever arm of the contact point from the centre of mass (world and body frame) and the normal (body frame)."""
    point = contact.point
    r_world = (point[0] - position[0], point[1] - position[1], point[2] - position[2])
    return r_world, transpose_vector(rotation, r_world), transpose_vector(rotation, contact.normal)


def _kinetic_friction(limit: float, direction: Vector3) -> Vector3:
    """Friction of magnitude ``limit`` (mu N) against ``direction`` (sliding, else the load); zero if it vanishes."""
    length = math.sqrt(dot(direction, direction))
    if not length > 0:
        return ZERO
    return (-limit * direction[0] / length, -limit * direction[1] / length, -limit * direction[2] / length)


def _effective_inverse_mass(inv_mass, inv_inertia, r_body, direction_body) -> float:
    """``1/m + d . ((I^-1 (r x d)) x r)``: how the contact point responds to a unit impulse along d."""
    angular = matrix_vector(inv_inertia, cross(r_body, direction_body))
    return inv_mass + dot(direction_body, cross(angular, r_body))
