"""Many vehicles: core vehicle-steps per second for N hovering quads, beside RotorPy and gym-pybullet-drones;
closed-loop swarms and dense swarms.

    tools/dev.sh bench swarm [--counts 1,10,100,1000,10000] [--seconds S] [--repeats R]
                             [--peers-python PATH] [--gpd-path PATH] [--peer-memory-gb G]
    tools/dev.sh bench swarm --closed-loop [--loop-count 10000] [--repeats R]
    tools/dev.sh bench swarm --dense [--dense-count 10000] [--repeats R]

``--closed-loop``: N quads under the batched flight controller with the batched IMU
(:class:`aerial_sim.control.swarm_flight.SwarmFlight`): 1 s hover on a 3 m grid, then a
formation change in 3 s (odd rows 1.5 m east, odd columns 1 m higher, all 1 m up, along
smoothstep paths, ``control.formation.assembly_setpoints``) and 1 s holding it, 4 ms control periods. Printed:
CPU ms per period (this process, one thread) for the loop and, side by side in the same process,
its parts (physics alone with the same commands held, IMU, controller), the real-time factor per
CPU second, and the old way at the same N over a few periods (each vehicle's CascadedController
and Imu, ``set_controls`` one vehicle at a time).

``--dense``: N hovering quads at 0.3 m spacing (safety spheres overlap, boxes do not) and at 3 m,
vehicle-steps per CPU second each, and the dense grid on the path before the compiled
separating-axis prefilter (every coupled pair to FCL) over one period.

Core (no ROS): N quad-X hovering at 10 m on a 3 m grid, 1000 Hz steps, driven as the
physics node drives them (``world.step(4)``: one 4 ms control period per call, motor
commands held). The world picks its path (scalar for one vehicle, batched above);
N = 1 is also shown on the batched path. Beside it, for the library choice, the same
contact-free step written as NumPy array expressions over the same arrays (checked
against the compiled kernel first).

Peers, same N, 1 ms steps, hover motor speeds, one thread: RotorPy 3's
``BatchedMultirotor`` (torch, CPU, the fixed-step ``rk4`` integrator, its faster
option) and gym-pybullet-drones' ``CtrlAviary`` (PyBullet, ``pyb_freq`` 1000 Hz,
``ctrl_freq`` 250 Hz: four physics steps per ``env.step``). They are not project
dependencies: install them in a throwaway virtual environment and pass its
interpreter, e.g.::

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install torch==2.13.0 rotorpy torchdiffeq roma \\
        pybullet gymnasium transforms3d scipy pillow "setuptools<81"
    tools/dev.sh bench swarm --peers-python /tmp/peers/bin/python --gpd-path <gym-pybullet-drones checkout>

(RotorPy's batched model imports torchdiffeq and roma without declaring them; gym-pybullet-drones
imports pkg_resources, gone from setuptools 81.) Each peer runs in its own process under that
interpreter (``--peer NAME``, this same file); a peer or an N that would take longer than
``--peer-budget`` seconds is skipped, and so is an N whose memory, extrapolated linearly from the
peer's peak resident memory at the two smaller N before it, would exceed ``--peer-memory-gb``
(default: 80 % of the memory available when the benchmark starts). Every simulator, aerial_sim and
peers alike, is timed the same way: the best of ``--repeats`` runs of the same number of steps, after
one warm-up step. Figures are wall-clock on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RATE_HZ = 1000.0
DT = 1.0 / RATE_HZ
STEPS_PER_CONTROL = 4
HEIGHT_M = 10.0
SPACING_M = 3.0


def grid(count: int) -> list[tuple[float, float, float]]:
    side = math.ceil(math.sqrt(count))
    return [(SPACING_M * (i % side), SPACING_M * (i // side), HEIGHT_M) for i in range(count)]


def best_rate(run, count: int, steps: int, repeats: int) -> float:
    """Best vehicle-steps per second over ``repeats`` runs of ``run(steps)``."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        run(steps)
        best = min(best, time.perf_counter() - start)
    return count * steps / best


