"""Lockstep with every node on: two runs of the same mission and seed record the same bag (issue 11).

Physics, IMU, barometer, magnetometer, GPS, camera, depth noise, point cloud, lidar, rangefinder,
flight controller, mission and recorder, launched twice from ``sim.launch.yaml``, side by side.
"""

from __future__ import annotations

import hashlib
import re
import time

import pytest

from conftest import SECOND_DOMAIN_ID, requires_ros

pytestmark = [requires_ros, pytest.mark.ros]

#: Topics whose content is wall-clock figures (CPU load, real-time factor, rates): not simulation output.
WALL_CLOCK_TOPICS = ("/diagnostics",)
SMALL_SQUARE = ("name: small_square\ntakeoff_altitude_m: 0.6\npattern: square\nsize_m: 0.5\n"
                "speed_m_s: 1.0\nacceleration_m_s2: 2.0\nhold_s: 0.0\n")


#: What the byte-identical bags leave out besides record.launch.yaml's default exclusions: wall-clock
#: content (log lines, CPU load) and the unstamped motor commands, whose only time is when they arrived
#: (doc/datasets.md, "Identical runs, identical files").
NOT_REPEATABLE = "/rosout /diagnostics /*/motor_commands"


def start_lockstep_flight(launch, mission, run_dir, domain_id=None, *extra):
    """The whole graph in lockstep, flying ``mission`` into ``run_dir``."""
    return launch("sim.launch.yaml", "lockstep:=true", "viewer:=false", "airsim_api:=false", "use_lidar:=true",
                  "use_distance:=true", f"mission:={mission}", f"run_dir:={run_dir}", *extra, domain_id=domain_id)


def recorder_exclusions(folder) -> str:
    """A parameters file for the recorder: the launch file's exclusions plus NOT_REPEATABLE."""
    import yaml

    from conftest import REPO

    arguments = yaml.safe_load((REPO / "launch" / "record.launch.yaml").read_text())["launch"]
    default = next(a["arg"]["default"] for a in arguments if "arg" in a and a["arg"]["name"] == "exclude")
    path = folder / "recorder.yaml"
    path.write_text(yaml.safe_dump({"/**/recorder": {"ros__parameters": {"exclude": f"{default} {NOT_REPEATABLE}"}}}))
    return str(path)


def landing_time(graph, run_dir) -> float:
    """Wait for the launched flight to end; the disarm's sim time (s)."""
    deadline = time.monotonic() + 180.0  # about 25 s on a quiet machine; lockstep slows down, never drops
    while graph.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not graph.alive(), "mission did not finish in 180 s:\n" + graph.output()[-5000:]
    landed = re.search(r"landed and disarmed at t = ([0-9.]+) s", graph.output())
    assert landed, graph.output()[-5000:]
    for name in ("track.csv", "summary.txt", "metrics.json", "recording.txt"):
        assert (run_dir / name).is_file(), name
    return float(landed.group(1))


def test_two_lockstep_runs_with_every_node_record_identical_bags(launch, tmp_path):
    from aerial_sim.recording.digest import EXCLUDED_TOPICS, _payloads_by_stamp

    mission = tmp_path / "small_square.yaml"
    mission.write_text(SMALL_SQUARE)
    runs = [tmp_path / "run0", tmp_path / "run1"]
    # Side by side, each in its own domain: each run also meets the other's load, as batch workers do.
    exclusions = recorder_exclusions(tmp_path)
    graphs = [start_lockstep_flight(launch, mission, runs[0], None, "--params-file", exclusions),
              start_lockstep_flight(launch, mission, runs[1], SECOND_DOMAIN_ID, "--params-file", exclusions)]
    landed_at = [landing_time(graph, run) for graph, run in zip(graphs, runs)]
    assert landed_at[0] == landed_at[1]
    # The recorder takes part too: the clock never outran what it had written by more than the slack.
    assert "lockstep participant: /recorder/written@50" in graphs[0].output(), graphs[0].output()[-3000:]
    # The mission's track ends at the disarm's own stamp: the whole flight repeats, bit for bit, phase
    # labels included (a service's answer takes effect at the first due stamp after the call, whenever
    # it arrives: issue 32 found `arm` vs `takeoff` in the first 30 ms).
    tracks = [(run / "track.csv").read_text().splitlines() for run in runs]
    assert tracks[0] == tracks[1] and len(tracks[0]) > 1500  # ~7 s at 250 Hz
    # The batch's digest ends with the run (the disarm): the same for both, whatever the shutdown tail.
    from aerial_sim.batch.postprocess import run_end_ns
    from aerial_sim.recording.digest import bag_content

    ends = [run_end_ns(run) for run in runs]
    assert ends[0] == ends[1] is not None
    assert bag_content(runs[0], until_ns=ends[0]).digest == bag_content(runs[1], until_ns=ends[1]).digest
    # Every stamped message, on every topic, in both bags, to the end: the mission takes part in lockstep,
    # so the clock stops where the run ends (issue 32: the bags' tails used to differ in length).
    end_ns = round(landed_at[0] * 1e9)
    bags = [_payloads_by_stamp(run, EXCLUDED_TOPICS + WALL_CLOCK_TOPICS) for run in runs]
    assert set(bags[0]) == set(bags[1])
    for topic in ("/drone1/camera/depth/image_raw", "/drone1/camera/color/image_raw", "/drone1/lidar/points",
                  "/drone1/distance/range", "/drone1/imu/data", "/drone1/gps/fix", "/drone1/ground_truth/odom",
                  "/recorder/written", "/drone1/mission/progress"):
        assert topic in bags[0], f"{topic} was not recorded"
    for topic in sorted(bags[0]):
        first, second = (bag[topic] for bag in bags)
        assert first.keys() == second.keys(), f"{topic}: {len(first)} vs {len(second)} stamps"
        differing = [stamp for stamp in first if first[stamp] != second[stamp]]
        assert not differing, f"{topic}: {len(differing)} of {len(first)} messages differ, first at {differing[0]} ns"
    # And the files themselves, byte for byte (issue 32): the recorder logs a stamped message at its stamp
    # and writes in an order, chunking and metadata that follow from the messages alone.
    files = [{path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted((run / "bag").iterdir())}
             for run in runs]
    assert files[0] == files[1] and "metadata.yaml" in files[0], (files, graphs[0].output()[-3000:])
    # Every camera frame of the flight is there: 30 Hz of sim time, none lost.
    frames = [stamp for stamp in bags[0]["/drone1/camera/depth/image_raw"] if stamp <= end_ns]
    assert len(frames) >= int(landed_at[0] * 30)
