"""Real-time factor of lockstep with PX4 in the loop: how fast the graph runs when each 4 ms physics step
waits for PX4's HIL_ACTUATOR_CONTROLS (issue 33).

Launches ``sim.launch.yaml autopilot:=px4 lockstep:=true`` (camera, depth noise, viewer, recorder and AirSim
server off) and plays PX4's side with ``test/data/mavlink/px4_peer.py`` (simulator_mavlink's messages and
lockstep; its flight code is this project's cascaded controller holding 2 m above the start), which
answers every HIL_SENSOR at once. The real-time factor is the simulated time the peer saw (HIL_SENSOR
stamps) over the wall time it spent answering them. Two graphs: the sensor nodes on (the default: each
HIL_SENSOR carries the newest IMU, barometer, magnetometer and GPS samples) and off (HIL_SENSOR carries
ground truth: the least the lockstep loop can do). A real PX4 adds its own time per step (about
0.1-0.3 ms of its estimator and controllers on a desktop core), which this peer does not.

Run: ``tools/dev.sh bench px4_lockstep`` (``--seconds N``: wall time per graph, default 20).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import record, row

REPO = Path(__file__).resolve().parents[1]
PEER = REPO / "test" / "data" / "mavlink" / "px4_peer.py"
PORT = 24560
SENSORS_OFF = ("use_imu:=false", "use_gps:=false", "use_magnetometer:=false", "use_barometer:=false")


def launch(log, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "aerial_sim", "launch", "sim.launch.yaml", "mission:=none", "scene:=empty",
         "record:=false", "viewer:=false", "use_camera:=false", "use_depth_noise:=false", "airsim_api:=false",
         "autopilot:=px4", "lockstep:=true", f"px4_port:={PORT}", f"run_dir:={tempfile.mkdtemp()}", *args],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO)


def measure(seconds: float, *args: str) -> dict:
    with tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False) as log:
        graph = launch(log, *args)
        try:
            deadline = time.monotonic() + 90
            while "PX4 simulator interface" not in Path(log.name).read_text():
                if time.monotonic() > deadline or graph.poll() is not None:
                    raise RuntimeError(f"the PX4 bridge did not start:\n{Path(log.name).read_text()[-3000:]}")
                time.sleep(0.5)
            time.sleep(3.0)  # the nodes' discovery settles (lockstep waits for every participant)
            peer = subprocess.run([sys.executable, str(PEER), str(PORT), str(seconds)], capture_output=True,
                                  text=True, timeout=seconds + 60, cwd=PEER.parent)
            if peer.returncode != 0:
                raise RuntimeError(peer.stderr[-3000:])
            return json.loads(peer.stdout.strip().splitlines()[-1])
        finally:
            os.killpg(graph.pid, signal.SIGINT)
            graph.wait(timeout=30)


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--seconds", type=float, default=20.0, help="wall time each graph is run, s")
    arguments.add_argument("--no-record", action="store_true", help="print only; leave doc/results alone")
    parsed = arguments.parse_args()
    rows = []
    for label, args in (("sensor nodes on", ()), ("sensor nodes off (HIL_SENSOR from ground truth)", SENSORS_OFF)):
        seen = measure(parsed.seconds, *args)
        factor = seen["sim_s"] / seen["answering_wall_s"]
        steps = seen["counts"].get("HIL_SENSOR", 0)
        print(f"lockstep with the PX4 peer, {label}: {seen['sim_s']:.2f} s simulated in {seen['answering_wall_s']:.2f} s "
              f"wall = real-time factor {factor:.2f} ({steps} steps, {steps / seen['answering_wall_s']:.0f} steps/s; "
              f"hover at {seen['final'][2] - seen['start'][2]:+.2f} m)")
        rows.append(row(f"real-time factor, {label}", round(factor, 2), "x real time",
                        f"{steps / seen['answering_wall_s']:.0f} lockstep steps/s of 4 ms"))
    record("px4_lockstep", "Lockstep with the PX4 peer: real-time factor", rows,
           notes="sim.launch.yaml autopilot:=px4 lockstep:=true; test/data/mavlink/px4_peer.py answers every "
                 "HIL_SENSOR at once (a real PX4 adds its own time per step)")


if __name__ == "__main__":
    main()
