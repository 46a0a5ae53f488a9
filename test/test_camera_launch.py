"""launch/camera.launch.yaml: the arguments reach the camera node, use_camera:=false leaves it out."""

from __future__ import annotations

from conftest import REPO

from aerial_sim.launcher.description import load_launch_file

LAUNCH = REPO / "launch" / "camera.launch.yaml"


def parameters(process) -> dict:
    merged = {}
    for source in process.parameters:
        merged.update(getattr(source, "values", {}))
    return merged


def test_camera_launch_passes_namespace_scene_and_rate():
    plan = load_launch_file(LAUNCH, {"namespace": "drone2", "scene": "urban", "camera_rate_hz": "15.0"})
    (camera,) = plan.processes
    assert (camera.executable, camera.namespace) == ("camera", "/drone2")
    params = parameters(camera)
    assert params["scene"] == "urban" and params["rate_hz"] == 15.0 and params["use_sim_time"] is True


def test_use_camera_false_starts_nothing():
    assert load_launch_file(LAUNCH, {"use_camera": "false"}).processes == []
