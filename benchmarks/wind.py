"""Wind field cost: one WindField.step for a fleet (mean, log-law shear, a gust and moderate Dryden or von Kármán
turbulence; von Kármán for vehicles at a steady air speed and for vehicles whose air speed changes every call,
which recomputes its noise roots), and what it adds to a PhysicsWorld control period (4 steps of 1 ms) when sampled every period or every 20 ms.

    tools/dev.sh bench wind

Timings are noisy on a shared machine: the best of a few repeats is printed.
"""

from __future__ import annotations

import time

import numpy as np

from aerial_sim.environment.wind import GustParams, WindField, WindParams
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
from aerial_sim.vehicles.multirotor import load_vehicle

PARAMS = WindParams(mean_enu_m_s=(6.0, 2.0, 0.0), shear="log_law", turbulence="moderate",
                    gusts=(GustParams(start_s=1.0, amplitude_enu_m_s=(0.0, 3.0, 0.0)),), seed=1)  # fmt: skip


def best_of(repeats: int, function) -> float:
    return min(function() for _ in range(repeats))


def field_step_us(vehicles: int, params: WindParams = PARAMS, moving: bool = False, calls: int = 300) -> float:
    field = WindField(params, vehicles)
    rng = np.random.default_rng(0)
    positions = rng.uniform(0, 100, (vehicles, 3))
    velocities = [rng.normal(0.0, 1.0, (vehicles, 3)) if moving else np.zeros((vehicles, 3)) for _ in range(calls)]

    def run():
        start = time.perf_counter()
        for k in range(calls):
            field.step(k * 0.02, 0.02, positions, velocities[k])
        return (time.perf_counter() - start) / calls * 1e6

    return best_of(3, run)


def period_us(vehicles: int, field_params: WindParams | None, periods: int = 250) -> float:
    world = PhysicsWorld(PhysicsParams())
    vehicle = load_vehicle("quad_x")
    for i in range(vehicles):
        world.add_vehicle(f"v{i}", vehicle, position=(3.0 * i, 0.0, 20.0))
        world.set_controls(f"v{i}", vehicle.hover_controls(1.2, 9.8), spun_up=True)
    if field_params is not None:
        world.set_wind_field(WindField(field_params, vehicles))
    world.step(4)

    def run():
        start = time.perf_counter()
        for _ in range(periods):
            world.step(4)
        return (time.perf_counter() - start) / periods * 1e6

    return best_of(3, run)


def main() -> None:
    von_karman = WindParams(**{**PARAMS.__dict__, "turbulence_model": "von_karman"})
    print("WindField.step (mean + log-law shear + gust + moderate turbulence), per call: "
          "Dryden / von Karman, steady air speed / von Karman, air speed changing every call")
    for vehicles in (1, 10, 100, 1000):
        cells = [field_step_us(vehicles), field_step_us(vehicles, von_karman),
                 field_step_us(vehicles, von_karman, moving=True)]
        print(f"  {vehicles:5d} vehicles: " + " / ".join(f"{c:8.1f} us" for c in cells))
    print("PhysicsWorld control period (4 steps), per period: no field / field sampled every 20 ms / every period")
    for vehicles in (1, 100):
        every_period = WindParams(**{**PARAMS.__dict__, "update_period_s": 0.004})
        cells = [period_us(vehicles, None), period_us(vehicles, PARAMS), period_us(vehicles, every_period)]
        print(f"  {vehicles:5d} vehicles: " + " / ".join(f"{c:8.1f} us" for c in cells))


if __name__ == "__main__":
    main()
