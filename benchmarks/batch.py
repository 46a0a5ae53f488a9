"""Sweep throughput and CPU of ``aerial_sim batch``: cold against warm runs, a process per node against one
process for the graph, 1 and 2 workers, side by side.

    tools/dev.sh bench batch [--runs 6 | --runs-per-worker 3] [--workers 1 2] [--modes cold warm] [--layouts processes one]
                             [--mission hop_1m] [--scene empty] [--camera] [--pin] [--plots] [--keep DIR] [--no-record]
                             [--before DIR] [--repeat N] [--threads]

Each configuration (mode x workers) runs the same sweep: ``--runs`` seeds of the mission (the smoke
sweep's by default: ``hop_1m`` in the empty scene, IMU, barometer, magnetometer, GPS, recording,
dataset export, each run's PNG plots as the checkout's ``run.plots`` default says or with ``--plots``; no camera
unless ``--camera``) into a fresh folder with the local backend,
``run.warm`` false (*cold*: a launch per run) or true (*warm*: one graph per worker, runs flown in it), and
``run.compose`` false (*processes*: a process per node) or true (*one*: the graph's nodes in one process,
``aerial_sim launch --compose``).
The configurations run one after the other in one invocation, so they see about the same machine load.
``--runs-per-worker N`` gives each configuration N x its workers runs instead: every worker then flies as
many runs (a warm worker pays one launch for N runs whatever the worker count; with ``--runs`` two
workers pay two launches for the runs one worker flies after one).
For each it prints:

- throughput: the runs' simulated seconds / the batch's wall seconds, and runs per hour;
- parallel efficiency: throughput with N workers / (N x throughput with 1 worker of the same mode);
- cores busy: the batch's CPU seconds all in / its wall seconds (what the machine gave it: on a machine
  shared with other work, N workers get less than N times one worker's share), and CPU efficiency: CPU
  per simulated second with 1 worker / with N (below 100 % only where a run costs more beside others:
  what the workers themselves serialise or contend for, whatever share the machine gives them);
- CPU seconds per simulated second: all in (every process of every run, start-up, flight, stop and
  post-processing, the warm graphs' stops too: the batch's own figure) and in flight;
- warm: the overhead between two runs in a graph (landing to the next run's un-pause answered).

With ``--pin`` every run (warm: every graph) is held to one core of its own (``run.pin_cpus``).
``--repeat N`` runs every configuration (and ``--before``'s) N times in turn and prints each one's batches, mean and
range: on the 2-core machine one batch's flight figure moves by 10-20 % from the next. ``--threads`` reads each run's
flight thread by thread (``_flight_threads``: CPU, time runnable but waiting for a CPU, context switches a period,
at the flight's start and landing) and runs a speed probe (a fixed piece of Python every 0.1 s in this process,
its thread CPU: what a CPU second buys right now).
ROS domain ids come from ``AERIAL_SIM_DOMAIN_RANGE`` (default 1-101). Writes ``doc/results/batch.json``
unless ``--no-record``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
# --before runs this file again with another checkout's sources (AERIAL_SIM_BENCH_SRC, also first on PYTHONPATH).
sys.path.insert(0, os.environ.get("AERIAL_SIM_BENCH_SRC", str(REPO / "src")))
sys.path.insert(0, str(REPO / "benchmarks"))
os.environ.setdefault("AERIAL_SIM_SHARE", str(REPO))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")


import _results  # noqa: E402


def write_sweep(folder: Path, runs: int, mission: str, scene: str, camera: bool, pin: bool, warm: bool,
                compose: bool = True, plots: bool = False) -> Path:
    """``plots``: ``run.plots: true``; otherwise the checkout's default."""
    document = {
        "name": "bench",
        "base": {"scene": scene, "mission": mission, "use_camera": camera, "use_depth_noise": camera},
        "grid": {"seed": list(range(runs))},
        "run": {"timeout_s": 900, "retries": 0, "cpus": 1, "pin_cpus": pin, "warm": warm,
                "compose": compose, **({"plots": True} if plots else {})},
    }
    path = folder / f"bench_{'warm' if warm else 'cold'}_{'one' if compose else 'processes'}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def measure(sweep_path: Path, out: Path, workers: int, mode: str, threads: bool = False) -> dict:
    from aerial_sim.batch.manifest import read_manifest
    from aerial_sim.batch.orchestrate import run_batch
    from aerial_sim.batch.sweep import load_sweep

    import resource

    sweep = load_sweep(sweep_path)
    import _flight_threads

    if threads:
        _flight_threads.install()
        probe = _flight_threads.start_probe()
    started, own = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    outcome = run_batch(sweep, out, workers=workers, progress=False)
    wall = time.monotonic() - started
    if threads:
        probe.set()
    now = resource.getrusage(resource.RUSAGE_SELF)
    batch_cpu_s = (now.ru_utime + now.ru_stime) - (own.ru_utime + own.ru_stime)
    rows = [r for r in read_manifest(out / "manifest.csv") if r["status"] == "ok"]
    entries = [yaml.safe_load((out / "runs" / r["run_id"] / "result.json").read_text()) for r in rows]
    sim = sum(float(r["sim_s"]) for r in rows)
    return {
        "mode": mode,
        "workers": workers,
        "ok": len(rows),
        "failed": outcome.failed,
        "wall_s": wall,
        "sim_s": sim,
        "throughput": sim / wall,
        "runs_per_hour": len(rows) / wall * 3600.0,
        "cpu_per_sim_s": outcome.cpu_s / outcome.sim_s if outcome.sim_s else float("nan"),
        "cores": outcome.cpu_s / wall,
        "flight_per_sim_s": outcome.flight_cpu_s / outcome.flight_sim_s if outcome.flight_sim_s else float("nan"),
        "overhead_s": [float(e["overhead_s"]) for e in entries if e.get("overhead_s") is not None],
        "rtf": [float(r["real_time_factor"]) for r in rows if r["real_time_factor"]],
        "postprocess_s": [float(e.get("postprocess_s") or 0.0) for e in entries],
        "split": [run_split(e) for e in entries],
        # what no run's entry holds: the graphs' stops after their last runs, the kept post-processors' ends
        "stop_cpu_s": max(outcome.cpu_s - sum(float(e.get("cpu_s") or 0.0) for e in entries), 0.0),
        # the batch process itself (its workers' watching, the kept processes' feeding, summary.png): in no run's figure
        "batch_cpu_s": batch_cpu_s,
        **({"flights": _flight_threads.per_run(out, entries)} if threads else {}),
    }


