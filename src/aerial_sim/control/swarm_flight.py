"""Closed-loop swarms in the core (no ROS): physics, IMU and flight controller, all batched.

One control period (``steps_per_period`` physics steps, 4 ms at 1000 Hz) per :meth:`SwarmFlight.period`:

1. every vehicle's ground truth as arrays (``PhysicsWorld.truth_arrays``);
2. every vehicle's IMU sample (:class:`~aerial_sim.sensors.batched_imu.BatchedImu`, the model of
   :mod:`aerial_sim.sensors.imu`, one seed per vehicle);
3. the cascade for every vehicle (:class:`~aerial_sim.control.batched_controller.BatchedController`)
   on the true position, attitude and velocity and -- the firmware's choice -- the gyro's body rates;
4. every vehicle's rotor inputs at once (``PhysicsWorld.set_all_controls``), then the physics steps.

No Python runs per vehicle. ``tools/dev.sh bench swarm --closed-loop`` measures it against the
same loop built from the per-vehicle controller and IMU; ``test/test_swarm_closed_loop.py`` flies
both and compares them.
"""

from __future__ import annotations

import numpy as np

from aerial_sim.control.batched_controller import BatchedController
from aerial_sim.control.controller import ControllerParams
from aerial_sim.sensors.batched_imu import BatchedImu
from aerial_sim.sensors.imu import ImuParams


class SwarmFlight:
    """A closed-loop swarm over a batched :class:`~aerial_sim.physics.world.PhysicsWorld` (module docstring).

    ``imu_seeds``: one per vehicle (default: 0, 1, 2, ... in vehicle order). ``rates_from_imu``:
    the rate loop flies on the gyro (needs an IMU mounted without rotation) or on ground truth.
    """

    def __init__(self, world, controller_params: ControllerParams = ControllerParams(),
                 imu_params: ImuParams | None = None, imu_seeds=None, steps_per_period: int = 4,
                 rates_from_imu: bool = True):
        names = world.vehicle_names()
        if not names:
            raise ValueError("a swarm flight needs vehicles in the world")
        if steps_per_period < 1:
            raise ValueError(f"steps_per_period must be >= 1, got {steps_per_period!r}")
        self.world = world
        self.names = names
        self.steps_per_period = int(steps_per_period)
        self.dt = self.steps_per_period * world.params.dt
        self.controller = BatchedController(controller_params, [world.body(name).vehicle for name in names])
        imu_params = imu_params if imu_params is not None else ImuParams(rate_hz=1.0 / self.dt)
        if rates_from_imu and not np.allclose(imu_params.mount.rotation, np.eye(3)):
            raise ValueError("rates_from_imu needs an IMU mounted without rotation (mount.rpy_rad zero)")
        seeds = range(len(names)) if imu_seeds is None else imu_seeds
        self.imu = BatchedImu(imu_params, seeds)
        self.rates_from_imu = rates_from_imu
        count = len(names)
        # omitted setpoint parts: one row of zeros seen N times (stride 0), which the kernels read from cache
        self._zeros3 = np.broadcast_to(np.zeros(3), (count, 3))
        self._zeros = np.broadcast_to(np.zeros(1), (count,))
        for row, name in enumerate(names):  # a row whose first setpoint is unusable keeps what it has
            commands = world.body(name).rotors.commands
            self.controller.controls[row, : len(commands)] = commands

    def period(self, setpoint_position, yaw=None, velocity_ff=None, acceleration_ff=None, yaw_rate=None,
               position_mode=None) -> np.ndarray:
        """Fly one control period towards the setpoints ((N, 3) / (N,) arrays, as
        ``BatchedController.update``; omitted ones are zero); returns the rotor inputs used."""
        truth = self.world.truth_arrays()
        gyro, _ = self.imu.step(self.dt, truth["angular_velocity_body"], truth["specific_force_body"],
                                truth["angular_acceleration_body"])
        rates = gyro if self.rates_from_imu else truth["angular_velocity_body"]
        zeros3, zeros = self._zeros3, self._zeros
        controls = self.controller.update(
            truth["position"], truth["orientation"], truth["velocity_world"], rates, setpoint_position,
            zeros3 if velocity_ff is None else velocity_ff, zeros3 if acceleration_ff is None else acceleration_ff,
            zeros if yaw is None else yaw, zeros if yaw_rate is None else yaw_rate, self.dt, position_mode)
        self.world.set_all_controls(controls)
        self.world.step(self.steps_per_period)
        return controls


def warm_up() -> None:
    """Compile (or load from the cache) every kernel a swarm flight runs, for the arrays it is given: the
    batched controller and IMU on views of the world's state (what :meth:`SwarmFlight.period` passes) and on
    arrays of their own (what a caller of ``BatchedController.update`` or ``BatchedImu.step`` passes: numba
    compiles each memory layout apart), the IMU's compiled noise, and the batched physics' ground truth,
    rotor inputs and contact prefilter (two quads 0.2 m apart touch). ``aerial_sim precompile`` runs it: with
    no cache, the first swarm flight of a process spent about 12 CPU s compiling these (60 s of a CI worker)."""
    from aerial_sim.environment.environment import EnvironmentParams
    from aerial_sim.physics.world import PhysicsParams, PhysicsWorld
    from aerial_sim.vehicles.multirotor import load_vehicle

    quad = load_vehicle("quad_x")
    world = PhysicsWorld(PhysicsParams(stepping="batched"), EnvironmentParams())
    hover = quad.hover_controls(world.environment.air_density(10.0), world.environment.gravity(10.0))
    for index in range(2):
        world.add_vehicle(f"vehicle{index}", quad, position=(0.2 * index, 0.0, 10.0))
        world.set_controls(f"vehicle{index}", hover, spun_up=True)
    flight = SwarmFlight(world)
    start = world.truth_arrays()["position"].copy()
    for _ in range(3):
        flight.period(start)
    zeros3, zeros = np.zeros((2, 3)), np.zeros(2)
    level = np.tile([1.0, 0.0, 0.0, 0.0], (2, 1))
    flight.controller.update(start, level, zeros3, zeros3, start, zeros3, zeros3, zeros, zeros, flight.dt)
    flight.imu.step(flight.dt, zeros3, zeros3, zeros3)
