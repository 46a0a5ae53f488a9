"""One run of a sweep, start to entry: domain id, launch, watch, retry, post-process, ``result.json``.

Each attempt is ``aerial_sim launch --strict <launch file> <run's arguments> lockstep:=true
viewer:=false run_dir:=<run folder>`` (plus ``--params-file`` for node
parameters) in a new session, under its own ``ROS_DOMAIN_ID`` (held for the
attempt's life, :mod:`.domains`) with discovery on localhost. The mission node
ends the launch with exit status 0 when it has landed and written
``metrics.json``; then the bag is summarised, digested and exported
(:mod:`.postprocess`). Anything else is a failed attempt:

- the launch exits non-zero (``--strict``: a node crashed, the launcher names it in the log),
  except for exit 3, a node that failed only while the landed run was being stopped (killed
  after ignoring SIGINT and SIGTERM, seen twice with a flight controller stuck in native code):
  its work was done, so the run stands, with that line in its entry's ``warnings``, unless the
  node was the recorder (:data:`MUST_STOP_CLEANLY`), whose bag may then lack its end;
- it runs past ``timeout_s`` wall-clock seconds: it is stopped and killed;
- it hangs (:mod:`.hangs`): nothing written in its folder for ``stall_timeout_s``, or still
  running ``stop_timeout_s`` after its mission wrote ``metrics.json``; the Python stacks of
  all its processes go to the attempt's log first (py-spy, else SIGUSR1 to the handler every
  aerial_sim process registers), then it is stopped and killed;
- it exits 0 without ``metrics.json``, or post-processing fails;
- the physics node dropped a lockstep participant that stayed silent (``lockstep: participant
  dropped`` in the log, :mod:`aerial_sim.physics.lockstep`): the run went on without it, so it is
  not the repeatable run asked for (kind ``lockstep``, that line as the reason).

A failed attempt is retried while attempts are left (:func:`should_retry`);
its log stays in ``logs/attempt-<n>.log``, everything else of it is cleared
before the next attempt. After every launch, the shared memory of Fast DDS participants that
died without closing it (a run stopped by SIGKILL) is removed from /dev/shm, where it would hold
RAM for the rest of the sweep (:mod:`aerial_sim.launcher.shared_memory`; one line in the log).
Used by both backends: a local worker thread and a Ray task call :func:`execute_run` the same way.

CPU per simulated second: the launcher and the post-processing are waited for with ``wait4``,
whose resource usage includes every process they reaped (all the run's nodes); their sum is the
attempt's ``cpu_s``, all in (start-up, flight, stop, post-processing). The flight's share is the
CPU of the run's live processes (``/proc``) between the physics node's ``lockstep: starting``
line and ``metrics.json`` appearing: the start line is looked for at every poll and the CPU read when it is
found, the end read when ``metrics.json`` is (:class:`_FlightCpu`; a warm run's flight is the same reading from its
un-pause). The entry gives both per simulated second (``cpu_per_sim_s``, ``flight_cpu_per_sim_s``).

``launch_slots`` (the local backend's ``--workers``): a semaphore held from the
domain lease to the end of the launch only, so a finished run's post-processing
(a few CPU seconds) overlaps the next run's start-up, which mostly waits (DDS
discovery, lockstep settling).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from aerial_sim.batch.cores import CorePool
from aerial_sim.batch.domains import DomainPool, NoDomainAvailable
from aerial_sim.batch.hangs import DUMP_WAIT_S, HangWatch, dump_stacks, folder_signature, session_cpu_s
from aerial_sim.batch.manifest import FAILED, OK, RESULT_FILE, run_dir, write_result
from aerial_sim.batch.nodeparams import write_params_file
from aerial_sim.batch.postprocess import REPORT_FILE
from aerial_sim.batch.processes import guarded_command, reap_session, session_processes, kill_session, stop_run
from aerial_sim.batch.sweep import RunOptions, RunSpec
from aerial_sim.launcher.description import declared_arguments
from aerial_sim.launcher.runner import DIED_LINE, EXIT_FAILED_WHILE_STOPPING
from aerial_sim.launcher.shared_memory import remove_dead_participants
from aerial_sim.stack_dumps import DUMP_SIGNAL, STACKS_DIR_VARIABLE

LOGS_DIR = "logs"
LAUNCHER_FILE = "launcher.pid"
PARAMS_FILE = "params.yaml"
METRICS_FILE = "metrics.json"
POSTPROCESS_TIMEOUT_S = 600.0
INTERRUPTED = "interrupted"
#: Executables whose failure while stopping fails the run: what they write at their end may be lost.
MUST_STOP_CLEANLY = frozenset({"aerial_sim/recorder"})
#: Metrics of the mission's metrics.json copied into the run's entry.
MISSION_METRICS = ("hausdorff_m", "rms_cross_track_m", "max_cross_track_m")


@dataclass
class Attempt:
    """How one attempt ended."""

    ok: bool
    kind: str  # ok, crashed, timeout, no_metrics, postprocess, interrupted, no_domain
    message: str
    log: Path
    domain_id: int | None = None
    wall_s: float = 0.0
    postprocess_s: float = 0.0
    report: dict | None = None
    metrics: dict | None = None
    warnings: list[str] = field(default_factory=list)  # failures while stopping that did not fail the run
    launched_at: float | None = None  # wall clock (time.time()) when the launch started
    launch_ended_at: float | None = None  # ... and when it ended
    launch_cpu_s: float = 0.0  # CPU of the launcher and every process it reaped
    postprocess_cpu_s: float = 0.0
    flight_cpu_s: float | None = None  # CPU of the run's processes from the bag's first growth to landing
    extra: dict = field(default_factory=dict)  # more fields for the run's entry (a warm run's overhead_s)


def should_retry(attempt: Attempt, attempt_number: int, options: RunOptions) -> bool:
    """Retry policy: any failure but an interruption is retried while attempts are left."""
    return not attempt.ok and attempt.kind != INTERRUPTED and attempt_number < options.max_attempts


def execute_run(
    run: RunSpec,
    out_dir: Path,
    launch_file: Path,
    options: RunOptions,
    pool: DomainPool,
    cancelled: Callable[[], bool] = lambda: False,
    launch_slots: threading.Semaphore | None = None,
    cores: CorePool | None = None,
) -> dict[str, Any]:
    """Run ``run`` with retries and return its entry (written to ``result.json`` unless interrupted)."""
    folder = run_dir(out_dir, run)
    stop_leftover(folder)
    started = time.time()
    errors: list[str] = []
    attempt, number, cpu_s = None, 0, 0.0
    while True:
        number += 1
        attempt = _attempt(run, folder, number, launch_file, options, pool, cancelled, launch_slots, cores)
        cpu_s += attempt.launch_cpu_s + attempt.postprocess_cpu_s
        if number == 1 and attempt.launched_at is not None:
            started = attempt.launched_at
        if not attempt.ok:
            errors.append(f"attempt {number}: {attempt.message}")
        if not should_retry(attempt, number, options):
            break
    if attempt.kind == INTERRUPTED:
        return {"run_id": run.run_id, "status": INTERRUPTED, "attempts": number}
    result = _entry(run, folder, out_dir, attempt, number, errors, started, cpu_s)
    write_result(out_dir, run, result)
    return result


def stop_leftover(folder: Path) -> None:
    """Kill what an earlier batch (killed itself) may have left running in this run folder."""
    try:
        session_id = int((folder / LAUNCHER_FILE).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    if session_processes(session_id, str(folder)):
        kill_session(session_id, str(folder))


def _attempt(run, folder: Path, number: int, launch_file: Path, options: RunOptions, pool: DomainPool, cancelled,
             launch_slots: threading.Semaphore | None = None, cores: CorePool | None = None) -> Attempt:
    logs = folder / LOGS_DIR
    _clear_outputs(folder)
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"attempt-{number}.log"
    if launch_slots is None:
        return _launch_and_postprocess(run, folder, number, launch_file, options, pool, cancelled, log_path, cores=cores)
    while not launch_slots.acquire(timeout=0.2):
        if cancelled():
            log_path.write_text("batch interrupted before the launch\n")
            return Attempt(False, INTERRUPTED, "batch interrupted", log_path)
    held = [launch_slots]
    try:
        return _launch_and_postprocess(run, folder, number, launch_file, options, pool, cancelled, log_path, held, cores)
    finally:
        if held:
            held.pop().release()


def _launch_and_postprocess(run, folder: Path, number: int, launch_file: Path, options: RunOptions, pool: DomainPool,
                            cancelled, log_path: Path, held: list | None = None, cores: CorePool | None = None) -> Attempt:
    """One attempt; ``held`` (the launch slot) and the run's ``cores`` are given back as soon as the launch has ended."""
    try:
        lease = pool.acquire(cancelled=cancelled)
    except NoDomainAvailable as error:
        log_path.write_text(f"{error}\n")
        return Attempt(False, INTERRUPTED if cancelled() else "no_domain", str(error), log_path)
    pinned = cores.acquire() if cores is not None else ()
    with lease:
        command = _launch_command(run, folder, number, launch_file, pinned, options.compose)
        environment = _environment(lease.domain_id, folder, number)
        began, launched_at = time.monotonic(), time.time()
        try:
            with open(log_path, "w", encoding="utf-8") as log:
                log.write(f"# ROS_DOMAIN_ID={lease.domain_id}\n# {' '.join(command)}\n# launch started at {launched_at:.3f}\n")
                log.flush()
                launcher = subprocess.Popen(
                    guarded_command(command), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    env=environment, start_new_session=True,
                )
                (folder / LAUNCHER_FILE).write_text(f"{launcher.pid}\n")
                usage = _Usage()
                kind, why = _watch(launcher, folder, options, cancelled, usage, log, environment[STACKS_DIR_VARIABLE])
        finally:
            if pinned:
                cores.release(pinned)
        wall_s, ended_at = time.monotonic() - began, time.time()
        removed = remove_dead_participants()  # a run stopped by SIGKILL leaves its shared memory (RAM)
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"# launch ended ({kind}) at {ended_at:.3f}, after {wall_s:.2f} s\n")
            if removed.segments:
                log.write(f"# {removed.summary()}\n")
        times = {"launched_at": launched_at, "launch_ended_at": ended_at, "launch_cpu_s": usage.cpu_s,
                 "flight_cpu_s": usage.flight_cpu_s}
        warnings: list[str] = []
        if kind == "exited":
            code = launcher.returncode
            if code == EXIT_FAILED_WHILE_STOPPING:
                warnings, fatal = judge_stop_failures(log_path.read_text(errors="replace"))
                if fatal:
                    return Attempt(False, "crashed", f"launch exited with code {code}: {fatal}", log_path, lease.domain_id, wall_s, **times)
            elif code != 0:
                return Attempt(False, "crashed", f"launch exited with code {code}{_last_error(log_path)}", log_path, lease.domain_id, wall_s, **times)
            dropped = lockstep_drop(log_path)
            if dropped:  # the run went on without a participant: it is not the run asked for
                return Attempt(False, "lockstep", dropped, log_path, lease.domain_id, wall_s, **times)
        elif kind == "timeout":
            return Attempt(False, "timeout", f"no landing within {options.timeout_s:g} s (stopped)", log_path, lease.domain_id, wall_s, **times)
        elif kind == "hung":
            return Attempt(False, "hung", f"{why} (stacks in the log; stopped)", log_path, lease.domain_id, wall_s, **times)
        else:
            return Attempt(False, INTERRUPTED, "batch interrupted", log_path, lease.domain_id, wall_s, **times)
    if held:
        held.pop().release()  # the next run may start while this one is post-processed
    metrics = _read_json(folder / METRICS_FILE)
    if metrics is None:
        return Attempt(False, "no_metrics", f"the launch ended without {METRICS_FILE}", log_path, lease.domain_id, wall_s, **times)
    began = time.monotonic()
    post_usage = _Usage()
    report, message = _postprocess(folder, options, log_path, post_usage)
    times["postprocess_cpu_s"] = post_usage.cpu_s
    if report is None:
        return Attempt(False, "postprocess", message, log_path, lease.domain_id, wall_s, **times)
    return Attempt(True, OK, "", log_path, lease.domain_id, wall_s, time.monotonic() - began, report, metrics, warnings, **times)


