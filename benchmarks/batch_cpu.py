"""Where a batch run's CPU goes: per process and per phase (start-up, flight, stop, post-processing).

    tools/dev.sh bench batch_cpu [--runs 1] [--before DIR] [--processes] [--threads] [--nodes] [--mission hop_1m]
                                 [--plots] [--no-record]

Runs the smoke sweep's graph (empty scene, no camera, IMU + barometer + magnetometer + GPS,
controller, mission, recorder, export) ``--runs`` times, one run at a time, with
``aerial_sim batch`` (local backend, one worker, a launch per run: ``run.warm`` false, so each run
has its own start-up and stop; the graph's nodes in one process, ``run.compose``, this checkout's
default). While a run goes, this script reads
``/proc`` every 0.2 s for each process whose command line names the run's folder (the
launcher, every node, the post-processing) and splits its CPU (user + system) into phases:

- **start-up**: from the process's start to the physics node's ``lockstep: starting`` line
  (imports, building the world, DDS discovery, the lockstep settle);
- **flight**: from there to the mission's ``metrics.json`` (landing);
- **stop**: from landing to the process's end (closing the bag, shutting down);
- **post-processing**: the ``aerial_sim.batch.postprocess`` process (summary, digest, export).

A process's CPU in its last 0.2 s before it exits is not seen by ``/proc``; the batch's own
``cpu_s`` (``wait4``, complete) is printed beside the sum of the phases.

``--before DIR``: another checkout (e.g. ``git worktree add /tmp/base main``) measured in the
same invocation, its runs alternating with this checkout's (its ``src`` first on ``PYTHONPATH``,
which every process of its runs inherits), so both see the same machine load; the table then
gives both and their ratio. ``--processes``: this checkout's runs also with a process per node
(``run.compose: false``), alternating with the others. ``--threads``: the flight's CPU per thread (the
physics loop and the recorder's taker are named; the executor thread keeps the process's name).
``--nodes``: each node's callback CPU (``AERIAL_SIM_CALLBACK_CPU``, :mod:`aerial_sim.nodes.ros.callback_cpu`),
which splits the executor thread a container shares among its nodes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import _results  # noqa: E402

PHASES = ("start-up", "flight", "stop", "post-processing")
TICK = os.sysconf("SC_CLK_TCK")


def write_sweep(folder: Path, mission: str, seed: int, plots: bool | None = None, compose: bool | None = None) -> Path:
    """``compose``, ``plots`` None: the checkout's default (a checkout from before ``run.compose`` has no such key)."""
    document = {
        "name": "cpu",
        "base": {"scene": "empty", "mission": mission, "use_camera": False, "use_depth_noise": False},
        "grid": {"seed": [seed]},
        "run": {"timeout_s": 600, "retries": 0, "warm": False, **({} if plots is None else {"plots": plots}),
                **({} if compose is None else {"compose": compose})},
    }
    path = folder / "cpu.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def process_name(cmdline: list[str]) -> str:
    """A short name for one of a run's processes from its command line."""
    text = " ".join(cmdline)
    if "aerial_sim.batch.postprocess" in text:
        return "post-processing"
    if " launch " in f" {text} ":
        return "launcher"  # also while the parent-death guard has not yet exec'd it
    if " batch " in f" {text} ":
        return "batch driver"  # the sweep's own process (manifest, summary.png): not in the run's wait4 figure
    for part in cmdline:
        if "/lib/aerial_sim/" in part or part.startswith("aerial_sim.nodes."):
            return part.rsplit("/", 1)[-1].rsplit(".", 1)[-1]
    for index, part in enumerate(cmdline):
        if part == "-m" and index + 1 < len(cmdline):
            return cmdline[index + 1].rsplit(".", 1)[-1]
    return Path(cmdline[0]).name if cmdline else "?"


