"""A run that hangs anywhere: noticed, its processes' Python stacks in the run's log, then stopped.

Two signs of a hang, checked while the launch runs (:class:`HangWatch`):

- *no progress*: nothing in the run folder (bag, logs, outputs) grew or changed for
  ``stall_timeout_s`` seconds. A lockstep run that flies writes its bag continuously and its
  nodes log at start; a graph stuck in discovery, a deadlocked node holding the clock, or a
  launcher waiting on a process that does not stop writes nothing;
- *no end after landing*: the mission wrote ``metrics.json`` (the run's work is done) and the
  launch is still running ``stop_timeout_s`` seconds later (a recorder stuck after "bag closed",
  a node ignoring SIGINT and SIGTERM while the launcher waits out its stop timeouts).

Then :func:`dump_stacks` asks every process of the run's session for its stacks: ``py-spy dump``
where py-spy is installed (native frames too, no cooperation needed), else SIGUSR1, which every
aerial_sim process answers by writing all its threads' stacks (:mod:`aerial_sim.stack_dumps`) to
the attempt's ``stacks/`` folder; the dumps are appended to the attempt's log, and the batch
stops the run and retries it (``execute``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from aerial_sim.batch.processes import session_processes, session_stats
from aerial_sim.stack_dumps import DUMP_SIGNAL

#: How often the run folder is looked at, s.
CHECK_PERIOD_S = 1.0
#: How long the processes get to write their stacks after SIGUSR1, s.
DUMP_WAIT_S = 1.5


def folder_signature(folder: Path) -> tuple[int, int]:
    """(number of files, total bytes) under ``folder``: changes whenever anything is written."""
    count = size = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                size += os.stat(os.path.join(root, name), follow_symlinks=False).st_size
            except OSError:
                continue
            count += 1
    return count, size


class HangWatch:
    """Tells, when asked every poll, whether the run looks hung and why (module docstring)."""

    def __init__(self, folder: Path, landed_file: Path, stall_timeout_s: float, stop_timeout_s: float,
                 clock=time.monotonic):
        self.folder = Path(folder)
        self.landed_file = Path(landed_file)
        self.stall_timeout_s = stall_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.clock = clock
        now = clock()
        self._signature = None
        self._changed_at = now
        self._checked_at = -float("inf")
        self.landed_at: float | None = None

    def check(self) -> str:
        """"" while all is well, else one line saying what hangs."""
        now = self.clock()
        if now - self._checked_at < CHECK_PERIOD_S:
            return ""
        self._checked_at = now
        signature = folder_signature(self.folder)
        if signature != self._signature:
            self._signature, self._changed_at = signature, now
        if self.landed_at is None and self.landed_file.is_file():
            self.landed_at = now
        if self.landed_at is not None and now - self.landed_at > self.stop_timeout_s:
            return (f"hung: still running {now - self.landed_at:.0f} s after landing "
                    f"({self.landed_file.name} written; stop_timeout_s {self.stop_timeout_s:g})")
        if now - self._changed_at > self.stall_timeout_s:
            return f"hung: nothing written in the run folder for {now - self._changed_at:.0f} s (stall_timeout_s {self.stall_timeout_s:g})"
        return ""


def dump_stacks(session_id: int, marker: str, stacks_dir: Path, log) -> int:
    """Every live process of the session (naming ``marker``): its Python stacks into ``log``
    (an open text file). Returns how many processes answered."""
    pids = session_processes(session_id, marker)
    log.write(f"# stacks of the run's {len(pids)} processes:\n")
    log.flush()
    py_spy = shutil.which("py-spy")
    answered = 0
    if py_spy:
        for pid in pids:
            try:
                result = subprocess.run([py_spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=20)
            except (OSError, subprocess.TimeoutExpired) as error:
                log.write(f"# py-spy dump --pid {pid}: {error}\n")
                continue
            if result.returncode == 0:
                answered += 1
                log.write(f"# py-spy dump --pid {pid}\n{result.stdout}\n")
            else:
                log.write(f"# py-spy dump --pid {pid} failed: {result.stderr.strip()[-300:]}\n")
        if answered:
            log.flush()
            return answered
    before = {pid: _size(stacks_dir / f"{pid}.txt") for pid in pids}
    for pid in pids:
        if (stacks_dir / f"{pid}.txt").is_file():  # registered: SIGUSR1 would not kill it
            try:
                os.kill(pid, DUMP_SIGNAL)
            except (ProcessLookupError, PermissionError):
                pass
    time.sleep(DUMP_WAIT_S)
    for pid in pids:
        path = stacks_dir / f"{pid}.txt"
        if not path.is_file():
            log.write(f"# pid {pid} ({_cmdline(pid)[:200]}): no stack dump handler (not an aerial_sim process)\n")
            continue
        text = path.read_text(errors="replace")
        header = text.partition("\n")[0]
        dump = text[before[pid]:]
        answered += bool(dump.strip())
        log.write(f"# {header}\n{dump or '(no answer)'}\n")
    log.flush()
    return answered


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"


def session_cpu_s(session_id: int, marker: str) -> float:
    """CPU seconds (user + system) of the session's live processes so far, with their reaped children."""
    total = sum(sum(int(v) for v in fields[11:15]) for _, fields in session_stats(session_id, marker))  # utime stime cutime cstime
    return total / os.sysconf("SC_CLK_TCK")


__all__ = ["HangWatch", "dump_stacks", "folder_signature", "session_cpu_s"]