def run_split(entry: dict) -> dict:
    """Where one run's CPU s went: flight (un-pause or lockstep start to landing), post-processing (a warm run's
    kept process; a cold run's is not split out of its cpu_s: None), and the rest (a warm run: its warm start and
    landing, the first run of a graph its launch's start-up; a cold run: start-up, stop and post-processing)."""
    flight = float(entry.get("flight_cpu_s") or 0.0)
    post = entry.get("postprocess_cpu_s")
    rest = float(entry.get("cpu_s") or 0.0) - flight - float(post or 0.0)
    return {"run": entry["run_id"], "sim_s": float(entry.get("sim_s") or 0.0), "flight": flight,
            "post": None if post is None else float(post), "rest": rest, "warm": bool(entry.get("warm"))}


def print_split(results: list[dict]) -> None:
    """Per run of each configuration: CPU s in flight, post-processing, the rest; then the stops no run holds."""
    for r in results:
        if not r.get("split"):
            continue
        print(f"\n{r['mode']}, {r['workers']} worker(s): CPU s per run (per simulated s)")
        print(f"{'run':>15} {'sim s':>6} {'flight':>13} {'post-proc.':>13} {'start/warm':>13}")
        for s in r["split"]:
            per = lambda v: f"{v:6.2f} ({v / s['sim_s']:.3f})" if v is not None and s["sim_s"] else "      -      "  # noqa: E731
            rest_label = per(s["rest"]) + (" warm" if s["warm"] else " first" if s["post"] is not None else " all else")
            print(f"{s['run']:>15} {s['sim_s']:>6.2f} {per(s['flight']):>13} {per(s['post']):>13} {rest_label}")
        later = [s for s in r["split"] if s["warm"] and s["sim_s"]]
        if later:  # what each run costs once its graph is up: a long batch's figure, start-ups shared by many runs
            later_sim = sum(s["sim_s"] for s in later)
            share = {k: sum(float(s[k] or 0.0) for s in later) / later_sim for k in ("flight", "post", "rest")}
            print(f"{'warm runs':>15} {'':>6} all in {sum(share.values()):.3f} per sim s: flight {share['flight']:.3f}, "
                  f"post-processing {share['post']:.3f}, warm start {share['rest']:.3f}")
        sim = sum(s["sim_s"] for s in r["split"])
        print(f"{'stops':>15} {'':>6} graphs' stops and kept processes' ends: {r.get('stop_cpu_s', 0.0):.2f} CPU s"
              + (f" ({r.get('stop_cpu_s', 0.0) / sim:.3f} per sim s)" if sim else ""))
        if r.get("batch_cpu_s") is not None:
            print(f"{'batch process':>15} {'':>6} watching, feeding the post-processing, summary.png (in no run's all in): "
                  f"{r['batch_cpu_s']:.2f} CPU s" + (f" ({r['batch_cpu_s'] / sim:.3f} per sim s)" if sim else ""))


