"""Shared test plumbing.

Every pytest process gets its own ``ROS_DOMAIN_ID`` (set here, before any
rclpy import, and inherited by every process a test starts), and DDS discovery
stays on the loopback interface, so concurrent test runs never see each other.

Fixtures for cross-process tests:
- ``ros_node``: an rclpy node in the test process, for subscribing/publishing.
- ``launch``: start ``aerial_sim launch <file> [args]`` as a separate process
  group and stop it with SIGINT at the end of the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"


#: Test sessions' own domain ids (``aerial_sim batch`` runs started by tests use 51..101).
TEST_DOMAINS = range(1, 51)
_held_domain: list = []  # this process's DomainLease, held (its flock) as long as the process lives


def private_domain_id() -> int:
    """This pytest process's ROS_DOMAIN_ID, held for the process's life as ``aerial_sim batch`` holds a run's
    (:mod:`aerial_sim.batch.domains`: a flock per id, an id whose DDS ports another program has bound
    skipped), so no other test process on this host has it: not another xdist worker, nor another session
    (a CI run beside a developer's). It used to come from the pid or the xdist run id alone, and two sessions
    that drew one id saw each other's graphs, and the MAVLink tests, whose UDP ports derive from it
    (:func:`private_udp_port`), each other's vehicles: a pymavlink script read the other graph's vehicle 3.75 m
    up after its own had landed. ``AERIAL_SIM_TEST_DOMAIN_ID`` chooses it instead (an xdist worker adds its
    index), held likewise when it is free; when another process holds it, a free one in 1..50. (It used to be
    shared then, with one warning line that xdist workers do not show: a session beside a CI run that had
    drawn its id met that run's graphs and MAVLink ports, and MAVSDK and pymavlink bind a port with
    SO_REUSEADDR, so the client that binds it second silently receives every datagram sent to it and the first
    one none: "no autopilot found".)"""
    if _held_domain:
        return _held_domain[0].domain_id
    if str(SRC) not in sys.path:
        sys.path.insert(0, str(SRC))
    from aerial_sim.batch.domains import DomainLease, DomainPool

    chosen = os.environ.get("AERIAL_SIM_TEST_DOMAIN_ID")
    if chosen:
        domain_id = int(chosen) + int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
        pool = DomainPool(range(domain_id, domain_id + 1))
        lease = pool.try_acquire()
        if lease is None:
            try:  # the holder writes its pid: xdist's controller holds the base its first worker uses
                holder = (pool.lock_dir / f"{domain_id}.lock").read_text().strip()
            except OSError:
                holder = ""
            if holder == str(os.getppid()):
                lease = DomainLease(domain_id, None)
            else:  # another session's: sharing it, each would see the other's graphs and MAVLink ports
                print(f"[conftest] ROS domain {domain_id} (AERIAL_SIM_TEST_DOMAIN_ID) is held or used by another "
                      f"process on this host: this session takes a free one of {TEST_DOMAINS.start}-"
                      f"{TEST_DOMAINS.stop - 1} instead", file=sys.stderr)
                lease = DomainPool(TEST_DOMAINS).acquire(timeout_s=120)
    else:
        lease = DomainPool(TEST_DOMAINS).acquire(timeout_s=120)
    _held_domain.append(lease)
    return lease.domain_id


#: How many UDP ports each test process has of its own (:func:`private_udp_port`).
PRIVATE_UDP_PORTS = 20


def private_udp_port(offset: int) -> int:
    """UDP port ``offset`` (0..19) of this pytest process's own, for the MAVLink clients and servers and the SITL
    bridges its tests start: the top 20 of its ROS domain's DDS ports (7400 + 250 x id + 230 ... 249,
    :func:`aerial_sim.batch.domains.domain_ports`). Its domain lease already keeps every other test process,
    session and batch run off that range (and found it unbound), and only the domain's own DDS participants
    110 and up would bind those. They were 20000 + 20 x id + offset, which lies in the DDS ports of domains
    50-54 (domain 52: 20400-20649), the very domains batch runs and spare graphs lease: a graph in domain 52
    held 20411 (its participant 0's unicast port) when test_mavlink_fleet's MAVSDK client bound it
    (``Connection failed: BIND_ERROR``, reproduced beside another session's graphs)."""
    if not 0 <= offset < PRIVATE_UDP_PORTS:
        raise ValueError(f"private UDP port offset must be in 0..{PRIVATE_UDP_PORTS - 1}, got {offset}")
    from aerial_sim.batch.domains import domain_ports

    return domain_ports(private_domain_id())[offset - PRIVATE_UDP_PORTS]


os.environ["ROS_DOMAIN_ID"] = str(private_domain_id())
os.environ.setdefault("AERIAL_SIM_DOMAIN_RANGE", "51-101")  # batch runs never share a test's domain
# Every graph a test launches is one graph: their lockstep announcements are signed with one key (each
# `aerial_sim launch` would otherwise draw its own, and refuse another launch's nodes: doc/reliability.md).
os.environ.setdefault("AERIAL_SIM_LOCKSTEP_KEY", os.urandom(16).hex())
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("AERIAL_SIM_SHARE", str(REPO))
# Scenes loaded by tests (and the graphs they launch) are cached outside the user's home
# (aerial_sim.world.scene_cache), shared by the runs of this machine.
os.environ.setdefault("AERIAL_SIM_SCENE_CACHE", os.path.join(tempfile.gettempdir(), f"aerial_sim_test_scenes_{os.getuid()}"))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)
os.environ["PYTHONUNBUFFERED"] = "1"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))


