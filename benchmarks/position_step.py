"""Position-step response of the flight controller, before and after conditional velocity integration (issue 31).

    tools/dev.sh bench position_step [--vehicle quad_x] [--out doc/images/position_step.png]

Flies the pure PhysicsWorld (1000 Hz) with the flight supervisor at 250 Hz: take-off
to 2 m, hold, then a 10 m pose step along x. "before" integrates the velocity error
always (``velocity_integration_speed_m_s`` = 1e9, the controller before issue 31);
"after" is the default (0.5 m/s). Prints the first peak, the deepest fall-back after the
first peak, the time to settle within 5 cm and the position 5 s after the command,
then holds the goal while an 8 m/s wind starts (the integrator must still remove a
steady disturbance) and prints the largest deviation and the time back within 10 cm.
Writes the two step responses as a PNG.
"""

from __future__ import annotations

import argparse
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from aerial_sim.control.controller import ControllerParams, VehicleState  # noqa: E402
from aerial_sim.control.supervisor import FlightSupervisor, SupervisorParams  # noqa: E402
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld  # noqa: E402
from aerial_sim.vehicles.multirotor import load_vehicle  # noqa: E402

PERIOD_S = 0.004
STEP_M = 10.0


def fly(world, supervisor, seconds):
    rows = []
    for _ in range(int(round(seconds / PERIOD_S))):
        truth = world.ground_truth("uav")
        world.set_controls("uav", supervisor.update(world.time_s, VehicleState.from_ground_truth(truth), PERIOD_S))
        world.step(4)
        truth = world.ground_truth("uav")
        rows.append((world.time_s, *truth.position))
    return np.array(rows)


def step_response(vehicle_name: str, controller: ControllerParams):
    world = PhysicsWorld(PhysicsParams())
    vehicle = load_vehicle(vehicle_name)
    world.add_vehicle("uav", vehicle)
    supervisor = FlightSupervisor(SupervisorParams(takeoff_altitude=2.0), controller, vehicle)
    fly(world, supervisor, 0.2)
    supervisor.arm(True)
    supervisor.takeoff()
    fly(world, supervisor, 8.0)
    start = np.array(world.ground_truth("uav").position)
    goal = start + [STEP_M, 0.0, 0.0]
    supervisor.command_pose(world.time_s, goal, 0.0)
    log = fly(world, supervisor, 15.0)
    t, x = log[:, 0] - log[0, 0], log[:, 1] - start[0]
    world.set_wind((8.0, 0.0, 0.0))
    gust = fly(world, supervisor, 20.0)
    deviation = np.linalg.norm(gust[:, 1:4] - goal, axis=1)
    return t, x, gust[:, 0] - gust[0, 0], deviation


def summary(t, x, wind_t, deviation) -> dict:
    first = int(np.argmax(x >= STEP_M - 0.1)) if np.any(x >= STEP_M - 0.1) else len(x) - 1
    turning = np.flatnonzero(np.diff(x[first:]) < 0)
    first += int(turning[0]) if len(turning) else 0  # the first peak after arriving within 10 cm
    outside = np.flatnonzero(np.abs(x - STEP_M) > 0.05)
    back = np.flatnonzero(deviation > 0.1)
    return {
        "peak_m": float(x[first]),
        "fall_back_m": float(STEP_M - x[first:].min()),
        "settle_5cm_s": float(t[outside[-1]]) if len(outside) else 0.0,
        "x_at_5s_m": float(x[np.searchsorted(t, 5.0)]),
        "wind_max_deviation_m": float(deviation.max()),
        "wind_back_within_10cm_s": float(wind_t[back[-1]]) if len(back) else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vehicle", default="quad_x")
    parser.add_argument("--out", default="doc/images/position_step.png")
    args = parser.parse_args()
    cases = {"before (always integrate)": ControllerParams(velocity_integration_speed_m_s=1e9),
             "after (default)": ControllerParams()}  # fmt: skip
    fig, axis = plt.subplots(figsize=(7, 4))
    print(f"{args.vehicle}: 10 m pose step at 2 m altitude, then an 8 m/s wind while holding the goal")
    for label, params in cases.items():
        t, x, wind_t, deviation = step_response(args.vehicle, params)
        s = summary(t, x, wind_t, deviation)
        print(f"  {label:28s} first peak {s['peak_m']:.3f} m, then falls back to {STEP_M - s['fall_back_m']:.3f} m, "
              f"within 5 cm for good after {s['settle_5cm_s']:.2f} s, x(5 s) = {s['x_at_5s_m']:.3f} m; "
              f"wind: largest deviation {s['wind_max_deviation_m']:.2f} m, back within 10 cm after "
              f"{s['wind_back_within_10cm_s']:.2f} s")  # fmt: skip
        axis.plot(t, x, label=label)
    axis.axhline(STEP_M, color="k", lw=0.6)
    axis.axhspan(STEP_M - 0.05, STEP_M + 0.05, color="0.85")
    axis.set(xlabel="time after the command (s)", ylabel="x (m)", ylim=(9.0, 10.4), xlim=(0, 15),
             title=f"{args.vehicle}: 10 m position step (grey: +-5 cm)")  # fmt: skip
    axis.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"  figure: {args.out}")


if __name__ == "__main__":
    main()
