"""The start gate (issue 29): the physics clock stays at 0 until the nodes the launch named are set up.

A camera that starts late still has its first frame at sim time 0; a node that never comes holds the
clock only until the timeout, and one warning names it; a physics node launched alone starts at once.
The rules themselves (:mod:`aerial_sim.physics.start_gate`) are checked without ROS first.
"""

from __future__ import annotations

import re

import pytest

from aerial_sim.config import ParamsError
from aerial_sim.physics.start_gate import (NodeView, StartGate, for_each_vehicle, parse_gate_nodes, split_entry,
                                           split_name, why_not_ready)
from conftest import requires_ros, spin_until


def test_gate_names_parse_and_bad_ones_are_refused_by_name():
    assert parse_gate_nodes("") == parse_gate_nodes("none") == parse_gate_nodes("   ") == ()
    assert parse_gate_nodes(" /drone1/imu,/drone1/camera  /drone1/imu /cam ") == ("/drone1/imu", "/drone1/camera", "/cam")
    for bad in ("camera", "/drone1/", "/drone 1/x,/a/b-c", "/1x"):
        with pytest.raises(ParamsError, match="start_gate_nodes: '.*' is not a fully qualified node name"):
            parse_gate_nodes(bad)
    assert split_name("/drone1/camera") == ("/drone1", "camera") and split_name("/recorder") == ("/", "recorder")
    # A node that reads nothing and must publish before the start: NODE>TOPIC, both parts fully qualified.
    entries = ("/drone1/imu", "/scene_markers>/scene_markers")
    assert parse_gate_nodes(" ".join(entries)) == entries
    assert split_entry("/scene_markers>/scene_markers") == ("/scene_markers", "/scene_markers")
    assert split_entry("/drone1/imu") == ("/drone1/imu", None)
    for bad in ("/scene_markers>", "/scene_markers>scene_markers", ">/scene_markers", "/a>/b>/c"):
        with pytest.raises(ParamsError, match=f"start_gate_nodes: '{bad}' is not a fully qualified node name"):
            parse_gate_nodes(bad)


def test_a_fleets_entries_stand_for_each_vehicle_that_carries_the_node():
    names = parse_gate_nodes("/{vehicle}/imu /{vehicle}/barometer /{vehicle}/flight_controller /drone1/camera")
    fleet = [("drone1", ("imu", "barometer")), ("scout", ("imu", "gps", "camera"))]
    assert for_each_vehicle(names, fleet) == ("/drone1/imu", "/scout/imu", "/drone1/barometer",  # no barometer on scout
                                              "/drone1/flight_controller", "/scout/flight_controller", "/drone1/camera")
    assert for_each_vehicle(parse_gate_nodes("/drone1/imu /{vehicle}/imu"), fleet) == ("/drone1/imu", "/scout/imu")
    for bad in ("/{vehicle}", "/{vehicle}x/imu", "/{vehicles}/imu", "/{vehicle/imu"):
        with pytest.raises(ParamsError, match="is not a fully qualified node name"):
            parse_gate_nodes(bad)


def test_a_node_is_ready_once_in_the_graph_subscribed_connected_and_in_lockstep_announced():
    assert why_not_ready(NodeView(present=False), False) == "not in the graph"
    assert "still setting up" in why_not_ready(NodeView(present=True), False)
    connecting = NodeView(present=True, inputs=("/d/ground_truth/odom",), unmatched=("/d/ground_truth/odom",))
    assert why_not_ready(connecting, False) == "not connected to /d/ground_truth/odom yet"
    unannounced = NodeView(present=True, inputs=("/d/ground_truth/odom",), announcements=2, announcements_taken=1)
    assert why_not_ready(unannounced, False) is None  # real time: nobody reads announcements
    assert why_not_ready(unannounced, True) == "its lockstep announcement not taken yet"
    gate = StartGate(("/d/camera", "/d/imu"), timeout_s=5.0, started_at=100.0)
    ready = NodeView(present=True, inputs=("/d/ground_truth/odom",))
    assert gate.holdups({"/d/imu": ready, "/d/camera": ready}, True) == []
    assert gate.holdups({"/d/imu": ready}, True) == [("/d/camera", "not in the graph")]
    assert gate.holdups({}, True, among=("/d/camera",)) == [("/d/camera", "not in the graph")]  # /d/imu seen ready
    # NODE>TOPIC: ready once it publishes TOPIC, reading nothing (the scene markers' latched message is then out).
    markers = StartGate(("/scene_markers>/scene_markers",), timeout_s=5.0, started_at=100.0)
    silent = NodeView(present=True, outputs=("/rosout", "/parameter_events"))
    assert markers.holdups({"/scene_markers>/scene_markers": silent}, True) == [
        ("/scene_markers>/scene_markers", "not publishing /scene_markers yet (still setting up)")]
    published = NodeView(present=True, outputs=("/parameter_events", "/rosout", "/scene_markers"))
    assert markers.holdups({"/scene_markers>/scene_markers": published}, True) == []
    assert markers.holdups({}, True)[0][1] == "not in the graph"
    assert not gate.expired(104.9) and gate.expired(105.0)
    line = gate.timeout_line([("/d/camera", "not in the graph")])
    assert line.startswith("start gate: starting the clock after 5 s without /d/camera (not in the graph)")


