"""How the autopilot's modes steer the vehicle: climb to a height, hold, fly to a point, land.

Every mode flies through these few primitives on the flight controller's public interface
(:class:`aerial_sim.airsim.graph.VehicleLink`): a held pose on ``cmd_pose``; a goto as a carrot path
at MPC_XY_CRUISE (or the DO_CHANGE_SPEED in force) on ``cmd_vel``, as the AirSim API's moveToPosition
(:class:`aerial_sim.airsim.flight.PathFollower`), ending in a held pose at the goal; the ``land`` service.
"""

from __future__ import annotations

import math

from aerial_sim.airsim.flight import MAX_DEGREE_OF_FREEDOM, GuidanceParams, PathFollower, heading, yaw_rate_command


class Guidance:
    """The goto and takeoff under way for one :class:`~aerial_sim.mavlink.autopilot.Autopilot`."""

    def __init__(self, autopilot):
        self.ap = autopilot
        self.params = GuidanceParams()
        self.takeoff_z: float | None = None
        self.goto: tuple[PathFollower, float | None] | None = None

    def stop(self) -> None:
        """Forget the goto and takeoff under way (a mode change)."""
        self.goto = None
        self.takeoff_z = None

    def begin_takeoff(self, target_z: float) -> None:
        """Climb straight up to ``target_z`` (map z) holding the heading."""
        state = self.ap.state
        x, y, _ = state.position
        self.takeoff_z = target_z
        self.goto = None
        self.ap.link.send_pose((x, y, target_z), heading(state.orientation))

    def climbed(self) -> bool:
        """Within ``takeoff_tolerance_m`` of the takeoff height."""
        return abs(self.ap.state.position[2] - self.takeoff_z) <= self.ap.params.takeoff_tolerance_m

    def hold_here(self) -> None:
        state = self.ap.state
        if state is not None:
            self.ap.link.send_pose(tuple(state.position), heading(state.orientation))

    def fly_to(self, goal, yaw: float | None) -> None:
        """Start a goto to ``goal`` (map ENU), turning to ``yaw`` on the way (None: keep the heading)."""
        speed = self.ap.speed_m_s or self.ap.parameters["MPC_XY_CRUISE"]
        self.goto = (PathFollower(self.ap.state.position, [goal], speed, -1.0, self.params), yaw)

    def set_speed(self, speed_m_s: float) -> None:
        if self.goto is not None:
            self.goto[0].speed = speed_m_s

    @property
    def goal(self):
        """The goto's goal (None when there is none)."""
        return None if self.goto is None else tuple(float(c) for c in self.goto[0].goal)

    def follow(self) -> bool:
        """Fly the goto under way; True once the goal is reached (or when there is none)."""
        if self.goto is None:
            return True
        follower, yaw = self.goto
        state = self.ap.state
        velocity, reached = follower.command(state.position)
        goal = tuple(float(c) for c in follower.goal)
        if reached or math.dist(goal, state.position) <= min(self.ap.params.arrive_tolerance_m, 0.3):
            self.goto = None
            self.ap.link.send_pose(goal, yaw if yaw is not None else heading(state.orientation))
            return True
        self.ap.link.send_velocity(tuple(float(v) for v in velocity), self.yaw_rate_to(yaw))
        return False

    def yaw_rate_to(self, yaw: float | None) -> float:
        """Yaw rate (rad/s) that turns toward ``yaw`` (0 for None)."""
        if yaw is None or self.ap.state is None:
            return 0.0
        return yaw_rate_command(self.params, heading(self.ap.state.orientation), False, yaw, MAX_DEGREE_OF_FREEDOM)

    async def land(self) -> None:
        """Call the ``land`` service (the controller disarms at touchdown)."""
        answer = await self.ap.link.land()
        if not answer.success:
            self.ap.logger.warning(f"sysid {self.ap.system_id}: land refused by the controller: {answer.message}")