class _Usage:
    """CPU seconds of a waited-for child (with everything it reaped), and of the run's flight."""

    def __init__(self):
        self.cpu_s = 0.0
        self.flight_cpu_s: float | None = None


def _poll(popen: subprocess.Popen, usage: _Usage, block: bool = False) -> int | None:
    """``popen.poll()`` (or ``wait()``) through ``wait4``, adding the child's resource usage to ``usage``."""
    if popen.returncode is not None:
        return popen.returncode
    try:
        pid, status, rusage = os.wait4(popen.pid, 0 if block else os.WNOHANG)
    except ChildProcessError:
        return popen.poll()
    if pid == 0:
        return None
    usage.cpu_s += rusage.ru_utime + rusage.ru_stime
    popen.returncode = os.waitstatus_to_exitcode(status)
    return popen.returncode


def _watch(launcher: subprocess.Popen, folder: Path, options: RunOptions, cancelled, usage: _Usage, log,
           stacks_dir: str) -> tuple[str, str]:
    """Wait for the launch to end: ('exited', ''), ('timeout', ''), ('cancelled', '') or ('hung', why),
    the last three stopped and reaped; a hung run's stacks are written to ``log`` first."""
    marker = str(folder)
    deadline = time.monotonic() + options.timeout_s
    hangs = HangWatch(folder, folder / METRICS_FILE, options.stall_timeout_s, options.stop_timeout_s)
    flight = _FlightCpu(launcher.pid, folder, Path(log.name))
    while _poll(launcher, usage) is None:
        why = hangs.check()
        if cancelled() or time.monotonic() >= deadline or why:
            kind = "cancelled" if cancelled() else "hung" if why else "timeout"
            if why:
                log.write(f"# {why}\n")
                dump_stacks(launcher.pid, marker, Path(stacks_dir), log)
            _stop(launcher, marker, options.stop_grace_s, usage)
            usage.flight_cpu_s = flight.cpu_s()
            return kind, why
        flight.sample((folder / METRICS_FILE).is_file())
        time.sleep(0.2)
    usage.flight_cpu_s = flight.cpu_s()
    reap_session(launcher, marker)  # nodes a dying launcher could not stop
    return "exited", ""


