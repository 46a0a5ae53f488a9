"""Compiled inner loops of the batched (structure-of-arrays) physics path.

The same free-flight step as :meth:`aerial_sim.physics.rigid_body.RigidBody.advance`
(AirSim paper, Shah et al. 2017, sec. 3.3: velocity Verlet, body-frame
angle-axis quaternion update, rotors with a first-order motor lag, linear and
angular drag, g(h), interpolated 1976 atmosphere, wind), written once per
vehicle over rows of NumPy arrays and compiled by numba (:func:`advance_free`;
:func:`advance_free_lanes` runs it 16 vehicles at a time as SIMD loops, the same
bits), and the vehicles' rows in and out (:func:`specific_forces`, :func:`take_commands`).
The broad phase that decides which vehicles may fly free of contacts for a window
of steps is :mod:`aerial_sim.physics.broad_phase_kernels`.
Contacts (ground, scene, other vehicles) are not handled here: those vehicles
step through the scalar reference path (see :mod:`aerial_sim.physics.batched`).

The arithmetic follows the scalar step operation by operation (no fast-math,
so no reassociation or fused multiply-add; ``error_model="numpy"`` only drops
the division-by-zero checks): one vehicle stepped here agrees with the scalar
path to round-off. Two shortcuts keep that: a diagonal inertia skips its zero
products (:func:`product`), and the step's half-angle terms come from one
function both paths call (:func:`~aerial_sim.physics.rotation.half_angle_series`, a series with no libm
call for the body rates of flight).

Without numba the functions run as plain Python (correct, slow); the world
then keeps the scalar path (:data:`COMPILED`).
"""

from __future__ import annotations

import math

import numpy as np

from aerial_sim.jit import COMPILED, jitable, njit
from aerial_sim.physics.rotation import SERIES_HALF_ANGLE, half_angle_polynomial, half_angle_series


# Columns of the per-vehicle state array (one row per vehicle, float64).
P, Q, V, W, A, B, TAU, RA, RB = 0, 3, 7, 10, 13, 16, 19, 22, 25
GRAVITY, DENSITY, ANCHOR_UP, ANCHOR_DENSITY, DENSITY_SLOPE = 28, 29, 30, 31, 32
EXT_FORCE, EXT_TORQUE = 33, 36
STATE_COLUMNS = 39

# Columns of the per-vehicle constants array.
MASS, INV_MASS, INERTIA, INV_INERTIA, AREAS, LIN_DRAG, ANG_DRAG = 0, 1, 2, 11, 20, 23, 24
RADIUS, MAX_LIFT, HALF_EXTENTS = 27, 28, 29
#: Drag law (index into physics.drag.DRAG_LAWS, -1: no drag) and the rotor law's (k, b, c_d1).
DRAG_LAW, ROTOR_DRAG = 32, 33
CONST_COLUMNS = 36

# Columns of the per-rotor constants (as RotorArray.constants): lag gain, unit wrench (Fx, Fy, Fz, Tx, Ty, Tz).
ROTOR_COLUMNS = 7


@njit(cache=True)
def is_diagonal(const, i):
    """Whether vehicle ``i``'s inertia and inverse inertia have no off-diagonal terms (AirSim's
    box-and-motors inertia of a symmetric multirotor: quad_x and hexa_x)."""
    for row in range(3):
        for column in range(3):
            if row != column and (const[i, INERTIA + 3 * row + column] != 0.0
                                  or const[i, INV_INERTIA + 3 * row + column] != 0.0):
                return False
    return True


@njit(cache=True)
def product(diagonal, m00, m01, m02, m10, m11, m12, m20, m21, m22, x, y, z):
    """The 3x3 matrix times (x, y, z), row by row left to right; only the diagonal where the
    matrix is ``diagonal``.

    The zero terms left out change nothing but, where a row's sum is zero, its sign
    (``-0.0 + 0.0`` is ``+0.0``): equal values, so the scalar path's full product agrees.
    """
    if diagonal:
        return m00 * x, m11 * y, m22 * z
    return (m00 * x + m01 * y + m02 * z, m10 * x + m11 * y + m12 * z, m20 * x + m21 * y + m22 * z)


# Compiled into advance_free (and half_angle_polynomial into advance_free_lanes). numba's cache of
# these kernels does not notice edits to rotation.half_angle_series or half_angle_polynomial: after
# changing them, delete physics/__pycache__/*.nb[ic] (the batched-vs-scalar agreement tests catch a
# stale kernel).
jitable(half_angle_polynomial)  # called by half_angle_series, compiled into both kernels
half_angle_terms = njit(cache=True, error_model="numpy")(half_angle_series)


