"""Pure tests of the batch core: sweep files, node parameters, manifest and resume, retry policy,
domain-id allocation, bag content digests (no ROS graph; milliseconds each)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from aerial_sim.batch.domains import (
    DomainPool,
    DomainRangeError,
    NoDomainAvailable,
    bound_udp_ports,
    domain_ports,
    parse_domain_range,
)
from aerial_sim.batch.execute import Attempt, should_retry
from aerial_sim.batch.manifest import (
    FAILED,
    OK,
    is_finished,
    manifest_rows,
    pending_runs,
    read_manifest,
    write_manifest,
    write_result,
)
from aerial_sim.batch.sweep import RunOptions, SweepError, expand_sweep, load_sweep
from aerial_sim.recording.bag import BagWriter
from aerial_sim.recording.digest import SharedTopic, bag_content, missing_samples, shared_messages

SRC = Path(__file__).resolve().parents[1] / "src"
REPO = SRC.parent


def sweep_of(text: str):
    return expand_sweep(yaml.safe_load(textwrap.dedent(text)), where="t.yaml")


# -- sweep files -------------------------------------------------------------------------------


def test_grid_random_and_repeat_expand_in_order_with_stable_ids():
    text = """
        base: {scene: empty, mission: hop_1m}
        grid: {vehicle: [quad_x, hexa_x], use_rotor_drag: [false, true]}
        random: {samples: 3, seed: 5, axes: {physics.wind_enu_m_s: {uniform: [[-3, -3, 0], [3, 3, 0]]}, seed: {integers: [0, 9]}}}
        repeat: 2
    """
    sweep = sweep_of(text)
    assert len(sweep.runs) == 2 * 2 * 3 * 2
    first = sweep.runs[0].parameters
    assert first["vehicle"] == "quad_x" and first["use_rotor_drag"] is False and first["scene"] == "empty"
    assert sweep.runs[-1].parameters["vehicle"] == "hexa_x" and sweep.runs[-1].parameters["use_rotor_drag"] is True
    winds = [tuple(r.parameters["physics.wind_enu_m_s"]) for r in sweep.runs[:6:2]]
    assert len(set(winds)) == 3 and all(-3 <= w[0] <= 3 and w[2] == 0.0 for w in winds)
    assert all(0 <= r.parameters["seed"] <= 9 for r in sweep.runs)
    # repeats share parameters but not ids; the same file gives the same runs (seeded draws)
    assert sweep.runs[0].parameters == sweep.runs[1].parameters and sweep.runs[0].run_id != sweep.runs[1].run_id
    again = sweep_of(text)
    assert [r.run_id for r in again.runs] == [r.run_id for r in sweep.runs]
    assert sweep.axes == ("vehicle", "use_rotor_drag", "physics.wind_enu_m_s", "seed")
    assert sweep.runs[0].launch_arguments["use_rotor_drag"] == "false"
    assert sweep.runs[0].node_parameters == {"physics": {"wind_enu_m_s": list(winds[0])}}


def test_shipped_sweeps_load():
    for path in sorted((REPO / "config" / "sweeps").glob("*.yaml")):
        sweep = load_sweep(path)
        assert sweep.runs, path


def test_node_parameters_are_converted_to_their_declared_types():
    sweep = sweep_of("""
        base: {mission: hop_1m, physics.wind_enu_m_s: [3, 0, 0], camera.width: 320, imu.preset: mpu6000,
               depth_noise.stereo_geometry: true, gps.home.latitude: 47}
    """)
    parameters = sweep.runs[0].parameters
    assert parameters["physics.wind_enu_m_s"] == [3.0, 0.0, 0.0] and isinstance(parameters["physics.wind_enu_m_s"][0], float)
    assert parameters["camera.width"] == 320 and parameters["gps.home.latitude"] == 47.0


@pytest.mark.parametrize(
    "text, message",
    [
        ("grid: {scen: [empty]}", r"grid\.scen: not an argument of sim\.launch\.yaml"),
        ("base: {lockstep: false}", r"base\.lockstep: set by aerial_sim batch"),
        ("base: {run_dir: /tmp/x}", r"base\.run_dir: set by aerial_sim batch"),
        ("base: {use_gps: maybe}", r"base\.use_gps: expected true or false"),
        ("base: {seed: -1}", r"base\.seed: expected an integer >= 0"),
        ("grid: {mission: [square_5m, nope]}", r"grid\.mission\[1\]: mission 'nope'"),
        ("base: {mission: none}", r"base\.mission: a batch run needs a mission that lands"),
        ("grid: {vehicle: [octo]}", r"grid\.vehicle\[0\]: vehicle 'octo'"),
        ("grid: {scene: [moon]}", r"grid\.scene\[0\]: scene 'moon'"),
        ("grid: {seed: []}", r"grid\.seed: expected a non-empty list"),
        ("base: {physics.wind: [1, 0, 0]}", r"physics\.wind: unknown parameter of node 'physics'"),
        ("base: {warp.speed: 9}", r"warp: no node of that name"),
        ("base: {camera.width: wide}", r"camera.*width"),
        ("base: {camera.lockstep: true}", r"camera\.lockstep: set from the launch file"),
        ("base: {seed: 1}\ngrid: {seed: [1, 2]}", r"seed: set in base and varied"),
        ("random: {samples: 2, axes: {seed: {normal: [0, 1]}}}", r"random\.axes\.seed: expected one of"),
        ("random: {samples: 0, axes: {seed: {integers: [0, 1]}}}", r"random\.samples"),
        ("random: {samples: 2, axes: {seed: {integers: [5, 1]}}}", r"random\.axes\.seed\.integers"),
        ("run: {timeout_s: 0}", r"timeout_s must be a positive number"),
        ("run: {retry: 3}", r"run\.retry: unknown parameter"),
        ("grids: {seed: [1]}", r"t\.yaml: grids: unknown key"),
    ],
)
def test_bad_sweeps_fail_naming_the_key(text, message):
    with pytest.raises(SweepError, match=message):
        sweep_of("base: {mission: hop_1m}\n" + text if "mission" not in text else text)


def test_missing_sweep_file_lists_the_shipped_ones(tmp_path):
    with pytest.raises(SweepError, match="file not found .*available: .*smoke"):
        load_sweep("no_such_sweep")
    bad = tmp_path / "bad.yaml"
    bad.write_text("grid: {seed: [1, 2]\n")
    with pytest.raises(SweepError, match="bad.yaml: not valid YAML"):
        load_sweep(bad)


def test_params_file_keys_each_node_by_name(tmp_path):
    from aerial_sim.batch.nodeparams import write_params_file

    path = write_params_file({"physics": {"wind_enu_m_s": [3.0, 0.0, 0.0]}, "camera": {"width": 320}}, tmp_path / "p.yaml")
    document = yaml.safe_load(path.read_text())
    assert document == {"/**/physics": {"ros__parameters": {"wind_enu_m_s": [3.0, 0.0, 0.0]}},
                        "/**/camera": {"ros__parameters": {"width": 320}}}


def test_sweep_core_imports_no_rclpy():
    """Sweep parsing (launch arguments only), manifest, domains and the local backend stay ROS-free and Ray-free."""
    code = textwrap.dedent("""
        import sys
        from aerial_sim.batch import sweep, manifest, domains, local, orchestrate, execute
        sweep.load_sweep('smoke')
        assert 'rclpy' not in sys.modules and 'ray' not in sys.modules, [m for m in ('rclpy', 'ray') if m in sys.modules]
    """)
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(SRC)})


# -- manifest and resume -----------------------------------------------------------------------


def test_only_runs_with_an_ok_entry_for_the_same_parameters_are_finished(tmp_path):
    sweep = sweep_of("base: {mission: hop_1m}\ngrid: {seed: [0, 1, 2]}")
    first, second, third = sweep.runs
    write_result(tmp_path, first, {"run_id": first.run_id, "parameters": first.parameters, "status": OK, "attempts": 1,
                                   "hausdorff_m": 0.08, "bag": f"runs/{first.run_id}/bag"})
    write_result(tmp_path, second, {"run_id": second.run_id, "parameters": second.parameters, "status": FAILED,
                                    "attempts": 3, "error": "timeout"})
    assert is_finished(tmp_path, first) and not is_finished(tmp_path, second) and not is_finished(tmp_path, third)
    assert pending_runs(tmp_path, sweep) == [second, third]
    # an entry for other parameters (the sweep file was edited) does not count
    write_result(tmp_path, third, {"parameters": {"seed": 99}, "status": OK})
    assert not is_finished(tmp_path, third)
    rows = read_manifest(write_manifest(tmp_path, sweep))
    assert [r["status"] for r in rows] == ["ok", "failed", "pending"]
    assert rows[0]["seed"] == "0" and rows[0]["hausdorff_m"] == "0.08" and rows[1]["attempts"] == "3"
    assert not [p for p in tmp_path.rglob(".*") if p.is_file()], "temporary files left behind"


def test_a_torn_entry_means_the_run_is_redone(tmp_path):
    sweep = sweep_of("base: {mission: hop_1m}")
    (run,) = sweep.runs
    entry = tmp_path / "runs" / run.run_id / "result.json"
    entry.parent.mkdir(parents=True)
    entry.write_text('{"status": "ok", "parame')
    assert pending_runs(tmp_path, sweep) == [run]
    assert manifest_rows(tmp_path, sweep)[0]["status"] == "pending"


def test_retry_policy():
    options = RunOptions(retries=2)
    crash = Attempt(False, "crashed", "exit 1", Path("log"))
    assert should_retry(crash, 1, options) and should_retry(crash, 2, options) and not should_retry(crash, 3, options)
    assert not should_retry(Attempt(True, "ok", "", Path("log")), 1, options)
    assert not should_retry(Attempt(False, "interrupted", "", Path("log")), 1, options)
    assert not should_retry(crash, 1, RunOptions(retries=0))


# -- domain ids --------------------------------------------------------------------------------


def test_domain_range_parsing():
    assert parse_domain_range("60-79") == range(60, 80)
    assert parse_domain_range("7") == range(7, 8)
    assert parse_domain_range(None) == range(1, 102)
    for bad in ("79-60", "0-300", "a-b", "-5"):
        with pytest.raises(DomainRangeError, match="AERIAL_SIM_DOMAIN_RANGE"):
            parse_domain_range(bad)


def test_a_domain_range_above_101_is_used_with_one_warning_line_saying_why(capsys):
    assert parse_domain_range("60-101") == range(60, 102) and capsys.readouterr().err == ""
    assert parse_domain_range("180-185") == range(180, 186)
    assert parse_domain_range("180-185") == range(180, 186)  # said once, not at every lease
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "AERIAL_SIM_DOMAIN_RANGE=180-185" in lines[0] and "ephemeral port range" in lines[0]


def test_held_ids_are_never_handed_out_twice_and_free_again_on_release(tmp_path):
    pool = DomainPool(range(60, 63), tmp_path, in_use=lambda d: False)
    leases = [pool.acquire(timeout_s=0) for _ in range(3)]
    assert sorted(lease.domain_id for lease in leases) == [60, 61, 62]
    with pytest.raises(NoDomainAvailable, match="60-62"):
        DomainPool(range(60, 63), tmp_path, in_use=lambda d: False).acquire(timeout_s=0.3, poll_s=0.05)
    leases[1].release()
    assert pool.acquire(timeout_s=0).domain_id == leases[1].domain_id


def test_ids_whose_dds_ports_are_bound_elsewhere_are_skipped(tmp_path):
    pool = DomainPool(range(60, 64), tmp_path, in_use=lambda d: d != 62)
    assert pool.acquire(timeout_s=0).domain_id == 62
    assert domain_ports(0)[0] == 7400 and domain_ports(60)[0] == 7400 + 250 * 60 and len(domain_ports(1)) == 250
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        assert sock.getsockname()[1] in bound_udp_ports()


def test_two_processes_hold_distinct_ids(tmp_path):
    """Three processes (batches) allocating at once from a 2-id range: one id each for two, none for the third."""
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from aerial_sim.batch.domains import DomainPool, NoDomainAvailable
        pool = DomainPool(range(70, 72), Path({str(tmp_path)!r}), in_use=lambda d: False)
        try:
            lease = pool.acquire(timeout_s=1.0, poll_s=0.05)
        except NoDomainAvailable:
            print('none', flush=True); sys.exit(0)
        print(lease.domain_id, flush=True)
        sys.stdin.read()  # hold the id until the test has every answer
    """)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    processes = [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=env) for _ in range(3)]
    try:
        answers = sorted(p.stdout.readline().strip() for p in processes)
    finally:
        for p in processes:
            p.stdin.close()
            p.wait(timeout=30)
    assert answers == ["70", "71", "none"]


