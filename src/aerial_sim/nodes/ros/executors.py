"""What a node process spins in, and at which CPU priority: the executor, the spin loop that stops on a
signal or a node's ``done``, and the lower niceness of processes off the lockstep control loop."""

from __future__ import annotations

import os
import time

import rclpy.executors
import rclpy.task
from rclpy.node import Node

from aerial_sim.nodes.ros import callback_cpu, process
from aerial_sim.nodes.ros.input_guard import InputGuard


def spin_until_stopped(nodes: list[Node], drain_s: float = 0.0) -> None:
    """Spin until a stop signal, the context's shutdown, or any node's ``done``; after a ``done``, spin
    the nodes ``drain_s`` (wall s) more. That is for a node container (:mod:`aerial_sim.nodes.container`):
    the mission that ends a run waits with the clock held while the recorder takes the graph's last
    outputs, which, in one process, it can only do once the mission's callback has returned."""
    for node in nodes:
        InputGuard(node)  # wraps the node's callbacks, now and as they are created
    context = nodes[0].context
    executor = make_executor(context)
    for node in nodes:
        executor.add_node(node)
    never = rclpy.task.Future()
    while not process.stop_requested() and context.ok() and not any(getattr(n, "done", False) for n in nodes):
        # Spin for 0.1 s at a time, not one callback: the loop's own checks per message cost a
        # sensor fed 250 Hz odometry 13 % of its CPU (benchmarks/executor.py, --before the change).
        executor.spin_until_future_complete(never, timeout_sec=0.1)
    end = time.monotonic() + drain_s
    while (left := end - time.monotonic()) > 0 and not process.stop_requested() and context.ok():
        executor.spin_until_future_complete(never, timeout_sec=min(left, 0.1))
    for node in nodes:
        executor.remove_node(node)
    callback_cpu.write_report()


#: Lockstep: the niceness of a process whose outputs the clock awaits with slack (environment
#: variable; 0 leaves every process at the priority it was started with).
BACKGROUND_NICE_VARIABLE = "AERIAL_SIM_BACKGROUND_NICE"
DEFAULT_BACKGROUND_NICE = 10


def yield_cpu_in_lockstep(nodes: list[Node]) -> None:
    """In lockstep, lower this process's CPU priority to nice ``AERIAL_SIM_BACKGROUND_NICE`` (10).

    For the processes off the control loop's critical path: sensors, camera, depth noise, point
    cloud, lidar, rangefinder, recorder. Each lockstep period waits for the flight
    controller's answer to the physics node's odometry, while those nodes may lag by the lockstep
    slack. On two cores, four or five processes wake at each odometry message; given the same
    priority, the scheduler shares the cores among them and the controller's answer comes later.
    At nice 10 they use the time the loop leaves (``bench graph --variants lockstep_no_camera``,
    measured in doc/measurements_history.md). Every thread of the process is reniced (Linux sets niceness per
    thread; threads started later inherit it). Outside lockstep every node keeps its priority:
    in real time each stream has a wall-clock deadline of its own.
    """
    if not any(n.has_parameter("lockstep") and n.get_parameter("lockstep").value is True for n in nodes):
        return
    text = os.environ.get(BACKGROUND_NICE_VARIABLE, str(DEFAULT_BACKGROUND_NICE))
    logger = nodes[0].get_logger()
    try:
        nice = int(text)
        if not 0 <= nice <= 19:
            raise ValueError
    except ValueError:
        logger.warning(f"{BACKGROUND_NICE_VARIABLE}={text!r} is not a niceness in 0..19: priority left as it is")
        return
    if nice == 0:
        return
    try:
        threads = [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        threads = [0]  # no /proc: the calling thread (the whole process where niceness is per process)
    try:
        for thread in threads:
            _started_nice.setdefault(thread, os.getpriority(os.PRIO_PROCESS, thread))
            os.setpriority(os.PRIO_PROCESS, thread, max(nice, os.getpriority(os.PRIO_PROCESS, thread)))
    except OSError as error:
        logger.warning(f"lockstep: could not lower this process's CPU priority ({error}); it runs as it was")
        return
    logger.info(f"lockstep: off the control loop's critical path, this process runs at nice {nice} "
                f"({BACKGROUND_NICE_VARIABLE}=0 leaves it as it is)")


#: Thread id -> the niceness it had before :func:`yield_cpu_in_lockstep` lowered it.
_started_nice: dict[int, int] = {}


def restore_cpu_priority() -> None:
    """Back to the priority the process started with, where the system allows it (root, or an
    RLIMIT_NICE that permits it; else it stays as it is): once a node stops, the launch waits for it.
    The recorder's report reads its whole bag after the flight; at nice 10 on a machine loaded with
    other runs it took minutes and met its 120 s stop timeout (issue 34, seen at a load of 28 on 2 cores)."""
    for thread, nice in _started_nice.items():
        try:
            os.setpriority(os.PRIO_PROCESS, thread, nice)
        except OSError:
            pass  # not allowed (EACCES), or the thread has ended (ESRCH)


def make_executor(context):
    """The executor every node spins in: rclpy's events executor (C++) where this rclpy has it,
    else the Python ``SingleThreadedExecutor``.

    Most nodes here do little per message, so the executor's own overhead dominates their CPU:
    ``benchmarks/executor.py`` measures both on a 250 Hz odometry subscriber. ``AERIAL_SIM_EXECUTOR=single``
    chooses the Python one (for comparison, or should the experimental one misbehave).
    """
    if os.environ.get("AERIAL_SIM_EXECUTOR", "events") != "single":
        try:
            from rclpy.experimental import EventsExecutor
        except ImportError:
            pass
        else:
            return EventsExecutor(context=context)
    return rclpy.executors.SingleThreadedExecutor(context=context)
