"""Process management for ``aerial_sim launch``: start, watch, relay output, stop.

The rules are those of ``ros2 launch`` (launch 3.x ``ExecuteLocal``), so the same
file behaves the same under both:

- A process that exits is reported (``process has finished cleanly``, or
  ``process has died [pid, exit code]`` with its last output lines); the others
  keep running, unless it has ``on_exit: shutdown``, which stops the whole
  launch (``process[...] was required: shutting down launched system``). The
  launch ends when every process has exited.
- Stopping (Ctrl-C, SIGTERM, SIGHUP, or an ``on_exit: shutdown``): SIGINT to
  each process, SIGTERM to those still running after their ``sigterm_timeout``
  (5 s), SIGKILL after ``sigkill_timeout`` (5 s) more. A second Ctrl-C is
  ignored, as in ``ros2 launch``.
- aerial_sim nodes start with SIGINT/SIGTERM blocked (they unblock them once
  their handlers are in place, :mod:`aerial_sim.nodes.ros.process`), so a Ctrl-C
  during their interpreter start-up is neither lost nor fatal.

Exit status of :meth:`Runner.run` (``ros2 launch`` differs in one case, below):
- 1: a required process (``on_exit: shutdown``) failed, i.e. exited non-zero or by a
  signal, or could not be started, and so ended the launch: a FATAL configuration
  error (exit 2 of the node) or a node that died. ``ros2 launch`` exits 0 there: its
  ``LaunchService.run_async`` returns 1 only for an exception inside launch itself
  (e.g. a node whose executable is not found, here exit 2 before anything starts),
  and the YAML frontend's ``on_exit`` knows only ``shutdown``, which carries no
  status. A script that needs the failure under ``ros2 launch`` reads the log's
  ``process has died`` line (doc/reliability.md);
- 0: otherwise, whatever the other processes' exit codes, as ``ros2 launch`` (a failure
  of a process that is not required is in the log: ``process has died``);
- with ``strict`` (``aerial_sim launch --strict``, an aerial_sim extension that
  ``aerial_sim batch`` uses): 1 when a process exited with a non-zero status or by a
  signal, or could not be started, while the launch ran; else 3 when one did so only
  while the launch was being stopped (e.g. killed after ignoring SIGINT and SIGTERM):
  its work was done, but what it still had to write may be lost, and the caller
  knows which process it was from its ``process has died`` line (:data:`DIED_LINE`).

A process killed by a signal leaves its Fast DDS shared memory behind; at the end of a launch
where one was, every dead participant's is removed (one line says how much).

Output: every line a process prints goes to ``<log_dir>/<label>.log``; stdout
lines are also shown as ``[label] line`` for ``output: screen`` or ``both``, and
stderr lines always are (the ROS 2 launch rule for ``output: log``).
"""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable

from aerial_sim.launcher.plan import ProcessSpec
from aerial_sim.launcher.shared_memory import remove_dead_participants
from aerial_sim.paths import PACKAGE_NAME

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: Lines of each process's recent output kept for the failure report.
RECENT_LINES = 20
#: --strict exit statuses: a process failed while the launch ran; only while it was being stopped.
EXIT_FAILED, EXIT_FAILED_WHILE_STOPPING = 1, 3
#: The report of a process that failed: how, its label and ``package/executable``.
DIED_LINE = re.compile(r"process has died \[pid \d+, (?P<how>[^\]]+)\]: (?P<label>\S+) \((?P<executable>[^)]+)\)")
#: A node's one-line fatal error (aerial_sim.nodes.ros.run.run_node, rclpy's FATAL log level).
_FATAL_LINE = re.compile(r"^\[FATAL\] (?:\[[\d.]+\] )?\[[^\]]*\]: (.+)$")


@dataclass
class LaunchItem:
    """A process ready to start: its spec, display label, full command and environment."""

    spec: ProcessSpec
    label: str
    command: list[str]
    environment: dict[str, str]


@dataclass
class _Running:
    item: LaunchItem
    popen: subprocess.Popen
    log: IO[str]
    recent: collections.deque = field(default_factory=lambda: collections.deque(maxlen=RECENT_LINES))
    readers: list[threading.Thread] = field(default_factory=list)
    done: bool = False


