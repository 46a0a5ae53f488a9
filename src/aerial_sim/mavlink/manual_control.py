"""MANUAL_CONTROL: a ground station's or joystick's sticks fly the vehicle in PX4's manual modes.

In Position (and, here, Manual, Stabilized and Altitude) the sticks command velocity in the heading
frame: x (pitch) and y (roll) up to MPC_VEL_MANUAL, z (throttle, 500 = centre) climb up to
MPC_Z_VEL_MAX_UP or descent up to MPC_Z_VEL_MAX_DN, r yaw rate up to MPC_MAN_Y_MAX; centred sticks
hold the position; sticks silent for longer than COM_RC_LOSS_T hand over to
:class:`~aerial_sim.mavlink.failsafes.Failsafes` (the vehicle holds).
"""

from __future__ import annotations

import math

from aerial_sim.airsim.flight import heading, world_velocity_from_heading
from aerial_sim.airsim.ned import heading_to_ned, world_to_enu


class ManualControl:
    """The last MANUAL_CONTROL of one :class:`~aerial_sim.mavlink.autopilot.Autopilot` and how it flies."""

    def __init__(self, autopilot):
        self.ap = autopilot
        self.axes: tuple[float, float, float, float] | None = None
        self.time = -math.inf
        self.holding = False

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

    def hold(self) -> None:
        """Hold where the vehicle is (once, when the sticks centre or are lost)."""
        if not self.holding and self.ap.flying:
            self.ap.guidance.hold_here()
        self.holding = True

    def guide(self) -> None:
        """A stick mode's tick."""
        ap = self.ap
        state = ap.state
        if state is None or not ap.armed:
            return
        if self.lost:
            ap.failsafes.sticks_lost()
            return
        pitch, roll, throttle, yaw = self.axes
        band = ap.params.stick_deadband
        climb = (throttle - 0.5) * 2.0
        pitch, roll, climb, yaw = (0.0 if abs(a) < band else a for a in (pitch, roll, climb, yaw))
        if pitch == roll == climb == yaw == 0.0:
            self.hold()
            return
        if not ap.flying and climb <= 0.0:
            return  # on the ground: only raising the throttle takes off
        self.holding = False
        speed = ap.parameters["MPC_VEL_MANUAL"]
        north, east = world_velocity_from_heading(pitch * speed, roll * speed, heading_to_ned(heading(state.orientation)))
        vz = climb * (ap.parameters["MPC_Z_VEL_MAX_UP"] if climb > 0 else ap.parameters["MPC_Z_VEL_MAX_DN"])
        ap.link.send_velocity(world_to_enu((north, east, -vz)), -math.radians(ap.parameters["MPC_MAN_Y_MAX"]) * yaw)
