"""How PX4 turns MANUAL_CONTROL sticks into attitude, thrust, climb-rate and body-rate setpoints (pure).

Sticks are PX4's ``manual_control_setpoint``: ``pitch`` (x, forward +), ``roll`` (y, right +) and
``yaw`` (r, clockwise +) in [-1, 1], ``throttle`` (z) in [0, 1] (MAVLink MANUAL_CONTROL / 1000).
Results are in this project's frames (map ENU, body FLU, quaternions (w, x, y, z) body->map).

- **Tilt, Stabilized/Manual** (``mc_att_control_main.cpp``, ``generate_attitude_setpoint``): the
  stick vector scaled by MPC_MAN_TILT_MAX is an axis-angle rotation about the horizontal axis at
  right angles to the stick direction, its length limited to MPC_MAN_TILT_MAX, so the vehicle leans
  (and flies) toward where the stick points and the tilt grows linearly with the deflection; the
  attitude setpoint is that tilt applied in the heading frame of the yaw setpoint.
- **Tilt, Altitude** (``flight_mode_manager/tasks/Utility/StickTiltXY.cpp``): the stick vector
  (limited to unit length) times g tan(MPC_MAN_TILT_MAX) is a horizontal acceleration setpoint in
  the heading frame; a multicopter gets it by leaning atan(a / g) toward it, so the tilt is
  atan(|s| tan MPC_MAN_TILT_MAX) (the same at full stick, slightly more at part stick).
- **Yaw** (both): the yaw setpoint moves at ``yaw`` x MPC_MAN_Y_MAX (deg/s); PX4 integrates it only
  once the throttle is above 5 % (on the ground it stays at the current heading).
- **Throttle, Stabilized/Acro** (``throttle_curve``, MPC_THR_CURVE = 0, the default): piecewise
  linear through (0, MPC_MANTHR_MIN), (0.5, MPC_THR_HOVER), (1, MPC_THR_MAX) (PX4's ``gradual3``),
  with 0 instead of MPC_MANTHR_MIN while landed: centre stick is hover thrust.
- **Climb rate, Altitude** (``FlightTaskManualAltitude::_scaleSticks``): (throttle - 0.5) x 2 up to
  MPC_Z_VEL_MAX_UP above centre, MPC_Z_VEL_MAX_DN below.
- **Body rates, Acro** (``mc_rate_control``, ``MC_ACRO_R_MAX``/``P_MAX``/``Y_MAX``): stick x the
  maximum rate (PX4's default expo curves MC_ACRO_EXPO/_SUPEXPO are not applied: linear sticks, as PX4
  with both set to 0).

PX4's stick deadzone and expo curves (MAN_DEADZONE, MPC_*_MAN_EXPO) are replaced by one deadband
(:attr:`aerial_sim.mavlink.autopilot.AutopilotParams.stick_deadband`): linear sticks.
"""

from __future__ import annotations

import math

from aerial_sim.physics.rotation import quat_from_axis_angle, quat_from_yaw, quat_multiply

#: PX4 integrates the yaw stick only with the throttle above this (mc_att_control: "z > 0.05").
YAW_THROTTLE_THRESHOLD = 0.05


def tilted_attitude(yaw_enu: float, pitch: float, roll: float, tilt_rad: float) -> tuple[float, float, float, float]:
    """Attitude leaning ``tilt_rad`` toward the stick direction (``pitch`` forward, ``roll`` right) at heading
    ``yaw_enu``: R_z(yaw) R_axis(tilt), the axis (roll, pitch, 0) in the heading frame (FLU: a right roll
    stick turns about +x, right side down; a forward pitch stick about +y, nose down)."""
    heading = quat_from_yaw(yaw_enu)
    length = math.hypot(pitch, roll)
    if length == 0.0 or tilt_rad == 0.0:
        return heading
    return quat_multiply(heading, quat_from_axis_angle((roll, pitch, 0.0), tilt_rad))


def stabilized_tilt(pitch: float, roll: float, tilt_max_rad: float) -> float:
    """Stabilized/Manual: tilt = |stick| x MPC_MAN_TILT_MAX, limited to MPC_MAN_TILT_MAX."""
    return min(math.hypot(pitch, roll), 1.0) * tilt_max_rad


def altitude_tilt(pitch: float, roll: float, tilt_max_rad: float) -> float:
    """Altitude: the tilt giving the acceleration |stick| g tan(MPC_MAN_TILT_MAX), atan(|s| tan(tilt_max))."""
    return math.atan(min(math.hypot(pitch, roll), 1.0) * math.tan(tilt_max_rad))


def throttle_curve(stick: float, minimum: float, hover: float, maximum: float) -> float:
    """Collective thrust (fraction of the maximum) for a throttle stick in [0, 1]: PX4's default curve,
    linear from ``minimum`` at 0 to ``hover`` at 0.5 and to ``maximum`` at 1."""
    stick = min(max(stick, 0.0), 1.0)
    if stick < 0.5:
        return minimum + (hover - minimum) * stick / 0.5
    return hover + (maximum - hover) * (stick - 0.5) / 0.5


def climb_rate(throttle: float, deadband: float, max_up: float, max_down: float) -> float:
    """Altitude/Position: climb rate (m/s, up +) of a throttle stick (0.5 = centre: hold)."""
    centred = (throttle - 0.5) * 2.0
    if abs(centred) < deadband:
        return 0.0
    return centred * (max_up if centred > 0 else max_down)


def acro_rates(pitch: float, roll: float, yaw: float, max_deg_s: tuple[float, float, float]) -> tuple[float, float, float]:
    """Acro: body rates (FLU, rad/s) of the sticks: roll right -> +x, pitch forward (nose down) -> +y, yaw
    clockwise -> -z; each stick x its MC_ACRO_*_MAX."""
    roll_max, pitch_max, yaw_max = (math.radians(m) for m in max_deg_s)
    return (roll * roll_max, pitch * pitch_max, -yaw * yaw_max)