@njit(cache=True, error_model="numpy")
def advance_free(indices, steps_left, state, const, rotor_const, commands, filtered, rotor_count,
                 wind, gravity_poly, dt, band, stop_up):
    """Advance each vehicle in ``indices`` by ``steps_left[i]`` contact-free steps, in place.

    A vehicle whose next position leaves its air-density band stops before that step:
    ``steps_left[i]`` keeps the steps still to do and ``stop_up[i]`` the height at which the
    caller must re-anchor the band (the scalar path's ``Environment.air_density`` refresh).
    Returns how many vehicles stopped early.
    """
    half_dt = 0.5 * dt
    half_dt2 = 0.5 * dt * dt
    g0, g1, g2 = gravity_poly[0], gravity_poly[1], gravity_poly[2]
    stopped = 0
    for i in indices:
        n = steps_left[i]
        if n <= 0:
            continue
        px, py, pz = state[i, P], state[i, P + 1], state[i, P + 2]
        qw, qx, qy, qz = state[i, Q], state[i, Q + 1], state[i, Q + 2], state[i, Q + 3]
        vx, vy, vz = state[i, V], state[i, V + 1], state[i, V + 2]
        wx, wy, wz = state[i, W], state[i, W + 1], state[i, W + 2]
        ax, ay, az = state[i, A], state[i, A + 1], state[i, A + 2]
        bx, by, bz = state[i, B], state[i, B + 1], state[i, B + 2]
        ptx, pty, ptz = state[i, TAU], state[i, TAU + 1], state[i, TAU + 2]
        g = state[i, GRAVITY]
        rho = state[i, DENSITY]
        anchor_up, anchor_rho, slope = state[i, ANCHOR_UP], state[i, ANCHOR_DENSITY], state[i, DENSITY_SLOPE]
        efx, efy, efz = state[i, EXT_FORCE], state[i, EXT_FORCE + 1], state[i, EXT_FORCE + 2]
        etx, ety, etz = state[i, EXT_TORQUE], state[i, EXT_TORQUE + 1], state[i, EXT_TORQUE + 2]
        inv_mass = const[i, INV_MASS]
        i00, i01, i02 = const[i, INERTIA], const[i, INERTIA + 1], const[i, INERTIA + 2]
        i10, i11, i12 = const[i, INERTIA + 3], const[i, INERTIA + 4], const[i, INERTIA + 5]
        i20, i21, i22 = const[i, INERTIA + 6], const[i, INERTIA + 7], const[i, INERTIA + 8]
        j00, j01, j02 = const[i, INV_INERTIA], const[i, INV_INERTIA + 1], const[i, INV_INERTIA + 2]
        j10, j11, j12 = const[i, INV_INERTIA + 3], const[i, INV_INERTIA + 4], const[i, INV_INERTIA + 5]
        j20, j21, j22 = const[i, INV_INERTIA + 6], const[i, INV_INERTIA + 7], const[i, INV_INERTIA + 8]
        area_x, area_y, area_z = const[i, AREAS], const[i, AREAS + 1], const[i, AREAS + 2]
        lin_c = const[i, LIN_DRAG]
        law = int(const[i, DRAG_LAW])
        rotor_k, rotor_b, rotor_c = const[i, ROTOR_DRAG], const[i, ROTOR_DRAG + 1], const[i, ROTOR_DRAG + 2]
        wind_x, wind_y, wind_z = wind[i, 0], wind[i, 1], wind[i, 2]
        kdx, kdy, kdz = const[i, ANG_DRAG], const[i, ANG_DRAG + 1], const[i, ANG_DRAG + 2]
        rotors = rotor_count[i]
        diagonal = is_diagonal(const, i)
        done = 0
        while done < n:
            # 1. position (velocity Verlet); stop first if it leaves the density band
            nz = pz + (vz * dt + az * half_dt2)
            offset = nz - anchor_up
            if not (-band < offset < band):
                stop_up[i] = nz
                stopped += 1
                break
            px += vx * dt + ax * half_dt2
            py += vy * dt + ay * half_dt2
            pz = nz
            # 2. orientation: q <- q * q_dt(angle-axis of the mid-step body rate), renormalised
            hx = wx + bx * half_dt
            hy = wy + by * half_dt
            hz = wz + bz * half_dt
            rate_squared = hx * hx + hy * hy + hz * hz
            if rate_squared > 1e-24:  # a body rate over 1e-12 rad/s
                cw, sn = half_angle_terms(rate_squared, dt)
                dx = hx * sn
                dy = hy * sn
                dz = hz * sn
                nw = qw * cw - qx * dx - qy * dy - qz * dz
                nx = qw * dx + qx * cw + qy * dz - qz * dy
                ny = qw * dy - qx * dz + qy * cw + qz * dx
                nq = qw * dz + qx * dy - qy * dx + qz * cw
                inv = 1.0 / math.sqrt(nw * nw + nx * nx + ny * ny + nq * nq)
                qw = nw * inv
                qx = nx * inv
                qy = ny * inv
                qz = nq * inv
            else:
                cw = 1.0
                dx = dy = dz = 0.0
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
            rho = anchor_rho + slope * offset
            g = g0 + pz * (g1 + pz * g2)
            # rotors: first-order motor lag, then the wrench per unit density
            fx = fy = fz = tx = ty = tz = 0.0
            for k in range(rotors):
                u = filtered[i, k]
                u += rotor_const[i, k, 0] * (commands[i, k] - u)
                filtered[i, k] = u
                fx += u * rotor_const[i, k, 1]
                fy += u * rotor_const[i, k, 2]
                fz += u * rotor_const[i, k, 3]
                tx += u * rotor_const[i, k, 4]
                ty += u * rotor_const[i, k, 5]
                tz += u * rotor_const[i, k, 6]
            thrust = fz * rho
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
            if law >= 0:
                lx = r00 * ux + r10 * uy + r20 * uz
                ly = r01 * ux + r11 * uy + r21 * uz
                lz = r02 * ux + r12 * uy + r22 * uz
                if law == 0:
                    drag = lin_c * rho * (area_x * abs(lx) + area_y * abs(ly) + area_z * abs(lz))
                    fx += drag * lx
                    fy += drag * ly
                    fz += drag * lz
                elif law == 1:
                    fx += lin_c * rho * area_x * lx * abs(lx)
                    fy += lin_c * rho * area_y * ly * abs(ly)
                    fz += lin_c * rho * area_z * lz * abs(lz)
                else:
                    drag = -(rotor_k * thrust + rotor_b) * rotor_c
                    fx += drag * lx
                    fy += drag * ly
            tx -= rho * kdx * ox * abs(ox)
            ty -= rho * kdy * oy * abs(oy)
            tz -= rho * kdz * oz * abs(oz)
            # 4. Newton plus gravity, world frame
            nax = (r00 * fx + r01 * fy + r02 * fz) * inv_mass
            nay = (r10 * fx + r11 * fy + r12 * fz) * inv_mass
            naz = (r20 * fx + r21 * fy + r22 * fz) * inv_mass - g
            # 5. velocity Verlet, and its rotational form on L = I omega
            vx += (ax + nax) * half_dt
            vy += (ay + nay) * half_dt
            vz += (az + naz) * half_dt
            ax, ay, az = nax, nay, naz
            lx, ly, lz = product(diagonal, i00, i01, i02, i10, i11, i12, i20, i21, i22, wx, wy, wz)
            lx += ptx * half_dt
            ly += pty * half_dt
            lz += ptz * half_dt
            cx = dy * lz - dz * ly
            cy = dz * lx - dx * lz
            cz = dx * ly - dy * lx
            lx += 2.0 * (dy * cz - dz * cy - cw * cx) + tx * half_dt
            ly += 2.0 * (dz * cx - dx * cz - cw * cy) + ty * half_dt
            lz += 2.0 * (dx * cy - dy * cx - cw * cz) + tz * half_dt
            wx, wy, wz = product(diagonal, j00, j01, j02, j10, j11, j12, j20, j21, j22, lx, ly, lz)
            ptx, pty, ptz = tx, ty, tz
            lx, ly, lz = product(diagonal, i00, i01, i02, i10, i11, i12, i20, i21, i22, wx, wy, wz)
            mx = tx - (wy * lz - wz * ly)
            my = ty - (wz * lx - wx * lz)
            mz = tz - (wx * ly - wy * lx)
            bx, by, bz = product(diagonal, j00, j01, j02, j10, j11, j12, j20, j21, j22, mx, my, mz)
            done += 1
        steps_left[i] = n - done
        if done > 0:
            state[i, P], state[i, P + 1], state[i, P + 2] = px, py, pz
            state[i, Q], state[i, Q + 1], state[i, Q + 2], state[i, Q + 3] = qw, qx, qy, qz
            state[i, V], state[i, V + 1], state[i, V + 2] = vx, vy, vz
            state[i, W], state[i, W + 1], state[i, W + 2] = wx, wy, wz
            state[i, A], state[i, A + 1], state[i, A + 2] = ax, ay, az
            state[i, B], state[i, B + 1], state[i, B + 2] = bx, by, bz
            state[i, TAU], state[i, TAU + 1], state[i, TAU + 2] = ptx, pty, ptz
            state[i, RA], state[i, RA + 1], state[i, RA + 2] = ax, ay, az
            state[i, RB], state[i, RB + 1], state[i, RB + 2] = bx, by, bz
            state[i, GRAVITY] = g
            state[i, DENSITY] = rho
    return stopped