class Sampler:
    """Reads every matching process's CPU each 0.2 s and books it to the phase it was spent in."""

    def __init__(self, marker: str, folder: Path):
        self.marker, self.folder = marker, folder
        self.last: dict[int, float] = {}
        self.names: dict[int, str] = {}
        self.spent: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.threads: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))  # flight, per thread name
        self.thread_last: dict[tuple[int, int], float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def phase(self) -> str:
        log = next(iter(self.folder.glob("runs/*/logs/attempt-1.log")), None)
        landed = any(self.folder.glob("runs/*/metrics.json"))
        if landed:
            return "stop"
        try:
            started = log is not None and b"lockstep: starting" in log.read_bytes()
        except OSError:
            started = False
        return "flight" if started else "start-up"

    def _loop(self) -> None:
        while not self.stop.is_set():
            self.sample()
            time.sleep(0.2)

    def sample(self) -> None:
        phase = self.phase()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
                if self.marker.encode() not in b" ".join(cmdline):
                    continue
                fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            cpu = (int(fields[11]) + int(fields[12])) / TICK
            self.names[pid] = process_name([c.decode(errors="replace") for c in cmdline if c])
            name = self.names[pid]
            booked = "post-processing" if name == "post-processing" else phase
            self.spent[name][booked] += cpu - self.last.get(pid, 0.0)
            self.last[pid] = cpu
            self._sample_threads(pid, name, entry, flying=phase == "flight")

    def _sample_threads(self, pid: int, name: str, entry: Path, flying: bool) -> None:
        """Each thread's CPU since its last sample, booked to the flight while ``flying``; sampled in every phase,
        so the flight's first interval counts as the process figures' does (a thread first seen: all of it)."""
        try:
            tasks = list((entry / "task").iterdir())
        except OSError:
            return
        for task in tasks:
            try:
                stat = (task / "stat").read_text()
            except OSError:
                continue
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat.rsplit(")", 1)[-1].split()
            cpu = (int(fields[11]) + int(fields[12])) / TICK
            key = (pid, int(task.name))
            if flying:
                self.threads[name][comm] += cpu - self.thread_last.get(key, 0.0)
            self.thread_last[key] = cpu


def measure(src: Path, mission: str, seed: int, root: Path, plots: bool | None = None, compose: bool | None = None,
            nodes: bool = False) -> dict:
    """One run of the sweep with ``src`` first on PYTHONPATH; its CPU per process and phase (``nodes``:
    and per node, the CPU of its callbacks, ``AERIAL_SIM_CALLBACK_CPU``)."""
    folder = root / f"{src.parent.name}-{seed}-{time.monotonic_ns()}"
    folder.mkdir(parents=True)
    sweep = write_sweep(folder, mission, seed, plots, compose)
    out = folder / "out"
    callbacks = folder / "callback_cpu.jsonl"
    environment = dict(os.environ, PYTHONPATH=str(src), AERIAL_SIM_SHARE=str(src.parent),
                       **({"AERIAL_SIM_CALLBACK_CPU": str(callbacks)} if nodes else {}))
    sampler = Sampler(str(out), out)
    sampler.thread.start()
    began = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "aerial_sim", "batch", str(sweep), "--out", str(out),
                             "--workers", "1", "--no-progress"], env=environment, capture_output=True, text=True)
    wall = time.monotonic() - began
    sampler.stop.set()
    sampler.thread.join()
    entries = [json.loads(p.read_text()) for p in out.glob("runs/*/result.json")]
    if result.returncode != 0 or not entries or entries[0].get("status") != "ok":
        raise SystemExit(f"run failed ({result.returncode}): {result.stdout[-2000:]}{result.stderr[-2000:]}")
    entry = entries[0]
    per_node: dict[str, float] = defaultdict(float)
    if callbacks.exists():
        for line in callbacks.read_text().splitlines():
            for name, figures in json.loads(line)["nodes"].items():
                per_node[name] += figures["cpu_s"]
    return {"spent": {k: dict(v) for k, v in sampler.spent.items()}, "threads": {k: dict(v) for k, v in sampler.threads.items()},
            "callbacks": dict(per_node),
            "cpu_s": entry["cpu_s"], "flight_cpu_s": entry["flight_cpu_s"], "sim_s": entry["sim_s"],
            "wall_s": wall, "launch_wall_s": entry["wall_s"], "postprocess_s": entry["postprocess_s"]}


