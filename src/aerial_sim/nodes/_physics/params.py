"""The physics node's ROS parameters (:class:`PhysicsNodeParams`), checked as a frozen dataclass."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from aerial_sim.config import require, require_non_negative, require_positive
from aerial_sim.control.controller import STABLE_STATE_RATE_HZ
from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.environment.wind import WindParams, parse_gusts
from aerial_sim.physics.battery import BatteryParams
from aerial_sim.physics.lockstep import parse_participants
from aerial_sim.physics.start_gate import parse_gate_nodes
from aerial_sim.nodes.ros.qos import LOCKSTEP_QOS
from aerial_sim.vehicles.fleet import FleetSelection, require_vehicle_names


@dataclass(frozen=True)
class PhysicsWindParams:
    """The physics node's ``wind.*`` parameters: the wind field around the mean ``wind_enu_m_s``
    (aerial_sim.environment.wind; /physics/wind and simSetWind change the mean at run time)."""

    turbulence: Literal["none", "light", "moderate", "severe"] = "none"
    turbulence_model: Literal["dryden", "von_karman"] = "dryden"
    shear: Literal["none", "power_law", "log_law"] = "none"
    reference_height_m: float = 6.096
    power_law_exponent: float = 1.0 / 7.0
    roughness_length_m: float = 0.0457
    #: 1 - cos gusts: entries 'start_s rise_s hold_s fall_s east north up' separated by ';'.
    gusts: str = ""
    seed: int = 0
    min_airspeed_m_s: float = 1.0
    update_period_s: float = 0.02

    def __post_init__(self):
        self.field_params((0.0, 0.0, 0.0))  # a bad value is a ParamsError naming it

    def field_params(self, mean_enu_m_s) -> WindParams:
        return WindParams(mean_enu_m_s=tuple(mean_enu_m_s), shear=self.shear, reference_height_m=self.reference_height_m,
                          power_law_exponent=self.power_law_exponent, roughness_length_m=self.roughness_length_m,
                          turbulence=self.turbulence, turbulence_model=self.turbulence_model,
                          min_airspeed_m_s=self.min_airspeed_m_s,
                          gusts=parse_gusts(self.gusts), seed=self.seed, update_period_s=self.update_period_s)


@dataclass(frozen=True)
class PhysicsNodeParams:
    """ROS parameters of the physics node (defaults here only)."""

    vehicle_names: tuple[str, ...] = ("drone1",)
    vehicle_types: tuple[str, ...] = ("quad_x",)
    #: x, y, z (ENU, m) of each vehicle in turn.
    initial_positions: tuple[float, ...] = (0.0, 0.0, 0.0)
    initial_yaws_rad: tuple[float, ...] = (0.0,)
    scene: str = "empty"
    rate_hz: float = 1000.0
    publish_rate_hz: float = 250.0
    clock_speed: float = 1.0
    lockstep: bool = False
    linear_drag_enabled: bool = True
    wrench_timeout_s: float = 0.5
    #: Lockstep: the first step waits until the subscribers to /clock and ground truth have not
    #: changed for this long (wall s), at most lockstep_settle_max_s: every node joins at t = 0.
    lockstep_settle_s: float = 1.5
    lockstep_settle_max_s: float = 20.0
    #: Lockstep: more outputs to wait for, besides those announced on /lockstep/participants:
    #: entries TOPIC@RATE_HZ[:FIRST_S[:LAG_S]] separated by spaces or commas (aerial_sim.physics.lockstep),
    #: e.g. a real driver's "/drone1/realsense/depth/image_rect_raw@30".
    lockstep_participants: str = ""
    #: Lockstep: how far (sim s) the clock may run ahead of a participant's due output before it
    #: waits for it. Each output must still come, in order and none lost (reliable, depth
    #: LOCKSTEP_QOS), and outputs depend only on their inputs, so bags are the same for any value;
    #: the slack lets sensors and the camera work while physics steps on instead of one after the
    #: other. 0 = wait at every due time. Motor commands are awaited every period regardless. Keep 0
    #: for a participant whose output feeds back into control (attitude_source: imu).
    lockstep_slack_s: float = 0.1
    #: Lockstep: a participant that holds the clock this long (wall s) without a new output is dropped,
    #: with an ERROR in the log and on /diagnostics, and the clock goes on without it (issue 32: one
    #: forged entry froze a run for good). 0 = wait for ever. A slow participant is not silent: each
    #: new output starts the wait again.
    lockstep_timeout_s: float = 20.0
    #: Largest external force / torque a rotor_drag/wrench message may apply; larger ones are refused.
    max_external_force_n: float = 50.0
    max_external_torque_nm: float = 5.0
    #: Motor commands older than this, in sim and in wall time, cut the motors (failsafe); 0 disables.
    #: Not in lockstep (which waits for every command).
    motor_command_timeout_s: float = 1.0
    #: set_pose targets farther than this from the origin are refused, m.
    max_position_m: float = 100_000.0
    publish_tf: bool = True
    home: HomePoint = field(default_factory=HomePoint)
    wind_enu_m_s: tuple[float, float, float] = (0.0, 0.0, 0.0)
    #: Turbulence, gusts and shear around that mean (wind.turbulence, wind.gusts, wind.shear, ...).
    wind: PhysicsWindParams = field(default_factory=PhysicsWindParams)
    #: Drag law of the engine: faces (AirSim's code), projected (the AirSim paper's statement) or rotor
    #: (seed 004 eq. 13); doc/wind_and_drag.md compares them.
    drag_law: Literal["faces", "projected", "rotor"] = "faces"
    #: A fleet file (config/fleets/) or a number of vehicles drone1..N on a grid; either one
    #: replaces vehicle_names, vehicle_types, initial_positions and initial_yaws_rad.
    fleet: str = ""
    vehicles: int = 0
    #: Ground truth (odom, imu, rotors, TF) per vehicle, Hz; 0 = publish_rate_hz. Lowered at start
    #: to what keeps real time (a whole number of control periods apart). /clock keeps publish_rate_hz.
    ground_truth_rate_hz: float = 0.0
    #: Never lower ground truth below this, Hz, whatever the load: the flight controllers act on
    #: the latest odometry, and the cascade (control.controller.STABLE_STATE_RATE_HZ) rings once
    #: that odometry plus the command's transport are about 60 ms old and loses the vehicle at 80.
    #: When load would need less, the node publishes at this rate and runs slower than real time.
    #: 0 disables the floor (no controller flies).
    ground_truth_min_rate_hz: float = STABLE_STATE_RATE_HZ
    #: Share of one core the node may spend (physics + publishing) when it chooses that rate.
    cpu_budget: float = 0.8
    #: Physics path: auto (scalar for one vehicle, batched arrays for more), scalar or batched.
    stepping: str = "auto"
    #: An AirSim settings.json whose Vehicles' X Y Z / Yaw are the start poses of the first vehicles (a path,
    #: ``auto`` = AirSim's search order, or ``none``; doc/airsim_settings.md).
    airsim_settings: str = "none"
    #: Each vehicle flies on a battery pack (battery.*: cells, capacity_mah, ...; physics/battery.py):
    #: the sagging voltage caps the rotors' speed and thrust, the rotors' power drains it. Off: ideal supply.
    battery_enabled: bool = False
    battery: BatteryParams = field(default_factory=BatteryParams)
    #: ``<vehicle>/battery`` (sensor_msgs/BatteryState) rate with battery_enabled, Hz of simulation time.
    battery_rate_hz: float = 10.0
    #: The start gate (aerial_sim.physics.start_gate): fully qualified names of the nodes the clock waits for
    #: at 0, separated by spaces or commas, until each is ready in the graph (its input subscriptions made and
    #: connected; in lockstep its participants announced; ``NODE>TOPIC``: once it publishes TOPIC). The launch
    #: files fill it with the simulated nodes they start; empty (or none): the clock starts at once, as a
    #: physics node launched alone.
    start_gate_nodes: str = ""
    #: Wall seconds the gate waits at most; then the clock starts with one warning naming who is missing.
    start_gate_timeout_s: float = 60.0

    def __post_init__(self):
        require_non_negative(self, "ground_truth_rate_hz", "ground_truth_min_rate_hz")
        require(self.ground_truth_min_rate_hz <= self.publish_rate_hz,
                f"ground_truth_min_rate_hz ({self.ground_truth_min_rate_hz:g}) cannot exceed publish_rate_hz "
                f"({self.publish_rate_hz:g})")
        require(self.ground_truth_rate_hz == 0.0 or self.ground_truth_rate_hz >= self.ground_truth_min_rate_hz,
                f"ground_truth_rate_hz ({self.ground_truth_rate_hz:g}) is below ground_truth_min_rate_hz "
                f"({self.ground_truth_min_rate_hz:g}), the rate the flight controllers are stable at; "
                "set ground_truth_min_rate_hz lower too if no controller flies these vehicles")
        require(0.0 < self.cpu_budget <= 1.0, f"cpu_budget must be in (0, 1], got {self.cpu_budget!r}")
        require(self.vehicles >= 0, f"vehicles must be >= 0, got {self.vehicles!r}")
        require_positive(self, "rate_hz", "publish_rate_hz", "battery_rate_hz", "wrench_timeout_s", "max_external_force_n",
                         "max_external_torque_nm", "max_position_m")
        require_non_negative(self, "clock_speed", "motor_command_timeout_s", "lockstep_settle_s", "lockstep_settle_max_s",
                             "lockstep_timeout_s")
        # A participant may lag by slack x publish_rate_hz ground-truth messages: half its queue at most.
        most = LOCKSTEP_QOS.depth / 2 / self.publish_rate_hz
        require(0.0 <= self.lockstep_slack_s <= most,
                f"lockstep_slack_s must be in [0, {most:g}] s (half of the {LOCKSTEP_QOS.depth} messages a lockstep "
                f"queue holds at publish_rate_hz {self.publish_rate_hz:g}), got {self.lockstep_slack_s!r}")
        count = len(self.vehicle_names)
        require(count > 0, "vehicle_names must name at least one vehicle")
        require_vehicle_names(self.vehicle_names)
        require(len(set(self.vehicle_names)) == count, f"vehicle_names must be unique, got {self.vehicle_names}")
        require(len(self.vehicle_types) == count, f"vehicle_types needs {count} entries (one per vehicle)")
        require(len(self.initial_positions) == 3 * count, f"initial_positions needs {3 * count} numbers (x, y, z per vehicle)")
        require(len(self.initial_yaws_rad) == count, f"initial_yaws_rad needs {count} entries (one per vehicle)")
        require(self.publish_rate_hz <= self.rate_hz, "publish_rate_hz cannot exceed rate_hz")
        parse_participants(self.lockstep_participants)  # a ParamsError names the bad entry
        parse_gate_nodes(self.start_gate_nodes)  # likewise
        require_non_negative(self, "start_gate_timeout_s")

    @property
    def steps_per_period(self) -> int:
        return max(1, round(self.rate_hz / self.publish_rate_hz))

    def with_fleet(self) -> "PhysicsNodeParams":
        """These parameters with the vehicles of the selected fleet (unchanged without one)."""
        selection = FleetSelection(fleet=self.fleet, vehicles=self.vehicles,
                                   vehicle_type=self.vehicle_types[0] if self.vehicle_types else "quad_x")
        if not selection.given:
            return self
        fleet = selection.load()
        return replace(
            self,
            vehicle_names=tuple(v.name for v in fleet),
            vehicle_types=tuple(v.type for v in fleet),
            initial_positions=tuple(c for v in fleet for c in v.position),
            initial_yaws_rad=tuple(v.yaw_rad for v in fleet),
        )