# -- the same free step, vectorised across vehicles ---------------------------------------------

#: Vehicles per block of :func:`advance_free_lanes` (the width of its loops over lanes).
LANES = 16
# Rows of a block's lane buffer, each LANES wide: the state a step changes, the window's inputs, the
# rotors' wrench sums, a flag, then per rotor: filtered input, command, lag gain, unit wrench (6).
(L_PX, L_PY, L_PZ, L_QW, L_QX, L_QY, L_QZ, L_VX, L_VY, L_VZ, L_WX, L_WY, L_WZ, L_AX, L_AY, L_AZ, L_BX, L_BY,
 L_BZ, L_TX, L_TY, L_TZ, L_G, L_RHO, L_ANCHOR, L_ANCHOR_RHO, L_SLOPE, L_EFX, L_EFY, L_EFZ, L_ETX, L_ETY, L_ETZ,
 L_INV_MASS, L_I0, L_I1, L_I2, L_J0, L_J1, L_J2, L_AREA_X, L_AREA_Y, L_AREA_Z, L_LIN_C, L_LAW, L_ROTOR_K,
 L_ROTOR_B, L_ROTOR_C, L_WIND_X, L_WIND_Y, L_WIND_Z, L_KDX, L_KDY, L_KDZ, L_FX, L_FY, L_FZ, L_MX, L_MY, L_MZ,
 L_OFFSET, L_CW, L_DX, L_DY, L_DZ, L_MOVING, L_NTX, L_NTY, L_NTZ, L_BAD, L_ROTORS) = range(71)
