"""Offboard control: SET_POSITION_TARGET_LOCAL_NED / _GLOBAL_INT and SET_ATTITUDE_TARGET with PX4's rules.

A setpoint is decoded by its type mask (position, else velocity; acceleration-only refused) and
frame (local NED, offsets from the vehicle, body frames, global with AMSL or home-relative
altitude), converted to map ENU and kept; in Offboard mode the last one is re-sent every tick.
Entering Offboard needs a setpoint younger than COM_OF_LOSS_T (PX4: "stream setpoints before
switching"); when they stop for longer, :class:`~aerial_sim.mavlink.failsafes.Failsafes` acts.
"""

from __future__ import annotations

import math

from pymavlink.dialects.v20 import common as mav

from aerial_sim.airsim.flight import heading, world_velocity_from_heading
from aerial_sim.airsim.ned import body_to_flu, heading_to_enu, heading_to_ned, orientation_to_enu, world_to_enu, world_to_ned
from aerial_sim.mavlink.commands import MAX_GOTO_DISTANCE_M
from aerial_sim.mavlink.modes import FlightMode

# SET_POSITION_TARGET type_mask bits (POSITION_TARGET_TYPEMASK)
IGNORE_POSITION, IGNORE_VELOCITY, IGNORE_ACCELERATION = 0b111, 0b111000, 0b111000000
IGNORE_YAW, IGNORE_YAW_RATE = 1 << 10, 1 << 11
# SET_ATTITUDE_TARGET type_mask bits (ATTITUDE_TARGET_TYPEMASK)
IGNORE_BODY_RATES, IGNORE_THRUST, IGNORE_ATTITUDE = 0b111, 1 << 6, 1 << 7
LOCAL_FRAMES = (mav.MAV_FRAME_LOCAL_NED, mav.MAV_FRAME_LOCAL_OFFSET_NED, mav.MAV_FRAME_BODY_NED,
                mav.MAV_FRAME_BODY_OFFSET_NED, mav.MAV_FRAME_BODY_FRD, mav.MAV_FRAME_LOCAL_FRD)
BODY_FRAMES = (mav.MAV_FRAME_BODY_NED, mav.MAV_FRAME_BODY_OFFSET_NED, mav.MAV_FRAME_BODY_FRD)
#: A velocity setpoint faster than this is refused, m/s.
MAX_SETPOINT_SPEED_M_S = 100.0


