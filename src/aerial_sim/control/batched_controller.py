"""The flight controller's cascade for many vehicles at once: rows of arrays, one compiled loop.

Same maths, same order of operations, as :class:`~aerial_sim.control.controller.CascadedController`
(position P -> velocity PI -> thrust vector with tilt and thrust limits -> attitude P on the
quaternion error -> body-rate PI -> pseudo-inverse mixer with roll/pitch, thrust, yaw priority;
the conditional-integration anti-windup of both integrators): see that module's docstring for
the equations and their sources (Mellinger & Kumar, ICRA 2011; PX4's multirotor mixer). Row ``i``
of every array is vehicle ``i``; vehicles may differ (mass, inertia, rotor count and geometry),
the gains and limits are one :class:`ControllerParams` for all.

The per-vehicle controller is the reference: ``test/test_swarm_closed_loop.py`` flies both side by
side and requires the same rotor inputs to round-off. Only position and velocity setpoints
(:meth:`CascadedController.update`) are batched; attitude and rate modes stay per vehicle.

Cost, 10,000 quads on the 2-core machine: about 0.11 us per vehicle and control step with the SIMD
lanes (:mod:`~aerial_sim.control.cascade_lanes`, ``LANE_CASCADE``), 0.23 us one vehicle at a time (both
compiled with numba), against about 40 us for the per-vehicle Python controller
(``tools/dev.sh bench swarm --closed-loop``).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from aerial_sim.control.cascade_lanes import (CONST_COLUMNS, INERTIA, MASS, MAX_THRUST, OVERFLOW_GUARD, THRUST_MAX,
                                              THRUST_MIN, cascade_lanes, state_is_usable)
from aerial_sim.control.controller import CascadedController, ControllerParams
from aerial_sim.jit import njit

#: Run the cascade 16 vehicles per SIMD pass (:mod:`~aerial_sim.control.cascade_lanes`, same results to the
#: last bit); False: one vehicle at a time, the reference.
LANE_CASCADE = True


class BatchedController:
    """The cascade of :class:`CascadedController` for N vehicles (module docstring).

    ``vehicles``: one ``MultirotorParams`` per row (the same object may repeat). Raises
    :class:`~aerial_sim.config.ParamsError` as the per-vehicle controller does (a vehicle that
    cannot hover, a rotor geometry the mixer refuses).
    """

    def __init__(self, params: ControllerParams, vehicles: Sequence):
        self.params = params
        count = len(vehicles)
        if count == 0:
            raise ValueError("a batched controller needs at least one vehicle")
        built: dict[int, int] = {}
        singles = []
        kinds = []
        for vehicle in vehicles:  # one reference controller per distinct vehicle: its checks, its mixer
            key = id(vehicle)
            if key not in built:
                built[key] = len(singles)
                singles.append(CascadedController(params, vehicle))
            kinds.append(built[key])
        rotors = max(single.mixer.rotor_count for single in singles)
        self.count = count
        self.rotors = rotors
        #: Each row's kind of vehicle: its row of :attr:`const`, :attr:`mixing` and :attr:`kind_rotors`
        #: (10,000 quads read one row of constants, which stays in cache, not 4 MB of copies per step).
        self.kind = np.array(kinds, dtype=np.int64)
        self.kind_rotors = np.array([single.mixer.rotor_count for single in singles], dtype=np.int64)
        self.rotor_count = self.kind_rotors[self.kind]
        self.const = np.zeros((len(singles), CONST_COLUMNS))
        #: Per rotor: the columns of A^+ (thrust, roll, pitch, yaw), the thrust direction, then the
        #: rotor's column of A (thrust, tau_x, tau_y, tau_z at u = 1).
        self.mixing = np.zeros((len(singles), rotors, 9))
        for row, single in enumerate(singles):
            mixer = single.mixer
            k = mixer.rotor_count
            self.const[row, MASS] = single.mass_kg
            self.const[row, THRUST_MIN] = single._thrust_min
            self.const[row, THRUST_MAX] = single._thrust_max
            self.const[row, MAX_THRUST] = mixer.max_thrust_n
            self.const[row, INERTIA : INERTIA + 9] = np.asarray(single.inertia).ravel()
            self.mixing[row, :k, 0] = mixer._thrust_column
            self.mixing[row, :k, 1] = mixer._roll_column
            self.mixing[row, :k, 2] = mixer._pitch_column
            self.mixing[row, :k, 3] = mixer._yaw_column
            self.mixing[row, :k, 4] = mixer._thrust_direction
            self.mixing[row, :k, 5:9] = np.asarray(mixer._allocation_columns)
        p = params
        self.gains = np.array([
            *p.position_p, *p.velocity_p, *p.velocity_i, *p.attitude_p, *p.rate_p, *p.rate_i,
            p.max_roll_pitch_rate_rad_s, p.max_roll_pitch_rate_rad_s, p.max_yaw_rate_rad_s,
            p.velocity_integral_limit_m_s2, p.rate_integral_limit_rad_s2, p.max_horizontal_speed_m_s,
            p.max_descent_rate_m_s, p.max_climb_rate_m_s, math.tan(p.max_tilt_rad), p.gravity_m_s2,
            p.velocity_integration_speed_m_s,
        ], dtype=float)
        #: Integrators: velocity (m/s^2) and body rate (rad/s^2), one row per vehicle.
        self.velocity_integral = np.zeros((count, 3))
        self.rate_integral = np.zeros((count, 3))
        #: Outputs of the last :meth:`update`.
        self.controls = np.zeros((count, rotors))
        self.saturated = np.zeros(count, dtype=np.bool_)
        self.thrust_n = np.zeros(count)
        #: False for rows whose setpoint or state was unusable (:meth:`update`): their outputs and integrators
        #: were kept.
        self.valid = np.ones(count, dtype=np.bool_)
        self._all_rows = np.arange(count)

    def reset(self, rows=None) -> None:
        """Clear the integrators of ``rows`` (all by default), as ``CascadedController.reset``."""
        rows = slice(None) if rows is None else rows
        self.velocity_integral[rows] = 0.0
        self.rate_integral[rows] = 0.0

    def update(self, position, orientation, velocity, angular_velocity, setpoint_position, velocity_ff,
               acceleration_ff, yaw, yaw_rate, dt: float, position_mode=None) -> np.ndarray:
        """One control step of ``dt`` s for every row; returns the (N, K) rotor inputs (a view,
        overwritten by the next call; rows of vehicles with fewer rotors padded with zeros). A row
        whose setpoint or state holds a NaN or an infinity, or whose orientation is zero, keeps its
        previous inputs and integrators (``valid`` says which): one broken vehicle does not stop a swarm.

        Arrays (N, 3) / (N, 4) / (N,): ``position`` (ENU m), ``orientation`` (w, x, y, z body->world),
        ``velocity`` (world m/s), ``angular_velocity`` (body rad/s) -- the columns of the batched
        physics' state may be passed as they are --, and the setpoint as in
        :class:`~aerial_sim.control.controller.Setpoint`: ``setpoint_position``, velocity and
        acceleration feed-forward, ``yaw``, ``yaw_rate``. ``position_mode`` (N,) bool: False rows are
        velocity control (``velocity_ff`` is the target, ``setpoint_position`` ignored); all True
        by default.
        """
        if position_mode is None:
            position_mode = np.ones(self.count, dtype=np.bool_)
        dt = float(dt)
        if not (dt > 0.0 and math.isfinite(dt)):
            raise ValueError(f"dt must be a positive number of seconds, got {dt!r}")
        arguments = (np.asarray(position, dtype=float), np.asarray(orientation, dtype=float),
                     np.asarray(velocity, dtype=float), np.asarray(angular_velocity, dtype=float),
                     np.asarray(setpoint_position, dtype=float), np.asarray(position_mode, dtype=np.bool_),
                     np.asarray(velocity_ff, dtype=float), np.asarray(acceleration_ff, dtype=float),
                     np.asarray(yaw, dtype=float), np.asarray(yaw_rate, dtype=float), dt,
                     self.kind, self.const, self.mixing, self.kind_rotors, self.gains,
                     self.velocity_integral, self.rate_integral, self.controls, self.saturated, self.thrust_n,
                     self.valid)
        rows = cascade_lanes(*arguments) if LANE_CASCADE else self._all_rows
        if rows.size:
            cascade(rows, *arguments)
        return self.controls


@njit(cache=True, inline="always")
def horizontal_length(x, y):
    """sqrt(x^2 + y^2): what the per-vehicle controller's ``math.hypot`` gives, to round-off, in operations that
    vectorise (:mod:`~aerial_sim.control.cascade_lanes`); libm's ``hypot`` where the squares may overflow."""
    length = math.sqrt(x * x + y * y)
    return math.hypot(x, y) if length > OVERFLOW_GUARD else length


