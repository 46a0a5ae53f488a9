"""Air drag on the body (AirSim paper, Shah et al. 2017, sec. 3.3.1) and the drag laws the engine offers.

Drag laws (``PhysicsParams.drag_law``), each on the velocity relative to the air
the vehicle is in (its own wind, :mod:`aerial_sim.environment.wind`):

- ``projected``: the paper's statement, below: one drag equation along ``v`` with
  the area seen along ``v``;
- ``faces``: AirSim's code (``FastPhysicsEngine::getDragWrench``): each box face
  moving into the air, ``-1/2 rho C A_k v_k |v_k|`` along body axis k (AirSim also
  skips faces slower than 0.1 m/s; here they keep their tiny force);
- ``rotor``: seed 004's rotor drag, eq. (13), ``-(k T + b) c_d1 (I - e3 e3^T) v``
  in the body frame (T the rotors' total thrust), in place of the body drag. Seed 004
  fitted it below 4 m/s of wind; here it is applied to the air-relative velocity
  at any wind speed, an extension the paper names as future work.

Linear drag (the drag equation): ``|F_d| = 1/2 rho |v|^2 C_lin A`` opposite to
the air-relative velocity ``v = v_body - wind``. The cross-section ``A`` is the
area the body presents along ``v``: with the cross-section areas ``[Ax, Ay, Az]``
of MSR-TR-2017-9 (sec. 3.1), the projected area of a box-like body along unit
direction ``v_hat`` is ``Ax |v_hat_x| + Ay |v_hat_y| + Az |v_hat_z|``. The areas
are AirSim's (:attr:`aerial_sim.vehicles.multirotor.MultirotorParams.cross_section`:
body box plus propellers). AirSim's code (AirLib ``FastPhysicsEngine::getDragWrench``)
applies the drag equation face by face instead: each box face moving into the air
gets ``1/2 rho C A_k v_k^2`` along its normal, and none below 0.1 m/s. Along a body
axis both give the same force; for an oblique velocity this module keeps the
paper's statement (opposite to ``v``, with the area seen along ``v``).

Angular drag: a surface element ``ds`` at ``r`` moving at ``omega x r`` feels
``|dF| = 1/2 rho |r x omega|^2 C ds`` against its motion, and the torque is
``tau_d = int_S r x dF``. The paper evaluates the integral over the body box.
Here it is evaluated once per vehicle, per body axis: for a rotation about
axis k, ``tau_k = -rho K_k omega_k |omega_k|`` with ``K_k = 1/2 C int_S d_k^3 ds``
(``d_k`` = distance of ``ds`` from axis k). A rotation about several axes is
treated as the sum of its per-axis parts, which is exact for single-axis
rotation and keeps the per-step cost at a few multiplications.

The per-step evaluation of both terms is inlined in
:meth:`aerial_sim.physics.rigid_body.RigidBody.advance`; this module derives the
constants once per vehicle.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from aerial_sim.physics.rotor_drag import linearize_sqrt_thrust, ram_drag_bound

#: The engine's drag laws, in the order the compiled step numbers them (module docstring).
DRAG_LAWS = ("projected", "faces", "rotor")


def rotor_drag_coefficients(vehicle) -> tuple[float, float, float]:
    """(k, b, c_d1) of seed 004 eq. (13) for ``vehicle``: its ``rotor_drag`` if given, else derived as
    :mod:`aerial_sim.physics.rotor_drag` derives quad_x's (sqrt(T) line over 20-100 % of the rotor's
    maximum thrust; 40 % of the momentum-theory ram-drag bound of its disc)."""
    given = getattr(vehicle, "rotor_drag", None)
    if given is not None:
        return tuple(float(v) for v in given)
    rotor = vehicle.rotors[0]
    k, b = linearize_sqrt_thrust(len(vehicle.rotors), rotor.max_thrust_n())
    return (k, b, 0.4 * ram_drag_bound(rotor.diameter_m))

Vector3 = tuple[float, float, float]


def angular_drag_constants(body_box_m: Vector3, coefficient: float, samples: int = 200) -> Vector3:
    """``K_k = 1/2 C int_S d_k^3 ds`` over the surface of the box (m^5), for k = x, y, z.

    Midpoint quadrature on each of the six faces (relative error < 1e-4 at 200 samples). The
    quadrature costs about 40 ms, so results are kept per (box, coefficient, samples): a fleet
    of one vehicle type pays it once, not once per vehicle (10,000 quads: 400 s of start-up).
    """
    return _angular_drag_constants(tuple(float(s) for s in body_box_m), float(coefficient), int(samples))


@functools.lru_cache(maxsize=64)
def _angular_drag_constants(body_box_m: Vector3, coefficient: float, samples: int) -> Vector3:
    half = [0.5 * s for s in body_box_m]
    constants = []
    for axis in range(3):
        total = 0.0
        for normal_axis in range(3):
            u_axis, v_axis = [a for a in range(3) if a != normal_axis]
            # Midpoints of a samples x samples grid on the face.
            u = (np.arange(samples) + 0.5) / samples * 2 * half[u_axis] - half[u_axis]
            v = (np.arange(samples) + 0.5) / samples * 2 * half[v_axis] - half[v_axis]
            uu, vv = np.meshgrid(u, v, indexing="ij")
            cell = (2 * half[u_axis] / samples) * (2 * half[v_axis] / samples)
            for sign in (-1.0, 1.0):
                coords = {u_axis: uu, v_axis: vv, normal_axis: np.full_like(uu, sign * half[normal_axis])}
                others = [a for a in range(3) if a != axis]
                distance = np.sqrt(coords[others[0]] ** 2 + coords[others[1]] ** 2)
                total += float(np.sum(distance**3) * cell)
        constants.append(0.5 * coefficient * total)
    return tuple(constants)



def body_drag_force(law: str, vehicle, velocity_air_body, thrust_n: float, air_density: float) -> tuple:
    """Body-frame drag force (N) of ``law`` at the body-frame air-relative velocity, as the engine's step
    applies it (rigid_body.py, batch_kernels.py); ``thrust_n`` is the rotors' total, for ``rotor``."""
    lx, ly, lz = velocity_air_body
    c = -0.5 * vehicle.linear_drag_coefficient * air_density
    ax, ay, az = vehicle.cross_section
    if law == "projected":
        scale = c * (ax * abs(lx) + ay * abs(ly) + az * abs(lz))
        return (scale * lx, scale * ly, scale * lz)
    if law == "faces":
        return (c * ax * lx * abs(lx), c * ay * ly * abs(ly), c * az * lz * abs(lz))
    if law == "rotor":
        k, b, c_d1 = rotor_drag_coefficients(vehicle)
        scale = -(k * thrust_n + b) * c_d1
        return (scale * lx, scale * ly, 0.0)
    raise ValueError(f"drag law must be one of {', '.join(DRAG_LAWS)}, got {law!r}")