class Offboard:
    """The offboard setpoint stream of one :class:`~aerial_sim.mavlink.autopilot.Autopilot`."""

    def __init__(self, autopilot):
        self.ap = autopilot
        self.setpoint: tuple[str, tuple] | None = None
        self.time = -math.inf

    def handlers(self) -> dict:
        return {"SET_POSITION_TARGET_LOCAL_NED": self.on_set_position_target_local_ned,
                "SET_POSITION_TARGET_GLOBAL_INT": self.on_set_position_target_global_int,
                "SET_ATTITUDE_TARGET": self.on_set_attitude_target}

    @property
    def streaming(self) -> bool:
        """A setpoint younger than COM_OF_LOSS_T is here (Offboard may be entered / goes on)."""
        return self.setpoint is not None and not self.lost

    @property
    def lost(self) -> bool:
        return self.ap.now - self.time > self.ap.parameters["COM_OF_LOSS_T"]

    def on_set_position_target_local_ned(self, message) -> None:
        self._position_target(message, message.x, message.y, message.z, int(message.coordinate_frame), local=True)

    def on_set_position_target_global_int(self, message) -> None:
        self._position_target(message, message.lat_int / 1e7, message.lon_int / 1e7, message.alt,
                              int(message.coordinate_frame), local=False)

    def _position_target(self, message, x, y, z, frame: int, local: bool) -> None:
        mask = int(message.type_mask)
        values = [x, y, z, message.vx, message.vy, message.vz, message.yaw, message.yaw_rate]
        use_position = mask & IGNORE_POSITION != IGNORE_POSITION
        use_velocity = mask & IGNORE_VELOCITY != IGNORE_VELOCITY
        used = (values[:3] if use_position else []) + (values[3:6] if use_velocity else [])
        if not use_position and not use_velocity:
            return self._refuse("acceleration/force-only setpoints are not supported")
        if not all(math.isfinite(v) for v in used):
            return self._refuse(f"non-finite value in {used}")
        state = self.ap.state
        if state is None:
            return
        yaw = None if mask & IGNORE_YAW or not math.isfinite(message.yaw) else heading_to_enu(message.yaw)
        yaw_rate = 0.0 if mask & IGNORE_YAW_RATE or not math.isfinite(message.yaw_rate) else -message.yaw_rate
        body = frame in BODY_FRAMES
        if local and frame not in LOCAL_FRAMES:
            return self._refuse(f"frame {frame} is not a local frame")
        yaw_ned = heading_to_ned(heading(state.orientation))
        if use_position:
            if local:
                north, east, down = x, y, z
                if body:
                    north, east = world_velocity_from_heading(x, y, yaw_ned)
                if frame != mav.MAV_FRAME_LOCAL_NED:  # offsets from the vehicle
                    n0, e0, d0 = world_to_ned(state.position)
                    north, east, down = n0 + north, e0 + east, d0 + down
                position = world_to_enu((north, east, down))
            else:
                if not (-90 <= x <= 90 and -180 <= y <= 180):
                    return self._refuse(f"latitude/longitude ({x}, {y}) out of range")
                relative = frame in (mav.MAV_FRAME_GLOBAL_RELATIVE_ALT, mav.MAV_FRAME_GLOBAL_RELATIVE_ALT_INT)
                position = self.ap.global_to_enu(x, y, z, relative)
            if math.dist(position, state.position) > MAX_GOTO_DISTANCE_M:
                return self._refuse("position more than 10 km away")
            self._keep(("pose", (position, yaw if yaw is not None else heading(state.orientation))))
        else:
            vn, ve, vd = message.vx, message.vy, message.vz
            if body:
                vn, ve = world_velocity_from_heading(vn, ve, yaw_ned)
            velocity = world_to_enu((vn, ve, vd))
            if math.sqrt(sum(v * v for v in velocity)) > MAX_SETPOINT_SPEED_M_S:
                return self._refuse("velocity above 100 m/s")
            self._keep(("velocity", (velocity, yaw, yaw_rate)))

    def on_set_attitude_target(self, message) -> None:
        mask = int(message.type_mask)
        thrust = float(message.thrust)
        if mask & IGNORE_THRUST or not (math.isfinite(thrust) and 0.0 <= thrust <= 1.0):
            return self._refuse(f"thrust {thrust} must be in [0, 1]")
        if not mask & IGNORE_ATTITUDE:
            q = tuple(float(c) for c in message.q)
            norm = math.sqrt(sum(c * c for c in q))
            if not (all(math.isfinite(c) for c in q) and 0.9 < norm < 1.1):
                return self._refuse(f"attitude {q} is not a unit quaternion")
            self._keep(("attitude", (orientation_to_enu(tuple(c / norm for c in q)), thrust)))
        else:
            rates = (message.body_roll_rate, message.body_pitch_rate, message.body_yaw_rate)
            if not all(math.isfinite(r) for r in rates):
                return self._refuse(f"body rates {rates} not finite")
            self._keep(("rates", (body_to_flu(rates), thrust)))

    def _keep(self, setpoint: tuple[str, tuple]) -> None:
        self.setpoint = setpoint
        self.time = self.ap.now
        if self.ap.mode == FlightMode.OFFBOARD:
            self.fly()

    def _refuse(self, why: str) -> None:
        self.ap.errors += 1
        self.ap.logger.warning(f"sysid {self.ap.system_id}: offboard setpoint refused: {why}")

    def guide(self) -> None:
        """The Offboard mode's tick: the last setpoint again, or the failsafe once the stream is lost."""
        if self.lost:
            self.ap.failsafes.offboard_lost()
        else:
            self.fly()

    def fly(self) -> None:
        kind, values = self.setpoint
        link = self.ap.link
        if kind == "pose":
            link.send_pose(*values)
        elif kind == "velocity":
            velocity, yaw, yaw_rate = values
            if yaw is not None and self.ap.state is not None:
                yaw_rate = self.ap.guidance.yaw_rate_to(yaw)
            link.send_velocity(velocity, yaw_rate)
        elif kind == "attitude":
            link.send_attitude(values[0], None, values[1])
        elif kind == "rates":
            link.send_rates(values[0], None, values[1])
