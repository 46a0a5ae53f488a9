"""Multirotor vehicle definition: a rigid body with K actuated vertices.

AirSim paper (Shah et al. 2017), sec. 3.1, and MSR-TR-2017-9 sec. 3.1: a vehicle
of mass ``m`` with a 3x3 inertia tensor ``I``, cross-section areas
``A = [Ax, Ay, Az]``, and K vertices at positions ``r_i`` with normals ``n_i``,
each driven by a control ``u_i in [0, 1]``. A propeller at a vertex produces
(Brandt and Selig, cited as [16] in the paper)::

    F_i   = C_T   * rho * n_max^2 * D^4 * u_i            along n_i
    tau_i = C_pow * rho * n_max^2 * D^5 * u_i / (2 pi)   about -d_i * n_i (reaction)

with ``n_max`` the rotor's top speed in revolutions per second, ``D`` the
propeller diameter and ``d_i = +1`` for a counter-clockwise rotor seen from
above (its reaction torque on the body is clockwise). Defaults are AirSim's
generic quadrotor (AirLib ``MultiRotorParams::setupFrameGenericQuad`` and
``RotorParams``).

Vehicle files live in ``config/vehicles/<name>.yaml``; :func:`load_vehicle`
reads them and any malformed field is a :class:`ParamsError` naming it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from aerial_sim.config import (SAFE_LOADER, ParamsError, params_from_mapping, require, require_non_negative,
                               require_positive)
from aerial_sim.environment.atmosphere import SEA_LEVEL_DENSITY_KG_M3
from aerial_sim.paths import resolve_config

Vector3 = tuple[float, float, float]
Matrix3 = tuple[Vector3, Vector3, Vector3]


@dataclass(frozen=True)
class RotorParams:
    """One actuated vertex: a propeller on a motor (body frame FLU, SI units).

    Defaults: AirSim's generic rotor (a 9x4.7 in propeller on a 1 kg quadrotor).
    """

    #: Position relative to the centre of mass (m, body FLU).
    position_m: Vector3 = (0.0, 0.0, 0.0)
    #: Direction of thrust (body frame); normalised on construction.
    normal: Vector3 = (0.0, 0.0, 1.0)
    #: +1: spins counter-clockwise seen from above (reaction torque on the body is clockwise, -z); -1: clockwise.
    turning_direction: int = 1
    thrust_coefficient: float = 0.109919
    power_coefficient: float = 0.040164
    diameter_m: float = 0.2286
    max_speed_rpm: float = 6396.667
    #: First-order lag of the motor from command to thrust (s); AirSim's control_signal_filter_tc.
    time_constant_s: float = 0.005
    #: Height of the cylinder the spinning propeller sweeps (m), for its drag area; AirSim's propeller_height.
    propeller_height_m: float = 0.01

    def __post_init__(self):
        require(self.turning_direction in (1, -1), f"turning_direction must be +1 or -1, got {self.turning_direction!r}")
        require_positive(self, "thrust_coefficient", "diameter_m", "max_speed_rpm")
        require_non_negative(self, "power_coefficient", "time_constant_s", "propeller_height_m")
        require(all(math.isfinite(v) for v in self.position_m), f"position_m must be finite, got {self.position_m!r}")
        length = math.sqrt(sum(v * v for v in self.normal))
        require(math.isfinite(length) and abs(length - 1.0) < 1e-3, f"normal must be a unit vector, got {self.normal!r}")
        object.__setattr__(self, "normal", tuple(v / length for v in self.normal))

    @property
    def max_speed_rev_s(self) -> float:
        """Top rotor speed n_max (revolutions per second)."""
        return self.max_speed_rpm / 60.0

    @property
    def max_speed_rad_s(self) -> float:
        """Top rotor speed (rad/s)."""
        return self.max_speed_rev_s * 2.0 * math.pi

    def max_thrust_n(self, air_density: float = SEA_LEVEL_DENSITY_KG_M3) -> float:
        """Thrust at u = 1: ``C_T rho n_max^2 D^4`` (N)."""
        return self.thrust_coefficient * air_density * self.max_speed_rev_s**2 * self.diameter_m**4

    def max_torque_nm(self, air_density: float = SEA_LEVEL_DENSITY_KG_M3) -> float:
        """Reaction torque magnitude at u = 1: ``C_pow rho n_max^2 D^5 / (2 pi)`` (N m)."""
        return self.power_coefficient * air_density * self.max_speed_rev_s**2 * self.diameter_m**5 / (2.0 * math.pi)

    def drag_area_m2(self, axis: Vector3) -> float:
        """Drag area this propeller adds along unit body ``axis`` (m^2), as AirSim counts it.

        AirSim (AirLib ``MultiRotorPhysicsBody::createDragVertices``) adds, per rotor,
        ``pi D^2`` along the rotor axis and ``pi D h`` (``h`` = ``propeller_height_m``)
        across it, whatever the rotor's normal. Here the two are weighted by how far
        ``axis`` lies along and across the normal, ``|cos a| pi D^2 + |sin a| pi D h``,
        which is AirSim's value for a vertical rotor seen along a body axis. (``pi D^2``
        is four times the disc area, ``pi D h`` pi times the edge-on rectangle ``D h``:
        AirSim's figures, kept so the drag matches AirSim's.)
        """
        cosine = abs(sum(n * a for n, a in zip(self.normal, axis)))
        sine = math.sqrt(max(0.0, 1.0 - cosine * cosine))
        return math.pi * self.diameter_m * (cosine * self.diameter_m + sine * self.propeller_height_m)


@dataclass(frozen=True)
class MultirotorParams:
    """A multirotor: rigid-body properties plus its rotors, in the configured order.

    Defaults are AirSim's generic quadrotor body (1 kg, 0.18 x 0.11 x 0.04 m box,
    linear and angular drag coefficient 1.3/4, restitution 0.55, friction 0.5);
    the rotor list has no default and must be given.
    """

    name: str = "multirotor"
    mass_kg: float = 1.0
    #: Inertia tensor about the centre of mass, body frame (kg m^2).
    inertia_kg_m2: Matrix3 = ((0.00672, 0.0, 0.0), (0.0, 0.00804, 0.0), (0.0, 0.0, 0.01428))
    #: Body box dimensions along x, y, z (m): used for drag, angular drag and contact.
    body_box_m: Vector3 = (0.18, 0.11, 0.04)
    #: Cross-section areas [Ax, Ay, Az] (m^2) seen along each body axis; None = AirSim's: body box
    #: faces plus the propellers' areas (:attr:`cross_section`).
    cross_section_m2: Vector3 | None = None
    linear_drag_coefficient: float = 0.325
    angular_drag_coefficient: float = 0.325
    #: (k, b, c_d1) of seed 004 eq. (13) for the engine's ``rotor`` drag law; None: derived from the rotors
    #: (:func:`aerial_sim.physics.drag.rotor_drag_coefficients`).
    rotor_drag: tuple[float, float, float] | None = None
    #: Coefficient of restitution for impacts, 0 (no bounce) .. 1 (elastic).
    restitution: float = 0.55
    #: Coulomb friction coefficient for contacts.
    friction: float = 0.5
    rotors: tuple[RotorParams, ...] = ()

    def __post_init__(self):
        require_positive(self, "mass_kg")
        require(len(self.rotors) > 0, "rotors: a multirotor needs at least one rotor")
        require(all(math.isfinite(v) and v > 0 for v in self.body_box_m), f"body_box_m must be 3 positive sizes, got {self.body_box_m!r}")
        require_non_negative(self, "linear_drag_coefficient", "angular_drag_coefficient", "friction")
        require(0.0 <= self.restitution <= 1.0, f"restitution must be in [0, 1], got {self.restitution!r}")
        if self.cross_section_m2 is not None:
            require(all(math.isfinite(v) and v >= 0 for v in self.cross_section_m2), f"cross_section_m2 must be >= 0, got {self.cross_section_m2!r}")
        if self.rotor_drag is not None:
            require(all(math.isfinite(v) and v >= 0 for v in self.rotor_drag), f"rotor_drag (k, b, c_d1) must be >= 0, got {self.rotor_drag!r}")
        _check_inertia(self.inertia_kg_m2)

    @property
    def cross_section(self) -> Vector3:
        """Cross-section areas [Ax, Ay, Az] (m^2) for linear drag: ``cross_section_m2`` if given, else AirSim's.

        AirSim's (AirLib ``MultiRotorPhysicsBody::createDragVertices``): the body box's
        face across each body axis plus every rotor's :meth:`RotorParams.drag_area_m2`
        (``pi D h`` sideways, ``pi D^2`` vertically). For ``quad_x``:
        (0.0331, 0.0359, 0.6765) m^2. The physics engine and ``drag-eval`` both read
        the areas here, once per vehicle.
        """
        if self.cross_section_m2 is not None:
            return self.cross_section_m2
        bx, by, bz = self.body_box_m
        box = (by * bz, bx * bz, bx * by)
        axes = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
        return tuple(face + sum(r.drag_area_m2(axis) for r in self.rotors) for face, axis in zip(box, axes))

    def hover_controls(self, air_density: float, gravity: float) -> tuple[float, ...]:
        """Equal u_i that balance the weight when every normal is vertical (analytic hover)."""
        lift = sum(r.max_thrust_n(air_density) * r.normal[2] for r in self.rotors)
        u = self.mass_kg * gravity / lift
        return (u,) * len(self.rotors)


def _check_inertia(inertia: Matrix3) -> None:
    rows = [tuple(row) for row in inertia]
    require(len(rows) == 3 and all(len(r) == 3 for r in rows), "inertia_kg_m2 must be a 3x3 matrix")
    require(all(math.isfinite(v) for r in rows for v in r), "inertia_kg_m2 must be finite")
    require(all(abs(rows[i][j] - rows[j][i]) <= 1e-12 + 1e-9 * abs(rows[i][j]) for i in range(3) for j in range(3)),
            "inertia_kg_m2 must be symmetric")
    # Sylvester's criterion: positive definite iff all leading principal minors > 0.
    a, b, c = rows
    minor2 = a[0] * b[1] - a[1] * b[0]
    det = a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0]) + a[2] * (b[0] * c[1] - b[1] * c[0])
    require(a[0] > 0 and minor2 > 0 and det > 0, "inertia_kg_m2 must be positive definite")
    principal = (a[0], b[1], c[2])
    require(all(principal[i] <= principal[(i + 1) % 3] + principal[(i + 2) % 3] + 1e-12 for i in range(3)),
            "inertia_kg_m2 violates the triangle inequality of a physical body")


def box_with_point_masses_inertia(body_mass_kg: float, body_box_m: Vector3, point_mass_kg: float,
                                  points_m: list[Vector3]) -> Matrix3:
    """Inertia of a solid box plus point masses (motors) about the origin, as AirSim derives it.

    Used to derive the ``inertia_kg_m2`` values of the shipped vehicle files.
    """
    x, y, z = body_box_m
    ixx = body_mass_kg / 12.0 * (y * y + z * z)
    iyy = body_mass_kg / 12.0 * (x * x + z * z)
    izz = body_mass_kg / 12.0 * (x * x + y * y)
    matrix = [[ixx, 0.0, 0.0], [0.0, iyy, 0.0], [0.0, 0.0, izz]]
    for p in points_m:
        r2 = sum(v * v for v in p)
        for i in range(3):
            for j in range(3):
                matrix[i][j] += point_mass_kg * ((r2 if i == j else 0.0) - p[i] * p[j])
    return tuple(tuple(row) for row in matrix)


#: Keys a vehicle file must give: a default mass or inertia would fly silently with the wrong body.
REQUIRED_VEHICLE_KEYS = ("mass_kg", "inertia_kg_m2", "rotors")
#: Keys each rotor must give (the others default to AirSim's generic propeller and motor).
REQUIRED_ROTOR_KEYS = ("position_m", "turning_direction")


def _require_keys(values: Mapping[str, Any], keys, where: str) -> None:
    missing = [key for key in keys if key not in values]
    if missing:
        raise ParamsError(f"{where}: missing required key{'s' if len(missing) > 1 else ''} {', '.join(missing)}")


def vehicle_from_mapping(values: Mapping[str, Any], where: str = "vehicle") -> MultirotorParams:
    """Build :class:`MultirotorParams` from a mapping; every error names its field path."""
    if not isinstance(values, Mapping):
        raise ParamsError(f"{where}: expected a mapping, got {type(values).__name__}")
    values = dict(values)
    _require_keys(values, REQUIRED_VEHICLE_KEYS, where)
    rotors = values.pop("rotors", None)
    if not isinstance(rotors, (list, tuple)) or not rotors:
        raise ParamsError(f"{where}.rotors: expected a non-empty list of rotors, got {rotors!r}")
    for index, raw in enumerate(rotors):
        if isinstance(raw, Mapping):
            _require_keys(raw, REQUIRED_ROTOR_KEYS, f"{where}.rotors[{index}]")
    built = tuple(_with_location(RotorParams, raw, f"{where}.rotors[{i}]") for i, raw in enumerate(rotors))
    return _with_location(MultirotorParams, {**values, "rotors": built}, where)


def load_vehicle(name_or_path: str) -> MultirotorParams:
    """Load ``config/vehicles/<name>.yaml`` (e.g. ``quad_x``, ``hexa_x``) or a YAML file path."""
    path = resolve_config(name_or_path, "vehicles")
    try:
        document = yaml.load(Path(path).read_text(), Loader=SAFE_LOADER)
    except FileNotFoundError as error:
        available = sorted(p.stem for p in Path(path).parent.glob("*.yaml"))
        raise ParamsError(f"vehicle '{name_or_path}': {path} not found (available: {', '.join(available)})") from error
    except yaml.YAMLError as error:
        raise ParamsError(f"{path}: not valid YAML: {error}") from error
    return vehicle_from_mapping(document, where=Path(path).name)


def _with_location(cls, values, where: str):
    """``params_from_mapping`` whose validation errors (from ``__post_init__``) also carry ``where``."""
    try:
        return params_from_mapping(cls, values, where)
    except ParamsError as error:
        message = str(error)
        if message.startswith(where):
            raise
        raise ParamsError(f"{where}.{message}") from error
