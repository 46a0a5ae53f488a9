"""What the SITL bridge tests share: the graph launched with an autopilot's bridge in place of the built-in
controller (heavy optional nodes off), and a peer process that plays the autopilot's side."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from conftest import private_udp_port

PEERS = Path(__file__).parent / "data" / "mavlink"
#: autopilot -> (the bridge's port argument, the line it logs once it serves, port offset in this test's range)
BRIDGES = {"px4": ("px4_port", "PX4 simulator interface", 16),
           "ardupilot": ("ardupilot_port", "ArduPilot JSON SITL interface", 15)}


def bridge_port(autopilot: str, second: bool = False) -> int:
    """The bridge's port in this test process's range (``second``: for a graph beside the first)."""
    return private_udp_port(BRIDGES[autopilot][2] + (2 if second else 0))


def launch_bridge(launch, tmp_path, autopilot: str, *args: str, domain_id: int | None = None, port: int | None = None):
    """``sim.launch.yaml autopilot:=<autopilot>`` (the bridge on ``port``, default :func:`bridge_port`)."""
    port_arg, _, _ = BRIDGES[autopilot]
    return launch("sim.launch.yaml", "mission:=none", "scene:=empty", "record:=false", "viewer:=false",
                  "use_camera:=false", "use_depth_noise:=false", "airsim_api:=false", f"autopilot:={autopilot}",
                  f"{port_arg}:={port or bridge_port(autopilot)}", f"run_dir:={tmp_path / f'run_{time.monotonic_ns()}'}",
                  *args, domain_id=domain_id)


def wait_for_bridge(graph, autopilot: str) -> None:
    """Until the bridge serves; the autopilot is the flight controller (no built-in one in the graph)."""
    banner = BRIDGES[autopilot][1]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and graph.alive() and banner not in graph.output():
        time.sleep(0.2)
    assert banner in graph.output(), graph.output()[-3000:]
    assert "flight_controller" not in graph.output()


def start_peer(autopilot: str, *args: str, port: int | None = None) -> subprocess.Popen:
    """``<autopilot>_peer.py PORT ARGS...`` started; :func:`peer_result` reads what it saw."""
    peer = PEERS / f"{autopilot}_peer.py"
    return subprocess.Popen([sys.executable, str(peer), str(port or bridge_port(autopilot)), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def peer_result(process: subprocess.Popen, timeout_s: float = 90) -> dict:
    stdout, stderr = process.communicate(timeout=timeout_s)
    assert process.returncode == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


def run_peer(autopilot: str, *args: str) -> dict:
    return peer_result(start_peer(autopilot, *args))
