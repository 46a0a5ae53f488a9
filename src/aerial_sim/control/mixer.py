"""Control allocation: collective thrust and body torques -> rotor inputs u_i in [0, 1].

The vehicle is AirSim's collection of K actuated vertices (Shah et al., "AirSim",
FSR 2017, sec. 3.1): vertex i at position r_i with normal n_i produces the force
F_i = T_i u_i n_i and the reaction torque -d_i Q_i u_i n_i, where T_i and Q_i
are the rotor's thrust and torque at full input (F = C_T rho n^2 D^4 u,
tau = C_pow rho n^2 D^5 u / 2 pi) and d_i = +1 for a counter-clockwise rotor
(whose reaction torque on the body is clockwise). The body wrench is linear in
u, so with

    A[:, i] = [ (T_i n_i)_z,  r_i x (T_i n_i) - d_i Q_i n_i ]      (4 x K)

the request w = [thrust along body z, tau_x, tau_y, tau_z] is met by the
minimum-norm solution u = A^+ w (Moore-Penrose pseudo-inverse). Any geometry
(quad, hexa, octo, tilted rotors) flies with no code change.

Saturation: a real vehicle cannot apply every request, so priorities decide
what is kept (the order PX4's multirotor mixer uses, without "air mode"):

1. roll/pitch torque: kept exactly when the spread it needs fits in [0, 1];
   otherwise scaled down, direction kept — the attitude never flips;
2. collective thrust: shifted up or down (along the thrust column of A^+) just
   enough to fit the roll/pitch inputs in [0, 1];
3. yaw torque: gets whatever headroom is left (scaled by s in [0, 1]).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from aerial_sim.config import ParamsError

#: Air density used when none is given (ISA sea level, kg/m^3).
SEA_LEVEL_DENSITY_KG_M3 = 1.225


class MixerOutput(NamedTuple):
    """Rotor inputs and what they achieve (a named tuple: made at every control step)."""

    controls: tuple[float, ...]
    #: [thrust N, tau_x, tau_y, tau_z N m] that ``controls`` really produce.
    achieved: tuple[float, float, float, float]
    #: True when any part of the request had to be reduced or shifted.
    saturated: bool
    #: Fraction of the requested yaw torque that could be applied (1 = all).
    yaw_scale: float


class Mixer:
    """Pseudo-inverse allocation with thrust/attitude-priority desaturation (see module docstring)."""

    def __init__(self, positions_m, normals, turning_directions, max_thrusts_n, max_torques_nm):
        positions = np.asarray(positions_m, dtype=float).reshape(-1, 3)
        normals = np.asarray(normals, dtype=float).reshape(-1, 3)
        directions = np.asarray(turning_directions, dtype=float).reshape(-1)
        thrusts = np.asarray(max_thrusts_n, dtype=float).reshape(-1)
        torques = np.asarray(max_torques_nm, dtype=float).reshape(-1)
        count = len(positions)
        if count == 0 or not all(len(a) == count for a in (normals, directions, thrusts, torques)):
            raise ParamsError("mixer: every rotor needs a position, normal, turning direction, max thrust and max torque")
        if not (np.all(thrusts > 0) and np.all(torques >= 0)):
            raise ParamsError("mixer: max thrust must be > 0 and max torque >= 0 for every rotor")
        normals = normals / np.linalg.norm(normals, axis=1, keepdims=True)
        forces = normals * thrusts[:, None]
        moments = np.cross(positions, forces) - (directions * torques)[:, None] * normals
        self.allocation = np.vstack([forces[:, 2], moments.T])  # 4 x K
        if np.linalg.matrix_rank(self.allocation) < 4:
            raise ParamsError(
                "mixer: the rotor geometry cannot produce independent thrust, roll, pitch and yaw "
                "(allocation matrix rank < 4)"
            )
        self.inverse = np.linalg.pinv(self.allocation)  # K x 4
        thrust_column = self.inverse[:, 0]
        if np.any(thrust_column <= 0):
            raise ParamsError("mixer: some rotor would have to slow down to add thrust; check the rotor normals")
        self.rotor_count = count
        #: Largest collective thrust (N), all rotors at u = 1.
        self.max_thrust_n = float(self.allocation[0].sum())
        # Plain-float copies for mix(): on a handful of rotors NumPy's per-call overhead would dominate.
        # The columns of A^+ (one entry per rotor), and per rotor its column of A: [thrust, tau_x, tau_y, tau_z] at u = 1.
        self._thrust_column, self._roll_column, self._pitch_column, self._yaw_column = map(tuple, self.inverse.T.tolist())
        self._thrust_direction = tuple((thrust_column / thrust_column.max()).tolist())
        self._allocation_columns = tuple(map(tuple, self.allocation.T.tolist()))
        self._roll_pitch = tuple(zip(self._roll_column, self._pitch_column))

    @classmethod
    def from_vehicle(cls, vehicle, air_density_kg_m3: float = SEA_LEVEL_DENSITY_KG_M3) -> "Mixer":
        """Build the mixer from a ``MultirotorParams`` (its ``rotors`` vertex list)."""
        rotors = vehicle.rotors
        return cls(
            [r.position_m for r in rotors],
            [r.normal for r in rotors],
            [r.turning_direction for r in rotors],
            [r.max_thrust_n(air_density_kg_m3) for r in rotors],
            [r.max_torque_nm(air_density_kg_m3) for r in rotors],
        )

    def wrench(self, controls) -> np.ndarray:
        """[thrust, tau_x, tau_y, tau_z] produced by rotor inputs ``controls`` (steady state)."""
        return self.allocation @ np.asarray(controls, dtype=float)

    def mix(self, thrust_n: float, torque_nm) -> MixerOutput:
        """Rotor inputs in [0, 1] for collective thrust ``thrust_n`` and body torque ``torque_nm``.

        Runs at every control step, so in one function: the per-rotor loops are list comprehensions over
        precomputed column pairs, and each later priority is one pass that also finds its limit (the
        comparisons ``max``, ``min`` and a clamp make, in their order: the same bits, NaN included)."""
        thrust_n = float(thrust_n)
        roll, pitch, yaw = map(float, torque_nm)
        u_attitude = [r * roll + p * pitch for r, p in self._roll_pitch]
        saturated = False

        # 1. roll/pitch: the spread between rotors cannot exceed the input range.
        spread = max(u_attitude) - min(u_attitude)
        if spread > 1.0:
            u_attitude = [u / spread for u in u_attitude]
            saturated = True
        base = [t * thrust_n + u for t, u in zip(self._thrust_column, u_attitude)]

        # 2. collective thrust: the smallest shift along the thrust direction that brings every input into
        # [0, 1]: max over the rotors of -b/d, min of (1 - b)/d.
        low = high = None
        for b, d in zip(base, self._thrust_direction):
            below, above = -b / d, (1.0 - b) / d
            if low is None:
                low, high = below, above
            else:
                low = below if below > low else low
                high = above if above < high else high
        if low <= high:
            shift = low if low > 0.0 else 0.0  # min(max(0, low), high)
            shift = high if high < shift else shift
        else:
            shift = 0.5 * (low + high)  # non-uniform thrust direction (unusual geometry): split the violation
        if shift != 0.0:
            base = [b + shift * d for b, d in zip(base, self._thrust_direction)]
            saturated = True

        # 3. yaw: whatever headroom is left, the largest scale s <= 1 keeping every base + s u_yaw in [0, 1].
        u_yaw = [y * yaw for y in self._yaw_column]
        yaw_scale = 1.0
        for b, y in zip(base, u_yaw):
            if y > 1e-12:
                room = (1.0 - b) / y
                yaw_scale = room if room < yaw_scale else yaw_scale
            elif y < -1e-12:
                room = -b / y
                yaw_scale = room if room < yaw_scale else yaw_scale
        yaw_scale = yaw_scale if yaw_scale > 0.0 else 0.0
        if yaw_scale < 1.0:
            saturated = True

        # The inputs, min(max(u, 0), 1), and what they achieve (:meth:`wrench` in plain floats), rotor by rotor.
        controls = []
        thrust = tau_x = tau_y = tau_z = 0.0
        for b, y, (column_thrust, column_x, column_y, column_z) in zip(base, u_yaw, self._allocation_columns):
            u = b + yaw_scale * y
            u = 0.0 if 0.0 > u else u
            u = 1.0 if 1.0 < u else u
            controls.append(u)
            thrust += column_thrust * u
            tau_x += column_x * u
            tau_y += column_y * u
            tau_z += column_z * u
        return MixerOutput(tuple(controls), (thrust, tau_x, tau_y, tau_z), saturated, yaw_scale)
