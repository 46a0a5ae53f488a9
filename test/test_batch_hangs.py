"""A hang anywhere in a batch run is noticed, the stuck processes' Python stacks land in the run's log,
and the run is retried; the manifest records each run's CPU. Stand-in runs (no ROS): a launch whose
'lander' writes metrics.json and ends it, beside a process that ignores SIGINT and SIGTERM."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

from conftest import REPO

from aerial_sim.batch.hangs import HangWatch
from aerial_sim.batch.manifest import read_manifest

LAUNCH = REPO / "test" / "data" / "launch" / "hang_after_landing.launch.yaml"


def test_a_process_ignoring_sigterm_after_landing_is_dumped_stopped_and_retried(tmp_path):
    sweep = tmp_path / "hang.yaml"
    sweep.write_text(yaml.safe_dump({
        "name": "hang", "launch": str(LAUNCH), "base": {"python": sys.executable}, "grid": {"seed": [0]},
        "run": {"timeout_s": 120, "retries": 1, "stop_timeout_s": 3, "stall_timeout_s": 60, "stop_grace_s": 2,
                "export": False},
    }))
    out = tmp_path / "out"
    began = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "aerial_sim", "batch", str(sweep), "--out", str(out), "--no-progress"],
                            capture_output=True, text=True, cwd=REPO, timeout=200)
    took = time.monotonic() - began
    (row,) = read_manifest(out / "manifest.csv")
    entry = json.loads((out / "runs" / row["run_id"] / "result.json").read_text())
    first_log = (out / "runs" / row["run_id"] / "logs" / "attempt-1.log").read_text()
    # attempt 1: the hang after landing was noticed within seconds, not after the launcher's 300 s
    assert entry["errors"][0].startswith("attempt 1: hung: still running"), entry["errors"]
    assert took < 100, took
    # ... with the stubborn process's Python stack (and the launcher's) in the log
    assert "stuck_in_a_loop" in first_log and "stand_in_run.py stubborn" in first_log, first_log[-3000:]
    assert "aerial_sim launch" in first_log or "aerial_sim/__main__" in first_log or "-m aerial_sim launch" in first_log
    # ... and was retried: attempt 2 stopped cleanly (it then fails post-processing: a stand-in has no bag)
    assert row["attempts"] == "2" and (out / "runs" / row["run_id"] / "logs" / "attempt-2.log").is_file()
    assert "hung" not in entry["errors"][1]
    # the manifest records the run's CPU (every attempt, all in)
    assert float(row["cpu_s"]) > 0.05 and "cpu_per_sim_s" in row and "flight_cpu_per_sim_s" in row
    assert result.returncode == 1, result.stdout + result.stderr


def test_hang_watch_tells_a_stalled_folder_from_a_growing_one(tmp_path):
    now = [0.0]
    watch = HangWatch(tmp_path, tmp_path / "metrics.json", stall_timeout_s=10, stop_timeout_s=5, clock=lambda: now[0])
    log = tmp_path / "log.txt"
    for second in range(30):  # a run that keeps writing is never hung
        now[0] = float(second)
        log.write_text("x" * second)
        assert watch.check() == ""
    for second in range(30, 45):  # then nothing for 15 s
        now[0] = float(second)
        why = watch.check()
    assert why.startswith("hung: nothing written in the run folder for 1")
    (tmp_path / "metrics.json").write_text("{}")  # landed: must end within 5 s, however busy
    for second in range(45, 52):
        now[0] = float(second)
        log.write_text("y" * second)
        why = watch.check()
    assert why.startswith("hung: still running 6 s after landing")
