"""Small scalar 3-vector and quaternion helpers (plain floats and tuples, no NumPy).

Quaternions are ``(w, x, y, z)`` tuples rotating body vectors into the world
frame (body->world), Hamilton convention. NumPy costs 10-15 times more than
scalar arithmetic on 3- and 4-element vectors, so the physics core uses these.
"""

from __future__ import annotations

import math

Vector3 = tuple[float, float, float]
Quaternion = tuple[float, float, float, float]

IDENTITY: Quaternion = (1.0, 0.0, 0.0, 0.0)


def cross(a: Vector3, b: Vector3) -> Vector3:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def dot(a: Vector3, b: Vector3) -> float:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def norm(a: Vector3) -> float:
    return math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])


def add(a: Vector3, b: Vector3) -> Vector3:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def sub(a: Vector3, b: Vector3) -> Vector3:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def scale(s: float, a: Vector3) -> Vector3:
    return (s * a[0], s * a[1], s * a[2])


def add_scaled(a: Vector3, s: float, b: Vector3) -> Vector3:
    """``a + s b``."""
    return (a[0] + s * b[0], a[1] + s * b[1], a[2] + s * b[2])


def sub_scaled(a: Vector3, s: float, b: Vector3) -> Vector3:
    """``a - s b``."""
    return (a[0] - s * b[0], a[1] - s * b[1], a[2] - s * b[2])


def quat_multiply(p: Quaternion, q: Quaternion) -> Quaternion:
    """Hamilton product ``p * q``."""
    pw, px, py, pz = p
    qw, qx, qy, qz = q
    return (
        pw * qw - px * qx - py * qy - pz * qz,
        pw * qx + px * qw + py * qz - pz * qy,
        pw * qy - px * qz + py * qw + pz * qx,
        pw * qz + px * qy - py * qx + pz * qw,
    )


def quat_conjugate(q: Quaternion) -> Quaternion:
    """``q*``: the inverse rotation of a unit quaternion ``q``."""
    w, x, y, z = q
    return (w, -x, -y, -z)


def quat_normalize(q: Quaternion) -> Quaternion:
    """``q / |q|``; ``ValueError`` for a zero or non-finite ``q``. Components so large (or small) that
    their squares overflow (underflow) are scaled by the largest first, instead of dividing by an
    infinite length into a zero quaternion."""
    w, x, y, z = q
    length = math.sqrt(w * w + x * x + y * y + z * z)
    if not 0.0 < length < math.inf:
        scale = max(abs(w), abs(x), abs(y), abs(z))
        if not (0.0 < scale < math.inf and all(map(math.isfinite, q))):
            raise ValueError(f"cannot normalise quaternion {q!r}")
        w, x, y, z = w / scale, x / scale, y / scale, z / scale
        length = math.sqrt(w * w + x * x + y * y + z * z)
    return (w / length, x / length, y / length, z / length)


def quat_from_yaw(yaw_rad: float) -> Quaternion:
    """Rotation by ``yaw_rad`` about the world z (up) axis."""
    return (math.cos(0.5 * yaw_rad), 0.0, 0.0, math.sin(0.5 * yaw_rad))


def quat_from_axis_angle(axis: Vector3, angle_rad: float) -> Quaternion:
    length = norm(axis)
    s = math.sin(0.5 * angle_rad) / length
    return (math.cos(0.5 * angle_rad), axis[0] * s, axis[1] * s, axis[2] * s)


def rotation_matrix(q: Quaternion) -> tuple[Vector3, Vector3, Vector3]:
    """Rows of the body->world rotation matrix R(q) (q need not be unit: it is normalised)."""
    w, x, y, z = quat_normalize(q)
    return (
        (1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)),
        (2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)),
        (2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)),
    )


def rotate(q: Quaternion, v: Vector3) -> Vector3:
    """Body vector ``v`` -> world frame, by unit quaternion ``q`` (body->world): ``R(q) v``.

    :func:`rotation_matrix` and three :func:`dot` written out in one function (the same operations in the
    same order, so the same bits; ``test_physics_dynamics``): a third of the cost, and it runs for every
    odometry message some nodes read."""
    w, x, y, z = q
    length = math.sqrt(w * w + x * x + y * y + z * z)
    if 0.0 < length < math.inf:
        w, x, y, z = w / length, x / length, y / length, z / length
    else:
        w, x, y, z = quat_normalize(q)  # scaled first, or ValueError
    vx, vy, vz = v
    return ((1 - 2 * (y * y + z * z)) * vx + 2 * (x * y - w * z) * vy + 2 * (x * z + w * y) * vz,
            2 * (x * y + w * z) * vx + (1 - 2 * (x * x + z * z)) * vy + 2 * (y * z - w * x) * vz,
            2 * (x * z - w * y) * vx + 2 * (y * z + w * x) * vy + (1 - 2 * (x * x + y * y)) * vz)


