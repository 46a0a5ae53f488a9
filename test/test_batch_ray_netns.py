"""A real two-machine Ray run on one machine: a Ray head and a Ray worker node in two network namespaces
joined by a veth pair (each namespace's ROS traffic stays on its own loopback), one sweep across both
into one output folder (the shared folder a cluster mounts everywhere), the worker node killed
mid-sweep (two runs, one on each node, each a warm actor's first): its run is flown again by the head's
actor (warm, in the graph its own run left), every run is done exactly once and the manifest is right.

Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN: ``ip netns add``), iproute2 and Ray; skipped, with the
reason, where any is missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, requires_ros
from test_batch_runs import RAY_ENV, SHORT_HOP, batch_command, processes_naming, wait_until, write_sweep

from aerial_sim.batch.manifest import read_manifest

pytestmark = [requires_ros, pytest.mark.ros]

HEAD_IP, WORKER_IP, PORT = "10.213.0.1", "10.213.0.2", 6379


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True)


def namespace_pids(name: str) -> list[int]:
    found = _ip("netns", "pids", name).stdout.split()
    return [int(pid) for pid in found if pid.isdigit()]


def in_namespace(pid: int, name: str) -> bool:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(f"/var/run/netns/{name}").st_ino
    except OSError:
        return False


def kill_namespace(name: str) -> None:
    for _ in range(3):  # a dying raylet may start nothing more, but be sure
        for pid in namespace_pids(name):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)


@pytest.fixture
def two_namespaces():
    """Namespaces <head> 10.213.0.1 and <worker> 10.213.0.2 on a veth pair, loopback up in each; removed after."""
    pytest.importorskip("ray")
    if shutil.which("ip") is None:
        pytest.skip("no iproute2 (ip) on this machine")
    tag = f"{os.getpid() % 100000}"
    head, worker = f"as{tag}h", f"as{tag}w"
    added = _ip("netns", "add", head)
    if added.returncode != 0:
        pytest.skip(f"ip netns add refused (needs root: CAP_SYS_ADMIN and CAP_NET_ADMIN): {added.stderr.strip()}")
    try:
        steps = [("netns", "add", worker), ("link", "add", f"v{tag}h", "type", "veth", "peer", "name", f"v{tag}w"),
                 ("link", "set", f"v{tag}h", "netns", head), ("link", "set", f"v{tag}w", "netns", worker),
                 ("-n", head, "addr", "add", f"{HEAD_IP}/24", "dev", f"v{tag}h"),
                 ("-n", worker, "addr", "add", f"{WORKER_IP}/24", "dev", f"v{tag}w")]
        for name, ip in ((head, HEAD_IP), (worker, WORKER_IP)):
            steps += [("-n", name, "link", "set", "lo", "up"), ("-n", name, "link", "set", f"v{tag}{name[-1]}", "up")]
        for step in steps:
            done = _ip(*step)
            if done.returncode != 0:
                pytest.skip(f"ip {' '.join(step)}: {done.stderr.strip()}")
        yield head, worker
    finally:
        for name in (head, worker):
            kill_namespace(name)
            _ip("netns", "delete", name)


def ray_node(namespace: str, log: Path, *arguments: str) -> subprocess.Popen:
    ray = str(Path(sys.executable).parent / "ray")
    return subprocess.Popen(["ip", "netns", "exec", namespace, ray, "start", "--block", "--num-cpus=1",
                             "--object-store-memory=100000000", "--disable-usage-stats", *arguments],
                            stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True, env=RAY_ENV)


def head_listening(head: str) -> bool:
    probe = f"import socket; s = socket.socket(); s.settimeout(1); exit(s.connect_ex(('{HEAD_IP}', {PORT})))"
    return subprocess.run(["ip", "netns", "exec", head, sys.executable, "-c", probe]).returncode == 0


def cluster_cpus(head: str) -> float:
    """The cluster's total CPUs as the head's autoscaler reports them (``ray status``); 0 before it answers."""
    ray = str(Path(sys.executable).parent / "ray")
    status = subprocess.run(["ip", "netns", "exec", head, ray, "status", f"--address={HEAD_IP}:{PORT}"],
                            capture_output=True, text=True, env=RAY_ENV, timeout=60).stdout
    found = re.search(r"[\d.]+/([\d.]+) CPU", status)
    return float(found.group(1)) if found else 0.0


def test_a_sweep_across_two_namespaces_survives_losing_the_worker_node(two_namespaces, tmp_path):
    head, worker = two_namespaces
    started = [ray_node(head, tmp_path / "head.log", "--head", f"--node-ip-address={HEAD_IP}", f"--port={PORT}",
                        "--include-dashboard=false", f"--temp-dir=/tmp/rt{os.getpid()}")]
    try:
        assert wait_until(lambda: head_listening(head), 90), (tmp_path / "head.log").read_text()[-3000:]
        started.append(ray_node(worker, tmp_path / "worker.log", f"--address={HEAD_IP}:{PORT}",
                                f"--node-ip-address={WORKER_IP}"))
        # both nodes in the cluster before the sweep: else the head's actor may fly both runs (warm runs are
        # quick) before the worker node joins and gets an actor of its own
        assert wait_until(lambda: cluster_cpus(head) >= 2.0, 120), (tmp_path / "worker.log").read_text()[-3000:]
        # the short hop with 2 x 5 s of hover: 15 s of sim time, so the worker's run is still flying when its
        # node is killed (the hop alone now flies at up to 6.5x real time: 0.8 s)
        mission = tmp_path / "hover_hop.yaml"
        mission.write_text(SHORT_HOP.replace("hold_s: 0.0", "hold_s: 5.0"))
        sweep = write_sweep(tmp_path, "netns", {"seed": [0, 1]}, run={"export": False, "plots": False},
                            base={"mission": str(mission)})
        out = tmp_path / "shared"  # one folder both "machines" see, as an NFS mount would be
        driver = subprocess.Popen(["ip", "netns", "exec", head, *batch_command(sweep, out, "--backend", "ray", "--address",
                                                                               f"{HEAD_IP}:{PORT}")],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=RAY_ENV)

        on_worker: list[str] = []  # the run whose launch runs in the worker's namespace

        def launched_on_worker() -> bool:
            # a warm actor's graph (its first run's log names the graph's folder), or a cold run's launch
            for pid_file in [*out.glob("warm/*/launcher.pid"), *out.glob("runs/*/launcher.pid")]:
                try:
                    if not in_namespace(int(pid_file.read_text().split()[0]), worker):
                        continue
                    if pid_file.parent.parent.name == "runs":
                        on_worker.append(pid_file.parent.name)
                        return True
                    for log in out.glob("runs/*/logs/attempt-1.log"):
                        if f"graph {pid_file.parent} " in log.read_text().split("\n", 1)[0]:
                            on_worker.append(log.parent.parent.name)
                            return True
                except (OSError, ValueError, IndexError):
                    continue
            return False

        # the worker node flies one run (its launch runs in the worker's namespace); kill the node mid-run
        assert wait_until(lambda: launched_on_worker() or driver.poll() is not None, 150), \
            (tmp_path / "worker.log").read_text()[-3000:]
        assert driver.poll() is None, driver.communicate()[0][-3000:]
        time.sleep(1.0)
        killed_at = time.time()
        kill_namespace(worker)
        output = driver.communicate(timeout=280)[0]
    finally:
        for node in started:
            os.killpg(node.pid, signal.SIGKILL)
            node.wait()
    assert driver.returncode == 0, output[-3000:]
    rows = read_manifest(out / "manifest.csv")
    assert sorted(row["seed"] for row in rows) == ["0", "1"]
    assert [row["status"] for row in rows] == ["ok", "ok"]
    for row in rows:
        entry = json.loads((out / "runs" / row["run_id"] / "result.json").read_text())
        assert entry["status"] == "ok" and (out / row["bag"] / "metadata.yaml").is_file()
    assert len(list(out.glob("runs/*/result.json"))) == 2
    # the run lost with the worker node was flown again, on the head, after the node died
    (lost,) = on_worker
    entry = json.loads((out / "runs" / lost / "result.json").read_text())
    assert entry["status"] == "ok" and entry["started_at"] > killed_at, entry
    assert entry["warm"] is True  # in the graph of the head's actor, after its own run
    assert not processes_naming(str(out))
