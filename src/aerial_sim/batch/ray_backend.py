"""Ray backend: each run a Ray task declaring ``run.cpus`` CPUs, on a cluster or a local Ray instance.

``ray`` is an optional dependency (``tools/requirements-ray.txt``); only this
module imports it, and only when ``--backend ray`` is chosen.

- ``--address HOST:PORT`` joins a running cluster (``ray start --head`` on one
  machine, ``ray start --address HOST:PORT`` on the others); without it a
  local Ray instance is started for the batch (``--workers`` CPUs, small object
  store, no dashboard) and stopped after.
- With ``run.warm`` (the default) each worker is a Ray actor declaring
  ``run.cpus`` CPUs (:class:`WarmActor`): a :class:`aerial_sim.batch.warm.WarmWorker`
  on the node Ray placed it on, keeping its graph between runs of one shape and
  relaunching by the same rules as the local backend's workers; the driver hands
  each idle actor the next run of its graph's shape first (:func:`run_ray_warm`).
  As many actors as ``--workers`` (a local instance) or as the cluster's CPUs
  hold (``--address``), never more than runs.
- With ``run.warm: false`` each run is a Ray task that runs
  :func:`aerial_sim.batch.execute.execute_run` on whichever node Ray picks.
  Either way: the same isolation (a domain id locked on that node, localhost
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
  command like any other failed run. A warm actor that dies loses the runs it
  held without an entry (the one flying, and landed ones whose post-processing
  had not ended): each goes back to the queue for the other actors, counted
  against the same limit; a lost actor is replaced while the cluster has a free
  ``run.cpus`` for it. ``test/test_batch_ray_netns.py`` kills a
  worker node mid-sweep (two network namespaces on one machine).
"""

from __future__ import annotations

import tempfile
import threading
import time
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

    return execute_run(run, Path(out_dir), _launch_file_here(launch_file), options, DomainPool(domain_ids))


class WarmActor:
    """A warm worker (:class:`aerial_sim.batch.warm.WarmWorker`) in a Ray actor: one graph at a time on its node.

    :meth:`fly` flies a run (it returns once the run has landed or failed, with every entry finished since:
    a landed run's post-processing ends after the next run's start, in this actor's own thread), and
    :meth:`finish` stops the graph and returns the rest. Entries of status ``graph`` carry a stopped
    graph's CPU, as the local backend's do."""

    def __init__(self, index: int, out_dir: str, launch_file: str, options: RunOptions, domain_ids: range):
        import concurrent.futures

        from aerial_sim.batch.domains import DomainPool
        from aerial_sim.batch.warm import ThreadPostProcessors, WarmWorker

        self.post = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="post")
        self.postprocessors = ThreadPostProcessors()
        self.futures: list = []
        self.graph_entries: list[dict] = []
        self.worker = WarmWorker(index, Path(out_dir), _launch_file_here(launch_file), options, DomainPool(domain_ids),
                                 None, lambda: False, self.post, self._graph_stopped, self.postprocessors)

    def ready(self) -> bool:
        """Answers once the actor is placed and built."""
        return True

    def _graph_stopped(self, cpu_s: float) -> None:
        self.graph_entries.append({"run_id": None, "status": "graph", "cpu_s": round(cpu_s, 3)})

    def fly(self, run: RunSpec) -> list[dict]:
        self.futures.append(self.worker.fly(run))
        return self._finished()

    def finish(self) -> list[dict]:
        self.worker.stop_graph()
        self.post.shutdown(wait=True)
        self._graph_stopped(self.postprocessors.close())
        return self._finished()

    def _finished(self) -> list[dict]:
        done = [future for future in self.futures if future.done()]
        self.futures = [future for future in self.futures if not future.done()]
        entries, self.graph_entries = self.graph_entries, []
        return [future.result() for future in done] + entries


def _launch_file_here(launch_file: str) -> Path:
    launch = Path(launch_file)
    if not launch.is_file():  # installed elsewhere on this node: the same file from its own share
        from aerial_sim.paths import package_share

        launch = package_share() / "launch" / launch.name
    return launch


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
        if options.warm:
            actors = workers if not address else len(runs)  # on a cluster: as many as its free CPUs place
            run_ray_warm(ray, runs, out_dir, launch_file, options, actors, domain_ids, on_result, stop)
            return
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