def summarise(runs: list[dict]) -> dict:
    """Mean CPU seconds per simulated second, by process and phase, over ``runs``."""
    table: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for run in runs:
        for name, phases in run["spent"].items():
            for phase, cpu in phases.items():
                table[name][phase] += cpu / run["sim_s"] / len(runs)
    return {
        "table": table,
        "cpu_per_sim_s": statistics.mean(r["cpu_s"] / r["sim_s"] for r in runs),
        "flight_per_sim_s": statistics.mean(r["flight_cpu_s"] / r["sim_s"] for r in runs),
        "sim_s": statistics.mean(r["sim_s"] for r in runs),
        "cpu_s": statistics.mean(r["cpu_s"] for r in runs),
        "wall_s": statistics.mean(r["wall_s"] for r in runs),
    }


def print_table(label: str, summary: dict) -> None:
    table = summary["table"]
    print(f"\n{label}: CPU s per simulated s (sim {summary['sim_s']:.2f} s, batch wall {summary['wall_s']:.1f} s)")
    print(f"{'process':>18} " + " ".join(f"{p:>15}" for p in PHASES) + f" {'total':>8}")
    totals = defaultdict(float)
    for name in sorted(table, key=lambda n: -sum(table[n].values())):
        row = table[name]
        for phase in PHASES:
            totals[phase] += row.get(phase, 0.0)
        print(f"{name:>18} " + " ".join(f"{row.get(p, 0.0):>15.3f}" for p in PHASES) + f" {sum(row.values()):>8.3f}")
    print(f"{'sum (/proc)':>18} " + " ".join(f"{totals[p]:>15.3f}" for p in PHASES) + f" {sum(totals.values()):>8.3f}")
    print(f"batch's own figures (wait4): {summary['cpu_per_sim_s']:.3f} all in, {summary['flight_per_sim_s']:.3f} in flight")


def callbacks_per_sim_s(runs: list[dict]) -> dict[str, float]:
    """Each node's callback CPU per simulated second, the mean over ``runs``."""
    spent: dict[str, float] = defaultdict(float)
    for run in runs:
        for name, cpu in run["callbacks"].items():
            spent[name] += cpu / run["sim_s"] / len(runs)
    return dict(spent)


