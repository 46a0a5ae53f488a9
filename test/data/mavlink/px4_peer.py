"""Plays PX4 SITL's side of the simulator MAVLink interface as simulator_mavlink does: connects over TCP
to the simulator's port, reads HIL_SENSOR / HIL_GPS / HIL_STATE_QUATERNION, and answers every HIL_SENSOR
with HIL_ACTUATOR_CONTROLS (armed; motors 0..1 in the first four controls). Its "flight code" is
aerial_sim's own cascaded controller on the HIL state (attitude and position from HIL_STATE_QUATERNION,
rates from HIL_SENSOR's gyro), holding 2 m above the start.

    python px4_peer.py PORT SECONDS        -> one JSON line with what it saw
"""

import collections
import json
import socket
import sys
import time

from pymavlink.dialects.v20 import common as mav

from aerial_sim.airsim.ned import body_to_flu, orientation_to_enu, world_to_enu
from aerial_sim.control.controller import CascadedController, ControllerParams, Setpoint, VehicleState
from aerial_sim.control.geometry import yaw_of
from aerial_sim.environment.geodesy import HomePoint, geodetic_to_enu
from aerial_sim.vehicles.multirotor import load_vehicle


def main(port: int, seconds: float) -> None:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.settimeout(1.0)
    parser, out = mav.MAVLink(None), mav.MAVLink(None, srcSystem=1, srcComponent=1)
    controller = CascadedController(ControllerParams(), load_vehicle("quad_x"))
    home = HomePoint()
    counts = collections.Counter()
    state = start = target = first_time = None
    last_sensor_time = None
    accel_at_start = None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        for message in parser.parse_buffer(data) or []:
            kind = message.get_type()
            counts[kind] += 1
            if kind == "HIL_STATE_QUATERNION":
                position = geodetic_to_enu(message.lat / 1e7, message.lon / 1e7, message.alt / 1000.0, home)
                velocity = world_to_enu((message.vx / 100.0, message.vy / 100.0, message.vz / 100.0))
                state = (tuple(position), orientation_to_enu(message.attitude_quaternion), velocity)
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
                reply = mav.MAVLink_hil_actuator_controls_message(message.time_usec, controls,
                                                                  mav.MAV_MODE_FLAG_SAFETY_ARMED, 0)
                sock.sendall(reply.pack(out))
    print(json.dumps({"counts": dict(counts), "sim_s": (last_sensor_time or 0) - (first_time or 0),
                      "start": start, "final": state[0] if state else None, "accel_at_start": accel_at_start}))


if __name__ == "__main__":
    main(int(sys.argv[1]), float(sys.argv[2]))