#: Rows per rotor in the lane buffer.
L_PER_ROTOR = 9
#: Largest half-angle x^2 the series covers (:func:`~aerial_sim.physics.rotation.half_angle_series`).
SERIES_X2 = SERIES_HALF_ANGLE * SERIES_HALF_ANGLE


@njit(cache=True, error_model="numpy")
def advance_free_lanes(indices, steps, type_of, type_const, type_rotor_const, type_diagonal, steps_left, state,
                       const, rotor_const, commands, filtered, rotor_count, wind, gravity_poly, dt, band, stop_up):
    """:func:`advance_free` of ``steps`` steps for every vehicle in ``indices``, :data:`LANES` vehicles at a
    time: the block's state is copied into rows of a lane buffer and each step is one loop over the lanes
    with no branch and no call, which the compiler turns into SIMD instructions (AVX2/AVX-512: 4 or 8
    vehicles per instruction). Same operations in the same order as :func:`advance_free` (IEEE add,
    multiply, divide and square root give the same bits in a vector lane), so the results are equal to
    the last bit (test). A vehicle whose inertia is not diagonal, whose step leaves its air-density band
    or whose rotation needs libm (a body rate over 125 rad/s at 1000 Hz) is left as it was and stepped by
    :func:`advance_free` afterwards; its return value (vehicles stopped at a band) is returned. The constants
    come from ``type_const[type_of[i]]`` and ``type_rotor_const[type_of[i]]`` (the distinct rows of ``const``
    and ``rotor_const``; ``BatchedBodies.type_of``), which stay in cache; ``type_diagonal[t]``: kind ``t``'s
    inertia is diagonal (:func:`is_diagonal`)."""
    count = indices.shape[0]
    rotors_max = 0
    for n in range(count):
        rotors_max = max(rotors_max, rotor_count[indices[n]])
    buf = np.zeros((L_ROTORS + L_PER_ROTOR * rotors_max) * LANES)
    lane_of = np.empty(LANES, dtype=np.int64)
    scalar = np.empty(count, dtype=np.int64)
    scalars = 0
    half_dt = 0.5 * dt
    half_dt2 = 0.5 * dt * dt
    g0, g1, g2 = gravity_poly[0], gravity_poly[1], gravity_poly[2]
    held = -1  # the kind whose constants fill every lane of the buffer, or -1
    n = 0
    while n < count:
        lanes = 0
        rotors = 0
        while n < count and lanes < LANES:
            i = indices[n]
            n += 1
            if steps_left[i] != steps or not type_diagonal[type_of[i]]:
                scalar[scalars] = i
                scalars += 1
                continue
            lane_of[lanes] = i
            rotors = max(rotors, rotor_count[i])
            lanes += 1
        if lanes == 0:
            continue
        for lane in range(lanes, LANES):  # spare lanes repeat the last vehicle (never stored)
            lane_of[lane] = lane_of[lanes - 1]
        kind = type_of[lane_of[0]]
        for lane in range(1, LANES):
            if type_of[lane_of[lane]] != kind:
                kind = -1
        _gather_lanes(buf, lane_of, rotors, state, type_of, type_const, type_rotor_const, commands, filtered,
                      rotor_count, wind, kind < 0 or kind != held)
        held = kind
        for _ in range(steps):
            _rotor_lanes(buf, rotors)
            _step_lanes(buf, dt, half_dt, half_dt2, g0, g1, g2, band)
        for lane in range(lanes):
            if buf[L_BAD * LANES + lane] != 0.0:
                scalar[scalars] = lane_of[lane]
                scalars += 1
                lane_of[lane] = -1
        _scatter_lanes(buf, lane_of, lanes, state, filtered, rotor_count, steps_left)
    if scalars == 0:
        return 0
    return advance_free(scalar[:scalars], steps_left, state, const, rotor_const, commands, filtered, rotor_count,
                        wind, gravity_poly, dt, band, stop_up)


