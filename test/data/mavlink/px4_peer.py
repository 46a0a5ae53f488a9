"""Plays PX4 SITL's side of the simulator MAVLink interface as simulator_mavlink does: connects over TCP
to the simulator's port, reads HIL_SENSOR / HIL_GPS / HIL_STATE_QUATERNION, and answers every HIL_SENSOR
with HIL_ACTUATOR_CONTROLS (armed; motors 0..1 in the first four controls). Its "flight code" is
aerial_sim's own cascaded controller on the HIL state (attitude and position from HIL_STATE_QUATERNION,
rates from HIL_SENSOR's gyro), holding 2 m above the start.

    python px4_peer.py PORT SECONDS [--delay S] [--steps N] [--sim-seconds S]   -> one JSON line with what it saw

SECONDS is the longest it runs (wall clock); ``--sim-seconds`` stops it once S seconds of simulation time
have passed since its first answer. ``--delay`` makes it a slow PX4: it takes S wall seconds over every
answer; ``--steps`` stops after answering N HIL_SENSORs once the vehicle has moved (how many steps it
answered before that depends on how fast its first answer came) and adds the path it saw
(HIL_STATE_QUATERNION's raw fields per step). ``--keep-up`` (out of lockstep) answers only the newest of
the HIL_SENSORs that arrived together: a peer starved of CPU on a loaded machine that answered every queued
one would fly on ever older states (its lag grows without bound) and never climb.
"""

import collections
import json
import socket
import time

from pymavlink.dialects.v20 import common as mav

from aerial_sim.airsim.ned import body_to_flu, orientation_to_enu, world_to_enu
from aerial_sim.control.controller import CascadedController, ControllerParams, Setpoint, VehicleState
from aerial_sim.control.geometry import yaw_of
from aerial_sim.environment.geodesy import HomePoint, geodetic_to_enu
from aerial_sim.vehicles.multirotor import load_vehicle
from peer_cli import peer_arguments


def main(port: int, seconds: float, delay_s: float = 0.0, steps: int = 0, sim_seconds: float = 0.0,
         keep_up: bool = False) -> None:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.settimeout(1.0)
    parser, out = mav.MAVLink(None), mav.MAVLink(None, srcSystem=1, srcComponent=1)
    controller = CascadedController(ControllerParams(), load_vehicle("quad_x"))
    home = HomePoint()
    counts = collections.Counter()
    state = start = target = first_time = None
    last_sensor_time = None
    accel_at_start = None
    answering_since = None  # wall time of the first HIL_SENSOR answered
    sensor_times, path, batches = [], [], []
    answered_at_liftoff = None  # how many HIL_SENSORs were answered when the vehicle first moved
    began = time.monotonic()
    deadline = began + seconds

    def done() -> bool:
        if steps and answered_at_liftoff is not None and len(sensor_times) - answered_at_liftoff >= steps:
            return True
        return bool(sim_seconds and first_time is not None and last_sensor_time - first_time >= sim_seconds)

    while time.monotonic() < deadline and not done():
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        messages = parser.parse_buffer(data) or []
        if sensor_times:  # answering: how many steps came at once (in lockstep one, however slow the answers)
            batches.append(sum(m.get_type() == "HIL_SENSOR" for m in messages))
        newest_sensor = max((i for i, m in enumerate(messages) if m.get_type() == "HIL_SENSOR"), default=-1)
        for index, message in enumerate(messages):
            kind = message.get_type()
            counts[kind] += 1
            if kind == "HIL_SENSOR" and keep_up and index != newest_sensor:
                continue  # behind: a real-time controller flies on the newest sample, not every queued one
            if kind == "HIL_STATE_QUATERNION":
                position = geodetic_to_enu(message.lat / 1e7, message.lon / 1e7, message.alt / 1000.0, home)
                velocity = world_to_enu((message.vx / 100.0, message.vy / 100.0, message.vz / 100.0))
                state = (tuple(position), orientation_to_enu(message.attitude_quaternion), velocity)
                path.append((message.time_usec, message.lat, message.lon, message.alt))
                if answered_at_liftoff is None and path[-1][1:] != path[0][1:]:
                    answered_at_liftoff = len(sensor_times)
                if start is None:
                    start = state[0]
                    target = (start[0], start[1], start[2] + 2.0)
            elif kind == "HIL_SENSOR" and state is not None:
                now = message.time_usec / 1e6
                first_time = now if first_time is None else first_time
                accel_at_start = accel_at_start or [message.xacc, message.yacc, message.zacc]
                dt = 0.004 if last_sensor_time is None or not 0 < now - last_sensor_time < 0.1 else now - last_sensor_time
                last_sensor_time = now
                vehicle = VehicleState(state[0], state[1], state[2], body_to_flu((message.xgyro, message.ygyro,
                                                                                 message.zgyro)))
                output = controller.update(vehicle, Setpoint(position=target, yaw=yaw_of(state[1])), dt)
                controls = list(output.controls) + [0.0] * (16 - len(output.controls))
                sensor_times.append(message.time_usec)
                answering_since = answering_since or time.monotonic()
                if delay_s > 0:
                    time.sleep(delay_s)  # a slow PX4: the answer comes late
                reply = mav.MAVLink_hil_actuator_controls_message(message.time_usec, controls,
                                                                  mav.MAV_MODE_FLAG_SAFETY_ARMED, 0)
                sock.sendall(reply.pack(out))
    ended = time.monotonic()
    seen = {"wall_s": round(ended - began, 2), "answering_wall_s": ended - answering_since if answering_since else 0.0, "counts": dict(counts), "sim_s": (last_sensor_time or 0) - (first_time or 0), "start": start,
            "final": state[0] if state else None, "accel_at_start": accel_at_start}
    if steps:
        seen.update(sensor_times=sensor_times, path=path, batches=batches)
    print(json.dumps(seen))


if __name__ == "__main__":
    parsed = peer_arguments()
    main(parsed.port, parsed.seconds, parsed.delay, parsed.steps, parsed.sim_seconds, parsed.keep_up)
