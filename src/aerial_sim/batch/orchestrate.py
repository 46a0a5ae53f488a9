"""A whole sweep: resume, run what is left on a backend, keep the manifest and progress, plot the summary.

One batch at a time per output folder (``DIR/.batch.lock``, flock-ed): a second
``aerial_sim batch`` on the same ``--out`` is refused; on different folders
any number run at once, their runs kept apart by the domain-id locks.
"""

from __future__ import annotations

import fcntl
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from aerial_sim.batch.domains import DomainPool
from aerial_sim.batch.manifest import FAILED, OK, LiveManifest, pending_runs
from aerial_sim.batch.sweep import Sweep

LOCK_FILE = ".batch.lock"
SUMMARY_PLOT = "summary.png"


class BatchBusy(RuntimeError):
    """Another ``aerial_sim batch`` is writing the same output folder."""


@dataclass
class BatchOutcome:
    total: int
    skipped: int
    ok: int = 0
    failed: int = 0
    interrupted: bool = False
    sim_s: float = 0.0
    wall_s: float = 0.0
    #: CPU seconds of the runs done now (every attempt, all in), and of their flights with those flights' sim s.
    cpu_s: float = 0.0
    flight_cpu_s: float = 0.0
    flight_sim_s: float = 0.0
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # run id, error, log

    @property
    def exit_code(self) -> int:
        return 130 if self.interrupted else (1 if self.failed else 0)


class SweepProgress:
    """One bar for the sweep: runs done/failed and simulated seconds per wall second; failed runs' logs."""

    def __init__(self, total: int, skipped: int, enabled: bool, stream: IO[str]):
        from tqdm import tqdm

        self.started = time.monotonic()
        self.sim_s = 0.0
        self.ok = skipped
        self.failed = 0
        self.bar = tqdm(total=total, initial=skipped, unit="run", desc="sweep", disable=not enabled, file=stream,
                        dynamic_ncols=True)
        self.stream = stream
        self.enabled = enabled
        self._refresh()

    def run_finished(self, result: dict, out_dir: Path) -> None:
        log = f"\n  log: {out_dir / result['log'] if result.get('log') else '-'}"
        if result.get("status") == OK:
            self.ok += 1
            self.sim_s += float(result.get("sim_s") or 0.0)
            if result.get("warnings"):
                self._say(f"run {result['run_id']} done, with a warning: {result['warnings']}{log}")
        elif result.get("status") == FAILED:
            self.failed += 1
            self._say(f"run {result['run_id']} failed after {result.get('attempts')} attempt(s): {result.get('error')}{log}")
        else:
            return
        self.bar.update(1)
        self._refresh()

    def _say(self, message: str) -> None:
        self.bar.write(message, file=self.stream) if self.enabled else print(message, file=self.stream)

    def _refresh(self) -> None:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        self.bar.set_postfix_str(f"ok={self.ok} failed={self.failed} sim/wall={self.sim_s / elapsed:.2f}x", refresh=True)

    def close(self) -> None:
        self.bar.close()


def run_batch(
    sweep: Sweep,
    out_dir: Path,
    backend: str = "local",
    workers: int = 1,
    address: str | None = None,
    progress: bool = True,
    stream: IO[str] = sys.stderr,
    stop: threading.Event | None = None,
    pool: DomainPool | None = None,
) -> BatchOutcome:
    """Run every unfinished run of ``sweep`` into ``out_dir``; see :mod:`aerial_sim.batch`."""
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    stop = stop or threading.Event()
    pool = pool or DomainPool()
    with _exclusive(out_dir):
        if sweep.source is not None and sweep.source.resolve() != (out_dir / "sweep.yaml").resolve():
            shutil.copyfile(sweep.source, out_dir / "sweep.yaml")
        todo = pending_runs(out_dir, sweep)
        outcome = BatchOutcome(total=len(sweep.runs), skipped=len(sweep.runs) - len(todo))
        manifest = LiveManifest(out_dir, sweep)
        manifest.write(force=True)
        bar = SweepProgress(len(sweep.runs), outcome.skipped, progress, stream)
        started = time.monotonic()

        def on_result(result: dict) -> None:
            outcome.cpu_s += float(result.get("cpu_s") or 0.0)
            if result.get("status") == OK:
                outcome.ok += 1
                outcome.sim_s += float(result.get("sim_s") or 0.0)
                if result.get("flight_cpu_s") is not None:
                    outcome.flight_cpu_s += float(result["flight_cpu_s"])
                    outcome.flight_sim_s += float(result.get("sim_s") or 0.0)
            elif result.get("status") == FAILED:
                outcome.failed += 1
                outcome.failures.append((result["run_id"], str(result.get("error")), str(out_dir / result.get("log", ""))))
            bar.run_finished(result, out_dir)
            manifest.update(result.get("run_id", ""))
            manifest.write()

        try:
            if todo:
                _run_backend(backend, sweep, todo, out_dir, workers, address, on_result, stop, pool)
        except KeyboardInterrupt:
            stop.set()
        finally:
            bar.close()
            outcome.interrupted = stop.is_set()
            outcome.wall_s = time.monotonic() - started
            manifest.write(force=True)
            _plot(sweep, list(manifest.rows.values()), out_dir)
    return outcome


def _run_backend(backend, sweep, todo, out_dir, workers, address, on_result, stop, pool) -> None:
    if backend == "local" and sweep.options.warm:
        from aerial_sim.batch.warm import run_local_warm

        run_local_warm(todo, out_dir, sweep.launch_file, sweep.options, workers, on_result, stop, pool)
    elif backend == "local":
        from aerial_sim.batch.local import run_local

        run_local(todo, out_dir, sweep.launch_file, sweep.options, workers, on_result, stop, pool)
    elif backend == "ray":
        from aerial_sim.batch.ray_backend import run_ray

        run_ray(todo, out_dir, sweep.launch_file, sweep.options, address, workers, pool.ids, on_result, stop)
    else:
        raise ValueError(f"unknown backend {backend!r} (local or ray)")


def _plot(sweep: Sweep, rows: list[dict], out_dir: Path) -> None:
    from aerial_sim.batch.plot import plot_summary

    plot_summary(rows, sweep.axes, out_dir / SUMMARY_PLOT, title=sweep.name)


class _exclusive:
    """Hold ``DIR/.batch.lock`` for the batch's life."""

    def __init__(self, out_dir: Path):
        self.path = out_dir / LOCK_FILE

    def __enter__(self):
        self.handle = open(self.path, "a+")
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            self.handle.close()
            raise BatchBusy(f"another aerial_sim batch is writing {self.path.parent}") from error
        return self

    def __exit__(self, *exc):
        self.handle.close()
