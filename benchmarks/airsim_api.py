"""AirSim API speed through the real Python clients: getMultirotorState calls/s and simGetImages round trips/s.

Launches the physics node (real time, clock_speed 1) and the ``airsim_api`` node
(scene ``urban``, vehicle 2 m up so the camera sees the street), then runs the
same loop with each real client (``airsim`` 1.8.1 and ``cosysairsim`` 3.5.0, in
the cached venvs the tests build, see test/airsim_clients.py):

- ``getMultirotorState`` back to back for 3 s;
- ``simGetImages`` of DepthPlanar (floats) + Segmentation + Scene (uncompressed),
  460x320, back to back for 5 s; and the same with PNG Scene/Segmentation.

It also times the server's own share in-process (dispatch + msgpack encoding, no
socket, no client). Goals (issue 13): >= 1000 state calls/s, images >= 30 Hz.
Run: ``tools/dev.sh bench airsim_api``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "test"))  # the client venv builder lives with the tests

CLIENT_LOOP = r"""
import importlib, json, sys, time
airsim = importlib.import_module(sys.argv[1])
client = airsim.MultirotorClient(port=int(sys.argv[2]))
for _ in range(300):  # until ground truth has reached the server (DDS discovery)
    try:
        client.getMultirotorState(); break
    except Exception:
        time.sleep(0.1)
def rate(call, seconds):
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        call(); count += 1
    return count / (time.perf_counter() - start)
raw = [airsim.ImageRequest("0", airsim.ImageType.DepthPlanar, True),
       airsim.ImageRequest("0", airsim.ImageType.Segmentation, False, False),
       airsim.ImageRequest("0", airsim.ImageType.Scene, False, False)]
png = [airsim.ImageRequest("0", airsim.ImageType.DepthPlanar, True),
       airsim.ImageRequest("0", airsim.ImageType.Segmentation),
       airsim.ImageRequest("0", airsim.ImageType.Scene)]
print(json.dumps({"state": rate(client.getMultirotorState, 3.0),
                  "images_raw": rate(lambda: client.simGetImages(raw), 5.0),
                  "images_png": rate(lambda: client.simGetImages(png), 5.0)}))
"""


def server_share() -> dict:
    """Per-call cost of the server alone: the API method and the reply's encoding (no socket, no client)."""
    from aerial_sim.airsim.api import AirSimApi
    from aerial_sim.airsim.graph import KinematicsReading, ServiceAnswer, SimClock
    from aerial_sim.airsim.camera_rig import CameraRig
    from aerial_sim.airsim.rpc import ContainsPrepacked, encode_response
    from aerial_sim.vehicles.multirotor import load_vehicle
    from aerial_sim.world.camera import CameraParams
    from aerial_sim.world.colliders import scene_colliders
    from aerial_sim.world.scene import load_scene

    class Link:
        name, vehicle, controller_mode = "drone1", load_vehicle("quad_x"), "hold"
        kinematics = KinematicsReading(1.0, (0.0, 0.0, 2.0), (1.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0))

        async def arm(self, arm):  # AirSim starts vehicles armed: the API arms each at its first call
            return ServiceAnswer(True, "")

    class Graph:
        vehicles, clock, paused = {"drone1": Link()}, SimClock(), False

    scene = load_scene("urban")
    api = AirSimApi(Graph(), CameraRig(scene, CameraParams()), scene_colliders=scene_colliders(scene))
    requests = [{"camera_name": "0", "image_type": 1, "pixels_as_float": True, "compress": False},
                {"camera_name": "0", "image_type": 5, "pixels_as_float": False, "compress": False},
                {"camera_name": "0", "image_type": 0, "pixels_as_float": False, "compress": False}]

    async def timed(method, params, repeats, fresh_state=False):
        best = float("inf")
        for _ in range(repeats):
            if fresh_state:  # a new ground-truth snapshot each call: no cached answer
                Link.kinematics = dataclasses.replace(Link.kinematics, time_s=time.perf_counter())
            start = time.perf_counter()
            result = await api.dispatch(method, params)
            payload = ContainsPrepacked(result) if isinstance(result, list) else result
            encode_response(1, None, payload)
            best = min(best, time.perf_counter() - start)
        return best

    async def main():
        return {"state_cached_us": 1e6 * await timed("getMultirotorState", [""], 2000),
                "state_fresh_us": 1e6 * await timed("getMultirotorState", [""], 500, fresh_state=True),
                "images_ms": 1e3 * await timed("simGetImages", [requests, ""], 20)}

    return asyncio.run(main())


def launch_graph(log_path: Path) -> tuple[subprocess.Popen, int]:
    launch_file = Path(tempfile.mkdtemp()) / "airsim_bench.launch.yaml"
    launch_file.write_text(
        "launch:\n"
        f"  - include: {{file: {REPO}/launch/physics.launch.yaml, arg: [{{name: scene, value: urban}}, "
        "{name: spawn_z, value: '2.0'}]}\n"
        f"  - include: {{file: {REPO}/launch/airsim_api.launch.yaml, arg: [{{name: scene, value: urban}}, "
        "{name: port, value: '0'}]}\n"
    )
    log = open(log_path, "w")
    graph = subprocess.Popen([sys.executable, "-m", "aerial_sim", "launch", str(launch_file)], stdout=log,
                             stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"AirSim API on 127\.0\.0\.1:(\d+)", log_path.read_text())
        if found:
            time.sleep(2.0)  # ground truth flowing
            return graph, int(found.group(1))
        time.sleep(0.2)
    os.killpg(graph.pid, signal.SIGINT)
    raise SystemExit(f"the airsim_api node did not start; see {log_path}")


def main() -> int:
    from airsim_clients import client_python

    from _domain import private_domain

    private_domain()
    print("server share (in-process, no socket):")
    share = server_share()
    print(f"  getMultirotorState: {share['state_cached_us']:.0f} us (same snapshot), "
          f"{share['state_fresh_us']:.0f} us (new snapshot)")
    print(f"  simGetImages depth + segmentation + scene 460x320, urban: {share['images_ms']:.1f} ms "
          f"= {1e3 / share['images_ms']:.0f} Hz")
    pythons = {name: client_python(name) for name in ("airsim", "cosysairsim")}
    log_path = Path(tempfile.mkdtemp()) / "graph.log"
    graph, port = launch_graph(log_path)
    try:
        print("through the real clients (physics node in real time beside the server):")
        for name, python in pythons.items():
            out = subprocess.run([str(python), "-c", CLIENT_LOOP, name, str(port)], capture_output=True, text=True,
                                 timeout=120)
            if out.returncode != 0:
                print(f"  {name}: failed\n{out.stderr[-2000:]}")
                continue
            rates = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"  {name:12s} getMultirotorState {rates['state']:7.0f} calls/s   simGetImages "
                  f"{rates['images_raw']:5.1f} Hz (uncompressed), {rates['images_png']:5.1f} Hz (PNG)")
    finally:
        os.killpg(graph.pid, signal.SIGINT)
        graph.wait(timeout=20)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
