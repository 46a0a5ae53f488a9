"""A three-vehicle fleet on MAVLink (issue 33): one mavlink node serves drone1..3 as system ids 1..3 on
their own PX4 SITL ports (offboard API 14540 + i), and three MAVSDK instances, one per vehicle, each
take their vehicle off and land it at the same time."""

from __future__ import annotations

import concurrent.futures
import re
import time

import pytest

from conftest import requires_ros
from test_mavlink_clients import ports, run_client

pytestmark = [requires_ros, pytest.mark.ros]


def test_three_vehicles_three_system_ids_each_flown_by_its_own_mavsdk(launch, tmp_path):
    gcs, api = ports()
    gcs, api = gcs + 10, api + 10  # away from test_mavlink_clients' ports
    graph = launch("sim.launch.yaml", "vehicles:=3", "mission:=none", "scene:=empty", "record:=false",
                   "viewer:=false", "use_camera:=false", "use_depth_noise:=false", "airsim_api:=false",
                   "mavlink:=true", f"mavlink_gcs_port:={gcs}", f"mavlink_api_port:={api}",
                   "mavlink_gcs_local_port:=0", "mavlink_api_local_port:=0", f"run_dir:={tmp_path / 'run'}")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and graph.alive() and "MAVLink drone3: sysid 3" not in graph.output():
        time.sleep(0.2)
    assert "MAVLink drone3: sysid 3" in graph.output(), graph.output()[-3000:]
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        flights = list(pool.map(lambda i: run_client("mavsdk_flights.py", str(api + i), "param", "takeoff", "land",
                                                     timeout_s=120), range(3)))
    assert [flight["connected"]["system_id"] for flight in flights] == [1, 2, 3]
    for flight in flights:
        assert flight["takeoff"]["relative_altitude_m"] > 3.7
        assert flight["land"]["armed"] is False
    assert re.search(r"process has died.*: mavlink", graph.output()) is None
