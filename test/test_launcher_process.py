"""The launcher across processes: a demo talker found on AMENT_PREFIX_PATH, started, heard, stopped.

The talker (test/data/launch/demo_talker.py) is installed as ``lib/demo_pkg/talker``
in a temporary prefix, run by this interpreter through its shebang, as
``ros2 launch`` would find a package's executable.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, requires_ros, spin_until

pytestmark = [requires_ros, pytest.mark.ros]

DATA = Path(__file__).parent / "data" / "launch"


@pytest.fixture
def demo_prefix(tmp_path, monkeypatch):
    """An AMENT_PREFIX_PATH prefix (inherited by the launcher) with executable lib/demo_pkg/talker."""
    prefix = tmp_path / "prefix"
    executable = prefix / "lib" / "demo_pkg" / "talker"
    executable.parent.mkdir(parents=True)
    executable.write_text(f"#!{sys.executable}\n" + (DATA / "demo_talker.py").read_text())
    executable.chmod(0o755)
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(prefix))
    monkeypatch.setenv("ROS_LOG_DIR", str(tmp_path / "ros_log"))
    return prefix


def run_launch(*args: str, timeout_s: float = 30.0) -> tuple[int, str, str, float]:
    """Run ``aerial_sim launch`` to completion; returns (code, stdout, stderr, wall seconds)."""
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "aerial_sim", "launch", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=REPO,
    )
    return done.returncode, done.stdout, done.stderr, time.monotonic() - start


def test_launched_talker_is_heard_listed_by_topics_and_stopped_by_sigint(demo_prefix, launch, ros_node):
    from std_msgs.msg import String

    graph = launch(str(DATA / "talker.launch.yaml"), "greeting:=hi_from_test", "rate_hz:=20.0")
    heard: list[str] = []
    ros_node.create_subscription(String, "/demo/chatter_remapped", lambda m: heard.append(m.data), 10)
    # Namespace, remap and an inline parameter given on the command line all reached the process.
    assert spin_until(ros_node, lambda: len(heard) >= 3, timeout_s=20), graph.output()
    assert heard[-1].startswith("hi_from_test "), heard

    listing = subprocess.Popen(
        [sys.executable, "-m", "aerial_sim", "topics", "--namespace", "demo", "--discovery", "2", "--duration", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    # Meanwhile the talker's own rate, from its message counter: a timer's 20 Hz is what it asks for; on a
    # loaded machine it publishes fewer (ci8 at load 18: 12.4 Hz listed), and the listing must say so.
    first, began = int(heard[-1].split()[-1]), time.monotonic()
    spin_until(ros_node, lambda: listing.poll() is not None, timeout_s=30)
    talker_hz = (int(heard[-1].split()[-1]) - first) / (time.monotonic() - began)
    output = listing.communicate(timeout=10)[0]
    assert listing.returncode == 0, output
    row = re.search(r"^/demo/chatter_remapped\s+std_msgs/msg/String\s+(\d+)\s+([\d.]+)\s*$", output, re.M)
    assert row, output
    assert int(row.group(1)) == 1
    # heard over the listing's last 2 s, against the talker's mean over the whole listing (2 s of discovery too)
    assert 5.0 < float(row.group(2)) <= 25.0 and abs(float(row.group(2)) - talker_hz) < 0.3 * talker_hz + 1.0, \
        (talker_hz, output)

    code = graph.stop()
    output = graph.log_path.read_text()  # stop() closed the fixture's handle on it
    assert code == 0, output
    assert "[talker] talker ready as /demo/talker on /demo/chatter_remapped" in output
    assert "[talker] talker stopped cleanly" in output  # SIGINT reached it: a clean rclpy shutdown


def test_a_launch_that_outlasts_the_stop_timeout_leaves_no_process_behind(demo_prefix, launch):
    """The tests' LaunchedGraph.stop: SIGINT, then after ``timeout_s`` SIGKILL to the whole launch. A node
    still at its stop work is killed too, though the launcher put it in a process group of its own (a
    SIGKILL to the launcher's group alone left it running on as an orphan)."""
    graph = launch(str(DATA / "stubborn_stop.launch.yaml"))
    deadline = time.monotonic() + 20.0
    while "[stubborn] waiting for SIGINT" not in graph.output() and time.monotonic() < deadline:
        time.sleep(0.1)
    pid = int(re.search(r"process started with pid \[(\d+)\]: stubborn", graph.output()).group(1))
    try:
        graph.stop(timeout_s=1.0)
        assert "[stubborn] stopping slowly" in graph.output()  # it had the launcher's SIGINT
        deadline = time.monotonic() + 5.0  # SIGKILL is delivered at once; its reaper may take a moment
        while running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(pid), "the node outlived its launch"
    finally:
        if running(pid):
            os.kill(pid, signal.SIGKILL)


def running(pid: int) -> bool:
    """Process ``pid`` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_failing_node_is_reported_with_its_last_lines_and_the_rest_runs_on(demo_prefix):
    """ros2 launch's rule: without on_exit, a dead process is reported and the others keep running;
    the launch exits 0 (launch LaunchService.run_async: only an exception in launch itself makes it 1)."""
    code, out, err, elapsed = run_launch(str(DATA / "failing.launch.yaml"))
    assert code == 0, out + err
    assert re.search(r"process has died \[pid \d+, exit code 1\]: crasher \(demo_pkg/talker\)", err), err
    assert "[crasher] boom: simulated failure" in err
    assert "[crasher] talker: about to fail" in err  # stdout lines are in the report too
    assert "[steady] done" in out  # ran to its own end, 2.5 s after the failure
    assert "interrupted" not in out
    assert 4 <= elapsed < 15, elapsed


def test_strict_makes_a_failed_process_exit_1(demo_prefix):
    """--strict (an aerial_sim extension, used by aerial_sim batch): the same run, exit status 1."""
    code, out, err, _ = run_launch("--strict", str(DATA / "failing.launch.yaml"), "steady_s:=2")
    assert code == 1, out + err
    assert "process has died" in err and "[steady] done" in out


def test_a_failing_node_with_on_exit_shutdown_stops_the_launch(demo_prefix):
    code, out, err, elapsed = run_launch(str(DATA / "failing.launch.yaml"), "required:=true", "steady_s:=60")
    assert code == 1, out + err  # a required process failed (ros2 launch exits 0 here: doc/reliability.md)
    assert "process[crasher] was required: shutting down launched system" in out
    assert "[steady] interrupted by SIGINT" in out  # the other process was stopped, not left behind
    assert elapsed < 15, elapsed
    code, out, err, _ = run_launch("--strict", str(DATA / "failing.launch.yaml"), "required:=true", "steady_s:=60")
    assert code == 1, out + err


def test_on_exit_shutdown_ends_the_launch_cleanly_and_other_exits_are_only_reported(demo_prefix):
    code, out, err, elapsed = run_launch(str(DATA / "mission.launch.yaml"))
    assert code == 0, out + err
    finished_quick = out.index("process has finished cleanly")
    assert "quick" in out[finished_quick : out.index("\n", finished_quick)]
    assert out.index("[mission] done") > finished_quick  # the launch went on after 'quick' finished
    assert "process[mission] was required: shutting down launched system" in out
    assert "[steady] interrupted by SIGINT" in out
    assert elapsed < 15, elapsed


def test_stop_work_gets_each_process_own_sigterm_timeout(demo_prefix):
    """sigterm_timeout/sigkill_timeout as launch ExecuteLocal applies them: SIGTERM that many seconds
    after SIGINT, SIGKILL sigkill_timeout later, per process."""
    code, out, err, elapsed = run_launch(str(DATA / "slow_stop.launch.yaml"), "slow_s:=2")
    assert code == 0, out + err
    assert "[patient] stopped after slow work" in out  # 2 s of work inside its 4 s
    assert "[hasty] stopping slowly" in out and "[hasty] stopped after slow work" not in out
    assert "process[hasty] failed to terminate after SIGINT, sending SIGTERM" in err
    assert re.search(r"process has died \[pid \d+, killed by SIGTERM\]: hasty", err), err
    assert "process[patient] failed to terminate" not in err
    assert 3 <= elapsed < 15, elapsed


def test_strict_exits_3_when_a_process_failed_only_while_being_stopped(demo_prefix):
    """A process that dies of the escalating SIGTERM after the launch ran fine: --strict exits 3, not 1,
    and aerial_sim batch keeps such a run (its work was done) unless that process was the recorder."""
    from aerial_sim.batch.execute import judge_stop_failures

    code, out, err, _ = run_launch("--strict", str(DATA / "slow_stop.launch.yaml"), "slow_s:=2")
    assert code == 3, out + err
    warnings, fatal = judge_stop_failures(out + err)
    assert warnings == ["hasty (demo_pkg/talker) killed by SIGTERM while stopping"] and fatal == "", err
    _, fatal = judge_stop_failures(err.replace("(demo_pkg/talker)", "(aerial_sim/recorder)"))
    assert fatal == "hasty (aerial_sim/recorder) killed by SIGTERM while stopping"
    # A recorder that died after its bag was closed (its teardown watchdog, issue 34) lost nothing.
    closed = err.replace("(demo_pkg/talker)", "(aerial_sim/recorder)") + "[hasty] [recorder] bag closed: bag (9 msgs)\n"
    assert judge_stop_failures(closed)[1] == ""


def fast_dds_segments() -> set[str]:
    """The lock files of the Fast DDS shared-memory segments in /dev/shm (``fastdds_<16 hex>_el``)."""
    return {path.name for path in Path("/dev/shm").glob("fastdds_*_el") if not path.name.startswith("fastdds_port")}


def segments_open_by(pid: int | str = "self") -> set[str]:
    """The segment lock files process ``pid`` holds open: its live participant's (a parallel test worker's
    or another program's segments, made meanwhile, are not among them)."""
    held = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            held.add(os.path.basename(os.readlink(f"/proc/{pid}/fd/{fd}")))
        except OSError:  # closed meanwhile
            pass
    return held & fast_dds_segments()


def test_a_process_killed_by_sigkill_leaves_no_shared_memory_behind(demo_prefix, launch, ros_node):
    """A killed process cannot remove its 16 MiB Fast DDS segment from /dev/shm (RAM until removed):
    the launcher removes every dead participant's when the launch ends, and nothing of a live one."""
    from std_msgs.msg import String

    graph = launch(str(DATA / "talker.launch.yaml"))
    heard: list[str] = []
    ros_node.create_subscription(String, "/demo/chatter_remapped", lambda m: heard.append(m.data), 10)
    assert spin_until(ros_node, lambda: len(heard) >= 3, timeout_s=20), graph.output()
    mine = segments_open_by("self")
    assert mine, "the test's own participant has no segment in /dev/shm"
    pid = int(re.search(r"process started with pid \[(\d+)\]: talker", graph.output()).group(1))
    talkers = segments_open_by(pid)
    assert talkers, "the talker has no segment in /dev/shm"
    time.sleep(2.5)  # older than MIN_AGE_S: a participant that young may still be starting up
    os.kill(pid, signal.SIGKILL)

    deadline = time.monotonic() + 15.0
    while graph.alive() and time.monotonic() < deadline:  # its only process died: the launch ends
        time.sleep(0.1)
    output = graph.output()
    assert not graph.alive(), output
    assert re.search(r"process has died \[pid \d+, killed by SIGKILL\]: talker", output), output
    assert re.search(r"removed the shared-memory segments of [1-9]\d* Fast DDS participant", output), output
    left = fast_dds_segments()
    assert not talkers & left, "the killed talker's segment is still in /dev/shm"
    assert mine <= left, "a live participant's segment was removed"


def test_a_sigint_during_start_up_stops_a_launcher_started_with_sigint_ignored(demo_prefix):
    """Issue 34: a script's background job starts with SIGINT ignored (POSIX shells do so); a SIGINT that
    reached the launcher while it still read its launch file was lost, and the graph ran on. Now it is
    held until the launcher's handler is in place: the launch stops, its talker with it."""

    launcher = subprocess.Popen(
        [sys.executable, "-m", "aerial_sim", "launch", str(DATA / "talker.launch.yaml")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        # Sent while the launcher reads its launch file: once it holds SIGINT, before its handler is in place.
        deadline = time.monotonic() + 10.0
        while not _blocked_signals(launcher.pid) & (1 << (signal.SIGINT - 1)) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert _blocked_signals(launcher.pid) & (1 << (signal.SIGINT - 1)), "the launcher never held SIGINT"
        launcher.send_signal(signal.SIGINT)
        code = launcher.wait(timeout=30.0)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    output = launcher.stdout.read()
    assert code == 0, output  # stopped (its demo talker, no aerial_sim node, dies of a SIGINT while it starts)


def _blocked_signals(pid: int) -> int:
    """The signal mask (SigBlk) of process ``pid``'s main thread, 0 once it has exited."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigBlk:")), 16)