def print_flights(results: list[dict]) -> None:
    """``--threads``: each configuration's flights per thread (its warm runs over every repeat; first runs apart)."""
    import _flight_threads

    groups: dict[tuple, list[dict]] = {}
    for r in results:
        if r.get("flights") is not None:
            groups.setdefault((r["mode"], r["workers"]), []).extend(r["flights"])
    for (mode, workers), flights in groups.items():
        for warm in (True, False):
            runs = [f for f in flights if f["warm"] == warm]
            if runs:
                kind = "warm runs" if warm else "runs" if mode.removeprefix("before: ").startswith("cold") else "first runs"
                print(f"\n{mode}, {workers} worker(s), {kind}: the flight by thread")
                print("\n".join(_flight_threads.summary(runs)))


def print_repeats(results: list[dict]) -> None:
    """``--repeat``: each configuration's batches in turn, their flight and all-in figures, mean and range."""
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        groups.setdefault((r["mode"], r["workers"]), []).append(r)
    if all(len(g) < 2 for g in groups.values()):
        return
    print("\nCPU s per simulated s, batch by batch (in turn):")
    for (mode, workers), group in groups.items():
        def line(key):
            values = [r[key] for r in group]
            return (f"{statistics.mean(values):.3f} ({min(values):.3f}-{max(values):.3f}: "
                    f"{' '.join(f'{v:.3f}' for v in values)})")
        print(f"  {mode:>22}, {workers} worker(s): flight {line('flight_per_sim_s')}; all in {line('cpu_per_sim_s')}")


