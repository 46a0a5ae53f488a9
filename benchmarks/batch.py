"""Sweep throughput of ``aerial_sim batch``: simulated seconds per wall second and runs per hour, 1 vs 2 workers.

    tools/dev.sh bench batch [--runs 2] [--mission square_5m] [--camera] [--workers 1 2] [--pin] [--keep DIR]

Each configuration runs the same sweep (``--runs`` seeds of the mission in the
default urban scene, with IMU, barometer, magnetometer and GPS, recording and
dataset export; no camera unless ``--camera``) into a fresh folder with the
local backend, and prints, side by side:

- throughput: the runs' simulated seconds / the batch's wall seconds, and runs per hour;
- scaling: throughput with N workers / with 1 worker (ideal: N);
- per run: the flight's real-time factor (simulated s / wall s between the recorder's
  first and last message; lockstep runs as fast as the graph answers), the launch's
  wall time (start-up, flight, shutdown) and the post-processing time (summary,
  digest, export).

With ``--pin`` every run is held to one core of its own (``run.pin_cpus``): N workers then use
N cores, and the scaling is per added core, whatever one run alone could use of the machine.

ROS domain ids come from ``AERIAL_SIM_DOMAIN_RANGE`` (default 1-101).

A before/after comparison runs each checkout's own copy of this script with its ``src`` first on
``PYTHONPATH``: the runs' processes (``python -m aerial_sim launch`` and the nodes it starts)
inherit it, and without it they import the package installed in the venv, whichever checkout
the script came from.

    PYTHONPATH=$OTHER/src AERIAL_SIM_SHARE=$OTHER .venv/bin/python $OTHER/benchmarks/batch.py --workers 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
os.environ.setdefault("AERIAL_SIM_SHARE", str(REPO))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")


def write_sweep(folder: Path, runs: int, mission: str, camera: bool, pin: bool = False) -> Path:
    document = {
        "name": "bench",
        "base": {"mission": mission, "use_camera": camera, "use_depth_noise": camera},
        "grid": {"seed": list(range(runs))},
        "run": {"timeout_s": 900, "retries": 0, "cpus": 1, "pin_cpus": pin},
    }
    path = folder / "bench.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def measure(sweep_path: Path, out: Path, workers: int) -> dict:
    from aerial_sim.batch.manifest import read_manifest
    from aerial_sim.batch.orchestrate import run_batch
    from aerial_sim.batch.sweep import load_sweep

    sweep = load_sweep(sweep_path)
    started = time.monotonic()
    outcome = run_batch(sweep, out, workers=workers, progress=False)
    wall = time.monotonic() - started
    rows = [r for r in read_manifest(out / "manifest.csv") if r["status"] == "ok"]
    entries = [yaml.safe_load((out / "runs" / r["run_id"] / "result.json").read_text()) for r in rows]
    sim = sum(float(r["sim_s"]) for r in rows)
    return {
        "workers": workers,
        "ok": len(rows),
        "failed": outcome.failed,
        "wall_s": wall,
        "sim_s": sim,
        "throughput": sim / wall,
        "runs_per_hour": len(rows) / wall * 3600.0,
        "rtf": [float(r["real_time_factor"]) for r in rows],
        "launch_s": [float(e["wall_s"]) for e in entries],
        "postprocess_s": [float(e.get("postprocess_s") or 0.0) for e in entries],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs per configuration (seeds)")
    parser.add_argument("--mission", default="square_5m")
    parser.add_argument("--camera", action="store_true", help="with the camera and depth noise")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--pin", action="store_true", help="each run on one core of its own (run.pin_cpus)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the batch folders here")
    options = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench_batch_") as tmp:
        root = options.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        sweep = write_sweep(root, options.runs, options.mission, options.camera, options.pin)
        results = []
        for workers in options.workers:
            print(f"running {options.runs} x {options.mission} with {workers} worker(s)...", flush=True)
            results.append(measure(sweep, root / f"workers_{workers}", workers))
    print(f"\nsweep: {options.runs} runs of {options.mission}, sensors + recording + export"
          f"{', camera' if options.camera else ', no camera'}{', each run pinned to one core' if options.pin else ''}; "
          f"{os.cpu_count()} cores; load average "
          f"{os.getloadavg()[0]:.1f} at the end")
    print(f"{'workers':>7} {'ok':>3} {'wall s':>8} {'sim s':>7} {'sim/wall':>9} {'runs/h':>7} {'scaling':>8}"
          f" {'run RTF':>13} {'launch s':>9} {'post s':>7}")
    base = results[0]["throughput"] if results and results[0]["throughput"] > 0 else None
    for r in results:
        scaling = f"{r['throughput'] / base:.2f}x" if base else "n/a"
        rtf = f"{min(r['rtf']):.2f}-{max(r['rtf']):.2f}" if r["rtf"] else "n/a"
        launch = f"{statistics.mean(r['launch_s']):.1f}" if r["launch_s"] else "n/a"
        post = f"{statistics.mean(r['postprocess_s']):.1f}" if r["postprocess_s"] else "n/a"
        print(f"{r['workers']:>7} {r['ok']:>3} {r['wall_s']:>8.1f} {r['sim_s']:>7.1f} {r['throughput']:>8.2f}x"
              f" {r['runs_per_hour']:>7.0f} {scaling:>8} {rtf:>13} {launch:>9} {post:>7}")
    if len(results) > 1 and base:
        last = results[-1]
        per_core = (last["throughput"] / base - 1) / max(last["workers"] - 1, 1)
        print(f"\nscaling from 1 to {last['workers']} workers: {last['throughput'] / base:.2f}x "
              f"(+{per_core:.0%} of one worker's throughput per added worker; goal >= 1.8x for 2)")
    return 0 if all(r["failed"] == 0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
