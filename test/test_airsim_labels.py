"""Dataset labels and image types through the real AirSim clients (issue 29): ``simGetDetections`` and its
filters, the OpticalFlow / OpticalFlowVis image types, and every ImageType of the wire contract in every
pixels_as_float / compress combination, served by the real transport and method table in-process (no ROS)
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
from aerial_sim.airsim.image_types import IMAGE_TYPE_NAMES, OPTICAL_FLOW, SCENE, SEGMENTATION, \
    SUPPORTED_TYPES, SURFACE_NORMALS, normals_to_rgb
from aerial_sim.airsim.png import PNG_SIGNATURE
from aerial_sim.airsim.rpc import MsgpackRpcServer
from aerial_sim.airsim.settings import parse_settings
from aerial_sim.world.camera import CameraParams
from aerial_sim.world.labels import detections_2d
from aerial_sim.world.scene import load_scene

from airsim_clients import ClientUnavailable, client_python  # noqa: E402 (test helpers beside this file)
from airsim_inprocess import InProcessGraph  # noqa: E402

SCRIPT = Path(__file__).parent / "data" / "airsim" / "labels.py"
TYPES_SCRIPT = SCRIPT.with_name("image_types.py")
WIDTH, HEIGHT = 96, 64
SMALL = (48, 32)


class Server:
    """The AirSim server (ComputerVision mode: teleported poses are held) on the urban scene, in a thread."""

    def __init__(self, width: int = WIDTH, height: int = HEIGHT):
        self.loop = asyncio.new_event_loop()
        self.graph = InProcessGraph()
        settings = parse_settings({"SimMode": "ComputerVision"})
        self.cameras = CameraRig(load_scene("urban"), CameraParams(width=width, height=height), settings)
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


def run_client(module: str, script: Path, server: Server) -> list[dict]:
    """The JSON records ``script`` printed, run by ``module``'s client against ``server``."""
    try:
        python = client_python(module)
    except ClientUnavailable as error:
        pytest.skip(str(error))
    result = subprocess.run([str(python), str(script), module, str(server.rpc.port)], capture_output=True,
                            text=True, timeout=120)
    records = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert result.returncode == 0 and records and records[-1]["step"] == "done", \
        f"{module}:\n{result.stdout[-3000:]}\n{result.stderr}"
    return records


@pytest.mark.parametrize("module", ["cosysairsim", "airsim"])
def test_detections_and_optical_flow_reach_a_real_client_as_the_renderer_made_them(module):
    server = Server()
    try:
        start = server.pose()
        records = run_client(module, SCRIPT, server)
        moved = server.cameras._previous_pose[("drone1", "front_center")]
    finally:
        server.close()
    steps = {record.pop("step"): record for record in records}

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


@pytest.mark.parametrize("module", ["cosysairsim", "airsim"])
def test_every_image_type_reaches_a_real_client_in_each_float_and_compress_combination(module):
    width, height = SMALL  # 48 images, 20 of them floats: small, for airsim 1.8.1's slow unpacking
    server = Server(width, height)
    try:
        records = run_client(module, TYPES_SCRIPT, server)
    finally:
        server.close()
    images = {(r["type"], *r["asked"]): r for r in records if r["step"] == "image"}
    (single,) = [r for r in records if r["step"] == "single"]
    channels = {OPTICAL_FLOW: 2, SURFACE_NORMALS: 3}
    for (kind, as_float, compress), image in images.items():
        what = f"{module}: {IMAGE_TYPE_NAMES[kind]} pixels_as_float={as_float} compress={compress}"
        assert image["answered"] == [kind, as_float, compress], what  # AirSim echoes the request's flags
        data, floats = bytes.fromhex(image["uint8"]), image["floats"]
        if kind not in SUPPORTED_TYPES:  # Lighting, Annotation: an empty image saying why, the others served
            assert image["size"] == [0, 0] and data == b"" and floats == [], what
            assert f"image type {kind} ({IMAGE_TYPE_NAMES[kind]}) is not rendered" in image["message"], what
            continue
        assert image["size"] == [width, height] and image["message"] == "", what
        if as_float:  # floats whatever compress says, as AirSim's RenderRequest
            assert data == b"" and len(floats) == width * height * channels.get(kind, 1), what
            assert np.isfinite(floats).all(), what
        elif compress:
            assert data[:8] == PNG_SIGNATURE and floats == [], what
            assert np.asarray(Image.open(io.BytesIO(data))).shape == (height, width, 3), what
        else:
            assert len(data) == width * height * 3 and floats == [], what

    def pixels(kind, compress):
        data = bytes.fromhex(images[(kind, False, compress)]["uint8"])
        if compress:
            return np.asarray(Image.open(io.BytesIO(data)))
        return np.frombuffer(data, np.uint8).reshape(height, width, 3)

    for kind in (SCENE, SEGMENTATION, SURFACE_NORMALS):  # (OpticalFlowVis: white, nothing moved yet)
        png, raw = pixels(kind, True), pixels(kind, False)
        assert len(np.unique(png.reshape(-1, 3), axis=0)) > 2, IMAGE_TYPE_NAMES[kind]  # not a blank image
        # Uncompressed: AirSim's RenderRequest writes B, G, R; Cosys-AirSim's R, G, B. The PNG is RGB for both.
        assert np.array_equal(raw if module == "cosysairsim" else raw[:, :, ::-1], png), (module, kind)
    # Scene as floats: AirSim's red channel of the colour image, normalised to [0, 1].
    scene = np.array(images[(SCENE, True, False)]["floats"], np.float32).reshape(height, width)
    assert np.allclose(scene, pixels(SCENE, True)[:, :, 0] / 255.0, atol=1e-6)
    # SurfaceNormals as floats: the unit normals (x forward, y right, z down) whose colour the image shows.
    normals = np.array(images[(SURFACE_NORMALS, True, False)]["floats"], np.float32).reshape(height, width, 3)
    hit = normals.any(axis=2)
    assert 0.3 < hit.mean() < 1.0 and np.allclose(np.linalg.norm(normals[hit], axis=1), 1.0, atol=1e-4)
    assert np.array_equal(normals_to_rgb(normals), pixels(SURFACE_NORMALS, True))
    assert normals[3 * height // 5, width // 2, 2] < -0.9  # the street below faces up: -z of the camera frame
    # simGetImage: a PNG of a type served, one clear error naming a type refused, and the server lives on.
    assert bytes.fromhex(single["normals_png"])[:8] == PNG_SIGNATURE
    assert "image type 10 (Lighting) is not rendered" in single["lighting_error"] and single["alive"] is True