def measure_before(checkout: Path, root: Path, runs: int, options, workers: int, mode: str, layout: str,
                   keep: str = "before") -> dict:
    """One configuration with ``checkout``'s sources (this file run again, in a process of its own whose
    runs inherit its ``src`` first on ``PYTHONPATH``); its mode is named ``before: <mode> <layout>``."""
    import subprocess

    src = (checkout / "src").resolve()
    out = root / "before.json"
    environment = dict(os.environ, AERIAL_SIM_BENCH_SRC=str(src), AERIAL_SIM_SHARE=str(checkout.resolve()),
                       PYTHONPATH=os.pathsep.join([str(src)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    command = [sys.executable, str(Path(__file__).resolve()), "--runs", str(runs), "--workers", str(workers),
               "--modes", mode, "--layouts", layout, "--mission", options.mission, "--scene", options.scene,
               "--no-record", "--json", str(out), "--keep", str(root / keep)]
    command += ["--camera"] * options.camera + ["--pin"] * options.pin + ["--plots"] * options.plots
    command += ["--threads"] * options.threads
    out.unlink(missing_ok=True)
    subprocess.run(command, env=environment, stdout=subprocess.DEVNULL, check=False)
    result = json.loads(out.read_text())["results"][0]
    result["mode"] = f"before: {result['mode']}"
    return result


def print_ratios(results: list[dict]) -> None:
    """This checkout against --before's, configuration by configuration."""
    before = {(r["mode"].removeprefix("before: "), r["workers"]): r for r in results if r["mode"].startswith("before: ")}
    for r in results:
        if (b := before.get((r["mode"], r["workers"]))) is None:
            continue
        if not (b["runs_per_hour"] and b["cpu_per_sim_s"] and r["runs_per_hour"]):
            # No ratio from a side that flew nothing (on a 16-core host a checkout without its own
            # dependencies, jsonschema at 00546fc, failed every run): say so instead of dividing by zero.
            print(f"now / before, {r['mode']}, {r['workers']} worker(s): no ratio, {b['ok']} runs before and "
                  f"{r['ok']} now finished (their logs say why)")
            continue
        print(f"now / before, {r['mode']}, {r['workers']} worker(s): runs/h {r['runs_per_hour'] / b['runs_per_hour']:.2f}x, "
              f"CPU per sim s all in {r['cpu_per_sim_s'] / b['cpu_per_sim_s']:.2f}x "
              f"({b['cpu_per_sim_s']:.3f} -> {r['cpu_per_sim_s']:.3f}), in flight {r['flight_per_sim_s'] / b['flight_per_sim_s']:.2f}x "
              f"({b['flight_per_sim_s']:.3f} -> {r['flight_per_sim_s']:.3f})")


def print_table(results: list[dict]) -> list[dict]:
    """Print one line per configuration; return the rows for doc/results/batch.json."""
    print(f"{'mode':>13} {'workers':>7} {'ok':>3} {'wall s':>8} {'sim s':>7} {'sim/wall':>9} {'runs/h':>7} {'effic.':>7}"
          f" {'CPU/sim s':>10} {'flight':>7} {'overhead s':>11} {'post s':>7} {'cores':>6} {'CPU eff.':>8}")
    base = {r["mode"]: r["throughput"] for r in results if r["workers"] == 1 and r["throughput"] > 0}
    base_cpu = {r["mode"]: r["cpu_per_sim_s"] for r in results if r["workers"] == 1 and r["cpu_per_sim_s"] > 0}
    rows = []
    for r in results:
        efficiency = r["throughput"] / (r["workers"] * base[r["mode"]]) if r["mode"] in base else float("nan")
        cpu_efficiency = base_cpu[r["mode"]] / r["cpu_per_sim_s"] if r["mode"] in base_cpu else float("nan")
        overhead = f"{statistics.median(r['overhead_s']):.2f}" if r["overhead_s"] else "-"
        post = f"{statistics.mean(r['postprocess_s']):.1f}" if r["postprocess_s"] else "n/a"
        print(f"{r['mode']:>13} {r['workers']:>7} {r['ok']:>3} {r['wall_s']:>8.1f} {r['sim_s']:>7.1f} {r['throughput']:>8.2f}x"
              f" {r['runs_per_hour']:>7.0f} {efficiency:>6.0%} {r['cpu_per_sim_s']:>10.3f} {r['flight_per_sim_s']:>7.3f}"
              f" {overhead:>11} {post:>7} {r['cores']:>6.2f} {cpu_efficiency:>7.0%}")
        label = f"{r['mode'].replace(' one', ', one process').replace(' processes', ', a process per node')}, {r['workers']} worker{'s' if r['workers'] > 1 else ''}"
        rows += [
            _results.row(f"{label}: simulated s per wall s", round(r["throughput"], 3), "x",
                         f"{r['ok']} runs, {r['sim_s']:.1f} sim s in {r['wall_s']:.1f} wall s"),
            _results.row(f"{label}: runs per hour", round(r["runs_per_hour"]), "runs/h", ""),
            _results.row(f"{label}: parallel efficiency", round(efficiency, 3), "", "throughput / (workers x 1 worker's)"),
            _results.row(f"{label}: CPU per simulated s, all in", round(r["cpu_per_sim_s"], 3), "CPU s per sim s",
                         "start-up, flight, stop, post-processing (wait4 and /proc)"),
            _results.row(f"{label}: CPU per simulated s, flight", round(r["flight_per_sim_s"], 3), "CPU s per sim s", ""),
            _results.row(f"{label}: cores busy", round(r["cores"], 2), "CPU s per wall s", "the batch's CPU all in / its wall time"),
            _results.row(f"{label}: CPU efficiency", round(cpu_efficiency, 3), "", "CPU per sim s with 1 worker / with N"),
        ]
        if r["overhead_s"]:
            rows.append(_results.row(f"{label}: overhead between warm runs, median", round(statistics.median(r["overhead_s"]), 3),
                                     "s wall", f"max {max(r['overhead_s']):.3f}; landing to the next run's un-pause"))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6, help="runs per configuration (seeds)")
    parser.add_argument("--runs-per-worker", type=int, default=None,
                        help="runs per worker instead: N x workers runs per configuration")
    parser.add_argument("--mission", default="hop_1m")
    parser.add_argument("--scene", default="empty")
    parser.add_argument("--camera", action="store_true", help="with the camera and depth noise")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--modes", nargs="+", choices=("cold", "warm"), default=["cold", "warm"])
    parser.add_argument("--layouts", nargs="+", choices=("processes", "one"), default=["processes", "one"],
                        help="a process per node (run.compose false) and/or the graph in one process (true)")
    parser.add_argument("--pin", action="store_true", help="each run on one core of its own (run.pin_cpus)")
    parser.add_argument("--plots", action="store_true",
                        help="every run's PNG plots (run.plots: true); otherwise each checkout's default")
    parser.add_argument("--threads", action="store_true",
                        help="each run's flight per thread: CPU, run-queue wait, context switches (/proc, at the "
                             "flight's start and landing)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="every configuration (and --before's) this many times, in turn; then each one's mean and range")
    parser.add_argument("--keep", type=Path, default=None, help="keep the batch folders here")
    parser.add_argument("--no-record", action="store_true", help="do not write doc/results/batch.json")
    parser.add_argument("--json", type=Path, default=None,
                        help="write every configuration's figures here as soon as it has run (a run cut short keeps them)")
    parser.add_argument("--before", type=Path, default=None, metavar="DIR",
                        help="another checkout (e.g. git worktree add /tmp/base main): each configuration runs with its "
                             "sources first, then with this one's, alternating, and the table gives both and their ratios")
    parser.add_argument("--summarise", type=Path, default=None, metavar="JSON",
                        help="only print the table of a --json file and exit")
    options = parser.parse_args()
    if options.summarise is not None:
        document = json.loads(options.summarise.read_text()) if options.summarise.exists() else {"results": []}
        print(f"\nsweep: {document.get('what', '?')}; {document.get('cores', '?')} cores; "
              f"load average {document.get('load', float('nan')):.1f} at the last configuration's end")
        print_table(document["results"])
        print_ratios(document["results"])
        print_split(document["results"])
        print_flights(document["results"])
        print_repeats(document["results"])
        return 0

    count = f"{options.runs}" if options.runs_per_worker is None else f"{options.runs_per_worker} per worker:"
    what = (f"{count} runs of {options.mission} in the {options.scene} scene, sensors + recording + export"
            f"{' + plots' if options.plots else ' (plots: the default of each checkout)'}"
            f"{', camera' if options.camera else ', no camera'}{', each run pinned to one core' if options.pin else ''}")
    with tempfile.TemporaryDirectory(prefix="bench_batch_") as tmp:
        root = options.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        results = []
        for repeat in range(1, options.repeat + 1):
            for workers in options.workers:
                for mode in options.modes:
                    for layout in options.layouts:
                        runs = options.runs if options.runs_per_worker is None else options.runs_per_worker * workers
                        sweep = write_sweep(root, runs, options.mission, options.scene, options.camera, options.pin,
                                            mode == "warm", layout == "one", options.plots)
                        name = f"{mode} {layout}"
                        folder = f"{mode}_{layout}_{workers}" + (f"_{repeat}" if options.repeat > 1 else "")
                        print(f"{name}: {runs} x {options.mission} with {workers} worker(s)... (load average "
                              f"{os.getloadavg()[0]:.1f})", flush=True)
                        if options.before is not None:
                            results.append(measure_before(options.before, root, runs, options, workers, mode, layout,
                                                          f"before_{folder}"))
                        results.append(measure(sweep, root / folder, workers, name, options.threads))
                        if options.json is not None:
                            options.json.write_text(json.dumps({"what": what, "cores": os.cpu_count(),
                                                                "load": os.getloadavg()[0], "results": results}, indent=1))
    print(f"\nsweep: {what}; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at the end")
    rows = print_table(results)
    print_ratios(results)
    print_split(results)
    print_flights(results)
    print_repeats(results)
    if not options.no_record:
        command = "tools/dev.sh bench batch" + " ".join(
            [""] + [f"--runs {options.runs}"] * (options.runs != 6 and options.runs_per_worker is None)
            + [f"--runs-per-worker {options.runs_per_worker}"] * (options.runs_per_worker is not None) + [f"--workers {' '.join(map(str, options.workers))}"]
            * (options.workers != [1, 2]) + [f"--modes {' '.join(options.modes)}"] * (options.modes != ["cold", "warm"])
            + [f"--layouts {' '.join(options.layouts)}"] * (options.layouts != ["processes", "one"]))
        _results.record("batch", f"Batch throughput and CPU, cold against warm, a process per node against one ({what})", rows, command=command,
                        notes="configurations run one after another in one invocation; the machine is shared")
    return 0 if all(r["failed"] == 0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