def fast_dds_transport_line(line: str) -> bool:
    """A line Fast DDS's own log prints about its transports, not the node's. A participant that finds a
    shared-memory port whose owner did not answer its health check in time (a loaded or stopped process)
    unlinks that port and opens it anew, and the owner, alive, still holds the port's lock: Fast DDS then
    prints ``[RTPS_TRANSPORT_SHM Error] Failed init_port fastdds_port7009: open_and_lock_file failed``
    and goes on over another port (ci of 2026-11-27; reproduced here beside a recorder holding
    fastdds_port7009_el with its segment gone). Tests that compare a node's output line by line skip it."""
    return "RTPS_TRANSPORT_" in line


def rclpy_available() -> bool:
    try:
        import rclpy  # noqa: F401
    except ImportError:
        return False
    return True


requires_ros = pytest.mark.skipif(not rclpy_available(), reason="rclpy is not installed")


@pytest.fixture
def ros_node():
    """A fresh rclpy context and node in the test process; torn down after the test."""
    import rclpy
    from rclpy.node import Node

    from aerial_sim.nodes.ros.transport import use_transport_profile

    use_transport_profile()  # the same Fast DDS transport as the nodes (large images arrive)
    context = rclpy.context.Context()
    rclpy.init(context=context)
    node = Node(f"test_probe_{os.getpid()}", context=context)
    try:
        yield node
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)


def call_service(ros_node, service_type, name: str, request, timeout_s: float = 30.0):
    """Call service ``name`` from ``ros_node`` and return its answer (asserting it is served and answers)."""
    client = ros_node.create_client(service_type, name)
    try:
        assert client.wait_for_service(timeout_sec=timeout_s), f"{name} not served"
        future = client.call_async(request)
        assert spin_until(ros_node, future.done, timeout_s=timeout_s), f"{name} not answered"
        return future.result()
    finally:
        ros_node.destroy_client(client)


def spin_until(node, condition, timeout_s: float, period_s: float = 0.01) -> bool:
    """Spin ``node`` until ``condition()`` is true or ``timeout_s`` passes; return the condition."""
    import rclpy

    executor = rclpy.executors.SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if condition():
                return True
            executor.spin_once(timeout_sec=period_s)
        return bool(condition())
    finally:
        executor.remove_node(node)


