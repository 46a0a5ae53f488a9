"""The autopilot's telemetry: each streamed message built from the vehicle's state, and the stream schedule.

Every stream is named by its MAVLink message (``attitude`` -> ATTITUDE, ``vfr_hud`` -> VFR_HUD) in
:class:`TelemetryRates`, in :data:`STREAMS` and as the builder method of :class:`Telemetry`; a stream
is due every ``1 / rate`` of simulation time on an absolute schedule, and SET_MESSAGE_INTERVAL changes
one rate at run time. Times are simulation time (``time_boot_ms`` = sim time), as PX4 SITL in lockstep
reports them; a message that reports the vehicle's state carries the time of that state (the ground truth's
stamp), as PX4 stamps its estimate with the estimator's time, not the time the message was sent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from pymavlink.dialects.v20 import common as mav

from aerial_sim.airsim.flight import heading
from aerial_sim.airsim.ned import body_to_frd, heading_to_ned, orientation_to_ned, quaternion_to_euler, world_to_ned
from aerial_sim.config import require_non_negative
from aerial_sim.environment.geodesy import enu_to_geodetic
from aerial_sim.mavlink import modes
from aerial_sim.mavlink.modes import FlightMode

#: PX4 version reported in AUTOPILOT_VERSION (the conventions followed): 1.15.0, release.
PX4_VERSION = (1 << 24) | (15 << 16) | (0 << 8) | 255
CAPABILITIES = (mav.MAV_PROTOCOL_CAPABILITY_MISSION_FLOAT | mav.MAV_PROTOCOL_CAPABILITY_PARAM_FLOAT
                | mav.MAV_PROTOCOL_CAPABILITY_MISSION_INT | mav.MAV_PROTOCOL_CAPABILITY_COMMAND_INT
                | mav.MAV_PROTOCOL_CAPABILITY_PARAM_ENCODE_BYTEWISE
                | mav.MAV_PROTOCOL_CAPABILITY_SET_ATTITUDE_TARGET
                | mav.MAV_PROTOCOL_CAPABILITY_SET_POSITION_TARGET_LOCAL_NED
                | mav.MAV_PROTOCOL_CAPABILITY_SET_POSITION_TARGET_GLOBAL_INT | mav.MAV_PROTOCOL_CAPABILITY_MAVLINK2)
SENSORS = (mav.MAV_SYS_STATUS_SENSOR_3D_GYRO | mav.MAV_SYS_STATUS_SENSOR_3D_ACCEL | mav.MAV_SYS_STATUS_SENSOR_3D_MAG
           | mav.MAV_SYS_STATUS_SENSOR_ABSOLUTE_PRESSURE | mav.MAV_SYS_STATUS_SENSOR_GPS
           | mav.MAV_SYS_STATUS_SENSOR_ANGULAR_RATE_CONTROL | mav.MAV_SYS_STATUS_SENSOR_ATTITUDE_STABILIZATION
           | mav.MAV_SYS_STATUS_SENSOR_YAW_POSITION | mav.MAV_SYS_STATUS_SENSOR_Z_ALTITUDE_CONTROL
           | mav.MAV_SYS_STATUS_SENSOR_XY_POSITION_CONTROL | mav.MAV_SYS_STATUS_SENSOR_MOTOR_OUTPUTS
           | mav.MAV_SYS_STATUS_AHRS | mav.MAV_SYS_STATUS_SENSOR_BATTERY | mav.MAV_SYS_STATUS_PREARM_CHECK)


@dataclass(frozen=True)
class TelemetryRates:
    """Default streaming rates (Hz of simulation time): PX4's "onboard" profile (the 14540 link), except
    LOCAL_POSITION_NED at 50 Hz (PX4: 30) and SYS_STATUS at 2 Hz. SET_MESSAGE_INTERVAL changes them per
    message at run time, up to ``tick_hz``. Each field is named for its message, lower case."""

    attitude: float = 100.0
    attitude_quaternion: float = 50.0
    local_position_ned: float = 50.0
    global_position_int: float = 50.0
    gps_raw_int: float = 5.0
    sys_status: float = 2.0
    extended_sys_state: float = 5.0
    altitude: float = 10.0
    vfr_hud: float = 10.0
    battery_status: float = 1.0
    home_position: float = 0.5
    system_time: float = 1.0
    mission_current: float = 1.0

    def __post_init__(self):
        require_non_negative(self, *self.__dataclass_fields__)


#: Message id -> stream name (the TelemetryRates field and the Telemetry builder).
STREAMS = {getattr(mav, f"MAVLINK_MSG_ID_{f.name.upper()}"): f.name for f in fields(TelemetryRates)}
#: Messages REQUEST_MESSAGE can ask for besides the streams.
ON_REQUEST = {mav.MAVLINK_MSG_ID_AUTOPILOT_VERSION: "autopilot_version", mav.MAVLINK_MSG_ID_HEARTBEAT: "heartbeat"}


class Telemetry:
    """Builds the autopilot's outgoing messages and sends the streams when due (``autopilot``: the
    :class:`~aerial_sim.mavlink.autopilot.Autopilot` whose state it reports)."""

    def __init__(self, autopilot):
        self.ap = autopilot
        self.defaults = autopilot.params.rates
        self.tick_hz = autopilot.params.tick_hz
        self.rates = {msg_id: getattr(self.defaults, name) for msg_id, name in STREAMS.items()}
        self._next_due: dict[int, float] = {}

    def handlers(self) -> dict:
        return {"TIMESYNC": self.on_timesync}

    def on_timesync(self, message) -> None:
        if message.tc1 == 0:
            self.ap.send(mav.MAVLink_timesync_message(int(self.ap.now * 1e9), message.ts1))

    # -- the schedule -----------------------------------------------------------------------
    def stream(self, now_s: float) -> None:
        """Send every stream due at ``now_s``."""
        slack = 0.5 / self.tick_hz  # a message due before the next tick goes now (rates up to tick_hz exact)
        for msg_id, rate in self.rates.items():
            if rate <= 0.0:
                continue
            due = self._next_due.get(msg_id)
            if due is not None and now_s + slack < due:
                continue
            period = 1.0 / rate
            self._next_due[msg_id] = now_s + period if due is None or now_s - due > period else due + period
            message = getattr(self, STREAMS[msg_id])()
            if message is not None:
                self.ap.send(message)

    def set_interval(self, msg_id: int, interval_us: float) -> None:
        """SET_MESSAGE_INTERVAL (checked by the caller): 0 = default rate, -1 = off."""
        if interval_us == 0:
            self.rates[msg_id] = getattr(self.defaults, STREAMS[msg_id])
        elif interval_us == -1:
            self.rates[msg_id] = 0.0
        else:
            self.rates[msg_id] = min(1e6 / interval_us, self.tick_hz)
        self._next_due.pop(msg_id, None)

    def builder(self, msg_id: int):
        """The method that builds message ``msg_id`` (None when it is neither streamed nor on request)."""
        name = STREAMS.get(msg_id) or ON_REQUEST.get(msg_id)
        return None if name is None else getattr(self, name)

    # -- the messages -----------------------------------------------------------------------
    def _ms(self) -> int:
        return int(self.ap.now * 1000.0) & 0xFFFFFFFF

    def _state_ms(self, state) -> int:
        """``time_boot_ms`` of a message reporting ``state``: when it was true (sim time), else now."""
        time_s = getattr(state, "time_s", math.nan)
        if not math.isfinite(time_s) or time_s < 0.0:
            return self._ms()
        return int(round(time_s * 1000.0)) & 0xFFFFFFFF

    def heartbeat(self):
        ap = self.ap
        if not ap.ready:
            status = mav.MAV_STATE_BOOT
        else:
            status = mav.MAV_STATE_ACTIVE if ap.armed else mav.MAV_STATE_STANDBY
        return mav.MAVLink_heartbeat_message(ap.mav_type, mav.MAV_AUTOPILOT_PX4, modes.base_mode(ap.mode, ap.armed),
                                             modes.custom_mode(ap.mode), status, 3)

    def attitude(self):
        state = self.ap.state
        if state is None:
            return None
        roll, pitch, yaw = quaternion_to_euler(orientation_to_ned(state.orientation))
        p, q, r = body_to_frd(state.angular_velocity_body)
        return mav.MAVLink_attitude_message(self._state_ms(state), roll, pitch, yaw, p, q, r)

    def attitude_quaternion(self):
        state = self.ap.state
        if state is None:
            return None
        w, x, y, z = orientation_to_ned(state.orientation)
        p, q, r = body_to_frd(state.angular_velocity_body)
        return mav.MAVLink_attitude_quaternion_message(self._state_ms(state), w, x, y, z, p, q, r, [0.0, 0.0, 0.0, 0.0])

    def local_position_ned(self):
        state = self.ap.state
        if state is None:
            return None
        n, e, d = world_to_ned(state.position)
        vn, ve, vd = world_to_ned(state.velocity_world)
        return mav.MAVLink_local_position_ned_message(self._state_ms(state), n, e, d, vn, ve, vd)

    def _geodetic(self):
        return enu_to_geodetic(*self.ap.state.position, self.ap.home_point)

    def global_position_int(self):
        state = self.ap.state
        if state is None:
            return None
        lat, lon, alt = self._geodetic()
        if not all(math.isfinite(v) for v in (lat, lon, alt)):
            return None
        vn, ve, vd = world_to_ned(state.velocity_world)
        hdg = math.degrees(heading_to_ned(heading(state.orientation))) % 360.0
        return mav.MAVLink_global_position_int_message(
            self._state_ms(state), int(round(lat * 1e7)), int(round(lon * 1e7)), int(round(alt * 1000)),
            int(round((state.position[2] - self.ap.home_z) * 1000)), _i16(vn * 100), _i16(ve * 100), _i16(vd * 100),
            int(round(hdg * 100)) % 36000)

    def gps_raw_int(self):
        gps = self.ap.link.gps
        state = self.ap.state
        if gps is not None:
            lat, lon, alt, fix = gps.latitude, gps.longitude, gps.altitude, 3 if gps.has_fix else 1
            eph, epv = gps.eph_m, gps.epv_m
            v = gps.velocity_enu
        elif state is not None:
            lat, lon, alt = self._geodetic()
            fix, eph, epv, v = 3, 0.5, 0.8, state.velocity_world
        else:
            return None
        if not all(math.isfinite(c) for c in (lat, lon, alt)):
            return None
        speed = math.hypot(v[0], v[1])
        cog = (math.degrees(math.atan2(v[0], v[1])) % 360.0) if speed > 0.2 else 0.0
        return mav.MAVLink_gps_raw_int_message(
            int(self.ap.now * 1e6), fix, int(round(lat * 1e7)), int(round(lon * 1e7)), int(round(alt * 1000)),
            _u16(eph * 100), _u16(epv * 100), _u16(speed * 100), int(round(cog * 100)) % 36000, 12,
            int(round(alt * 1000)), int(eph * 1000), int(epv * 1000), 100, 0, 0)

    def sys_status(self):
        """SYS_STATUS: the sensors, the pack, and the geofence (present and enabled while one is in force, healthy
        unless breached: MAVProxy and QGroundControl show a breach from that bit)."""
        battery = self.ap.pack
        healthy = SENSORS if self.ap.ready else SENSORS & ~(mav.MAV_SYS_STATUS_SENSOR_GPS | mav.MAV_SYS_STATUS_PREARM_CHECK)
        failsafes = self.ap.failsafes
        fence = failsafes.fence_in_force()
        present = SENSORS | (mav.MAV_SYS_STATUS_GEOFENCE if (fence.areas or fence.max_horizontal_m > 0
                                                              or fence.max_vertical_m > 0) else 0)
        healthy |= 0 if failsafes.breached else mav.MAV_SYS_STATUS_GEOFENCE
        return mav.MAVLink_sys_status_message(present, present, healthy, 0, int(battery.voltage_v * 1000),
                                              int(battery.current_a * 100), battery.remaining_percent, 0, 0, 0, 0, 0,
                                              0, 0, 0, 0)

    def landed_state(self) -> int:
        controller = self.ap.link.controller_mode
        if controller in (None, "disarmed", "idle"):
            return mav.MAV_LANDED_STATE_ON_GROUND
        if controller == "landing":
            return mav.MAV_LANDED_STATE_LANDING
        if self.ap.mode == FlightMode.TAKEOFF or controller == "takeoff":
            return mav.MAV_LANDED_STATE_TAKEOFF
        return mav.MAV_LANDED_STATE_IN_AIR

    def extended_sys_state(self):
        return mav.MAVLink_extended_sys_state_message(mav.MAV_VTOL_STATE_UNDEFINED, self.landed_state())

    def altitude(self):
        state = self.ap.state
        if state is None:
            return None
        amsl = self.ap.home_point.altitude + state.position[2]
        relative = state.position[2] - self.ap.home_z
        distance = self.ap.link.distance
        bottom = distance.distance_m if distance is not None else math.nan
        return mav.MAVLink_altitude_message(int(self.ap.now * 1e6), amsl, amsl, state.position[2], relative, math.nan,
                                            bottom if math.isfinite(bottom) else -1.0)

    def vfr_hud(self):
        state = self.ap.state
        if state is None:
            return None
        v = state.velocity_world
        speed = math.hypot(v[0], v[1])
        hdg = int(math.degrees(heading_to_ned(heading(state.orientation))) % 360)
        rotors = self.ap.link.rotors
        throttle = 0
        if rotors is not None and self.ap.link.vehicle.rotors:
            top = [r.max_speed_rpm * 2 * math.pi / 60 for r in self.ap.link.vehicle.rotors]
            throttle = int(round(100 * sum(abs(s) / m for s, m in zip(rotors.speeds_rad_s, top)) / len(top)))
        return mav.MAVLink_vfr_hud_message(speed, speed, hdg, max(0, min(throttle, 100)),
                                           self.ap.home_point.altitude + state.position[2], v[2])

    def battery_status(self):
        battery = self.ap.pack
        cells = self.ap.cells
        per_cell = int(battery.voltage_v / cells * 1000)
        voltages = [per_cell] * min(cells, 10) + [65535] * (10 - min(cells, 10))
        return mav.MAVLink_battery_status_message(
            0, mav.MAV_BATTERY_FUNCTION_ALL, mav.MAV_BATTERY_TYPE_LIPO, 32767, voltages, int(battery.current_a * 100),
            int(battery.consumed_mah), -1, battery.remaining_percent, 0, mav.MAV_BATTERY_CHARGE_STATE_OK
            if battery.charge > 0.15 else mav.MAV_BATTERY_CHARGE_STATE_LOW, [0, 0, 0, 0], 0, 0)

    def home_position(self):
        home = self.ap.home_enu
        if home is None:
            return None
        lat, lon, alt = enu_to_geodetic(*home, self.ap.home_point)
        n, e, d = world_to_ned(home)
        yaw = heading_to_ned(self.ap.home_yaw)
        q = [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]
        return mav.MAVLink_home_position_message(int(round(lat * 1e7)), int(round(lon * 1e7)), int(round(alt * 1000)),
                                                 n, e, d, q, 0.0, 0.0, 0.0, int(self.ap.now * 1e6))

    def system_time(self):
        return mav.MAVLink_system_time_message(0, self._ms())

    def mission_current(self):
        ap = self.ap
        total = len(ap.mission.items)
        state = ap.mission_flight.state if total else mav.MISSION_STATE_NO_MISSION
        if total and ap.mode != FlightMode.MISSION and state == mav.MISSION_STATE_ACTIVE:
            state = mav.MISSION_STATE_PAUSED
        if total and state == mav.MISSION_STATE_NO_MISSION:
            state = mav.MISSION_STATE_NOT_STARTED
        seq = min(ap.mission.current, max(total - 1, 0))
        return mav.MAVLink_mission_current_message(seq, total, state, int(ap.mode == FlightMode.MISSION))

    def autopilot_version(self):
        uid = 0x4145_5249_414C_0000 + self.ap.system_id  # "AERIAL" + system id
        return mav.MAVLink_autopilot_version_message(CAPABILITIES, PX4_VERSION, 0, 0, 0, [0] * 8, [0] * 8, [0] * 8,
                                                     0, 0, uid, [0] * 18)


def _i16(value: float) -> int:
    return int(max(-32767, min(32767, round(value))))


def _u16(value: float) -> int:
    return int(max(0, min(65534, round(value))))
