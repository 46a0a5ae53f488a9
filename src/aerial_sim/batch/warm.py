"""Warm runs (``run.warm``, the default of the local and Ray backends): a worker keeps one launched graph and flies
many runs in it.

A worker launches a graph for the first run it takes (as a cold run does, with the mission kept for
the next run: ``exit_when_done: false``) and, once that run has landed (``metrics.json``), flies the
next run whose parameters leave the graph's shape as it is (:func:`graph_shape`) in the same graph,
through standard services only (doc/batch.md, "Warm runs"):

- at landing: ``/physics/pause`` (the clock would otherwise wait for the finished mission until
  the physics node drops it);
- for the next run: its parameters through ``set_parameters``: the mission's and the recorder's
  ``output_dir`` (the run's folder), the ``mission``, every sensor's ``seed`` (``~/reset`` of each
  sensor whose seed changed), the physics node's wind; ``/recorder/new_bag`` (which closes the run
  before's bag: its post-processing starts, in its own process as a cold run's, while the worker
  flies on), ``/physics/restart``, ``/physics/pause`` false. The run's *overhead* is the wall time
  from the landing before to that last answer (``overhead_s`` in its entry; the run's log has each
  step's share). The last run of a graph has its bag closed when the graph stops.

A parameter that changes the graph's shape (scene, vehicle, a sensor on or off, any launch argument
but ``seed`` and ``mission``, any node parameter but the physics node's wind and a sensor's seed)
stops the graph and launches a new one. A ``seed`` is shape too where a node without ``~/reset``
takes it (lidar, rangefinder, depth noise); a graph of many vehicles, another autopilot, or a launch
file without the warm pieces flies each run in a launch of its own.

A warm run that fails (the launch ends: a node crashed or was killed; a hang: nothing written in the
run's folder for ``stall_timeout_s``, the stacks of every process of the graph in the run's log first;
``timeout_s``; a refused service call) stops and kills the graph and is retried on a new one while
attempts are left; runs done before keep their results.

Logs: each graph has a folder ``OUT/warm/w<worker>-<graph>/`` (the launch's output in
``launch.log``, node logs, parameters file); each run's ``logs/attempt-<n>.log`` gets the part of
``launch.log`` written while it flew, then its post-processing's output.

CPU: a run's ``cpu_s`` is the CPU of the graph's processes from the landing before (for the first
run of a graph, from the launch) to its own landing (``/proc``), plus its post-processing; its flight
share runs from the un-pause (first run: the physics node's ``lockstep: starting``) to its landing.
Post-processing runs in a kept process per post-processing thread (:mod:`aerial_sim.batch.postprocessor`:
its imports are paid once, not per run); one thread at first, another only while landed runs wait for one
(:class:`~aerial_sim.batch.postprocessor.PostThreads`).
The graph's stop after its last run is not any run's: :func:`run_local_warm` hands it to the batch as
an entry of status ``graph`` (counted in the batch's all-in CPU figure).
"""

from __future__ import annotations

import concurrent.futures
import json
import queue
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from aerial_sim.batch.cores import CorePool
from aerial_sim.batch.domains import DomainPool, NoDomainAvailable
from aerial_sim.batch.execute import (
    HEADLESS_DEFAULTS,
    INTERRUPTED,
    LAUNCHER_FILE,
    LOGS_DIR,
    METRICS_FILE,
    Attempt,
    _clear_outputs,
    _entry,
    _FlightCpu,
    _last_error,
    _poll,
    _read_json,
    _stop,
    _Usage,
    execute_run,
    launch_command,
    launch_environment,
    lockstep_drop,
    should_retry,
    stop_leftover,
)
from aerial_sim.batch.hangs import HangWatch, dump_stacks, session_cpu_s
from aerial_sim.batch.manifest import OK, run_dir, write_result
from aerial_sim.batch.postprocess import REPORT_FILE
from aerial_sim.batch.postprocessor import PostProcessor, PostThreads
from aerial_sim.batch.processes import guarded_command
from aerial_sim.batch.sweep import RunOptions, RunSpec
from aerial_sim.run_folder import MISSION_END_FILE