@njit(cache=True, error_model="numpy", inline="always")
def _gather_lanes(buf, lane_of, rotors, state, type_of, const, rotor_const, commands, filtered, rotor_count, wind,
                  constants):
    """The lane buffer of :func:`advance_free_lanes` from the rows ``lane_of``, vehicle by vehicle (constants:
    row ``type_of[i]`` of ``const`` and ``rotor_const``; not written again when ``constants`` is False: the
    buffer holds them for every lane, all of one kind, from the block before)."""
    for lane in range(LANES):
        i = lane_of[lane]
        t = type_of[i]
        for k in range(L_G):
            buf[k * LANES + lane] = state[i, k]
        buf[L_G * LANES + lane] = state[i, GRAVITY]
        buf[L_RHO * LANES + lane] = state[i, DENSITY]
        buf[L_ANCHOR * LANES + lane] = state[i, ANCHOR_UP]
        buf[L_ANCHOR_RHO * LANES + lane] = state[i, ANCHOR_DENSITY]
        buf[L_SLOPE * LANES + lane] = state[i, DENSITY_SLOPE]
        for k in range(6):
            buf[(L_EFX + k) * LANES + lane] = state[i, EXT_FORCE + k]
        for k in range(3):
            buf[(L_WIND_X + k) * LANES + lane] = wind[i, k]
        buf[L_BAD * LANES + lane] = 0.0
        if constants:
            buf[L_INV_MASS * LANES + lane] = const[t, INV_MASS]
            for k in range(3):
                buf[(L_I0 + k) * LANES + lane] = const[t, INERTIA + 4 * k]
                buf[(L_J0 + k) * LANES + lane] = const[t, INV_INERTIA + 4 * k]
                buf[(L_AREA_X + k) * LANES + lane] = const[t, AREAS + k]
                buf[(L_ROTOR_K + k) * LANES + lane] = const[t, ROTOR_DRAG + k]
                buf[(L_KDX + k) * LANES + lane] = const[t, ANG_DRAG + k]
            buf[L_LIN_C * LANES + lane] = const[t, LIN_DRAG]
            buf[L_LAW * LANES + lane] = const[t, DRAG_LAW]
        own = rotor_count[i]
        for k in range(rotors):  # a vehicle with fewer rotors: zero inputs and wrenches add nothing
            row = (L_ROTORS + L_PER_ROTOR * k) * LANES + lane
            if k < own:
                buf[row] = filtered[i, k]
                buf[row + LANES] = commands[i, k]
                if constants:
                    for c in range(7):
                        buf[row + (2 + c) * LANES] = rotor_const[t, k, c]
            else:
                for c in range(L_PER_ROTOR):
                    buf[row + c * LANES] = 0.0


@njit(cache=True, error_model="numpy", inline="always")
def _scatter_lanes(buf, lane_of, lanes, state, filtered, rotor_count, steps_left):
    """The stepped state of lanes ``0 .. lanes - 1`` back to their rows (those with ``lane_of`` >= 0)."""
    for lane in range(lanes):
        i = lane_of[lane]
        if i < 0:
            continue
        for k in range(L_TX + 3):
            state[i, k] = buf[k * LANES + lane]
        for k in range(3):
            state[i, RA + k] = buf[(L_AX + k) * LANES + lane]
            state[i, RB + k] = buf[(L_BX + k) * LANES + lane]
        state[i, GRAVITY] = buf[L_G * LANES + lane]
        state[i, DENSITY] = buf[L_RHO * LANES + lane]
        for k in range(rotor_count[i]):
            filtered[i, k] = buf[(L_ROTORS + L_PER_ROTOR * k) * LANES + lane]
        steps_left[i] = 0


@njit(cache=True, error_model="numpy", inline="always")
def _rotor_lanes(buf, rotors):
    """The rotors of :func:`advance_free` for every lane: motor lag, then the wrench sums per unit density.

    For 4 or 6 rotors (the quads and hexas of ``config/vehicles``) one loop over the lanes with the rotors unrolled and the sums in registers
    (:func:`_rotor_sums`: the lanes go into SIMD instructions); else rotor by rotor with the sums in the
    buffer. The same additions in the same order either way.
    """
    if rotors == 4:
        _rotor_sums(buf, 4)
    elif rotors == 6:
        _rotor_sums(buf, 6)
    else:
        for lane in range(LANES):
            for row in range(L_FX, L_MZ + 1):
                buf[row * LANES + lane] = 0.0
        for k in range(rotors):
            row = (L_ROTORS + L_PER_ROTOR * k) * LANES
            for lane in range(LANES):
                u = buf[row + lane]
                u += buf[row + 2 * LANES + lane] * (buf[row + LANES + lane] - u)
                buf[row + lane] = u
                for c in range(6):
                    buf[(L_FX + c) * LANES + lane] += u * buf[row + (3 + c) * LANES + lane]


