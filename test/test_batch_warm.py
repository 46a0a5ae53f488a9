"""Warm batch runs (``run.warm``): a worker keeps its graph for the next run of the same shape.

- which parameters change a graph's shape (a relaunch) and which a warm run sets in the running graph
  (pure, no ROS);
- a real batch of three short hops on one worker, with the physics node killed mid-flight of the
  second: that run is retried on a new graph, nothing else is lost, the third run flies warm in the new
  graph, and its bag is the first run's, byte for byte (same seed, another graph, another seed between);
- a warm run's bag files are a cold run's (``warm: false``), byte for byte, and a mission that fails in a
  warm graph fails its run as soon as it ends, not after ``stall_timeout_s``; the graph flies on.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO, requires_ros

from aerial_sim.batch.manifest import read_manifest
from aerial_sim.batch.sweep import RunSpec
from aerial_sim.batch.warm import WARM_DIR, graph_shape, run_settings

SHORT_HOP = Path(__file__).parent / "data" / "missions" / "short_hop.yaml"
#: Lands from 2 m (at least 4 s at the controller's 0.5 m/s): with land_timeout_s 3 its mission fails.
HIGH_HOP = {"name": "high_hop", "takeoff_altitude_m": 2.0, "pattern": "square", "size_m": 0.2, "speed_m_s": 1.0,
            "acceleration_m_s2": 2.0, "hold_s": 0.0, "land": True}
BAG_FILES = ("bag/bag_0.mcap", "bag/metadata.yaml")


def bag_bytes(run_folder: Path) -> dict[str, bytes]:
    return {name: (run_folder / name).read_bytes() for name in BAG_FILES}


@pytest.fixture(scope="module")
def declared():
    from aerial_sim.launcher.description import declared_arguments
    from aerial_sim.paths import package_share

    return {a.name: a.default for a in declared_arguments(package_share() / "launch" / "sim.launch.yaml")}


def shape(declared, **parameters):
    base = {"scene": "empty", "mission": "hop_1m", "use_camera": False, "use_depth_noise": False}
    return graph_shape(RunSpec(0, {**base, **parameters}), declared)


def test_seed_mission_and_wind_fly_warm_while_scene_vehicle_and_sensors_relaunch(declared):
    assert shape(declared, seed=0) == shape(declared, seed=7)
    assert shape(declared, seed=0, mission="square_5m") == shape(declared, seed=0)
    assert shape(declared, **{"physics.wind_enu_m_s": [1, 0, 0]}) == shape(declared, **{"physics.wind_enu_m_s": [0, 2, 0]})
    assert shape(declared, **{"imu.seed": 3}) == shape(declared, **{"imu.seed": 4})
    for changed in ({"scene": "urban"}, {"vehicle": "hexa_x"}, {"use_gps": False}, {"camera.width": 320},
                    {"physics.rate_hz": 500.0}):
        assert shape(declared, **changed) != shape(declared), changed
    # a run without a seed must not inherit the run before's: setting one is shape
    assert shape(declared) != shape(declared, seed=0)
    # depth noise takes the seed and has no reset: a new seed relaunches
    assert shape(declared, seed=0, use_camera=True, use_depth_noise=True) != shape(declared, seed=1, use_camera=True,
                                                                                   use_depth_noise=True)
    # many vehicles, another autopilot: every run in a launch of its own
    assert shape(declared, vehicles=3) is None and shape(declared, autopilot="px4") is None


def test_a_warm_run_sets_folders_seeds_of_the_sensors_it_has_and_the_wind(declared, tmp_path):
    run = RunSpec(0, {"scene": "empty", "mission": "hop_1m", "seed": 5, "use_gps": False, "imu.seed": 9,
                      "physics.wind_enu_m_s": [1, 0, 0]})
    settings = run_settings(run, declared, tmp_path)
    assert settings["/drone1/mission"] == {"output_dir": str(tmp_path), "mission": "hop_1m"}
    assert settings["/recorder"] == {"output_dir": str(tmp_path)}
    assert settings["/drone1/imu"] == {"seed": 9} and settings["/drone1/barometer"] == {"seed": 5}
    assert "/drone1/gps" not in settings
    assert settings["/physics"] == {"wind_enu_m_s": [1.0, 0.0, 0.0]}
    # another parameter of the mission node (the graph's shape) is not a mission to set
    settings = run_settings(RunSpec(0, {"mission": "hop_1m", "mission.land_timeout_s": 3.0}), declared, tmp_path)
    assert settings["/drone1/mission"] == {"output_dir": str(tmp_path), "mission": "hop_1m"}


def physics_pids(marker: str) -> list[int]:
    """The processes of the graph under ``marker`` that host the physics node: its own, or the node container
    (``run.compose``, the default)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline and ("__node:=physics" in cmdline or "aerial_sim.nodes.container" in cmdline):
                pids.append(int(entry.name))
    return pids