#: Under ``--out``: one folder per launched graph.
WARM_DIR = "warm"
#: Sensors whose node serves ``~/reset`` (a new seed takes effect there), and so may change seed in a warm graph.
SEEDED_SENSORS = ("imu", "barometer", "magnetometer", "gps")
#: Launch arguments (and their defaults) a warm graph needs as they are here.
WARM_LAUNCH = {"vehicles": "1", "fleet": "none", "autopilot": "builtin", "use_controller": "true", "record": "true"}
#: Launch arguments that, when on, start a node taking ``seed`` without a ``~/reset``.
RESETLESS_SEEDED = ("use_lidar", "use_distance")
#: Failed attempts of these kinds say nothing about the run: the graph is relaunched, no attempt counted.
RELAUNCH_KINDS = ("refused",)
#: A run whose mission ended failed (``MISSION_END_FILE``): the graph is sound (its clock stopped where the
#: run ended, as a landed run's); kept for the next run unless this one is retried (its folder, and so its bag,
#: is the retry's: a new graph).
MISSION_FAILED = "mission"
#: Wall seconds from a run's end (``MISSION_END_FILE``: the clock stopped there) to its bag's close
#: (``/recorder/new_bag``): the last outputs stamped before the bag's end reach the recorder (a cold run's
#: mission waits its ``drain_s``, 0.5 s, before it ends the launch). The next run's parameters and resets
#: are set meanwhile. A minimum only: ``/recorder/new_bag`` itself waits (at most 5 s) until every lockstep
#: participant's output due at the stopped clock is recorded, however long a held-up sensor process takes.
DRAIN_S = 0.25


def _warm_parameter(node: str, name: str) -> bool:
    """A node parameter a warm graph changes between runs."""
    if node == "physics":
        return name == "wind_enu_m_s" or name.startswith("wind.")
    return (node in SEEDED_SENSORS and name == "seed") or (node == "mission" and name == "mission")


def warm_arguments(arguments: dict[str, str], declared: dict[str, str | None]) -> tuple[str, ...] | None:
    """The launch arguments a warm graph changes between runs, or None where the graph cannot be warm."""
    effective = {**{k: v for k, v in declared.items() if v is not None}, **HEADLESS_DEFAULTS, **arguments}
    if not {"seed", "mission", "run_dir", "vehicle_name", *WARM_LAUNCH} <= declared.keys():
        return None
    if any(effective.get(name, default) != default for name, default in WARM_LAUNCH.items()):
        return None
    if effective.get("mission") == "none":
        return None
    resetless = any(effective.get(name) == "true" for name in RESETLESS_SEEDED) or (
        effective.get("use_camera") == "true" and effective.get("use_depth_noise") == "true")
    return ("mission",) if resetless else ("seed", "mission")


def graph_shape(run: RunSpec, declared: dict[str, str | None]) -> tuple | None:
    """What two runs must share to fly in one graph (module doc); None: ``run`` gets a launch of its own."""
    changing = warm_arguments(run.launch_arguments, declared)
    if changing is None:
        return None
    fixed = tuple(sorted((k, v) for k, v in run.launch_arguments.items() if k not in changing))
    fixed_nodes, warm_keys = [], []
    for node, values in sorted(run.node_parameters.items()):
        for name, value in sorted(values.items()):
            if _warm_parameter(node, name):
                warm_keys.append(f"{node}.{name}")
            else:
                fixed_nodes.append((node, name, json.dumps(value, sort_keys=True)))
    # Which changing keys a run sets is shape too: a run without one must not inherit the run before's value.
    present = tuple(sorted(k for k in changing if k in run.launch_arguments))
    return fixed, tuple(fixed_nodes), tuple(warm_keys), present


