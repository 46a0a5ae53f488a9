"""The batched flight controller's cascade, 16 vehicles per SIMD pass.

:func:`cascade_lanes` computes exactly what :func:`aerial_sim.control.batched_controller.cascade` computes
(the cascade of :class:`~aerial_sim.control.controller.CascadedController`: position P, velocity PI,
thrust vector with its tilt and thrust limits, desired attitude after Mellinger & Kumar (ICRA 2011) eq. 6,
attitude P on the quaternion error, body-rate PI, PX4's pseudo-inverse mixer with its priorities, both
anti-windups), with the same operations in the same order. Only the layout differs: a block of
:data:`LANES` vehicles of one kind is copied into short arrays, one per quantity, and each stage is a loop
over the lanes whose branches are selects, which LLVM compiles to SIMD instructions (AVX2 or AVX-512).
IEEE add, multiply, divide and square root give the same bits in a vector lane, and libm's ``cos`` and
``sin`` are called per lane while the inputs are copied in, so every output equals the scalar kernel's to
the last bit (``test/test_swarm_closed_loop.py``).

A block is a run of rows of one kind with finite setpoints. Rows the lanes do not take go to the
scalar kernel: a run of fewer than :data:`MIN_LANES` rows of one kind, a block with an unusable state, and
a block whose desired attitude
needs one of the three rarer branches of Shepperd's matrix-to-quaternion method (a heading about 90
degrees or more from the present one, for instance yaw near 180 degrees).
"""

from __future__ import annotations

import math

import numpy as np

from aerial_sim.jit import njit

#: Vehicles per SIMD pass (two AVX-512 registers of doubles).
LANES = 16
#: A run of fewer vehicles of one kind goes to the one-vehicle kernel.
MIN_LANES = 4

#: Columns of the constants of each kind of vehicle (``BatchedController.const``).
MASS, THRUST_MIN, THRUST_MAX, MAX_THRUST, INERTIA = 0, 1, 2, 3, 4
CONST_COLUMNS = INERTIA + 9

#: Above this a horizontal length's squares may have overflowed: libm's ``hypot`` recomputes it.
OVERFLOW_GUARD = 1e150


@njit(cache=True, error_model="numpy")
def cascade_lanes(position, orientation, velocity, rates, setpoint_position, position_mode, velocity_ff,
                  acceleration_ff, yaw, yaw_rate, dt, kind, const, mixing, rotor_count, gains,
                  velocity_integral, rate_integral, controls, saturated_out, thrust_out, valid_out):
    """``cascade`` for every row (same arguments, same results to the last bit); returns the rows it
    left to the scalar kernel (module docstring), which the caller must still run."""
    count = position.shape[0]
    scalar = np.empty(count, dtype=np.int64)
    scalars = 0
    lane_of = np.empty(LANES, dtype=np.int64)
    lanes_buffer = np.empty((_ROWS + 2 * mixing.shape[1], LANES))
    n = 0
    while n < count:
        lanes = 0
        block_kind = -1
        while n < count and lanes < LANES:  # a block: the next valid rows while they are of one kind
            i = n
            # a finite setpoint (written out: as an inlined call the check cost 0.16 ms for 10,000 rows)
            inputs = velocity_ff[i, 0] + velocity_ff[i, 1] + velocity_ff[i, 2] + yaw[i] + yaw_rate[i]
            inputs += acceleration_ff[i, 0] + acceleration_ff[i, 1] + acceleration_ff[i, 2]
            if position_mode[i]:
                inputs += setpoint_position[i, 0] + setpoint_position[i, 1] + setpoint_position[i, 2]
            if not math.isfinite(inputs):  # that vehicle keeps its last inputs
                valid_out[i] = False
                n += 1
                continue
            if lanes > 0 and kind[i] != block_kind:
                break
            block_kind = kind[i]
            lane_of[lanes] = i
            lanes += 1
            n += 1
        if lanes < MIN_LANES:  # a short run of one kind: cheaper one at a time
            for lane in range(lanes):
                scalar[scalars] = lane_of[lane]
                scalars += 1
            continue
        for lane in range(lanes, LANES):  # spare lanes repeat the last vehicle (never stored)
            lane_of[lane] = lane_of[lanes - 1]
        for lane in range(lanes):
            valid_out[lane_of[lane]] = True
        if not _block(lanes_buffer, lane_of, lanes, position, orientation, velocity, rates, setpoint_position,
                      position_mode, velocity_ff, acceleration_ff, yaw, yaw_rate, dt, block_kind, const, mixing,
                      rotor_count[block_kind], gains, velocity_integral, rate_integral, controls, saturated_out,
                      thrust_out):
            for lane in range(lanes):
                scalar[scalars] = lane_of[lane]
                scalars += 1
    return scalar[:scalars]


