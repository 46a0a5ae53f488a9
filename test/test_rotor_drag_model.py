"""Rotor drag model (seed 004, sec. 3.1, eqs. (11) and (13)): the physics a user would notice."""

from __future__ import annotations

import math

import pytest

from aerial_sim.config import ParamsError
from aerial_sim.physics.rotor_drag import (
    RotorDragModel,
    RotorDragParams,
    air_velocity_body,
    linearize_sqrt_thrust,
    ram_drag_bound,
)

QUAD_X_ROTORS = ((0.160867, -0.160867, 0.025), (-0.160867, 0.160867, 0.025),
                 (0.160867, 0.160867, 0.025), (-0.160867, -0.160867, 0.025))
HOVER = (2.4516625,) * 4  # 1 kg at 9.80665 m/s^2, four rotors


def test_no_force_in_hover():
    for per_rotor in (False, True):
        model = RotorDragModel(RotorDragParams(per_rotor=per_rotor), QUAD_X_ROTORS)
        force, torque = model.wrench(HOVER, (0.0, 0.0, 0.0))
        assert force == (0.0, 0.0, 0.0) and torque == (0.0, 0.0, 0.0)


def test_force_opposes_horizontal_velocity_and_has_no_vertical_component():
    model = RotorDragModel(RotorDragParams())
    velocity = (3.0, -4.0, 2.0)  # climbing too: eq. (13) drops the body-z part
    force, _ = model.wrench(HOVER, velocity)
    assert force[2] == 0.0
    horizontal = math.hypot(force[0], force[1])
    cosine = (force[0] * velocity[0] + force[1] * velocity[1]) / (horizontal * 5.0)
    assert cosine == pytest.approx(-1.0, abs=1e-12)
    # |F| = (k T + b) c_d1 |v_xy| with the default coefficients.
    p = RotorDragParams()
    assert horizontal == pytest.approx((p.k * sum(HOVER) + p.b) * p.c_d1 * 5.0, rel=1e-12)


def test_force_scales_linearly_with_k_thrust_plus_b():
    p = RotorDragParams()
    model = RotorDragModel(p)
    velocity = (5.0, 0.0, 0.0)
    for total in (2.0, 8.0, 16.0):
        force = model.force_eq13(total, velocity)
        assert force[0] / (-(p.k * total + p.b) * p.c_d1 * 5.0) == pytest.approx(1.0, rel=1e-12)
    # Doubling the thrust term doubles the drag only through k T: F(T2) - F(T1) is proportional to T2 - T1.
    f1, f2, f3 = (model.force_eq13(t, velocity)[0] for t in (4.0, 8.0, 12.0))
    assert f3 - f2 == pytest.approx(f2 - f1, rel=1e-12)


def test_per_rotor_form_equals_eq13_without_rotation_and_adds_rotation_terms():
    params = RotorDragParams(per_rotor=True)
    per_rotor = RotorDragModel(params, QUAD_X_ROTORS)
    lumped = RotorDragModel(RotorDragParams())
    velocity = (4.0, 1.0, 0.5)
    force, torque = per_rotor.wrench(HOVER, velocity)
    assert force == pytest.approx(lumped.wrench(HOVER, velocity)[0], rel=1e-12)
    # Equal thrusts, no rotation: equal rotor forces, so only the hubs' 2.5 cm height above the centre
    # of mass gives a moment: the backward drag of forward flight pitches the nose up (torque about -y).
    assert torque[0] == pytest.approx(-0.025 * force[1], rel=1e-9)
    assert torque[1] == pytest.approx(0.025 * force[0], rel=1e-9)
    assert torque[2] == pytest.approx(0.0, abs=1e-12)
    # Yawing in place: each hub moves tangentially, the drag opposes it, so a torque opposes the yaw rate.
    _, yaw_torque = per_rotor.wrench(HOVER, (0.0, 0.0, 0.0), (0.0, 0.0, 2.0))
    assert yaw_torque[2] < 0.0


def test_wind_turns_into_air_relative_velocity():
    # Hovering (no ground speed) in a 5 m/s east wind, heading north (yaw 90 deg): the air comes from
    # the body's right, so the drag pushes the body to its left (+y body), i.e. downwind (east).
    half = math.radians(90.0) / 2.0
    orientation = (math.cos(half), 0.0, 0.0, math.sin(half))
    v_air = air_velocity_body((0.0, 0.0, 0.0), orientation, (5.0, 0.0, 0.0))
    assert v_air == pytest.approx((0.0, 5.0, 0.0), abs=1e-12)
    force, _ = RotorDragModel(RotorDragParams()).wrench(HOVER, v_air)
    assert force[0] == pytest.approx(0.0, abs=1e-12)
    assert force[1] < 0.0  # body -y is east when heading north: downwind


def test_default_coefficients_follow_their_stated_derivation():
    # quad_x rotor: C_T 0.109919, D 0.2286 m, 6396.667 rpm -> 4.179 N at 1.225 kg/m^3.
    max_thrust = 0.109919 * 1.225 * (6396.667 / 60.0) ** 2 * 0.2286**4
    k, b = linearize_sqrt_thrust(4, max_thrust)
    defaults = RotorDragParams()
    assert defaults.k == pytest.approx(k, rel=1e-3)
    assert defaults.b == pytest.approx(b, rel=1e-3)
    assert defaults.c_d1 == pytest.approx(0.4 * ram_drag_bound(0.2286), rel=1e-3)
    # The linearisation of eq. (7) is good over the fitted range: within 0.09 sqrt(N) of sqrt(T).
    for fraction in (0.2, 0.4, 0.6, 0.8, 1.0):
        thrust = fraction * max_thrust
        assert abs(k * thrust + b / 4 - math.sqrt(thrust)) < 0.09


def test_bad_configuration_is_a_params_error():
    with pytest.raises(ParamsError, match="c_d1"):
        RotorDragParams(c_d1=-1.0)
    with pytest.raises(ParamsError, match="rotor positions"):
        RotorDragModel(RotorDragParams(per_rotor=True))
