"""Battery pack: state of charge, terminal voltage sagging under load, and the thrust it still allows (pure).

Equivalent circuit (the usual "Rint" model of a lithium pack, e.g. Plett, *Battery Management
Systems* vol. 1, ch. 2): n cells in series, each an open-circuit voltage OCV(SoC) behind an
internal resistance R. Drawing electrical power P at the terminals:

    V = n OCV(SoC) - I n R,   P = V I   =>   I = (n OCV - sqrt((n OCV)^2 - 4 n R P)) / (2 n R)

and the charge drains as dSoC/dt = -I / C (C = capacity, A s). P above the pack's maximum,
(n OCV)^2 / (4 n R), is cut to it (the voltage then sits at half the open-circuit value).

The electrical power comes from the rotors' shaft power (propeller momentum theory with the
vehicle's own power coefficient, P_shaft = C_P rho n^3 D^5 per rotor, n in rev/s) over the
motors' and ESCs' efficiency, plus a constant avionics load.

A motor's top speed is proportional to its supply voltage (back-EMF constant, omega_max = K_v V) and
thrust to the square of speed (T = C_T rho n^2 D^4), so a sagging pack caps the thrust:
``max_thrust_fraction = (V / V_full)^2`` (0 once the pack is empty: its protection cuts it off). With ``PhysicsParams.battery`` set the physics world applies
that cap to every rotor input (u <= fraction, i.e. speed <= omega_max V / V_full) and drains the pack
by the rotors' power each step (:class:`aerial_sim.physics.world.PhysicsWorld`), so the vehicle feels
a draining pack: less climb and, near empty, no hover. The model has no random part: the same flight
drains the same pack the same way.

OCV(SoC) is a piecewise-linear LiPo curve (per cell: 3.27 V empty, a plateau near 3.7-3.8 V,
4.20 V full), as battery simulators such as PX4's ``BatterySimulator`` and ArduPilot's SITL use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aerial_sim.config import require, require_non_negative, require_positive

#: LiPo open-circuit voltage per cell against state of charge (0..1).
_SOC = (0.0, 0.05, 0.10, 0.20, 0.50, 0.80, 0.95, 1.0)
_OCV = (3.27, 3.50, 3.61, 3.69, 3.80, 3.96, 4.11, 4.20)
AIR_DENSITY = 1.225  # kg/m^3, sea level (the rotors' power coefficients are for this density)


@dataclass(frozen=True)
class BatteryParams:
    """A 3S 5000 mAh LiPo, the size of pack a 1 kg quadrotor carries (defaults here only)."""

    cells: int = 3
    capacity_mah: float = 5000.0
    #: Internal resistance per cell (ohm): a 20C LiPo of this size, about 8 mOhm.
    cell_resistance_ohm: float = 0.008
    #: Motor and ESC efficiency (shaft power / electrical power).
    drive_efficiency: float = 0.75
    #: Flight computer, receiver, sensors (W).
    avionics_power_w: float = 3.0
    #: State of charge at start (0..1).
    initial_charge: float = 1.0

    def __post_init__(self):
        require(isinstance(self.cells, int) and self.cells >= 1, f"cells must be a whole number >= 1, got {self.cells!r}")
        require_positive(self, "capacity_mah", "cell_resistance_ohm")
        require_non_negative(self, "avionics_power_w")
        require(0.0 < self.drive_efficiency <= 1.0, f"drive_efficiency must be in (0, 1], got {self.drive_efficiency}")
        require(0.0 <= self.initial_charge <= 1.0, f"initial_charge must be in [0, 1], got {self.initial_charge}")


@dataclass(frozen=True)
class BatteryState:
    charge: float  # state of charge, 0..1
    voltage_v: float  # terminal voltage under the present load
    current_a: float
    consumed_mah: float
    max_thrust_fraction: float  # of the thrust a full pack allows

    @property
    def remaining_percent(self) -> int:
        return int(round(100.0 * self.charge))


def open_circuit_voltage(charge: float) -> float:
    """OCV of one cell (V) at state of charge ``charge`` (clipped to 0..1)."""
    return float(np.interp(min(max(charge, 0.0), 1.0), _SOC, _OCV))


def rotor_shaft_power(rotors, speeds_rad_s) -> float:
    """Total shaft power (W) of rotors spinning at ``speeds_rad_s``: sum of C_P rho n^3 D^5."""
    total = 0.0
    for rotor, omega in zip(rotors, speeds_rad_s):
        n = abs(float(omega)) / (2.0 * math.pi)
        total += rotor.power_coefficient * AIR_DENSITY * n ** 3 * rotor.diameter_m ** 5
    return total


class Battery:
    """The pack of :class:`BatteryParams`; call :meth:`step` with the shaft power drawn over ``dt``."""

    def __init__(self, params: BatteryParams):
        self.params = params
        self.reset()

    def reset(self) -> None:
        self.charge = self.params.initial_charge
        self.consumed_mah = 0.0
        self.state = self._state(0.0)

    @property
    def full_voltage_v(self) -> float:
        return self.params.cells * _OCV[-1]

    def _state(self, current_a: float) -> BatteryState:
        ocv = self.params.cells * open_circuit_voltage(self.charge)
        voltage = max(ocv - current_a * self.params.cells * self.params.cell_resistance_ohm, 0.0)
        # Empty: the pack's protection (or the ESCs' low-voltage cut-off) stops the motors.
        fraction = min((voltage / self.full_voltage_v) ** 2, 1.0) if self.charge > 0.0 else 0.0
        return BatteryState(self.charge, voltage, current_a, self.consumed_mah, fraction)

    def step(self, dt_s: float, shaft_power_w: float) -> BatteryState:
        """Drain the pack for ``dt_s`` seconds at ``shaft_power_w`` of rotor power; the new state."""
        if not (math.isfinite(dt_s) and math.isfinite(shaft_power_w)) or dt_s <= 0.0:
            return self.state
        p = self.params
        power = max(shaft_power_w, 0.0) / p.drive_efficiency + p.avionics_power_w
        ocv = p.cells * open_circuit_voltage(self.charge)
        resistance = p.cells * p.cell_resistance_ohm
        power = min(power, ocv * ocv / (4.0 * resistance))
        current = (ocv - math.sqrt(max(ocv * ocv - 4.0 * resistance * power, 0.0))) / (2.0 * resistance)
        if self.charge <= 0.0:
            current = 0.0  # empty: nothing more to draw (the cut-off a real pack's protection enforces)
        drawn_mah = current * dt_s / 3.6
        self.consumed_mah += drawn_mah
        self.charge = max(self.charge - drawn_mah / p.capacity_mah, 0.0)
        self.state = self._state(current)
        return self.state