@njit(cache=True, inline="always")
def state_is_usable(px, py, pz, moving, qw, qx, qy, qz, velocity_sum, rate_sum):
    """A state is finite (the position only when flying to a position) with a non-zero orientation: else the
    row keeps its last outputs and integrators (both kernels; the setpoint's check is written out in each)."""
    norm = qw * qw + qx * qx + qy * qy + qz * qz
    position_sum = px + py + pz
    total = velocity_sum + rate_sum + norm + (position_sum if moving else 0.0)
    return (total - total == 0.0) & (norm > 0.0)  # x - x is 0 for a finite x, NaN otherwise: no branch


# Rows of the lane buffer: one quantity of every lane each.
(_QW, _QX, _QY, _QZ, _R02, _R12, _R20, _R21, _R22, _VX, _VY, _VZ, _HV, _EX, _EY, _EZ, _CX, _CY, _CZ, _FX, _FY,
 _FZ, _TLIM, _HF, _DW, _DX, _DY, _DZ, _COS, _SIN, _ROLL, _PITCH, _YAWT, _BX, _BY, _BZ, _IX, _IY, _IZ, _THRUST,
 _SAT, _LOWU, _HIGHU, _LOW, _HIGH, _YSCALE, _AT, _AX, _AY, _AZ,
 # the inputs, copied in by _gather
 _PX, _PY, _PZ, _SPX, _SPY, _SPZ, _VELX, _VELY, _VELZ, _VFX, _VFY, _VFZ, _AFX, _AFY, _AFZ, _VIX, _VIY, _VIZ, _WX,
 _WY, _WZ, _MODE, _YAWRATE, _UNUSABLE, _ROWS) = range(75)


@njit(cache=True, error_model="numpy", inline="always")
def _block(b, lane_of, lanes, position, orientation, velocity, rates, setpoint_position, position_mode,
           velocity_ff, acceleration_ff, yaw, yaw_rate, dt, t, const, mixing, k, gains, velocity_integral,
           rate_integral, controls, saturated_out, thrust_out):
    """One block of lanes, all of kind ``t`` with ``k`` rotors; False (nothing stored) when a lane's state is
    not usable or its desired attitude needs another branch of Shepperd's method."""
    _gather(b, lane_of, position, orientation, velocity, rates, setpoint_position, position_mode, velocity_ff,
            acceleration_ff, yaw, yaw_rate, velocity_integral, rate_integral)
    _thrust_vector(b, dt, t, const, gains)
    if not _desired_attitude(b):
        return False
    _rates_and_torques(b, dt, t, const, gains)
    _mix(b, t, mixing, k)
    for lane in range(lanes):  # store: integrators, outputs
        i = lane_of[lane]
        velocity_integral[i, 0] = b[_CX, lane]
        velocity_integral[i, 1] = b[_CY, lane]
        velocity_integral[i, 2] = b[_CZ, lane]
        rate_integral[i, 0] = b[_IX, lane]
        rate_integral[i, 1] = b[_IY, lane]
        rate_integral[i, 2] = b[_IZ, lane]
        for r in range(k):
            controls[i, r] = b[_ROWS + r, lane]
        saturated_out[i] = b[_SAT, lane] != 0.0
        thrust_out[i] = b[_AT, lane]
    return True


@njit(cache=True, error_model="numpy", inline="always")
def _horizontal_lengths(b, x, y, out):
    """Row ``out`` = sqrt(x^2 + y^2) of rows ``x`` and ``y`` (:func:`~aerial_sim.control.batched_controller.
    horizontal_length`, vectorised; libm's ``hypot`` only in the lanes where the squares overflow)."""
    for lane in range(LANES):
        b[out, lane] = math.sqrt(b[x, lane] * b[x, lane] + b[y, lane] * b[y, lane])
    for lane in range(LANES):
        if b[out, lane] > OVERFLOW_GUARD:
            b[out, lane] = math.hypot(b[x, lane], b[y, lane])


@njit(cache=True, error_model="numpy", inline="always")
def _keep(b, row, before, lane, keep):
    """Row ``row`` keeps its new value where ``keep``, else takes row ``before``'s (both loaded first, then a
    select: a select between two addresses would stop the loop from vectorising)."""
    new, old = b[row, lane], b[before, lane]
    b[row, lane] = new if keep else old


