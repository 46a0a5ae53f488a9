"""Python stacks of a stuck process on request: SIGUSR1 makes it write every thread's stack.

:func:`register` (called by every node process at start, :mod:`aerial_sim.nodes.ros.process`, by
``aerial_sim launch`` and by the batch's post-processing) installs ``faulthandler`` on SIGUSR1:
the stacks are written by the C-level handler, with no help from the main thread, so a
process stuck in a C call (a DDS lock) or in a loop that never returns still answers. Where
:data:`STACKS_DIR_VARIABLE` names a folder (``aerial_sim batch`` sets it per attempt, under the
run's ``logs/``) they go to ``<folder>/<pid>.txt``, opened at start; elsewhere to stderr, which
the launcher shows and logs. ``kill -USR1 <pid>`` works by hand too.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
from pathlib import Path

#: Environment variable naming the folder a process writes its stacks to.
STACKS_DIR_VARIABLE = "AERIAL_SIM_STACKS_DIR"
#: The signal that asks for the stacks.
DUMP_SIGNAL = signal.SIGUSR1

_registered: list = []  # the open file, kept for the life of the process


def register() -> None:
    """Write every thread's Python stack on SIGUSR1 (once per process; a problem is ignored)."""
    if _registered or not hasattr(faulthandler, "register"):
        return
    target = sys.stderr
    folder = os.environ.get(STACKS_DIR_VARIABLE)
    try:
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            target = open(Path(folder) / f"{os.getpid()}.txt", "w", encoding="utf-8")  # noqa: SIM115
            name = " ".join(sys.argv)[:300]
            target.write(f"pid {os.getpid()}: {name}\n")
            target.flush()
        faulthandler.register(DUMP_SIGNAL, file=target, all_threads=True, chain=False)
        _registered.append(target)
    except (OSError, ValueError, RuntimeError, AttributeError):
        pass  # no stack dumps is better than a process that cannot start