class Runner:
    """Runs a list of :class:`LaunchItem` until one of the exit rules above applies."""

    def __init__(
        self,
        items: list[LaunchItem],
        log_dir: Path,
        *,
        stdout: IO[str] | None = None,
        stderr: IO[str] | None = None,
        strict: bool = False,
    ):
        self.items = items
        self.strict = strict
        self.log_dir = log_dir
        self.failed = False
        self.failed_while_stopping = False
        #: A required process (on_exit: shutdown) failed while the launch ran (exit status 1 even without strict).
        self.required_failed = False
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        self.running: list[_Running] = []
        self._print_lock = threading.Lock()
        self._wake = threading.Event()
        self._signals: list[int] = []
        #: FATAL messages shown so far (text after the node name) -> the label of the process that said it first.
        self._fatal_shown: dict[str, str] = {}

    # -- public --------------------------------------------------------------------------------

    def run(self) -> int:
        previous = self._install_signal_handlers()
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self.info(f"All log files can be found below {self.log_dir}")
            for item in self.items:
                if not self._start(item):  # ros2 launch logs it and starts the others
                    self.failed = True
                    if item.spec.shutdown_on_exit:
                        self.required_failed = True
                        self.info(f"process[{item.label}] was required: shutting down launched system")
                        break
                if self._signals:
                    break
            else:
                self._watch()
        finally:
            self._stop_all()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self._remove_shared_memory_of_killed()
        if not self.strict:
            return EXIT_FAILED if self.required_failed else 0
        return EXIT_FAILED if self.failed else EXIT_FAILED_WHILE_STOPPING if self.failed_while_stopping else 0

    # -- messages ------------------------------------------------------------------------------

    def info(self, message: str) -> None:
        self._print(f"[INFO] [launch]: {message}", self.stdout)

    def warn(self, message: str) -> None:
        self._print(f"[WARN] [launch]: {message}", self.stderr)

    def error(self, message: str) -> None:
        self._print(f"[ERROR] [launch]: {message}", self.stderr)

    def _print(self, text: str, stream: IO[str]) -> None:
        with self._print_lock:
            print(text, file=stream, flush=True)

    # -- lifecycle -----------------------------------------------------------------------------

    def _install_signal_handlers(self) -> dict[int, Callable]:
        previous = {}
        if threading.current_thread() is not threading.main_thread():
            return previous
        stop_signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        for signum in stop_signals:
            previous[signum] = signal.signal(signum, self._on_signal)
        # `aerial_sim launch` held them since its start (aerial_sim.cli.main): one that came meanwhile,
        # even to a launcher that started with SIGINT ignored, is handled now and stops the launch.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
        return previous

    def _on_signal(self, signum, frame) -> None:
        if self._signals and signum == signal.SIGINT:
            self._print("[WARN] [launch]: user interrupted with ctrl-c (SIGINT) again, ignoring...", self.stderr)
            return
        self._signals.append(signum)
        self._wake.set()

    def _start(self, item: LaunchItem) -> bool:
        log = open(self.log_dir / f"{item.label}.log", "w", encoding="utf-8")
        # aerial_sim nodes unblock these once their quiet handlers are installed.
        blocked = _STOP_SIGNALS if item.spec.package == PACKAGE_NAME else ()
        previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            popen = subprocess.Popen(
                item.command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=item.environment,
                cwd=item.spec.cwd,
                process_group=0,
            )
        except OSError as error:
            log.close()
            self.error(f"cannot start '{item.label}' ({item.command[0]}): {error.strerror or error}")
            return False
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        running = _Running(item, popen, log)
        for stream, to_screen, screen in (
            (popen.stdout, item.spec.output in ("screen", "both"), self.stdout),
            (popen.stderr, True, self.stderr),
        ):
            reader = threading.Thread(
                target=self._pump, args=(running, stream, screen if to_screen else None), daemon=True
            )
            reader.start()
            running.readers.append(reader)
        self.running.append(running)
        self.info(f"process started with pid [{popen.pid}]: {item.label}")
        return True

    def _pump(self, running: _Running, stream: IO[bytes], screen: IO[str] | None) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            running.recent.append((line, screen is not None))
            with self._print_lock:
                if not running.log.closed:
                    running.log.write(line + "\n")
                    running.log.flush()
                if screen is not None:
                    print(f"[{running.item.label}] {self._on_screen(running.item.label, line)}", file=screen, flush=True)
        stream.close()

    def _on_screen(self, label: str, line: str) -> str:
        """A line as shown on screen: a FATAL another process already printed word for word (two nodes
        reading the same bad file) is shown once; the repeat says whose it was (the log has it in full)."""
        match = _FATAL_LINE.match(line)
        if match is None:
            return line
        first = self._fatal_shown.setdefault(match.group(1), label)
        return line if first == label else f"(the same error as [{first}] above; in full in {label}.log)"

    def _watch(self) -> None:
        """Report processes as they exit, until a stop signal, an ``on_exit: shutdown`` or none is left."""
        while True:
            if self._signals:
                self.info(f"{signal.Signals(self._signals[0]).name} received, stopping all processes")
                return
            alive = 0
            for running in self.running:
                if running.done:
                    continue
                if running.popen.poll() is None:
                    alive += 1
                    continue
                self._report_exit(running)
                if running.item.spec.shutdown_on_exit:
                    self.required_failed |= running.popen.returncode != 0
                    self.info(f"process[{running.item.label}] was required: shutting down launched system")
                    return
            if alive == 0:
                self.info("all processes have finished")
                return
            self._wake.wait(0.05)

    def _report_exit(self, running: _Running, stopping: bool = False) -> None:
        """One line for a process that exited; with its last output lines when it failed on its own."""
        running.done = True
        self._join_readers(running)
        code, label, pid = running.popen.returncode, running.item.label, running.popen.pid
        if code == 0:
            self.info(f"process has finished cleanly [pid {pid}]: {label}")
            return
        if stopping:
            self.failed_while_stopping = True
        else:
            self.failed = True
        spec = running.item.spec
        what = f"{spec.package}/{spec.executable}" if spec.package else spec.executable
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        # The last lines not already on screen (stdout of an `output: log` process): those that were
        # are above, and a FATAL line shown twice reads as two errors.
        lines = [] if stopping else [line for line, shown in running.recent if not shown]
        tail = "; last output:" + "".join(f"\n    [{label}] {line}" for line in lines) if lines else ""
        self.error(f"process has died [pid {pid}, {how}]: {label} ({what}){tail}")

    def _stop_all(self) -> None:
        """SIGINT to every running process, then SIGTERM and SIGKILL at each one's own timeouts."""
        start = time.monotonic()
        alive = [r for r in self.running if not r.done]
        escalations: dict[int, list[tuple[float, signal.Signals]]] = {}
        for running in alive:
            _signal_group(running.popen, signal.SIGINT)
            spec = running.item.spec
            escalations[id(running)] = [
                (start + spec.sigterm_timeout_s, signal.SIGTERM),
                (start + spec.sigterm_timeout_s + spec.sigkill_timeout_s, signal.SIGKILL),
            ]
        while alive:
            now = time.monotonic()
            for running in list(alive):
                if running.popen.poll() is not None:
                    alive.remove(running)
                    self._report_exit(running, stopping=True)
                    continue
                steps = escalations[id(running)]
                if steps and now >= steps[0][0]:
                    _, signum = steps.pop(0)
                    before = "SIGINT" if signum == signal.SIGTERM else "SIGTERM"
                    self.error(f"process[{running.item.label}] failed to terminate after {before}, sending {signum.name}")
                    _signal_group(running.popen, signum)
            self._wake.clear()
            self._wake.wait(0.05)
        for running in self.running:
            self._join_readers(running)
            with self._print_lock:
                running.log.close()

    def _remove_shared_memory_of_killed(self) -> None:
        """A process killed by a signal leaves its Fast DDS shared memory in /dev/shm (RAM, until
        removed): remove every dead participant's (:mod:`aerial_sim.launcher.shared_memory`)."""
        if any(r.popen.returncode is not None and r.popen.returncode < 0 for r in self.running):
            removed = remove_dead_participants()
            if removed.segments:
                self.info(removed.summary())

    @staticmethod
    def _join_readers(running: _Running) -> None:
        for reader in running.readers:
            reader.join(timeout=1.0)


def _signal_group(popen: subprocess.Popen, signum: int) -> None:
    """Signal the process's group (it leads one), so its own children get it too."""
    try:
        os.killpg(popen.pid, signum)
    except (ProcessLookupError, PermissionError):
        try:
            popen.send_signal(signum)
        except ProcessLookupError:
            pass
