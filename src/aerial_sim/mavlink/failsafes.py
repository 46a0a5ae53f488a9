"""What the autopilot does when a stream it flies by stops, as PX4's failsafe parameters say.

- Offboard setpoints older than COM_OF_LOSS_T: COM_OBL_RC_ACT chooses (3 Return, 4 Land, otherwise
  Hold, since this autopilot has no pilot to hand Position/Altitude/Manual to), announced in a
  critical STATUSTEXT.
- MANUAL_CONTROL older than COM_RC_LOSS_T in a stick mode: the vehicle holds where it is.
"""

from __future__ import annotations

from pymavlink.dialects.v20 import common as mav

from aerial_sim.mavlink.modes import FlightMode

#: COM_OBL_RC_ACT -> mode (the others hold).
OFFBOARD_LOSS_ACTIONS = {3: FlightMode.RTL, 4: FlightMode.LAND}


class Failsafes:
    """The failsafe actions of one :class:`~aerial_sim.mavlink.autopilot.Autopilot`."""

    def __init__(self, autopilot):
        self.ap = autopilot

    def offboard_lost(self) -> None:
        ap = self.ap
        fallback = OFFBOARD_LOSS_ACTIONS.get(int(ap.parameters["COM_OBL_RC_ACT"]), FlightMode.HOLD)
        ap.logger.warning(f"sysid {ap.system_id}: offboard setpoints lost for more than "
                          f"{ap.parameters['COM_OF_LOSS_T']:g} s: failsafe -> {fallback.value}")
        ap.statustext(mav.MAV_SEVERITY_CRITICAL, f"Failsafe: offboard lost, {fallback.value}")
        ap.offboard.setpoint = None
        if fallback == FlightMode.LAND and ap.flying:
            ap.spawn(ap.commander.set_mode_or_hold(FlightMode.LAND))
        elif fallback == FlightMode.RTL and ap.flying:
            ap.commander.enter(FlightMode.RTL)
        else:
            ap.commander.enter(FlightMode.HOLD)

    def sticks_lost(self) -> None:
        self.ap.manual.hold()
