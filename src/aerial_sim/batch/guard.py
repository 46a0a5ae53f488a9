"""``python -m aerial_sim.batch.guard PARENT_PID -- COMMAND...``: run COMMAND, stopped when PARENT dies.

Sets ``PR_SET_PDEATHSIG`` to SIGTERM (kept across ``exec``), checks that the
parent is still the one that started it (it may have died in between), then
replaces itself with COMMAND. Linux only; elsewhere COMMAND just runs.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m aerial_sim.batch.guard PARENT_PID -- COMMAND...", file=sys.stderr)
        return 2
    parent, command = int(argv[0]), argv[2:]
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:
            return 143  # the parent is already gone: do not start
    os.execvp(command[0], command)
    return 127  # not reached


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
