"""What the AirSim API core needs from the rest of the simulation, as plain Python (no ROS).

The ``airsim_api`` node implements :class:`Graph` and :class:`VehicleLink` on
ROS topics and services (the link: ``nodes/_vehicle_link.py``) (the latest message of each topic, converted to the
readings below, ENU/FLU and SI as on the graph); tests implement them on an
in-process physics world. The API core never sees a ROS message.

:class:`SimClock` lets API coroutines wait on *simulation* time: the link
calls :meth:`SimClock.advance` for every ``/clock`` tick (in the event loop's
thread), and a paused simulation holds every waiter, as in AirSim.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

Vector3 = tuple[float, float, float]
Quaternion = tuple[float, float, float, float]


@dataclass(frozen=True)
class KinematicsReading:
    """Ground truth (``ground_truth/odom`` + ``ground_truth/imu``): map ENU, base_link FLU."""

    time_s: float
    position: Vector3
    orientation: Quaternion
    velocity_world: Vector3
    angular_velocity_body: Vector3
    linear_acceleration_world: Vector3 = (0.0, 0.0, 0.0)
    angular_acceleration_body: Vector3 = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class ImuReading:
    time_s: float
    orientation: Quaternion  # sensor->map (the IMU frame is taken as base_link)
    angular_velocity: Vector3  # FLU, rad/s
    linear_acceleration: Vector3  # FLU specific force, m/s^2


@dataclass(frozen=True)
class PressureReading:
    time_s: float
    pressure_pa: float


@dataclass(frozen=True)
class MagneticReading:
    time_s: float
    field_tesla: Vector3  # FLU
    covariance: tuple[float, ...]  # row-major 3x3, T^2


@dataclass(frozen=True)
class GpsReading:
    time_s: float
    latitude: float
    longitude: float
    altitude: float
    eph_m: float
    epv_m: float
    has_fix: bool
    velocity_enu: Vector3 = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class RotorReading:
    time_s: float
    speeds_rad_s: tuple[float, ...]
    thrusts_n: tuple[float, ...]


@dataclass(frozen=True)
class LidarReading:
    time_s: float
    points: np.ndarray  # (N, 3) float32, sensor frame (FLU)
    segmentation: np.ndarray  # (N,) int


@dataclass(frozen=True)
class RangeReading:
    time_s: float
    distance_m: float
    min_m: float
    max_m: float


@dataclass(frozen=True)
class BatteryReading:
    """The physics' battery pack (``battery``, sensor_msgs/BatteryState; only with ``battery_enabled``)."""

    time_s: float
    voltage_v: float  # terminal voltage under the present load
    current_a: float  # drawn (positive while discharging)
    charge: float  # state of charge, 0..1
    capacity_mah: float
    cells: int

    @property
    def consumed_mah(self) -> float:
        """Drawn from the full pack (the message carries what is left, not what was drawn since the start)."""
        return self.capacity_mah * (1.0 - self.charge)

    @property
    def remaining_percent(self) -> int:
        return int(round(100.0 * self.charge))


@dataclass(frozen=True)
class ServiceAnswer:
    success: bool
    message: str


class VehicleLink(Protocol):
    """One vehicle's topics and the flight controller's services (namespaced by the vehicle name)."""

    name: str
    vehicle: object  # aerial_sim.vehicles.multirotor.MultirotorParams
    kinematics: KinematicsReading | None
    imu: ImuReading | None
    pressure: PressureReading | None
    magnetic: MagneticReading | None
    gps: GpsReading | None
    rotors: RotorReading | None
    lidar: LidarReading | None
    distance: RangeReading | None
    #: The physics' battery pack; None without one (an ideal supply) or before its first message.
    battery: BatteryReading | None
    #: The flight controller's mode from ``/diagnostics`` (None until one arrives or without a controller).
    controller_mode: str | None
    #: The last teleport or reset the physics node applied (``set_pose/applied``): the sim time at which it
    #: was applied, the position and the orientation (None before the first).
    pose_set: tuple[float, Vector3, Quaternion] | None

    async def arm(self, arm: bool) -> ServiceAnswer: ...
    async def takeoff(self) -> ServiceAnswer: ...
    async def land(self) -> ServiceAnswer: ...
    async def reset_controller(self) -> ServiceAnswer: ...
    def send_pose(self, position: Vector3, yaw: float) -> None: ...
    def send_velocity(self, velocity_world: Vector3, yaw_rate: float) -> None: ...
    def send_attitude(self, orientation: Quaternion, altitude: float | None, throttle: float | None) -> None: ...
    def send_rates(self, rates_body: Vector3, altitude: float | None, throttle: float | None) -> None: ...
    def send_motors(self, controls: Sequence[float]) -> None: ...
    def teleport(self, position: Vector3, orientation: Quaternion) -> None: ...


