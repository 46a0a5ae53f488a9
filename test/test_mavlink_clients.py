"""Real MAVLink clients fly the launched graph (issue 33): a pymavlink ground-station script on the GCS
link and MAVSDK (native 4.x binding, libmavsdk inside the wheel) on the offboard-API link.

Launches ``sim.launch.yaml mavlink:=true`` (heavy optional nodes off) with the node's UDP ports moved
off PX4's defaults to ports inside this test's leased DDS domain's range, so parallel runs never collide. Each
client runs in its own process (test/data/mavlink/) and prints what it saw as JSON lines.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import private_domain_id, private_udp_port, requires_ros

DATA = Path(__file__).parent / "data" / "mavlink"
pytestmark = [requires_ros, pytest.mark.ros]


def ports() -> tuple[int, int]:
    """(GCS, API) remote ports of this test process: its private UDP ports 0 and 1 (conftest.private_udp_port;
    the other MAVLink tests add to them: acks 2-3, vehicle 5-6, fleet 10-13, the SITL bridges 15-18)."""
    return private_udp_port(0), private_udp_port(1)


def test_the_mavlink_tests_ports_lie_in_this_process_domain_and_no_other():
    """Every port the MAVLink and SITL tests use (offsets 0-18 of conftest.private_udp_port) is one of this
    process's leased domain's top 20 DDS ports, which no graph in another domain binds: they used to lie in
    domains 50-54's, and a MAVSDK client found its port held by a graph in domain 52 (BIND_ERROR)."""
    from aerial_sim.batch.domains import domain_ports
    from sitl_bridges import bridge_port

    own = list(domain_ports(private_domain_id()))[-20:]
    used = [*ports(), bridge_port("px4"), bridge_port("px4", second=True), bridge_port("ardupilot"),
            bridge_port("ardupilot", second=True)]
    assert all(port in own for port in used), (used, own[0], own[-1])
    with pytest.raises(ValueError, match="offset must be in 0..19"):
        private_udp_port(20)


