"""A warm run: the whole lockstep graph (physics, IMU, barometer, magnetometer, GPS, flight controller,
mission, recorder) launched once flies a mission, then flies it again after ``/physics/restart`` without a
relaunch; the second run's track and metrics equal the first's bit for bit, and its bag (the recorder's
``~/new_bag`` opened it) is the first's, byte for byte (and so is every stamped topic's content digest).
The mission keeps its node for the next run (``exit_when_done: false``); mission and recorder write
to the ``output_dir`` set in between."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conftest import call_service as call
from conftest import requires_ros, spin_until

pytestmark = [requires_ros, pytest.mark.ros]

#: A hop shorter than config/missions/hop_1m.yaml (disarmed at about 4.9 s of sim time instead of about 11).
SHORT_HOP = (Path(__file__).parent / "data" / "missions" / "short_hop.yaml").read_text()


def wait_for(path: Path, graph, timeout_s: float = 240.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.is_file():
        assert graph.alive(), graph.output()[-3000:]
        assert time.monotonic() < deadline, f"no {path} after {timeout_s:g} s:\n{graph.output()[-3000:]}"
        time.sleep(0.2)
    time.sleep(0.3)  # the graph's last outputs on their way


def test_a_warm_run_repeats_the_cold_run(launch, ros_node, tmp_path):
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter
    from std_srvs.srv import SetBool, Trigger

    from aerial_sim.batch.nodeparams import write_params_file
    from aerial_sim.batch.postprocess import run_end_ns
    from aerial_sim.recording.digest import bag_content

    mission = tmp_path / "short_hop.yaml"
    mission.write_text(SHORT_HOP)
    params = write_params_file({"mission": {"exit_when_done": False, "write_plots": False},
                                "recorder": {"write_report": False}}, tmp_path / "params.yaml")
    cold, warm, after = tmp_path / "cold", tmp_path / "warm", tmp_path / "after"
    graph = launch("sim.launch.yaml", "scene:=empty", f"mission:={mission}", "use_camera:=false", "record:=true",
                   "viewer:=false", "airsim_api:=false", "use_scene_markers:=false", "lockstep:=true",
                   f"run_dir:={cold}", "--params-file", str(params))
    wait_for(cold / "mission_end.json", graph)  # the run ended and the clock stopped where a cold run's stops

    assert call(ros_node, SetBool, "/physics/pause", SetBool.Request(data=True)).success
    spin_until(ros_node, lambda: False, timeout_s=0.25)  # the graph's last outputs reach the recorder
    for node in ("/drone1/mission", "/recorder"):
        output_dir = SetParameters.Request(parameters=[Parameter("output_dir", value=str(warm)).to_parameter_msg()])
        assert call(ros_node, SetParameters, f"{node}/set_parameters", output_dir).results[0].successful
    began = time.monotonic()
    new_bag = call(ros_node, Trigger, "/recorder/new_bag", Trigger.Request())
    assert new_bag.success and new_bag.message == str(warm / "bag"), new_bag.message
    restarted = call(ros_node, Trigger, "/physics/restart", Trigger.Request())  # its t = 0 state: the new bag's
    assert restarted.success, restarted.message
    assert call(ros_node, SetBool, "/physics/pause", SetBool.Request(data=False)).success
    overhead_s = time.monotonic() - began
    wait_for(warm / "mission_end.json", graph)

    assert (warm / "track.csv").read_bytes() == (cold / "track.csv").read_bytes()
    assert (warm / "metrics.json").read_text() == (cold / "metrics.json").read_text()
    assert overhead_s < 5.0  # three service calls, on a loaded machine
    assert graph.alive()  # nobody ended the launch: the graph waits for the next run

    assert json.loads((warm / "mission_end.json").read_text())["outcome"] == "landed"
    refused = call(ros_node, Trigger, "/recorder/new_bag", Trigger.Request())  # output_dir still names warm/
    assert not refused.success and "current bag" in refused.message
    spin_until(ros_node, lambda: False, timeout_s=0.25)  # the run's last outputs into its bag
    output_dir = SetParameters.Request(parameters=[Parameter("output_dir", value=str(after)).to_parameter_msg()])
    assert call(ros_node, SetParameters, "/recorder/set_parameters", output_dir).results[0].successful
    assert call(ros_node, Trigger, "/recorder/new_bag", Trigger.Request()).success  # closes warm/bag
    cold_content = bag_content(cold / "bag", until_ns=run_end_ns(cold))
    warm_content = bag_content(warm / "bag", until_ns=run_end_ns(warm))
    stamped = {name: topic.digest for name, topic in cold_content.topics.items() if topic.in_digest}
    assert len(stamped) >= 8, sorted(cold_content.topics)  # odometry, IMU, GPS ... and /clock
    assert {name: topic.digest for name, topic in warm_content.topics.items() if topic.in_digest} == stamped
    assert warm_content.digest == cold_content.digest
    for name in ("bag_0.mcap", "metadata.yaml"):  # and the files themselves
        assert (warm / "bag" / name).read_bytes() == (cold / "bag" / name).read_bytes(), name