def _stop(launcher: subprocess.Popen, marker: str, grace_s: float, usage: _Usage) -> None:
    """:func:`stop_run`, waiting for the launcher through :func:`_poll` (its CPU is counted)."""
    import signal

    if _poll(launcher, usage) is None:
        try:
            os.killpg(launcher.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
        end = time.monotonic() + grace_s
        while _poll(launcher, usage) is None and time.monotonic() < end:
            time.sleep(0.1)
    if _poll(launcher, usage) is None:
        launcher.kill()
        _poll(launcher, usage, block=True)
    stop_run(launcher, marker, grace_s)  # whatever of the session is left, and the launcher collected


class _FlightCpu:
    """CPU of the run's live processes from the flight's start to landing.

    The flight starts at the physics node's ``lockstep: starting`` line in the attempt's log (every
    batch run is lockstep); a warm run's at its un-pause (:meth:`begin`). The line is looked for at
    every poll (the log's new bytes only) and the CPU read as soon as it is seen, the end as soon as
    the run has landed: a graph's first run and its warm runs count their flights the same way. For a
    launch that never prints the line, the flight starts when the bag first grows (read then, used
    only if the line never comes: a lockstep run's recorder writes its bag's schemas during the
    start-up, seconds before the flight).

    (The start used to be looked for once a second, by the line or the bag's growth, whichever was
    seen first: a first run's flight began at a random point of the start-up or up to a second late.)
    With ``periodic`` (a cold run's launch), the CPU is also read once a second while flying, for a launch
    that ends before it lands (its processes are gone by then); a warm graph's runs read it at the start
    and at the landing only (each reading walks ``/proc``: it was a third of a batch's own CPU).
    """

    START_LINE = b"lockstep: starting"

    def __init__(self, session_id: int, folder: Path, log_path: Path | None = None, periodic: bool = True):
        self.session_id, self.marker, self.bag = session_id, str(folder), folder / "bag"
        self.log_path, self.periodic = log_path, periodic
        self._log_offset = 0
        self._bag_signature = None
        self._bag_start: float | None = None  # CPU when the bag first grew (the start without the line)
        self._start: float | None = None
        self._end: float | None = None
        self._last: float | None = None
        self._next = 0.0

    def begin(self) -> None:
        """The flight starts now (a warm run's un-pause)."""
        self._start = self._last = session_cpu_s(self.session_id, self.marker)
        self._next = time.monotonic() + 1.0

    def _line_seen(self) -> bool:
        if self.log_path is None:
            return False
        try:
            with open(self.log_path, "rb") as log:
                log.seek(max(self._log_offset - len(self.START_LINE), 0))
                text = log.read()
                self._log_offset = log.tell()
        except OSError:
            return False
        return self.START_LINE in text

    def _bag_grew(self) -> bool:
        signature = folder_signature(self.bag) if self.bag.is_dir() else None
        grew = bool(signature and signature[1] > 0 and self._bag_signature is not None and signature != self._bag_signature)
        if signature and signature[1] > 0:
            self._bag_signature = signature
        return grew

    def sample(self, landed: bool) -> None:
        """Call at every poll; ``landed``: metrics.json exists (then the flight's end is taken at once)."""
        if self._end is not None:
            return
        # A line first read at the landing is not the flight's start: the launcher relays the nodes' output
        # and, on a loaded machine, may lag the whole flight (a flight of 0 CPU s was booked so).
        if self._start is None and not landed and self._line_seen():
            self.begin()
        if self._start is None and self._bag_start is None:
            if self._bag_grew():
                self._bag_start = self._last = session_cpu_s(self.session_id, self.marker)
                self._next = time.monotonic() + 1.0
            return
        if landed:
            self._end = session_cpu_s(self.session_id, self.marker)
        elif self.periodic and time.monotonic() >= self._next:
            self._next = time.monotonic() + 1.0
            self._last = session_cpu_s(self.session_id, self.marker)  # in case the launch ends first

    def cpu_s(self) -> float | None:
        start = self._start if self._start is not None else self._bag_start
        end = self._end if self._end is not None else self._last
        if start is None or end is None:
            return None
        return max(end - start, 0.0)


def lockstep_drop(log_path: Path) -> str:
    """The physics node's first ``lockstep: participant dropped`` line in the launch log ("" if none)."""
    from aerial_sim.physics.lockstep import DROPPED_MARKER

    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return ""
    for line in text.splitlines():
        if DROPPED_MARKER in line:
            return line[line.index(DROPPED_MARKER):][:300]
    return ""


def judge_stop_failures(launch_log: str) -> tuple[list[str], str]:
    """Of a launch that exited 3: its ``process has died`` lines as warnings (``label (package/executable)
    how while stopping``), and the first that fails the run (:data:`MUST_STOP_CLEANLY`; "" if none)."""
    warnings, fatal = [], []
    for match in DIED_LINE.finditer(launch_log):
        line = f"{match['label']} ({match['executable']}) {match['how']} while stopping"
        warnings.append(line)
        # A recorder that died after its bag was closed (its teardown watchdog: nodes.ros.process) lost nothing.
        closed = f"[{match['label']}] [recorder] bag closed:" in launch_log
        if match["executable"] in MUST_STOP_CLEANLY and not closed:
            fatal.append(line)
    if not warnings:
        return [], "no process named as failed while stopping"
    return warnings, fatal[0] if fatal else ""


def _postprocess(folder: Path, options: RunOptions, log_path: Path, usage: _Usage) -> tuple[dict | None, str]:
    command = [sys.executable, "-m", "aerial_sim.batch.postprocess", str(folder), *(["--export"] if options.export else []),
               *([] if options.plots else ["--no-plots"])]
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"# post-processing: {' '.join(command)}\n")
        log.flush()
        process = subprocess.Popen(guarded_command(command), stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT)
        deadline = time.monotonic() + POSTPROCESS_TIMEOUT_S
        while _poll(process, usage) is None:
            if time.monotonic() >= deadline:
                log.write("# post-processing hung; its stacks:\n")
                log.flush()
                try:
                    os.kill(process.pid, DUMP_SIGNAL)  # its handler writes them to stderr: this log
                    time.sleep(DUMP_WAIT_S)
                except (ProcessLookupError, PermissionError):
                    pass
                process.kill()
                _poll(process, usage, block=True)
                return None, f"post-processing took over {POSTPROCESS_TIMEOUT_S:g} s"
            time.sleep(0.1)
        code = process.returncode
        log.write(f"# post-processing ended at {time.time():.3f}\n")
    report = _read_json(folder / REPORT_FILE)
    if code != 0 or report is None:
        return None, f"post-processing failed (exit {code}){_last_error(log_path)}"
    return report, ""


