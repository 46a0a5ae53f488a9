"""Physics core speed: steps per second of aerial_sim's engine, and the same flight in RotorPy.

    tools/dev.sh bench physics [--seconds S]

Prints steps/s (and the real-time factor at 1000 Hz) for: one quad-X hovering with
a control update every 4 steps (as the physics node drives it), one quad-X resting
on the ground (the contact path), and four vehicles in one world. Then runs the
same one-vehicle hover, 1 ms steps, in RotorPy (Folk et al., the simulator the
house style cites) and prints the ratio. RotorPy is not a project dependency: on
first run it is installed with ``pip --target build/benchmark_deps --no-deps``
(it only needs NumPy and SciPy for this), or skipped with a message if that fails.
Timings are wall-clock on a shared machine: take the best of several repeats.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from aerial_sim.environment.environment import EnvironmentParams  # noqa: E402
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld  # noqa: E402
from aerial_sim.vehicles.multirotor import load_vehicle  # noqa: E402

RATE_HZ = 1000.0
STEPS_PER_CONTROL = 4
DEPS = REPO / "build" / "benchmark_deps"


def best_rate(run, steps: int, repeats: int) -> float:
    """Best steps/s over ``repeats`` runs of ``run(steps)`` (the least disturbed one)."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        run(steps)
        best = min(best, time.perf_counter() - start)
    return steps / best


def hover_world(count: int = 1, height: float = 10.0) -> tuple[PhysicsWorld, tuple[float, ...]]:
    world = PhysicsWorld(PhysicsParams(rate_hz=RATE_HZ), EnvironmentParams())
    quad = load_vehicle("quad_x")
    controls = quad.hover_controls(world.environment.air_density(height), world.environment.gravity(height))
    for index in range(count):
        name = f"drone{index + 1}"
        world.add_vehicle(name, quad, position=(3.0 * index, 0.0, height))
        world.set_controls(name, controls, spun_up=True)
    return world, controls


def aerial_sim_hover(steps: int, repeats: int, count: int = 1) -> float:
    world, controls = hover_world(count)
    names = world.vehicle_names()

    def run(n):
        for _ in range(n // STEPS_PER_CONTROL):
            for name in names:
                world.set_controls(name, controls)
            world.step(STEPS_PER_CONTROL)

    return best_rate(run, steps, repeats)


def aerial_sim_resting(steps: int, repeats: int) -> float:
    world = PhysicsWorld(PhysicsParams(rate_hz=RATE_HZ), EnvironmentParams())
    world.add_vehicle("drone1", load_vehicle("quad_x"), position=(0.0, 0.0, 0.0))
    world.step(100)
    return best_rate(lambda n: world.step(n), steps, repeats)


def rotorpy_hover(steps: int, repeats: int) -> float | None:
    """The same hover in RotorPy (1 ms steps, motor-speed commands), or None if unavailable."""
    if not (DEPS / "rotorpy").is_dir():
        print("  installing RotorPy into build/benchmark_deps (first run only)...", flush=True)
        result = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(DEPS), "rotorpy"],
            capture_output=True, text=True,
        )
        if result.returncode != 0:
            print(f"  RotorPy skipped: pip install failed: {result.stderr.strip().splitlines()[-1:]}")
            return None
    sys.path.insert(0, str(DEPS))
    try:
        import numpy as np
        from rotorpy.vehicles.crazyflie_params import quad_params
        from rotorpy.vehicles.multirotor import Multirotor
    except ImportError as error:
        print(f"  RotorPy skipped: {error}")
        return None
    hover_speed = math.sqrt(quad_params["mass"] * 9.81 / (quad_params["num_rotors"] * quad_params["k_eta"]))
    initial = {
        "x": np.array([0.0, 0.0, 10.0]), "v": np.zeros(3), "q": np.array([0.0, 0.0, 0.0, 1.0]), "w": np.zeros(3),
        "wind": np.zeros(3), "rotor_speeds": np.full(4, hover_speed),
    }
    vehicle = Multirotor(quad_params, initial_state=initial)
    control = {"cmd_motor_speeds": np.full(4, hover_speed)}
    dt = 1.0 / RATE_HZ

    def run(n):
        state = {k: v.copy() for k, v in initial.items()}
        for _ in range(n):
            state = vehicle.step(state, control, dt)

    return best_rate(run, steps, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000, help="physics steps per timed run")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    print(f"aerial_sim physics core, {RATE_HZ:g} Hz steps, Python {sys.version.split()[0]}")
    hover = aerial_sim_hover(args.steps, args.repeats)
    print(f"  1 quad-X hovering     : {hover:10,.0f} steps/s  ({hover / RATE_HZ:6.1f} x real time)")
    resting = aerial_sim_resting(args.steps // 4, args.repeats)
    print(f"  1 quad-X on the ground: {resting:10,.0f} steps/s  ({resting / RATE_HZ:6.1f} x real time)")
    four = aerial_sim_hover(args.steps // 4, args.repeats, count=4)
    print(f"  4 quad-X hovering     : {four:10,.0f} world steps/s  ({four / RATE_HZ:6.1f} x real time)")
    rotorpy = rotorpy_hover(max(200, args.steps // 20), args.repeats)
    if rotorpy is not None:
        print(f"RotorPy, same hover, 1 ms steps: {rotorpy:10,.0f} steps/s  ({rotorpy / RATE_HZ:6.2f} x real time)")
        print(f"  aerial_sim / RotorPy: {hover / rotorpy:.0f} x")


if __name__ == "__main__":
    main()
