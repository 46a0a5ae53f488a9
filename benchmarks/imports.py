"""CPU seconds a process of the graph or of the post-processing pays for its imports (issue 34: start-up).

    tools/dev.sh bench imports [--rounds 5] [--checkout DIR ...] [--top 8]

Each kind of process is started ``--rounds`` times as ``python -c "import ..."`` of the modules it imports
(the batch's node container with the smoke graph's nodes, the camera, lidar and scene markers nodes of a scene
graph, the launcher, a post-processing process with and without its plots), and its CPU (user + system, from
``wait4``) is taken; the best round of each is printed, less that of ``python -c pass`` (the interpreter's
own start). With ``--checkout DIR`` (another checkout's tree, e.g. ``git archive`` of an older commit) the rounds
alternate between DIR's code and this one's, so both share the machine's load. Then, for this checkout, the
packages whose module bodies cost the most CPU in each process (a hook on the import system timing each
module on the process clock, less its own imports: what ``python -X importtime`` reports, on CPU instead of
wall time). Records this checkout's figures in doc/results/imports.json. Python reads a module's bytecode from
``__pycache__`` when it is there and current, else compiles the source (and writes the bytecode unless
``PYTHONDONTWRITEBYTECODE`` is set, as in this project's sessions): ``tools/dev.sh`` writes this checkout's
(``ensure_bytecode``); a DIR without ``__pycache__`` shows what every process paid before.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from _results import record, row

REPO = Path(__file__).resolve().parents[1]

#: Each kind of process and the imports it makes before its first useful work.
PROCESSES = {
    "python -c pass": "pass",
    "node container (smoke graph: physics, sensors, controller, mission, recorder)":
        "import aerial_sim.nodes.container, aerial_sim.nodes.physics, aerial_sim.nodes.sensors, "
        "aerial_sim.nodes.flight_controller, aerial_sim.nodes.mission, aerial_sim.nodes.recorder",
    "camera node": "import aerial_sim.nodes.camera",
    "lidar node": "import aerial_sim.nodes.lidar",
    "scene markers node": "import aerial_sim.nodes.scene_markers",
    "launcher (aerial_sim launch)": "import aerial_sim.cli.main, aerial_sim.launcher.cli",
    "post-processing, no plots": "import aerial_sim.batch.postprocess, aerial_sim.recording.digest, "
                                 "aerial_sim.recording.summary, aerial_sim.recording.topic_reader, "
                                 "aerial_sim.recording.export, aerial_sim.control.track",
    "post-processing with plots": "import aerial_sim.batch.postprocess, aerial_sim.recording.digest, "
                                  "aerial_sim.recording.summary, aerial_sim.recording.topic_reader, "
                                  "aerial_sim.recording.export, aerial_sim.control.track, matplotlib; "
                                  "matplotlib.use('Agg'); import matplotlib.figure, "
                                  "matplotlib.backends.backend_agg",
}

#: Times each module's body on the process clock (less the imports it makes) and prints {package: CPU s}.
PROFILE = r"""
import importlib._bootstrap as bootstrap, json, sys, time
clock, original, stack, spent = time.process_time, bootstrap._find_and_load, [], {}
def timed(name, import_):
    start = clock(); stack.append(0.0)
    try:
        return original(name, import_)
    finally:
        took = clock() - start; inner = stack.pop()
        package = name.split(".")[0]
        spent[package] = spent.get(package, 0.0) + took - inner
        if stack:
            stack[-1] += took
bootstrap._find_and_load = timed
exec(sys.argv[1])
print(json.dumps(spent))
"""


def cpu_of(tree: Path, code: str) -> float:
    """CPU s (user + system) of one ``python -c code`` process with ``tree``'s sources first on the path."""
    env = dict(os.environ, PYTHONPATH=str(tree / "src"), AERIAL_SIM_SHARE=str(REPO))
    process = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise SystemExit(f"{tree}: python -c {code!r} failed ({status})")
    return usage.ru_utime + usage.ru_stime


def packages_of(code: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), AERIAL_SIM_SHARE=str(REPO))
    out = subprocess.run([sys.executable, "-c", PROFILE, code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--checkout", type=Path, action="append", default=[],
                        help="another checkout's tree, alternated with this one (may be given more than once)")
    parser.add_argument("--top", type=int, default=8, help="packages listed per process")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    trees = [(tree.name, tree.resolve()) for tree in args.checkout] + [("this", REPO)]
    best: dict[tuple[str, str], float] = {}
    for _ in range(args.rounds):
        for kind, code in PROCESSES.items():
            for label, tree in trees:
                cpu = cpu_of(tree, code)
                best[label, kind] = min(cpu, best.get((label, kind), cpu))
    print(f"CPU s of each process's imports, best of {args.rounds}, less 'python -c pass' "
          f"({best['this', 'python -c pass']:.3f} s); load average {os.getloadavg()[0]:.1f}:")
    for kind in list(PROCESSES)[1:]:
        figures = {label: best[label, kind] - best[label, "python -c pass"] for label, _ in trees}
        shown = "  ->  ".join(f"{label} {value:.3f}" for label, value in figures.items())
        print(f"  {kind}: {shown}")
    print("this checkout, CPU s of each package's modules (their bodies, less their own imports):")
    for kind, code in list(PROCESSES.items())[1:]:
        spent = sorted(packages_of(code).items(), key=lambda item: -item[1])
        print(f"  {kind}: " + ", ".join(f"{name} {value:.3f}" for name, value in spent[:args.top]))
    if args.no_record:
        return
    record("imports", "CPU s a process pays for its imports (best of rounds, less the interpreter's start)",
           [row(kind, round(best["this", kind] - best["this", "python -c pass"], 3), "CPU s")
            for kind in list(PROCESSES)[1:]], command="tools/dev.sh bench imports")


if __name__ == "__main__":
    main()