def steps_for(count: int, seconds: float, rate_guess: float) -> int:
    """Steps (a multiple of the control period) that take about ``seconds`` at ``rate_guess`` vehicle-steps/s."""
    steps = int(seconds * rate_guess / count)
    return max(STEPS_PER_CONTROL, steps - steps % STEPS_PER_CONTROL)


# -- aerial_sim --------------------------------------------------------------------------------


def hover_world(count: int, stepping: str = "auto"):
    sys.path.insert(0, str(REPO / "src"))
    from aerial_sim.environment.environment import EnvironmentParams
    from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
    from aerial_sim.vehicles.multirotor import load_vehicle

    world = PhysicsWorld(PhysicsParams(rate_hz=RATE_HZ, stepping=stepping, drag_law="projected"), EnvironmentParams())
    quad = load_vehicle("quad_x")
    controls = quad.hover_controls(world.environment.air_density(HEIGHT_M), world.environment.gravity(HEIGHT_M))
    for index, position in enumerate(grid(count)):
        world.add_vehicle(f"drone{index + 1}", quad, position=position)
        world.set_controls(f"drone{index + 1}", controls, spun_up=True)
    world.step(STEPS_PER_CONTROL)  # builds the arrays, compiles (or loads) the kernels
    return world


def aerial_sim_rate(count: int, seconds: float, repeats: int, stepping: str = "auto") -> tuple[float, str]:
    world = hover_world(count, stepping)

    def run(steps):
        for _ in range(steps // STEPS_PER_CONTROL):
            world.step(STEPS_PER_CONTROL)

    rate = best_rate(run, count, steps_for(count, seconds, 1e7 if count > 1 else 3e5), repeats)
    return rate, "batched" if world.batched else "scalar"


def numpy_free_step(s: dict, c: dict, dt: float) -> None:
    """The batched kernel's contact-free step as NumPy array expressions over (N,) columns, in place.

    Same equations and order as ``batch_kernels.advance_free`` (quads only, no density-band
    stops: enough for hovering); kept here only to measure NumPy against the compiled loop.
    """
    import numpy as np

    half_dt, half_dt2 = 0.5 * dt, 0.5 * dt * dt
    px, py, pz, qw, qx, qy, qz = s["px"], s["py"], s["pz"], s["qw"], s["qx"], s["qy"], s["qz"]
    vx, vy, vz, wx, wy, wz = s["vx"], s["vy"], s["vz"], s["wx"], s["wy"], s["wz"]
    ax, ay, az, bx, by, bz = s["ax"], s["ay"], s["az"], s["bx"], s["by"], s["bz"]
    px += vx * dt + ax * half_dt2
    py += vy * dt + ay * half_dt2
    pz += vz * dt + az * half_dt2
    hx, hy, hz = wx + bx * half_dt, wy + by * half_dt, wz + bz * half_dt
    rate = np.sqrt(hx * hx + hy * hy + hz * hz)
    spinning = rate > 1e-12
    half_angle = 0.5 * rate * dt
    cw = np.where(spinning, np.cos(half_angle), 1.0)
    sn = np.where(spinning, np.sin(half_angle) / np.where(spinning, rate, 1.0), 0.0)
    dx, dy, dz = hx * sn, hy * sn, hz * sn
    nw = qw * cw - qx * dx - qy * dy - qz * dz
    nx = qw * dx + qx * cw + qy * dz - qz * dy
    ny = qw * dy - qx * dz + qy * cw + qz * dx
    nq = qw * dz + qx * dy - qy * dx + qz * cw
    inv = np.where(spinning, 1.0 / np.sqrt(nw * nw + nx * nx + ny * ny + nq * nq), 1.0)
    qw[:] = np.where(spinning, nw * inv, qw)
    qx[:] = np.where(spinning, nx * inv, qx)
    qy[:] = np.where(spinning, ny * inv, qy)
    qz[:] = np.where(spinning, nq * inv, qz)
    r00 = 1.0 - 2.0 * (qy * qy + qz * qz)
    r01 = 2.0 * (qx * qy - qw * qz)
    r02 = 2.0 * (qx * qz + qw * qy)
    r10 = 2.0 * (qx * qy + qw * qz)
    r11 = 1.0 - 2.0 * (qx * qx + qz * qz)
    r12 = 2.0 * (qy * qz - qw * qx)
    r20 = 2.0 * (qx * qz - qw * qy)
    r21 = 2.0 * (qy * qz + qw * qx)
    r22 = 1.0 - 2.0 * (qx * qx + qy * qy)
    rho = c["anchor_rho"] + c["slope"] * (pz - c["anchor_up"])
    g = c["g0"] + pz * (c["g1"] + pz * c["g2"])
    u = s["u"]
    u += c["gain"] * (c["cmd"] - u)
    force = (u[:, :, None] * c["unit"]).sum(axis=1)  # (N, 6) per unit density
    fx, fy, fz = force[:, 0] * rho, force[:, 1] * rho, force[:, 2] * rho
    tx, ty, tz = force[:, 3] * rho, force[:, 4] * rho, force[:, 5] * rho
    ux, uy, uz = vx + ax * dt, vy + ay * dt, vz + az * dt
    ox, oy, oz = wx + bx * dt, wy + by * dt, wz + bz * dt
    lx = r00 * ux + r10 * uy + r20 * uz
    ly = r01 * ux + r11 * uy + r21 * uz
    lz = r02 * ux + r12 * uy + r22 * uz
    drag = c["lin_c"] * rho * (c["area_x"] * np.abs(lx) + c["area_y"] * np.abs(ly) + c["area_z"] * np.abs(lz))
    fx, fy, fz = fx + drag * lx, fy + drag * ly, fz + drag * lz
    tx = tx - rho * c["kdx"] * ox * np.abs(ox)
    ty = ty - rho * c["kdy"] * oy * np.abs(oy)
    tz = tz - rho * c["kdz"] * oz * np.abs(oz)
    inv_mass = c["inv_mass"]
    nax = (r00 * fx + r01 * fy + r02 * fz) * inv_mass
    nay = (r10 * fx + r11 * fy + r12 * fz) * inv_mass
    naz = (r20 * fx + r21 * fy + r22 * fz) * inv_mass - g
    vx += (ax + nax) * half_dt
    vy += (ay + nay) * half_dt
    vz += (az + naz) * half_dt
    ax[:], ay[:], az[:] = nax, nay, naz
    i, j = c["inertia"], c["inverse_inertia"]  # diagonal (quad_x)
    lx = i[0] * wx + s["tx"] * half_dt
    ly = i[1] * wy + s["ty"] * half_dt
    lz = i[2] * wz + s["tz"] * half_dt
    cx, cy, cz = dy * lz - dz * ly, dz * lx - dx * lz, dx * ly - dy * lx
    lx = lx + 2.0 * (dy * cz - dz * cy - cw * cx) + tx * half_dt
    ly = ly + 2.0 * (dz * cx - dx * cz - cw * cy) + ty * half_dt
    lz = lz + 2.0 * (dx * cy - dy * cx - cw * cz) + tz * half_dt
    wx[:], wy[:], wz[:] = j[0] * lx, j[1] * ly, j[2] * lz
    s["tx"][:], s["ty"][:], s["tz"][:] = tx, ty, tz
    lx, ly, lz = i[0] * wx, i[1] * wy, i[2] * wz
    bx[:] = j[0] * (tx - (wy * lz - wz * ly))
    by[:] = j[1] * (ty - (wz * lx - wx * lz))
    bz[:] = j[2] * (tz - (wx * ly - wy * lx))


def numpy_arrays(world):
    """The world's batched arrays as the (N,) columns :func:`numpy_free_step` works on."""
    from aerial_sim.physics import batch_kernels as k

    batch = world._ensure_batch()
    state, const = batch.state, batch.const
    names = ["px", "py", "pz", "qw", "qx", "qy", "qz", "vx", "vy", "vz", "wx", "wy", "wz", "ax", "ay", "az",
             "bx", "by", "bz", "tx", "ty", "tz"]
    s = {name: state[:, column].copy() for column, name in enumerate(names)}
    s["u"] = batch.filtered.copy()
    diagonal = [0, 4, 8]
    c = {
        "anchor_up": state[:, k.ANCHOR_UP], "anchor_rho": state[:, k.ANCHOR_UP + 1], "slope": state[:, k.ANCHOR_UP + 2],
        "g0": batch._gravity[0], "g1": batch._gravity[1], "g2": batch._gravity[2],
        "gain": batch.rotor_const[:, :, 0], "cmd": batch.commands, "unit": batch.rotor_const[:, :, 1:],
        "lin_c": const[:, k.LIN_DRAG], "area_x": const[:, k.AREAS], "area_y": const[:, k.AREAS + 1],
        "area_z": const[:, k.AREAS + 2], "kdx": const[:, k.ANG_DRAG], "kdy": const[:, k.ANG_DRAG + 1],
        "kdz": const[:, k.ANG_DRAG + 2], "inv_mass": const[:, k.INV_MASS],
        "inertia": [const[:, k.INERTIA + d] for d in diagonal],
        "inverse_inertia": [const[:, k.INV_INERTIA + d] for d in diagonal],
    }
    return s, c


def numpy_rate(count: int, seconds: float, repeats: int) -> float:
    """The NumPy version of the step on the same arrays; first checked against the compiled kernel."""
    import numpy as np

    world = hover_world(count, "batched")
    world.set_kinematics("drone1", angular_velocity_body=(0.3, -0.2, 0.1))  # exercise the rotation terms
    s, c = numpy_arrays(world)
    for _ in range(100):
        numpy_free_step(s, c, DT)
    world.step(100)
    positions, _ = world.poses()
    error = np.abs(np.stack([s["px"], s["py"], s["pz"]], axis=1) - positions).max()
    assert error < 1e-9, f"NumPy step disagrees with the kernel by {error:g} m"

    def run(steps):
        for _ in range(steps):
            numpy_free_step(s, c, DT)

    return best_rate(run, count, steps_for(count, seconds, 2e6), repeats)


# -- closed-loop and dense swarms ---------------------------------------------------------------


def cpu_per_call(run, calls: int, repeats: int) -> float:
    """Best over ``repeats`` of this process's CPU seconds per call of ``run`` (``calls`` calls)."""
    best = math.inf
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(calls):
            run()
        best = min(best, (time.process_time() - start) / calls)
    return best


def closed_loop_main(count: int, repeats: int) -> int:
    import numpy as np

    sys.path.insert(0, str(REPO / "src"))
    from aerial_sim.control.controller import CascadedController, ControllerParams, Setpoint, VehicleState
    from aerial_sim.control.formation import assembly_setpoints
    from aerial_sim.control.swarm_flight import SwarmFlight
    from aerial_sim.sensors.imu import Imu, ImuParams

    world = hover_world(count, "batched")
    starts = np.array(grid(count))
    side = math.ceil(math.sqrt(count))
    column, row = np.arange(count) % side, np.arange(count) // side
    # the new formation: odd rows 1.5 m east, odd columns 1 m higher, everyone 1 m up (moves of at most 2.5 m)
    goals = starts + np.stack([1.5 * (row % 2), np.zeros(count), 1.0 + (column % 2)], axis=1)
    build = time.process_time()
    flight = SwarmFlight(world)
    build = time.process_time() - build
    period_s = STEPS_PER_CONTROL * DT
    hover_periods, move_periods, hold_periods = int(1.0 / period_s), int(3.0 / period_s), int(1.0 / period_s)
    setpoints = ([starts] * hover_periods + [assembly_setpoints(starts, goals, (k + 1) * period_s, 3.0)
                                             for k in range(move_periods)] + [goals] * hold_periods)
    flight.period(starts)  # compiles (or loads) the kernels
    cursor = iter(range(10**9))

    def fly():
        flight.period(setpoints[min(next(cursor), len(setpoints) - 1)])

    calls = len(setpoints) // max(1, repeats)
    loop = cpu_per_call(fly, calls, 1)
    for _ in range(repeats - 1):
        loop = min(loop, cpu_per_call(fly, calls, 1))
    truth = world.truth_arrays()
    formation_error = np.linalg.norm(truth["position"] - setpoints[-1], axis=1)
    physics = cpu_per_call(lambda: world.step(STEPS_PER_CONTROL), 50, repeats)
    truth_cost = cpu_per_call(world.truth_arrays, 50, repeats)
    zeros = np.zeros((count, 3))
    imu = cpu_per_call(lambda: flight.imu.step(period_s, truth["angular_velocity_body"],
                                               truth["specific_force_body"], zeros), 50, repeats)
    z3, z1 = np.zeros((count, 3)), np.zeros(count)
    control = cpu_per_call(lambda: flight.controller.update(truth["position"], truth["orientation"],
                                                            truth["velocity_world"], flight.imu.angular_velocity,
                                                            starts, z3, z3, z1, z1, period_s), 50, repeats)
    # the old way, a few periods: each vehicle's own controller and IMU, set_controls one by one
    names = world.vehicle_names()
    controllers = [CascadedController(ControllerParams(), world.body(n).vehicle) for n in names]
    imus = [Imu(ImuParams(rate_hz=1.0 / period_s, seed=i)) for i in range(count)]

    def old_period():
        for i, name in enumerate(names):
            ground = world.ground_truth(name)
            gyro = imus[i].step(period_s, ground).angular_velocity
            state = VehicleState(ground.position, ground.orientation, ground.velocity_world, gyro)
            out = controllers[i].update(state, Setpoint(tuple(starts[i])), period_s)
            world.set_controls(name, out.controls)
        world.step(STEPS_PER_CONTROL)

    old = cpu_per_call(old_period, 3 if count > 1000 else 20, 1)
    print(f"Closed-loop swarm, N = {count} quads, 4 ms control periods, 1000 Hz physics; CPU of this process "
          f"(one thread) per period; shared machine, best of {repeats}\n")
    print(f"  batched loop (SwarmFlight): {loop * 1e3:8.3f} ms/period  = {period_s / loop:6.2f} x real time per CPU second")
    print(f"    physics alone (world.step(4), commands held): {physics * 1e3:7.3f} ms")
    print(f"    ground truth as arrays:                       {truth_cost * 1e3:7.3f} ms")
    print(f"    IMU (BatchedImu, fast noise):                 {imu * 1e3:7.3f} ms")
    print(f"    controller (BatchedController):               {control * 1e3:7.3f} ms")
    print(f"    loop / physics alone: {loop / physics:5.2f}")
    print(f"  per-vehicle loop (CascadedController + Imu + set_controls per vehicle): {old * 1e3:9.1f} ms/period "
          f"= {period_s / old:6.3f} x real time ({old / loop:.0f}x the batched loop)")
    print(f"  set-up of the batched controller and IMU: {build:.2f} s CPU")
    print(f"  1 s after the formation change: worst distance to the slot {formation_error.max():.3f} m, "
          f"mean {formation_error.mean():.3f} m")
    return 0


def dense_main(count: int, repeats: int) -> int:
    sys.path.insert(0, str(REPO / "src"))
    from aerial_sim.physics import batched

    global SPACING_M
    rates = {}
    for spacing in (3.0, 0.3):
        SPACING_M = spacing
        world = hover_world(count, "batched")
        periods = 25
        cpu = cpu_per_call(lambda: world.step(STEPS_PER_CONTROL), periods, repeats)
        rates[spacing] = count * STEPS_PER_CONTROL / cpu
        if spacing == 0.3:
            batched.NARROW_PREFILTER = False
            try:
                old = cpu_per_call(lambda: world.step(STEPS_PER_CONTROL), 1, 1)
            finally:
                batched.NARROW_PREFILTER = True
            collisions = len(world.take_collisions())
    SPACING_M = 3.0
    print(f"Dense against sparse swarms, N = {count} hovering quads (box 0.18 x 0.11 x 0.04 m), vehicle-steps per "
          f"CPU second of this process, best of {repeats}; shared machine\n")
    print(f"  3 m spacing (no safety spheres overlap):        {rates[3.0] / 1e6:8.3f} M")
    print(f"  0.3 m spacing (every sphere overlaps 4 others): {rates[0.3] / 1e6:8.3f} M  "
          f"(sparse / dense = {rates[3.0] / rates[0.3]:.2f})")
    print(f"  0.3 m spacing, every coupled pair to FCL (before the prefilter), one period: "
          f"{count * STEPS_PER_CONTROL / old / 1e6:8.4f} M ({old * rates[0.3] / (count * STEPS_PER_CONTROL):.0f}x slower)")
    print(f"  collisions recorded: {collisions} (the boxes do not touch)")
    return 0


# -- peers (run in their own process, under --peers-python) ------------------------------------


def rotorpy_peer(count: int, steps: int, repeats: int) -> float:
    import numpy as np
    import torch
    from rotorpy.vehicles.crazyflie_params import quad_params
    from rotorpy.vehicles.multirotor import BatchedMultirotor, BatchedMultirotorParams

    torch.set_num_threads(1)
    device = torch.device("cpu")
    params = BatchedMultirotorParams([quad_params] * count, count, device)
    hover_speed = math.sqrt(quad_params["mass"] * 9.81 / (quad_params["num_rotors"] * quad_params["k_eta"]))
    positions = torch.tensor(grid(count), dtype=torch.double)
    state = {
        "x": positions, "v": torch.zeros(count, 3, dtype=torch.double),
        "q": torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=torch.double).repeat(count, 1),
        "w": torch.zeros(count, 3, dtype=torch.double), "wind": torch.zeros(count, 3, dtype=torch.double),
        "rotor_speeds": torch.full((count, 4), hover_speed, dtype=torch.double),
    }
    vehicles = BatchedMultirotor(params, count, state, device, integrator="rk4")
    control = {"cmd_motor_speeds": torch.full((count, 4), hover_speed, dtype=torch.double)}
    idxs = np.arange(count)
    state = vehicles.step(state, control, DT, idxs)  # warm-up

    def run(steps):
        nonlocal state
        for _ in range(steps):
            state = vehicles.step(state, control, DT, idxs)

    return best_rate(run, count, steps, repeats)


