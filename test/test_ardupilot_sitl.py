"""ArduPilot's JSON SITL interface (issue 33 item 2): the packet format and state line as SIM_JSON.cpp
reads them, and a hover flown through the ``ardupilot_sitl`` node by a peer that plays ArduPilot's side
(test/data/mavlink/ardupilot_peer.py) with the flight controller left out of the graph."""

from __future__ import annotations

import json
import math
import re

import pytest

from aerial_sim.sitl.ardupilot_json import (PacketError, controls_from_pwm, encode_servo_packet, parse_servo_packet,
                                            state_json)
from conftest import requires_ros
from sitl_bridges import launch_bridge, run_peer, wait_for_bridge


def test_servo_packets_parse_as_ardupilot_packs_them_and_bad_ones_are_refused():
    packet = parse_servo_packet(encode_servo_packet(400, 7, [1000, 1500, 2000, 1250]))
    assert (packet.frame_rate_hz, packet.frame_count) == (400, 7)
    assert controls_from_pwm(packet.pwm_us, 4) == (0.0, 0.5, 1.0, 0.25)
    assert controls_from_pwm([900, 2100], 2) == (0.0, 1.0)  # clipped to the rotor's range
    for bad in (b"", b"\x00" * 7, encode_servo_packet(400, 1, [1500])[:-2], b"\x01\x00" + bytes(38)):
        with pytest.raises(PacketError):
            parse_servo_packet(bad)


def test_state_line_is_ned_frd_in_the_keys_and_layout_ardupilot_parses():
    # 1 m east, 2 m up, flying north at 3 m/s, level facing east (ENU yaw 0), at rest on the IMU.
    line = state_json(1.5, (1.0, 0.0, 2.0), (0.0, 3.0, 0.0), (1.0, 0.0, 0.0, 0.0), (0.1, 0.0, 0.0), (0.0, 0.0, 9.81))
    assert line.endswith("\n")
    state = json.loads(line)
    assert state["position"] == [0.0, 1.0, -2.0] and state["velocity"] == [3.0, 0.0, -0.0]
    assert state["imu"]["accel_body"] == [0.0, -0.0, -9.81] and state["imu"]["gyro"] == [0.1, -0.0, -0.0]
    w, x, y, z = state["quaternion"]  # facing east in NED: yaw +90 deg
    assert math.degrees(math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))) == pytest.approx(90.0)
    # SIM_JSON.cpp reads vectors with sscanf("[%f, %f, %f]"): json.dumps writes exactly that layout.
    assert re.search(r'"position": \[[-0-9.e]+, [-0-9.e]+, [-0-9.e]+\]', line)
    with pytest.raises(ValueError):
        state_json(math.nan, (0, 0, 0), (0, 0, 0), (1, 0, 0, 0), (0, 0, 0), (0, 0, 0))


@requires_ros
@pytest.mark.ros
def test_a_peer_playing_ardupilot_hovers_the_vehicle_through_the_bridge(launch, tmp_path):
    graph = launch_bridge(launch, tmp_path, "ardupilot")
    wait_for_bridge(graph, "ardupilot")
    # 9 s of simulation, however slowly a loaded machine runs it (the peer waits for the first ground truth)
    seen = run_peer("ardupilot", "80", "--sim-seconds", "9")
    assert seen["answers"] > 0.9 * seen["frames"]  # nearly every servo packet answered
    assert seen["accel_body_at_start"][2] == pytest.approx(-9.8, abs=0.2)  # at rest: specific force up = -z FRD
    assert seen["sim_s"] >= 8.9  # the 9 s flown, not cut short by the wall-clock limit
    start, final = seen["start"], seen["final"]
    assert final[2] - start[2] == pytest.approx(2.0, abs=0.25), graph.output()[-3000:]  # hovering 2 m up
    assert math.hypot(final[0] - start[0], final[1] - start[1]) < 0.3
    assert graph.alive()


@requires_ros
@pytest.mark.ros
def test_in_lockstep_each_frame_of_a_slow_ardupilot_is_one_simulation_step(launch, tmp_path):
    graph = launch_bridge(launch, tmp_path, "ardupilot", "lockstep:=true", "use_imu:=false", "use_gps:=false",
                          "use_magnetometer:=false", "use_barometer:=false")
    wait_for_bridge(graph, "ardupilot")
    seen = run_peer("ardupilot", "60", "--delay", "0.012", "--steps", "250")  # 3x slower than a 4 ms step
    steps = [round((b - a) * 1e6) for a, b in zip(seen["stamps"], seen["stamps"][1:])]
    assert steps == [4000] * len(steps)  # each servo packet answered with the state one step after the last
    assert seen["final"][2] - seen["start"][2] > 0.5  # and that flies: climbing towards 2 m
