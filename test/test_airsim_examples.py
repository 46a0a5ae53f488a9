"""AirSim's own PythonClient examples' call sequences through the real ``airsim`` 1.8.1 client (issue 30).

A server on a free loopback port (the real transport, method table, flight controller and physics, run
in-process at a few times real time: no ROS) is driven by test/data/airsim/examples.py in the client's
own venv (test/airsim_clients.py); each test checks what the vehicle did from the server's ground truth.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

from aerial_sim.airsim.api import AirSimApi
from aerial_sim.airsim.camera_rig import CameraRig
from aerial_sim.airsim.rpc import MsgpackRpcServer
from aerial_sim.airsim.settings import parse_settings
from aerial_sim.world.camera import CameraParams
from aerial_sim.world.scene import load_scene

from airsim_clients import ClientUnavailable, client_python  # noqa: E402 (test helpers beside this file)
from airsim_inprocess import InProcessGraph  # noqa: E402

SCRIPT = Path(__file__).parent / "data" / "airsim" / "examples.py"


@pytest.fixture(scope="module")
def airsim_python():
    try:
        return client_python("airsim")
    except ClientUnavailable as error:
        pytest.skip(str(error))


class Server:
    """The AirSim server on an in-process graph, in a thread; ``track`` samples drone1's ground truth."""

    def __init__(self, settings: dict | None = None):
        self.loop = asyncio.new_event_loop()
        parsed = parse_settings(settings) if settings is not None else None
        self.graph = InProcessGraph(settings=parsed)
        cameras = CameraRig(load_scene("empty"), CameraParams(width=64, height=48), parsed)
        self.api = AirSimApi(self.graph, cameras, settings=parsed)
        self.rpc = MsgpackRpcServer(self.api.dispatch, "127.0.0.1", 0)
        self.track: list[tuple[float, tuple]] = []
        self.loop.run_until_complete(self.rpc.start())
        self.tasks = [self.loop.create_task(self.graph.run(real_time_factor=8.0)),
                      self.loop.create_task(self._record())]
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    async def _record(self):
        while True:
            self.track.append((self.graph.world.time_s, self.graph.world.ground_truth("drone1").position))
            await self.graph.clock.sleep(0.05)

    def positions(self) -> np.ndarray:
        return np.array([p for _, p in list(self.track)])

    def close(self):
        def stop():
            for task in self.tasks:
                task.cancel()
            self.loop.stop()

        asyncio.run_coroutine_threadsafe(self.rpc.close(), self.loop).result(5)
        self.loop.call_soon_threadsafe(stop)
        self.thread.join(5)


def run(python, server: Server, scenario: str, module: str = "airsim") -> dict:
    result = subprocess.run([str(python), str(SCRIPT), module, str(server.rpc.port), scenario],
                            capture_output=True, text=True, timeout=90)
    steps = {}
    for line in result.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            steps[record.pop("step")] = record
    assert result.returncode == 0 and "done" in steps, f"{scenario} failed:\n{result.stdout}\n{result.stderr}"
    return steps


@pytest.fixture
def server():
    server = Server()
    yield server
    server.close()


@pytest.mark.parametrize("module", ["airsim", "cosysairsim"])
def test_hello_drone_ends_with_armdisarm_false_after_reset(airsim_python, server, module):
    if module == "cosysairsim":
        try:
            airsim_python = client_python("cosysairsim")
        except ClientUnavailable as error:
            pytest.skip(str(error))
    steps = run(airsim_python, server, "hello", module)
    assert steps["arm"]["result"] is True and steps["disarm_after_reset"]["result"] is False
    track = server.positions()
    # NED (-10, 10, -10) is ENU (10, -10, 10): reached, then reset put it back at the start.
    assert np.min(np.linalg.norm(track - [10.0, -10.0, 10.0], axis=1)) < 0.5
    assert np.linalg.norm(track[-1][:2]) < 0.1 and track[-1][2] < 0.2


def test_disarm_in_the_air_stops_the_motors_and_the_vehicle_falls(airsim_python, server):
    steps = run(airsim_python, server, "disarm_in_air")
    assert steps["disarm"]["result"] is True and steps["landed_state"]["value"] == 0
    track = server.positions()
    assert track[:, 2].max() > 2.5 and track[-1][2] < 0.2


def test_drone_stress_test_flies_every_round_after_reset(airsim_python, server):
    steps = run(airsim_python, server, "stress")
    for index in range(2):
        assert steps[f"round{index}"]["position"][2] == pytest.approx(-10.0 + 0.02, abs=0.4)  # from 2 cm up


def test_path_py_flies_its_closed_path_and_lands(airsim_python, server):
    steps = run(airsim_python, server, "path")
    assert steps["path"]["result"] is True and steps["disarm"]["result"] is True
    track = server.positions()
    for north, east in ((20, 0), (20, -20), (0, -20)):  # ENU (east, north): each corner within the 4 m carrot
        assert np.min(np.linalg.norm(track[:, :2] - [east, north], axis=1)) < 0.46 * 4.0
    assert track[-1][2] < 0.2


def test_manual_mode_demo_climbs_and_moves_on_the_sticks(airsim_python, server):
    run(airsim_python, server, "manual")
    track = server.positions()
    # Rolled while yawing, the vehicle flies circles (11 m out and 3 m from the start at the end, here), so
    # where it ends depends on how long the script's wall-clock second lasted in sim time: the start too.
    assert track[-1][2] > 3.0 and np.hypot(track[:, 0], track[:, 1]).max() > 1.0


def test_cv_mode_poses_stay_and_every_image_request_is_answered(airsim_python):
    server = Server({"SimMode": "ComputerVision"})
    try:
        steps = run(airsim_python, server, "cv")
        for x in range(3):
            sizes = steps[f"images{x}"]["sizes"]
            assert all(w == 64 and h == 48 and n > 0 for w, h, n in sizes)  # Disparity, normals, flow, IR
        assert steps["pose"]["position"] == pytest.approx([-15.0, -15.0, -15.0], abs=0.05)  # held, not fallen
    finally:
        server.close()


def test_add_drone_adds_a_vehicle_that_flies_and_refuses_bad_requests(airsim_python, server):
    steps = run(airsim_python, server, "add")
    assert steps["add"]["result"] is True and steps["arm"]["result"] is True
    # Spawned at NED (2, 3, 0) facing east (NED yaw 90 deg), took off 3 m: the controller of the new vehicle flies it.
    assert steps["state"]["position"] == pytest.approx([2.0, 3.0, -3.0], abs=0.3)
    assert steps["state"]["yaw"] == pytest.approx(np.pi / 2, abs=0.05) and steps["state"]["landed"] == 1
    truth = server.graph.world.ground_truth("Drone2").position
    assert truth == pytest.approx([3.0, 2.0, 3.0], abs=0.3)  # ENU of the same
    assert server.graph.world.ground_truth("drone1").position[2] < 0.2  # the first vehicle stayed on the ground
    assert steps["vehicles"]["names"] == ["drone1", "Drone2"]
    assert steps["images"]["sizes"] == [[64, 48], [64, 48]]  # the new vehicle has the default cameras
    assert "a vehicle named 'Drone2' exists" in steps["refused_existing"]["message"]
    assert "unknown vehicle_type 'Car'" in steps["refused_type"]["message"]
    assert "pose.position.x_val" in steps["refused_nan"]["message"]
    assert steps["alive"]["result"] is True and steps["alive"]["vehicles"] == ["drone1", "Drone2"]
