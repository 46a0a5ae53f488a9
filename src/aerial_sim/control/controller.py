"""Cascaded multirotor controller: position -> velocity -> attitude -> body rate -> mixer.

The AirSim paper (Shah et al., FSR 2017, sec. 3) places a flight controller
between the companion computer's desired state and the actuators: it turns a
desired position/velocity/attitude into the control signals u_i of the vehicle
model (sec. 3.1). This is that low-level layer, built as the usual cascade of
the firmware it stands in for (PX4, and AirSim's own simple_flight):

1. position P:       v_sp = v_ff + K_p (p_sp - p), horizontal speed and climb/descent rate limited;
2. velocity PI:      a_sp = a_ff + K_v (v_sp - v) + K_vi integral(v_sp - v);
3. thrust vector:    F = m (a_sp + g e_z), tilt limited to ``max_tilt_rad`` keeping the vertical
                     component first; desired attitude R_d = [x_d, y_d, z_d] with z_d = F/|F| and
                     heading ``yaw_sp`` (Mellinger & Kumar, ICRA 2011, sec. IV); collective thrust
                     T = F . z_b (the current body z axis);
4. attitude P:       omega_sp = 2 K_att sign(q_e,w) q_e,xyz with q_e = q^-1 q_d (quaternion error),
                     roll/pitch and yaw rates limited;
5. body rate PI:     tau = J (K_w (omega_sp - omega) + K_wi integral(...)) + omega x J omega;
6. mixer:            u = A^+ [T, tau] with thrust/attitude priority (see :mod:`aerial_sim.control.mixer`).

Anti-windup: each integrator is clamped, and stops integrating in the direction
that would deepen a saturation of the stage it feeds (tilt or thrust limit for
the velocity loop, mixer saturation for the rate loop). In position mode the
velocity integrator also holds still on an axis while the vehicle moves faster
than ``velocity_integration_speed_m_s`` relative to the feed-forward velocity
(conditional integration): the position loop then slews the velocity setpoint
at K_p v, the velocity loop lags it, and integrating that lag (-1.2 m/s^2 by the
end of a 10 m step's deceleration) pulled the vehicle 0.3 m back from its goal
and let it creep in over 10 s. A steady disturbance (wind, a wrong mass) is still
integrated once the vehicle holds, so the steady-state error stays zero.

Units: SI; world ENU, body FLU; quaternions (w, x, y, z) body->world.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from aerial_sim.config import ParamsError, require, require_positive
from aerial_sim.control.geometry import matrix_to_quat, quat_multiply
from aerial_sim.control.mixer import SEA_LEVEL_DENSITY_KG_M3, Mixer
from aerial_sim.physics.rotation import (add, add_scaled, cross, dot, matrix_vector, norm, quat_conjugate, quat_normalize,
                                        rotation_matrix, sub)

STANDARD_GRAVITY_M_S2 = 9.80665

#: Lowest rate of fresh state (odometry) at which the cascade with the default gains keeps its
#: 250 Hz behaviour, Hz; the physics node never lowers ground truth below it. The controller runs
#: every 4 ms but acts on the latest odometry: a state refreshed every T s, with commands reaching
#: the rotors L s late, makes the body-rate loop a delayed sampled one (proportional gain
#: rate_p = 25 1/s; with a zero-order hold alone it is stable only for K T < 2, T < 80 ms, less
#: with the motor lag and integrator). Flown in the pure core (quad_x, 2 m take-off then a 10 m
#: step, the loop of test/test_control_closed_loop.py), the worst-case state age T + L decides:
#: up to about 50 ms the step is unchanged (peak 9.97 m; 250 Hz: 3.3 rad/s peak body rate,
#: 25 Hz: 4.3, 25 Hz + 20 ms: 6.4, 50 Hz + 20 ms: 5.4), at 60 ms it rings (50 Hz + 40 ms:
#: 11 % overshoot, 9 rad/s; 11.4 Hz: 8.4 rad/s) and at 80 ms and more the vehicle is lost
#: (25 Hz + 40 ms, 50 Hz + 60 ms, 10.4 Hz). 50 Hz (T = 20 ms) leaves 30 ms for transport and
#: scheduling on a loaded machine; 25 Hz would leave 10.
STABLE_STATE_RATE_HZ = 50.0


class StatePeriodMonitor:
    """Running average of the period at which fresh state arrives (from its stamps, sim time),
    and whether it is slower than the controller is known to fly at (1.5 / STABLE_STATE_RATE_HZ:
    30 ms; a single late or lost message does not trip it, a sustained slow stream does)."""

    #: Weight of the newest period (about the last 20 messages).
    AVERAGING = 0.05

    def __init__(self, stable_rate_hz: float = STABLE_STATE_RATE_HZ):
        self.limit_s = 1.5 / stable_rate_hz
        self.period_s = 0.0
        self._last_stamp = -math.inf

    def update(self, stamp_s: float) -> bool:
        """Note a state stamped ``stamp_s``; True while the average period is above the limit."""
        gap = stamp_s - self._last_stamp
        self._last_stamp = stamp_s
        if 0.0 < gap < 1.0:  # not the first message, a reset or a pause
            self.period_s += self.AVERAGING * (gap - self.period_s)
        return self.period_s > self.limit_s


@dataclass(frozen=True)
class ControllerParams:
    """Gains and limits of the cascade (defaults tuned for config/vehicles quad_x and hexa_x)."""

    #: Position loop gain per axis (x, y, z), 1/s.
    position_p: tuple[float, float, float] = (1.2, 1.2, 1.5)
    #: Velocity loop proportional gain per axis, 1/s.
    velocity_p: tuple[float, float, float] = (2.5, 2.5, 4.0)
    #: Velocity loop integral gain per axis, 1/s^2.
    velocity_i: tuple[float, float, float] = (0.8, 0.8, 2.0)
    #: Clamp of each velocity integrator's contribution, m/s^2.
    velocity_integral_limit_m_s2: float = 3.0
    #: Position mode: an axis's velocity integrator integrates only while the vehicle moves slower than this
    #: relative to the velocity feed-forward on that axis, m/s (module docstring: no winding in a step's
    #: deceleration). 1e9: always integrate (the controller before issue 31).
    velocity_integration_speed_m_s: float = 0.5
    #: Attitude loop gain (roll, pitch, yaw), 1/s.
    attitude_p: tuple[float, float, float] = (7.0, 7.0, 3.0)
    #: Body rate loop proportional gain (roll, pitch, yaw), 1/s (angular acceleration per rate error).
    rate_p: tuple[float, float, float] = (25.0, 25.0, 10.0)
    #: Body rate loop integral gain, 1/s^2.
    rate_i: tuple[float, float, float] = (10.0, 10.0, 4.0)
    #: Clamp of each rate integrator's contribution, rad/s^2.
    rate_integral_limit_rad_s2: float = 20.0
    #: Largest horizontal speed the position loop asks for, m/s.
    max_horizontal_speed_m_s: float = 8.0
    #: Largest climb rate, m/s.
    max_climb_rate_m_s: float = 3.0
    #: Largest descent rate, m/s.
    max_descent_rate_m_s: float = 2.0
    #: Largest tilt of the thrust vector from vertical, rad (35 deg).
    max_tilt_rad: float = 0.61
    #: Largest roll and pitch rate, rad/s.
    max_roll_pitch_rate_rad_s: float = 4.0
    #: Largest yaw rate, rad/s.
    max_yaw_rate_rad_s: float = 1.5
    #: Collective thrust limits as fractions of the vehicle's maximum (headroom for attitude control).
    min_thrust_fraction: float = 0.08
    max_thrust_fraction: float = 0.9
    #: Air density used to compute the rotors' maximum thrust and torque, kg/m^3.
    air_density_kg_m3: float = SEA_LEVEL_DENSITY_KG_M3
    gravity_m_s2: float = STANDARD_GRAVITY_M_S2

    def __post_init__(self):
        for name in ("position_p", "velocity_p", "attitude_p", "rate_p"):
            require(all(math.isfinite(g) and g > 0 for g in getattr(self, name)), f"{name} must be positive numbers")
        for name in ("velocity_i", "rate_i"):
            require(all(math.isfinite(g) and g >= 0 for g in getattr(self, name)), f"{name} must be numbers >= 0")
        require_positive(
            self,
            "velocity_integral_limit_m_s2",
            "velocity_integration_speed_m_s",
            "rate_integral_limit_rad_s2",
            "max_horizontal_speed_m_s",
            "max_climb_rate_m_s",
            "max_descent_rate_m_s",
            "max_tilt_rad",
            "max_roll_pitch_rate_rad_s",
            "max_yaw_rate_rad_s",
            "air_density_kg_m3",
            "gravity_m_s2",
        )
        require(self.max_tilt_rad < math.pi / 2, "max_tilt_rad must be below pi/2")
        require(
            0.0 <= self.min_thrust_fraction < self.max_thrust_fraction <= 1.0,
            "need 0 <= min_thrust_fraction < max_thrust_fraction <= 1",
        )


class VehicleState(NamedTuple):
    """What the controller knows about the vehicle (ground truth, or IMU attitude and rates).

    This, :class:`Setpoint` and :class:`ControlOutput` are named tuples (immutable values, made at every
    control step: a third of a frozen dataclass's construction)."""

    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float]
    velocity_world: tuple[float, float, float]
    angular_velocity_body: tuple[float, float, float]

    @classmethod
    def from_ground_truth(cls, truth) -> "VehicleState":
        """From a ``aerial_sim.physics.state.GroundTruth`` snapshot."""
        return cls(
            tuple(truth.position), tuple(truth.orientation), tuple(truth.velocity_world), tuple(truth.angular_velocity_body)
        )