def run_settings(run: RunSpec, declared: dict[str, str | None], folder: Path) -> dict[str, dict[str, Any]]:
    """Node (full name) -> parameters a warm run sets before its restart."""
    arguments = {**{k: v for k, v in declared.items() if v is not None}, **HEADLESS_DEFAULTS, **run.launch_arguments}
    vehicle = arguments.get("vehicle_name", "drone1")
    settings: dict[str, dict[str, Any]] = {f"/{vehicle}/mission": {"output_dir": str(folder)},
                                           "/recorder": {"output_dir": str(folder)}}
    if "mission" in run.launch_arguments:
        settings[f"/{vehicle}/mission"]["mission"] = run.launch_arguments["mission"]
    nodes = run.node_parameters
    for sensor in SEEDED_SENSORS:
        if arguments.get(f"use_{sensor}", "true") != "true":
            continue
        seed = nodes.get(sensor, {}).get("seed", run.launch_arguments.get("seed"))
        if seed is not None:
            settings[f"/{vehicle}/{sensor}"] = {"seed": int(seed)}
    wind = {name: _parameter_value(value) for name, value in nodes.get("physics", {}).items() if _warm_parameter("physics", name)}
    if wind:
        settings["/physics"] = wind
    if "mission" in nodes.get("mission", {}):  # (other mission node parameters are the graph's shape)
        settings[f"/{vehicle}/mission"]["mission"] = str(nodes["mission"]["mission"])
    return settings


def _parameter_value(value: Any) -> Any:
    """A sweep value as a ROS parameter value: numeric lists as float arrays."""
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return [float(v) for v in value]
    return value


@dataclass
class _Graph:
    """One launched graph and what the worker knows of it."""

    launcher: Any
    folder: Path
    log_path: Path
    log: Any
    lease: Any
    cores: tuple[int, ...]
    shape: tuple
    client: Any = None
    usage: _Usage = field(default_factory=_Usage)
    cpu_attributed: float = 0.0  # CPU of its processes already counted in a run's cpu_s
    landed_at: float | None = None  # monotonic time of the last run's landing
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)  # parameters as set now
    runs: int = 0
    closing_s: float = 0.0  # the last landing's pause
    unclosed: list = field(default_factory=list)  # landed runs whose bag is still open: post-processed once closed

    @property
    def marker(self) -> str:
        return str(self.folder)  # every process of the graph names its folder (parameters file, logs)

    def cpu_s(self) -> float:
        return session_cpu_s(self.launcher.pid, self.marker)

    def log_size(self) -> int:
        self.log.flush()
        return self.log_path.stat().st_size