@njit(cache=True, error_model="numpy", inline="always")
def _gather(b, lane_of, position, orientation, velocity, rates, setpoint_position, position_mode, velocity_ff,
            acceleration_ff, yaw, yaw_rate, velocity_integral, rate_integral):
    """Copy the lanes' inputs into their rows of the buffer; cos and sin of the yaw (libm, lane by lane)."""
    for lane in range(LANES):
        i = lane_of[lane]
        for c in range(4):
            b[_QW + c, lane] = orientation[i, c]
        for c in range(3):
            b[_PX + c, lane] = position[i, c]
            b[_SPX + c, lane] = setpoint_position[i, c]
            b[_VELX + c, lane] = velocity[i, c]
            b[_VFX + c, lane] = velocity_ff[i, c]
            b[_AFX + c, lane] = acceleration_ff[i, c]
            b[_VIX + c, lane] = velocity_integral[i, c]
            b[_BX + c, lane] = rate_integral[i, c]
            b[_WX + c, lane] = rates[i, c]
        b[_MODE, lane] = 1.0 if position_mode[i] else 0.0
        b[_YAWRATE, lane] = yaw_rate[i]
        b[_COS, lane] = math.cos(yaw[i])
        b[_SIN, lane] = math.sin(yaw[i])


@njit(cache=True, error_model="numpy", inline="always")
def _thrust_vector(b, dt, t, const, gains):
    """Stages 1-3: attitude matrix entries, velocity setpoint, velocity PI and its anti-windup (the
    integrator's next value in _CX.._CZ), the limited thrust vector (_FX.._FZ)."""
    kpx, kpy, kpz = gains[0], gains[1], gains[2]
    kvx, kvy, kvz = gains[3], gains[4], gains[5]
    kix, kiy, kiz = gains[6], gains[7], gains[8]
    vlim, max_h, max_down, max_up, tan_tilt, g = gains[21], gains[23], gains[24], gains[25], gains[26], gains[27]
    integration_speed = gains[28]
    mass = const[t, MASS]
    t_min, t_max = const[t, THRUST_MIN], const[t, THRUST_MAX]
    for lane in range(LANES):
        qw, qx, qy, qz = b[_QW, lane], b[_QX, lane], b[_QY, lane], b[_QZ, lane]
        usable = state_is_usable(b[_PX, lane], b[_PY, lane], b[_PZ, lane], b[_MODE, lane] != 0.0, qw, qx, qy, qz,
                                 b[_VELX, lane] + b[_VELY, lane] + b[_VELZ, lane],
                                 b[_WX, lane] + b[_WY, lane] + b[_WZ, lane])
        b[_UNUSABLE, lane] = 0.0 if usable else 1.0
        length = math.sqrt(qw * qw + qx * qx + qy * qy + qz * qz)
        qw, qx, qy, qz = qw / length, qx / length, qy / length, qz / length
        b[_QW, lane], b[_QX, lane], b[_QY, lane], b[_QZ, lane] = qw, qx, qy, qz
        b[_R02, lane] = 2 * (qx * qz + qw * qy)
        b[_R12, lane] = 2 * (qy * qz - qw * qx)
        b[_R20, lane] = 2 * (qx * qz - qw * qy)
        b[_R21, lane] = 2 * (qy * qz + qw * qx)
        b[_R22, lane] = 1 - 2 * (qx * qx + qy * qy)
        moving = b[_MODE, lane] != 0.0
        vx, vy, vz = b[_VFX, lane], b[_VFY, lane], b[_VFZ, lane]
        px = vx + kpx * (b[_SPX, lane] - b[_PX, lane]) * 1.0
        py = vy + kpy * (b[_SPY, lane] - b[_PY, lane]) * 1.0
        pz = vz + kpz * (b[_SPZ, lane] - b[_PZ, lane]) * 1.0
        b[_VX, lane] = px if moving else vx
        b[_VY, lane] = py if moving else vy
        b[_VZ, lane] = pz if moving else vz
    _horizontal_lengths(b, _VX, _VY, _HV)
    for lane in range(LANES):
        vx, vy, vz, horizontal = b[_VX, lane], b[_VY, lane], b[_VZ, lane], b[_HV, lane]
        scale = max_h / horizontal
        fast = horizontal > max_h
        vx = vx * scale if fast else vx
        vy = vy * scale if fast else vy
        vz = min(max(vz, -max_down), max_up)
        ex, ey, ez = vx - b[_VELX, lane], vy - b[_VELY, lane], vz - b[_VELZ, lane]
        b[_EX, lane], b[_EY, lane], b[_EZ, lane] = ex, ey, ez
        cx = min(max(b[_VIX, lane] + kix * ex * dt, -vlim), vlim)
        cy = min(max(b[_VIY, lane] + kiy * ey * dt, -vlim), vlim)
        cz = min(max(b[_VIZ, lane] + kiz * ez * dt, -vlim), vlim)
        b[_CX, lane], b[_CY, lane], b[_CZ, lane] = cx, cy, cz
        accx = b[_AFX, lane] + kvx * ex * 1.0 + cx
        accy = b[_AFY, lane] + kvy * ey * 1.0 + cy
        accz = b[_AFZ, lane] + kvz * ez * 1.0 + cz
        fx, fy = mass * accx, mass * accy
        fz = mass * (accz + g)
        thrust_limited = fz < t_min or fz > t_max
        limited = min(max(fz, t_min), t_max)
        fz = limited if thrust_limited else fz
        b[_FX, lane], b[_FY, lane], b[_FZ, lane] = fx, fy, fz
        b[_TLIM, lane] = 1.0 if thrust_limited else 0.0
    _horizontal_lengths(b, _FX, _FY, _HF)
    for lane in range(LANES):
        fx, fy, fz, horizontal = b[_FX, lane], b[_FY, lane], b[_FZ, lane], b[_HF, lane]
        ex, ey, ez = b[_EX, lane], b[_EY, lane], b[_EZ, lane]
        h_limit = min(fz * tan_tilt, math.sqrt(max(t_max * t_max - fz * fz, 0.0)))
        tilt_limited = horizontal > h_limit
        scale = h_limit / horizontal
        fx = fx * scale if tilt_limited else fx
        fy = fy * scale if tilt_limited else fy
        b[_FX, lane], b[_FY, lane] = fx, fy
        moving = b[_MODE, lane] != 0.0  # no integration while moving relative to the feed-forward
        thrust_limited = b[_TLIM, lane] != 0.0
        keep_x = ~(moving & (abs(b[_VELX, lane] - b[_VFX, lane]) > integration_speed))
        keep_y = ~(moving & (abs(b[_VELY, lane] - b[_VFY, lane]) > integration_speed))
        keep_z = ~(moving & (abs(b[_VELZ, lane] - b[_VFZ, lane]) > integration_speed))
        keep_x &= ~tilt_limited | (ex * fx <= 0.0)
        keep_y &= ~tilt_limited | (ey * fy <= 0.0)
        keep_z &= ~thrust_limited | ((fz >= t_max) & (ez <= 0.0)) | ((fz < t_max) & (ez >= 0.0))
        _keep(b, _CX, _VIX, lane, keep_x)
        _keep(b, _CY, _VIY, lane, keep_y)
        _keep(b, _CZ, _VIZ, lane, keep_z)
        b[_SAT, lane] = 1.0 if tilt_limited | thrust_limited else 0.0


