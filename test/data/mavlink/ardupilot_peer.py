"""Plays ArduPilot SITL's side of the JSON interface exactly as SIM_JSON.cpp does: every step it sends a
16-channel servo packet (magic 18458, frame rate, frame count, PWM) to the simulator's UDP port and blocks
for the newline-terminated JSON state, parsing the keys ArduPilot reads. Its "flight code" is aerial_sim's
own cascaded controller (on the NED/FRD state converted back), holding 2 m above the start.

    python ardupilot_peer.py PORT SECONDS [--delay S] [--steps N] [--sim-seconds S]   -> one JSON line with what it saw

SECONDS is the longest it runs (wall clock); ``--sim-seconds`` stops it once S seconds of simulation time
have passed since its first state. ``--delay`` makes it a slow ArduPilot (S wall seconds over every step); ``--steps`` stops after N
answered frames and adds the timestamps of the states it got.
"""

import json
import socket
import time

from aerial_sim.airsim.ned import body_to_flu, orientation_to_enu, world_to_enu
from aerial_sim.control.controller import CascadedController, ControllerParams, Setpoint, VehicleState
from aerial_sim.control.geometry import yaw_of
from aerial_sim.sitl.ardupilot_json import encode_servo_packet
from aerial_sim.vehicles.multirotor import load_vehicle
from peer_cli import peer_arguments


def main(port: int, seconds: float, delay_s: float = 0.0, steps: int = 0, sim_seconds: float = 0.0) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(1.0)
    controller = CascadedController(ControllerParams(), load_vehicle("quad_x"))
    pwm, frame, states, start, target = [1000] * 4, 0, [], None, None
    last_time = None
    deadline = time.monotonic() + seconds
    while (time.monotonic() < deadline and not (steps and len(states) >= steps)
           and not (sim_seconds and states and states[-1][0] - states[0][0] >= sim_seconds)):
        frame += 1
        sock.sendto(encode_servo_packet(400, frame, pwm), ("127.0.0.1", port))
        try:
            line = sock.recv(65536).decode()
        except socket.timeout:
            continue  # ArduPilot resends the servos when no state comes back
        state = json.loads(line)
        assert line.endswith("\n") and set(state) >= {"timestamp", "imu", "position", "velocity", "quaternion"}
        now = state["timestamp"]
        vehicle = VehicleState(world_to_enu(state["position"]), orientation_to_enu(state["quaternion"]),
                               world_to_enu(state["velocity"]), body_to_flu(state["imu"]["gyro"]))
        if start is None:
            start = vehicle.position
            target = (start[0], start[1], start[2] + 2.0)
        dt = 0.004 if last_time is None or not 0 < now - last_time < 0.1 else now - last_time
        last_time = now
        output = controller.update(vehicle, Setpoint(position=target, yaw=yaw_of(vehicle.orientation)), dt)
        pwm = [int(round(1000 + 1000 * u)) for u in output.controls]
        if delay_s > 0:
            time.sleep(delay_s)  # a slow ArduPilot: the next frame comes late
        states.append((now, vehicle.position, state["imu"]["accel_body"]))
    final = states[-1]
    seen = {"frames": frame, "answers": len(states), "sim_s": final[0] - states[0][0], "start": start,
            "final": final[1], "accel_body_at_start": states[0][2]}
    if steps:
        seen["stamps"] = [s[0] for s in states]
    print(json.dumps(seen))


if __name__ == "__main__":
    parsed = peer_arguments()
    main(parsed.port, parsed.seconds, parsed.delay, parsed.steps, parsed.sim_seconds)