def level_flight_pitch(law: str, vehicle, airspeed_m_s: float, air_density: float = 1.225,
                       gravity: float = 9.80665) -> tuple[float, float]:
    """(pitch rad, thrust N) that hold ``vehicle`` in steady level flight nose first (along body x) at
    ``airspeed_m_s`` under ``law`` (or hovering, nose into a wind of that speed): thrust along body z, tilted by
    the pitch into the air stream,
    balances weight and drag, ``T z_b + R F_drag(R^T v) - m g e_z = 0``.

    With the nose down by theta the body sees the air at (V cos theta, 0, V sin theta); the drag
    (:func:`body_drag_force`) turned into the world has a horizontal part D_x and a vertical part D_z,
    and theta solves ``T sin theta + D_x = 0`` with ``T cos theta = m g - D_z`` (for ``rotor`` the
    drag grows with T: both solved together). None when no tilt below 89 deg holds the speed.
    """
    mass_g = vehicle.mass_kg * gravity

    def balance(theta: float) -> tuple[float, float]:
        cos_t, sin_t = math.cos(theta), math.sin(theta)
        body_velocity = (airspeed_m_s * cos_t, 0.0, airspeed_m_s * sin_t)
        thrust = mass_g / cos_t
        for _ in range(50):  # only rotor drag depends on the thrust; a contraction for any sane k c_d1 V
            fx, _, fz = body_drag_force(law, vehicle, body_velocity, thrust, air_density)
            drag_x, drag_z = fx * cos_t + fz * sin_t, -fx * sin_t + fz * cos_t
            new_thrust = (mass_g - drag_z) / cos_t
            if abs(new_thrust - thrust) < 1e-12 * mass_g:
                break
            thrust = new_thrust
        return thrust * sin_t + drag_x, thrust

    high = math.radians(89.0)
    if airspeed_m_s == 0:
        return 0.0, mass_g
    if balance(high)[0] < 0:
        return None
    from scipy.optimize import brentq  # noqa: PLC0415 - scipy.optimize costs a node 0.5 CPU s at start; only trim needs it

    theta = brentq(lambda t: balance(t)[0], 0.0, high, xtol=1e-12)
    return theta, balance(theta)[1]
