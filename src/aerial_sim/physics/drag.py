"""Linear and angular air drag on the body (AirSim paper, Shah et al. 2017, sec. 3.3.1).

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

import numpy as np

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

