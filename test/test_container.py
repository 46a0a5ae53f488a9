"""One process for the graph's nodes (``aerial_sim launch --compose``, a batch's ``run.compose``; issue 34):
the same nodes, parameters and bag as a process per node."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from conftest import REPO, requires_ros
from test_lockstep_graph import MISSION, landing_time

#: The batch's graph: no camera, no RViz helpers, no servers.
BATCH_GRAPH = ("lockstep:=true", "viewer:=false", "airsim_api:=false", "use_camera:=false", "use_depth_noise:=false",
               "use_scene_markers:=false", "use_depth_points:=false", "scene:=empty")


def dry_run(*arguments: str) -> dict[str, list[str]]:
    """``aerial_sim launch -p`` of sim.launch.yaml: each process's label -> its command line."""
    printed = subprocess.run([sys.executable, "-m", "aerial_sim", "launch", "-p", "sim.launch.yaml", *arguments],
                             cwd=REPO, capture_output=True, text=True, timeout=60, check=True).stdout
    lines = [line.split("] ", 1) for line in printed.splitlines() if line.startswith("[")]
    return {label[1:]: command.split() for label, command in lines}


def test_compose_hosts_the_batch_nodes_in_one_process_and_leaves_the_others_their_own():
    processes = dry_run("--compose", *BATCH_GRAPH, "use_camera:=true", "use_rotor_drag:=true", "linear_drag:=false")
    assert "physics" not in processes and "recorder" not in processes
    assert {"container", "camera"} <= set(processes), processes  # the renderer keeps a process of its own
    command = processes["container"]
    entries = json.loads(open(command[command.index("--entries") + 1]).read())
    assert [e["executable"] for e in entries] == ["physics", "sensors", "rotor_drag", "flight_controller",
                                                  "mission", "recorder"]
    # Each keeps the arguments its own process gets: its name, namespace and parameter files.
    separate = dry_run(*BATCH_GRAPH, "use_camera:=true", "use_rotor_drag:=true", "linear_drag:=false")
    for entry in entries:
        label = entry["executable"]
        own = separate[label][separate[label].index(f"aerial_sim.nodes.{label}") + 1:]
        assert [a for a in entry["argv"] if "params_" not in a] == [a for a in own if "params_" not in a], label


def test_a_container_refuses_a_bad_entry_or_parameter_in_one_line_naming_it(tmp_path):
    def run(entries) -> subprocess.CompletedProcess:
        path = tmp_path / "entries.json"
        path.write_text(json.dumps(entries))
        return subprocess.run([sys.executable, "-m", "aerial_sim.nodes.container", "--entries", str(path)],
                              cwd=REPO, capture_output=True, text=True, timeout=120)

    for name in ("no_such_node", "_sensor", 7):
        unknown = run([{"executable": name, "argv": []}])
        assert unknown.returncode == 2 and f"{name!r} is not a node executable of this package" in unknown.stderr
        assert "Traceback" not in unknown.stderr
    missing = subprocess.run([sys.executable, "-m", "aerial_sim.nodes.container"], cwd=REPO, capture_output=True,
                             text=True, timeout=120)
    assert missing.returncode == 2 and "[FATAL] [container]: cannot start: no --entries FILE" in missing.stderr
    broken = run([{"executable": "mission", "argv": ["--ros-args", "-r", "__node:=mission", "-p", "drain_s:=-1.0"]},
                  {"executable": "barometer", "argv": ["--ros-args", "-r", "__node:=barometer"]}])
    assert broken.returncode == 2, broken.stderr
    assert "[FATAL] [mission]: invalid parameter" in broken.stderr and "drain_s" in broken.stderr
    assert "Traceback" not in broken.stderr


@requires_ros
@pytest.mark.ros
def test_one_process_flies_the_same_bag_as_a_process_per_node(launch, spare_domain, tmp_path):
    runs = [tmp_path / "processes", tmp_path / "one"]
    # Side by side in two domains; the recorder and mission as the batch sets them (no report, no plots).
    parameters = tmp_path / "batch_nodes.yaml"
    parameters.write_text("/**/recorder: {ros__parameters: {write_report: false}}\n"
                          "/**/mission: {ros__parameters: {write_plots: false}}\n")
    graphs = [launch("sim.launch.yaml", *BATCH_GRAPH, f"mission:={MISSION}", f"run_dir:={run}", "--params-file",
                     str(parameters), *extra, domain_id=domain)
              for run, extra, domain in zip(runs, ((), ("--compose",)), (None, spare_domain()))]
    landed = [landing_time(graph, run) for graph, run in zip(graphs, runs)]
    assert landed[0] == landed[1]
    composed = graphs[1].output()
    labels = {line.split("]", 1)[0] + "]" for line in composed.splitlines() if line.startswith("[")}
    assert "[container]" in labels and not labels & {"[physics]", "[sensors]", "[recorder]", "[mission]"}, labels
    assert "one process for imu, barometer, magnetometer, gps" in composed  # the sensors' own hosting, inside
    files = [{p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((run / "bag").iterdir())}
             for run in runs]
    assert files[0] == files[1] and "bag_0.mcap" in files[0], (files, composed[-3000:])