class WarmWorker:
    """One local worker: flies runs, keeping its graph between runs of one shape (module doc)."""

    def __init__(self, index: int, out_dir: Path, launch_file: Path, options: RunOptions, pool: DomainPool,
                 cores: CorePool | None, cancelled: Callable[[], bool], post: concurrent.futures.Executor,
                 on_graph_stopped: Callable[[float], None], postprocessors: "ThreadPostProcessors"):
        from aerial_sim.launcher.description import declared_arguments

        self.index, self.out_dir, self.launch_file, self.options = index, out_dir, launch_file, options
        self.pool, self.cores, self.cancelled, self.post = pool, cores, cancelled, post
        self.on_graph_stopped = on_graph_stopped
        self.postprocessors = postprocessors
        self.declared = {a.name: a.default for a in declared_arguments(launch_file)}
        self.graph: _Graph | None = None
        self.graphs = 0

    def shape(self, run: RunSpec) -> tuple | None:
        return graph_shape(run, self.declared)

    @property
    def current_shape(self) -> tuple | None:
        return self.graph.shape if self.graph is not None else None

    # -- one run, with its retries -------------------------------------------------
    def fly(self, run: RunSpec) -> concurrent.futures.Future:
        """Fly ``run`` (retried on a new graph while attempts are left); a future of its entry."""
        shape = self.shape(run)
        if shape is None:  # its own launch, as a cold run
            self.stop_graph()
            return _done(execute_run(run, self.out_dir, self.launch_file, self.options, self.pool, self.cancelled,
                                     cores=self.cores))
        folder = run_dir(self.out_dir, run)
        stop_leftover(folder)
        started, errors, cpu_s, number = time.time(), [], 0.0, 0
        while True:
            number += 1
            attempt = self._attempt(run, folder, number, shape)
            if attempt.kind in RELAUNCH_KINDS:  # the graph would not take the run: a new graph, same attempt
                errors.append(f"attempt {number}: {attempt.message} (relaunched)")
                self.stop_graph()
                attempt = self._attempt(run, folder, number, shape, relaunch=True)
            cpu_s += attempt.launch_cpu_s
            if number == 1 and attempt.launched_at is not None:
                started = attempt.launched_at
            if not attempt.ok:
                errors.append(f"attempt {number}: {attempt.message}")
            retry = should_retry(attempt, number, self.options)
            if not attempt.ok and (attempt.kind != MISSION_FAILED or retry):
                self.stop_graph()
            if not retry:
                break
        if attempt.kind == INTERRUPTED:
            return _done({"run_id": run.run_id, "status": INTERRUPTED, "attempts": number})
        if not attempt.ok:
            entry = _entry(run, folder, self.out_dir, attempt, number, errors, started, cpu_s)
            write_result(self.out_dir, run, entry)
            return _done(entry)
        result: concurrent.futures.Future = concurrent.futures.Future()
        self.graph.unclosed.append((result, (run, folder, attempt, number, errors, started, cpu_s)))
        return result

    def _post_process_closed(self, graph: _Graph) -> None:
        """The landed runs whose bags are closed now: their post-processing starts."""
        while graph.unclosed:
            result, arguments = graph.unclosed.pop(0)
            future = self.post.submit(self._finish, *arguments)
            future.add_done_callback(lambda done, result=result: _chain(done, result))

    def _finish(self, run: RunSpec, folder: Path, attempt: Attempt, number: int, errors: list[str], started: float,
                cpu_s: float) -> dict:
        """Post-processing of a landed run (in this thread's kept process), then its entry."""
        began = time.monotonic()
        ok, message, post_cpu_s = self.postprocessors.get().run(folder, self.options.export, self.options.plots,
                                                                attempt.log)
        report = _read_json(folder / REPORT_FILE) if ok else None
        if ok and report is None:
            message = f"post-processing wrote no {REPORT_FILE}"
        cpu_s += post_cpu_s
        attempt.extra["postprocess_cpu_s"] = round(post_cpu_s, 3)
        attempt.postprocess_s = time.monotonic() - began
        if report is None:
            attempt.ok, attempt.kind, attempt.message = False, "postprocess", message
            errors.append(f"attempt {number}: {message}")
        attempt.report = report
        entry = _entry(run, folder, self.out_dir, attempt, number, errors, started, cpu_s)
        entry.update(attempt.extra)
        write_result(self.out_dir, run, entry)
        return entry

    def _attempt(self, run: RunSpec, folder: Path, number: int, shape: tuple, relaunch: bool = False) -> Attempt:
        _clear_outputs(folder)
        (folder / LOGS_DIR).mkdir(parents=True, exist_ok=True)
        log_path = folder / LOGS_DIR / f"attempt-{number}.log"
        if relaunch or (self.graph is not None and self.graph.shape != shape):
            self.stop_graph()
        if self.graph is None:
            return self._launch(run, folder, shape, log_path)
        return self._warm(run, folder, log_path)

    # -- a new graph, flying its first run ---------------------------------------------
    def _launch(self, run: RunSpec, folder: Path, shape: tuple, log_path: Path) -> Attempt:
        import subprocess

        try:
            lease = self.pool.acquire(cancelled=self.cancelled)
        except NoDomainAvailable as error:
            log_path.write_text(f"{error}\n")
            return Attempt(False, INTERRUPTED if self.cancelled() else "no_domain", str(error), log_path)
        pinned = self.cores.acquire() if self.cores is not None else ()
        self.graphs += 1
        graph_dir = self.out_dir / WARM_DIR / f"w{self.index}-{self.graphs:03d}"
        shutil.rmtree(graph_dir, ignore_errors=True)
        graph_dir.mkdir(parents=True)
        command = launch_command(run, folder, graph_dir / "logs", graph_dir / "params.yaml", self.launch_file, pinned,
                                 node_defaults={"mission": {"exit_when_done": False}}, compose=self.options.compose)
        environment = launch_environment(lease.domain_id, graph_dir / "logs")
        launched_at, began = time.time(), time.monotonic()
        log = open(graph_dir / "launch.log", "w", encoding="utf-8")
        log.write(f"# ROS_DOMAIN_ID={lease.domain_id}\n# {' '.join(command)}\n# launch started at {launched_at:.3f}\n")
        log.flush()
        launcher = subprocess.Popen(guarded_command(command), stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env=environment, start_new_session=True)
        (graph_dir / LAUNCHER_FILE).write_text(f"{launcher.pid}\n")  # (its session: what a test may look for)
        graph = self.graph = _Graph(launcher, graph_dir, graph_dir / "launch.log", log, lease, pinned, shape)
        graph.settings = run_settings(run, self.declared, folder)
        graph.client = self._client(graph)
        log_path.write_text(f"# run 1 of graph {graph_dir} (ROS_DOMAIN_ID={lease.domain_id}); its launch log from here on\n")
        flight = _FlightCpu(launcher.pid, folder, graph.log_path, periodic=False)
        flight.marker = graph.marker
        attempt = self._watch(graph, folder, log_path, 0, flight)
        attempt.launched_at = launched_at
        attempt.wall_s = time.monotonic() - began
        return attempt

    # -- the next run in a running graph ------------------------------------------------
    def _warm(self, run: RunSpec, folder: Path, log_path: Path) -> Attempt:
        from aerial_sim.nodes.ros.graph_client import GraphCallError

        graph = self.graph
        offset = graph.log_size()
        log_path.write_text(f"# run {graph.runs + 1} of graph {graph.folder} (ROS_DOMAIN_ID={graph.lease.domain_id}), "
                            f"warm; its launch log from byte {offset} on\n")
        began, launched_at = time.monotonic(), time.time()
        settings = run_settings(run, self.declared, folder)
        steps: list[str] = []
        step = time.monotonic()

        def done(name: str) -> None:
            nonlocal step
            now = time.monotonic()
            steps.append(f"{name} {now - step:.3f}")
            step = now

        try:
            client = graph.client
            changed_seeds = []
            for node, values in settings.items():
                changed = {k: v for k, v in values.items() if graph.settings.get(node, {}).get(k) != v}
                if node == "/recorder":
                    continue  # with the new bag, below
                if changed:
                    client.set_parameters(node, changed)
                    graph.settings.setdefault(node, {}).update(changed)
                    if "seed" in changed:
                        changed_seeds.append(node)
            done("parameters")
            for node in changed_seeds:
                client.trigger(f"{node}/reset")
            done("sensor resets")
            drain_s = (graph.landed_at or 0.0) + DRAIN_S - time.monotonic()
            if drain_s > 0:
                time.sleep(drain_s)  # the run before's last outputs into its bag
            done("drain")
            client.set_parameters("/recorder", settings["/recorder"])
            client.trigger("/recorder/new_bag")  # before the restart: its state at t = 0 is the new run's
            graph.settings["/recorder"] = settings["/recorder"]
            self._post_process_closed(graph)  # the run before's bag is closed
            done("new bag")
            client.trigger("/physics/restart")
            done("restart")
            # The flight's CPU is read before the un-pause is asked for, while the graph is still paused: the
            # answer comes from the executor the flight keeps busy, so read after it the flight had begun.
            flight = _FlightCpu(graph.launcher.pid, folder, periodic=False)
            flight.marker = graph.marker
            flight.begin()
            client.set_bool("/physics/pause", False)
            done("un-pause")
        except GraphCallError as error:
            refused = " refused: " in str(error)
            self._copy_log(graph, offset, log_path)
            return Attempt(False, "refused" if refused else "warm", f"warm start failed: {error}", log_path,
                           graph.lease.domain_id, launched_at=launched_at)
        overhead_s = time.monotonic() - (graph.landed_at or began)
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"# warm start {overhead_s:.3f} s after the landing before (pause {graph.closing_s:.3f} s, "
                      f"then s: {', '.join(steps)})\n")
        attempt = self._watch(graph, folder, log_path, offset, flight)
        attempt.launched_at = launched_at
        attempt.wall_s = time.monotonic() - began
        attempt.extra["overhead_s"] = round(overhead_s, 3)
        attempt.extra["warm"] = True
        return attempt

    # -- watching a run in the graph until it lands -------------------------------------
    def _watch(self, graph: _Graph, folder: Path, log_path: Path, offset: int, flight: _FlightCpu) -> Attempt:
        """Until the mission's ``MISSION_END_FILE`` (the run ended, landed or failed, and the clock stopped
        where it ended; CPU counted, the graph paused) or a failure of the graph."""
        options = self.options
        deadline = time.monotonic() + options.timeout_s
        hangs = HangWatch(folder, folder / METRICS_FILE, options.stall_timeout_s, options.stop_timeout_s)
        domain = graph.lease.domain_id
        drops = _DropScan(graph, offset)
        kind, why = "", ""
        while True:
            if _poll(graph.launcher, graph.usage) is not None:
                kind = "crashed"  # its message once the log is copied: the launcher's last error
                break
            why = drops.check()
            if why:  # the clock ran on without a participant: the run cannot be repeated, say so now
                kind = "lockstep"
                break
            if (end := _read_json(folder / MISSION_END_FILE)) is not None:
                break
            why = hangs.check()
            if why:
                kind = "hung"
                graph.log.write(f"# {why}\n")
                dump_stacks(graph.launcher.pid, graph.marker, graph.folder / "logs" / "stacks", graph.log)
                why = f"{why} (stacks in the log; stopped)"
                break
            if self.cancelled():
                kind, why = INTERRUPTED, "batch interrupted"
                break
            if time.monotonic() >= deadline:
                kind, why = "timeout", f"no landing within {options.timeout_s:g} s (stopped)"
                break
            flight.sample(False)
            time.sleep(0.05)
        if kind:
            self._copy_log(graph, offset, log_path)
            if kind == "crashed":
                why = f"launch exited with code {graph.launcher.returncode}{_last_error(log_path)}"
            return Attempt(False, kind, why, log_path, domain)
        landed = time.monotonic()
        flight.sample(True)
        flight_cpu_s = flight.cpu_s()
        cpu_now = graph.cpu_s()
        launch_cpu_s = max(cpu_now - graph.cpu_attributed, 0.0)
        graph.cpu_attributed = cpu_now
        graph.runs += 1
        try:
            graph.client.set_bool("/physics/pause", True)
        except Exception as error:  # noqa: BLE001 - a graph that does not answer: its run cannot be trusted
            self._copy_log(graph, offset, log_path)
            if graph.launcher.poll() is not None:  # it died after the landing (a node killed): say so, not the pause
                return Attempt(False, "crashed", f"launch exited with code {graph.launcher.returncode} after the "
                               f"landing{_last_error(log_path)}", log_path, domain)
            return Attempt(False, "warm", f"pausing after the landing failed: {error}", log_path, domain)
        graph.landed_at = landed
        graph.closing_s = time.monotonic() - landed
        self._copy_log(graph, offset, log_path)
        if end.get("code") != 0:
            return Attempt(False, MISSION_FAILED, f"the mission failed: {end.get('why') or end}", log_path, domain,
                           launch_cpu_s=launch_cpu_s)
        metrics = _read_json(folder / METRICS_FILE)
        if metrics is None:
            return Attempt(False, "no_metrics", f"the mission landed without {METRICS_FILE}", log_path, domain,
                           launch_cpu_s=launch_cpu_s)
        dropped = lockstep_drop(log_path)
        if dropped:
            return Attempt(False, "lockstep", dropped, log_path, domain)
        attempt = Attempt(True, OK, "", log_path, domain, metrics=metrics, launch_cpu_s=launch_cpu_s,
                          flight_cpu_s=flight_cpu_s, launch_ended_at=time.time())
        attempt.extra["warm"] = graph.runs > 1
        return attempt

    def _client(self, graph: _Graph):
        """The graph's client, its service clients made at once: discovered while the first run flies."""
        from std_srvs.srv import SetBool, Trigger
        from rcl_interfaces.srv import SetParameters

        from aerial_sim.nodes.ros.graph_client import GraphClient

        client = GraphClient(graph.lease.domain_id)
        client.prepare(SetBool, "/physics/pause")
        for name in ("/physics/restart", "/recorder/new_bag"):
            client.prepare(Trigger, name)
        for node in graph.settings:
            client.prepare(SetParameters, f"{node}/set_parameters")
            if node.rsplit("/", 1)[-1] in SEEDED_SENSORS:
                client.prepare(Trigger, f"{node}/reset")
        return client

    def _copy_log(self, graph: _Graph, offset: int, log_path: Path) -> None:
        """The part of the graph's launch log from ``offset`` on, appended to the run's log."""
        try:
            graph.log.flush()
            with open(graph.log_path, "rb") as source, open(log_path, "ab") as target:
                source.seek(offset)
                shutil.copyfileobj(source, target)
        except OSError:
            pass

    # -- stopping ------------------------------------------------------------------
    def stop_graph(self) -> None:
        """Stop the graph (SIGTERM to the launch, SIGKILL after ``stop_grace_s``); its stop CPU to the batch."""
        from aerial_sim.launcher.shared_memory import remove_dead_participants

        graph, self.graph = self.graph, None
        if graph is None:
            return
        if graph.client is not None:
            try:
                graph.client.close()
            except Exception:  # noqa: BLE001 - a context already gone
                pass
        _stop(graph.launcher, graph.marker, self.options.stop_grace_s, graph.usage)
        removed = remove_dead_participants()
        graph.log.write(f"# graph stopped at {time.time():.3f}\n" + (f"# {removed.summary()}\n" if removed.segments else ""))
        graph.log.close()
        graph.lease.release()
        if graph.cores:
            self.cores.release(graph.cores)
        self._post_process_closed(graph)  # the recorder closed the last run's bag as it stopped
        self.on_graph_stopped(max(graph.usage.cpu_s - graph.cpu_attributed, 0.0))