class LaunchedGraph:
    """A running ``aerial_sim launch`` process group (see the ``launch`` fixture)."""

    def __init__(self, launch_file: str, args: list[str], log_path: Path, domain_id: int | None = None,
                 environment: dict[str, str] | None = None):
        self.log_path = log_path
        self._log = open(log_path, "w")
        environment = {**os.environ, **(environment or {})}
        if domain_id is not None:
            environment["ROS_DOMAIN_ID"] = str(domain_id)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "aerial_sim", "launch", launch_file, *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=REPO,
            env=environment,
        )

    def output(self) -> str:
        """Everything the launch printed so far (also after stop())."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout_s: float = 15.0) -> int:
        """SIGINT to the launcher (it stops its nodes: SIGINT, SIGTERM, SIGKILL at their timeouts); once it
        has exited, or after ``timeout_s``, SIGKILL to whatever is left of the launch.

        The launcher puts each node in a process group of its own, so a SIGKILL to the launcher's group
        alone (as this did after 15 s) orphaned every node it had not stopped yet, and one stuck in a call
        that holds the GIL ignored its parent-death SIGTERM and outlived the test. Every process the
        launch started stays in the session the launcher leads, also once orphaned, and the session's id
        is the launcher's pid, which the kernel hands out again only once the launcher is reaped and no
        process is left in its session, so the session finds exactly them
        (:func:`aerial_sim.batch.processes.kill_session`)."""
        from aerial_sim.batch.processes import kill_session

        pid = self.process.pid
        reaped = self.process.returncode is not None  # alive() reaped it, or a test waited for it
        if not reaped:
            try:
                os.killpg(pid, signal.SIGINT)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + timeout_s
            while not _exited(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        if not (reaped and Path(f"/proc/{pid}").exists()):  # (that pid, reaped, is another program's now)
            kill_session(pid, "")  # the launcher too, if it has not exited by now
        self.process.wait()
        self._log.close()
        return self.process.returncode


def _exited(pid: int) -> bool:
    """Whether child ``pid`` has exited, leaving it unreaped (a zombie keeps its pid from reuse)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


@pytest.fixture
def spare_domain():
    """``spare_domain()``: one more private ROS domain id, for a graph beside the test's own, held until the
    test ends. It is leased as a batch run's is (aerial_sim.batch.domains: ``AERIAL_SIM_DOMAIN_RANGE``, a
    flock per id, an id whose DDS ports something else has bound skipped), so no other worker, batch or
    test session on the host gets it while the test runs."""
    from aerial_sim.batch.domains import DomainPool

    leases = []

    def lease() -> int:
        leases.append(DomainPool().acquire(timeout_s=120))
        return leases[-1].domain_id

    yield lease
    for held in leases:
        held.release()


@pytest.fixture
def launch(tmp_path):
    """Start launch files as separate processes: ``graph = launch('sim.launch.yaml', 'gui:=false')``.

    ``domain_id=spare_domain()`` runs a graph beside the test's own without seeing it; ``environment``
    adds to (or overrides) the test's environment."""
    graphs: list[LaunchedGraph] = []

    def start(launch_file: str, *args: str, domain_id: int | None = None,
              environment: dict[str, str] | None = None) -> LaunchedGraph:
        graph = LaunchedGraph(launch_file, list(args), tmp_path / f"launch_{len(graphs)}.log", domain_id, environment)
        graphs.append(graph)
        return graph

    yield start
    for graph in graphs:
        graph.stop()


def pytest_collection_modifyitems(config, items):
    """On a pytest-xdist worker: the test files longest first (test/scheduling.py), so the workers of
    ``tools/dev.sh test`` finish together."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        from scheduling import share_between_workers

        share_between_workers(items)


def pytest_sessionfinish(session, exitstatus):
    """Tests kill nodes on purpose (native crashes, hung runs): remove the Fast DDS shared memory
    their dead participants left in /dev/shm, which would otherwise hold RAM until the next reboot."""
    from aerial_sim.launcher.shared_memory import remove_dead_participants

    removed = remove_dead_participants()
    if removed.segments:
        print(f"\n{removed.summary()}")