def _clock_stamps(ros_node):
    from rosgraph_msgs.msg import Clock

    from aerial_sim.nodes.ros.qos import stream_qos
    from aerial_sim.nodes.ros.stamps import from_stamp

    stamps: list[float] = []
    subscription = ros_node.create_subscription(Clock, "/clock", lambda m: stamps.append(from_stamp(m.clock)),
                                                stream_qos())
    return stamps, subscription


@requires_ros
@pytest.mark.ros
def test_a_camera_started_late_still_has_its_first_frame_at_sim_time_zero(ros_node, launch, tmp_path):
    import yaml
    from sensor_msgs.msg import CameraInfo

    from aerial_sim.nodes.ros.qos import stream_qos
    from aerial_sim.nodes.ros.stamps import from_stamp

    clocks, clock_reader = _clock_stamps(ros_node)
    frames: list[float] = []
    ros_node.create_subscription(CameraInfo, "/drone1/camera/depth/camera_info",
                                 lambda m: frames.append(from_stamp(m.header.stamp)), stream_qos())
    physics = launch("physics.launch.yaml", "start_gate_nodes:=/drone1/camera", "start_gate_timeout:=120")
    assert spin_until(ros_node, lambda: "start gate: the clock waits at 0 for /drone1/camera" in physics.output(),
                      timeout_s=60.0), physics.output()[-3000:]
    # The camera comes 2 s after our /clock reader has met the physics node's: until then (and its scene
    # loaded, its renderer warmed up) no sim time passes.
    assert spin_until(ros_node, lambda: clock_reader.get_publisher_count() > 0, timeout_s=60.0)
    spin_until(ros_node, lambda: False, timeout_s=2.0)
    assert clocks == [], f"the clock ran before the camera was there: {clocks[:3]}"
    small = tmp_path / "small.yaml"
    small.write_text(yaml.safe_dump({"/**/camera": {"ros__parameters": {"width": 96, "height": 64}}}))
    camera = launch("camera.launch.yaml", "scene:=corridor", "camera_rate_hz:=10", "--params-file", str(small))
    assert spin_until(ros_node, lambda: len(frames) >= 3, timeout_s=90.0), (physics.output()[-3000:], camera.output())
    # Its first frame is within the first frame period (the state at t = 0 unless the camera's side of the
    # DDS connection came a few states after the physics node's). This test's reader may match the camera's
    # publisher a frame late: the first stamp is the camera's word.
    first = re.search(r"first frame at t = ([0-9.]+) s of sim time", camera.output())
    assert first and float(first.group(1)) < 0.1, camera.output()[-3000:]
    assert "start gate: every node ready after" in physics.output()


@requires_ros
@pytest.mark.ros
def test_a_node_that_never_comes_holds_the_clock_until_the_timeout_and_is_named_once(ros_node, launch):
    clocks, clock_reader = _clock_stamps(ros_node)
    # Launched alone: no gate, the clock starts at once.
    alone = launch("physics.launch.yaml")
    assert spin_until(ros_node, lambda: len(clocks) > 10, timeout_s=60.0), alone.output()[-3000:]
    assert "start gate" not in alone.output()
    alone.stop()
    assert spin_until(ros_node, lambda: clock_reader.get_publisher_count() == 0, timeout_s=30.0)  # it has gone
    spin_until(ros_node, lambda: False, timeout_s=0.5)  # and what our reader still held of it is taken
    clocks.clear()
    gated = launch("physics.launch.yaml", "start_gate_nodes:=/drone1/imu /drone1/no_such_node",
                   "start_gate_timeout:=10.0")
    # Our /clock reader meets the new physics node's publisher while the gate holds: nothing comes meanwhile.
    assert spin_until(ros_node, lambda: "start gate: the clock waits" in gated.output()
                      and clock_reader.get_publisher_count() > 0, timeout_s=60.0), gated.output()[-3000:]
    spin_until(ros_node, lambda: "start gate: starting" in gated.output(), timeout_s=1.0)
    assert "start gate: starting" in gated.output() or clocks == [], clocks[:3]
    assert spin_until(ros_node, lambda: bool(clocks), timeout_s=60.0), gated.output()[-3000:]
    # The node's log line reaches us through the launcher's pipes, the clock over DDS: the clock can come
    # first (ci28: the line was not read yet when the first clock message was in).
    assert spin_until(ros_node, lambda: "start gate: starting the clock after" in gated.output(), timeout_s=10.0)
    warnings = [line for line in gated.output().splitlines() if "start gate: starting the clock after" in line]
    assert len(warnings) == 1, gated.output()[-3000:]
    assert "after 10 s without /drone1/imu (not in the graph); /drone1/no_such_node (not in the graph)" in warnings[0]
    assert clocks[0] < 0.1  # from 0: no sim time passed while it waited
    spin_until(ros_node, lambda: False, timeout_s=0.5)
    assert len([line for line in gated.output().splitlines() if "start gate: starting" in line]) == 1
