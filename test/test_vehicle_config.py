"""Vehicle definitions: shipped configs load with AirSim's figures; malformed ones name the field."""

import math
import re

import pytest

from aerial_sim.config import ParamsError
from aerial_sim.vehicles.multirotor import (
    MultirotorParams,
    box_with_point_masses_inertia,
    load_vehicle,
    vehicle_from_mapping,
)


def test_quad_x_is_airsims_generic_quadrotor():
    quad = load_vehicle("quad_x")
    assert quad.mass_kg == 1.0 and len(quad.rotors) == 4
    rotor = quad.rotors[0]
    # AirSim's RotorParams: max thrust 4.179446268 N and max torque 0.055562 N m at 1.225 kg/m^3.
    assert rotor.max_thrust_n(1.225) == pytest.approx(4.179446268, rel=1e-6)
    assert rotor.max_torque_nm(1.225) == pytest.approx(0.055562, rel=1e-4)
    assert rotor.max_speed_rad_s == pytest.approx(6396.667 / 60 * 2 * 3.141592653589793)
    # Arms of 0.2275 m; two rotors spin each way so the reaction torques can cancel.
    for r in quad.rotors:
        assert (r.position_m[0] ** 2 + r.position_m[1] ** 2) ** 0.5 == pytest.approx(0.2275, abs=1e-5)
    assert sorted(r.turning_direction for r in quad.rotors) == [-1, -1, 1, 1]
    assert quad.hover_controls(1.225, 9.80665)[0] == pytest.approx(9.80665 / (4 * 4.179446268), rel=1e-6)


@pytest.mark.parametrize("name, rotors", [("quad_x", 4), ("hexa_x", 6)])
def test_shipped_inertias_are_the_box_plus_motor_masses_they_claim(name, rotors):
    vehicle = load_vehicle(name)
    assert len(vehicle.rotors) == rotors
    motor = 0.055
    expected = box_with_point_masses_inertia(
        vehicle.mass_kg - rotors * motor, vehicle.body_box_m, motor, [r.position_m for r in vehicle.rotors]
    )
    for row, expected_row in zip(vehicle.inertia_kg_m2, expected):
        assert row == pytest.approx(expected_row, rel=1e-5, abs=1e-9)  # positions rounded to 1 um


def _quad_document():
    import yaml

    from aerial_sim.paths import config_path

    return yaml.safe_load(config_path("vehicles", "quad_x.yaml").read_text())


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.update(mass_kg=-1.0), r"quad\.mass_kg must be a positive number"),
        (lambda d: d.update(mass="1"), r"quad\.mass: unknown parameter"),
        (lambda d: d["rotors"][2].update(diameter_m="big"), r"quad\.rotors\[2\]\.diameter_m: expected a number"),
        (lambda d: d["rotors"][1].update(turning_direction=0), r"quad\.rotors\[1\]\.turning_direction must be \+1 or -1"),
        (lambda d: d["rotors"][3].update(normal=[0.0, 0.0, 2.0]), r"quad\.rotors\[3\]\.normal must be a unit vector"),
        (lambda d: d["rotors"][0].update(propeller=1), r"quad\.rotors\[0\]\.propeller: unknown parameter"),
        (lambda d: d.update(inertia_kg_m2=[[1, 0, 0], [0, -1, 0], [0, 0, 1]]), r"quad\.inertia_kg_m2 must be positive definite"),
        (lambda d: d.update(body_box_m=[0.1, 0.1]), r"quad\.body_box_m: expected 3 values"),
        (lambda d: d.update(restitution=1.5), r"quad\.restitution must be in \[0, 1\]"),
        (lambda d: d.update(rotors=[]), r"quad\.rotors: expected a non-empty list"),
        (lambda d: d.pop("mass_kg"), r"quad: missing required key mass_kg"),  # flew silently at the 1 kg default
        (lambda d: d.pop("inertia_kg_m2"), r"quad: missing required key inertia_kg_m2"),
        (lambda d: d["rotors"][2].pop("position_m"), r"quad\.rotors\[2\]: missing required key position_m"),
    ],
)
def test_malformed_vehicle_config_names_the_field(change, message):
    document = _quad_document()
    change(document)
    with pytest.raises(ParamsError, match=message):
        vehicle_from_mapping(document, where="quad")


