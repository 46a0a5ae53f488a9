"""PX4's simulator MAVLink interface (issue 33 item 2): the HIL messages as PX4's simulator_mavlink reads
them, and a hover flown through the ``px4_sitl`` node by a peer playing PX4's side
(test/data/mavlink/px4_peer.py) with the built-in controller left out of the graph."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pymavlink.dialects.v20 import common as mav

from aerial_sim.sitl import px4_hil
from conftest import private_domain_id, requires_ros

PEER = Path(__file__).parent / "data" / "mavlink" / "px4_peer.py"


def test_hil_messages_carry_frd_ned_units_as_px4_reads_them():
    # Level, facing east (ENU yaw 0 = NED heading 90 deg), at rest: specific force +g up (FLU) = -g on z (FRD).
    sensor = px4_hil.hil_sensor(2.0, (0.0, 0.0, 9.81), (0.1, 0.2, 0.3), (2e-5, 0.0, -4e-5), 100000.0, 15.0)
    assert sensor.time_usec == 2_000_000
    assert (sensor.xacc, sensor.yacc, sensor.zacc) == pytest.approx((0.0, 0.0, -9.81))
    assert (sensor.xgyro, sensor.ygyro, sensor.zgyro) == pytest.approx((0.1, -0.2, -0.3))
    assert (sensor.xmag, sensor.ymag, sensor.zmag) == pytest.approx((0.2, 0.0, 0.4))  # gauss
    assert sensor.abs_pressure == pytest.approx(1000.0)  # hPa
    assert sensor.pressure_alt == pytest.approx(110.9, abs=0.5)  # standard atmosphere at 1000 hPa
    assert sensor.fields_updated == 0b1_1011_1111_1111
    gps = px4_hil.hil_gps(2.0, 47.6, -122.1, 130.0, (0.0, 3.0, -1.0))  # 3 m/s north, sinking 1 m/s
    assert (gps.vn, gps.ve, gps.vd, gps.cog, gps.fix_type) == (300, 0, 100, 0, 3)
    assert gps.alt == 130_000 and gps.lat == 476_000_000
    state = px4_hil.hil_state_quaternion(2.0, (1.0, 0.0, 0.0, 0.0), (0, 0, 0), 47.6, -122.1, 130.0, (1.0, 0.0, 0.0),
                                         (0.0, 0.0, 9.80665))
    w, x, y, z = state.attitude_quaternion
    assert math.degrees(2 * math.atan2(z, w)) == pytest.approx(90.0)  # NED heading east
    assert (state.vx, state.vy, state.zacc) == (0, 100, -1000)
    controls = [0.5, 1.5, float("nan"), -0.2] + [0.0] * 12
    armed = mav.MAVLink_hil_actuator_controls_message(0, controls, mav.MAV_MODE_FLAG_SAFETY_ARMED, 0)
    assert px4_hil.motor_controls(armed, 4) == ((0.5, 1.0, 0.0, 0.0), True)
    disarmed = mav.MAVLink_hil_actuator_controls_message(0, controls, 0, 0)
    assert px4_hil.motor_controls(disarmed, 4) == ((0.0, 0.0, 0.0, 0.0), False)


@requires_ros
@pytest.mark.ros
def test_a_peer_playing_px4_hovers_the_vehicle_through_the_bridge(launch, tmp_path):
    port = 20000 + 20 * private_domain_id() + 16
    graph = launch("sim.launch.yaml", "mission:=none", "scene:=empty", "record:=false", "viewer:=false",
                   "use_camera:=false", "use_depth_noise:=false", "airsim_api:=false", "autopilot:=px4",
                   f"px4_port:={port}", f"run_dir:={tmp_path / 'run'}")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and graph.alive() and "PX4 simulator interface" not in graph.output():
        time.sleep(0.2)
    assert "PX4 simulator interface" in graph.output(), graph.output()[-3000:]
    assert "flight_controller" not in graph.output()  # PX4 is the flight controller
    time.sleep(3.0)
    result = subprocess.run([sys.executable, str(PEER), str(port), "12"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    counts = seen["counts"]
    assert counts["HIL_SENSOR"] > 5 * counts["HIL_GPS"] > 0 and counts["HIL_STATE_QUATERNION"] > 0
    assert seen["accel_at_start"][2] == pytest.approx(-9.8, abs=0.5)
    assert seen["sim_s"] > 4.0
    start, final = seen["start"], seen["final"]
    assert final[2] - start[2] == pytest.approx(2.0, abs=0.3)
    assert math.hypot(final[0] - start[0], final[1] - start[1]) < 0.6  # the peer flies on 2-core-loaded timing
    assert "PX4 connected" in graph.output() and graph.alive()
