"""Pitch for level flight under each drag law, checked in the engine, beside seed 004's outdoor Table 2.

For quad_x (AirSim's generic quad) and f450 (seed 004's vehicle, config/vehicles/f450.yaml) and each of the
engine's drag laws (physics/drag.py: projected, faces, rotor):

1. the pitch and thrust that hold level flight at 5, 10 and 15 m/s (``level_flight_pitch``: the force
   balance of the engine's own drag function), marked where the thrust needed exceeds what the
   controller may ask for (90 % of the rotors' maximum);
2. the same pitch measured in the engine: the project's controller flies 12 s at that speed in still air
   (velocity mode, tilt limit raised to 80 deg) and the mean pitch of the last 2 s is printed beside it;
3. a figure of pitch against speed (0-20 m/s), both vehicles, the three laws.

Seed 004's Table 2 (acceleration RMSE of AirSim's drag law and of the rotor drag model against the F450's
outdoor flights at 5 and 10 m/s) is printed with them: the only real-flight drag figures among the seeds.
Its flight logs are not published, so the RMSEs cannot be recomputed here.

    tools/dev.sh run python tools/drag_figures.py [OUT_DIR]     # default doc/images
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from aerial_sim.control.controller import CascadedController, ControllerParams, Setpoint, VehicleState  # noqa: E402
from aerial_sim.physics.drag import DRAG_LAWS, level_flight_pitch  # noqa: E402
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld  # noqa: E402
from aerial_sim.vehicles.multirotor import load_vehicle  # noqa: E402

VEHICLES = ("quad_x", "f450")
SPEEDS = (5.0, 10.0, 15.0)
DENSITY = 1.225
GRAVITY = 9.80665
#: Seed 004, Table 2: RMSE (m/s^2) of the predicted acceleration against the outdoor F450 flights.
TABLE_2 = {5.0: {"airsim": 0.57, "rotor": 0.64}, 10.0: {"airsim": 1.48, "rotor": 0.98}}
PERIOD_S = 0.004


def flown_pitch_deg(vehicle_name: str, law: str, speed: float) -> float | None:
    """Mean pitch (deg) over the last 2 s of 12 s of level flight at ``speed`` in the engine, or None if
    the vehicle did not reach the speed within 0.2 m/s."""
    vehicle = load_vehicle(vehicle_name)
    world = PhysicsWorld(PhysicsParams(drag_law=law))
    world.add_vehicle("uav", vehicle, position=(0.0, 0.0, 50.0))
    world.set_controls("uav", vehicle.hover_controls(DENSITY, GRAVITY), spun_up=True)
    controller = CascadedController(ControllerParams(max_tilt_rad=math.radians(80), max_horizontal_speed_m_s=25.0,
                                                     max_thrust_fraction=0.95), vehicle)  # fmt: skip
    pitches, speeds = [], []
    periods = int(12.0 / PERIOD_S)
    for k in range(periods):
        truth = world.ground_truth("uav")
        # a 3 s ramp keeps the start gentle; then hold the speed and the height
        target = speed * min(1.0, k * PERIOD_S / 3.0)
        setpoint = Setpoint(position=None, velocity=(target, 0.0, 0.0))
        output = controller.update(VehicleState.from_ground_truth(truth), setpoint, PERIOD_S)
        world.set_controls("uav", output.controls)
        world.step(4)
        if k >= periods - int(2.0 / PERIOD_S):
            w, x, y, z = truth.orientation
            pitches.append(math.degrees(math.asin(max(-1.0, min(1.0, 2 * (w * y - z * x))))))
            speeds.append(truth.velocity_world[0])
    if abs(np.mean(speeds) - speed) > 0.2:
        return None
    return float(np.mean(pitches))


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "doc/images")
    out.mkdir(parents=True, exist_ok=True)
    print("Pitch for level flight (deg; thrust / weight), force balance and flown in the engine, still air:")
    print(f"{'vehicle':8s} {'law':10s} " + " ".join(f"{f'{s:g} m/s':>26s}" for s in SPEEDS))
    for name in VEHICLES:
        vehicle = load_vehicle(name)
        limit = 0.9 * sum(r.max_thrust_n(DENSITY) for r in vehicle.rotors)
        for law in DRAG_LAWS:
            cells = []
            for speed in SPEEDS:
                solved = level_flight_pitch(law, vehicle, speed, DENSITY, GRAVITY)
                if solved is None:
                    cells.append("no tilt holds it")
                    continue
                pitch, thrust = solved
                ratio = thrust / (vehicle.mass_kg * GRAVITY)
                flown = flown_pitch_deg(name, law, speed) if thrust <= limit else None
                flown_text = f"{flown:5.1f}" if flown is not None else "  -  "
                mark = "" if thrust <= limit else " >T"
                cells.append(f"{math.degrees(pitch):5.1f} ({ratio:4.2f}{mark}) flown {flown_text}")
            print(f"{name:8s} {law:10s} " + " ".join(f"{c:>26s}" for c in cells))
    print("  >T: needs more than 90 % of the rotors' maximum thrust (not flown)")
    print("Seed 004 Table 2, F450 outdoors, RMSE of the predicted acceleration (m/s^2):")
    for speed, row in TABLE_2.items():
        print(f"  {speed:4.0f} m/s: AirSim's law {row['airsim']:.2f}, rotor drag model {row['rotor']:.2f}")

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    speeds = np.linspace(0.0, 20.0, 81)
    for axis, name in zip(axes, VEHICLES):
        vehicle = load_vehicle(name)
        limit = 0.9 * sum(r.max_thrust_n(DENSITY) for r in vehicle.rotors)
        for law in DRAG_LAWS:
            pitch = []
            for s in speeds:
                solved = level_flight_pitch(law, vehicle, s, DENSITY, GRAVITY)
                pitch.append(math.degrees(solved[0]) if solved is not None and solved[1] <= limit else np.nan)
            axis.plot(speeds, pitch, label=law)
        axis.set(title=f"{name}: pitch for level flight (still air)", xlabel="air speed (m/s)")
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("pitch (deg); ends where thrust runs out")
    axes[0].legend()
    fig.tight_layout()
    path = out / "drag_pitch_vs_speed.png"
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


if __name__ == "__main__":
    main()
