"""ArduPilot's JSON SITL interface, the simulator's side (pure).

ArduPilot SITL started with ``-f <frame> --model JSON`` (``sim_vehicle.py -v ArduCopter -f quad
--model JSON``) sends, every physics step, a binary *servo packet* over UDP to the simulator's port
9002 and blocks until the simulator answers with one line of JSON holding the new state
(``libraries/SITL/SIM_JSON.cpp``; ``libraries/SITL/examples/JSON/readme.md``):

- servo packet, little-endian: ``uint16 magic`` (18458: 16 channels; 29569: 32 channels),
  ``uint16 frame_rate`` (Hz), ``uint32 frame_count``, ``uint16 pwm[16 or 32]`` (microseconds);
- reply: ``{"timestamp": s, "imu": {"gyro": [p, q, r], "accel_body": [x, y, z]}, "position":
  [n, e, d], "velocity": [vn, ve, vd], "quaternion": [w, x, y, z]}`` and a newline; body axes FRD,
  world NED about the origin, accel_body the specific force (m/s^2, -9.81 on z at rest), gyro rad/s.

A frame_count that does not advance is a resend (ArduPilot resends after 1 s without an answer);
one that jumps back means ArduPilot restarted. Channel i (0-based) drives rotor i of the vehicle
config: the quad-X config's rotor order (front-right, rear-left, front-left, rear-right) is ArduPilot's
motor order for its quad X frame. PWM maps linearly, 1000 us -> 0, 2000 us -> 1.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import Sequence

from aerial_sim.airsim.ned import body_to_frd, orientation_to_ned, world_to_ned

MAGIC_16, MAGIC_32 = 18458, 29569
_HEADER = struct.Struct("<HHI")
PWM_MIN_US, PWM_MAX_US = 1000.0, 2000.0


class PacketError(ValueError):
    """A datagram that is not an ArduPilot servo packet (the message says why)."""


@dataclass(frozen=True)
class ServoPacket:
    frame_rate_hz: int
    frame_count: int
    pwm_us: tuple[int, ...]


def parse_servo_packet(data: bytes) -> ServoPacket:
    if len(data) < _HEADER.size:
        raise PacketError(f"{len(data)} bytes: shorter than the 8-byte header")
    magic, frame_rate, frame_count = _HEADER.unpack_from(data)
    channels = {MAGIC_16: 16, MAGIC_32: 32}.get(magic)
    if channels is None:
        raise PacketError(f"magic {magic} is neither {MAGIC_16} (16 channels) nor {MAGIC_32} (32 channels)")
    expected = _HEADER.size + 2 * channels
    if len(data) != expected:
        raise PacketError(f"{len(data)} bytes for {channels} channels: {expected} expected")
    pwm = struct.unpack_from(f"<{channels}H", data, _HEADER.size)
    return ServoPacket(frame_rate, frame_count, pwm)


def encode_servo_packet(frame_rate_hz: int, frame_count: int, pwm_us: Sequence[int]) -> bytes:
    """The packet ArduPilot sends (16 channels; for tests and the test peer)."""
    channels = list(pwm_us) + [0] * (16 - len(pwm_us))
    return _HEADER.pack(MAGIC_16, frame_rate_hz, frame_count & 0xFFFFFFFF) + struct.pack("<16H", *channels[:16])


def controls_from_pwm(pwm_us: Sequence[int], rotor_count: int) -> tuple[float, ...]:
    """Rotor inputs u_i in [0, 1] for the first ``rotor_count`` channels."""
    return tuple(min(max((float(p) - PWM_MIN_US) / (PWM_MAX_US - PWM_MIN_US), 0.0), 1.0)
                 for p in pwm_us[:rotor_count])


def state_json(time_s: float, position_enu, velocity_enu, orientation_enu_flu, angular_velocity_flu,
               specific_force_flu) -> str:
    """The reply line for a ground-truth state (ENU/FLU in, NED/FRD out), newline-terminated."""
    values = [time_s, *position_enu, *velocity_enu, *orientation_enu_flu, *angular_velocity_flu, *specific_force_flu]
    if not all(math.isfinite(v) for v in values):
        raise ValueError("state with a non-finite value")
    state = {
        "timestamp": time_s,
        "imu": {"gyro": list(body_to_frd(angular_velocity_flu)), "accel_body": list(body_to_frd(specific_force_flu))},
        "position": list(world_to_ned(position_enu)),
        "velocity": list(world_to_ned(velocity_enu)),
        "quaternion": list(orientation_to_ned(orientation_enu_flu)),
    }
    return json.dumps(state) + "\n"
