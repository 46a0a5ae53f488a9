"""Dataset labels through the real AirSim clients (issue 29): ``simGetDetections`` and its filters, and the
OpticalFlow / OpticalFlowVis image types, served by the real transport and method table in-process (no ROS)
over the urban scene, checked against the renderer's own instance image and optical flow at the same poses."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from aerial_sim.airsim.api import AirSimApi
from aerial_sim.airsim.camera_rig import CameraRig
from aerial_sim.airsim.rpc import MsgpackRpcServer
from aerial_sim.airsim.settings import parse_settings
from aerial_sim.world.camera import CameraParams
from aerial_sim.world.labels import detections_2d
from aerial_sim.world.scene import load_scene

from airsim_clients import ClientUnavailable, client_python  # noqa: E402 (test helpers beside this file)
from airsim_inprocess import InProcessGraph  # noqa: E402

SCRIPT = Path(__file__).parent / "data" / "airsim" / "labels.py"
WIDTH, HEIGHT = 96, 64


class Server:
    """The AirSim server (ComputerVision mode: teleported poses are held) on the urban scene, in a thread."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.graph = InProcessGraph()
        settings = parse_settings({"SimMode": "ComputerVision"})
        self.cameras = CameraRig(load_scene("urban"), CameraParams(width=WIDTH, height=HEIGHT), settings)
        self.api = AirSimApi(self.graph, self.cameras, settings=settings)
        self.rpc = MsgpackRpcServer(self.api.dispatch, "127.0.0.1", 0)
        self.loop.run_until_complete(self.rpc.start())
        self.task = self.loop.create_task(self.graph.run(real_time_factor=4.0))
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def pose(self):
        truth = self.graph.world.ground_truth("drone1")
        return tuple(truth.position), tuple(truth.orientation)

    def close(self):
        async def shutdown():
            await self.rpc.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:  # the graph, and the hold of the teleported vehicle
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.mark.parametrize("module", ["cosysairsim", "airsim"])
def test_detections_and_optical_flow_reach_a_real_client_as_the_renderer_made_them(module):
    try:
        python = client_python(module)
    except ClientUnavailable as error:
        pytest.skip(str(error))
    server = Server()
    try:
        start = server.pose()
        result = subprocess.run([str(python), str(SCRIPT), module, str(server.rpc.port)], capture_output=True,
                                text=True, timeout=120)
        moved = server.cameras._previous_pose[("drone1", "front_center")]
    finally:
        server.close()
    steps = {}
    for line in result.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            steps[record.pop("step")] = record
    assert result.returncode == 0 and "done" in steps, f"{module}:\n{result.stdout}\n{result.stderr}"

    camera = server.cameras.camera("drone1", "front_center").model
    frame = camera.render(*start, depth=False, segmentation=False, color=False, instance=True)
    seen = {d.name: d for d in detections_2d(frame.instance, camera.scene)}
    assert steps["none_before_a_filter"]["detections"] == []  # AirSim: an empty filter detects nothing
    found = steps["buildings_and_lamps"]["detections"]
    expected = sorted(n for n in seen if n.startswith("building_") or n.startswith("lamp"))
    assert [d[0] for d in found] == expected and len(expected) >= 3
    for name, box2d, (x_min, x_max), forward, latitude in found:
        d = seen[name]
        assert box2d == [d.u_min, d.v_min, d.u_max + 1, d.v_max + 1]  # its visible pixels, pixel edges
        assert x_min <= forward <= x_max and x_min > 0  # in front of the camera (x forward), centre inside
        assert abs(latitude - 47.6415) < 0.01  # near the home point
    assert steps["other_type_has_its_own_filter"]["detections"] == []
    near = steps["within_25_m"]["detections"]
    assert 0 < len(near) < len(found) and all(d[3] < 25.0 for d in near)  # centre distance >= forward distance
    assert steps["cleared"]["detections"] == []
    errors = steps["errors"]
    assert "image_type must be an AirSim ImageType" in errors["bad_type"] and "42" in errors["bad_type"]
    assert "no camera named 'nose'" in errors["bad_camera"] and "radius_cm" in errors["bad_radius"]

    flow = steps["flow"]
    width, height, first = flow["first"]
    assert (width, height) == (WIDTH, HEIGHT) and np.count_nonzero(np.array(first)) == 0  # no previous request
    expected_flow = camera.optical_flow(*moved, *start)
    got = np.array(flow["moved"][2], np.float32).reshape(HEIGHT, WIDTH, 2)
    finite = np.isfinite(expected_flow)
    assert np.array_equal(finite, np.isfinite(got)) and finite.mean() > 0.9
    assert np.abs(expected_flow[finite]).max() > 5.0  # it did move
    assert np.allclose(got[finite], expected_flow[finite], atol=0.05)  # the renderer's flow, u and v interleaved
    vis = np.asarray(Image.open(io.BytesIO(bytes.fromhex(flow["vis_png"]))))
    assert vis.shape == (HEIGHT, WIDTH, 3) and len(np.unique(vis.reshape(-1, 3), axis=0)) > 20