#: When the second run's graph is killed, and the file whose appearance says it is time.
KILL_SIGNS = {"mid_flight": ("logs/attempt-1.log", "# warm start "), "after_landing": ("mission_end.json", "")}


def wait_for_sign(out, sign, text, batch, deadline):
    """Until the second run's ``sign`` file holds ``text`` (``batch``, when given, must still be running)."""
    while not any(text in path.read_text() for path in (out / "runs").glob(f"0001-*/{sign}")):
        assert batch is None or batch.poll() is None, batch.communicate()[0][-3000:]
        assert time.monotonic() < deadline, f"no {sign} in the second run"
        time.sleep(0.02)


@requires_ros
@pytest.mark.ros
@pytest.mark.parametrize("when", sorted(KILL_SIGNS))
def test_a_run_killed_in_a_warm_graph_is_retried_on_a_new_graph_and_nothing_else_is_lost(tmp_path, when):
    sweep = tmp_path / "warm.yaml"
    sweep.write_text(yaml.safe_dump({
        "name": "warm",
        "base": {"scene": "empty", "mission": str(SHORT_HOP), "use_camera": False, "use_depth_noise": False,
                 "use_gps": False, "use_magnetometer": False},
        "grid": {"seed": [0, 1, 0]},
        "run": {"timeout_s": 240, "retries": 1, "stall_timeout_s": 60, "export": False, "plots": False},
    }))
    out = tmp_path / "out"
    batch = subprocess.Popen([sys.executable, "-m", "aerial_sim", "batch", str(sweep), "--out", str(out), "--workers", "1",
                              "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    try:
        # Mid-flight: the second run's log says "# warm start" once the graph is un-paused (its bag opens before the
        # restart): then its flight is under way; kill the physics node at once. After the landing: once the mission
        # has written its end, before the batch has read it (below). The physics process is the graph's for all
        # its runs: found during the first.
        deadline = time.monotonic() + 200
        while len(pids := physics_pids(str(out / WARM_DIR / "w1-001"))) != 1:
            assert batch.poll() is None and time.monotonic() < deadline, batch.communicate()[0][-3000:]
            time.sleep(0.1)
        wait_for_sign(out, *KILL_SIGNS["mid_flight"], batch, deadline)
        if when == "after_landing":
            # The batch is stopped from mid-flight until the landing, so that it reads the mission's end only
            # after the kill. Racing it (a poll every 20 ms for the end file, then the kill) lost in ci27 on a
            # quiet machine: the run had been finished and the third run's warm start failed instead.
            os.kill(batch.pid, signal.SIGSTOP)
            try:
                wait_for_sign(out, *KILL_SIGNS["after_landing"], None, deadline)
                os.kill(pids[0], signal.SIGKILL)
            finally:
                os.kill(batch.pid, signal.SIGCONT)
        else:
            os.kill(pids[0], signal.SIGKILL)
        output = batch.communicate(timeout=300)[0]
    finally:
        batch.kill()
    assert batch.returncode == 0, output[-3000:]
    rows = read_manifest(out / "manifest.csv")
    entries = [json.loads((out / "runs" / row["run_id"] / "result.json").read_text()) for row in rows]
    assert [e["status"] for e in entries] == ["ok"] * 3
    assert [e["attempts"] for e in entries] == [1, 2, 1], [e["errors"] for e in entries]
    # Either way the run says its graph died, not (after the landing; ci22 at load 20, where the un-pause answer and
    # so the "# warm start" line came after the 4.9 s flight) that the pause went unanswered.
    assert "launch exited with code" in entries[1]["errors"][0]
    assert ("after the landing" in entries[1]["errors"][0]) == (when == "after_landing"), entries[1]["errors"]
    # graph 1 flew run 1 and lost run 2; graph 2 flew run 2 again, then run 3 warm
    assert sorted(p.name for p in (out / WARM_DIR).iterdir()) == ["w1-001", "w1-002"]
    assert [e.get("warm") for e in entries] == [False, False, True]
    assert 0 < entries[2]["overhead_s"] < 10 and "warm start" in (out / entries[2]["log"]).read_text()
    # the warm run's bag holds the cold-started run's messages (seed 0 both); seed 1 differs (IMU noise)
    assert entries[2]["bag_digest"] == entries[0]["bag_digest"] != entries[1]["bag_digest"]
    assert bag_bytes(out / "runs" / rows[2]["run_id"]) == bag_bytes(out / "runs" / rows[0]["run_id"])
    assert entries[2]["topics"]["/drone1/imu/data"]["count"] == entries[0]["topics"]["/drone1/imu/data"]["count"] > 400
    assert all(e["cpu_per_sim_s"] > 0 and e["flight_cpu_per_sim_s"] > 0 for e in entries)
    assert "CPU per simulated second: " in output


@requires_ros
@pytest.mark.ros
def test_a_warm_runs_bag_is_a_cold_runs_and_a_failed_mission_fails_its_run_at_once(tmp_path):
    high_hop = tmp_path / "high_hop.yaml"
    high_hop.write_text(yaml.safe_dump(HIGH_HOP))
    base = {"scene": "empty", "use_camera": False, "use_depth_noise": False, "use_gps": False,
            "use_magnetometer": False, "seed": 0, "mission.land_timeout_s": 3.0}
    run = {"timeout_s": 240, "retries": 0, "stall_timeout_s": 120, "export": False, "plots": False}
    sweeps = {"cold": {"grid": {"mission": [str(SHORT_HOP)]}, "run": {**run, "warm": False}},
              "warm": {"grid": {"mission": [str(high_hop), str(SHORT_HOP)]}, "run": run}}
    batches = {}
    for name, sweep in sweeps.items():  # side by side
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({"name": name, "base": base, **sweep}))
        batches[name] = subprocess.Popen([sys.executable, "-m", "aerial_sim", "batch", str(tmp_path / f"{name}.yaml"),
                                          "--out", str(tmp_path / name), "--workers", "1", "--no-progress"],
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    try:
        outputs = {name: batch.communicate(timeout=280)[0] for name, batch in batches.items()}
    finally:
        for batch in batches.values():
            batch.kill()
    assert batches["cold"].returncode == 0, outputs["cold"][-3000:]
    assert batches["warm"].returncode == 1, outputs["warm"][-3000:]  # one run failed
    (cold,) = read_manifest(tmp_path / "cold" / "manifest.csv")
    failed, warm = read_manifest(tmp_path / "warm" / "manifest.csv")
    entries = [json.loads((tmp_path / "warm" / "runs" / row["run_id"] / "result.json").read_text())
               for row in (failed, warm)]
    # the high hop's mission failed at its landing (about 7 s of sim time): the run failed then, with the
    # mission's reason, not stall_timeout_s later; the graph flew the next run warm
    assert entries[0]["status"] == "failed" and "the mission failed: not disarmed 3 s after land" in entries[0]["error"]
    assert entries[0]["wall_s"] < 60, entries[0]
    assert entries[1]["status"] == "ok" and entries[1]["warm"] is True
    assert sorted(p.name for p in (tmp_path / "warm" / WARM_DIR).iterdir()) == ["w1-001"]
    # the same run, cold and warm: the same bag files
    runs = {name: tmp_path / name / "runs" for name in ("cold", "warm")}
    assert bag_bytes(runs["warm"] / warm["run_id"]) == bag_bytes(runs["cold"] / cold["run_id"])
