"""Issue 14 across processes: a swarm of 3 quads flies a ring around a moving centre and lands (~25 s).

``launch/swarm.launch.yaml`` starts the physics node with ``vehicles:=3``, one
flight controller per vehicle and the ``swarm_mission`` node; the launch ends
when the mission does. Checked: exit 0, every vehicle landed and disarmed, the
summary has a Hausdorff figure per vehicle and a closest approach above 0.5 m,
and the tracks end on the ground. (The first run in a fresh checkout also
compiles the batched physics kernels with numba, about a minute; they are cached.)
"""

from __future__ import annotations

import csv
import re
import subprocess
import sys
import time

import pytest

from conftest import REPO, requires_ros

pytestmark = [requires_ros, pytest.mark.ros]

VEHICLES = ("drone1", "drone2", "drone3")
MISSION = """\
name: swarm_test
formation: ring
radius_m: 1.2
altitude_m: 1.2
centre_path: circle
circle_centre_m: [1.0, 0.0]
circle_radius_m: 1.5
centre_speed_m_s: 1.0
centre_acceleration_m_s2: 0.5
duration_s: 3.0
assemble_speed_m_s: 2.0
safety_distance_m: 1.0
hold_s: 0.5
"""


def test_three_vehicles_fly_a_ring_land_and_report_hausdorff_and_closest_approach(launch, tmp_path):
    mission = tmp_path / "swarm_test.yaml"
    mission.write_text(MISSION)
    run_dir = tmp_path / "run"
    # Lockstep: ground truth at the full 250 Hz per vehicle however loaded the machine is (in real time the
    # physics node lowers it to keep up, and a controller fed 35 Hz odometry cannot hold the vehicle).
    graph = launch("swarm.launch.yaml", "scene:=empty", "lockstep:=true", f"mission:={mission}", f"run_dir:={run_dir}")
    deadline = time.monotonic() + 240.0  # ~25 s of sim time; a cold numba cache adds about a minute
    while graph.alive() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not graph.alive(), "the swarm mission did not finish\n" + graph.output()[-6000:]
    assert graph.process.returncode == 0, graph.output()[-6000:]

    summary = (run_dir / "swarm_summary.txt").read_text()
    for name in VEHICLES:
        line = next(l for l in summary.splitlines() if l.startswith(name))
        assert "landed and disarmed" in line, summary
        hausdorff = float(line.split()[1])
        assert 0.0 < hausdorff < 1.0, summary  # a ring flown by cmd_pose setpoints, within a metre
    match = re.search(r"closest approach\s+([\d.]+) m between (drone\d) and (drone\d) at t = ([\d.]+) s", summary)
    assert match, summary
    assert float(match.group(1)) > 0.5 and match.group(2) != match.group(3)

    with open(run_dir / "swarm_tracks.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert {row["vehicle"] for row in rows} == set(VEHICLES)
    for name in VEHICLES:
        own = [row for row in rows if row["vehicle"] == name]
        assert max(float(r["z_m"]) for r in own) > 1.1  # it flew at the formation altitude
        assert float(own[-1]["z_m"]) < 0.1  # and ended on the ground
        assert any(r["phase"] == "formation" for r in own)
    assert (run_dir / "swarm_top_view.png").stat().st_size > 10_000


def test_bad_parameters_are_one_line_and_exit_2(tmp_path):
    command = [sys.executable, "-m", "aerial_sim.nodes.swarm_mission", "--ros-args", "-p", f"output_dir:={tmp_path}"]
    for extra, expected in ((["-p", "mission:=no_such_swarm"], "not found"),
                            (["-p", "vehicle_names:=[drone1, drone2]", "-p", "mission:=swarm_ring",
                              "-p", "rate_hz:=0.0"], "rate_hz must be a positive number"),
                            ([], "no vehicles: give vehicle_names")):
        result = subprocess.run(command + extra, capture_output=True, text=True, timeout=60, cwd=REPO)
        assert result.returncode == 2, result.stderr
        assert expected in result.stderr and "Traceback" not in result.stderr, result.stderr