@njit(cache=True, error_model="numpy", inline="always")
def _rotor_sums(buf, rotors):
    """:func:`_rotor_lanes` for a ``rotors`` known when compiled (inlined with a constant: the loop over the
    rotors unrolls and the one over the lanes vectorises; with the count in a variable it did not, and the
    rotors took 40 % of the step)."""
    for lane in range(LANES):
        fx = fy = fz = mx = my = mz = 0.0
        for k in range(rotors):
            row = (L_ROTORS + L_PER_ROTOR * k) * LANES + lane
            u = buf[row]
            u += buf[row + 2 * LANES] * (buf[row + LANES] - u)
            buf[row] = u
            fx += u * buf[row + 3 * LANES]
            fy += u * buf[row + 4 * LANES]
            fz += u * buf[row + 5 * LANES]
            mx += u * buf[row + 6 * LANES]
            my += u * buf[row + 7 * LANES]
            mz += u * buf[row + 8 * LANES]
        buf[L_FX * LANES + lane] = fx
        buf[L_FY * LANES + lane] = fy
        buf[L_FZ * LANES + lane] = fz
        buf[L_MX * LANES + lane] = mx
        buf[L_MY * LANES + lane] = my
        buf[L_MZ * LANES + lane] = mz


@njit(cache=True, error_model="numpy", inline="always")
def _step_lanes(buf, dt, half_dt, half_dt2, g0, g1, g2, band):
    """One step of :func:`advance_free` for every lane, its branches as selects (a lane that would take
    the scalar step's other way is flagged in ``L_BAD``).

    Four loops over the lanes, one per part of the step (position and the rotation's half-angle terms;
    the quaternion update; forces and the linear Verlet step; the rotational Verlet step), with the values
    one part hands the next in rows of the buffer: each loop's chain of dependent operations is then short
    enough for the processor to run several lanes' chains at once (one loop for the whole step was bound by
    the latency of its chain).
    """
    for lane in range(LANES):  # 1. position; 2. orientation: the half-angle terms
        pz = buf[L_PZ * LANES + lane]
        vx, vy, vz = buf[L_VX * LANES + lane], buf[L_VY * LANES + lane], buf[L_VZ * LANES + lane]
        wx, wy, wz = buf[L_WX * LANES + lane], buf[L_WY * LANES + lane], buf[L_WZ * LANES + lane]
        ax, ay, az = buf[L_AX * LANES + lane], buf[L_AY * LANES + lane], buf[L_AZ * LANES + lane]
        bx, by, bz = buf[L_BX * LANES + lane], buf[L_BY * LANES + lane], buf[L_BZ * LANES + lane]
        nz = pz + (vz * dt + az * half_dt2)
        offset = nz - buf[L_ANCHOR * LANES + lane]
        inside = -band < offset
        inside = inside & (offset < band)
        buf[L_PX * LANES + lane] += vx * dt + ax * half_dt2
        buf[L_PY * LANES + lane] += vy * dt + ay * half_dt2
        buf[L_PZ * LANES + lane] = nz
        buf[L_OFFSET * LANES + lane] = offset
        hx = wx + bx * half_dt
        hy = wy + by * half_dt
        hz = wz + bz * half_dt
        rate_squared = hx * hx + hy * hy + hz * hz
        moving = rate_squared > 1e-24
        x2 = rate_squared * (0.25 * dt * dt)
        series = x2 <= SERIES_X2
        cs, sn = half_angle_polynomial(x2, dt)
        sx = hx * sn
        sy = hy * sn
        sz = hz * sn
        buf[L_CW * LANES + lane] = cs
        buf[L_DX * LANES + lane] = sx
        buf[L_DY * LANES + lane] = sy
        buf[L_DZ * LANES + lane] = sz
        buf[L_MOVING * LANES + lane] = 1.0 if moving else 0.0
        buf[L_BAD * LANES + lane] += 0.0 if inside & series else 1.0  # (not series: moving)
    for lane in range(LANES):  # 2. orientation: q <- q * q_dt, renormalised
        qw, qx = buf[L_QW * LANES + lane], buf[L_QX * LANES + lane]
        qy, qz = buf[L_QY * LANES + lane], buf[L_QZ * LANES + lane]
        cs, sx = buf[L_CW * LANES + lane], buf[L_DX * LANES + lane]
        sy, sz = buf[L_DY * LANES + lane], buf[L_DZ * LANES + lane]
        moving = buf[L_MOVING * LANES + lane] != 0.0
        nw = qw * cs - qx * sx - qy * sy - qz * sz
        nx = qw * sx + qx * cs + qy * sz - qz * sy
        ny = qw * sy - qx * sz + qy * cs + qz * sx
        nq = qw * sz + qx * sy - qy * sx + qz * cs
        inv = 1.0 / math.sqrt(nw * nw + nx * nx + ny * ny + nq * nq)
        buf[L_QW * LANES + lane] = nw * inv if moving else qw
        buf[L_QX * LANES + lane] = nx * inv if moving else qx
        buf[L_QY * LANES + lane] = ny * inv if moving else qy
        buf[L_QZ * LANES + lane] = nq * inv if moving else qz
        buf[L_CW * LANES + lane] = cs if moving else 1.0
        buf[L_DX * LANES + lane] = sx if moving else 0.0
        buf[L_DY * LANES + lane] = sy if moving else 0.0
        buf[L_DZ * LANES + lane] = sz if moving else 0.0
    for lane in range(LANES):  # 3. environment, rotors, drag; 4. Newton plus gravity; 5. linear Verlet
        pz = buf[L_PZ * LANES + lane]
        qw, qx = buf[L_QW * LANES + lane], buf[L_QX * LANES + lane]
        qy, qz = buf[L_QY * LANES + lane], buf[L_QZ * LANES + lane]
        vx, vy, vz = buf[L_VX * LANES + lane], buf[L_VY * LANES + lane], buf[L_VZ * LANES + lane]
        wx, wy, wz = buf[L_WX * LANES + lane], buf[L_WY * LANES + lane], buf[L_WZ * LANES + lane]
        ax, ay, az = buf[L_AX * LANES + lane], buf[L_AY * LANES + lane], buf[L_AZ * LANES + lane]
        bx, by, bz = buf[L_BX * LANES + lane], buf[L_BY * LANES + lane], buf[L_BZ * LANES + lane]
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
        rho = buf[L_ANCHOR_RHO * LANES + lane] + buf[L_SLOPE * LANES + lane] * buf[L_OFFSET * LANES + lane]
        g = g0 + pz * (g1 + pz * g2)
        fx, fy, fz = buf[L_FX * LANES + lane], buf[L_FY * LANES + lane], buf[L_FZ * LANES + lane]
        tx, ty, tz = buf[L_MX * LANES + lane], buf[L_MY * LANES + lane], buf[L_MZ * LANES + lane]
        thrust = fz * rho
        fx = fx * rho + buf[L_EFX * LANES + lane]
        fy = fy * rho + buf[L_EFY * LANES + lane]
        fz = fz * rho + buf[L_EFZ * LANES + lane]
        tx = tx * rho + buf[L_ETX * LANES + lane]
        ty = ty * rho + buf[L_ETY * LANES + lane]
        tz = tz * rho + buf[L_ETZ * LANES + lane]
        ux = vx + ax * dt - buf[L_WIND_X * LANES + lane]
        uy = vy + ay * dt - buf[L_WIND_Y * LANES + lane]
        uz = vz + az * dt - buf[L_WIND_Z * LANES + lane]
        ox = wx + bx * dt
        oy = wy + by * dt
        oz = wz + bz * dt
        law = buf[L_LAW * LANES + lane]
        lin_c = buf[L_LIN_C * LANES + lane]
        area_x, area_y = buf[L_AREA_X * LANES + lane], buf[L_AREA_Y * LANES + lane]
        area_z = buf[L_AREA_Z * LANES + lane]
        lx = r00 * ux + r10 * uy + r20 * uz
        ly = r01 * ux + r11 * uy + r21 * uz
        lz = r02 * ux + r12 * uy + r22 * uz
        drag = lin_c * rho * (area_x * abs(lx) + area_y * abs(ly) + area_z * abs(lz))
        rotor_drag = -(buf[L_ROTOR_K * LANES + lane] * thrust + buf[L_ROTOR_B * LANES + lane]) * buf[
            L_ROTOR_C * LANES + lane]
        fx0, fy0, fz0 = fx + drag * lx, fy + drag * ly, fz + drag * lz
        fx1 = fx + lin_c * rho * area_x * lx * abs(lx)
        fy1 = fy + lin_c * rho * area_y * ly * abs(ly)
        fz1 = fz + lin_c * rho * area_z * lz * abs(lz)
        fx2, fy2 = fx + rotor_drag * lx, fy + rotor_drag * ly
        fx = fx0 if law == 0.0 else (fx1 if law == 1.0 else (fx2 if law >= 2.0 else fx))
        fy = fy0 if law == 0.0 else (fy1 if law == 1.0 else (fy2 if law >= 2.0 else fy))
        fz = fz0 if law == 0.0 else (fz1 if law == 1.0 else fz)
        buf[L_NTX * LANES + lane] = tx - rho * buf[L_KDX * LANES + lane] * ox * abs(ox)
        buf[L_NTY * LANES + lane] = ty - rho * buf[L_KDY * LANES + lane] * oy * abs(oy)
        buf[L_NTZ * LANES + lane] = tz - rho * buf[L_KDZ * LANES + lane] * oz * abs(oz)
        inv_mass = buf[L_INV_MASS * LANES + lane]
        nax = (r00 * fx + r01 * fy + r02 * fz) * inv_mass
        nay = (r10 * fx + r11 * fy + r12 * fz) * inv_mass
        naz = (r20 * fx + r21 * fy + r22 * fz) * inv_mass - g
        buf[L_VX * LANES + lane] = vx + (ax + nax) * half_dt
        buf[L_VY * LANES + lane] = vy + (ay + nay) * half_dt
        buf[L_VZ * LANES + lane] = vz + (az + naz) * half_dt
        buf[L_AX * LANES + lane], buf[L_AY * LANES + lane], buf[L_AZ * LANES + lane] = nax, nay, naz
        buf[L_G * LANES + lane] = g
        buf[L_RHO * LANES + lane] = rho
    for lane in range(LANES):  # 5. the rotational Verlet step on L = I omega (diagonal inertia)
        wx, wy, wz = buf[L_WX * LANES + lane], buf[L_WY * LANES + lane], buf[L_WZ * LANES + lane]
        ptx, pty, ptz = buf[L_TX * LANES + lane], buf[L_TY * LANES + lane], buf[L_TZ * LANES + lane]
        tx, ty, tz = buf[L_NTX * LANES + lane], buf[L_NTY * LANES + lane], buf[L_NTZ * LANES + lane]
        cw, dx = buf[L_CW * LANES + lane], buf[L_DX * LANES + lane]
        dy, dz = buf[L_DY * LANES + lane], buf[L_DZ * LANES + lane]
        i0, i1, i2 = buf[L_I0 * LANES + lane], buf[L_I1 * LANES + lane], buf[L_I2 * LANES + lane]
        j0, j1, j2 = buf[L_J0 * LANES + lane], buf[L_J1 * LANES + lane], buf[L_J2 * LANES + lane]
        lx, ly, lz = i0 * wx, i1 * wy, i2 * wz
        lx += ptx * half_dt
        ly += pty * half_dt
        lz += ptz * half_dt
        cx = dy * lz - dz * ly
        cy = dz * lx - dx * lz
        cz = dx * ly - dy * lx
        lx += 2.0 * (dy * cz - dz * cy - cw * cx) + tx * half_dt
        ly += 2.0 * (dz * cx - dx * cz - cw * cy) + ty * half_dt
        lz += 2.0 * (dx * cy - dy * cx - cw * cz) + tz * half_dt
        wx, wy, wz = j0 * lx, j1 * ly, j2 * lz
        lx, ly, lz = i0 * wx, i1 * wy, i2 * wz
        mx = tx - (wy * lz - wz * ly)
        my = ty - (wz * lx - wx * lz)
        mz = tz - (wx * ly - wy * lx)
        buf[L_WX * LANES + lane], buf[L_WY * LANES + lane], buf[L_WZ * LANES + lane] = wx, wy, wz
        buf[L_BX * LANES + lane], buf[L_BY * LANES + lane], buf[L_BZ * LANES + lane] = j0 * mx, j1 * my, j2 * mz
        buf[L_TX * LANES + lane], buf[L_TY * LANES + lane], buf[L_TZ * LANES + lane] = tx, ty, tz


