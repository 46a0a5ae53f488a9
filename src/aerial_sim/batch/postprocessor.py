"""A kept post-processing process: ``python -m aerial_sim.batch.postprocess --serve`` fed one run at a time.

A cold run's post-processing is a process of its own (:func:`aerial_sim.batch.execute._postprocess`),
which imports matplotlib, the bag reader and the exporter every time: about a third of its CPU for
the smoke sweep's short runs. Warm batch runs hand their landed runs to a :class:`PostProcessor`
instead, one per post-processing thread, which keeps its process between runs. The run still
cannot take the batch down: a job that raises fails its run (traceback in the run's log); a process
that dies fails its run and is started again for the next; one that takes longer than
``POSTPROCESS_TIMEOUT_S`` writes its stacks into the run's log (SIGUSR1), is killed and replaced.
The process dies with the batch (the parent-death guard, :mod:`aerial_sim.batch.guard`).
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from aerial_sim.batch.processes import guarded_command
from aerial_sim.stack_dumps import DUMP_SIGNAL

#: Longest post-processing of one run, s (as a cold run's).
POSTPROCESS_TIMEOUT_S = 600.0
#: Wall seconds a stuck process gets to write its stacks.
DUMP_WAIT_S = 1.5


class PostProcessor:
    """One ``--serve`` process, started at the first run, replaced after a failure (module doc)."""

    def __init__(self, timeout_s: float = POSTPROCESS_TIMEOUT_S):
        self.timeout_s = timeout_s
        self.process: subprocess.Popen | None = None
        self._counted = 0.0  # CPU s of the process already reported
        self._buffer = b""

    def run(self, folder: Path, export: bool, plots: bool, log_path: Path) -> tuple[bool, str, float]:
        """Post-process ``folder``: (ok, why not, CPU s); its output goes to ``log_path``."""
        if self.process is None or self.process.poll() is not None:
            self._start()
        job = {"run_dir": str(folder), "export": export, "plots": plots, "log": str(log_path)}
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"# post-processing in the kept process {self.process.pid}: {json.dumps(job)}\n")
        try:
            self.process.stdin.write((json.dumps(job) + "\n").encode())
            self.process.stdin.flush()
        except OSError:
            return False, "post-processing process gone", self._reap()
        line = self._reply(time.monotonic() + self.timeout_s)
        if line is None:  # timed out: its stacks into the run's log (fd 2 points there), then replaced
            self._signal(DUMP_SIGNAL)
            time.sleep(DUMP_WAIT_S)
            self._signal(signal.SIGKILL)
            return False, f"post-processing took over {self.timeout_s:g} s", self._reap()
        if line == b"":
            cpu_s = self._reap()
            return False, f"post-processing process died (exit {self.process.returncode})", cpu_s
        try:
            reply = json.loads(line)
            cpu_s = float(reply.get("cpu_s", 0.0))
        except (ValueError, TypeError, AttributeError):
            return False, f"post-processing answered {line[:200]!r}", 0.0
        self._counted += cpu_s
        return bool(reply.get("ok")), "" if reply.get("ok") else "post-processing failed (traceback in the log)", cpu_s

    def close(self) -> float:
        """End the process (its stdin closed); CPU s it spent after its last reply."""
        if self.process is None:
            return 0.0
        try:
            self.process.stdin.close()
        except OSError:
            pass
        deadline = time.monotonic() + 10.0
        while self.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.process.poll() is None:
            self._signal(signal.SIGKILL)
        return self._reap()

    def _start(self) -> None:
        command = [sys.executable, "-m", "aerial_sim.batch.postprocess", "--serve"]
        self.process = subprocess.Popen(guarded_command(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, bufsize=0)
        self._counted, self._buffer = 0.0, b""

    def _reply(self, deadline: float) -> bytes | None:
        """The next line from the process (b"" at its end), or None past ``deadline``."""
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return b""
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def _signal(self, signum: int) -> None:
        try:
            os.kill(self.process.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def _reap(self) -> float:
        """Wait for the ended process; its CPU s not reported in a reply (``wait4``)."""
        process, self.process = self.process, None
        if process is None:
            return 0.0
        try:
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
        except ChildProcessError:
            process.wait()
            return 0.0
        for stream in (process.stdin, process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self.process = process  # keep the ended process for its returncode; the next run starts a new one
        return max(usage.ru_utime + usage.ru_stime - self._counted, 0.0)


class PostThreads(concurrent.futures.Executor):
    """The post-processing threads of a local warm batch, each with its kept :class:`PostProcessor`: one thread at
    first, another (up to ``most``) only while a job has waited ``grow_after_s`` for a free one.

    A kept process costs about 0.5 CPU s to start (interpreter, numpy, the bag reader, the type store), and the
    first runs of N workers land together: a thread per worker started N processes, where one does the smoke
    sweep's post-processing (0.3 CPU s a run) in a fraction of a run's flight. Jobs that keep waiting (big bags,
    many workers) still get up to ``most`` threads; threads are kept to the end, so a batch's last runs, which
    land together too, find as many as its first ones needed."""

    def __init__(self, most: int, grow_after_s: float = 2.0, name: str = "post"):
        self.most, self.grow_after_s, self.name = max(1, most), grow_after_s, name
        self._jobs: collections.deque = collections.deque()  # (future, fn, args, kwargs, queued at)
        self._condition = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._closing = False
        self._monitor: threading.Thread | None = None

    @property
    def threads(self) -> int:
        """Threads started so far."""
        return len(self._threads)

    def submit(self, fn, /, *args, **kwargs) -> concurrent.futures.Future:
        """``fn(...)`` on a post-processing thread, queued behind the jobs before it; its future."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._condition:
            if self._closing:
                raise RuntimeError("cannot submit after shutdown")
            self._jobs.append((future, fn, args, kwargs, time.monotonic()))
            if not self._threads:
                self._start_thread()
                self._monitor = threading.Thread(target=self._watch, name=f"{self.name}-grow", daemon=True)
                self._monitor.start()
            self._condition.notify()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Run the jobs queued (``cancel_futures``: cancel them instead), then end the threads."""
        with self._condition:
            self._closing = True
            while cancel_futures and self._jobs:
                self._jobs.popleft()[0].cancel()
            self._condition.notify_all()
        if wait:
            for thread in [*self._threads, *([self._monitor] if self._monitor is not None else [])]:
                thread.join()

    def _start_thread(self) -> None:  # (the condition's lock held)
        thread = threading.Thread(target=self._work, name=f"{self.name}-{len(self._threads) + 1}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        while True:
            with self._condition:
                while not self._jobs:
                    if self._closing:
                        return
                    self._idle += 1
                    self._condition.wait()
                    self._idle -= 1
                future, fn, args, kwargs, _ = self._jobs.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as error:  # noqa: BLE001 - the job's caller gets it
                future.set_exception(error)

    def _watch(self) -> None:
        """Another thread while the oldest job has waited ``grow_after_s`` and no thread is idle."""
        while True:
            with self._condition:
                if self._closing and not self._jobs:
                    return
                if (self._jobs and self._idle == 0 and len(self._threads) < self.most
                        and time.monotonic() - self._jobs[0][4] >= self.grow_after_s):
                    self._start_thread()
            time.sleep(min(0.25, self.grow_after_s / 4))


__all__ = ["POSTPROCESS_TIMEOUT_S", "PostProcessor", "PostThreads"]