def gpd_peer(count: int, steps: int, repeats: int) -> float:
    import numpy as np
    from gym_pybullet_drones.envs.CtrlAviary import CtrlAviary
    from gym_pybullet_drones.utils.enums import DroneModel, Physics

    env = CtrlAviary(drone_model=DroneModel.CF2X, num_drones=count, initial_xyzs=np.array(grid(count)),
                     physics=Physics.PYB, pyb_freq=int(RATE_HZ), ctrl_freq=int(RATE_HZ / STEPS_PER_CONTROL),
                     gui=False, record=False, obstacles=False, user_debug_gui=False)
    env.reset(seed=0)
    action = np.full((count, 4), env.HOVER_RPM)
    env.step(action)  # warm-up
    calls = max(1, steps // STEPS_PER_CONTROL)

    def run(steps):
        for _ in range(steps // STEPS_PER_CONTROL):
            env.step(action)

    rate = best_rate(run, count, calls * STEPS_PER_CONTROL, repeats)
    env.close()
    return rate


PEERS = {"rotorpy": rotorpy_peer, "gpd": gpd_peer}


def available_memory_gb() -> float:
    """MemAvailable of /proc/meminfo, GB (inf where unknown)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1e6
    except OSError:
        pass
    return math.inf


def predicted_memory_gb(samples: list[tuple[int, float]], count: int) -> float | None:
    """Peak memory at ``count`` vehicles, linear through the last two (N, GB) measurements."""
    if len(samples) < 2:
        return None
    (n0, m0), (n1, m1) = samples[-2], samples[-1]
    slope = max((m1 - m0) / (n1 - n0), 0.0) if n1 != n0 else 0.0
    return m1 + slope * (count - n1)


def run_peer(name: str, python: str, count: int, seconds: float, budget_s: float, guess: float,
             extra_path: str | None, repeats: int = 1, memory: list | None = None,
             memory_cap_gb: float = math.inf) -> float | None:
    """One peer measurement in a child process; None when skipped or failed (reason printed).
    ``memory``: this peer's (N, peak GB) so far, extended here; an N predicted above the cap is skipped."""
    memory = [] if memory is None else memory
    predicted = predicted_memory_gb(memory, count)
    if predicted is not None and predicted > memory_cap_gb:
        print(f"    {name} N={count}: skipped, would need about {predicted:.1f} GB (cap {memory_cap_gb:.1f} GB)",
              flush=True)
        return None
    steps = steps_for(count, seconds, guess)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    if extra_path:
        env["PYTHONPATH"] = extra_path
    command = [python, str(Path(__file__).resolve()), "--peer", name, "--count", str(count), "--steps", str(steps),
               "--repeats", str(repeats)]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=budget_s * repeats, env=env)
    except subprocess.TimeoutExpired:
        print(f"    {name} N={count}: over the {budget_s:g} s budget, skipped", flush=True)
        return None
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        reason = (result.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"    {name} N={count}: failed ({reason})", flush=True)
        return None
    answer = json.loads(lines[-1])
    memory.append((count, answer.get("peak_memory_gb", 0.0)))
    return answer["vehicle_steps_per_s"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--counts", default="1,10,100,1000,10000")
    parser.add_argument("--seconds", type=float, default=1.0, help="wall time per measurement (about)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--peers-python", help="interpreter of a virtual environment with the peers installed")
    parser.add_argument("--gpd-path", help="a gym-pybullet-drones checkout (it is not on PyPI)")
    parser.add_argument("--peer-budget", type=float, default=120.0, help="seconds one peer measurement may take")
    parser.add_argument("--peer-memory-gb", type=float, default=None,
                        help="skip a peer's N predicted to need more (default: 80%% of MemAvailable)")
    parser.add_argument("--closed-loop", action="store_true", help="the closed-loop swarm flight (see above)")
    parser.add_argument("--loop-count", type=int, default=10000)
    parser.add_argument("--dense", action="store_true", help="dense against sparse swarms (see above)")
    parser.add_argument("--dense-count", type=int, default=10000)
    parser.add_argument("--peer", choices=sorted(PEERS), help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        import resource

        rate = PEERS[args.peer](args.count, args.steps, args.repeats)
        peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB on Linux
        print(json.dumps({"vehicle_steps_per_s": rate, "peak_memory_gb": peak_gb}))
        return 0
    if args.closed_loop:
        return closed_loop_main(args.loop_count, args.repeats)
    if args.dense:
        return dense_main(args.dense_count, args.repeats)

    counts = [int(c) for c in args.counts.split(",")]
    print("Core: vehicle-steps per second (1000 Hz steps; x real time = vehicle-steps/s / (N x 1000)); "
          "shared machine, best of repeats\n")
    header = f"{'N':>6} | {'aerial_sim':>22} | {'NumPy (same step)':>17} | {'RotorPy batched':>15} | {'gym-pybullet-drones':>19}"
    print(header)
    print("-" * len(header))
    peers_dead = set()
    memory_cap = args.peer_memory_gb if args.peer_memory_gb is not None else 0.8 * available_memory_gb()
    peer_memory = {"rotorpy": [], "gpd": []}
    for count in counts:
        rate, path = aerial_sim_rate(count, args.seconds, args.repeats)
        cells = [f"{rate / 1e6:8.3f} M ({path})"]
        if count == 1:
            batched, _ = aerial_sim_rate(1, args.seconds, args.repeats, "batched")
            cells[0] += f" / {batched / 1e6:.3f} M batched"
        cells.append(f"{numpy_rate(count, args.seconds, args.repeats) / 1e6:8.3f} M")
        for peer, guess, path_extra in (("rotorpy", 2e4, None), ("gpd", 2e4, args.gpd_path)):
            figure = None
            if args.peers_python and peer not in peers_dead and (peer != "gpd" or args.gpd_path):
                figure = run_peer(peer, args.peers_python, count, args.seconds, args.peer_budget, guess, path_extra,
                                  args.repeats, peer_memory[peer], memory_cap)
                if figure is None:
                    peers_dead.add(peer)  # a larger N will not fit either
            cells.append(f"{figure / 1e6:8.4f} M" if figure else "—")
        print(f"{count:>6} | {cells[0]:>22} | {cells[1]:>17} | {cells[2]:>15} | {cells[3]:>19}", flush=True)
    print("\naerial_sim: world.step(4) per 4 ms control period, the path the world picks "
          "(one vehicle: scalar; more: batched arrays, numba).")
    if not args.peers_python:
        print("Peers not measured: pass --peers-python (see the module docstring).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