@njit(cache=True, error_model="numpy", inline="always")
def _desired_attitude(b):
    """Desired attitude (_DW.._DZ): body z along the thrust, heading the yaw; False when a lane's
    matrix has a trace <= 0 (another branch of Shepperd's method) or its state is unusable (_UNUSABLE, set by
    :func:`_thrust_vector`): the block then goes to the scalar kernel."""
    other_branch = 0
    for lane in range(LANES):
        fx, fy, fz = b[_FX, lane], b[_FY, lane], b[_FZ, lane]
        f_norm = math.sqrt(fx * fx + fy * fy + fz * fz)
        zx, zy, zz = fx / f_norm, fy / f_norm, fz / f_norm
        hx, hy = b[_COS, lane], b[_SIN, lane]
        yx, yy, yz = zy * 0.0 - zz * hy, zz * hx - zx * 0.0, zx * hy - zy * hx
        y_norm = math.sqrt(yx * yx + yy * yy + yz * yz)
        degenerate = y_norm < 1e-6
        yx = -hy if degenerate else yx / y_norm
        yy = hx if degenerate else yy / y_norm
        yz = 0.0 if degenerate else yz / y_norm
        xx, xy, xz = yy * zz - yz * zy, yz * zx - yx * zz, yx * zy - yy * zx
        # _matrix_to_quat(xx, yx, zx, xy, yy, zy, xz, yz, zz), its first branch
        trace = xx + yy + zz
        other_branch += 0 if (trace > 0.0) & (b[_UNUSABLE, lane] == 0.0) else 1
        s = 2.0 * math.sqrt(1.0 + trace)
        w, x, y, z = 0.25 * s, (yz - zy) / s, (zx - xz) / s, (xy - yx) / s
        sign = -1.0 if w < 0 else 1.0
        length = math.sqrt(w * w + x * x + y * y + z * z)
        b[_DW, lane], b[_DX, lane] = sign * w / length, sign * x / length
        b[_DY, lane], b[_DZ, lane] = sign * y / length, sign * z / length
    return other_branch == 0


