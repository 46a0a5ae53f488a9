"""MANUAL_CONTROL: a ground station's or joystick's sticks fly the vehicle in PX4's manual modes.

Each mode gives the sticks PX4's meaning (the mapping and its sources: :mod:`aerial_sim.mavlink.stick_mapping`)
and flies through the flight controller's public streams:

==============  ================================================================  =====================================
mode            sticks                                                            stream
==============  ================================================================  =====================================
Position        velocity in the heading frame (x/y up to MPC_VEL_MANUAL, z        ``cmd_vel``; centred: hold the
                climb/descent, r yaw rate); centred sticks hold the position      position (``cmd_pose``)
Altitude        roll/pitch angle (acceleration g tan(MPC_MAN_TILT_MAX)), yaw      ``cmd_attitude`` in ``map`` (the
                rate, climb rate; centred throttle brakes and then locks the      controller's altitude hold);
                altitude below MPC_HOLD_MAX_Z: wind drifts the vehicle            horizontal position is not held
Stabilized      roll/pitch angle (MPC_MAN_TILT_MAX), yaw rate, collective thrust  ``cmd_attitude`` in ``base_link``
Manual          a multicopter's Manual is Stabilized (PX4: mc_att_control makes   (throttle)
                the attitude setpoint from the sticks in both)
Acro            body rates (MC_ACRO_R/P/Y_MAX), collective thrust                 ``cmd_rates`` in ``base_link``
==============  ================================================================  =====================================

On the ground (armed, not yet flying) the sticks wait for a takeoff: Position and Altitude for
the throttle above 65 % (PX4's ``FlightTaskManualAltitude::_checkTakeoff``), Stabilized, Manual and
Acro for any throttle above 5 %. Sticks silent for longer than COM_RC_LOSS_T hand over to
:class:`~aerial_sim.mavlink.failsafes.Failsafes` (the vehicle holds its position).

Landing with the sticks: while the throttle asks to go down (Altitude: a descent of at least twice
``LANDED_SPEED_M_S``; Stabilized, Manual and Acro: the stick under 40 %, thrust under hover) and the vehicle no longer moves (speed under ``LANDED_SPEED_M_S``) for
COM_DISARM_LAND seconds, it is landed, as PX4's land detector finds it (low thrust, no vertical
motion) before it disarms after COM_DISARM_LAND: the flight controller's ``land`` service then
settles it and disarms (COM_DISARM_LAND < 0: never).
"""

from __future__ import annotations

import math

from aerial_sim.airsim.flight import heading, world_velocity_from_heading
from aerial_sim.airsim.ned import heading_to_ned, world_to_enu
from aerial_sim.control.geometry import wrap_angle
from aerial_sim.mavlink import stick_mapping
from aerial_sim.mavlink.modes import FlightMode

#: Throttle stick above which Position and Altitude take off from the ground (PX4: stick above 65 %).
TAKEOFF_THROTTLE = 0.65
#: A vehicle asked to go down that moves slower than this is resting on something, m/s.
LANDED_SPEED_M_S = 0.15
#: An altitude setpoint runs at most this far ahead of the vehicle while the throttle asks to climb or
#: sink (a vehicle that cannot follow, e.g. on the ground, must not wind it up), m.
MAX_ALTITUDE_LEAD_M = 3.0


