"""What the autopilot does when a stream it flies by stops, as PX4's failsafe parameters say.

- Offboard setpoints older than COM_OF_LOSS_T: COM_OBL_RC_ACT chooses (3 Return, 4 Land, otherwise
  Hold, since this autopilot has no pilot to hand Position/Altitude/Manual to), announced in a
  critical STATUSTEXT.
- MANUAL_CONTROL older than COM_RC_LOSS_T in a stick mode: the vehicle holds where it is.
- A geofence breach (:mod:`aerial_sim.mavlink.geofence`, checked every tick while flying): GF_ACTION
  chooses (1 a warning, 2 Hold, 3 Return, 4 and 5 Land; 0 nothing), once per breach (the vehicle must be
  back inside before another one counts), announced in a critical STATUSTEXT as PX4 does. A vehicle
  already returning or landing goes on doing so.
"""

from __future__ import annotations

from pymavlink.dialects.v20 import common as mav

from aerial_sim.mavlink import geofence
from aerial_sim.mavlink.modes import FlightMode

#: COM_OBL_RC_ACT -> mode (the others hold).
OFFBOARD_LOSS_ACTIONS = {3: FlightMode.RTL, 4: FlightMode.LAND}


class Failsafes:
    """The failsafe actions of one :class:`~aerial_sim.mavlink.autopilot.Autopilot`."""

    def __init__(self, autopilot):
        self.ap = autopilot
        self.fence: geofence.Geofence | None = None
        self.breached = False
        self._fence_key = None

    # -- geofence -----------------------------------------------------------------------------
    def fence_in_force(self) -> geofence.Geofence:
        """The geofence as loaded for the current plan, home and limits (rebuilt when one of them changes)."""
        ap = self.ap
        p = ap.parameters
        home = ap.home_enu or (0.0, 0.0, 0.0)
        key = (ap.fence_plan.version, home, p["GF_MAX_HOR_DIST"], p["GF_MAX_VER_DIST"])
        if key != self._fence_key or self.fence is None:
            self._fence_key = key
            areas = geofence.areas_from_items(ap.fence_plan.items,
                                              lambda lat, lon: ap.global_to_enu(lat, lon, 0.0, True)[:2])
            flying = ap.state.position if (ap.flying and ap.state is not None
                                           and int(p["GF_ACTION"]) != geofence.ACTION_NONE) else None
            kept, dropped = geofence.load_areas(areas, home, flying)
            for why in dropped:
                ap.logger.warning(f"sysid {ap.system_id}: {why}: area ignored")
                ap.statustext(mav.MAV_SEVERITY_CRITICAL, why.split(": ", 1)[1])
            self.fence = geofence.Geofence(tuple(kept), home, p["GF_MAX_HOR_DIST"], p["GF_MAX_VER_DIST"])
        return self.fence

    def check_fence(self) -> None:
        """A tick's geofence check: act on a new breach as GF_ACTION says."""
        ap = self.ap
        if not (ap.armed and ap.flying and ap.state is not None and ap.home_enu is not None):
            self.breached = False
            return
        inside = self.fence_in_force().inside(ap.state.position)
        if inside or self.breached:
            self.breached = not inside
            return
        self.breached = True
        action = int(ap.parameters["GF_ACTION"])
        if action == geofence.ACTION_NONE:
            return
        fallback = {geofence.ACTION_HOLD: FlightMode.HOLD, geofence.ACTION_RTL: FlightMode.RTL}.get(
            action, None if action == geofence.ACTION_WARN else FlightMode.LAND)
        returning = ap.mode in (FlightMode.RTL, FlightMode.LAND)
        what = fallback.value if fallback is not None and not returning else "warning only"
        ap.logger.warning(f"sysid {ap.system_id}: geofence breached at {tuple(round(c, 1) for c in ap.state.position)} "
                          f"(GF_ACTION {action}): {what}")
        ap.statustext(mav.MAV_SEVERITY_CRITICAL, f"Geofence breached: {what}")
        if fallback is None or returning:
            return
        if fallback == FlightMode.LAND:
            ap.spawn(ap.commander.set_mode_or_hold(FlightMode.LAND))
        else:
            ap.commander.enter(fallback)

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