@njit(cache=True, error_model="numpy", inline="always")
def _rates_and_torques(b, dt, t, const, gains):
    """Collective thrust, attitude P (rate setpoint), body-rate PI (integrator in _IX.._IZ; _BX.._BZ hold
    the value before) and the torques J alpha + w x J w (_ROLL, _PITCH, _YAWT)."""
    kax, kay, kaz = gains[9], gains[10], gains[11]
    krx, kry, krz = gains[12], gains[13], gains[14]
    kjx, kjy, kjz = gains[15], gains[16], gains[17]
    lrx, lry, lrz = gains[18], gains[19], gains[20]
    rlim = gains[22]
    t_min, t_max = const[t, THRUST_MIN], const[t, THRUST_MAX]
    j0, j1, j2 = const[t, INERTIA], const[t, INERTIA + 1], const[t, INERTIA + 2]
    j3, j4, j5 = const[t, INERTIA + 3], const[t, INERTIA + 4], const[t, INERTIA + 5]
    j6, j7, j8 = const[t, INERTIA + 6], const[t, INERTIA + 7], const[t, INERTIA + 8]
    for lane in range(LANES):
        fx, fy, fz = b[_FX, lane], b[_FY, lane], b[_FZ, lane]
        b[_THRUST, lane] = min(max(fx * b[_R02, lane] + fy * b[_R12, lane] + fz * b[_R22, lane], t_min), t_max)
        qw, qx, qy, qz = b[_QW, lane], b[_QX, lane], b[_QY, lane], b[_QZ, lane]
        dw, dx, dy, dz = b[_DW, lane], b[_DX, lane], b[_DY, lane], b[_DZ, lane]
        ew = qw * dw + qx * dx + qy * dy + qz * dz
        exq = qw * dx - qx * dw - qy * dz + qz * dy
        eyq = qw * dy + qx * dz - qy * dw - qz * dx
        ezq = qw * dz - qx * dy + qy * dx - qz * dw
        gain = 2.0 if ew >= 0 else -2.0
        turn = b[_YAWRATE, lane]
        sx = min(max(kax * exq * gain + turn * b[_R20, lane], -lrx), lrx)
        sy = min(max(kay * eyq * gain + turn * b[_R21, lane], -lry), lry)
        sz = min(max(kaz * ezq * gain + turn * b[_R22, lane], -lrz), lrz)
        wx, wy, wz = b[_WX, lane], b[_WY, lane], b[_WZ, lane]
        ex, ey, ez = sx - wx, sy - wy, sz - wz
        before_x, before_y, before_z = b[_BX, lane], b[_BY, lane], b[_BZ, lane]
        ix = min(max(before_x + kjx * ex * dt, -rlim), rlim)
        iy = min(max(before_y + kjy * ey * dt, -rlim), rlim)
        iz = min(max(before_z + kjz * ez * dt, -rlim), rlim)
        b[_IX, lane], b[_IY, lane], b[_IZ, lane] = ix, iy, iz
        alx, aly, alz = krx * ex * 1.0 + ix, kry * ey * 1.0 + iy, krz * ez * 1.0 + iz
        jax = j0 * alx + j1 * aly + j2 * alz
        jay = j3 * alx + j4 * aly + j5 * alz
        jaz = j6 * alx + j7 * aly + j8 * alz
        jwx = j0 * wx + j1 * wy + j2 * wz
        jwy = j3 * wx + j4 * wy + j5 * wz
        jwz = j6 * wx + j7 * wy + j8 * wz
        b[_ROLL, lane] = jax + (wy * jwz - wz * jwy)
        b[_PITCH, lane] = jay + (wz * jwx - wx * jwz)
        b[_YAWT, lane] = jaz + (wx * jwy - wy * jwx)