class ManualControl:
    """The last MANUAL_CONTROL of one :class:`~aerial_sim.mavlink.autopilot.Autopilot` and how it flies."""

    def __init__(self, autopilot):
        self.ap = autopilot
        self.axes: tuple[float, float, float, float] | None = None
        self.time = -math.inf
        self.holding = False
        self.yaw_setpoint: float | None = None  # Stabilized/Altitude heading (ENU, rad)
        self.altitude_setpoint: float | None = None  # Altitude: the locked altitude (None: braking or moving)
        self._altitude_target: float | None = None  # Altitude: the altitude sent while the throttle is off centre
        self._last_time: float | None = None
        self._resting_since: float | None = None  # the stick land detector

    def handlers(self) -> dict:
        return {"MANUAL_CONTROL": self.on_manual_control}

    def on_manual_control(self, message) -> None:
        axes = (message.x / 1000.0, message.y / 1000.0, message.z / 1000.0, message.r / 1000.0)
        if not all(math.isfinite(a) for a in axes) or not (-1.0 <= axes[0] <= 1.0 and -1.0 <= axes[1] <= 1.0
                                                           and -1.0 <= axes[3] <= 1.0 and 0.0 <= axes[2] <= 1.0):
            self.ap.errors += 1
            self.ap.logger.warning(f"sysid {self.ap.system_id}: MANUAL_CONTROL {axes} outside x,y,r in [-1000, 1000], "
                                   "z in [0, 1000]: ignored")
            return
        self.axes = axes
        self.time = self.ap.now

    @property
    def lost(self) -> bool:
        return self.axes is None or self.ap.now - self.time > self.ap.parameters["COM_RC_LOSS_T"]

    def reset(self) -> None:
        """A mode change: setpoints start again from the vehicle's state."""
        self.holding = False
        self.yaw_setpoint = None
        self.altitude_setpoint = None
        self._altitude_target = None

    def hold(self) -> None:
        """Hold where the vehicle is (once, when the sticks centre or are lost)."""
        if not self.holding and self.ap.flying:
            self.ap.guidance.hold_here()
        self.holding = True

    def guide(self) -> None:
        """A stick mode's tick."""
        ap = self.ap
        state = ap.state
        now = ap.now
        dt = 0.0 if self._last_time is None else min(max(now - self._last_time, 0.0), 0.1)
        self._last_time = now
        if state is None or not ap.armed:
            return
        if self.lost:
            self.yaw_setpoint = self.altitude_setpoint = self._altitude_target = None
            ap.failsafes.sticks_lost()
            return
        band = ap.params.stick_deadband
        x, y, throttle, r = self.axes
        pitch, roll, yaw = (0.0 if abs(a) < band else a for a in (x, y, r))
        if ap.mode == FlightMode.POSCTL:
            self._position(pitch, roll, throttle, yaw)
            return
        if not ap.flying:
            self.yaw_setpoint = heading(state.orientation)  # landed: the heading stays where it is
            wanted = TAKEOFF_THROTTLE if ap.mode == FlightMode.ALTCTL else stick_mapping.YAW_THROTTLE_THRESHOLD
            if throttle <= wanted:
                return
        self.holding = False
        if self._landed(throttle):
            return
        if ap.mode == FlightMode.ALTCTL:
            self._altitude(pitch, roll, throttle, yaw, dt)
        elif ap.mode == FlightMode.ACRO:
            self._acro(pitch, roll, throttle, yaw)
        else:
            self._stabilized(pitch, roll, throttle, yaw, dt)

    def _landed(self, throttle: float) -> bool:
        """The stick land detector: True (and the ``land`` service called once) when the vehicle, asked down,
        has rested for COM_DISARM_LAND seconds."""
        ap = self.ap
        delay = ap.parameters["COM_DISARM_LAND"]
        if ap.link.controller_mode == "landing":
            return True
        if ap.mode == FlightMode.ALTCTL:  # asked to sink clearly faster than a resting vehicle moves
            p = ap.parameters
            down = stick_mapping.climb_rate(throttle, ap.params.stick_deadband, p["MPC_Z_VEL_MAX_UP"],
                                            p["MPC_Z_VEL_MAX_DN"]) <= -2.0 * LANDED_SPEED_M_S
        else:  # thrust well under hover: a vehicle in the air would be sinking faster and faster
            down = throttle < 0.4
        speed = math.sqrt(sum(v * v for v in ap.state.velocity_world))
        if delay < 0 or not ap.flying or not down or speed >= LANDED_SPEED_M_S:
            self._resting_since = None
            return False
        if self._resting_since is None:
            self._resting_since = ap.now
        if ap.now - self._resting_since < delay:
            return False
        self._resting_since = None
        ap.logger.info(f"sysid {ap.system_id}: landed ({ap.mode.value}, throttle down, at rest for {delay:g} s): "
                       "disarming")
        ap.spawn(ap.guidance.land())
        return True

    # -- the modes --------------------------------------------------------------------------
    def _position(self, pitch: float, roll: float, throttle: float, yaw: float) -> None:
        """Position: sticks as velocity in the heading frame; centred sticks hold the position."""
        ap = self.ap
        p = ap.parameters
        climb = stick_mapping.climb_rate(throttle, ap.params.stick_deadband, p["MPC_Z_VEL_MAX_UP"], p["MPC_Z_VEL_MAX_DN"])
        if pitch == roll == climb == yaw == 0.0:
            self.hold()
            return
        if not ap.flying and throttle <= TAKEOFF_THROTTLE:
            return  # on the ground: only raising the throttle takes off
        self.holding = False
        speed = p["MPC_VEL_MANUAL"]
        north, east = world_velocity_from_heading(pitch * speed, roll * speed,
                                                  heading_to_ned(heading(ap.state.orientation)))
        ap.link.send_velocity(world_to_enu((north, east, -climb)), -math.radians(p["MPC_MAN_Y_MAX"]) * yaw)

    def _turn(self, yaw: float, throttle: float, dt: float) -> float:
        """The yaw setpoint moved by the yaw stick for ``dt`` (PX4: only with the throttle above 5 %)."""
        if self.yaw_setpoint is None:
            self.yaw_setpoint = heading(self.ap.state.orientation)
        if throttle > stick_mapping.YAW_THROTTLE_THRESHOLD:
            rate = -math.radians(self.ap.parameters["MPC_MAN_Y_MAX"]) * yaw  # clockwise stick: ENU yaw decreases
            self.yaw_setpoint = wrap_angle(self.yaw_setpoint + rate * dt)
        return self.yaw_setpoint

    def _thrust(self, throttle: float) -> float:
        p = self.ap.parameters
        minimum = p["MPC_MANTHR_MIN"] if self.ap.flying else 0.0
        return stick_mapping.throttle_curve(throttle, minimum, p["MPC_THR_HOVER"], p["MPC_THR_MAX"])

    def _stabilized(self, pitch: float, roll: float, throttle: float, yaw: float, dt: float) -> None:
        """Stabilized (and a multicopter's Manual): tilt, yaw rate and collective thrust."""
        ap = self.ap
        tilt = stick_mapping.stabilized_tilt(pitch, roll, math.radians(ap.parameters["MPC_MAN_TILT_MAX"]))
        attitude = stick_mapping.tilted_attitude(self._turn(yaw, throttle, dt), pitch, roll, tilt)
        ap.link.send_attitude(attitude, None, self._thrust(throttle))

    def _acro(self, pitch: float, roll: float, throttle: float, yaw: float) -> None:
        """Acro: body rates and collective thrust."""
        p = self.ap.parameters
        rates = stick_mapping.acro_rates(pitch, roll, yaw, (p["MC_ACRO_R_MAX"], p["MC_ACRO_P_MAX"], p["MC_ACRO_Y_MAX"]))
        self.ap.link.send_rates(rates, None, self._thrust(throttle))

    def _altitude(self, pitch: float, roll: float, throttle: float, yaw: float, dt: float) -> None:
        """Altitude: tilt as an acceleration, yaw rate, and a climb rate that brakes and locks at centre.

        PX4 commands the climb rate to its velocity loop; the flight controller's attitude stream takes an
        altitude instead, so a climb rate v is an altitude target that moves at v (kept within
        MAX_ALTITUDE_LEAD_M of the vehicle); centring the throttle sends the vehicle's own altitude (a zero
        vertical speed setpoint: the brake) until it moves slower than MPC_HOLD_MAX_Z, then locks that
        altitude (``FlightTaskManualAltitude::_updateAltitudeLock``)."""
        ap = self.ap
        p = ap.parameters
        state = ap.state
        z, vz = state.position[2], state.velocity_world[2]
        climb = stick_mapping.climb_rate(throttle, ap.params.stick_deadband, p["MPC_Z_VEL_MAX_UP"], p["MPC_Z_VEL_MAX_DN"])
        if climb != 0.0:
            self.altitude_setpoint = None
            target = z if self._altitude_target is None else self._altitude_target
            self._altitude_target = min(max(target + climb * dt, z - MAX_ALTITUDE_LEAD_M), z + MAX_ALTITUDE_LEAD_M)
            altitude = self._altitude_target
        else:
            self._altitude_target = None
            if self.altitude_setpoint is None and abs(vz) < p["MPC_HOLD_MAX_Z"]:
                self.altitude_setpoint = z
            altitude = self.altitude_setpoint if self.altitude_setpoint is not None else z
        tilt = stick_mapping.altitude_tilt(pitch, roll, math.radians(p["MPC_MAN_TILT_MAX"]))
        attitude = stick_mapping.tilted_attitude(self._turn(yaw, 1.0, dt), pitch, roll, tilt)
        ap.link.send_attitude(attitude, altitude, None)
