"""Process management for ``aerial_sim launch``: start, watch, relay output, stop.

Each process runs in its own process group, so a terminal's Ctrl-C reaches only
the launcher, which then stops the processes in an order it controls: SIGINT to
each (what ``rclpy`` turns into a clean shutdown), SIGTERM to those still
running after ``sigint_timeout_s``, SIGKILL after ``sigterm_timeout_s`` more.
A second Ctrl-C skips the waiting.

Exit status of :meth:`Runner.run`:
- 0: stopped by SIGINT/SIGTERM, every process finished cleanly, or a process
  marked ``on_exit: shutdown`` exited with status 0;
- 1: a process exited with a non-zero status or by a signal (it is named, with
  its last output lines), or could not be started.

Output: every line a process prints goes to ``<log_dir>/<label>.log``; stdout
lines are also shown as ``[label] line`` for ``output: screen`` or ``both``, and
stderr lines always are (the ROS 2 launch rule for ``output: log``).
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable

from aerial_sim.launcher.description import ProcessSpec

#: Lines of each process's recent output kept for the failure report.
RECENT_LINES = 20


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
        sigint_timeout_s: float = 10.0,
        sigterm_timeout_s: float = 3.0,
        stdout: IO[str] | None = None,
        stderr: IO[str] | None = None,
    ):
        self.items = items
        self.log_dir = log_dir
        self.sigint_timeout_s = sigint_timeout_s
        self.sigterm_timeout_s = sigterm_timeout_s
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        self.running: list[_Running] = []
        self._print_lock = threading.Lock()
        self._wake = threading.Event()
        self._signals: list[int] = []

    # -- public --------------------------------------------------------------------------------

    def run(self) -> int:
        previous = self._install_signal_handlers()
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self.info(f"All log files can be found below {self.log_dir}")
            for item in self.items:
                if not self._start(item):
                    return 1
                if self._signals:
                    break
            return self._watch()
        finally:
            self._stop_all()
            for signum, handler in previous.items():
                signal.signal(signum, handler)

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
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            previous[signum] = signal.signal(signum, self._on_signal)
        return previous

    def _on_signal(self, signum, frame) -> None:
        self._signals.append(signum)
        self._wake.set()

    def _start(self, item: LaunchItem) -> bool:
        log = open(self.log_dir / f"{item.label}.log", "w", encoding="utf-8")
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
            running.recent.append(line)
            with self._print_lock:
                if not running.log.closed:
                    running.log.write(line + "\n")
                    running.log.flush()
                if screen is not None:
                    print(f"[{running.item.label}] {line}", file=screen, flush=True)
        stream.close()

    def _watch(self) -> int:
        while True:
            if self._signals:
                self.info(f"{signal.Signals(self._signals[0]).name} received, stopping all processes")
                return 0
            alive = 0
            for running in self.running:
                if running.done:
                    continue
                code = running.popen.poll()
                if code is None:
                    alive += 1
                    continue
                running.done = True
                self._join_readers(running)
                label, pid = running.item.label, running.popen.pid
                if code != 0:
                    self._report_failure(running, code)
                    return 1
                if running.item.spec.shutdown_on_exit:
                    self.info(f"process has finished cleanly [pid {pid}]: {label}; on_exit: shutdown, stopping the rest")
                    return 0
                self.info(f"process has finished cleanly [pid {pid}]: {label}")
            if alive == 0:
                self.info("all processes have finished")
                return 0
            self._wake.wait(0.05)

    def _report_failure(self, running: _Running, code: int) -> None:
        spec, label = running.item.spec, running.item.label
        what = f"{spec.package}/{spec.executable}" if spec.package else spec.executable
        if code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        else:
            how = f"exited with code {code}"
        lines = list(running.recent)
        tail = "".join(f"\n    [{label}] {line}" for line in lines) if lines else " (no output)"
        self.error(f"process '{label}' ({what}) {how}; last output:{tail}")

    def _stop_all(self) -> None:
        alive = [r for r in self.running if r.popen.poll() is None]
        steps = (
            (signal.SIGINT, self.sigint_timeout_s),
            (signal.SIGTERM, self.sigterm_timeout_s),
            (signal.SIGKILL, 5.0),
        )
        signals_seen = len(self._signals)
        for step, (signum, timeout_s) in enumerate(steps):
            if not alive:
                break
            if step > 0:
                names = ", ".join(r.item.label for r in alive)
                self.warn(f"still running after {steps[step - 1][0].name}, sending {signum.name}: {names}")
            for running in alive:
                _signal_group(running.popen, signum)
            deadline = time.monotonic() + timeout_s
            while alive and time.monotonic() < deadline:
                if len(self._signals) > signals_seen:  # another Ctrl-C: stop waiting
                    signals_seen = len(self._signals)
                    break
                self._wake.clear()
                self._wake.wait(0.05)
                alive = [r for r in alive if r.popen.poll() is None]
        for running in self.running:
            self._join_readers(running)
            with self._print_lock:
                running.log.close()

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
