"""Ray backend: each run a Ray task declaring ``run.cpus`` CPUs, on a cluster or a local Ray instance.

``ray`` is an optional dependency (``tools/requirements-ray.txt``); only this
module imports it, and only when ``--backend ray`` is chosen.

- ``--address HOST:PORT`` joins a running cluster (``ray start --head`` on one
  machine, ``ray start --address HOST:PORT`` on the others); without it a
  local Ray instance is started for the batch (``--workers`` CPUs, small object
  store, no dashboard) and stopped after.
- A task runs :func:`aerial_sim.batch.execute.execute_run` on whichever node
  Ray picks: the same isolation (a domain id locked on that node, localhost
  discovery), retries and ``result.json`` as the local backend, so resuming
  works across backends. ``--out`` must be one path that every node sees (an
  NFS mount, or an S3 bucket mounted with a FUSE file system such as
  mountpoint-s3 or s3fs); runs write only into their own folders, and the
  manifest is written by the driver.
- Every node needs the same aerial_sim installed (the same venv path or
  package version): tasks are pickled by reference to this module.
- A task whose Ray worker or node died (a machine lost, out of memory) is run
  again by Ray elsewhere, up to :data:`SYSTEM_FAILURE_RETRIES` times
  (``max_retries``; Ray retries only such system failures, never a run that
  failed by itself: that one's own retries are :func:`execute_run`'s); the new
  attempt stops what the lost one left and clears its folder. A task lost more
  often than that is recorded as a failed run, retried on the next ``batch``
  command like any other failed run. ``test/test_batch_ray_netns.py`` kills a
  worker node mid-sweep (two network namespaces on one machine).
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Callable, Sequence

from aerial_sim.batch.manifest import FAILED, write_result
from aerial_sim.batch.sweep import RunOptions, RunSpec

#: Times Ray runs a task again whose worker process or node died (never for a run that failed by itself).
SYSTEM_FAILURE_RETRIES = 2
#: Object store of a local Ray instance: runs return small dicts, so Ray's minimum is plenty.
LOCAL_OBJECT_STORE_BYTES = 100 * 1024 * 1024


def run_task(run: RunSpec, out_dir: str, launch_file: str, options: RunOptions, domain_ids: range) -> dict:
    """The body of one Ray task (runs on a worker node)."""
    from aerial_sim.batch.domains import DomainPool
    from aerial_sim.batch.execute import execute_run
    from aerial_sim.paths import package_share

    launch = Path(launch_file)
    if not launch.is_file():  # installed elsewhere on this node: the same file from its own share
        launch = package_share() / "launch" / launch.name
    return execute_run(run, Path(out_dir), launch, options, DomainPool(domain_ids))


def run_ray(
    runs: Sequence[RunSpec],
    out_dir: Path,
    launch_file: Path,
    options: RunOptions,
    address: str | None,
    workers: int,
    domain_ids: range,
    on_result: Callable[[dict], None],
    stop: threading.Event,
) -> None:
    """Submit every run as a task and hand each entry to ``on_result`` as it finishes."""
    import ray

    if address:
        ray.init(address=address, log_to_driver=False, logging_level="WARNING")
    else:
        ray.init(
            num_cpus=max(1, int(workers * options.cpus)),
            object_store_memory=LOCAL_OBJECT_STORE_BYTES,
            include_dashboard=False,
            _temp_dir=tempfile.mkdtemp(prefix="ray-"),
            log_to_driver=False,
            logging_level="WARNING",
        )
    try:
        task = ray.remote(run_task).options(num_cpus=options.cpus, max_retries=SYSTEM_FAILURE_RETRIES)
        refs = {task.remote(run, str(out_dir), str(launch_file), options, domain_ids): run for run in runs}
        while refs:
            if stop.is_set():
                for ref in refs:
                    ray.cancel(ref, force=True)
                return
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=0.5)
            for ref in ready:
                run = refs.pop(ref)
                try:
                    result = ray.get(ref)
                except (ray.exceptions.RayError, OSError) as error:
                    result = _lost_task_entry(run, out_dir, error)
                on_result(result)
    except BaseException:
        stop.set()
        raise
    finally:
        ray.shutdown()


def _lost_task_entry(run: RunSpec, out_dir: Path, error: Exception) -> dict:
    message = " ".join(str(error).split())[:300]
    entry = {"run_id": run.run_id, "index": run.index, "repeat": run.repeat, "parameters": run.parameters,
             "status": FAILED, "attempts": 1, "error": f"Ray task lost: {message}", "errors": [message], "log": ""}
    write_result(out_dir, run, entry)
    return entry