class _DropScan:
    """The physics node's ``lockstep: participant dropped`` line in the graph's log from ``offset`` on, looked
    for once a second while a run flies (its new bytes only)."""

    PERIOD_S = 1.0

    def __init__(self, graph: _Graph, offset: int):
        from aerial_sim.physics.lockstep import DROPPED_MARKER

        self.graph, self.position, self.marker = graph, offset, DROPPED_MARKER.encode()
        self.checked_at = time.monotonic()
        self.tail = b""

    def check(self) -> str:
        if time.monotonic() - self.checked_at < self.PERIOD_S:
            return ""
        self.checked_at = time.monotonic()
        try:
            self.graph.log.flush()
            with open(self.graph.log_path, "rb") as log:
                log.seek(self.position)
                new = log.read()
        except OSError:
            return ""
        self.position += len(new)
        text, self.tail = self.tail + new, new[-len(self.marker):]
        at = text.find(self.marker)
        if at < 0:
            return ""
        line = text[at:].split(b"\n", 1)[0]
        return line.decode(errors="replace")[:300]


def _chain(done: concurrent.futures.Future, result: concurrent.futures.Future) -> None:
    error = done.exception()
    result.set_exception(error) if error is not None else result.set_result(done.result())


def _done(entry: dict) -> concurrent.futures.Future:
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.set_result(entry)
    return future


