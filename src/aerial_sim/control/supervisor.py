"""Flight modes and command safety around the cascaded controller (pure, no ROS).

The supervisor is the part of the flight controller a user talks to: it arms
and disarms, takes off, lands, accepts position and velocity setpoints, refuses
unsafe requests with a :class:`CommandRejected` that says why, and turns the
current mode into a :class:`~aerial_sim.control.controller.Setpoint` for the
cascade on every control step.

Modes::

    DISARMED --arm--> IDLE --takeoff--> TAKEOFF --(altitude reached)--> HOLD
                       |                   |                              |
                       +--cmd_pose/cmd_vel-+---> HOLD / VELOCITY <--------+
    HOLD/VELOCITY/TAKEOFF --land--> LANDING --(touchdown)--> DISARMED
    flying --cmd_attitude/cmd_rates/cmd_motors--> ATTITUDE / RATES / MOTORS
    any --reset--> DISARMED

Decisions (documented in doc/control.md):

- ``takeoff`` on a disarmed vehicle is refused ("arm first"), as PX4 and
  AirSim's API do: arming is an explicit, separate safety step.
- setpoints before arming, with NaN/inf, or (in the node) in an unknown frame
  are refused; the vehicle keeps doing what it did (holding, or idle). So are
  implausible ones: a pose farther than ``max_setpoint_distance_m`` from the
  vehicle, a velocity above ``max_setpoint_speed_m_s`` (a typo such as 1e9 m
  must not send the vehicle off, or into the ground).
- a velocity command is a stream: when none arrives for ``command_timeout_s``
  the vehicle holds the position it has reached.
- ``arm(false)`` in flight is refused (use ``land``); on the ground it disarms.
  ``kill`` stops the motors at once whatever the mode (PX4's kill switch; what
  AirSim's ``armDisarm(False)`` does in the air): the vehicle falls.
- while landing, ``cmd_pose``/``cmd_vel`` are refused (a setpoint still in flight
  when ``land`` was called must not cancel the landing); ``takeoff`` aborts the
  landing and climbs ``takeoff_altitude`` from where the vehicle is.
- attitude, rate and motor commands (what AirSim's ``moveByRollPitchYaw*``,
  ``moveByAngleRates*`` and ``moveByMotorPWMs`` need) are streams like
  ``cmd_vel``: accepted once armed, on the ground too (AirSim's
  ``moveByRollPitchYawThrottle`` takes off with enough throttle), they fall back to holding position after ``command_timeout_s``
  without a new one; motor inputs go to the motors unchanged;
- ``reset`` (a simulation reset) disarms whatever the mode: the vehicle was
  put back on the ground;
- landing descends at ``land_speed_m_s`` holding x/y; touchdown is declared
  when the vehicle has stopped moving (speed below ``touchdown_speed_m_s``)
  for ``touchdown_time_s`` while still asked to descend; it then disarms.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from aerial_sim.config import require, require_non_negative, require_positive
from aerial_sim.control.controller import CascadedController, ControlOutput, ControllerParams, Setpoint, VehicleState
from aerial_sim.control.geometry import heading_to_world, wrap_angle, yaw_of


class CommandRejected(ValueError):
    """A request the flight controller refuses; the message says why and what to do."""


class Mode(str, enum.Enum):
    DISARMED = "disarmed"
    IDLE = "idle"  # armed, on the ground, motors at idle
    TAKEOFF = "takeoff"
    HOLD = "hold"  # go to and hold a position and yaw
    VELOCITY = "velocity"
    LANDING = "landing"
    ATTITUDE = "attitude"  # attitude + altitude or throttle (cmd_attitude)
    RATES = "rates"  # body rates + altitude or throttle (cmd_rates)
    MOTORS = "motors"  # rotor inputs passed through (cmd_motors)


FLYING_MODES = (Mode.TAKEOFF, Mode.HOLD, Mode.VELOCITY, Mode.LANDING, Mode.ATTITUDE, Mode.RATES, Mode.MOTORS)
STREAM_MODES = (Mode.VELOCITY, Mode.ATTITUDE, Mode.RATES, Mode.MOTORS)
#: A zero vector (a setpoint's feed-forward where there is none).
ZERO3 = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class SupervisorParams:
    """Mode logic parameters (defaults here only)."""

    #: Takeoff climbs this far above the point where it was requested, m.
    takeoff_altitude: float = 2.0
    #: Takeoff is complete (mode HOLD) within this distance of the target, m.
    takeoff_tolerance_m: float = 0.05
    land_speed_m_s: float = 0.5
    #: A velocity stream older than this (sim time) falls back to holding position, s.
    command_timeout_s: float = 0.5
    touchdown_speed_m_s: float = 0.1
    touchdown_time_s: float = 0.5
    #: Rotor input while armed on the ground (spinning, no lift).
    idle_control: float = 0.05
    #: Largest yaw error the velocity mode lets its integrated yaw target run ahead, rad.
    max_yaw_lead_rad: float = 0.5
    #: A cmd_pose farther than this from the vehicle is refused as implausible, m.
    max_setpoint_distance_m: float = 10_000.0
    #: A cmd_vel faster than this is refused as implausible (the controller limits speed anyway), m/s.
    max_setpoint_speed_m_s: float = 100.0

    def __post_init__(self):
        require_positive(
            self,
            "takeoff_altitude",
            "takeoff_tolerance_m",
            "land_speed_m_s",
            "command_timeout_s",
            "touchdown_speed_m_s",
            "touchdown_time_s",
            "max_yaw_lead_rad",
            "max_setpoint_distance_m",
            "max_setpoint_speed_m_s",
        )
        require_non_negative(self, "idle_control")
        require(self.idle_control < 0.5, "idle_control must be well below hover (< 0.5)")


class FlightSupervisor:
    """Modes, safety checks and setpoints for one vehicle (see module docstring).

    Call :meth:`update` once per control period with the current time and
    state; call the command methods whenever a request arrives. Every command
    method raises :class:`CommandRejected` for a request it refuses, and leaves
    the current mode unchanged in that case.

    ``takeoff`` and ``land`` hold where the vehicle is: at the state of the next
    :meth:`update`, the first control step the command takes part in, not at the
    state last observed when it arrived. A request that arrives just before or
    just after the odometry of a step then gives the same target, so lockstep
    runs repeat exactly whichever came first.
    """

    def __init__(self, params: SupervisorParams, controller_params: ControllerParams, vehicle):
        self.params = params
        self.controller = CascadedController(controller_params, vehicle)
        self.rotor_count = self.controller.mixer.rotor_count
        self.mode = Mode.DISARMED
        self._target_position: tuple[float, float, float] | None = None
        self._target_velocity = (0.0, 0.0, 0.0)
        self._target_yaw = 0.0
        self._target_yaw_rate = 0.0
        self._last_command_s = -math.inf
        self._direct: tuple = ()  # ATTITUDE/RATES: (target, altitude, throttle); MOTORS: (controls,)
        self._last_time_s: float | None = None
        self._still_since_s: float | None = None
        self._state: VehicleState | None = None
        self._climb_from_next_state: float | None = None  # takeoff/land: hold this far above the next state
        self.last_output: ControlOutput | None = None
        self.events: list[str] = []

    # -- queries ---------------------------------------------------------------

    @property
    def armed(self) -> bool:
        return self.mode is not Mode.DISARMED

    @property
    def flying(self) -> bool:
        return self.mode in FLYING_MODES

    def command_age_s(self, time_s: float) -> float:
        """Seconds since the last accepted setpoint (inf when none)."""
        return time_s - self._last_command_s

    # -- commands --------------------------------------------------------------

    def arm(self, arm: bool) -> str:
        if arm:
            if self.armed:
                return "already armed"
            self._require_state()
            self.controller.reset()
            self._set_mode(Mode.IDLE, "armed")
            return "armed"
        if not self.armed:
            return "already disarmed"
        if self.flying:
            raise CommandRejected(f"refusing to disarm in flight (mode {self.mode.value}): call land")
        self._set_mode(Mode.DISARMED, "disarmed")
        return "disarmed"

    def kill(self) -> str:
        """Motors off now, whatever the mode (a flying vehicle falls): PX4's kill switch, AirSim's disarm."""
        if not self.armed:
            return "already disarmed"
        self.controller.reset()
        self._direct = ()
        was = self.mode.value
        self._set_mode(Mode.DISARMED, f"killed (was {was}): motors off")
        return f"motors off (was {was})"

    def takeoff(self) -> str:
        state = self._require_state()
        if not self.armed:
            raise CommandRejected("takeoff refused: not armed (call arm first)")
        if self.mode not in (Mode.IDLE, Mode.LANDING):
            raise CommandRejected(f"takeoff refused: already flying (mode {self.mode.value})")
        self._hold_above(state, self.params.takeoff_altitude)
        self._set_mode(Mode.TAKEOFF, f"taking off to z = {self._target_position[2]:.2f} m")
        return f"taking off to {self.params.takeoff_altitude:g} m above the start"

    def land(self) -> str:
        state = self._require_state()
        if not self.flying:
            raise CommandRejected(f"land refused: not flying (mode {self.mode.value})")
        self._hold_above(state, 0.0)
        self._still_since_s = None
        self._set_mode(Mode.LANDING, "landing")
        return "landing"

    def command_pose(self, time_s: float, position, yaw: float) -> None:
        """Go to and hold ``position`` (map, m) with heading ``yaw`` (rad)."""
        values = [*position, yaw]
        if not all(map(math.isfinite, values)):
            raise CommandRejected(f"cmd_pose refused: non-finite value in {values}")
        state = self._require_armed("cmd_pose")
        self._refuse_while_landing("cmd_pose")
        distance = math.dist(position, state.position)
        if distance > self.params.max_setpoint_distance_m:
            raise CommandRejected(f"cmd_pose refused: {distance:.3g} m away, more than max_setpoint_distance_m "
                                  f"({self.params.max_setpoint_distance_m:g} m)")
        self._hold(position, float(yaw))
        self._last_command_s = time_s
        if self.mode is not Mode.HOLD:
            self._set_mode(Mode.HOLD, "holding commanded pose")

    def command_velocity(self, time_s: float, linear, yaw_rate: float, body_frame: bool = False) -> None:
        """Track velocity ``linear`` (m/s; ENU, or FLU by heading if ``body_frame``) and ``yaw_rate`` (rad/s)."""
        values = [*linear, yaw_rate]
        if not all(map(math.isfinite, values)):
            raise CommandRejected(f"cmd_vel refused: non-finite value in {values}")
        speed = math.sqrt(sum(float(v) ** 2 for v in linear))
        if speed > self.params.max_setpoint_speed_m_s:
            raise CommandRejected(f"cmd_vel refused: {speed:.3g} m/s is more than max_setpoint_speed_m_s "
                                  f"({self.params.max_setpoint_speed_m_s:g} m/s)")
        state = self._require_armed("cmd_vel")
        self._refuse_while_landing("cmd_vel")
        velocity = heading_to_world(linear, yaw_of(state.orientation)) if body_frame else linear
        limit = self.controller.params.max_yaw_rate_rad_s
        self._target_velocity = tuple(float(v) for v in velocity)
        self._target_yaw_rate = min(max(float(yaw_rate), -limit), limit)
        if self.mode is not Mode.VELOCITY:
            self._target_yaw = yaw_of(state.orientation)
            self._set_mode(Mode.VELOCITY, "tracking commanded velocity")
        self._last_command_s = time_s

    def command_attitude(self, time_s: float, orientation, altitude: float | None = None,
                         throttle: float | None = None) -> None:
        """Hold attitude ``orientation`` (w, x, y, z, body->map) with ``altitude`` (m) or ``throttle`` (0..1)."""
        q = self._direct_values("cmd_attitude", orientation, altitude, throttle)
        norm = math.sqrt(sum(c * c for c in q))
        if not 0.9 < norm < 1.1:
            raise CommandRejected(f"cmd_attitude refused: orientation {tuple(q)} is not a unit quaternion")
        self._direct_mode(time_s, Mode.ATTITUDE, (tuple(c / norm for c in q), altitude, throttle), "attitude")

    def command_rates(self, time_s: float, rates_body, altitude: float | None = None, throttle: float | None = None) -> None:
        """Track body rates ``rates_body`` (FLU, rad/s) with ``altitude`` (m) or ``throttle`` (0..1)."""
        rates = self._direct_values("cmd_rates", rates_body, altitude, throttle)
        self._direct_mode(time_s, Mode.RATES, (tuple(rates), altitude, throttle), "body rates")

    def command_motors(self, time_s: float, controls) -> None:
        """Send rotor inputs u_i in [0, 1] to the motors unchanged (armed; AirSim's moveByMotorPWMs)."""
        values = [float(u) for u in controls]
        if len(values) != self.rotor_count:
            raise CommandRejected(f"cmd_motors refused: expected {self.rotor_count} values, got {len(values)}")
        if not all(math.isfinite(u) and 0.0 <= u <= 1.0 for u in values):
            raise CommandRejected(f"cmd_motors refused: every value must be in [0, 1], got {values}")
        self._require_armed("cmd_motors")
        self._refuse_while_landing("cmd_motors")
        self._direct = (tuple(values),)
        self._last_command_s = time_s
        if self.mode is not Mode.MOTORS:
            self._set_mode(Mode.MOTORS, "passing cmd_motors to the motors")

    def reset(self) -> str:
        """The simulation was reset (vehicle back on the ground): disarm, whatever the mode."""
        self.controller.reset()
        self._direct = ()
        self._last_time_s = None
        self._set_mode(Mode.DISARMED, "reset: disarmed")
        return "disarmed"

    def _direct_values(self, what: str, values, altitude, throttle) -> list[float]:
        values = [float(v) for v in values]
        if (altitude is None) == (throttle is None):
            raise CommandRejected(f"{what} refused: give an altitude or a throttle")
        vertical = altitude if altitude is not None else throttle
        if not all(map(math.isfinite, values + [vertical])):
            raise CommandRejected(f"{what} refused: non-finite value in {values + [vertical]}")
        if throttle is not None and not 0.0 <= throttle <= 1.0:
            raise CommandRejected(f"{what} refused: throttle {throttle:g} is outside [0, 1]")
        return values

    def _direct_mode(self, time_s: float, mode: Mode, direct: tuple, what: str) -> None:
        self._require_armed(mode.value)
        self._refuse_while_landing(mode.value)
        self._direct = direct
        self._last_command_s = time_s
        if self.mode is not mode:
            self._set_mode(mode, f"tracking commanded {what}")

    # -- the control step ------------------------------------------------------

    def observe(self, state: VehicleState) -> None:
        """Record the latest state without stepping (commands use it)."""
        self._state = state

    def update(self, time_s: float, state: VehicleState, nominal_dt: float) -> tuple[float, ...]:
        """Rotor inputs for this control period; ``nominal_dt`` is used on the first call."""
        self._state = state
        if self._climb_from_next_state is not None:
            self._hold_above(state, self._climb_from_next_state)
            self._climb_from_next_state = None
        dt = nominal_dt if self._last_time_s is None else time_s - self._last_time_s
        self._last_time_s = time_s
        if not (0.0 < dt <= 0.1):  # clock jump (reset, pause): use the nominal period
            dt = nominal_dt
        if self.mode is Mode.DISARMED:
            self.last_output = None
            return (0.0,) * self.rotor_count
        if self.mode is Mode.IDLE:
            self.controller.reset()
            self.last_output = None
            return (self.params.idle_control,) * self.rotor_count

        if self.mode in STREAM_MODES and self.command_age_s(time_s) > self.params.command_timeout_s:
            yaw = self._target_yaw if self.mode is Mode.VELOCITY else yaw_of(state.orientation)
            self._hold(state.position, yaw)
            self._set_mode(Mode.HOLD, f"no {self.mode.value} command for {self.params.command_timeout_s:g} s: holding position")
        if self.mode is Mode.MOTORS:
            self.last_output = None
            return self._direct[0]
        if self.mode is Mode.ATTITUDE:
            target, altitude, throttle = self._direct
            output = self.controller.update_attitude(state, target, dt, altitude, throttle)
        elif self.mode is Mode.RATES:
            target, altitude, throttle = self._direct
            output = self.controller.update_rates(state, target, dt, altitude, throttle)
        else:
            output = self.controller.update(state, self._setpoint(time_s, state, dt), dt)
        self.last_output = output
        self._check_transitions(time_s, state)
        if self.mode is Mode.DISARMED:
            return (0.0,) * self.rotor_count
        return output.controls

    def _setpoint(self, time_s: float, state: VehicleState, dt: float) -> Setpoint:
        params = self.params
        if self.mode is Mode.VELOCITY:
            yaw = yaw_of(state.orientation)
            lead = wrap_angle(self._target_yaw + self._target_yaw_rate * dt - yaw)
            lead = min(max(lead, -params.max_yaw_lead_rad), params.max_yaw_lead_rad)
            self._target_yaw = wrap_angle(yaw + lead)
            return Setpoint(None, self._target_velocity, ZERO3, self._target_yaw, self._target_yaw_rate)
        if self.mode is Mode.LANDING:
            # Horizontal hold; vertical: a target sliding down at the landing speed, never far below.
            x, y, z = self._target_position
            self._target_position = (x, y, max(z - params.land_speed_m_s * dt, state.position[2] - 1.0))
            return Setpoint(self._target_position, (0.0, 0.0, -params.land_speed_m_s), ZERO3, self._target_yaw)
        return Setpoint(self._target_position, ZERO3, ZERO3, self._target_yaw)

    def _check_transitions(self, time_s: float, state: VehicleState) -> None:
        params = self.params
        if self.mode is Mode.TAKEOFF:
            if math.dist(state.position, self._target_position) < params.takeoff_tolerance_m:
                self._set_mode(Mode.HOLD, "takeoff complete")
        elif self.mode is Mode.LANDING:
            speed = math.hypot(*state.velocity_world)
            blocked = self._target_position[2] < state.position[2] - 0.3  # asked to descend, not descending
            if speed > params.touchdown_speed_m_s or not blocked:
                self._still_since_s = None
            elif self._still_since_s is None:
                self._still_since_s = time_s
            elif time_s - self._still_since_s >= params.touchdown_time_s:
                self._set_mode(Mode.DISARMED, "touchdown: disarmed")

    # -- helpers ---------------------------------------------------------------

    def _hold_above(self, state: VehicleState, climb_m: float) -> None:
        """Hold ``climb_m`` above ``state``'s position with its heading, and again above the next update's state."""
        x, y, z = state.position
        self._hold((x, y, z + climb_m), yaw_of(state.orientation))
        self._climb_from_next_state = climb_m

    def _hold(self, position, yaw: float) -> None:
        self._climb_from_next_state = None  # a new target replaces a takeoff/land target still to be anchored
        self._target_position = tuple(float(c) for c in position)
        self._target_yaw = float(yaw)
        self._target_velocity = (0.0, 0.0, 0.0)
        self._target_yaw_rate = 0.0

    def _set_mode(self, mode: Mode, why: str) -> None:
        self.mode = mode
        self.events.append(why)

    def _refuse_while_landing(self, what: str) -> None:
        if self.mode is Mode.LANDING:
            raise CommandRejected(f"{what} refused while landing (call takeoff to abort the landing)")

    def _require_state(self) -> VehicleState:
        if self._state is None:
            raise CommandRejected("no vehicle state received yet (is ground_truth/odom being published?)")
        return self._state

    def _require_armed(self, what: str) -> VehicleState:
        state = self._require_state()
        if not self.armed:
            raise CommandRejected(f"{what} refused: not armed (call arm first)")
        if self.mode is Mode.IDLE:
            self.controller.reset()
        return state
