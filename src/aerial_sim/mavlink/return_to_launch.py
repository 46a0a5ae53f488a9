"""Return mode (RTL): climb to RTL_RETURN_ALT, fly to the closest safe point, descend to RTL_DESCEND_ALT, land.

As PX4's RTL with its default RTL_TYPE 0 ("return to closest safe point (home or rally point) via
direct path", ``navigator/rtl_params.c``): the destination is home or the rally point
(MAV_MISSION_TYPE_RALLY) nearest the vehicle horizontally, chosen when the return starts; the return
and descend altitudes are above the destination. A vehicle already over it (within
``arrive_tolerance_m``) does not climb to the return altitude, only to the descend altitude; there it
waits RTL_LAND_DELAY seconds (-1: hovers for good) before landing through the flight controller's
``land`` service.
"""

from __future__ import annotations

import math


class ReturnToLaunch:
    """The RTL phases of one :class:`~aerial_sim.mavlink.autopilot.Autopilot` (also a mission's RTL item)."""

    def __init__(self, autopilot):
        self.ap = autopilot
        self.phase: str | None = None
        self._wait_until = 0.0
        self.destination: tuple[float, float, float] | None = None  # map ENU: home or a rally point

    def reset(self, start: bool) -> None:
        """Start from the climb (``start``: choosing the destination) or stop."""
        self.phase = "climb" if start else None
        if start:
            self.destination = self.closest_safe_point()
            if self.destination != self.ap.home_enu:
                self.ap.logger.info(f"sysid {self.ap.system_id}: returning to the rally point at "
                                    f"{tuple(round(c, 1) for c in self.destination)} (closer than home)")

    def closest_safe_point(self) -> tuple[float, float, float]:
        """Home or the rally point nearest the vehicle (horizontally), map ENU; home on a tie."""
        ap = self.ap
        home = ap.home_enu or (0.0, 0.0, 0.0)
        state = ap.state
        if state is None:
            return home
        x, y, _ = state.position
        candidates = [home] + [ap.global_to_enu(p.latitude, p.longitude, p.altitude, p.relative_altitude)
                               for p in ap.rally_plan.items]
        return min(candidates, key=lambda c: math.hypot(c[0] - x, c[1] - y))

    @property
    def landing(self) -> bool:
        return self.phase == "land"

    def guide(self) -> None:
        ap = self.ap
        guidance = ap.guidance
        state = ap.state
        home = self.destination or ap.home_enu or (0.0, 0.0, 0.0)
        x, y, z = state.position
        if self.phase == "climb":
            return_z = home[2] + ap.parameters["RTL_RETURN_ALT"]
            if math.hypot(x - home[0], y - home[1]) <= ap.params.arrive_tolerance_m:
                return_z = max(z, home[2] + min(ap.parameters["RTL_DESCEND_ALT"], ap.parameters["RTL_RETURN_ALT"]))
            self.phase = "climbing"
            if z < return_z - 0.3:
                guidance.fly_to((x, y, return_z), None)
            else:
                guidance.goto = None
        elif self.phase == "climbing":
            if guidance.follow():
                self.phase = "return"
                guidance.fly_to((home[0], home[1], state.position[2]), None)
        elif self.phase == "return":
            if guidance.follow():
                descend_z = home[2] + ap.parameters["RTL_DESCEND_ALT"]
                self.phase = "descend"
                if state.position[2] > descend_z + 0.3:
                    guidance.fly_to((home[0], home[1], descend_z), None)
        elif self.phase == "descend":
            if guidance.follow():
                self.phase = "wait"
                self._wait_until = ap.now + max(ap.parameters["RTL_LAND_DELAY"], 0.0)
        elif self.phase == "wait":
            if ap.parameters["RTL_LAND_DELAY"] >= 0 and ap.now >= self._wait_until:
                self.phase = "land"
                ap.spawn(guidance.land())
