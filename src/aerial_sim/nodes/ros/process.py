"""How a node process starts and stops, the same under ``aerial_sim launch``, ``ros2 launch`` and ``ros2 run``.

Rules (doc/launch.md, "Stopping"):

- SIGINT and SIGTERM, however often they arrive, stop the node quietly with exit
  status 0. ``ros2 launch`` in a terminal delivers Ctrl-C twice (to the process
  group, then its own SIGINT), and SIGTERM follows after ``sigterm_timeout``.
  While the process is still importing its modules a stop signal ends it at
  once, quietly (an exception thrown from the handler into arbitrary start-up
  code can be swallowed and printed as a traceback). Once it has begun to build
  its node (``rclpy.init``, DDS participant) the request is kept and honoured
  when the node is built: the node is then destroyed and the process exits 0.
  Ending it half-built instead (``os._exit`` from the handler) killed DDS's own
  threads while they could hold a shared-memory port lock, and a sibling node
  still starting then waited on that lock for ever, inside a C call where no
  signal handler runs (seen twice under load: ``failed to terminate`` and
  SIGKILL). While it runs, the spin loop sees the request within 0.1 s; during
  the node's own shutdown work further SIGINTs are ignored. A SIGTERM at least ``ESCALATION_S``
  after the first stop signal (the launcher escalating after ``sigterm_timeout``:
  the stop has not finished, some call does not return) ends the process at once
  with one warning line and status 0, instead of waiting for the SIGKILL.
- The process dies with its parent: Linux's parent-death signal (SIGTERM) is
  set at start, so a launcher killed with SIGKILL leaves no orphans, whichever
  launcher it was. (Under ``ros2 launch`` a launcher killed during the node's
  first fraction of a second, before this module runs, can still leave it
  behind; ``aerial_sim launch`` passes its pid to close that gap.)
- Under ``aerial_sim launch`` a signal sent during interpreter start-up waits
  (the launcher starts nodes with SIGINT/SIGTERM blocked, unblocked here);
  under ``ros2 launch`` a Ctrl-C in the first ~0.4 s, while Python itself is
  still starting, can still end it with Python's own message.
- Output is line-buffered, so lines reach the launcher as they are printed
  (neither launcher needs PYTHONUNBUFFERED). A crash in native code prints the
  Python stack of every thread first (``faulthandler``), and SIGUSR1 writes them
  at any time (:mod:`aerial_sim.stack_dumps`: how ``aerial_sim batch`` reports a hang).

How the signals arrive: Python's C-level handler, in whichever thread the kernel
picks, writes each signal's number to a pipe (``signal.set_wakeup_fd``), and one
thread of ours, ``stop-signals``, reads the pipe and acts on it. A Python signal
handler runs only when the main thread comes back to the interpreter, and a main
thread stuck inside a C call (a DDS lock, an executor that does not return) never
does: the flight controller of a batch run once ignored SIGINT and SIGTERM that
way until SIGKILL. The ``stop-signals`` thread needs no help from the main thread,
so the launcher's escalating SIGTERM ends such a process with status 0, naming
the call the main thread is stuck in. Should a thread hold the GIL while stuck, no
Python runs at all, the stop-signals thread included; for a stuck call the stop itself
runs into, the first stop signal arms a C-level watchdog (:func:`arm_stop_watchdog`):
``AERIAL_SIM_STOP_TIMEOUT_S`` (8 s, after a launcher's escalating SIGTERM at 5 s and before
its SIGKILL at 10 s) after it, every thread's Python stack goes to stderr and the process
exits with status 1. A call stuck holding the GIL before any stop signal came still leaves
the SIGKILL as the way out.

rclpy's own signal handlers are not installed (they raise KeyboardInterrupt in
arbitrary places on a second Ctrl-C); :func:`aerial_sim.nodes.ros.run.run_node`
polls :func:`stop_requested` instead.
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import signal
import sys
import threading
import time
from pathlib import Path

from aerial_sim import stack_dumps

#: Linux prctl option: the signal this process gets when its parent dies.
PR_SET_PDEATHSIG = 1
#: Signals that ask a node to stop.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: Set by ``aerial_sim launch`` for its children: the launcher's pid, to notice it died before
#: the parent-death signal was set (``aerial_sim launch`` also sets that signal before exec).
LAUNCHER_PID_VARIABLE = "AERIAL_SIM_LAUNCHER_PID"
#: A SIGTERM this long after the first stop signal, with the node still not gone, ends it at once.
ESCALATION_S = 1.0
#: The phases of a node process, in order.
PHASES = ("importing", "starting", "running", "stopping")


class StopRequested(BaseException):
    """A stop signal arrived before the node was built: abandon the start, exit 0."""


class _State:
    phase: str | None = None  # None: not a node process (signals untouched)
    stop_signal: int | None = None
    stop_at = 0.0  # time.monotonic() of the first stop signal
    stop_deadline: float | None = None  # time.monotonic() the stop watchdog fires (None: not armed)


def is_node_executable(argv0: str | None = None, orig_argv: list[str] | None = None) -> bool:
    """True when this interpreter runs a node: ``python -m aerial_sim.nodes.X`` or ``lib/aerial_sim/X``."""
    orig_argv = list(getattr(sys, "orig_argv", [])) if orig_argv is None else orig_argv
    for flag, module in zip(orig_argv, orig_argv[1:]):
        if flag == "-m":
            return module.startswith("aerial_sim.nodes.") and not module.rsplit(".", 1)[1].startswith("_")
    path = Path(sys.argv[0] if argv0 is None else argv0)
    return path.parent.name == "aerial_sim" and path.parent.parent.name == "lib" and path.name != "aerial_sim"


def start_node_process() -> None:
    """Install the stop-signal handlers, the parent-death signal and line-buffered output (once)."""
    if _State.phase is not None:
        return
    _State.phase = "importing"
    # A crash in native code (DDS, a compiled extension) prints every thread's Python stack to
    # stderr, which the launcher shows and logs, instead of only "killed by SIGSEGV".
    faulthandler.enable()
    # SIGUSR1: every thread's stack, for the batch's hang reports (aerial_sim.stack_dumps).
    stack_dumps.register()
    _start_stop_signals_thread()
    # aerial_sim launch starts nodes with these signals blocked, so one sent during interpreter
    # start-up waits for the stop-signals thread instead of killing Python half-started.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    _die_with_parent()
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True)


def set_phase(phase: str) -> None:
    """Enter ``phase``; entering 'running' after a stop signal raises :class:`StopRequested`."""
    assert phase in PHASES, phase
    _State.phase = phase
    if phase == "running" and _State.stop_signal is not None:
        raise StopRequested()


def stop_requested() -> bool:
    return _State.stop_signal is not None


def stop_point() -> None:
    """Raise :class:`StopRequested` when a stop signal came while the node is being built ('starting').

    A long build calls this between its steps, where no DDS call is in progress: the stop then
    happens there, through :func:`aerial_sim.nodes.ros.run.run_nodes`' normal shutdown, instead of
    after the whole build (ci of 2026-11-27, load 12: a physics node still building its fleet 5 s after
    the launch's SIGINT was escalated to SIGTERM, 'failed to terminate'). Elsewhere: nothing."""
    if _State.phase == "starting" and _State.stop_signal is not None:
        raise StopRequested()


def is_node_process() -> bool:
    return _State.phase is not None


#: Environment variable: seconds the DDS teardown of a stopping node may take (:func:`arm_teardown_watchdog`).
TEARDOWN_TIMEOUT_VARIABLE = "AERIAL_SIM_TEARDOWN_TIMEOUT_S"
DEFAULT_TEARDOWN_TIMEOUT_S = 10.0


#: Environment variable: seconds a node may take to stop after its first stop signal (:func:`arm_stop_watchdog`).
STOP_TIMEOUT_VARIABLE = "AERIAL_SIM_STOP_TIMEOUT_S"
DEFAULT_STOP_TIMEOUT_S = 8.0


def _timeout_from(variable: str, default: float) -> float:
    try:
        return float(os.environ.get(variable, default))
    except ValueError:
        return default


def _dump_and_exit_after(timeout_s: float) -> bool:
    """``faulthandler``'s watchdog: after ``timeout_s``, every thread's stack to stderr and exit status 1."""
    try:
        faulthandler.dump_traceback_later(timeout_s, exit=True, file=sys.stderr)
    except (OSError, ValueError, RuntimeError, AttributeError):
        return False  # no watchdog: the launcher's stop timeouts remain
    return True


def arm_stop_watchdog() -> None:
    """At the first stop signal: past ``AERIAL_SIM_STOP_TIMEOUT_S`` (8 s; 0: never) every thread's Python
    stack goes to stderr and the process exits with status 1.

    The stop-signals thread leaves on a launcher's escalating SIGTERM, but it is Python and needs the GIL:
    a thread stuck in a C call that holds it (a deadlock inside the middleware) freezes every other
    thread, and the MAVLink node once ignored SIGINT and SIGTERM until the launcher's SIGKILL 10 s later
    (load 20) with nothing in its log to say where it was. ``faulthandler``'s watchdog is a C thread: it
    needs no GIL, and its stacks name the call. Its default falls after both launchers' escalating
    SIGTERM (``sigterm_timeout``, 5 s), which still ends a node whose Python can run, with status 0, and
    before their SIGKILL (5 s later). A node's own stop work (the recorder closing its bag and writing its
    report, which a launch may give minutes) is bounded by the launcher's timeouts instead: the watchdog is
    set aside for it (:func:`set_aside_stop_watchdog`), and :func:`arm_teardown_watchdog` bounds the rest."""
    timeout_s = _timeout_from(STOP_TIMEOUT_VARIABLE, DEFAULT_STOP_TIMEOUT_S)
    if timeout_s > 0 and _dump_and_exit_after(timeout_s):
        _State.stop_deadline = time.monotonic() + timeout_s


def set_aside_stop_watchdog() -> None:
    """Before a node's own stop work (:func:`arm_stop_watchdog`): no watchdog until :func:`arm_teardown_watchdog`."""
    if _State.stop_deadline is not None:
        faulthandler.cancel_dump_traceback_later()
        _State.stop_deadline = None


def arm_teardown_watchdog() -> None:
    """Once a stopping node has done its own work (the recorder: bag closed, report written), bound
    what is left, destroying its ROS entities and shutting rclpy down, to ``AERIAL_SIM_TEARDOWN_TIMEOUT_S``
    (10 s): past it, every thread's Python stack goes to stderr (the launcher's log) and the process
    exits with status 1.

    The recorder of a lockstep flight once printed its report and then never exited, ignoring the
    launcher's SIGTERM 120 s later (issue 34, and once in this project's identical-bags test): its
    main thread was stuck in a C call of the teardown that holds the GIL, so neither a Python signal
    handler nor the stop-signals thread could run. ``faulthandler``'s watchdog is a C thread that needs
    no GIL; it names the call (the stacks) and ends the process instead of the launcher waiting out
    its stop timeout and SIGKILL. A batch keeps such a run: its bag was closed first
    (:func:`aerial_sim.batch.execute.judge_stop_failures`).
    """
    timeout_s = _timeout_from(TEARDOWN_TIMEOUT_VARIABLE, DEFAULT_TEARDOWN_TIMEOUT_S)
    if _State.stop_deadline is not None:  # the stop watchdog armed at the stop signal stays the limit
        left = max(_State.stop_deadline - time.monotonic(), 0.001)
        timeout_s = min(timeout_s, left) if timeout_s > 0 else left
    if timeout_s > 0:
        _dump_and_exit_after(timeout_s)


def exit_now(code: int) -> None:
    """End the process with ``code`` after flushing output, skipping interpreter teardown.

    Teardown runs third-party finalisers after the node is gone (seen: imageio's
    ``PillowPlugin.__del__`` raising AttributeError at exit); nothing is left to
    clean up by then.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _start_stop_signals_thread() -> None:
    """Route SIGINT/SIGTERM through a wake-up pipe to the ``stop-signals`` thread (module docstring)."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    for signum in STOP_SIGNALS:
        # A Python handler must be installed for the C handler to write the pipe; the work is the
        # thread's, so the main thread's share is nothing (and never KeyboardInterrupt).
        signal.signal(signum, _leave_to_the_stop_signals_thread)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    threading.Thread(target=_take_stop_signals, args=(read_end,), name="stop-signals", daemon=True).start()


def _leave_to_the_stop_signals_thread(signum, frame) -> None:
    pass


def _take_stop_signals(read_end: int) -> None:
    """The ``stop-signals`` thread: read signal numbers from the wake-up pipe and act on each stop signal."""
    while True:
        for signum in os.read(read_end, 64):
            if signum in STOP_SIGNALS:
                _on_stop_signal(signum)


def _main_thread_call() -> str:
    """Where the main thread is now, as ``function (file:line)``, for the escalation's warning line."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    if frame is not None and frame.f_code is _leave_to_the_stop_signals_thread.__code__:
        frame = frame.f_back  # the signal's own (empty) Python handler: the call it interrupted
    if frame is None:
        return "an unknown call"
    return f"{frame.f_code.co_name} ({Path(frame.f_code.co_filename).name}:{frame.f_lineno})"


def _on_stop_signal(signum: int) -> None:
    first = _State.stop_signal is None
    if first:
        _State.stop_signal = signum
        _State.stop_at = time.monotonic()
        if _State.phase in ("starting", "running"):
            arm_stop_watchdog()  # while this thread can still run: a stuck call may come next
    if _State.phase == "importing":
        # Nothing worth keeping exists yet, and no DDS thread. Ending here is the only prompt, quiet
        # way out: an exception raised from this handler lands wherever the main thread happens to
        # be (an import lock's weakref callback, a __del__, a library's cleanup) and is there
        # printed as "Exception ignored ... Traceback" and swallowed, leaving the node to start anyway.
        exit_now(0)
    # starting: set_phase("running") raises StopRequested once the node is built (module docstring).
    if (not first and signum == signal.SIGTERM and _State.phase in ("starting", "running", "stopping")
            and time.monotonic() - _State.stop_at >= ESCALATION_S):
        # The launcher escalated: the stop asked for earlier has not finished within its
        # sigterm_timeout (a callback or a library call that does not return). Leave now, with one
        # line, rather than be SIGKILLed a few seconds later.
        print(f"[WARN] [{Path(sys.argv[0]).name}:{os.getpid()}]: still stopping "
              f"{time.monotonic() - _State.stop_at:.1f} s after the stop signal, the main thread in "
              f"{_main_thread_call()}; SIGTERM: exiting now", file=sys.stderr)
        exit_now(0)
    # running: the spin loop polls stop_requested(); stopping: further SIGINTs are ignored.


PR_SET_NAME = 15


def name_os_thread() -> None:
    """Give the calling thread's Linux task its Python name (first 15 bytes), so ``/proc/<pid>/task/*/comm``,
    ``top -H`` and ``tools/dev.sh bench batch_cpu --threads`` tell the physics loop, the recorder's taker
    and the executor apart (Python 3.11 leaves every thread named after the process). Elsewhere, or
    where it fails, nothing changes."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_NAME, threading.current_thread().name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _die_with_parent() -> None:
    """Ask Linux for SIGTERM when the parent dies; exit now if it already has."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):
        return
    launcher = os.environ.get(LAUNCHER_PID_VARIABLE, "")
    if launcher.isdigit() and os.getppid() != int(launcher):  # it died before we asked: re-parented
        exit_now(0)
