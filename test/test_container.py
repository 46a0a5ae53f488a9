"""One process for the graph's nodes (``aerial_sim launch --compose``, a batch's ``run.compose``; issue 34):
the same nodes and parameters as a process per node. That it flies the same bag, byte for byte, is
checked by test_lockstep_graph.py, whose second run is composed."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO

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
