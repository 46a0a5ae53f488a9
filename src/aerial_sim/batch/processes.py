"""Starting a run's process tree so that it can always be stopped, and stopping it.

A run is ``aerial_sim launch`` started in a new session (``setsid``); the
launcher puts each node in a process group of its own, but they all stay in
that session, so the session id finds every process of the run, also nodes
orphaned by a killed launcher. Stopping a run: SIGTERM to the launcher (it
stops its nodes in order: SIGINT, SIGTERM, SIGKILL), then, after a grace
period, SIGKILL to whatever of the session is left. Only processes whose
command line names the run's folder are touched, so a reused pid is never hit.

The launcher is started through :mod:`aerial_sim.batch.guard`, which asks the
kernel to send it SIGTERM when the batch that started it dies
(``PR_SET_PDEATHSIG``), so killing a batch with SIGKILL stops its runs too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def guarded_command(command: list[str]) -> list[str]:
    """``command`` run through the parent-death guard of this process."""
    return [sys.executable, "-m", "aerial_sim.batch.guard", str(os.getpid()), "--", *command]


def session_processes(session_id: int, marker: str) -> list[int]:
    """Pids in session ``session_id`` whose command line contains ``marker`` (Linux ``/proc``)."""
    return [pid for pid, _ in session_stats(session_id, marker)]


def session_stats(session_id: int, marker: str) -> list[tuple[int, list[str]]]:
    """(pid, the ``/proc/<pid>/stat`` fields after the command name) of each process of :func:`session_processes`.

    Every process's ``stat`` is read, the command line only of those in the session: a batch asks this
    at every start and landing of a run, on machines with hundreds of other processes."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stream:
                stat = stream.read()
            # Fields after the parenthesised command name: state ppid pgrp session ...
            fields = stat.rsplit(b")", 1)[-1].split()
            if len(fields) <= 3 or int(fields[3]) != session_id:
                continue
            with open(f"/proc/{entry.name}/cmdline", "rb") as stream:
                cmdline = stream.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        if marker in cmdline:
            found.append((int(entry.name), [f.decode() for f in fields]))
    return found


def kill_session(session_id: int, marker: str, signum: int = signal.SIGKILL) -> int:
    """Send ``signum`` to every process of the session that names ``marker``; how many there were."""
    pids = session_processes(session_id, marker)
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass
    return len(pids)


def wait_session_gone(session_id: int, marker: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while session_processes(session_id, marker):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def stop_run(popen: subprocess.Popen, marker: str, grace_s: float) -> None:
    """Ask the launcher to stop (SIGTERM), wait ``grace_s``, then SIGKILL every process left in its session."""
    session_id = popen.pid
    if popen.poll() is None:
        try:
            os.killpg(session_id, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            popen.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    reap_session(popen, marker)


def reap_session(popen: subprocess.Popen, marker: str) -> None:
    """Make sure nothing of the run's session outlives it (SIGKILL), and collect the launcher."""
    kill_session(popen.pid, marker)
    if popen.poll() is None:
        popen.kill()
    popen.wait()
    wait_session_gone(popen.pid, marker, timeout_s=5.0)