class ThreadPostProcessors:
    """A kept post-processing process per post-processing thread (:mod:`aerial_sim.batch.postprocessor`)."""

    def __init__(self):
        self._local = threading.local()
        self._all: list[PostProcessor] = []
        self._lock = threading.Lock()

    def get(self) -> PostProcessor:
        processor = getattr(self._local, "processor", None)
        if processor is None:
            processor = self._local.processor = PostProcessor()
            with self._lock:
                self._all.append(processor)
        return processor

    def close(self) -> float:
        """End every process; the CPU s they spent after their last reply."""
        with self._lock:
            return sum(processor.close() for processor in self._all)


class _Queue:
    """The runs left; a worker takes the next of its graph's shape first."""

    def __init__(self, runs: Sequence[RunSpec]):
        self._runs = list(runs)
        self._lock = threading.Lock()

    def take(self, worker: WarmWorker) -> RunSpec | None:
        with self._lock:
            if not self._runs:
                return None
            shape = worker.current_shape
            if shape is not None:
                for position, run in enumerate(self._runs):
                    if worker.shape(run) == shape:
                        return self._runs.pop(position)
            return self._runs.pop(0)


def run_local_warm(
    runs: Sequence[RunSpec],
    out_dir: Path,
    launch_file: Path,
    options: RunOptions,
    workers: int,
    on_result: Callable[[dict], None],
    stop: threading.Event,
    pool: DomainPool | None = None,
) -> None:
    """Run ``runs`` on ``workers`` warm workers; ``on_result`` gets each entry in this thread, and an entry
    of status ``graph`` (``cpu_s``: its stop) for each graph stopped."""
    pool = pool or DomainPool()
    cores = CorePool(options.cpus) if options.pin_cpus else None
    results: queue.Queue = queue.Queue()
    pending = _Queue(runs)
    post = PostThreads(workers)  # one kept post-processing process, more only while runs wait for one
    postprocessors = ThreadPostProcessors()

    def work(index: int) -> None:
        worker = WarmWorker(index, Path(out_dir), launch_file, options, pool, cores, stop.is_set, post,
                            lambda cpu_s: results.put({"run_id": None, "status": "graph", "cpu_s": round(cpu_s, 3)}),
                            postprocessors)
        try:
            while not stop.is_set() and (run := pending.take(worker)) is not None:
                future = worker.fly(run)
                future.add_done_callback(lambda done: results.put(done))
        except BaseException as error:  # noqa: BLE001 - handed to the batch's thread
            results.put(error)
        finally:
            worker.stop_graph()
            results.put(None)

    threads = [threading.Thread(target=work, args=(index,), name=f"warm-{index}", daemon=True)
               for index in range(1, workers + 1)]
    for thread in threads:
        thread.start()
    running = len(threads)
    try:
        while running:
            try:
                item = results.get(timeout=0.2)
            except queue.Empty:
                continue
            if item is None:
                running -= 1
            elif isinstance(item, BaseException):
                stop.set()
                raise item
            elif isinstance(item, concurrent.futures.Future):
                on_result(item.result())
            else:
                on_result(item)
        post.shutdown(wait=True)
        results.put({"run_id": None, "status": "graph", "cpu_s": round(postprocessors.close(), 3)})
        while not results.empty():  # post-processing that ended after the last worker
            item = results.get()
            if isinstance(item, concurrent.futures.Future):
                on_result(item.result())
            elif isinstance(item, dict):
                on_result(item)
    except BaseException:
        stop.set()
        raise
    finally:
        for thread in threads:
            thread.join(timeout=options.stop_grace_s + 10.0)
        post.shutdown(wait=True)
        postprocessors.close()


__all__ = ["ThreadPostProcessors", "WarmWorker", "graph_shape", "run_local_warm", "run_settings", "warm_arguments"]