#: Launch arguments a batch run gets unless its sweep sets them (where the launch file has them): no
#: AirSim server (no client would talk to it, and concurrent runs would compete for its one port), and
#: none of the RViz helpers: the scene markers (a process that loads the scene's meshes to publish one
#: latched message, 0.17 CPU s per simulated second of the smoke sweep's all-in 2.35) and the depth point
#: cloud (not recorded by default; 0.08 even without a camera), ``tools/dev.sh bench batch_cpu``.
HEADLESS_DEFAULTS = {"airsim_api": "false", "use_scene_markers": "false", "use_depth_points": "false"}
#: Node parameters a batch run gets unless its sweep sets them: the recorder leaves ``recording.txt`` and
#: ``trajectory.png`` to the post-processing, which has the bag's summary from its one read anyway (the
#: recorder would read the bag again and import matplotlib after closing it, holding the launch's end);
#: the mission leaves its two plots to it too (drawn from ``track.csv``: the launch ends about 1.5 s
#: sooner, and the bag has that much less simulated tail to read).
BATCH_NODE_DEFAULTS = {"recorder": {"write_report": False}, "mission": {"write_plots": False}}


def _launch_command(run: RunSpec, folder: Path, number: int, launch_file: Path, cores: tuple[int, ...] = (),
                    compose: bool = False) -> list[str]:
    return launch_command(run, folder, folder / LOGS_DIR / f"attempt-{number}", folder / PARAMS_FILE, launch_file, cores,
                          compose=compose)