def _clamp(value, limit):
    return min(max(value, -limit), limit)


_clamp_jit = njit(cache=True)(_clamp)


@njit(cache=True)
def cascade(rows, position, orientation, velocity, rates, setpoint_position, position_mode, velocity_ff,
            acceleration_ff, yaw, yaw_rate, dt, kind, const, mixing, rotor_count, gains,
            velocity_integral, rate_integral, controls, saturated_out, thrust_out, valid_out):
    """:meth:`CascadedController.update` for the rows ``rows``, in place on the integrators and outputs; row
    ``i``'s constants are row ``kind[i]`` of ``const``, ``mixing`` and ``rotor_count``."""
    kpx, kpy, kpz = gains[0], gains[1], gains[2]
    kvx, kvy, kvz = gains[3], gains[4], gains[5]
    kix, kiy, kiz = gains[6], gains[7], gains[8]
    kax, kay, kaz = gains[9], gains[10], gains[11]
    krx, kry, krz = gains[12], gains[13], gains[14]
    kjx, kjy, kjz = gains[15], gains[16], gains[17]
    lrx, lry, lrz = gains[18], gains[19], gains[20]
    vlim, rlim, max_h, max_down, max_up, tan_tilt, g = (gains[21], gains[22], gains[23], gains[24], gains[25],
                                                       gains[26], gains[27])
    integration_speed = gains[28]
    u_att = np.empty(mixing.shape[1])
    base = np.empty(mixing.shape[1])
    for i in rows:
        # a finite setpoint and state (written out: as an inlined call the check cost 1 ms for 10,000 rows)
        inputs = velocity_ff[i, 0] + velocity_ff[i, 1] + velocity_ff[i, 2] + yaw[i] + yaw_rate[i]
        inputs += acceleration_ff[i, 0] + acceleration_ff[i, 1] + acceleration_ff[i, 2]
        if position_mode[i]:
            inputs += setpoint_position[i, 0] + setpoint_position[i, 1] + setpoint_position[i, 2]
        if not math.isfinite(inputs) or not state_is_usable(
                position[i, 0], position[i, 1], position[i, 2], position_mode[i], orientation[i, 0],
                orientation[i, 1], orientation[i, 2], orientation[i, 3],
                velocity[i, 0] + velocity[i, 1] + velocity[i, 2], rates[i, 0] + rates[i, 1] + rates[i, 2]):  # that vehicle keeps its last inputs
            valid_out[i] = False
            continue
        valid_out[i] = True
        t = kind[i]
        mass = const[t, MASS]
        t_min, t_max = const[t, THRUST_MIN], const[t, THRUST_MAX]
        # rotation matrix of the (normalised) orientation
        qw, qx, qy, qz = orientation[i, 0], orientation[i, 1], orientation[i, 2], orientation[i, 3]
        length = math.sqrt(qw * qw + qx * qx + qy * qy + qz * qz)
        qw, qx, qy, qz = qw / length, qx / length, qy / length, qz / length
        r02 = 2 * (qx * qz + qw * qy)
        r12 = 2 * (qy * qz - qw * qx)
        r20 = 2 * (qx * qz - qw * qy)
        r21 = 2 * (qy * qz + qw * qx)
        r22 = 1 - 2 * (qx * qx + qy * qy)
        # 1. position P -> velocity setpoint, limited
        vx, vy, vz = velocity_ff[i, 0], velocity_ff[i, 1], velocity_ff[i, 2]
        if position_mode[i]:
            vx = vx + kpx * (setpoint_position[i, 0] - position[i, 0]) * 1.0
            vy = vy + kpy * (setpoint_position[i, 1] - position[i, 1]) * 1.0
            vz = vz + kpz * (setpoint_position[i, 2] - position[i, 2]) * 1.0
        horizontal = horizontal_length(vx, vy)
        if horizontal > max_h:
            scale = max_h / horizontal
            vx, vy = vx * scale, vy * scale
        vz = min(max(vz, -max_down), max_up)
        # 2. velocity PI -> 3. thrust vector
        ex, ey, ez = vx - velocity[i, 0], vy - velocity[i, 1], vz - velocity[i, 2]
        cx = _clamp_jit(velocity_integral[i, 0] + kix * ex * dt, vlim)
        cy = _clamp_jit(velocity_integral[i, 1] + kiy * ey * dt, vlim)
        cz = _clamp_jit(velocity_integral[i, 2] + kiz * ez * dt, vlim)
        accx = acceleration_ff[i, 0] + kvx * ex * 1.0 + cx
        accy = acceleration_ff[i, 1] + kvy * ey * 1.0 + cy
        accz = acceleration_ff[i, 2] + kvz * ez * 1.0 + cz
        fx, fy = mass * accx, mass * accy
        fz = mass * (accz + g)
        thrust_limited = False
        if fz < t_min or fz > t_max:
            thrust_limited = True
            fz = min(max(fz, t_min), t_max)
        h_limit = min(fz * tan_tilt, math.sqrt(max(t_max * t_max - fz * fz, 0.0)))
        horizontal = horizontal_length(fx, fy)
        tilt_limited = horizontal > h_limit
        if tilt_limited:
            scale = h_limit / horizontal
            fx, fy = fx * scale, fy * scale
        keep_x = keep_y = keep_z = True
        if position_mode[i]:  # no integration while moving relative to the feed-forward
            keep_x = not abs(velocity[i, 0] - velocity_ff[i, 0]) > integration_speed
            keep_y = not abs(velocity[i, 1] - velocity_ff[i, 1]) > integration_speed
            keep_z = not abs(velocity[i, 2] - velocity_ff[i, 2]) > integration_speed
        if tilt_limited:
            keep_x = keep_x and ex * fx <= 0.0
            keep_y = keep_y and ey * fy <= 0.0
        if thrust_limited:
            keep_z = keep_z and (ez <= 0.0 if fz >= t_max else ez >= 0.0)
        if keep_x:
            velocity_integral[i, 0] = cx
        if keep_y:
            velocity_integral[i, 1] = cy
        if keep_z:
            velocity_integral[i, 2] = cz
        # desired attitude: z along the thrust, heading yaw (Mellinger & Kumar eq. 6)
        f_norm = math.sqrt(fx * fx + fy * fy + fz * fz)
        zx, zy, zz = fx / f_norm, fy / f_norm, fz / f_norm
        hx, hy = math.cos(yaw[i]), math.sin(yaw[i])
        yx, yy, yz = zy * 0.0 - zz * hy, zz * hx - zx * 0.0, zx * hy - zy * hx
        y_norm = math.sqrt(yx * yx + yy * yy + yz * yz)
        if y_norm < 1e-6:
            yx, yy, yz = -math.sin(yaw[i]), math.cos(yaw[i]), 0.0
        else:
            yx, yy, yz = yx / y_norm, yy / y_norm, yz / y_norm
        xx, xy, xz = yy * zz - yz * zy, yz * zx - yx * zz, yx * zy - yy * zx
        dw, dx, dy, dz = _matrix_to_quat(xx, yx, zx, xy, yy, zy, xz, yz, zz)
        # collective thrust along the present body z
        thrust = min(max(fx * r02 + fy * r12 + fz * r22, t_min), t_max)
        # 4. attitude P on q_e = q^-1 q_d
        ew = qw * dw + qx * dx + qy * dy + qz * dz
        exq = qw * dx - qx * dw - qy * dz + qz * dy
        eyq = qw * dy + qx * dz - qy * dw - qz * dx
        ezq = qw * dz - qx * dy + qy * dx - qz * dw
        gain = 2.0 if ew >= 0 else -2.0
        sx = kax * exq * gain + yaw_rate[i] * r20
        sy = kay * eyq * gain + yaw_rate[i] * r21
        sz = kaz * ezq * gain + yaw_rate[i] * r22
        sx, sy, sz = _clamp_jit(sx, lrx), _clamp_jit(sy, lry), _clamp_jit(sz, lrz)
        # 5. body-rate PI -> torque
        wx, wy, wz = rates[i, 0], rates[i, 1], rates[i, 2]
        ex, ey, ez = sx - wx, sy - wy, sz - wz
        before_x, before_y, before_z = rate_integral[i, 0], rate_integral[i, 1], rate_integral[i, 2]
        ix = _clamp_jit(before_x + kjx * ex * dt, rlim)
        iy = _clamp_jit(before_y + kjy * ey * dt, rlim)
        iz = _clamp_jit(before_z + kjz * ez * dt, rlim)
        alx, aly, alz = krx * ex * 1.0 + ix, kry * ey * 1.0 + iy, krz * ez * 1.0 + iz
        j = const[t, INERTIA : INERTIA + 9]
        jax = j[0] * alx + j[1] * aly + j[2] * alz
        jay = j[3] * alx + j[4] * aly + j[5] * alz
        jaz = j[6] * alx + j[7] * aly + j[8] * alz
        jwx = j[0] * wx + j[1] * wy + j[2] * wz
        jwy = j[3] * wx + j[4] * wy + j[5] * wz
        jwz = j[6] * wx + j[7] * wy + j[8] * wz
        roll = jax + (wy * jwz - wz * jwy)
        pitch = jay + (wz * jwx - wx * jwz)
        yaw_torque = jaz + (wx * jwy - wy * jwx)
        # 6. mixer (Mixer.mix)
        k = rotor_count[t]
        saturated = False
        low_u, high_u = math.inf, -math.inf
        for r in range(k):
            u = mixing[t, r, 1] * roll + mixing[t, r, 2] * pitch
            u_att[r] = u
            low_u, high_u = min(low_u, u), max(high_u, u)
        spread = high_u - low_u
        if spread > 1.0:
            for r in range(k):
                u_att[r] = u_att[r] / spread
            saturated = True
        low, high = -math.inf, math.inf
        for r in range(k):
            b = mixing[t, r, 0] * thrust + u_att[r]
            base[r] = b
            d = mixing[t, r, 4]
            low, high = max(low, -b / d), min(high, (1.0 - b) / d)
        shift = min(max(0.0, low), high) if low <= high else 0.5 * (low + high)
        if shift != 0.0:
            for r in range(k):
                base[r] = base[r] + shift * mixing[t, r, 4]
            saturated = True
        yaw_scale = 1.0
        for r in range(k):
            y = mixing[t, r, 3] * yaw_torque
            if y > 1e-12:
                yaw_scale = min(yaw_scale, (1.0 - base[r]) / y)
            elif y < -1e-12:
                yaw_scale = min(yaw_scale, -base[r] / y)
        yaw_scale = max(0.0, yaw_scale)
        if yaw_scale < 1.0:
            saturated = True
        at, ax_, ay_, az_ = 0.0, 0.0, 0.0, 0.0
        for r in range(k):
            u = min(max(base[r] + yaw_scale * (mixing[t, r, 3] * yaw_torque), 0.0), 1.0)
            controls[i, r] = u
            at += mixing[t, r, 5] * u
            ax_ += mixing[t, r, 6] * u
            ay_ += mixing[t, r, 7] * u
            az_ += mixing[t, r, 8] * u
        rate_integral[i, 0], rate_integral[i, 1], rate_integral[i, 2] = ix, iy, iz
        if saturated:  # rate anti-windup: undo this step's integration where the mixer fell short
            if abs(ax_ - roll) > 1e-6 * (1.0 + abs(roll)):
                rate_integral[i, 0] = before_x
            if abs(ay_ - pitch) > 1e-6 * (1.0 + abs(pitch)):
                rate_integral[i, 1] = before_y
            if abs(az_ - yaw_torque) > 1e-6 * (1.0 + abs(yaw_torque)):
                rate_integral[i, 2] = before_z
        saturated_out[i] = saturated or tilt_limited or thrust_limited
        thrust_out[i] = at


