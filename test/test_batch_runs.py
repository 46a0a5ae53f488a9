"""``aerial_sim batch`` end to end: real headless lockstep runs (short hops in the empty scene).

- a 4-run sweep, started on 1 worker and killed (SIGKILL) after its first finished run,
  then re-run on 2 local workers: the rest is done, two at a time, the finished run is not
  redone, nothing of the killed batch is left running, and the manifest, bags, datasets
  and summary plot are right;
- runs that crash or hang are retried, then reported as failed with their logs;
- two batch commands at once get distinct ROS domain ids (and fly identical runs);
- the same runs on a real local Ray cluster give identical metrics.

Domain ids come from ``AERIAL_SIM_DOMAIN_RANGE`` when set (the default range otherwise).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO, requires_ros

from aerial_sim.batch.domains import parse_domain_range
from aerial_sim.batch.manifest import read_manifest
from aerial_sim.recording.digest import shared_messages

pytestmark = [requires_ros, pytest.mark.ros]

#: A hop shorter than config/missions/hop_1m.yaml (disarmed at about 4.9 s of sim time instead of about 11).
SHORT_HOP = (Path(__file__).parent / "data" / "missions" / "short_hop.yaml").read_text()
#: A short flight with the IMU and the recorder: the smallest graph that still makes a dataset.
BASE = {
    "scene": "empty",
    "mission": "short_hop.yaml",  # written next to each sweep file, its path set by write_sweep
    "use_camera": False,
    "use_depth_noise": False,
    "use_gps": False,
    "use_magnetometer": False,
    "use_barometer": False,
}
FOUR_RUNS = {"vehicle": ["quad_x", "hexa_x"], "seed": [0, 1]}
METRICS = ("hausdorff_m", "rms_cross_track_m", "max_cross_track_m")


def write_sweep(folder: Path, name: str, grid: dict, run: dict | None = None, base: dict | None = None) -> Path:
    path = folder / f"{name}.yaml"
    mission = folder / "short_hop.yaml"
    mission.write_text(SHORT_HOP)
    document = {"name": name, "base": {**BASE, "mission": str(mission), **(base or {})}, "grid": grid,
                "run": {"timeout_s": 240, "retries": 1, **(run or {})}}
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def batch_command(sweep: Path, out: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "aerial_sim", "batch", str(sweep), "--out", str(out), "--no-progress", *options]


def processes_naming(marker: str, with_pids: bool = False) -> list:
    """Command lines of live processes that mention ``marker`` (a batch's output folder); with ``with_pids``,
    ``(pid, command line)`` pairs."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
            except OSError:
                continue
            if marker in cmdline and state != "Z":
                found.append((int(entry.name), cmdline) if with_pids else cmdline)
    return found


def describe_and_kill(processes: list[tuple[int, str]]) -> list[str]:
    """For a failure message: each left process's command line, signal masks and state (/proc status) and
    Python stacks (py-spy, where installed); then SIGKILL, so that the next batch meets none of them."""
    described = []
    py_spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    for pid, cmdline in processes:
        try:
            status = [line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if line.split(":")[0] in ("State", "PPid", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")]
        except OSError:
            status = ["(gone)"]
        stacks = ""
        if py_spy:
            dump = subprocess.run([py_spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30)
            stacks = dump.stdout or dump.stderr
        described.append(f"{pid} {cmdline}\n" + "\n".join(status) + f"\n{stacks}")
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return described


def wait_until(condition, timeout_s: float, period_s: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(period_s)
    return bool(condition())


def ok_rows(out: Path) -> list[dict]:
    try:
        return [row for row in read_manifest(out / "manifest.csv") if row["status"] == "ok"]
    except (OSError, KeyError):
        return []


@pytest.fixture(scope="module")
def four_runs(tmp_path_factory):
    """Start the 4-run sweep on 1 worker, SIGKILL the batch after its first finished run, run it again on 2.

    The killed batch launches each run (``warm: false``): a warm run's row waits for the next run to close
    its bag and for post-processing, and on a loaded machine all four flew before the first row came.
    The resumed batch flies warm, as a sweep does by default; run ids do not depend on ``run:``."""
    folder = tmp_path_factory.mktemp("batch")
    sweep, out = write_sweep(folder, "four", FOUR_RUNS, run={"warm": False, "plots": True}), folder / "out"
    first = subprocess.Popen(batch_command(sweep, out, "--workers", "1"), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, cwd=REPO)
    try:
        assert wait_until(lambda: ok_rows(out) or first.poll() is not None, 240), "no run finished in time"
    finally:
        first.kill()
        first_output = first.communicate()[0]
    finished = {row["run_id"]: (out / "runs" / row["run_id"] / "result.json") for row in ok_rows(out)}
    finished = {run_id: (path.stat().st_mtime_ns, path.read_text()) for run_id, path in finished.items()}
    orphans_gone = wait_until(lambda: not processes_naming(str(out)), 40)
    left = describe_and_kill(processes_naming(str(out), with_pids=True))  # ci27: one launcher, not understood
    write_sweep(folder, "four", FOUR_RUNS, run={"plots": True})  # plots: off by default, asked for here
    second = subprocess.run(batch_command(sweep, out, "--workers", "2"), capture_output=True, text=True, cwd=REPO, timeout=280)
    return {"out": out, "first_output": first_output, "finished": finished, "orphans_gone": orphans_gone,
            "left": left, "second": second}


def test_four_run_sweep_on_two_workers_writes_manifest_bags_datasets_and_plot(four_runs):
    out, second = four_runs["out"], four_runs["second"]
    assert second.returncode == 0, second.stdout + second.stderr
    rows = read_manifest(out / "manifest.csv")
    assert [(r["vehicle"], r["seed"]) for r in rows] == [("quad_x", "0"), ("quad_x", "1"), ("hexa_x", "0"), ("hexa_x", "1")]
    allowed = parse_domain_range(os.environ.get("AERIAL_SIM_DOMAIN_RANGE"))
    for row in rows:
        assert row["status"] == "ok" and row["attempts"] == "1" and row["scene"] == "empty", row
        run = out / "runs" / row["run_id"]
        assert (out / row["bag"] / "metadata.yaml").is_file() and (run / "metrics.json").is_file()
        assert (out / row["dataset"] / "dataset.yaml").is_file()
        # the mission leaves its plots to the post-processing (BATCH_NODE_DEFAULTS), which draws them
        assert all((run / name).stat().st_size > 10_000 for name in ("top_view.png", "xy_over_time.png"))
        imu_rows = (out / row["dataset"] / "sensors" / "drone1" / "imu" / "data.csv").read_text().count("\n") - 1
        assert 4 <= float(row["sim_s"]) < 40 and imu_rows >= 200 * float(row["sim_s"]) * 0.5
        assert 0 < float(row["hausdorff_m"]) < 0.5 and float(row["rms_cross_track_m"]) <= float(row["hausdorff_m"])
        # Lockstep waits only for motor commands today: a node that falls more than its 200-deep reliable
        # history behind (a loaded machine) loses samples, and the digest's gap count shows them.
        assert int(row["messages"]) > 1000 and 0 <= int(row["drops"]) < 0.01 * int(row["messages"])
        assert len(row["bag_digest"]) == 64
        assert int(row["domain_id"]) in allowed
        # CPU per simulated second, all in (start-up, flight, stop, post-processing) and in flight
        assert 0 < float(row["flight_cpu_per_sim_s"]) < float(row["cpu_per_sim_s"]) < 50, row
        assert float(row["cpu_s"]) == pytest.approx(float(row["cpu_per_sim_s"]) * float(row["sim_s"]), rel=0.01)
        entry = json.loads((run / "result.json").read_text())
        assert entry["parameters"]["vehicle"] == row["vehicle"] and "/drone1/imu/data" in entry["topics"]
    # the controller flies on ground truth: sensor seeds leave the flight bit-for-bit the same in lockstep
    for vehicle in ("quad_x", "hexa_x"):
        same = [tuple(r[m] for m in METRICS) for r in rows if r["vehicle"] == vehicle]
        assert same[0] == same[1], vehicle
    # the resumed batch flew its runs two at a time on its two workers (launches overlapped, not only a
    # launch and the post-processing of the run before)
    entries = [json.loads((out / "runs" / r["run_id"] / "result.json").read_text()) for r in rows]
    redone = sorted((e for e in entries if e["run_id"] not in four_runs["finished"]), key=lambda e: e["started_at"])
    assert len(redone) == 3 and redone[1]["started_at"] < redone[0]["launch_ended_at"], redone
    assert (out / "summary.png").stat().st_size > 10_000
    assert (out / "sweep.yaml").is_file()
    assert "CPU per simulated second: " in second.stdout and " in flight" in second.stdout, second.stdout


def test_killed_batch_leaves_nothing_running_and_resumes_without_redoing_finished_runs(four_runs):
    out, finished, second = four_runs["out"], four_runs["finished"], four_runs["second"]
    assert four_runs["orphans_gone"], four_runs["left"]
    assert len(finished) == 1, four_runs["first_output"]  # one worker: killed before the next could finish
    assert f"{len(finished)} done before" in second.stdout, second.stdout
    for run_id, (mtime_ns, text) in finished.items():
        entry = out / "runs" / run_id / "result.json"
        assert entry.stat().st_mtime_ns == mtime_ns and entry.read_text() == text
    assert len(ok_rows(out)) == 4


def test_crashing_and_hanging_runs_are_retried_then_reported(tmp_path):
    # physics.scene is only a string to the sweep check, but the physics node refuses an unknown scene:
    # a real crash at start. A hop that hovers 2 x 120 s never lands within a 4 s timeout: a real hang,
    # stopped and killed (the short hop itself now lands within 4 s of its start: ci10, 6.5x real time).
    crash = write_sweep(tmp_path, "crash", {"physics.scene": ["no_such_scene"]}, run={"timeout_s": 120, "retries": 1})
    long_hover = tmp_path / "long_hover.yaml"
    long_hover.write_text(SHORT_HOP.replace("hold_s: 0.0", "hold_s: 120.0"))
    hang = write_sweep(tmp_path, "hang", {"seed": [0]}, run={"timeout_s": 4, "retries": 1},
                       base={"mission": str(long_hover)})
    outs = {"crash": tmp_path / "crash_out", "hang": tmp_path / "hang_out"}
    batches = {name: subprocess.Popen(batch_command(sweep, outs[name]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, cwd=REPO) for name, sweep in (("crash", crash), ("hang", hang))}
    outputs = {name: batch.communicate(timeout=250)[0] for name, batch in batches.items()}
    rows = {}
    for name, out in outs.items():
        assert batches[name].returncode == 1, outputs[name]
        (row,) = read_manifest(out / "manifest.csv")
        assert row["status"] == "failed" and row["attempts"] == "2", row
        assert (out / "runs" / row["run_id"] / "logs" / "attempt-1.log").is_file()
        assert (out / row["log"]).name == "attempt-2.log" and f"log: {out / row['log']}" in outputs[name]
        assert len(json.loads((out / "runs" / row["run_id"] / "result.json").read_text())["errors"]) == 2
        assert not processes_naming(str(out)), "a stopped run left processes behind"
        rows[name] = row
    assert "launch exited with code 1" in rows["crash"]["error"]
    assert "no_such_scene" in (outs["crash"] / rows["crash"]["log"]).read_text()
    assert "no landing within 4 s" in rows["hang"]["error"]


def test_two_batches_at_once_get_distinct_domain_ids(tmp_path):
    # No dataset or plots: what is checked here is the runs' domains and bags (the four-run sweep checks those).
    sweep = write_sweep(tmp_path, "one", {"seed": [0]}, run={"export": False, "plots": False})
    outs = [tmp_path / "a", tmp_path / "b"]
    batches = [subprocess.Popen(batch_command(sweep, out, "--workers", "1"), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, cwd=REPO) for out in outs]
    outputs = [b.communicate(timeout=280)[0] for b in batches]
    assert [b.returncode for b in batches] == [0, 0], outputs
    entries = [json.loads(next((out / "runs").glob("*/result.json")).read_text()) for out in outs]
    assert entries[0]["domain_id"] != entries[1]["domain_id"]
    assert max(e["started_at"] for e in entries) < min(e["launch_ended_at"] for e in entries), "the runs did not overlap"
    # sharing a domain would have mixed the two lockstep graphs; apart, they fly the same flight, and every
    # message both recorders caught (they may start at different sim times) is byte-for-byte the same
    assert [entries[0][m] for m in METRICS] == [entries[1][m] for m in METRICS]
    shared = shared_messages(outs[0] / entries[0]["bag"], outs[1] / entries[1]["bag"])
    for topic in ("/clock", "/drone1/ground_truth/odom", "/drone1/imu/data", "/drone1/cmd_vel"):
        fewest = min(e["topics"][topic]["count"] for e in entries)
        assert shared[topic].identical == shared[topic].shared > fewest / 2, (topic, shared[topic], fewest)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


#: Ray's token authentication (on by default for `ray start` since 2.5x) is left off on this loopback-only cluster.
RAY_ENV = {**os.environ, "RAY_AUTH_MODE": "disabled"}


@pytest.fixture
def ray_cluster(tmp_path):
    """A one-node Ray cluster on 127.0.0.1 (2 CPUs, 100 MB object store, no dashboard), stopped after."""
    pytest.importorskip("ray")
    from aerial_sim.batch.processes import session_processes

    port = free_port()
    head = subprocess.Popen(
        [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
         f"--port={port}", "--num-cpus=2", "--object-store-memory=100000000", "--include-dashboard=false",
         "--disable-usage-stats", f"--temp-dir=/tmp/rt{os.getpid()}"],
        stdout=open(tmp_path / "ray.log", "w"), stderr=subprocess.STDOUT, start_new_session=True, env=RAY_ENV,
    )

    def listening() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        assert wait_until(listening, 60), (tmp_path / "ray.log").read_text()
        yield f"127.0.0.1:{port}"
    finally:
        # A clean stop (SIGTERM) takes Ray half a minute, longer than any grace worth giving (5 s never
        # sufficed, 6 s of teardown): kill the cluster's session at once.
        os.killpg(head.pid, signal.SIGKILL)
        head.wait()
        for pid in session_processes(head.pid, ""):
            os.kill(pid, signal.SIGKILL)
        assert wait_until(lambda: not session_processes(head.pid, ""), 20), "Ray processes outlived the cluster"


def test_ray_cluster_gives_the_same_metrics_as_the_local_backend(ray_cluster, four_runs, tmp_path):
    # The dataset is checked here (exported on the Ray worker), the plots by the four-run sweep: none drawn.
    sweep = write_sweep(tmp_path, "two", {"vehicle": ["quad_x", "hexa_x"], "seed": [1]}, run={"plots": False})
    out = tmp_path / "ray_out"
    result = subprocess.run(batch_command(sweep, out, "--backend", "ray", "--address", ray_cluster), capture_output=True,
                            text=True, cwd=REPO, timeout=280, env=RAY_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    local = {(row["vehicle"], row["seed"]): row for row in read_manifest(four_runs["out"] / "manifest.csv")}
    remote = read_manifest(out / "manifest.csv")
    assert [row["status"] for row in remote] == ["ok", "ok"]
    for row in remote:
        assert [row[m] for m in METRICS] == [local[row["vehicle"], row["seed"]][m] for m in METRICS], row["vehicle"]
        assert (out / row["dataset"] / "dataset.yaml").is_file()
    assert not processes_naming(str(out))