def run_ray_warm(ray, runs: Sequence[RunSpec], out_dir: Path, launch_file: Path, options: RunOptions, actors: int,
                 domain_ids: range, on_result: Callable[[dict], None], stop: threading.Event) -> None:
    """Fly ``runs`` on at most ``actors`` :class:`WarmActor` s (module doc); ``on_result`` gets each entry.

    Actors are started one at a time, each once the one before has been placed and the cluster still
    has ``run.cpus`` free (nodes that join later get actors too); a run goes only to a placed actor."""
    from aerial_sim.batch.warm import graph_shape
    from aerial_sim.launcher.description import declared_arguments

    declared = {a.name: a.default for a in declared_arguments(launch_file)}
    shapes = {run.run_id: graph_shape(run, declared) for run in runs}
    pending = list(runs)
    lost: dict[str, int] = {}  # run id -> times an actor died holding it
    actor_class = ray.remote(WarmActor).options(num_cpus=options.cpus, max_restarts=0, max_task_retries=0)
    target = max(1, min(actors, len(runs)))
    numbers = iter(range(1, 1 << 30))
    # actor -> {"held": {run id: run}, "shape": its last run's, "call": a fly/finish ref, "placing": a ready ref}
    live: dict = {}

    def start_actor() -> None:
        actor = actor_class.remote(next(numbers), str(out_dir), str(launch_file), options, domain_ids)
        live[actor] = {"held": {}, "shape": None, "call": None, "placing": actor.ready.remote(), "finishing": False}

    def take(state: dict) -> RunSpec | None:
        for position, run in enumerate(pending):
            if state["shape"] is not None and shapes[run.run_id] == state["shape"]:
                return pending.pop(position)
        return pending.pop(0) if pending else None

    def lose(actor, error: Exception) -> None:
        """The actor's process or node is gone: the runs it held go back to the queue (or fail, lost too often)."""
        state = live.pop(actor)
        for run in reversed(list(state["held"].values())):
            lost[run.run_id] = lost.get(run.run_id, 0) + 1
            if lost[run.run_id] > SYSTEM_FAILURE_RETRIES:
                on_result(_lost_task_entry(run, out_dir, error))
            else:
                pending.insert(0, run)

    start_actor()
    try:
        while live or pending:
            if stop.is_set():
                return
            placed = {actor: state for actor, state in live.items() if state["placing"] is None}
            for actor, state in placed.items():
                if state["call"] is None and (run := take(state)) is not None:
                    state["held"][run.run_id] = run
                    state["shape"] = shapes[run.run_id]
                    state["call"] = actor.fly.remote(run)
            if not pending and all(state["call"] is None for state in placed.values()):
                # Nothing left to fly, and no actor flying a run it could lose (its runs back to the queue,
                # for an actor whose graph still runs): every graph stops, the last runs are post-processed.
                for actor in [actor for actor, state in live.items() if state["placing"] is not None]:
                    live.pop(actor)
                    ray.kill(actor)  # never placed: nothing to finish
                for actor, state in placed.items():
                    state["finishing"], state["call"] = True, actor.finish.remote()
            waits = {state["call"]: actor for actor, state in live.items() if state["call"] is not None}
            waits.update({state["placing"]: actor for actor, state in live.items() if state["placing"] is not None})
            ready = ray.wait(list(waits), num_returns=1, timeout=0.5)[0] if waits else []
            if not waits:
                time.sleep(0.5)
            for ref in ready:
                actor = waits[ref]
                state = live[actor]
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayTaskError:
                    raise  # the worker's own error, not a lost actor: the batch stops, as the local backend's
                except (ray.exceptions.RayError, OSError) as error:
                    lose(actor, error)
                    continue
                if ref is state["placing"]:
                    state["placing"] = None
                    continue
                state["call"] = None
                for entry in result:
                    state["held"].pop(entry.get("run_id"), None)
                    on_result(entry)
                if state["finishing"]:
                    del live[actor]
                    ray.kill(actor)
            unplaced = any(state["placing"] is not None for state in live.values())
            if pending and len(live) < target and not unplaced and (
                    not live or ray.available_resources().get("CPU", 0.0) >= options.cpus):
                start_actor()  # another actor (a node joined, or a lost actor's place) while runs wait
    finally:
        for actor in live:
            ray.kill(actor)


def _lost_task_entry(run: RunSpec, out_dir: Path, error: Exception) -> dict:
    message = " ".join(str(error).split())[:300]
    entry = {"run_id": run.run_id, "index": run.index, "repeat": run.repeat, "parameters": run.parameters,
             "status": FAILED, "attempts": 1, "error": f"Ray task lost: {message}", "errors": [message], "log": ""}
    write_result(out_dir, run, entry)
    return entry