# -- bag content digest and drops --------------------------------------------------------------


def test_missing_samples_counts_gaps_but_not_a_late_start():
    period = 4_000_000
    stamps = [k * period for k in range(100, 200)]
    assert missing_samples(stamps) == 0
    assert missing_samples([s for s in stamps if not 150 <= s // period < 153]) == 3
    assert missing_samples(stamps + stamps[:10]) == 0  # re-sends
    assert missing_samples(stamps[:5]) == 0


def test_digest_ignores_receive_times_order_and_resends_but_not_content(tmp_path):
    from test_record_bag import cdr_odometry

    topic = "/drone1/ground_truth/odom"

    def write(name, messages):
        with BagWriter(tmp_path / name) as writer:
            writer.add_topic(topic, "nav_msgs/msg/Odometry")
            writer.add_topic("/rosout", "rcl_interfaces/msg/Log")
            for receive_ns, (t, x) in messages:
                writer.write(topic, cdr_odometry(t, x), receive_ns)
        return bag_content(tmp_path / name)

    flight = [(0.004 * k, 0.1 * k) for k in range(50)]
    reference = write("a", [(k * 1000, m) for k, m in enumerate(flight)])
    shuffled = write("b", [(k * 7777 + 5, m) for k, m in enumerate([flight[0], *reversed(flight), flight[-1]])])
    changed = write("c", [(k * 1000, (t, x + (1e-9 if k == 20 else 0.0))) for k, (t, x) in enumerate(flight)])
    gap = write("d", [(k * 1000, m) for k, m in enumerate(flight) if not 20 <= k < 25])
    assert reference.digest == shuffled.digest and reference.topics[topic].count == 50
    assert shuffled.topics[topic].count == 52 and shuffled.drops == 0
    assert changed.topics[topic].digest != reference.topics[topic].digest
    assert gap.drops == 5 and gap.topics[topic].drops == 5
    assert "/rosout" not in reference.topics
    # stamp by stamp: a later-starting bag shares the common span, a changed value shows up
    late = write("e", [(k * 1000, m) for k, m in enumerate(flight) if k >= 30])
    assert shared_messages(tmp_path / "a", tmp_path / "e")[topic] == SharedTopic(topic, 20, 20)
    assert shared_messages(tmp_path / "a", tmp_path / "c")[topic] == SharedTopic(topic, 50, 49)


def test_digest_module_reads_no_rclpy():
    tree = ast.parse((SRC / "aerial_sim" / "recording" / "digest.py").read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert "rclpy" not in imported


def test_manifest_cells_keep_vectors_as_json(tmp_path):
    sweep = sweep_of("base: {mission: hop_1m}\ngrid: {physics.wind_enu_m_s: [[1, 0, 0], [2, 0, 0]]}")
    rows = read_manifest(write_manifest(tmp_path, sweep))
    assert [json.loads(r["physics.wind_enu_m_s"]) for r in rows] == [[1.0, 0.0, 0.0], [2.0, 0.0, 0.0]]


def test_pinned_runs_get_disjoint_cores_and_the_launch_keeps_its_processes_on_them(tmp_path):
    # run.pin_cpus: each launch at once gets cores of its own; `aerial_sim launch --cpus` holds
    # every process it starts to them (the affinity a child inherits).
    from aerial_sim.batch.cores import CorePool

    pool = CorePool(cpus_per_run=1, cores=[0, 1])
    first, second = pool.acquire(), pool.acquire()
    assert {first, second} == {(0,), (1,)} and pool.acquire() == ()  # a third run shares, unpinned
    pool.release(first)
    assert pool.acquire() == first
    assert CorePool(cpus_per_run=1.5, cores=[0, 1, 2]).acquire() == (0, 1)

    probe = tmp_path / "affinity.launch.yaml"
    probe.write_text("launch:\n- executable: {cmd: "
                     f"'{sys.executable} -c \"import os; print(sorted(os.sched_getaffinity(0)))\"', "
                     "name: probe, output: screen}\n")
    core = max(os.sched_getaffinity(0))
    done = subprocess.run([sys.executable, "-m", "aerial_sim", "launch", "--cpus", str(core), str(probe)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and f"[probe] [{core}]" in done.stdout, done.stdout + done.stderr
    refused = subprocess.run([sys.executable, "-m", "aerial_sim", "launch", "--cpus", "4096", str(probe)],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--cpus: '4096' is not a set of this process's cores" in refused.stderr


def test_a_run_whose_physics_dropped_a_lockstep_participant_is_named_failed_with_the_line(tmp_path):
    from aerial_sim.batch.execute import lockstep_drop

    log = tmp_path / "attempt-1.log"
    log.write_text("[physics] [INFO] [1.0] [physics]: lockstep: starting\n"
                   "[physics] [ERROR] [2.0] [physics]: lockstep: participant dropped: /ghost held the clock at "
                   "t = 1.020 s for 20 s of wall time without a new output\n")
    assert lockstep_drop(log).startswith("lockstep: participant dropped: /ghost held the clock at t = 1.020 s")
    log.write_text("[physics] [INFO] [1.0] [physics]: lockstep: starting\n")
    assert lockstep_drop(log) == "" == lockstep_drop(tmp_path / "missing.log")


def test_the_digest_ends_with_the_run_so_a_longer_shutdown_tail_does_not_change_it(tmp_path):
    """Issue 32: identical runs' bags differ only after the disarm (how far the clock gets while the graph
    stops is wall-clock timing); the batch digests up to the end of the run, the last stamp of track.csv."""
    from test_record_bag import cdr_odometry

    from aerial_sim.batch.postprocess import run_end_ns

    topic = "/drone1/ground_truth/odom"
    runs = {}
    for name, tail in (("a", 3), ("b", 40)):
        with BagWriter(tmp_path / name / "bag") as writer:
            writer.add_topic(topic, "nav_msgs/msg/Odometry")
            for k in range(50 + tail):
                writer.write(topic, cdr_odometry(0.004 * k, 0.1 * k), k * 4_000_000)
        (tmp_path / name / "track.csv").write_text("time_s,x_m\n" + "".join(f"{0.004 * k:.6f},0\n" for k in range(50)))
        runs[name] = run_end_ns(tmp_path / name)
    assert runs["a"] == runs["b"] == round(0.004 * 49 * 1e9)
    whole = [bag_content(tmp_path / name) for name in "ab"]
    ended = [bag_content(tmp_path / name, until_ns=runs[name]) for name in "ab"]
    assert whole[0].digest != whole[1].digest
    assert ended[0].digest == ended[1].digest and ended[0].topics[topic].count == 50
    assert run_end_ns(tmp_path / "no_such_run") is None


def test_the_digest_ignores_unwritten_marker_padding_and_unstamped_arrivals(tmp_path):
    """Issue 32: two identical lockstep runs' MarkerArrays differed only in the padding after a Marker's
    ``frame_locked`` (the C serializer leaves it unwritten), and an unstamped topic's messages fall before or
    after the end of the run by arrival order; neither may change the batch digest."""
    from rclpy.serialization import serialize_message
    from std_msgs.msg import Float64MultiArray
    from visualization_msgs.msg import Marker, MarkerArray

    from aerial_sim.recording.digest import message_stamp_ns

    def marker_array(locked: bool) -> bytes:
        markers = MarkerArray(markers=[Marker(id=1, frame_locked=locked)])
        markers.markers[0].header.stamp.sec = 2
        return bytes(serialize_message(markers))

    clean = marker_array(True)
    locked_at = next(i for i, (a, b) in enumerate(zip(clean, marker_array(False))) if a != b)
    dirty = bytearray(clean)
    dirty[locked_at + 1:locked_at + 4] = b"\xfe\xda\x21"  # what arrived in one of two identical runs
    assert message_stamp_ns("visualization_msgs/msg/MarkerArray", clean) == 2_000_000_000
    commands = bytes(serialize_message(Float64MultiArray(data=[0.5] * 4)))
    contents = []
    for name, markers, late_commands in (("a", clean, 0), ("b", bytes(dirty), 3)):
        with BagWriter(tmp_path / name) as writer:
            writer.add_topic("/markers", "visualization_msgs/msg/MarkerArray")
            writer.add_topic("/motor_commands", "std_msgs/msg/Float64MultiArray")
            writer.write("/markers", markers, 2_000_000_000)
            for k in range(5 + late_commands):  # logged at the newest /clock: later in run b
                writer.write("/motor_commands", commands, k * 1_000_000_000)
        contents.append(bag_content(tmp_path / name, until_ns=4_000_000_000))
    assert contents[0].topics["/markers"].digest == contents[1].topics["/markers"].digest
    assert not contents[0].topics["/motor_commands"].in_digest
    assert contents[0].digest == contents[1].digest


def test_post_processing_without_plots_writes_the_report_and_no_png(tmp_path):
    """``run.plots: false`` (the default): the run's figures, digest and recording.txt as always, none of its three
    PNGs, and matplotlib never imported (0.6 CPU s of a post-processing process)."""
    import json
    import subprocess
    import sys

    from test_record_bag import cdr_odometry

    from aerial_sim.batch.sweep import RunOptions

    assert not RunOptions().plots and RunOptions(plots=True).plots
    run = tmp_path / "run"
    with BagWriter(run / "bag") as writer:
        writer.add_topic("/drone1/ground_truth/odom", "nav_msgs/msg/Odometry")
        for k in range(50):
            writer.write("/drone1/ground_truth/odom", cdr_odometry(0.004 * k, 0.1 * k), k * 4_000_000)
    (run / "track.csv").write_text("time_s,x_m\n" + "".join(f"{0.004 * k:.6f},0\n" for k in range(50)))
    (run / "metrics.json").write_text(json.dumps({"mission": {"name": "hop"}}))
    probe = ("import runpy, sys; sys.argv = ['postprocess', sys.argv[1], '--no-plots']\n"
             "try:\n    runpy.run_module('aerial_sim.batch.postprocess', run_name='__main__')\n"
             "except SystemExit as end:\n    assert not end.code, end.code\n"
             "print('matplotlib' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe, str(run)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False"
    report = json.loads((run / "bag_report.json").read_text())
    assert report["topics"]["/drone1/ground_truth/odom"]["count"] == 50 and (run / "recording.txt").is_file()
    assert not list(run.glob("*.png"))


def small_run(folder: Path) -> Path:
    """A landed run's folder: a 50-sample odometry bag, its track and metrics."""
    import json

    from test_record_bag import cdr_odometry

    with BagWriter(folder / "bag") as writer:
        writer.add_topic("/drone1/ground_truth/odom", "nav_msgs/msg/Odometry")
        for k in range(50):
            writer.write("/drone1/ground_truth/odom", cdr_odometry(0.004 * k, 0.1 * k), k * 4_000_000)
    (folder / "track.csv").write_text("time_s,x_m\n" + "".join(f"{0.004 * k:.6f},0\n" for k in range(50)))
    (folder / "metrics.json").write_text(json.dumps({"mission": {"name": "hop"}}))
    (folder / "logs").mkdir()
    return folder


def test_post_processing_threads_start_one_and_grow_only_while_runs_wait():
    """The first runs of several warm workers land together: their post-processing goes to one thread (one kept
    process, 0.5 CPU s to start) unless a job waits ``grow_after_s`` for it; then more, up to the workers' count.
    Results and errors come back as from any executor; nothing is taken after shutdown."""
    import threading
    import time

    from aerial_sim.batch.postprocessor import PostThreads

    names: set[str] = set()

    def job(value, wait_s=0.01):
        names.add(threading.current_thread().name)
        time.sleep(wait_s)
        return value

    quick = PostThreads(4, grow_after_s=30.0)
    futures = [quick.submit(job, k) for k in range(6)]  # six landings at once, each done in 10 ms
    assert [f.result(timeout=20) for f in futures] == list(range(6))
    failing = quick.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing.result(timeout=20)
    assert quick.threads == 1 and len(names) == 1
    quick.shutdown(wait=True)
    with pytest.raises(RuntimeError):
        quick.submit(job, 0)

    slow = PostThreads(2, grow_after_s=0.2)  # jobs of 1 s: the second waits, a second thread starts; never a third
    futures = [slow.submit(job, k, 1.0) for k in range(4)]
    assert [f.result(timeout=30) for f in futures] == list(range(4))
    assert slow.threads == 2
    slow.shutdown(wait=True)


def test_the_kept_post_processor_serves_runs_in_one_process_and_survives_a_bad_bag_and_its_death(tmp_path):
    import json
    import os
    import signal

    from aerial_sim.batch.postprocessor import PostProcessor

    processor = PostProcessor(timeout_s=120)
    runs = [small_run(tmp_path / f"run{k}") for k in range(2)]
    broken = tmp_path / "broken"
    (broken / "logs").mkdir(parents=True)
    (broken / "bag").mkdir()
    (broken / "bag" / "bag_0.mcap").write_bytes(b"not an mcap file")
    try:
        ok, why, cpu_s = processor.run(runs[0], False, False, runs[0] / "logs" / "attempt-1.log")
        assert ok and why == "" and cpu_s > 0.05  # its first job: the process's start and imports too
        pid = processor.process.pid
        ok, why, _ = processor.run(broken, False, False, broken / "logs" / "attempt-1.log")
        assert not ok and "traceback in the log" in why
        assert "Traceback" in (broken / "logs" / "attempt-1.log").read_text()
        ok, _, later_cpu_s = processor.run(runs[1], False, False, runs[1] / "logs" / "attempt-1.log")
        assert ok and processor.process.pid == pid  # the same process: a bad bag failed its run only
        for run in runs:
            report = json.loads((run / "bag_report.json").read_text())
            assert report["topics"]["/drone1/ground_truth/odom"]["count"] == 50
        os.kill(pid, signal.SIGKILL)  # a process that dies: the next run gets a new one
        (runs[1] / "bag_report.json").unlink()
        ok, why, _ = processor.run(runs[1], False, False, runs[1] / "logs" / "attempt-2.log")
        assert ok or "died" in why
        if not ok:  # the job went to the dead process: the run after gets a new one
            ok, why, _ = processor.run(runs[1], False, False, runs[1] / "logs" / "attempt-3.log")
        assert ok and processor.process.pid != pid, why
    finally:
        processor.close()
    assert processor.process is None or processor.process.returncode is not None


def test_post_processing_read_topic_by_topic_gives_the_report_and_dataset_of_the_message_by_message_read(tmp_path, monkeypatch):
    """The batch's post-processing reads the bag from its MCAP file a topic at a time and exports fixed-layout topics
    from NumPy columns (aerial_sim.recording.topic_reader, cdr_columns): its report, recording.txt and every dataset
    file must be those of rosbags' read_once, message by message, byte for byte, including a topic whose layout
    changes, constants, a cell that csv must quote, a type re-serialized for its digest, ties in log time and a
    message received out of order."""
    import filecmp
    import shutil

    from builtin_interfaces.msg import Time
    from geometry_msgs.msg import Quaternion
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import Imu, NavSatFix
    from std_msgs.msg import Float64MultiArray, String
    from test_record_bag import cdr_odometry
    from visualization_msgs.msg import Marker, MarkerArray

    import aerial_sim.recording.topic_reader as topic_reader
    from aerial_sim.batch.postprocess import bag_report
    from aerial_sim.cdr.encode import encode_joint_state
    from aerial_sim.recording.reader import read_once

    def cdr(message) -> bytes:
        return bytes(serialize_message(message))

    def stamp(k: int) -> Time:
        return Time(sec=k // 100, nanosec=(k % 100) * 10_000_000)

    run = tmp_path / "a"
    topics = {"/drone1/ground_truth/odom": "nav_msgs/msg/Odometry", "/drone1/imu/data": "sensor_msgs/msg/Imu",
              "/drone1/gps/fix": "sensor_msgs/msg/NavSatFix", "/drone1/rotors": "sensor_msgs/msg/JointState",
              "/drone1/motor_commands": "std_msgs/msg/Float64MultiArray", "/note": "std_msgs/msg/String",
              "/markers": "visualization_msgs/msg/MarkerArray"}
    with BagWriter(run / "bag") as writer:
        for topic, msgtype in topics.items():
            writer.add_topic(topic, msgtype)
        for k in range(60):
            t_ns = k * 10_000_000
            writer.write("/drone1/ground_truth/odom", cdr_odometry(0.01 * k, 0.1 * k), t_ns)
            imu = Imu(orientation=Quaternion(w=1.0, x=-0.0, y=float("nan") if k == 7 else 0.0, z=1e-300 * k))
            imu.header.stamp, imu.header.frame_id = stamp(k), "drone1/imu_link"
            imu.linear_acceleration.z = 9.81 + 1e-3 * k
            writer.write("/drone1/imu/data", cdr(imu), t_ns)
            fix = NavSatFix(latitude=47.6 + 1e-7 * k, longitude=-122.3, altitude=10.0)
            fix.header.stamp, fix.header.frame_id = stamp(k), "drone1/gps_link"
            writer.write("/drone1/gps/fix", cdr(fix), t_ns)
            names = ["rotor_0", "rotor_1"] if k < 30 else ["rotor_0", "rotor_1", "rotor_2"]  # the layout changes
            rotors = encode_joint_state(t_ns, "", names, [], [100.0 + k] * len(names), [])  # rclpy's adds bytes
            writer.write("/drone1/rotors", rotors, t_ns)
            writer.write("/drone1/motor_commands", cdr(Float64MultiArray(data=[0.5, 0.25 * k, 1.0, 2.0])), t_ns)
            writer.write("/drone1/motor_commands", cdr(Float64MultiArray(data=[0.5, 0.25 * k, 1.0, 3.0])), t_ns)  # a tie
        writer.write("/note", cdr(String(data='a, "quoted" note')), 5_000_000)  # received out of log-time order
        markers = MarkerArray(markers=[Marker(id=1, frame_locked=True)])
        markers.markers[0].header.stamp = stamp(3)
        writer.write("/markers", cdr(markers), 30_000_000)
    (run / "track.csv").write_text("time_s,x_m\n" + "".join(f"{0.01 * k:.6f},0\n" for k in range(50)))
    shutil.copytree(run, tmp_path / "b")
    fast = bag_report(run, export=True, plots=False)
    assert topic_reader.read_by_topic(run, [])
    monkeypatch.setattr(topic_reader, "MAX_BYTES_HELD", 1000)
    assert not topic_reader.read_by_topic(run, [])  # too big to hold in memory (a camera run's): streamed by read_once
    monkeypatch.setattr(topic_reader, "read_by_topic", lambda path, consumers: read_once(path, consumers))
    reference = bag_report(tmp_path / "b", export=True, plots=False)
    assert fast == reference and fast["topics"]["/drone1/rotors"]["count"] == 50  # the run ends at 0.49 s
    assert (run / "recording.txt").read_text().replace(str(run), "") == \
        (tmp_path / "b" / "recording.txt").read_text().replace(str(tmp_path / "b"), "")
    sensors = [p.relative_to(run / "dataset") for p in (run / "dataset").rglob("*.csv")]
    assert len(sensors) == len(topics)
    match, mismatch, errors = filecmp.cmpfiles(run / "dataset", tmp_path / "b" / "dataset", sensors, shallow=False)
    assert not mismatch and not errors and len(match) == len(topics)
    assert '"a, ""quoted"" note"' in (run / "dataset" / "sensors" / "note.csv").read_text()


# -- the flight's CPU -----------------------------------------------------------------------------------

_FAKE_GRAPH = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    folder, log = Path(sys.argv[1]), Path(sys.argv[2])

    def burn(seconds):
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass

    (folder / "bag").mkdir()
    (folder / "bag" / "bag_0.mcap").write_bytes(b"schemas")
    time.sleep(0.3)
    (folder / "bag" / "bag_0.mcap").write_bytes(b"schemas and channels")  # the recorder subscribing
    burn(0.8)  # the rest of the start-up, the settle
    late = len(sys.argv) > 3  # the launcher relays the nodes' lines: on a loaded machine it may lag the flight
    if not late:
        with open(log, "ab") as stream:
            stream.write(b"[physics]: lockstep: starting with 6 subscribers\\n")
    burn(0.6)  # the flight
    (folder / "metrics.json").write_text("{}")
    if late:
        with open(log, "ab") as stream:
            stream.write(b"[physics]: lockstep: starting with 6 subscribers\\n")
    time.sleep(30)
""")


def fly_fake_graph(tmp_path, *late: str) -> float | None:
    """The flight CPU a :class:`_FlightCpu` polled as the batch polls books for :data:`_FAKE_GRAPH`."""
    import time

    from aerial_sim.batch.execute import METRICS_FILE, _FlightCpu

    folder, log = tmp_path / "runs" / "0000", tmp_path / "launch.log"
    folder.mkdir(parents=True)
    log.write_bytes(b"[recorder]: recording to bag\n")
    graph = subprocess.Popen([sys.executable, "-c", _FAKE_GRAPH, str(folder), str(log), *late], start_new_session=True)
    try:
        flight = _FlightCpu(graph.pid, folder, log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            landed = (folder / METRICS_FILE).is_file()
            flight.sample(landed)
            if landed:
                break
            time.sleep(0.05)
        return flight.cpu_s()
    finally:
        graph.kill()
        graph.wait()


def test_a_first_runs_flight_cpu_starts_at_the_lockstep_start_not_at_the_bags_first_bytes(tmp_path):
    """A graph's first run books its flight from the physics node's start line, seen within a poll: not from
    the recorder's first bytes in the bag during the start-up, not a second late (as warm runs, from their
    un-pause)."""
    flight_cpu_s = fly_fake_graph(tmp_path)
    assert 0.45 <= flight_cpu_s <= 0.8, flight_cpu_s  # the 0.6 s burnt after the line, to about a poll


def test_a_start_line_relayed_only_after_the_landing_books_the_flight_from_the_bags_growth_not_zero(tmp_path):
    """ci8 (load 18): a run's flight CPU was 0.0, its start line first read at the landing (the launcher
    relays the nodes' output and lagged), so the flight began and ended at one reading. The line's time is
    then unknown: the flight is booked from the recorder's first growth of the bag, the start-up's settle
    with it (0.8 + 0.6 s burnt here), as for a launch that prints no line."""
    flight_cpu_s = fly_fake_graph(tmp_path, "late")
    assert 1.2 <= flight_cpu_s <= 1.7, flight_cpu_s


def test_the_live_manifest_reads_only_the_finished_runs_entry_and_rewrites_the_file_within_its_time_share(tmp_path):
    """A batch's manifest after each run: the row of that run refreshed from its entry (not every run's entry
    read again: a sweep of 100,000 runs would read 10^10), the file rewritten unless rewriting has taken more
    than 5 % of the time; at the end always. Its rows are the rebuilt manifest's."""
    from aerial_sim.batch.manifest import LiveManifest, manifest_rows, write_result

    sweep = sweep_of("base: {mission: hop_1m}\ngrid: {seed: [0, 1, 2, 3]}")
    now = [100.0]
    live = LiveManifest(tmp_path, sweep, share=0.05, clock=lambda: now[0])
    assert live.write() and [r["status"] for r in read_manifest(tmp_path / "manifest.csv")] == ["pending"] * 4
    first, second = sweep.runs[:2]
    write_result(tmp_path, first, {"run_id": first.run_id, "status": "ok", "parameters": first.parameters, "sim_s": 10.3})
    write_result(tmp_path, second, {"run_id": second.run_id, "status": "failed", "parameters": second.parameters})
    (tmp_path / "runs" / sweep.runs[2].run_id).mkdir(parents=True)
    (tmp_path / "runs" / sweep.runs[2].run_id / "result.json").write_text("{ broken")  # read again: would be pending
    live.update(first.run_id)
    assert live.write()  # the last write took no time on this clock: due at once
    rows = read_manifest(tmp_path / "manifest.csv")
    assert [r["status"] for r in rows] == ["ok", "pending", "pending", "pending"] and rows[0]["sim_s"] == "10.3"

    slow = LiveManifest(tmp_path, sweep, share=0.05, clock=lambda: now[0])
    ticks = iter([200.0, 200.5])  # one write of 0.5 s: the next is due 10 s after it began
    slow.clock = lambda: next(ticks, now[0])
    assert slow.write(force=True)
    slow.update(second.run_id)
    now[0] = 205.0
    assert not slow.write() and read_manifest(tmp_path / "manifest.csv")[1]["status"] == "failed"  # (the forced write)
    write_result(tmp_path, second, {"run_id": second.run_id, "status": "ok", "parameters": second.parameters})
    slow.update(second.run_id)
    assert not slow.write() and read_manifest(tmp_path / "manifest.csv")[1]["status"] == "failed"
    now[0] = 210.5
    assert slow.write() and read_manifest(tmp_path / "manifest.csv")[1]["status"] == "ok"
    assert not slow.write(force=True)  # nothing new
    slow.update("no-such-run")
    assert list(slow.rows.values()) == manifest_rows(tmp_path, sweep)


def test_an_out_folder_that_cannot_be_made_is_one_line_and_exit_2(tmp_path, capsys):
    """`aerial_sim batch smoke --out /data/wind` as a user who may not write /data: one line naming the folder,
    exit 2, no run started (it was a traceback from run_batch's mkdir)."""
    from aerial_sim.cli.batch import main

    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert main(["smoke", "--out", str(blocker / "wind")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"aerial_sim batch: --out {blocker / 'wind'}: cannot create it: "), err
