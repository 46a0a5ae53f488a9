"""PX4's simulator MAVLink interface, the simulator's side (pure).

PX4 SITL's ``simulator_mavlink`` module (``src/modules/simulation/simulator_mavlink/SimulatorMavlink.cpp``)
connects over TCP to the simulator on port 4560 and expects, as Gazebo's ``mavlink_interface`` plugin
sends them:

- HIL_SENSOR at the IMU rate: accelerometer (specific force, m/s^2) and gyro (rad/s) in FRD,
  magnetometer in gauss FRD, absolute pressure in hPa, pressure altitude (m), temperature (degC),
  ``fields_updated`` saying which of them are new (bits 0-2 accel, 3-5 gyro, 6-8 mag, 9 abs pressure,
  11 pressure altitude, 12 temperature);
- HIL_GPS at the GPS rate (lat/lon 1e7 deg, alt mm AMSL, eph/epv cm, velocities cm/s NED, cog cdeg);
- HIL_STATE_QUATERNION: ground truth (attitude NED/FRD, rates, lat/lon/alt, velocity cm/s);

and answers with HIL_ACTUATOR_CONTROLS: ``controls[16]``, motors in [0, 1] in PX4's output order (the
quad-X config's rotor order is PX4's quad-X motor order), ``mode`` with MAV_MODE_FLAG_SAFETY_ARMED
set while armed. Everything here is built with pymavlink; conversions go through
:mod:`aerial_sim.airsim.ned`.
"""

from __future__ import annotations

import math
from typing import Sequence

from pymavlink.dialects.v20 import common as mav

from aerial_sim.airsim.ned import body_to_frd, orientation_to_ned, world_to_ned

TESLA_TO_GAUSS = 1e4
ACCEL, GYRO, MAG, PRESSURE, PRESSURE_ALT, TEMPERATURE = 0b111, 0b111 << 3, 0b111 << 6, 1 << 9, 1 << 11, 1 << 12
#: Pressure altitude of the U.S. Standard Atmosphere troposphere: h = 44330.77 (1 - (p / 1013.25 hPa)^0.190263).
SEA_LEVEL_HPA = 1013.25


def time_usec(time_s: float) -> int:
    """Simulation time as the ``time_usec`` of the HIL messages, rounded (truncating would make 0.012 s
    11999 us: PX4's lockstep stamps its answers with it, and the bridge pairs them by it)."""
    return int(round(time_s * 1e6))


def pressure_altitude(pressure_pa: float) -> float:
    return 44330.77 * (1.0 - (pressure_pa / 100.0 / SEA_LEVEL_HPA) ** 0.190263)


def hil_sensor(time_s: float, specific_force_flu, gyro_flu, field_tesla_flu, pressure_pa: float,
               temperature_c: float, new_mag: bool = True, new_baro: bool = True):
    ax, ay, az = body_to_frd(specific_force_flu)
    p, q, r = body_to_frd(gyro_flu)
    mx, my, mz = (c * TESLA_TO_GAUSS for c in body_to_frd(field_tesla_flu))
    fields = ACCEL | GYRO | (MAG if new_mag else 0) | ((PRESSURE | PRESSURE_ALT | TEMPERATURE) if new_baro else 0)
    return mav.MAVLink_hil_sensor_message(time_usec(time_s), ax, ay, az, p, q, r, mx, my, mz, pressure_pa / 100.0,
                                          0.0, pressure_altitude(pressure_pa), temperature_c, fields, 0)


def hil_gps(time_s: float, latitude: float, longitude: float, altitude: float, velocity_enu, eph_m: float = 0.5,
            epv_m: float = 0.8, has_fix: bool = True):
    vn, ve, vd = world_to_ned(velocity_enu)
    speed = math.hypot(vn, ve)
    cog = (math.degrees(math.atan2(ve, vn)) % 360.0) if speed > 0.2 else 0.0
    return mav.MAVLink_hil_gps_message(time_usec(time_s), 3 if has_fix else 1, int(round(latitude * 1e7)),
                                       int(round(longitude * 1e7)), int(round(altitude * 1000)),
                                       int(min(eph_m * 100, 65534)), int(min(epv_m * 100, 65534)),
                                       int(min(speed * 100, 65534)), _i16(vn * 100), _i16(ve * 100), _i16(vd * 100),
                                       int(round(cog * 100)) % 36000, 10, 0, 0)


def hil_state_quaternion(time_s: float, orientation_enu_flu, rates_flu, latitude: float, longitude: float,
                         altitude: float, velocity_enu, specific_force_flu):
    q = orientation_to_ned(orientation_enu_flu)
    p, qr, r = body_to_frd(rates_flu)
    vn, ve, vd = world_to_ned(velocity_enu)
    ax, ay, az = body_to_frd(specific_force_flu)
    return mav.MAVLink_hil_state_quaternion_message(
        time_usec(time_s), list(q), p, qr, r, int(round(latitude * 1e7)), int(round(longitude * 1e7)),
        int(round(altitude * 1000)), _i16(vn * 100), _i16(ve * 100), _i16(vd * 100), 0, 0,
        _i16(ax / 9.80665 * 1000), _i16(ay / 9.80665 * 1000), _i16(az / 9.80665 * 1000))


def motor_controls(message, rotor_count: int) -> tuple[tuple[float, ...], bool]:
    """(rotor inputs in [0, 1], armed) of a HIL_ACTUATOR_CONTROLS; disarmed -> all zero, as PX4 stops them."""
    armed = bool(int(message.mode) & mav.MAV_MODE_FLAG_SAFETY_ARMED)
    values: Sequence[float] = message.controls[:rotor_count]
    controls = tuple(min(max(float(u), 0.0), 1.0) if math.isfinite(u) else 0.0 for u in values)
    return (controls if armed else tuple(0.0 for _ in controls)), armed


def _i16(value: float) -> int:
    return int(max(-32767, min(32767, round(value))))
