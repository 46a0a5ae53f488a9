"""Issue 4's flight requirements across processes (~15 s).

The physics node and the flight controller run as two separate launches in
lockstep and talk over ROS topics and services only; this test process is the
user: it calls arm/takeoff/land, publishes ``cmd_pose``/``cmd_vel`` stamped with
the latest odometry stamp, and measures ``ground_truth/odom``. It takes part in the
lockstep as a third-party node would (an announced topic of its own), so a loaded
machine cannot leave it behind the simulation. The same
requirements are checked in-process in test_control_closed_loop.py:

- a 10 m ``cmd_pose`` step settles with at most 10% overshoot;
- ``cmd_vel`` in ``map`` (ENU) and ``drone1/base_link`` (FLU) is tracked within
  0.2 m/s in steady state;
- the hexarotor (``hexa_x``) arms, takes off (altitude within 2%), holds
  (within 10 cm) and lands (ends disarmed on the ground).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import requires_ros, spin_until
from test_control_nodes import TAKEOFF_M, call

pytestmark = [requires_ros, pytest.mark.ros]

NAMESPACE = "drone1"
# Tolerances, from the issue.
ALTITUDE_TOLERANCE = 0.02 * TAKEOFF_M  # takeoff altitude within 2%
HOLD_TOLERANCE_M = 0.10  # hold within 10 cm (also the band a pose step must settle into)
MAX_OVERSHOOT = 0.10  # a pose step overshoots by at most 10%
VELOCITY_TOLERANCE_M_S = 0.2  # cmd_vel tracked within 0.2 m/s
GROUND_TOLERANCE_M = 0.03  # back on the ground after landing (as in test_control_nodes.py)

# Seconds of simulation time.
# A 10 m step at up to 8 m/s, measured across processes (2026-11-25): 9 cm from the goal after 3 s,
# back to 0.31 m at 4.5 s, then creeping in (about 3 s time constant): in the 10 cm band for good
# after 7.8-8.1 s. With 9 s the last second started in the band's last centimetre (ci39: 0.101 m).
STEP_SETTLE_S = 10.0
SETTLED_WINDOW_S = 1.0  # ...and must stay in the band over the last second
VELOCITY_TRANSIENT_S = 3.0  # steady state: after 3 s of a velocity command (as in-process)
VELOCITY_WINDOW_S = 2.0
# This process streams setpoints and reports its progress at the mission runner's rate (setpoint_rate_hz).
SETPOINT_RATE_HZ = 50.0
PROGRESS_TOPIC = "/flight_test/progress"


class Flight:
    """One vehicle flown across processes: physics + flight controller launches, probed from ``node``."""

    def __init__(self, launch, node, vehicle: str = "quad_x"):
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import PoseStamped, TwistStamped
        from nav_msgs.msg import Odometry
        from std_msgs.msg import Float64MultiArray, Header
        from std_srvs.srv import SetBool, Trigger

        from aerial_sim.nodes.ros.lockstep import announce_lockstep_participant
        from aerial_sim.nodes.ros.qos import COMMAND_QOS, LOCKSTEP_QOS

        self.node = node
        self.physics = launch(
            "physics.launch.yaml", "lockstep:=true", f"vehicle:={vehicle}", f"vehicle_name:={NAMESPACE}"
        )
        self.control = launch(
            "control.launch.yaml", "lockstep:=true", f"vehicle:={vehicle}", f"namespace:={NAMESPACE}"
        )
        self.rows: list[tuple] = []  # (t, x, y, z, vx, vy, vz, yaw): world (ENU) velocity
        self.stamp = None  # header stamp of the latest odometry
        self.on_step = None  # a setpoint stream: called at the odometry due at SETPOINT_RATE_HZ
        self.diagnostics: dict[str, str] = {}
        self.motors: list[float] | None = None
        node.create_subscription(Odometry, f"/{NAMESPACE}/ground_truth/odom", self._on_odom, LOCKSTEP_QOS, raw=True)
        # This process takes part in lockstep as any node may (doc/lockstep.md): it publishes the
        # stamp of the odometry due at SETPOINT_RATE_HZ, and the physics node does not run more than
        # its slack (0.1 s) ahead of it. Without it, a loaded machine left this process behind a
        # simulation running at many times real time, and its odometry queue overflowed (ci42).
        self._progress = node.create_publisher(Header, PROGRESS_TOPIC, LOCKSTEP_QOS)
        self._announcement = announce_lockstep_participant(node, PROGRESS_TOPIC, SETPOINT_RATE_HZ)
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, COMMAND_QOS)
        node.create_subscription(
            Float64MultiArray, f"/{NAMESPACE}/motor_commands", lambda m: setattr(self, "motors", list(m.data)),
            COMMAND_QOS,
        )
        self._arm = node.create_client(SetBool, f"/{NAMESPACE}/arm")
        self._takeoff = node.create_client(Trigger, f"/{NAMESPACE}/takeoff")
        self._land = node.create_client(Trigger, f"/{NAMESPACE}/land")
        self._pose_pub = node.create_publisher(PoseStamped, f"/{NAMESPACE}/cmd_pose", COMMAND_QOS)
        self._vel_pub = node.create_publisher(TwistStamped, f"/{NAMESPACE}/cmd_vel", COMMAND_QOS)
        self.types = SimpleNamespace(
            PoseStamped=PoseStamped, TwistStamped=TwistStamped, SetBool=SetBool, Trigger=Trigger, Header=Header
        )
        # The controller's first /diagnostics comes from its first control step, so it has a vehicle
        # state: arming before that is refused ("no vehicle state received yet"), which this process,
        # whose own odometry reader matched first, once did on a loaded machine (ci of stop 41).
        assert spin_until(node, lambda: self.rows and self.diagnostics, 30.0), self.logs()

    # -- state in --------------------------------------------------------------

    def _on_odom(self, data: bytes) -> None:
        from aerial_sim.cdr.decode import decode_odometry
        from aerial_sim.control.geometry import yaw_of
        from aerial_sim.control.mission import is_setpoint_due
        from aerial_sim.physics.rotation import rotate
        from aerial_sim.nodes.ros.stamps import stamp_from_fields

        odom = decode_odometry(data)
        velocity = rotate(odom.orientation_wxyz, odom.linear_velocity)  # twist is in base_link
        previous = self.rows[-1][0] if self.rows else -math.inf
        self.rows.append((odom.time_s, *odom.position, *velocity, yaw_of(odom.orientation_wxyz)))
        self.stamp = stamp_from_fields(odom)
        if is_setpoint_due(odom.time_s, previous, SETPOINT_RATE_HZ):
            if self.on_step is not None:
                self.on_step()
            self._progress.publish(self.types.Header(stamp=self.stamp))

    def _on_diagnostics(self, message) -> None:
        for status in message.status:
            if status.hardware_id == NAMESPACE:
                self.diagnostics.update({kv.key: kv.value for kv in status.values})

    @property
    def now(self) -> float:
        return self.rows[-1][0]

    @property
    def position(self) -> np.ndarray:
        return np.array(self.rows[-1][1:4])

    def logs(self) -> str:
        return self.physics.output() + self.control.output()

    # -- time ------------------------------------------------------------------

    def fly(self, seconds: float, on_step=None) -> np.ndarray:
        """Let ``seconds`` of simulation time pass; the odometry rows of that span as an array."""
        start = self.now
        self.on_step = on_step
        try:
            assert spin_until(self.node, lambda: self.now >= start + seconds, 15.0 + 4.0 * seconds), (
                f"simulation time stuck at {self.now:.3f} s (wanted {start + seconds:.3f} s)\n" + self.logs()
            )
        finally:
            self.on_step = None
        return np.array([row for row in self.rows if row[0] > start])

    def fly_until(self, condition, seconds: float) -> bool:
        """Spin until ``condition()`` or ``seconds`` of simulation time have passed; return the condition."""
        deadline = self.now + seconds
        spin_until(self.node, lambda: condition() or self.now >= deadline, 15.0 + 4.0 * seconds)
        return bool(condition())

    # -- requests --------------------------------------------------------------

    def request(self, name: str, data: bool | None = None) -> None:
        request = self.types.SetBool.Request(data=data) if name == "arm" else self.types.Trigger.Request()
        response = call(self.node, getattr(self, f"_{name}"), request)
        assert response.success, f"{name}: {response.message}\n{self.control.output()}"

    def command_pose(self, position, yaw: float) -> None:
        message = self.types.PoseStamped()
        message.header.stamp = self.stamp
        message.header.frame_id = "map"
        message.pose.position.x, message.pose.position.y, message.pose.position.z = map(float, position)
        message.pose.orientation.w, message.pose.orientation.z = math.cos(yaw / 2.0), math.sin(yaw / 2.0)
        self._pose_pub.publish(message)

    def command_velocity(self, linear, frame: str) -> None:
        message = self.types.TwistStamped()
        message.header.stamp = self.stamp
        message.header.frame_id = frame
        message.twist.linear.x, message.twist.linear.y, message.twist.linear.z = map(float, linear)
        self._vel_pub.publish(message)

    def take_off(self) -> float:
        """Arm and take off; the target altitude."""
        ground = self.position[2]
        self.request("arm", True)
        self.request("takeoff")
        return ground + TAKEOFF_M


def test_quad_pose_step_and_velocity_in_both_frames(launch, ros_node):
    flight = Flight(launch, ros_node, "quad_x")
    flight.take_off()
    assert flight.fly_until(lambda: flight.diagnostics.get("mode") == "hold", 10.0), (
        f"takeoff not complete: {flight.diagnostics}\n{flight.control.output()}"
    )

    # (a) A 10 m step east, also turning to heading 1 rad (for the body-frame velocity below).
    yaw = 1.0
    start = flight.position
    goal = start + (10.0, 0.0, 0.0)
    flight.command_pose(goal, yaw)
    log = flight.fly(STEP_SETTLE_S)
    progress = log[:, 1] - start[0]
    overshoot = progress.max() / 10.0 - 1.0
    assert overshoot <= MAX_OVERSHOOT, f"overshoot {100 * overshoot:.1f}%"
    settled = log[log[:, 0] > log[-1, 0] - SETTLED_WINDOW_S]
    error = np.linalg.norm(settled[:, 1:4] - goal, axis=1).max()
    assert error < HOLD_TOLERANCE_M, f"not settled: up to {error:.3f} m from the goal over the last second"
    assert flight.rows[-1][7] == pytest.approx(yaw, abs=0.05)  # precondition for the body-frame check
    assert flight.diagnostics.get("mode") == "hold"

    # (b) cmd_vel streamed at 50 Hz of sim time, stamped with the latest odometry stamp; map (ENU) first, then
    # drone1/base_link (FLU, rotated by the heading). Each command would give a different world
    # velocity if read in the other frame.
    forward, left, up = body_command = np.array((1.0, 0.8, -0.4))
    c, s = math.cos(yaw), math.sin(yaw)
    cases = [
        ("map", np.array((1.5, -0.8, 0.4)), np.array((1.5, -0.8, 0.4))),
        (f"{NAMESPACE}/base_link", body_command, np.array((c * forward - s * left, s * forward + c * left, up))),
    ]
    for frame, command, expected in cases:
        stream = lambda command=command, frame=frame: flight.command_velocity(command, frame)  # noqa: E731
        log = flight.fly(VELOCITY_TRANSIENT_S + VELOCITY_WINDOW_S, stream)
        steady = log[log[:, 0] > log[0, 0] + VELOCITY_TRANSIENT_S]
        assert len(steady) > 0.9 * 250 * VELOCITY_WINDOW_S  # odometry at 250 Hz: no samples lost
        error = np.linalg.norm(steady[:, 4:7] - expected, axis=1).max()
        assert error < VELOCITY_TOLERANCE_M_S, (
            f"cmd_vel {command} in '{frame}': world velocity off by up to {error:.3f} m/s from {expected}"
        )
        assert flight.diagnostics.get("mode") == "velocity", flight.diagnostics
    assert "cmd_vel refused" not in flight.control.output()


def test_hexa_arms_takes_off_holds_and_lands(launch, ros_node):
    flight = Flight(launch, ros_node, "hexa_x")
    assert "flight controller for 'hexa_x' (6 rotors)" in flight.control.output()
    ground = flight.position
    target = flight.take_off()
    climb = flight.fly(7.0)
    assert abs(climb[-1, 3] - target) < ALTITUDE_TOLERANCE, f"altitude {climb[-1, 3]:.3f} m, target {target:.3f} m"
    assert climb[:, 3].max() < target + ALTITUDE_TOLERANCE  # no overshoot beyond the band (as in-process)
    assert flight.diagnostics.get("mode") == "hold", flight.diagnostics
    assert len(flight.motors) == 6

    hold = flight.fly(3.0)
    assert np.abs(hold[:, 3] - target).max() < HOLD_TOLERANCE_M
    assert np.linalg.norm(hold[:, 1:3] - ground[:2], axis=1).max() < HOLD_TOLERANCE_M

    flight.request("land")
    assert flight.fly_until(lambda: flight.diagnostics.get("armed") == "false", 10.0), (
        f"not disarmed after landing: {flight.diagnostics}\n{flight.control.output()}"
    )
    assert flight.diagnostics.get("mode") == "disarmed"
    rest = flight.fly(0.5)  # stays down with the motors stopped
    assert rest[-1, 3] == pytest.approx(ground[2], abs=GROUND_TOLERANCE_M)
    assert np.linalg.norm(rest[:, 4:7], axis=1).max() < 0.05  # at rest
    assert flight.motors == [0.0] * 6
