"""Local backend: ``--workers N`` runs' launches at a time on this machine.

Worker threads only start and watch processes (every run and its post-processing
is its own process tree). There are 2N threads but N launch slots: a run's
post-processing (its own process, a few CPU seconds) overlaps the next run's
launch, whose start-up mostly waits (discovery, lockstep settling). Results come
back to the caller's thread, which writes the manifest.
"""

from __future__ import annotations

import concurrent.futures
import threading
from pathlib import Path
from typing import Callable, Sequence

from aerial_sim.batch.cores import CorePool
from aerial_sim.batch.domains import DomainPool
from aerial_sim.batch.execute import execute_run
from aerial_sim.batch.sweep import RunOptions, RunSpec


def run_local(
    runs: Sequence[RunSpec],
    out_dir: Path,
    launch_file: Path,
    options: RunOptions,
    workers: int,
    on_result: Callable[[dict], None],
    stop: threading.Event,
    pool: DomainPool | None = None,
) -> None:
    """Run ``runs`` on ``workers`` threads; ``on_result`` gets each entry in this thread.

    Setting ``stop`` (Ctrl-C, SIGTERM) stops the running runs and starts no more.
    """
    pool = pool or DomainPool()
    slots = threading.Semaphore(workers)
    cores = CorePool(options.cpus) if options.pin_cpus else None
    with concurrent.futures.ThreadPoolExecutor(max_workers=2 * workers, thread_name_prefix="run") as executor:
        futures = {
            executor.submit(_guarded, run, out_dir, launch_file, options, pool, stop, slots, cores): run for run in runs
        }
        pending = set(futures)
        try:
            while pending:
                done, pending = concurrent.futures.wait(pending, timeout=0.2, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in done:
                    on_result(future.result())
        except BaseException:
            stop.set()
            for future in pending:
                future.cancel()
            raise


def _guarded(run, out_dir, launch_file, options, pool, stop: threading.Event, slots: threading.Semaphore,
             cores: CorePool | None) -> dict:
    if stop.is_set():
        return {"run_id": run.run_id, "status": "interrupted", "attempts": 0}
    return execute_run(run, out_dir, launch_file, options, pool, cancelled=stop.is_set, launch_slots=slots, cores=cores)
