"""Actuator forces: rotors with a first-order motor lag, and the wrench they put on the body.

AirSim paper (Shah et al. 2017), sec. 3.1 and 3.3.2: each vertex i produces a
thrust ``F_i = C_T rho n_max^2 D^4 u_i`` along its normal ``n_i`` and a reaction
torque ``tau_i = C_pow rho n_max^2 D^5 u_i / (2 pi)`` about ``-d_i n_i``, and the
body feels ``sum_i F_i`` and ``sum_i [tau_i + r_i x F_i]``. The commanded u_i
reaches the rotor through a first-order lag with time constant ``T`` (AirSim's
``RotorActuator`` control-signal filter), discretised exactly for a held input:
``u_f += (u - u_f) (1 - exp(-dt / T))``.

Both terms are linear in ``u_f * rho``, so each rotor is reduced once (and again
whenever its position or normal changes in flight) to a 6-vector "wrench per
unit u and unit density"; a physics step is then six multiply-adds per rotor.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

from aerial_sim.physics.rotation import cross
from aerial_sim.physics.state import RotorState
from aerial_sim.vehicles.multirotor import RotorParams


class ControlsError(ValueError):
    """A control vector has the wrong length or a value outside [0, 1]."""


def unit_wrench(rotor: RotorParams) -> tuple[float, float, float, float, float, float]:
    """Body wrench (Fx, Fy, Fz, Tx, Ty, Tz) of ``rotor`` at u = 1 and air density 1 kg/m^3."""
    thrust = rotor.max_thrust_n(1.0)
    torque = rotor.max_torque_nm(1.0)
    n = rotor.normal
    lever = cross(rotor.position_m, n)
    spin = -rotor.turning_direction * torque
    return (
        thrust * n[0],
        thrust * n[1],
        thrust * n[2],
        thrust * lever[0] + spin * n[0],
        thrust * lever[1] + spin * n[1],
        thrust * lever[2] + spin * n[2],
    )


class RotorArray:
    """The rotors of one vehicle: held commands, lagged controls and per-rotor constants."""

    def __init__(self, rotors: Sequence[RotorParams], dt: float):
        self.rotors = list(rotors)
        self.dt = dt
        self.commands = [0.0] * len(self.rotors)
        self.filtered = [0.0] * len(self.rotors)
        self._rebuild()

    def __len__(self) -> int:
        return len(self.rotors)

    def set_commands(self, controls: Sequence[float], spun_up: bool = False) -> None:
        """Hold ``controls`` (u_i in [0, 1], one per rotor) until replaced.

        ``spun_up`` also puts the motors at that steady state at once (skips the lag),
        e.g. to start a vehicle in steady flight.
        """
        if len(controls) != len(self.rotors):
            raise ControlsError(f"expected {len(self.rotors)} controls, got {len(controls)}")
        values = [float(u) for u in controls]
        for index, u in enumerate(values):
            if not 0.0 <= u <= 1.0:
                raise ControlsError(f"u[{index}] = {u!r} is outside [0, 1]")
        self.commands = values
        if spun_up:
            self.filtered[:] = values

    def set_geometry(self, index: int, position_m=None, normal=None) -> None:
        """Move rotor ``index`` and/or tilt its normal (body frame) during flight (sec. 3.1)."""
        rotor = self.rotors[index]
        self.rotors[index] = replace(
            rotor,
            position_m=tuple(position_m) if position_m is not None else rotor.position_m,
            normal=tuple(normal) if normal is not None else rotor.normal,
        )
        self._rebuild()

    def _rebuild(self) -> None:
        self._state_constants = None  # (air density, per-rotor constants) of states(); rotors changed
        #: Per rotor: top speed (rad/s) and the factors of its thrust at u = 1 (speeds_and_thrusts).
        self._thrust_factors = [(r.max_speed_rad_s, r.thrust_coefficient, r.max_speed_rev_s**2, r.diameter_m**4)
                                for r in self.rotors]
        #: Per rotor: (lag gain, Fx, Fy, Fz, Tx, Ty, Tz) per unit u and unit density.
        self.constants = [
            (1.0 - math.exp(-self.dt / r.time_constant_s) if r.time_constant_s > 0 else 1.0,) + unit_wrench(r)
            for r in self.rotors
        ]

    def states(self, air_density: float) -> tuple[RotorState, ...]:
        """Speed, thrust and torque of each rotor at its current lagged control."""
        return tuple(RotorState(speed * math.sqrt(u), thrust * u, torque * u, u)
                     for (speed, thrust, torque), u in zip(self._at_full_control(air_density), self._clamped()))

    def speeds_and_thrusts(self, air_density: float) -> tuple[list[float], list[float]]:
        """:meth:`states`' speeds (rad/s) and thrusts (N), the same products, without a ``RotorState`` per
        rotor: what the physics node's ``rotors`` message carries every period.

        The density changes with the altitude, so in flight the constants :meth:`states` keeps per density
        were made again nearly every period (two ``RotorParams`` methods a rotor). The thrust at u = 1 is
        :meth:`~aerial_sim.vehicles.multirotor.RotorParams.max_thrust_n`'s product in its order,
        ``C_T * rho * n_max**2 * D**4``, from factors kept per rotor: the same bits."""
        speeds, thrusts = [], []
        for (speed, c_t, n2, d4), u in zip(self._thrust_factors, self.filtered):
            u = min(max(u, 0.0), 1.0)
            speeds.append(speed * math.sqrt(u))
            thrusts.append(c_t * air_density * n2 * d4 * u)
        return speeds, thrusts

    def _clamped(self) -> list[float]:
        return [min(max(u, 0.0), 1.0) for u in self.filtered]

    def _at_full_control(self, air_density: float) -> list[tuple[float, float, float]]:
        cached = self._state_constants
        if cached is None or cached[0] != air_density:
            # Per rotor, at this density: top speed, thrust at u = 1, signed reaction torque at u = 1 (the
            # same products as from the rotor's methods: the physics node reads these every period).
            cached = self._state_constants = (air_density, [
                (r.max_speed_rad_s, r.max_thrust_n(air_density), -r.turning_direction * r.max_torque_nm(air_density))
                for r in self.rotors])
        return cached[1]