def launch_command(run: RunSpec, run_folder: Path, log_dir: Path, params_path: Path, launch_file: Path,
                   cores: tuple[int, ...] = (), node_defaults: dict[str, dict[str, Any]] | None = None,
                   compose: bool = False) -> list[str]:
    """``aerial_sim launch`` of ``run`` into ``run_folder``: node logs under ``log_dir``, node parameters
    (the run's over ``node_defaults`` over :data:`BATCH_NODE_DEFAULTS`) written to ``params_path``;
    ``compose``: the graph's composable nodes in one process (``--compose``, ``run.compose``)."""
    arguments = {**HEADLESS_DEFAULTS, **run.launch_arguments, "lockstep": "true", "viewer": "false",
                 "run_dir": str(run_folder)}
    declared = {argument.name for argument in declared_arguments(launch_file)}
    arguments = {k: v for k, v in arguments.items() if k in declared or k not in HEADLESS_DEFAULTS}
    command = [sys.executable, "-m", "aerial_sim", "launch", "--strict", str(launch_file),
               *(f"{k}:={v}" for k, v in arguments.items()), "--log-dir", str(log_dir)]
    if cores:
        command += ["--cpus", ",".join(map(str, cores))]
    if compose:
        command.append("--compose")
    node_parameters = {node: dict(values) for node, values in run.node_parameters.items()}
    for node in {*BATCH_NODE_DEFAULTS, *(node_defaults or {})}:
        defaults = {**BATCH_NODE_DEFAULTS.get(node, {}), **(node_defaults or {}).get(node, {})}
        node_parameters[node] = {**defaults, **node_parameters.get(node, {})}
    command += ["--params-file", str(write_params_file(node_parameters, params_path))]
    return command


