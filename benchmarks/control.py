"""Flight-control benchmark: controller cost per update, and closed-loop speed on the square mission.

    tools/dev.sh bench control [--vehicle quad_x] [--mission square_5m]

Prints (1) the wall time of one controller update (cascade + mixer, 250 Hz in
the node) and of one mixer call, and (2) the real-time factor of the pure
PhysicsWorld (1000 Hz) plus controller flying the mission in-process, with the
Hausdorff distance and RMS cross-track error of the flown track. Timings are
noisy on a shared machine: the best of a few repeats is reported.
"""

from __future__ import annotations

import argparse
import time

from aerial_sim.control.controller import ControllerParams, Setpoint, VehicleState
from aerial_sim.control.mission import load_mission, pattern_path
from aerial_sim.control.supervisor import FlightSupervisor, SupervisorParams
from aerial_sim.control.track import compare_tracks
from aerial_sim.control.trajectory import PathFollower, Trajectory
from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
from aerial_sim.vehicles.multirotor import load_vehicle

PERIOD_S = 0.004


def best_of(repeats: int, function) -> float:
    return min(function() for _ in range(repeats))


def controller_cost(vehicle, updates: int = 5000) -> tuple[float, float]:
    supervisor = FlightSupervisor(SupervisorParams(), ControllerParams(), vehicle)
    controller, mixer = supervisor.controller, supervisor.controller.mixer
    state = VehicleState((0.1, -0.2, 1.9), (0.999, 0.01, -0.02, 0.03), (0.5, 0.1, -0.1), (0.1, -0.05, 0.02))
    setpoint = Setpoint(position=(1.0, 0.0, 2.0), yaw=0.2)

    def run_controller():
        start = time.perf_counter()
        for _ in range(updates):
            controller.update(state, setpoint, PERIOD_S)
        return (time.perf_counter() - start) / updates

    def run_mixer():
        start = time.perf_counter()
        for _ in range(updates):
            mixer.mix(10.0, (0.05, -0.03, 0.01))
        return (time.perf_counter() - start) / updates

    return best_of(3, run_controller), best_of(3, run_mixer)


def closed_loop(vehicle, mission_name: str):
    mission = load_mission(mission_name)
    world = PhysicsWorld(PhysicsParams())
    world.add_vehicle("uav", vehicle)
    fc = FlightSupervisor(SupervisorParams(takeoff_altitude=mission.takeoff_altitude_m), ControllerParams(), vehicle)

    def fly(seconds, before=None):
        rows = []
        for _ in range(int(round(seconds / PERIOD_S))):
            state = VehicleState.from_ground_truth(world.ground_truth("uav"))
            if before:
                before(world.time_s, state)
            world.set_controls("uav", fc.update(world.time_s, state, PERIOD_S))
            world.step(4)
            rows.append(world.ground_truth("uav").position)
        return rows

    started = time.perf_counter()
    fly(0.2)
    fc.arm(True)
    fc.takeoff()
    fly(6.0)
    start_point = world.ground_truth("uav").position
    path = pattern_path(mission, start_point)
    trajectory = Trajectory(path, mission.speed_m_s, mission.acceleration_m_s2)
    follower = PathFollower(trajectory, mission.tracking_gain, mission.max_correction_m_s, mission.lookahead_s)
    t0 = world.time_s

    def follow(t, state):
        fc.command_velocity(t, follower.command(t - t0, state.position)[0], 0.0)

    track = fly(trajectory.duration_s + 1.0, follow)
    fc.land()
    fly(8.0)
    wall = time.perf_counter() - started
    return world.time_s / wall, world.time_s, compare_tracks(track, path), mission


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vehicle", default="quad_x")
    parser.add_argument("--mission", default="square_5m")
    options = parser.parse_args()
    vehicle = load_vehicle(options.vehicle)
    controller_s, mixer_s = controller_cost(vehicle)
    print(f"vehicle {vehicle.name} ({len(vehicle.rotors)} rotors)")
    print(f"controller update (cascade + mixer): {controller_s * 1e6:8.1f} us  "
          f"({controller_s / PERIOD_S * 100:.1f}% of a 4 ms control period)")
    print(f"mixer alone:                         {mixer_s * 1e6:8.1f} us")
    factor, sim_s, metrics, mission = closed_loop(vehicle, options.mission)
    print(f"closed loop, mission {mission.name} at {mission.speed_m_s:g} m/s (physics 1000 Hz + control 250 Hz, "
          f"in-process): {sim_s:.1f} s simulated, real-time factor {factor:.1f}x")
    print(f"track vs commanded path: Hausdorff {metrics.hausdorff_m:.3f} m, RMS cross-track "
          f"{metrics.rms_cross_track_m:.3f} m")


if __name__ == "__main__":
    main()
