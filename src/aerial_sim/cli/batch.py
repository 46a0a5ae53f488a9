"""``aerial_sim batch SWEEP``: run a sweep of headless lockstep simulations, recording and exporting each.

    aerial_sim batch SWEEP [--workers N] [--out DIR] [--backend local|ray] [--address HOST:PORT]
    aerial_sim batch SWEEP --dry-run          # check the sweep, list its runs, start nothing

SWEEP is a sweep file (``config/sweeps/<name>.yaml`` or a path; format in
:mod:`aerial_sim.batch.sweep`). Re-running the same command resumes: finished
runs are skipped. Exit status: 0 every run done, 1 some failed (each named with
its log), 2 a bad sweep file or arguments, 130 interrupted (Ctrl-C, SIGTERM).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path


def default_workers() -> int:
    """One run per two cores: a run's graph (physics, sensors, controller, recorder) keeps more than one core busy."""
    return max(1, (os.cpu_count() or 2) // 2)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="aerial_sim batch", description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", help="sweep file, or a name under config/sweeps/")
    parser.add_argument("--workers", type=int, default=None, help=f"runs at once (default {default_workers()}: cores / 2)")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: batches/<sweep name>)")
    parser.add_argument("--backend", choices=("local", "ray"), default="local")
    parser.add_argument("--address", default=None, help="Ray cluster to join (HOST:PORT); default: a local Ray instance")
    parser.add_argument("--dry-run", action="store_true", help="check the sweep and list its runs; start nothing")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--draw-plots", nargs="*", metavar="RUN_ID", default=None,
                        help="draw the PNG plots a finished run lacks (a sweep flown with run.plots: false), of every "
                             "finished run or of the RUN_IDs given; flies nothing")
    options = parser.parse_args(argv)

    from aerial_sim.batch.domains import DomainPool, DomainRangeError
    from aerial_sim.batch.orchestrate import BatchBusy, run_batch
    from aerial_sim.batch.sweep import SweepError, load_sweep

    workers = options.workers if options.workers is not None else default_workers()
    if workers < 1:
        print("aerial_sim batch: --workers must be >= 1", file=sys.stderr)
        return 2
    if options.address and options.backend != "ray":
        print("aerial_sim batch: --address needs --backend ray", file=sys.stderr)
        return 2
    try:
        sweep = load_sweep(options.sweep)
        pool = DomainPool()
    except (SweepError, DomainRangeError) as error:
        print(f"aerial_sim batch: {error}", file=sys.stderr)
        return 2
    if options.backend == "ray" and not _ray_installed():
        print("aerial_sim batch: --backend ray needs the 'ray' package (pip install -r tools/requirements-ray.txt)",
              file=sys.stderr)
        return 2
    out_dir = (options.out or Path("batches") / sweep.name).resolve()
    if options.dry_run:
        _print_runs(sweep, out_dir)
        return 0
    if options.draw_plots is not None:
        return _draw_plots(sweep, out_dir, options.draw_plots)
    try:  # one line, not a traceback, for an --out that cannot be made (README's /data/wind for a user)
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        print(f"aerial_sim batch: --out {out_dir}: cannot create it: {error.strerror or error}", file=sys.stderr)
        return 2
    previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        outcome = run_batch(sweep, out_dir, options.backend, workers, options.address,
                            progress=not options.no_progress, pool=pool)
    except BatchBusy as error:
        print(f"aerial_sim batch: {error}", file=sys.stderr)
        return 2
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    _print_outcome(outcome, out_dir)
    if not sweep.options.plots and outcome.ok:
        print(f"run plots: not drawn (run.plots: false); aerial_sim batch {options.sweep} --out {out_dir} "
              "--draw-plots [RUN_ID ...] draws them")
    return outcome.exit_code


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _ray_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("ray") is not None


def _print_runs(sweep, out_dir: Path) -> None:
    from aerial_sim.batch.manifest import is_finished

    print(f"sweep '{sweep.name}': {len(sweep.runs)} runs, axes: {', '.join(sweep.axes) or 'none'}; "
          f"timeout {sweep.options.timeout_s:g} s, {sweep.options.retries} retries, export {sweep.options.export}")
    for run in sweep.runs:
        done = " (done)" if is_finished(out_dir, run) else ""
        values = " ".join(f"{k}={v}" for k, v in run.parameters.items())
        print(f"  {run.run_id}{done}  {values}")


def _draw_plots(sweep, out_dir: Path, run_ids: list[str]) -> int:
    """``--draw-plots``: each finished run's missing PNGs, one line per run that has none to draw or fails."""
    from aerial_sim.batch.manifest import is_finished, run_dir
    from aerial_sim.batch.postprocess import draw_plots

    known = {run.run_id: run for run in sweep.runs}
    unknown = [run_id for run_id in run_ids if run_id not in known]
    if unknown:
        print(f"aerial_sim batch: --draw-plots: no run {', '.join(unknown)} in sweep '{sweep.name}'", file=sys.stderr)
        return 2
    chosen = [known[run_id] for run_id in run_ids] if run_ids else list(sweep.runs)
    drawn = failed = 0
    for run in chosen:
        if not is_finished(out_dir, run):
            if run_ids:
                print(f"{run.run_id}: not finished in {out_dir}: nothing to draw")
                failed += 1
            continue
        folder = run_dir(out_dir, run)
        there = set(folder.glob("*.png"))
        try:
            draw_plots(folder)
        except Exception as error:  # noqa: BLE001 - one run's broken folder: say which, draw the others
            print(f"{run.run_id}: plots not drawn: {type(error).__name__}: {error}")
            failed += 1
        drawn += len(set(folder.glob("*.png")) - there)
    print(f"{drawn} PNGs drawn in {out_dir / 'runs'}" + (f"; {failed} runs without" if failed else ""))
    return 1 if failed else 0


def _print_outcome(outcome, out_dir: Path) -> None:
    rate = outcome.sim_s / outcome.wall_s if outcome.wall_s > 0 else 0.0
    print(f"{outcome.ok} runs done now, {outcome.skipped} done before, {outcome.failed} failed"
          f"{', interrupted' if outcome.interrupted else ''}; {outcome.sim_s:.1f} simulated s in {outcome.wall_s:.1f} wall s "
          f"({rate:.2f}x)")
    if outcome.sim_s > 0:
        flight = (f"{outcome.flight_cpu_s / outcome.flight_sim_s:.3f} in flight"
                  if outcome.flight_sim_s > 0 else "in flight not measured")
        print(f"CPU per simulated second: {outcome.cpu_s / outcome.sim_s:.3f} all in ({outcome.cpu_s:.1f} CPU s: start-up, "
              f"flight, stop, post-processing, failed attempts too), {flight}")
    for run_id, error, log in outcome.failures:
        print(f"failed: {run_id}: {error}\n  log: {log}")
    print(f"manifest: {out_dir / 'manifest.csv'}\nsummary plot: {out_dir / 'summary.png'}")