class Setpoint(NamedTuple):
    """A desired state. ``position=None`` means velocity control (``velocity`` is then the target)."""

    position: tuple[float, float, float] | None = None
    #: Velocity feed-forward (position mode) or target (velocity mode), world ENU, m/s.
    velocity: tuple[float, float, float] = (0.0, 0.0, 0.0)
    #: Acceleration feed-forward, world ENU, m/s^2.
    acceleration: tuple[float, float, float] = (0.0, 0.0, 0.0)
    yaw: float = 0.0
    #: Yaw rate feed-forward, rad/s.
    yaw_rate: float = 0.0


class ControlOutput(NamedTuple):
    controls: tuple[float, ...]
    thrust_n: float
    torque_nm: tuple[float, float, float]
    attitude_setpoint: tuple[float, float, float, float]
    velocity_setpoint: tuple[float, float, float]
    saturated: bool


@dataclass
class _Integrators:
    velocity: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rate: tuple[float, float, float] = (0.0, 0.0, 0.0)


class CascadedController:
    """Position/velocity/attitude/rate cascade plus mixer for one multirotor (module docstring).

    Every step runs on plain floats and tuples: NumPy's per-call overhead on 3-vectors costs
    several times the arithmetic itself, and this runs every 4 ms on the control loop's critical path.
    """

    def __init__(self, params: ControllerParams, vehicle):
        self.params = params
        self.mass_kg = float(vehicle.mass_kg)
        #: Rows of the inertia matrix, kg m^2.
        self.inertia = tuple(map(tuple, np.asarray(vehicle.inertia_kg_m2, dtype=float).reshape(3, 3).tolist()))
        self.mixer = Mixer.from_vehicle(vehicle, params.air_density_kg_m3)
        weight = self.mass_kg * params.gravity_m_s2
        if self.mixer.max_thrust_n * params.max_thrust_fraction <= weight:
            raise ParamsError(
                f"vehicle '{getattr(vehicle, 'name', '?')}' cannot hover: {self.mixer.max_thrust_n:.1f} N maximum thrust "
                f"x max_thrust_fraction {params.max_thrust_fraction} <= weight {weight:.1f} N"
            )
        self._position_p = _floats(params.position_p)
        self._velocity_p = _floats(params.velocity_p)
        self._velocity_i = _floats(params.velocity_i)
        self._attitude_p = _floats(params.attitude_p)
        self._rate_p = _floats(params.rate_p)
        self._rate_i = _floats(params.rate_i)
        self._rate_limit = _floats(
            (params.max_roll_pitch_rate_rad_s, params.max_roll_pitch_rate_rad_s, params.max_yaw_rate_rad_s)
        )
        self._velocity_integral_limit = _floats((params.velocity_integral_limit_m_s2,) * 3)
        self._integration_speed = float(params.velocity_integration_speed_m_s)
        self._rate_integral_limit = _floats((params.rate_integral_limit_rad_s2,) * 3)
        self._thrust_min = params.min_thrust_fraction * self.mixer.max_thrust_n
        self._thrust_max = params.max_thrust_fraction * self.mixer.max_thrust_n
        self._tan_tilt = math.tan(params.max_tilt_rad)
        self._integrators = _Integrators()

    @property
    def hover_thrust_n(self) -> float:
        return self.mass_kg * self.params.gravity_m_s2

    def reset(self) -> None:
        """Clear the integrators (on arming, and whenever the vehicle rests on the ground)."""
        self._integrators = _Integrators()

    def update(self, state: VehicleState, setpoint: Setpoint, dt: float) -> ControlOutput:
        """One control step of length ``dt`` seconds: rotor inputs for ``setpoint`` from ``state``.

        Stages 1-6 written out in one function on local floats: the same operations in the same
        order as :meth:`update_by_stages` (which names each stage; ``test_control_closed_loop``
        requires both to give the same bits), at about a third of its CPU: it runs at every
        odometry message of a flight (issue 34: the flight's CPU per simulated second)."""
        params = self.params
        position, velocity, rates = state.position, state.velocity_world, state.angular_velocity_body
        # the rotation matrix's entries that are used: its last column (body z) and last row (rotation_matrix)
        qw, qx, qy, qz = quat_normalize(state.orientation)
        r02, r12 = 2 * (qx * qz + qw * qy), 2 * (qy * qz - qw * qx)
        r20, r21, r22 = 2 * (qx * qz - qw * qy), 2 * (qy * qz + qw * qx), 1 - 2 * (qx * qx + qy * qy)
        # 1. position P -> velocity setpoint, limited (_velocity_setpoint)
        vx, vy, vz = setpoint.velocity
        target = setpoint.position
        if target is not None:
            kp = self._position_p
            vx = vx + kp[0] * (target[0] - position[0]) * 1.0
            vy = vy + kp[1] * (target[1] - position[1]) * 1.0
            vz = vz + kp[2] * (target[2] - position[2]) * 1.0
        horizontal = math.hypot(vx, vy)
        if horizontal > params.max_horizontal_speed_m_s:
            scale = params.max_horizontal_speed_m_s / horizontal
            vx, vy = vx * scale, vy * scale
        vz = -params.max_descent_rate_m_s if -params.max_descent_rate_m_s > vz else vz
        vz = params.max_climb_rate_m_s if params.max_climb_rate_m_s < vz else vz
        # 2.-3. velocity PI -> thrust vector with tilt and thrust limits (_thrust_vector)
        ex, ey, ez = vx - velocity[0], vy - velocity[1], vz - velocity[2]
        ki, kv, limit = self._velocity_i, self._velocity_p, self._velocity_integral_limit[0]
        old_x, old_y, old_z = self._integrators.velocity
        cx = _integrated_within(old_x, ki[0] * ex * dt, limit)
        cy = _integrated_within(old_y, ki[1] * ey * dt, limit)
        cz = _integrated_within(old_z, ki[2] * ez * dt, limit)
        ax, ay, az = setpoint.acceleration
        mass = self.mass_kg
        fx = mass * ((ax + kv[0] * ex * 1.0) + cx)
        fy = mass * ((ay + kv[1] * ey * 1.0) + cy)
        fz = mass * (((az + kv[2] * ez * 1.0) + cz) + params.gravity_m_s2)
        thrust_min, thrust_max = self._thrust_min, self._thrust_max
        thrust_limited = False
        if fz < thrust_min or fz > thrust_max:
            thrust_limited = True
            fz = thrust_min if thrust_min > fz else fz
            fz = thrust_max if thrust_max < fz else fz
        room = thrust_max**2 - fz**2
        room = math.sqrt(0.0 if 0.0 > room else room)
        horizontal_limit = fz * self._tan_tilt
        horizontal_limit = room if room < horizontal_limit else horizontal_limit
        horizontal = math.hypot(fx, fy)
        tilt_limited = horizontal > horizontal_limit
        if tilt_limited:
            scale = horizontal_limit / horizontal
            fx, fy = fx * scale, fy * scale
        keep_x = keep_y = keep_z = True
        if target is not None:  # conditional integration (_conditional_integral)
            speed = self._integration_speed
            ffx, ffy, ffz = setpoint.velocity
            keep_x = not abs(velocity[0] - ffx) > speed
            keep_y = not abs(velocity[1] - ffy) > speed
            keep_z = not abs(velocity[2] - ffz) > speed
        if tilt_limited:
            keep_x = keep_x and ex * fx <= 0.0
            keep_y = keep_y and ey * fy <= 0.0
        if thrust_limited:
            keep_z = keep_z and (ez <= 0.0 if fz >= thrust_max else ez >= 0.0)
        velocity_integral = (cx if keep_x else old_x, cy if keep_y else old_y, cz if keep_z else old_z)
        # desired attitude: z along the thrust, heading yaw (_attitude_from_thrust_direction)
        length = math.sqrt(fx * fx + fy * fy + fz * fz)
        zx, zy, zz = fx / length, fy / length, fz / length
        yaw = setpoint.yaw
        hx, hy = math.cos(yaw), math.sin(yaw)
        yx, yy, yz = zy * 0.0 - zz * hy, zz * hx - zx * 0.0, zx * hy - zy * hx
        length = math.sqrt(yx * yx + yy * yy + yz * yz)
        if length < 1e-6:
            yx, yy, yz = -math.sin(yaw), math.cos(yaw), 0.0
        else:
            yx, yy, yz = yx / length, yy / length, yz / length
        xx, xy, xz = yy * zz - yz * zy, yz * zx - yx * zz, yx * zy - yy * zx
        attitude_sp = matrix_to_quat(((xx, yx, zx), (xy, yy, zy), (xz, yz, zz)))
        thrust_n = fx * r02 + fy * r12 + fz * r22
        thrust_n = thrust_min if thrust_min > thrust_n else thrust_n
        thrust_n = thrust_max if thrust_max < thrust_n else thrust_n
        # 4. attitude P on q_e = q^-1 q_d, with the raw orientation as _rate_setpoint has it
        pw, px, py, pz = state.orientation
        px, py, pz = -px, -py, -pz
        dw, dx, dy, dz = attitude_sp
        ew = pw * dw - px * dx - py * dy - pz * dz
        gain = 2.0 if ew >= 0 else -2.0
        ka, yaw_rate, rate_limit = self._attitude_p, setpoint.yaw_rate, self._rate_limit
        sx = ka[0] * (pw * dx + px * dw + py * dz - pz * dy) * gain + yaw_rate * r20
        sy = ka[1] * (pw * dy - px * dz + py * dw + pz * dx) * gain + yaw_rate * r21
        sz = ka[2] * (pw * dz + px * dy - py * dx + pz * dw) * gain + yaw_rate * r22
        sx = -rate_limit[0] if -rate_limit[0] > sx else sx
        sx = rate_limit[0] if rate_limit[0] < sx else sx
        sy = -rate_limit[1] if -rate_limit[1] > sy else sy
        sy = rate_limit[1] if rate_limit[1] < sy else sy
        sz = -rate_limit[2] if -rate_limit[2] > sz else sz
        sz = rate_limit[2] if rate_limit[2] < sz else sz
        self._integrators.velocity = velocity_integral
        # 5.-6. body-rate PI, mixer, rate anti-windup (_rates_to_controls)
        return self._rates_to_controls(rates, (sx, sy, sz), thrust_n, dt, attitude_sp, (vx, vy, vz),
                                       tilt_limited or thrust_limited)

    def update_by_stages(self, state: VehicleState, setpoint: Setpoint, dt: float) -> ControlOutput:
        """:meth:`update` stage by stage (the reference its one-function form is checked against)."""
        rotation = rotation_matrix(state.orientation)
        velocity_sp = self._velocity_setpoint(state.position, setpoint)
        thrust_vector, tilt_limited, thrust_limited = self._thrust_vector(state.velocity_world, velocity_sp, setpoint, dt)

        body_z_sp = _divided(thrust_vector, norm(thrust_vector))
        attitude_sp = _attitude_from_thrust_direction(body_z_sp, setpoint.yaw)
        body_z = _column(rotation, 2)
        thrust_n = min(max(dot(thrust_vector, body_z), self._thrust_min), self._thrust_max)

        rates_sp = self._rate_setpoint(state.orientation, attitude_sp, rotation, setpoint.yaw_rate)
        return self._rates_to_controls(state.angular_velocity_body, rates_sp, thrust_n, dt, attitude_sp,
                                       _floats(velocity_sp), tilt_limited or thrust_limited)

    def update_attitude(self, state: VehicleState, attitude_sp, dt: float, altitude: float | None = None,
                        throttle: float | None = None) -> ControlOutput:
        """Hold attitude ``attitude_sp`` (w, x, y, z) with stages 4-6; collective thrust holds ``altitude``
        (m, map; stage 1-2 on z only, tilt-compensated) or is ``throttle`` x the maximum thrust."""
        rotation = rotation_matrix(state.orientation)
        thrust_n, limited = self._collective(state, rotation, dt, altitude, throttle)
        attitude_sp = _floats(attitude_sp)
        rates_sp = self._rate_setpoint(state.orientation, attitude_sp, rotation, 0.0)
        return self._rates_to_controls(state.angular_velocity_body, rates_sp, thrust_n, dt, attitude_sp,
                                       (0.0, 0.0, 0.0), limited)

    def update_rates(self, state: VehicleState, rates_sp, dt: float, altitude: float | None = None,
                     throttle: float | None = None) -> ControlOutput:
        """Track body rates ``rates_sp`` (FLU, rad/s, limited) with stages 5-6; thrust as in :meth:`update_attitude`."""
        rotation = rotation_matrix(state.orientation)
        thrust_n, limited = self._collective(state, rotation, dt, altitude, throttle)
        rates_sp = _clamped(_floats(rates_sp), self._rate_limit)
        return self._rates_to_controls(state.angular_velocity_body, rates_sp, thrust_n, dt, tuple(state.orientation),
                                       (0.0, 0.0, 0.0), limited)

    def _collective(self, state: VehicleState, rotation, dt: float, altitude, throttle) -> tuple[float, bool]:
        """Collective thrust (N): ``throttle`` x maximum, or the vertical loops holding ``altitude``."""
        if altitude is None:
            thrust = float(throttle) * self.mixer.max_thrust_n
            return min(max(thrust, 0.0), self._thrust_max), thrust > self._thrust_max
        params = self.params
        error = self._position_p[2] * (altitude - state.position[2])
        velocity_sp = min(max(error, -params.max_descent_rate_m_s), params.max_climb_rate_m_s)
        velocity_error = velocity_sp - state.velocity_world[2]
        integral_x, integral_y, integral_z = self._integrators.velocity
        limit = self._velocity_integral_limit[2]
        integral_z = min(max(integral_z + self._velocity_i[2] * velocity_error * dt, -limit), limit)
        self._integrators.velocity = (integral_x, integral_y, integral_z)
        vertical = self.mass_kg * (self._velocity_p[2] * velocity_error + integral_z + params.gravity_m_s2)
        tilt_cosine = max(rotation[2][2], math.cos(params.max_tilt_rad))
        thrust = vertical / tilt_cosine
        clamped = min(max(thrust, self._thrust_min), self._thrust_max)
        return clamped, clamped != thrust

    def _rates_to_controls(self, rates, rates_sp, thrust_n, dt, attitude_sp, velocity_sp, limited) -> ControlOutput:
        """Stages 5-6: body-rate PI to torque, mixer, rate anti-windup."""
        rate_integral_before = self._integrators.rate
        torque = self._torque(rates, rates_sp, dt)
        mixed = self.mixer.mix(thrust_n, torque)
        achieved_torque = mixed.achieved[1:]
        if mixed.saturated:
            # Rate anti-windup: undo this step's integration on axes the mixer could not honour.
            self._integrators.rate = tuple(
                before if abs(achieved - wanted) > 1e-6 * (1.0 + abs(wanted)) else integral
                for before, integral, achieved, wanted in zip(
                    rate_integral_before, self._integrators.rate, achieved_torque, torque
                )
            )
        return ControlOutput(mixed.controls, mixed.achieved[0], achieved_torque, attitude_sp, velocity_sp,
                             mixed.saturated or limited)

    # -- the stages ------------------------------------------------------------

    def _velocity_setpoint(self, position, setpoint: Setpoint) -> tuple[float, float, float]:
        params = self.params
        velocity_sp = setpoint.velocity
        if setpoint.position is not None:
            velocity_sp = add(velocity_sp, _times(self._position_p, sub(setpoint.position, position)))
        vx, vy, vz = velocity_sp
        horizontal = math.hypot(vx, vy)
        if horizontal > params.max_horizontal_speed_m_s:
            scale = params.max_horizontal_speed_m_s / horizontal
            vx, vy = vx * scale, vy * scale
        vz = min(max(vz, -params.max_descent_rate_m_s), params.max_climb_rate_m_s)
        return (vx, vy, vz)

    def _thrust_vector(self, velocity, velocity_sp, setpoint: Setpoint, dt: float):
        """Desired thrust force (world, N) with tilt and thrust limits, and velocity-integrator anti-windup."""
        params = self.params
        error = sub(velocity_sp, velocity)
        integral = add(self._integrators.velocity, _times(self._velocity_i, error, dt))
        candidate = _clamped(integral, self._velocity_integral_limit)
        acceleration = add(add(setpoint.acceleration, _times(self._velocity_p, error)), candidate)
        force_x, force_y = self.mass_kg * acceleration[0], self.mass_kg * acceleration[1]
        vertical = self.mass_kg * (acceleration[2] + params.gravity_m_s2)

        thrust_limited = False
        if vertical < self._thrust_min or vertical > self._thrust_max:
            thrust_limited = True
            vertical = min(max(vertical, self._thrust_min), self._thrust_max)
        horizontal_limit = min(vertical * self._tan_tilt, math.sqrt(max(self._thrust_max**2 - vertical**2, 0.0)))
        horizontal = math.hypot(force_x, force_y)
        tilt_limited = horizontal > horizontal_limit
        if tilt_limited:
            scale = horizontal_limit / horizontal
            force_x, force_y = force_x * scale, force_y * scale
        force = (force_x, force_y, vertical)
        moving = None
        if setpoint.position is not None:
            limit, feed_forward = self._integration_speed, setpoint.velocity
            moving = tuple(abs(v - v_ff) > limit for v, v_ff in zip(velocity, feed_forward))
        self._integrators.velocity = self._conditional_integral(candidate, error, force, tilt_limited, thrust_limited,
                                                                moving)
        return force, tilt_limited, thrust_limited

    def _conditional_integral(self, candidate, error, force, tilt_limited: bool, thrust_limited: bool, moving=None):
        """Conditional integration: ``candidate``, except on axes whose saturation the error would deepen
        and, in position mode, axes on which the vehicle is still moving toward its setpoint (``moving``)."""
        keep_x = keep_y = keep_z = True
        if moving is not None:
            keep_x, keep_y, keep_z = not moving[0], not moving[1], not moving[2]
        if tilt_limited:
            keep_x = keep_x and error[0] * force[0] <= 0.0
            keep_y = keep_y and error[1] * force[1] <= 0.0
        if thrust_limited:
            at_max = force[2] >= self._thrust_max
            keep_z = keep_z and (error[2] <= 0.0 if at_max else error[2] >= 0.0)
        old_x, old_y, old_z = self._integrators.velocity
        new_x, new_y, new_z = candidate
        return (new_x if keep_x else old_x, new_y if keep_y else old_y, new_z if keep_z else old_z)

    def _rate_setpoint(self, orientation, attitude_sp, rotation, yaw_rate_ff: float) -> tuple[float, float, float]:
        error = quat_multiply(quat_conjugate(orientation), attitude_sp)
        gain = 2.0 if error[0] >= 0 else -2.0
        rates_sp = _times(self._attitude_p, error[1:], gain)
        # Yaw-rate feed-forward is about world z; express it in the body frame (the last row of R).
        rates_sp = add_scaled(rates_sp, yaw_rate_ff, rotation[2])
        return _clamped(rates_sp, self._rate_limit)

    def _torque(self, rates, rates_sp, dt: float) -> tuple[float, float, float]:
        """tau = J (K_w e + integral) + omega x J omega, e = omega_sp - omega (written out: every control step)."""
        wx, wy, wz = rates
        ex, ey, ez = rates_sp[0] - wx, rates_sp[1] - wy, rates_sp[2] - wz
        ki, kp, limit = self._rate_i, self._rate_p, self._rate_integral_limit[0]
        old_x, old_y, old_z = self._integrators.rate
        ix = _integrated_within(old_x, ki[0] * ex * dt, limit)
        iy = _integrated_within(old_y, ki[1] * ey * dt, limit)
        iz = _integrated_within(old_z, ki[2] * ez * dt, limit)
        self._integrators.rate = (ix, iy, iz)
        ax, ay, az = kp[0] * ex * 1.0 + ix, kp[1] * ey * 1.0 + iy, kp[2] * ez * 1.0 + iz
        (j00, j01, j02), (j10, j11, j12), (j20, j21, j22) = self.inertia
        jwx, jwy, jwz = j00 * wx + j01 * wy + j02 * wz, j10 * wx + j11 * wy + j12 * wz, j20 * wx + j21 * wy + j22 * wz
        return (j00 * ax + j01 * ay + j02 * az + (wy * jwz - wz * jwy),
                j10 * ax + j11 * ay + j12 * az + (wz * jwx - wx * jwz),
                j20 * ax + j21 * ay + j22 * az + (wx * jwy - wy * jwx))