def test_a_second_session_asking_for_this_process_domain_gets_another_and_other_ports():
    """AERIAL_SIM_TEST_DOMAIN_ID naming a domain another test process holds: the new session takes a free one
    (it used to share it, and with it every MAVLink port, with a warning line that xdist workers hide)."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}
    environment["AERIAL_SIM_TEST_DOMAIN_ID"] = str(private_domain_id())
    script = "import conftest; print(conftest.private_domain_id(), conftest.private_udp_port(0))"
    # through sh, so the child's parent is not this process (the xdist controller's first worker shares its domain)
    result = subprocess.run(["sh", "-c", f'"{sys.executable}" -c "{script}"; true'], capture_output=True, text=True,
                            cwd=Path(__file__).parent, env=environment, timeout=60)
    domain, port = (int(word) for word in result.stdout.split())
    assert domain != private_domain_id() and port != ports()[0], result.stderr
    assert f"ROS domain {private_domain_id()} (AERIAL_SIM_TEST_DOMAIN_ID) is held" in result.stderr


def run_client(script: str, *args: str, timeout_s: float = 90) -> dict:
    result = subprocess.run([sys.executable, str(DATA / script), *args], capture_output=True, text=True,
                            timeout=timeout_s)
    steps = {}
    for line in result.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            steps[record.pop("step")] = record
    assert result.returncode == 0 and "done" in steps, f"{script} failed:\n{result.stdout}\n{result.stderr[-3000:]}"
    return steps


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    from conftest import LaunchedGraph

    gcs, api = ports()
    log = tmp_path_factory.mktemp("mavlink") / "launch.log"
    launched = LaunchedGraph("sim.launch.yaml", [
        "mission:=none", "scene:=empty", "record:=false", "viewer:=false", "use_camera:=false",
        "use_depth_noise:=false", "airsim_api:=false", "battery:=true", "mavlink:=true", f"mavlink_gcs_port:={gcs}",
        f"mavlink_api_port:={api}", "mavlink_gcs_local_port:=0", "mavlink_api_local_port:=0",
        f"run_dir:={log.parent / 'run'}"], log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and launched.alive():
        if re.search(r"MAVLink drone1: sysid 1", launched.output()):
            break
        time.sleep(0.2)
    else:
        launched.stop()
        pytest.fail(f"the mavlink node did not start:\n{launched.output()[-3000:]}")
    yield launched
    launched.stop()


def test_pymavlink_script_arms_takes_off_flies_a_mission_and_returns(graph):
    gcs, _ = ports()
    steps = run_client("pymavlink_script.py", str(gcs))
    assert steps["heartbeat"]["system"] == 1
    assert steps["param"]["rtl_return_alt"] == 6.0
    assert steps["takeoff"]["relative_alt_m"] > 2.5
    assert steps["mission_upload"]["result"] == 0  # MAV_MISSION_ACCEPTED
    # The last waypoint is 5 m north and 5 m east of home (acceptance radius 0.5 m).
    mission = steps["mission"]
    assert steps["mission"]["reached"] == 1
    assert math.hypot(mission["north_m"] - 5.0, mission["east_m"] - 5.0) < 1.0
    rtl = steps["rtl"]  # landed (disarmed) back where it armed
    assert math.hypot(rtl["north_m"] - rtl["home_north_m"], rtl["east_m"] - rtl["home_east_m"]) < 1.0
    assert abs(rtl["down_m"]) < 0.3
    assert graph.alive()


def test_mavsdk_takeoff_goto_mission_offboard_geofence_and_return_to_a_rally_point(graph):
    _, api = ports()
    steps = run_client("mavsdk_flights.py", str(api), "param", "takeoff", "goto", "mission", "offboard", "fence",
                       "rally", "land", timeout_s=150)
    assert steps["connected"]["system_id"] == 1 and steps["connected"]["armable"]
    assert steps["param"]["takeoff_alt"] == 4.0 and steps["param"]["sysid"] == 1 and steps["param"]["count"] >= 15
    assert steps["takeoff"]["relative_altitude_m"] > 3.7
    assert abs(steps["goto"]["north_m"] - 8.0) < 0.5
    mission = steps["mission"]
    assert mission["uploaded"] == mission["downloaded"] == 2 and mission["current"] == mission["total"] == 2
    assert abs(mission["north_m"] - 4.0) < 1.0
    assert abs(steps["offboard"]["east_m"] - 3.0) < 0.3 and steps["offboard"]["climb_m_s"] > 0.7
    # the geofence plugin's inclusion circle (12 m) stops a goto 30 m north; Return lands at the closer rally point
    fence = steps["fence"]
    assert fence["polygons"] == 1 and fence["circles"] == 1  # downloaded as uploaded
    assert 11.0 < fence["north_m"] < 16.0 and abs(fence["east_m"]) < 1.0, fence  # the goto 30 m north held at 12 m
    assert any("Geofence breached: Hold" in text for text in fence["texts"])
    rally = steps["rally"]
    assert abs(rally["north_m"] - rally["rally_north_m"]) < 1.0 and abs(rally["east_m"] - rally["rally_east_m"]) < 1.0
    from pymavlink import mavutil  # MAVSDK cannot upload an empty rally plan: clear it as QGroundControl does

    m = mavutil.mavlink_connection(f"udpin:127.0.0.1:{ports()[0]}", source_system=255)
    assert m.wait_heartbeat(timeout=20)
    m.mav.mission_clear_all_send(1, 1, mavutil.mavlink.MAV_MISSION_TYPE_RALLY)
    ack = m.recv_match(type="MISSION_ACK", blocking=True, timeout=10)
    assert ack.type == mavutil.mavlink.MAV_MISSION_ACCEPTED and ack.mission_type == mavutil.mavlink.MAV_MISSION_TYPE_RALLY
    m.close()
    assert steps["land"]["armed"] is False
    assert re.search(r"process has died.*: mavlink", graph.output()) is None and graph.alive()


def test_battery_status_reports_the_physics_pack(graph, ros_node):
    """battery:=true: BATTERY_STATUS and SYS_STATUS carry the pack the physics flies on (<vehicle>/battery)."""
    from pymavlink import mavutil
    from sensor_msgs.msg import BatteryState

    from aerial_sim.nodes.ros.qos import stream_qos
    from conftest import spin_until

    packs = []
    ros_node.create_subscription(BatteryState, "/drone1/battery", packs.append, stream_qos())
    assert spin_until(ros_node, lambda: len(packs) > 2, timeout_s=20)
    m = mavutil.mavlink_connection(f"udpin:127.0.0.1:{ports()[0]}", source_system=255)
    status = m.recv_match(type="BATTERY_STATUS", blocking=True, timeout=10)
    system = m.recv_match(type="SYS_STATUS", blocking=True, timeout=10)
    m.close()
    spin_until(ros_node, lambda: False, timeout_s=0.3)
    pack = packs[-1]  # on the ground the load is the avionics alone: the pack does not move between the two
    assert sum(status.voltages[:3]) / 1000.0 == pytest.approx(pack.voltage, abs=0.01)
    assert status.voltages[3] == 65535 and system.voltage_battery / 1000.0 == pytest.approx(pack.voltage, abs=0.01)
    assert status.battery_remaining == system.battery_remaining == round(100 * pack.percentage)
    assert status.current_battery / 100.0 == pytest.approx(-pack.current, abs=0.02)


#: A mode command is answered by its COMMAND_ACK and by the next HEARTBEAT's mode, in either order.
_BOTH_ACK_AND = r"(?s)(?=.*DO_SET_MODE: ACCEPTED).*"


def test_mavproxy_connects_lists_and_sets_parameters_and_changes_mode(graph, tmp_path):
    """MAVProxy (the ground station, unmodified) on the GCS link: its parameter download asks for PX4's param file
    over MAVLink FTP first, is told at once there is none and lists them with the parameter protocol; it sets one and
    switches to Position and back to Hold with DO_SET_MODE (MAVProxy's own ``mode NAME`` cannot command PX4: it hands
    pymavlink's PX4 mode tuple to set_mode, which packs it as a number, with real PX4 too)."""
    gcs, _ = ports()
    mavproxy = subprocess.Popen([str(Path(sys.executable).parent / "mavproxy.py"), f"--master=udpin:127.0.0.1:{gcs}",
                                 "--source-system=255"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(mavproxy.stdout.readline, "")), daemon=True)
    reader.start()
    try:  # each command once the one before has answered (a parameter set before the list arrived is refused)
        for command, answer in (("", "Detected vehicle 1:1"), ("param fetch", r"Received \d+ parameters"),
                                ("param set MIS_TAKEOFF_ALT 6", None), ("param show MIS_TAKEOFF_ALT", r"MIS_TAKEOFF_ALT\s+6\.0"),
                                ("long DO_SET_MODE 1 3 0", _BOTH_ACK_AND + "Mode POSCTL"), ("long DO_SET_MODE 1 4 3", _BOTH_ACK_AND + "Mode LOITER")):
            deadline, since = time.monotonic() + 30, len(lines)
            answered = lambda: not answer or re.search(answer, "".join(lines[since:]))  # noqa: E731
            while True:  # "param show" answers from MAVProxy's copy, which the vehicle's PARAM_VALUE updates: ask again
                mavproxy.stdin.write(command + "\n")
                mavproxy.stdin.flush()
                asked = time.monotonic()
                while not answered() and time.monotonic() < min(asked + 5, deadline):
                    time.sleep(0.1)
                if answered() or time.monotonic() >= deadline:
                    break
            assert answered(), f"{command!r}: no {answer!r} within 30 s:\n{''.join(lines)[-3000:]}"
        mavproxy.stdin.close()  # closing its input ends MAVProxy
        mavproxy.wait(timeout=20)
        reader.join(timeout=5)
    finally:
        if mavproxy.poll() is None:
            mavproxy.kill()
    out = "".join(lines)
    assert "Detected vehicle 1:1" in out, out[-3000:]
    count = int(re.search(r"Received (\d+) parameters", out).group(1))
    assert count >= 25
    assert re.search(r"MIS_TAKEOFF_ALT\s+6\.0", out), out[-3000:]
    # Each mode command was answered ACCEPTED (above); one sent again when MAVProxy had shown no answer within 5 s
    # (a loaded machine) is answered again, so count the refusals, not the answers.
    assert re.search(r"DO_SET_MODE: (?!ACCEPTED)", out) is None and "Mode POSCTL" in out, out[-3000:]
    assert "LOITER>" in out.split("Mode POSCTL")[-1]  # its prompt names the mode of the last HEARTBEAT: Hold again
    assert re.search(r"sysid 1: mode \w+ -> Position", graph.output()) and graph.alive()


def test_garbage_wrong_ids_and_bad_requests_leave_the_node_answering(graph):
    """Bad input at the running node: each refused with a NACK or one log line, and it keeps serving."""
    import socket

    from pymavlink import mavutil

    gcs, _ = ports()
    local = int(re.search(r"GCS udp 127\.0\.0\.1:(\d+)", graph.output()).group(1))
    m = mavutil.mavlink_connection(f"udpin:127.0.0.1:{gcs}", source_system=255)
    assert m.wait_heartbeat(timeout=20)
    raw = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for data in (b"", b"\xfd" * 300, bytes(range(256)), b"\xfe\x09\x00\x01\x01\x00" + b"\x00" * 20):
        raw.sendto(data, ("127.0.0.1", local))
    m.mav.command_long_send(42, 1, mavutil.mavlink.MAV_CMD_COMPONENT_ARM_DISARM, 0, 1, 0, 0, 0, 0, 0, 0)
    m.mav.command_long_send(1, 1, mavutil.mavlink.MAV_CMD_DO_SET_MODE, 0, 1, 99, 0, 0, 0, 0, 0)
    ack = m.recv_match(type="COMMAND_ACK", blocking=True, timeout=10)
    assert ack.command == mavutil.mavlink.MAV_CMD_DO_SET_MODE and ack.result == mavutil.mavlink.MAV_RESULT_DENIED
    m.mav.mission_count_send(1, 1, 1, 0)
    request = m.recv_match(type="MISSION_REQUEST_INT", blocking=True, timeout=10)
    m.mav.mission_item_int_send(1, 1, request.seq, 6, 31337, 0, 1, 0, 0, 0, 0, 0, 0, 5.0, 0)  # no such command
    result = m.recv_match(type="MISSION_ACK", blocking=True, timeout=10)
    assert result.type == mavutil.mavlink.MAV_MISSION_UNSUPPORTED
    refusals = ("malformed MAVLink frame dropped", "for system 42 ignored", "command 31337 is not supported")
    deadline = time.monotonic() + 20  # the node's log lines, not a fixed wait (slower under load)
    while not all(refusal in graph.output() for refusal in refusals) and time.monotonic() < deadline:
        time.sleep(0.1)
    out = graph.output()
    assert "malformed MAVLink frame dropped" in out and "for system 42 ignored" in out
    assert "command 31337 is not supported" in out
    assert m.wait_heartbeat(timeout=5) and graph.alive()
    assert re.search(r"process has died.*: mavlink", out) is None