def _environment(domain_id: int, folder: Path, number: int) -> dict[str, str]:
    return launch_environment(domain_id, folder / LOGS_DIR / f"attempt-{number}")


def launch_environment(domain_id: int, log_dir: Path) -> dict[str, str]:
    """The environment of a batch launch: its domain, localhost discovery, logs and stack dumps under ``log_dir``."""
    environment = dict(os.environ)
    environment.pop("AERIAL_SIM_RUN_DIR", None)
    environment.update(
        ROS_DOMAIN_ID=str(domain_id),
        ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
        ROS_LOG_DIR=str(log_dir / "ros"),
        PYTHONUNBUFFERED="1",
        **{STACKS_DIR_VARIABLE: str(log_dir / "stacks")},
    )
    return environment


def _clear_outputs(folder: Path) -> None:
    """Remove an earlier attempt's outputs (keep its logs)."""
    if not folder.is_dir():
        return
    for entry in folder.iterdir():
        if entry.name == LOGS_DIR:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _entry(run: RunSpec, folder: Path, out_dir: Path, attempt: Attempt, attempts: int, errors: list[str], started: float,
           cpu_s: float | None = None) -> dict:
    """The run's entry; ``cpu_s``: CPU seconds of all its attempts (default: the last one's)."""
    relative = lambda path: os.path.relpath(path, out_dir)  # noqa: E731
    entry: dict[str, Any] = {
        "run_id": run.run_id,
        "index": run.index,
        "repeat": run.repeat,
        "parameters": run.parameters,
        "status": OK if attempt.ok else FAILED,
        "attempts": attempts,
        "domain_id": attempt.domain_id,
        "started_at": started,
        "launch_ended_at": attempt.launch_ended_at,
        "finished_at": time.time(),
        "wall_s": round(attempt.wall_s, 3),
        "postprocess_s": round(attempt.postprocess_s, 3),
        "cpu_s": round(attempt.launch_cpu_s + attempt.postprocess_cpu_s if cpu_s is None else cpu_s, 3),
        "flight_cpu_s": None if attempt.flight_cpu_s is None else round(attempt.flight_cpu_s, 3),
        "log": relative(attempt.log),
        "errors": errors,
        "error": "" if attempt.ok else attempt.message,
        "warnings": "; ".join(attempt.warnings),
    }
    if attempt.ok:
        report, metrics = attempt.report, attempt.metrics
        entry.update({k: report.get(k) for k in ("sim_s", "real_time_factor", "messages", "drops", "bag_mb", "bag_digest")})
        sim_s = float(report.get("sim_s") or 0.0)
        entry["cpu_per_sim_s"] = round(entry["cpu_s"] / sim_s, 4) if sim_s > 0 else None
        flight = entry["flight_cpu_s"]
        entry["flight_cpu_per_sim_s"] = round(flight / sim_s, 4) if sim_s > 0 and flight is not None else None
        entry.update({k: metrics.get(k) for k in MISSION_METRICS})
        entry["bag"] = relative(folder / "bag")
        entry["dataset"] = relative(folder / report["dataset"]) if report.get("dataset") else ""
        entry["topics"] = report.get("topics", {})
    return entry


def _read_json(path: Path) -> dict | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _last_error(log_path: Path) -> str:
    """Why an attempt failed, in one line: the launcher's last ``[ERROR]``, else the last traceback or error line."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    for markers in (("[ERROR] [launch]",), ("[ERROR]", "Error:", "Traceback")):
        found = [line for line in lines if any(m in line for m in markers)]
        if found:
            return f": {found[-1].strip()[:300]}"
    return ""


__all__ = ["Attempt", "execute_run", "judge_stop_failures", "should_retry", "stop_leftover", "RESULT_FILE"]
