"""A battery pack in the physics (issue 33): its sagging voltage caps the motors, so a draining pack is felt.

Model (aerial_sim.physics.battery): Rint pack, V = n OCV(SoC) - I n R with P = V I; a motor's top speed is
proportional to its supply voltage (back-EMF) and thrust to speed squared, so speed <= omega_max V / V_full
and thrust <= T_max (V / V_full)^2."""

from __future__ import annotations

import math

import pytest

from aerial_sim.physics.battery import BatteryParams
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
from aerial_sim.vehicles.multirotor import load_vehicle

VEHICLE = load_vehicle("quad_x")
G = 9.80665


def full_throttle(charge: float, capacity_mah: float = 100.0) -> PhysicsWorld:
    world = PhysicsWorld(PhysicsParams(linear_drag_enabled=False,
                                       battery=BatteryParams(capacity_mah=capacity_mah, initial_charge=charge)))
    world.add_vehicle("drone1", VEHICLE)
    world.set_controls("drone1", [1.0] * len(VEHICLE.rotors), spun_up=True)
    return world


def test_a_sagging_pack_caps_motor_speed_by_voltage_and_thrust_by_its_square():
    climbs = {}
    for charge in (1.0, 0.2):
        world = full_throttle(charge)
        world.step(4 * 100)  # 0.4 s at full throttle: the motors have followed the pack's sag
        battery = world.batteries["drone1"].state
        ratio = battery.voltage_v / world.batteries["drone1"].full_voltage_v
        rotors = world.rotor_states("drone1")
        for rotor, spec in zip(rotors, VEHICLE.rotors):
            assert rotor.speed_rad_s == pytest.approx(spec.max_speed_rad_s * ratio, rel=0.01)
        thrust = sum(r.thrust_n for r in rotors)
        assert thrust == pytest.approx(sum(r.max_thrust_n() for r in VEHICLE.rotors) * ratio ** 2, rel=0.02)
        acceleration = world.ground_truth("drone1").linear_acceleration_world[2]
        assert acceleration == pytest.approx(thrust / VEHICLE.mass_kg - G, abs=0.05)  # the vehicle feels it
        climbs[charge] = acceleration
    assert climbs[0.2] < 0.5 * climbs[1.0]  # a fifth-full pack: less than half the climb of a full one


def test_a_draining_pack_climbs_ever_slower_and_stops_the_motors_when_empty_the_same_way_each_run():
    runs = []
    for _ in range(2):
        world = full_throttle(0.2, capacity_mah=20.0)  # 4 mAh left: about 1.3 s at full throttle
        accelerations, charges = [], []
        for _ in range(10):
            world.step(4 * 50)  # 0.2 s
            accelerations.append(world.ground_truth("drone1").linear_acceleration_world[2])
            charges.append(world.batteries["drone1"].charge)
        runs.append((accelerations, charges, world.ground_truth("drone1").position))
    accelerations, charges, _ = runs[0]
    assert charges[0] < 0.2 and charges[-1] == 0.0  # coulomb counting drained it
    flying = [a for a, c in zip(accelerations, charges) if c > 0.0]
    assert len(flying) >= 4 and all(b < a for a, b in zip(flying, flying[1:]))  # each 0.2 s climbs less
    assert accelerations[-1] == pytest.approx(-G, abs=0.05)  # empty: motors off, falling
    assert sum(r.thrust_n for r in world.rotor_states("drone1")) == pytest.approx(0.0, abs=1e-9)
    assert runs[0] == runs[1]  # no random part: the same flight drains the same pack the same way
    assert math.isfinite(runs[0][2][2])