def threads_per_sim_s(runs: list[dict]) -> dict[str, float]:
    """Each thread's flight CPU per simulated second (``process: thread``), the mean over ``runs``."""
    spent: dict[str, float] = defaultdict(float)
    for run in runs:
        for name, threads in run["threads"].items():
            for thread, cpu in threads.items():
                spent[f"{name}: {thread}"] += cpu / run["sim_s"] / len(runs)
    return dict(spent)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="runs per checkout (seeds 0..runs-1)")
    parser.add_argument("--mission", default="hop_1m")
    parser.add_argument("--before", type=Path, default=None, help="another checkout to compare with, side by side")
    parser.add_argument("--processes", action="store_true",
                        help="this checkout's runs also with a process per node (run.compose: false), side by side")
    parser.add_argument("--threads", action="store_true", help="also print the flight's CPU per thread")
    parser.add_argument("--nodes", action="store_true",
                        help="also print each node's callback CPU (AERIAL_SIM_CALLBACK_CPU; the whole run, start-up and stop included)")
    parser.add_argument("--plots", action="store_true",
                        help="this checkout's runs with their PNG plots (run.plots: true; otherwise each checkout's default)")
    parser.add_argument("--no-record", action="store_true", help="do not write doc/results/batch_cpu.json")
    options = parser.parse_args()
    checkouts = {"this": REPO / "src"}
    layouts = {"this": None}
    if options.processes:
        checkouts = {"this, a process per node": REPO / "src", **checkouts}
        layouts = {"this, a process per node": False, **layouts}
    if options.before is not None:
        checkouts = {"before": options.before.resolve() / "src", **checkouts}
    runs: dict[str, list[dict]] = {label: [] for label in checkouts}
    with tempfile.TemporaryDirectory(prefix="bench_batch_cpu_") as tmp:
        for seed in range(options.runs):
            for label, src in checkouts.items():
                print(f"{label}: run {seed + 1}/{options.runs}...", flush=True)
                plots = True if label == "this" and options.plots else None
                runs[label].append(measure(src, options.mission, seed, Path(tmp), plots=plots,
                                           compose=layouts.get(label), nodes=options.nodes))
    summaries = {label: summarise(r) for label, r in runs.items()}
    for label, summary in summaries.items():
        print_table(f"{label} ({checkouts[label].parent})", summary)
        if options.threads:
            print(f"flight CPU per thread (s per simulated s, the mean of {len(runs[label])} runs):")
            for name, cpu in sorted(threads_per_sim_s(runs[label]).items(), key=lambda i: -i[1]):
                if cpu >= 0.0005:
                    print(f"  {name} {cpu:.3f}")
        if options.nodes:
            spent = callbacks_per_sim_s(runs[label])
            print("callback CPU per node (s per simulated s; each callback with what it publishes):"
                  + ("" if spent else " none reported (a checkout from before AERIAL_SIM_CALLBACK_CPU)"))
            for name, cpu in sorted(spent.items(), key=lambda i: -i[1]):
                if cpu >= 0.0005:
                    print(f"  {name:>28} {cpu:.3f}")
    rows = []
    for label, summary in summaries.items():
        phase_totals = {p: sum(row.get(p, 0.0) for row in summary["table"].values()) for p in PHASES}
        rows.append(_results.row(f"{label}: all in", round(summary["cpu_per_sim_s"], 3), "CPU s per sim s", "wait4, every process of the run"))
        rows.append(_results.row(f"{label}: flight", round(summary["flight_per_sim_s"], 3), "CPU s per sim s", "lockstep start to landing"))
        for phase in PHASES:
            rows.append(_results.row(f"{label}: {phase}", round(phase_totals[phase], 3), "CPU s per sim s", "/proc sampled"))
        for name in sorted(summary["table"], key=lambda n: -sum(summary["table"][n].values()))[:8]:
            row = summary["table"][name]
            rows.append(_results.row(f"{label}: {name}", round(sum(row.values()), 3), "CPU s per sim s",
                                     ", ".join(f"{p} {row.get(p, 0.0):.3f}" for p in PHASES if row.get(p))))
        if options.threads:
            for name, cpu in sorted(threads_per_sim_s(runs[label]).items(), key=lambda i: -i[1]):
                if cpu >= 0.005:
                    rows.append(_results.row(f"{label}: thread {name}", round(cpu, 3), "CPU s per sim s", "in flight"))
        if options.nodes:
            for name, cpu in sorted(callbacks_per_sim_s(runs[label]).items(), key=lambda i: -i[1]):
                if cpu >= 0.0005:
                    rows.append(_results.row(f"{label}: callbacks of {name}", round(cpu, 3), "CPU s per sim s",
                                             "AERIAL_SIM_CALLBACK_CPU, the whole run"))
    if "this, a process per node" in summaries:
        base = summaries["this, a process per node"]
        for what in ("cpu_per_sim_s", "flight_per_sim_s"):
            ratio = summaries["this"][what] / base[what]
            print(f"{what}: {base[what]:.3f} with a process per node, {summaries['this'][what]:.3f} in one process ({ratio:.2f}x)")
            rows.append(_results.row(f"{what}: one process / a process per node", round(ratio, 3), "ratio",
                                     "this checkout, measured side by side, runs alternating"))
    if "before" in summaries:
        ratio = summaries["this"]["cpu_per_sim_s"] / summaries["before"]["cpu_per_sim_s"]
        print(f"\nall in: {summaries['before']['cpu_per_sim_s']:.3f} before, {summaries['this']['cpu_per_sim_s']:.3f} now "
              f"({ratio:.2f}x)")
        rows.append(_results.row("all in, now / before", round(ratio, 3), "ratio", "measured side by side, runs alternating"))
    if not options.no_record:
        command = ("tools/dev.sh bench batch_cpu" + (f" --runs {options.runs}" if options.runs != 1 else "")
                   + (" --processes" if options.processes else "") + (" --threads" if options.threads else "")
                   + (" --nodes" if options.nodes else ""))
        if options.before is not None:
            command += " --before <checkout of the earlier commit>"
        _results.record("batch_cpu", f"CPU of one batch run ({options.mission}, empty scene, no camera) by process and phase",
                        rows, command=command,
                        notes="CPU seconds per simulated second; a process's last 0.2 s before it exits is missing from the /proc rows.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