@njit(cache=True, error_model="numpy", inline="always")
def _mix(b, t, mixing, k):
    """``Mixer.mix`` on the lanes: roll/pitch first (scaled into a spread of 1), the thrust shifted to
    fit, then as much yaw as fits; rotor inputs in rows _ROWS.._ROWS + k, the attitude part in the k rows
    after them; the rate anti-windup on _IX.._IZ."""
    u_att = _ROWS + mixing.shape[1]
    for lane in range(LANES):
        b[_LOWU, lane], b[_HIGHU, lane] = math.inf, -math.inf
        b[_LOW, lane], b[_HIGH, lane] = -math.inf, math.inf
        b[_YSCALE, lane] = 1.0
        b[_AT, lane] = b[_AX, lane] = b[_AY, lane] = b[_AZ, lane] = 0.0
    for r in range(k):
        m_roll, m_pitch = mixing[t, r, 1], mixing[t, r, 2]
        for lane in range(LANES):
            u = m_roll * b[_ROLL, lane] + m_pitch * b[_PITCH, lane]
            b[u_att + r, lane] = u
            b[_LOWU, lane], b[_HIGHU, lane] = min(b[_LOWU, lane], u), max(b[_HIGHU, lane], u)
    for r in range(k):
        m_thrust, d = mixing[t, r, 0], mixing[t, r, 4]
        for lane in range(LANES):
            spread = b[_HIGHU, lane] - b[_LOWU, lane]
            u = b[u_att + r, lane]
            u = u / spread if spread > 1.0 else u
            base = m_thrust * b[_THRUST, lane] + u
            b[_ROWS + r, lane] = base
            b[_LOW, lane], b[_HIGH, lane] = max(b[_LOW, lane], -base / d), min(b[_HIGH, lane], (1.0 - base) / d)
    for lane in range(LANES):
        low, high = b[_LOW, lane], b[_HIGH, lane]
        shift = min(max(0.0, low), high) if low <= high else 0.5 * (low + high)
        b[_LOW, lane] = shift
    for r in range(k):
        d, m_yaw = mixing[t, r, 4], mixing[t, r, 3]
        for lane in range(LANES):
            shift = b[_LOW, lane]
            base = b[_ROWS + r, lane] + shift * d if shift != 0.0 else b[_ROWS + r, lane]
            b[_ROWS + r, lane] = base
            y = m_yaw * b[_YAWT, lane]
            room = (1.0 - base) / y if y > 1e-12 else (-base / y if y < -1e-12 else math.inf)
            b[_YSCALE, lane] = min(b[_YSCALE, lane], room)
    for lane in range(LANES):
        b[_YSCALE, lane] = max(0.0, b[_YSCALE, lane])
    for r in range(k):
        m_yaw, a0, a1, a2, a3 = mixing[t, r, 3], mixing[t, r, 5], mixing[t, r, 6], mixing[t, r, 7], mixing[t, r, 8]
        for lane in range(LANES):
            u = min(max(b[_ROWS + r, lane] + b[_YSCALE, lane] * (m_yaw * b[_YAWT, lane]), 0.0), 1.0)
            b[_ROWS + r, lane] = u
            b[_AT, lane] += a0 * u
            b[_AX, lane] += a1 * u
            b[_AY, lane] += a2 * u
            b[_AZ, lane] += a3 * u
    for lane in range(LANES):  # rate anti-windup: undo this step's integration where the mixer fell short
        roll, pitch, yaw_torque = b[_ROLL, lane], b[_PITCH, lane], b[_YAWT, lane]
        short_x = abs(b[_AX, lane] - roll) > 1e-6 * (1.0 + abs(roll))
        short_y = abs(b[_AY, lane] - pitch) > 1e-6 * (1.0 + abs(pitch))
        short_z = abs(b[_AZ, lane] - yaw_torque) > 1e-6 * (1.0 + abs(yaw_torque))
        mixer_saturated = (b[_LOW, lane] != 0.0) | (b[_HIGHU, lane] - b[_LOWU, lane] > 1.0) | (b[_YSCALE, lane] < 1.0)
        _keep(b, _IX, _BX, lane, ~(mixer_saturated & short_x))
        _keep(b, _IY, _BY, lane, ~(mixer_saturated & short_y))
        _keep(b, _IZ, _BZ, lane, ~(mixer_saturated & short_z))
        b[_SAT, lane] = 1.0 if mixer_saturated | (b[_SAT, lane] != 0.0) else 0.0
