"""A new run in a world already built (``PhysicsWorld.restart``, the core of ``/physics/restart`` and of
warm batch runs) flies exactly as a freshly built world: same states bit for bit, time from 0, the
wind of the new run; and the lockstep gate owes every stamp from 0 again after its restart."""

from __future__ import annotations

import numpy as np

from aerial_sim.environment.environment import EnvironmentParams
from aerial_sim.environment.wind import WindField, WindParams
from aerial_sim.physics.lockstep import LockstepGate, Participant
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
from aerial_sim.vehicles.multirotor import load_vehicle

PERIODS, STEPS = 100, 4  # 0.4 s at 1 kHz: take-off, climbing, turbulence acting


def build() -> PhysicsWorld:
    world = PhysicsWorld(PhysicsParams(rate_hz=1000.0), EnvironmentParams(wind_enu_m_s=(1.0, 0.0, 0.0)))
    world.add_vehicle("a", load_vehicle("quad_x"), position=(0.0, 0.0, 0.0))
    world.add_vehicle("b", load_vehicle("hexa_x"), position=(3.0, 0.0, 0.0), yaw=0.5)
    return world


def turbulent(mean=(1.0, 0.0, 0.0), seed=7) -> WindField:
    return WindField(WindParams(mean_enu_m_s=mean, turbulence="moderate", seed=seed), 2)


def fly(world: PhysicsWorld) -> list[tuple]:
    """Full throttle on one rotor more than the others (climbing, turning); every period's states."""
    states = []
    for period in range(PERIODS):
        for name in world.vehicle_names():
            rotors = len(world.rotor_states(name))
            world.set_controls(name, [0.7 + (0.05 if i == 0 else 0.0) for i in range(rotors)])
        world.step(STEPS)
        truth = world.truth_arrays()
        states.append((world.time_s, *(np.asarray(v).tobytes() for _, v in sorted(truth.items())),
                       world.winds().tobytes()))
    return states


def test_restarted_world_repeats_a_fresh_world_bit_for_bit():
    fresh = build()
    fresh.set_wind_field(turbulent())
    expected = fly(fresh)
    assert expected[-1][0] == PERIODS * STEPS / 1000.0

    warm = build()
    warm.set_wind_field(turbulent())
    fly(warm)
    warm.set_wind((0.0, 4.0, 0.0))  # what a run may have changed at run time (/physics/wind)
    warm.set_kinematics("a", position=(5.0, 5.0, 5.0))
    warm.restart(turbulent())
    assert warm.time_s == 0.0
    assert fly(warm) == expected


def test_restart_takes_the_new_runs_wind():
    world = build()
    fly(world)
    world.restart(turbulent(mean=(0.0, 3.0, 0.0), seed=8))
    other = build()
    other.set_wind_field(turbulent(mean=(0.0, 3.0, 0.0), seed=8))
    assert fly(world) == fly(other)
    world.restart()  # no field: the environment's configured constant wind
    assert world.environment.wind_enu_m_s == (1.0, 0.0, 0.0)
    assert np.allclose(world.winds(), [[1.0, 0.0, 0.0]] * 2)


def test_gate_owes_every_stamp_again_after_a_restart():
    imu = Participant("/drone1/imu/data", 200.0)
    gate = LockstepGate((imu,))
    gate.arm(imu.topic, -1)
    gate.observe(imu.topic, 10_000_000_000)  # the run before got to 10 s
    assert gate.holdups(0) == []
    gate.restart()
    held = gate.holdups(0)  # the new run's t = 0 sample is owed, as in a fresh run
    assert [(h.participant.topic, h.awaited_ns, h.latest_ns) for h in held] == [(imu.topic, 0, None)]
    gate.observe(imu.topic, 0)
    assert gate.holdups(0) == [] and gate.holdups(5_000_000) != []