@njit(cache=True)
def _matrix_to_quat(m00, m01, m02, m10, m11, m12, m20, m21, m22):
    """``geometry.matrix_to_quat`` (Shepperd's method, w >= 0) on the matrix given by its entries."""
    trace = m00 + m11 + m22
    if trace > 0.0:
        s = 2.0 * math.sqrt(1.0 + trace)
        w, x, y, z = 0.25 * s, (m21 - m12) / s, (m02 - m20) / s, (m10 - m01) / s
    elif m00 > m11 and m00 > m22:
        s = 2.0 * math.sqrt(1.0 + m00 - m11 - m22)
        w, x, y, z = (m21 - m12) / s, 0.25 * s, (m01 + m10) / s, (m02 + m20) / s
    elif m11 > m22:
        s = 2.0 * math.sqrt(1.0 + m11 - m00 - m22)
        w, x, y, z = (m02 - m20) / s, (m01 + m10) / s, 0.25 * s, (m12 + m21) / s
    else:
        s = 2.0 * math.sqrt(1.0 + m22 - m00 - m11)
        w, x, y, z = (m10 - m01) / s, (m02 + m20) / s, (m12 + m21) / s, 0.25 * s
    sign = -1.0 if w < 0 else 1.0
    length = math.sqrt(w * w + x * x + y * y + z * z)
    return sign * w / length, sign * x / length, sign * y / length, sign * z / length