def _attitude_from_thrust_direction(body_z, yaw: float) -> tuple[float, float, float, float]:
    """Attitude whose z axis is ``body_z`` and whose heading is ``yaw`` (Mellinger & Kumar 2011, eq. 6)."""
    heading = (math.cos(yaw), math.sin(yaw), 0.0)
    body_y = cross(body_z, heading)
    length = norm(body_y)
    if length < 1e-6:  # thrust horizontal along the heading: cannot happen within the tilt limit
        body_y = (-math.sin(yaw), math.cos(yaw), 0.0)
    else:
        body_y = _divided(body_y, length)
    body_x = cross(body_y, body_z)
    return matrix_to_quat(tuple(zip(body_x, body_y, body_z)))  # the rows of R_d = [x_d, y_d, z_d]


def _floats(values) -> tuple[float, ...]:
    return tuple(map(float, values))


def _times(a, b, factor: float = 1.0):
    """Element-wise product ``(a_i b_i) factor``."""
    return (a[0] * b[0] * factor, a[1] * b[1] * factor, a[2] * b[2] * factor)


def _divided(vector, divisor: float):
    return (vector[0] / divisor, vector[1] / divisor, vector[2] / divisor)


def _integrated_within(value: float, increment: float, limit: float) -> float:
    """An integrator's ``value + increment`` held to [-limit, limit] (the comparisons min/max make, NaN included)."""
    value = value + increment
    value = -limit if -limit > value else value
    return limit if limit < value else value


def _clamped(vector, limits):
    """Each component of ``vector`` clamped to [-limit, limit] (its own limit from ``limits``)."""
    (x, y, z), (limit_x, limit_y, limit_z) = vector, limits
    return (min(max(x, -limit_x), limit_x), min(max(y, -limit_y), limit_y), min(max(z, -limit_z), limit_z))


def _column(matrix, index: int):
    return (matrix[0][index], matrix[1][index], matrix[2][index])
