"""A launch file a node starts at run time, as its own child process (``aerial_sim launch FILE ARGS``).

What the AirSim server's ``simAddVehicle`` needs: the new vehicle's flight controller and sensors,
started from ``launch/vehicle.launch.yaml`` by the same launcher as every other node (its output goes to
the node's own output, each line prefixed by the node's name as usual). The child ends with its parent:

- :meth:`ChildLaunch.stop` (the node's ``destroy_node``) sends it SIGINT, then SIGTERM and SIGKILL after
  a few seconds each; the launcher stops its own nodes on SIGINT/SIGTERM;
- a parent that dies without stopping it (killed) has the kernel send it SIGTERM (``PR_SET_PDEATHSIG``);
- it stays in its parent's process group, so the outer launcher's signal to the node's group reaches it too.

No ROS import: only processes.
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
import time

#: Linux prctl option: the signal the kernel sends this process when its parent thread ends.
_PR_SET_PDEATHSIG = 1


def _child_setup() -> None:
    """Runs in the child between fork and exec: SIGINT/SIGTERM deliverable (a node blocks them while it
    starts, and a thread created meanwhile passes that mask on), and end with the parent."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the stop() on the way out still ends it
        pass


class ChildLaunch:
    """``aerial_sim launch <launch_file> <arguments...>`` as a child process (module doc)."""

    def __init__(self, launch_file: str, arguments: list[str]):
        self.command = [sys.executable, "-m", "aerial_sim", "launch", launch_file, *arguments]
        # PDEATHSIG follows the thread that forked: an event-loop thread that ends would end the child.
        # The node's threads live as long as the node; stop() ends the child first anyway.
        self.process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, preexec_fn=_child_setup,
                                        close_fds=True)

    @property
    def exit_code(self) -> int | None:
        """None while it runs."""
        return self.process.poll()

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGINT, then SIGTERM and SIGKILL each after ``grace_s``; returns once it has ended."""
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            if self.process.poll() is not None:
                return
            try:
                self.process.send_signal(signum)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and self.process.poll() is None:
                time.sleep(0.05)