@njit(cache=True)
def specific_forces(state):
    """What a perfect accelerometer at each body origin reads, body frame: ``R(q)^T (a + g e_z)``,
    the expression of ``RigidBody.ground_truth`` (q normalised first, as ``rotation_matrix`` does)."""
    count = state.shape[0]
    out = np.empty((count, 3))
    for i in range(count):
        w, x, y, z = state[i, Q], state[i, Q + 1], state[i, Q + 2], state[i, Q + 3]
        length = math.sqrt(w * w + x * x + y * y + z * z)
        w, x, y, z = w / length, x / length, y / length, z / length
        r00, r01, r02 = 1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)
        r10, r11, r12 = 2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)
        r20, r21, r22 = 2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)
        vx, vy, vz = state[i, RA], state[i, RA + 1], state[i, RA + 2] + state[i, GRAVITY]
        out[i, 0] = r00 * vx + r10 * vy + r20 * vz
        out[i, 1] = r01 * vx + r11 * vy + r21 * vz
        out[i, 2] = r02 * vx + r12 * vy + r22 * vz
    return out


@njit(cache=True)
def take_commands(controls, commands, asleep, newer):
    """``commands[:] = controls`` when every value is in [0, 1] (else nothing changes, returns False);
    a vehicle whose row changed wakes and is marked ``newer`` (its RigidBody's copy is out of date)."""
    count, rotors = controls.shape
    for i in range(count):
        for k in range(rotors):
            u = controls[i, k]
            if not (0.0 <= u <= 1.0):
                return False
    for i in range(count):
        changed = False
        for k in range(rotors):
            if controls[i, k] != commands[i, k]:
                changed = True
                commands[i, k] = controls[i, k]
        if changed:
            asleep[i] = False
            newer[i] = True
    return True