def rotate_inverse(q: Quaternion, v: Vector3) -> Vector3:
    """World vector ``v`` -> body frame, by the inverse of unit quaternion ``q``: ``R(q)^T v``, written out
    as :func:`rotate` is (the same bits as :func:`transpose_vector` of :func:`rotation_matrix`)."""
    w, x, y, z = q
    length = math.sqrt(w * w + x * x + y * y + z * z)
    if 0.0 < length < math.inf:
        w, x, y, z = w / length, x / length, y / length, z / length
    else:
        w, x, y, z = quat_normalize(q)
    vx, vy, vz = v
    return ((1 - 2 * (y * y + z * z)) * vx + 2 * (x * y + w * z) * vy + 2 * (x * z - w * y) * vz,
            2 * (x * y - w * z) * vx + (1 - 2 * (x * x + z * z)) * vy + 2 * (y * z + w * x) * vz,
            2 * (x * z + w * y) * vx + 2 * (y * z - w * x) * vy + (1 - 2 * (x * x + y * y)) * vz)


def matrix_vector(m: tuple[Vector3, Vector3, Vector3], v: Vector3) -> Vector3:
    """``M v`` (M given as rows); with ``M = R(q)``, the same as ``rotate(q, v)``."""
    return (dot(m[0], v), dot(m[1], v), dot(m[2], v))


def transpose_vector(m: tuple[Vector3, Vector3, Vector3], v: Vector3) -> Vector3:
    """``M^T v`` (M given as rows); with ``M = R(q)``, the same as ``rotate_inverse(q, v)``."""
    r0, r1, r2 = m
    return (
        r0[0] * v[0] + r1[0] * v[1] + r2[0] * v[2],
        r0[1] * v[0] + r1[1] * v[1] + r2[1] * v[2],
        r0[2] * v[0] + r1[2] * v[1] + r2[2] * v[2],
    )


def invert3(m: tuple[Vector3, Vector3, Vector3]) -> tuple[Vector3, Vector3, Vector3]:
    """Inverse of a 3x3 matrix given as rows (adjugate over determinant)."""
    (a, b, c), (d, e, f), (g, h, i) = m
    det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)
    if det == 0.0:
        raise ValueError("matrix is singular")
    return (
        ((e * i - f * h) / det, (c * h - b * i) / det, (b * f - c * e) / det),
        ((f * g - d * i) / det, (a * i - c * g) / det, (c * d - a * f) / det),
        ((d * h - e * g) / det, (b * g - a * h) / det, (a * e - b * d) / det),
    )


#: Largest half-angle (rad) of one step's rotation that :func:`half_angle_series` takes from the
#: Taylor series; above it (a body rate over 125 rad/s at 1000 Hz) the terms come from libm.
SERIES_HALF_ANGLE = 0.0625
#: Taylor coefficients of cos x and of sin(x) / x in x^2 (1/(2k)! and 1/(2k+1)!, k = 1..4).
COS_2, COS_4, COS_6, COS_8 = 1.0 / 2.0, 1.0 / 24.0, 1.0 / 720.0, 1.0 / 40320.0
SINC_2, SINC_4, SINC_6, SINC_8 = 1.0 / 6.0, 1.0 / 120.0, 1.0 / 5040.0, 1.0 / 362880.0


def half_angle_polynomial(x2, dt):
    """The series branch of :func:`half_angle_series`: ``cos(x)`` and ``sin(x) / rate`` from
    ``x2 = x^2 = rate^2 dt^2 / 4`` (valid for ``x <= SERIES_HALF_ANGLE``). The batched physics'
    vectorised step calls it for every vehicle and falls back to the scalar step where it does not apply."""
    cw = 1.0 - x2 * (COS_2 - x2 * (COS_4 - x2 * (COS_6 - x2 * COS_8)))
    sinc = 1.0 - x2 * (SINC_2 - x2 * (SINC_4 - x2 * (SINC_6 - x2 * SINC_8)))
    return cw, sinc * (0.5 * dt)


def half_angle_series(rate_squared, dt):
    """``cos(x)`` and ``sin(x) / rate`` for the half-angle ``x = rate dt / 2`` of one step's rotation,
    from the squared body rate.

    Both paths take these terms from here (this plain-Python function in the scalar path,
    :func:`~aerial_sim.physics.batch_kernels.half_angle_terms`, its compiled twin, in the batched kernel), so they stay equal
    to the last bit: a one-ulp difference grows to 5e-8 m in 10 s of tumbling flight.

    For ``x <= SERIES_HALF_ANGLE`` (1/16) from their Taylor series to x^8 in Horner form, in
    ``x^2 = rate^2 dt^2 / 4`` (no square root), and ``sin(x) / rate = (sin(x) / x) dt / 2``.
    The first term left out is at most ``x^10 / 10! = 2.5e-19`` (cos) and ``x^10 / 11! =
    2.3e-20`` (sin(x)/x), both values being near 1: below 1/400 of the spacing of doubles
    there (2.2e-16), so the result is the exact value up to the rounding of the few
    operations, an ulp or two, as from libm. Above it, libm. No call, square root or
    division for the body rates of flight: the compiled step keeps its values in registers.
    """
    x2 = rate_squared * (0.25 * dt * dt)
    if x2 <= SERIES_HALF_ANGLE * SERIES_HALF_ANGLE:
        return half_angle_polynomial(x2, dt)
    rate = math.sqrt(rate_squared)
    x = 0.5 * rate * dt
    return math.cos(x), math.sin(x) / rate