class Graph(Protocol):
    """The world: its vehicles (first one = AirSim's default vehicle), clock and physics services."""

    vehicles: dict[str, VehicleLink]
    clock: "SimClock"
    paused: bool

    async def pause(self, paused: bool) -> ServiceAnswer: ...
    async def continue_for(self, seconds: float) -> None: ...
    async def reset(self) -> ServiceAnswer: ...
    def set_wind(self, wind_enu: Vector3) -> None: ...

    async def add_vehicle(self, spawn) -> ServiceAnswer:
        """A new vehicle (:class:`aerial_sim.vehicles.spawn.VehicleSpawn`) in the running world with its
        controller and sensors; answered once its link is in :attr:`vehicles` with state, or refused."""
        ...


class SimClock:
    """Simulation time as seen by the API, and sleeps measured in it.

    Ticks arrive in the ROS executor's thread (250 a second), the sleepers live in the server's event
    loop. :meth:`post` (any thread) only records the time, so :attr:`now_s` is always the newest tick,
    and says when the loop must run :meth:`wake`: a sleeper is due, or time went back. An idle server,
    or one whose clients sleep nothing, is not woken 250 times a second for nothing (a tenth of a
    core). :meth:`advance` does both in the loop's thread (in-process graphs, tests).
    """

    def __init__(self):
        self._now_s: float | None = None
        self._epoch = 0  # counts the times time went back (a reset, a restarted physics node)
        self._woken_epoch = 0  # the epoch :meth:`wake` last released the sleepers of
        self._waiters: list[tuple[float, int, asyncio.Future, int]] = []  # (due, order, future, epoch)
        self._order = itertools.count()

    @property
    def now_s(self) -> float | None:
        """The newest tick (sim s), None before the first."""
        return self._now_s

    def post(self, time_s: float) -> bool:
        """Record a tick (any thread); True when the event loop should call :meth:`wake`.

        The lost wake-up cannot happen: a sleeper is queued before :meth:`wait_until` reads the time,
        and the time is written here before the queue is read."""
        if self._now_s is not None and time_s < self._now_s:
            self._epoch += 1
        self._now_s = time_s
        waiters = self._waiters
        if not waiters:
            return False
        try:
            due = waiters[0][0]
        except IndexError:  # emptied by the loop meanwhile
            return False
        return due <= time_s + 1e-9 or self._epoch != self._woken_epoch

    def wake(self) -> None:
        """Wake (in the event loop's thread) every sleeper that is due; all those that went to sleep
        before time went back (nobody should wait for the old future)."""
        now_s = self._now_s
        if now_s is None:
            return
        epoch = self._epoch
        if epoch != self._woken_epoch:
            self._woken_epoch = epoch
            stale = [waiter for waiter in self._waiters if waiter[3] != epoch]
            if stale:
                self._waiters = [waiter for waiter in self._waiters if waiter[3] == epoch]
                heapq.heapify(self._waiters)
                for _, _, future, _ in stale:
                    if not future.done():
                        future.set_result(None)
        while self._waiters and self._waiters[0][0] <= now_s + 1e-9:
            future = heapq.heappop(self._waiters)[2]
            if not future.done():
                future.set_result(None)

    def advance(self, time_s: float) -> None:
        """A new clock tick, in the event loop's thread: :meth:`post` then :meth:`wake`."""
        self.post(time_s)
        self.wake()

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of simulation time (at least until the next tick)."""
        start = await self.started()
        await self.wait_until(start + max(seconds, 1e-9))

    async def wait_until(self, time_s: float) -> None:
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (time_s, next(self._order), future, self._epoch))
        self.wake()
        await future

    async def started(self) -> float:
        """The current time, once the first tick has arrived."""
        while self.now_s is None:
            await self.wait_until(-float("inf"))
        return self.now_s
