"""CPU time each node spends in its callbacks, for profiling a process that hosts several nodes on one
executor thread (a node container, the shared sensors process), where ``/proc`` sees only the thread.

Off unless the environment variable ``AERIAL_SIM_CALLBACK_CPU`` names a file: then every callback the
node's :class:`~aerial_sim.nodes.ros.input_guard.InputGuard` wraps (messages, requests, timer ticks)
is timed with the thread's CPU clock, and when the process stops spinning it appends one JSON line to
that file: ``{"pid": ..., "nodes": {"/drone1/imu": {"cpu_s": ..., "calls": ...}, ...}}``. A callback's
time includes what it calls (publishing, and the in-process delivery of what it publishes), not the
executor's own work between callbacks. ``tools/dev.sh bench batch_cpu --nodes`` sets it for a run and
prints the figures per simulated second. Off, nothing is timed (the guard wraps callbacks without it).
"""

from __future__ import annotations

import json
import os
import sys
import time

VARIABLE = "AERIAL_SIM_CALLBACK_CPU"

#: Node name -> [CPU ns, calls], for this process.
_SPENT: dict[str, list[int]] = {}


def account(node_name: str) -> list[int] | None:
    """The ``[CPU ns, calls]`` entry a guard adds ``node_name``'s callbacks to; None when timing is off."""
    if not os.environ.get(VARIABLE):
        return None
    return _SPENT.setdefault(node_name, [0, 0])


def timed(entry: list[int], call):
    """``call`` with its thread CPU time and one call added to ``entry``."""
    clock = time.thread_time_ns

    def timed_call(*args, **kwargs):
        started = clock()
        try:
            return call(*args, **kwargs)
        finally:
            entry[0] += clock() - started
            entry[1] += 1
    return timed_call


def write_report() -> None:
    """Append this process's figures to the file ``AERIAL_SIM_CALLBACK_CPU`` names (nothing when off or
    when nothing was timed); a file that cannot be written is one line on stderr."""
    path = os.environ.get(VARIABLE)
    if not path or not _SPENT:
        return
    line = json.dumps({"pid": os.getpid(), "nodes": {name: {"cpu_s": ns / 1e9, "calls": calls}
                                                      for name, (ns, calls) in sorted(_SPENT.items())}})
    try:
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(line + "\n")
    except OSError as error:
        print(f"[WARN] {VARIABLE}: cannot write {path}: {error}", file=sys.stderr, flush=True)
