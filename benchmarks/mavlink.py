"""MAVLink telemetry rates in the default graph and command-to-motion latency, seen by a pymavlink client.

Launches ``sim.launch.yaml mavlink:=true`` (camera, depth noise, viewer, recorder and AirSim server off;
real time) with the node's ports moved to 24550/24540, then on the ground-station link:

- counts every message for 10 s of wall time and divides by the simulation time elapsed (the rates are
  set in simulation time) and by the wall time; goal (issue 33): ATTITUDE and LOCAL_POSITION_NED >= 50 Hz;
- arms, takes off to 3 m, switches to Offboard with a 2 m/s north velocity stream, and times, ten times,
  from sending a new velocity setpoint (alternating north/south) to the first LOCAL_POSITION_NED whose
  north velocity has changed by 0.2 m/s toward it (wall time; the vehicle's own response is included).

Run: ``tools/dev.sh bench mavlink``.
"""

from __future__ import annotations

import collections
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pymavlink import mavutil

REPO = Path(__file__).resolve().parents[1]
GCS_PORT, API_PORT = 24550, 24540
mavlink = mavutil.mavlink
VELOCITY_ONLY = 0b110111000111


def launch(log) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "aerial_sim", "launch", "sim.launch.yaml", "mission:=none", "scene:=empty",
         "record:=false", "viewer:=false", "use_camera:=false", "use_depth_noise:=false", "airsim_api:=false",
         "mavlink:=true", f"mavlink_gcs_port:={GCS_PORT}", f"mavlink_api_port:={API_PORT}",
         "mavlink_gcs_local_port:=0", "mavlink_api_local_port:=0", f"run_dir:={tempfile.mkdtemp()}"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO)


def rates(m) -> None:
    counts = collections.Counter()
    first = last = None
    start = time.monotonic()
    while time.monotonic() - start < 10.0:
        message = m.recv_match(blocking=True, timeout=1)
        if message is None:
            continue
        counts[message.get_type()] += 1
        if message.get_type() == "ATTITUDE":
            first = first if first is not None else message.time_boot_ms
            last = message.time_boot_ms
    wall = time.monotonic() - start
    sim = (last - first) / 1000.0 if first is not None and last != first else wall
    print(f"telemetry over {wall:.1f} s wall, {sim:.1f} s sim (real-time factor {sim / wall:.2f}):")
    for kind in ("ATTITUDE", "ATTITUDE_QUATERNION", "LOCAL_POSITION_NED", "GLOBAL_POSITION_INT", "GPS_RAW_INT",
                 "EXTENDED_SYS_STATE", "VFR_HUD", "ALTITUDE", "SYS_STATUS", "BATTERY_STATUS", "HEARTBEAT"):
        print(f"  {kind:22s} {counts[kind] / sim:6.1f} Hz of sim time  {counts[kind] / wall:6.1f} Hz of wall time")


def command(m, cmd, *params) -> int:
    p = list(params) + [0.0] * (7 - len(params))
    m.mav.command_long_send(1, 1, cmd, 0, *p)
    ack = m.recv_match(type="COMMAND_ACK", blocking=True, timeout=10, condition=f"COMMAND_ACK.command=={cmd}")
    return ack.result if ack else -1


def latency(m) -> None:
    home = m.recv_match(type="HOME_POSITION", blocking=True, timeout=10)
    assert command(m, mavlink.MAV_CMD_COMPONENT_ARM_DISARM, 1) == 0
    assert command(m, mavlink.MAV_CMD_NAV_TAKEOFF, 0, 0, 0, float("nan"), float("nan"), float("nan"),
                   home.altitude / 1000.0 + 3.0) == 0
    while m.recv_match(type="GLOBAL_POSITION_INT", blocking=True, timeout=2).relative_alt < 2800:
        pass

    def setpoint(vn):
        m.mav.set_position_target_local_ned_send(0, 1, 1, mavlink.MAV_FRAME_LOCAL_NED, VELOCITY_ONLY, 0, 0, 0,
                                                 vn, 0, 0, 0, 0, 0, 0, 0)
    setpoint(0.0)
    assert command(m, mavlink.MAV_CMD_DO_SET_MODE, 1, 6, 0) == 0
    samples = []
    target = 2.0
    for _ in range(10):
        before = m.recv_match(type="LOCAL_POSITION_NED", blocking=True, timeout=2).vx
        sent = time.monotonic()
        setpoint(target)
        last_sent = sent
        while True:
            if time.monotonic() - last_sent > 0.05:
                setpoint(target)
                last_sent = time.monotonic()
            position = m.recv_match(type="LOCAL_POSITION_NED", blocking=True, timeout=2)
            if (position.vx - before) * (1 if target > before else -1) >= 0.2:
                samples.append(time.monotonic() - sent)
                break
        settle = time.monotonic()
        while time.monotonic() - settle < 1.5:
            setpoint(target)
            m.recv_match(type="LOCAL_POSITION_NED", blocking=True, timeout=1)
            time.sleep(0.05)
        target = -target
    print(f"command-to-motion latency (setpoint sent -> north velocity changed by 0.2 m/s), {len(samples)} runs: "
          f"median {statistics.median(samples) * 1000:.0f} ms, min {min(samples) * 1000:.0f} ms, "
          f"max {max(samples) * 1000:.0f} ms (wall time)")


def main() -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as log:
        graph = launch(log)
    try:
        m = mavutil.mavlink_connection(f"udpin:127.0.0.1:{GCS_PORT}", source_system=255)
        m.wait_heartbeat(timeout=60)
        time.sleep(3.0)  # discovery settles
        while m.recv_match(blocking=False) is not None:  # what queued meanwhile is not part of the count
            pass
        rates(m)
        latency(m)
    finally:
        os.killpg(graph.pid, signal.SIGINT)
        graph.wait(timeout=20)


if __name__ == "__main__":
    main()