def test_malformed_vehicle_file_names_file_and_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nmass_kg: 1.0\ninertia_kg_m2: [[0.01, 0, 0], [0, 0.01, 0], [0, 0, 0.02]]\nrotors:\n"
                    "  - {position_m: [0.1, 0, 0], turning_direction: 1, max_speed_rpm: fast}\n")
    with pytest.raises(ParamsError, match=r"bad\.yaml\.rotors\[0\]\.max_speed_rpm: expected a number"):
        load_vehicle(str(path))
    with pytest.raises(ParamsError, match="available: .*quad_x"):
        load_vehicle("no_such_vehicle")


def test_cross_section_is_airsims_body_box_plus_propeller_areas():
    # AirSim's own computation for its generic quad (AirLib MultiRotorPhysicsBody::createDragVertices,
    # propeller_height 1 cm from RotorParams): each body-box face plus, per rotor, pi*D*h (the edge of
    # the spinning propeller) sideways and pi*D^2 along the rotor axis.
    quad = load_vehicle("quad_x")
    diameter, height = 0.2286, 0.01
    sideways, vertical = 4 * math.pi * diameter * height, 4 * math.pi * diameter**2
    assert quad.cross_section == pytest.approx((0.11 * 0.04 + sideways, 0.18 * 0.04 + sideways, 0.18 * 0.11 + vertical), rel=1e-12)
    assert quad.cross_section == pytest.approx((0.0331, 0.0359, 0.6765), abs=1e-4)
    given = MultirotorParams(cross_section_m2=(0.01, 0.02, 0.03), rotors=quad.rotors)
    assert given.cross_section == (0.01, 0.02, 0.03)


def test_the_f450_of_seed_004_has_its_11_inch_props_450_mm_diagonal_and_the_inertia_it_claims():
    f450 = load_vehicle("f450")
    assert f450.mass_kg == 1.7 and len(f450.rotors) == 4
    assert all(r.diameter_m == pytest.approx(11 * 0.0254) for r in f450.rotors)  # 11 x 4.7 in propellers
    for r in f450.rotors:  # 450 mm motor to motor across the diagonal
        assert 2 * (r.position_m[0] ** 2 + r.position_m[1] ** 2) ** 0.5 == pytest.approx(0.45, abs=1e-5)
    expected = box_with_point_masses_inertia(1.7 - 4 * 0.09, f450.body_box_m, 0.09, [r.position_m for r in f450.rotors])
    for row, expected_row in zip(f450.inertia_kg_m2, expected):
        assert row == pytest.approx(expected_row, rel=1e-5, abs=1e-9)
    assert 4 * f450.rotors[0].max_thrust_n(1.225) / (1.7 * 9.80665) == pytest.approx(2.83, abs=0.01)


def test_a_vehicle_spawn_is_checked_whole_before_anything_is_added():
    from aerial_sim.vehicles.spawn import VehicleSpawn

    spawn = VehicleSpawn.from_values({"name": "Drone2", "type": "hexa_x", "position": [1, 2, 3], "yaw": 0.5})
    assert (spawn.name, spawn.vehicle_type, spawn.position, spawn.yaw) == ("Drone2", "hexa_x", (1.0, 2.0, 3.0), 0.5)
    assert VehicleSpawn.from_values(spawn.values()) == spawn
    assert VehicleSpawn.from_values({"name": "d", "type": ""}).vehicle_type == "quad_x"  # AirSim's '' = default
    for bad, why in [({"name": "2x"}, "not a valid ROS name"), ({}, "name is missing"),
                     ({"name": "d", "type": "../vehicles/quad_x"}, "no vehicle config"),
                     ({"name": "d", "type": "/etc/passwd"}, "no vehicle config"),
                     ({"name": "d", "position": [math.nan, 0, 0]}, "finite"),
                     ({"name": "d", "position": [1, 2]}, "3 finite numbers"),
                     ({"name": "d", "position": "up"}, "3 numbers"),
                     ({"name": "d", "position": [2e5, 0, 0]}, "farther than"),
                     ({"name": "d", "yaw": math.inf}, "finite"), ({"name": "d", "yaw": "north"}, "numbers"),
                     ({"name": "d", "colour": "red"}, "unknown field(s) colour")]:
        with pytest.raises(ParamsError, match=re.escape(why)):
            VehicleSpawn.from_values(bad)
