"""Mission files, commanded paths, their timing and the track metrics (pure, fast)."""

import math

import numpy as np
import pytest

from aerial_sim.cli.fly import main as fly_main
from aerial_sim.config import ParamsError
from aerial_sim.control.mission import MissionParams, is_setpoint_due, load_mission, pattern_path
from aerial_sim.control.track import TrackRecorder, compare_tracks, distances_to_polyline
from aerial_sim.control.trajectory import PathFollower, Trajectory

START = (1.0, 2.0, 3.0)


def test_shipped_missions_load_and_make_the_papers_shapes():
    square = pattern_path(load_mission("square_5m"), START)
    np.testing.assert_allclose(square[[0, 1, 2, 3, 4]] - START, [[0, 0, 0], [5, 0, 0], [5, 5, 0], [0, 5, 0], [0, 0, 0]])
    circle = pattern_path(load_mission("circle_10m"), START)
    centre = np.array(START) + [0.0, 10.0, 0.0]
    np.testing.assert_allclose(np.linalg.norm(circle - centre, axis=1), 10.0, atol=1e-9)
    np.testing.assert_allclose(circle[-1], START, atol=1e-9)  # closed
    eight = pattern_path(load_mission("figure_eight"), START)
    crossings = np.linalg.norm(eight - START, axis=1) < 1e-6
    assert crossings[0] and crossings[-1] and crossings.sum() >= 3  # passes the start in the middle too


def test_mission_file_errors_name_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("pattern: square\nspeed: 3\n")
    with pytest.raises(ParamsError, match="speed: unknown parameter"):
        load_mission(str(bad))
    with pytest.raises(ParamsError, match="waypoints"):
        MissionParams(pattern="waypoints")
    assert fly_main([str(bad)]) == 2


def test_trajectory_respects_speed_and_acceleration_and_stops_at_corners():
    mission = MissionParams(pattern="square", size_m=5.0, speed_m_s=2.0, acceleration_m_s2=1.0)
    trajectory = Trajectory(pattern_path(mission, START), mission.speed_m_s, mission.acceleration_m_s2)
    times = np.linspace(0.0, trajectory.duration_s, 4000)
    samples = [trajectory.sample(t) for t in times]
    speeds = np.array([np.linalg.norm(v) for _, v, _ in samples])
    assert speeds.max() == pytest.approx(2.0, rel=1e-6)
    accel = np.abs(np.diff(speeds)) / np.diff(times)
    corners = np.array(START) + np.array([[0, 0, 0], [5, 0, 0], [5, 5, 0], [0, 5, 0]])
    away = [np.linalg.norm(corners - p, axis=1).min() > 0.1 for p, _, _ in samples[1:]]
    assert accel[away].max() < 1.0 * 1.05  # (at a corner vertex the direction, not the speed, changes)
    corner_index = np.argmin([np.linalg.norm(p - (np.array(START) + [5, 0, 0])) for p, _, _ in samples])
    assert speeds[corner_index] < 0.3  # slows right down for the 90 degree turn
    # A corner is taken at v_c = sqrt(a / kappa), kappa = (pi/2) / 0.05 m sample spacing: about 0.18 m/s.
    # One side: speed up v_c -> 2 m/s and brake back at 1 m/s^2, cruise the rest of the 5 m.
    v_c = math.sqrt(1.0 * 0.05 / (math.pi / 2))
    ramp_m = 2.0**2 - v_c**2  # two ramps of (v^2 - v_c^2) / 2a each
    side_s = 2.0 * (2.0 - v_c) / 1.0 + (5.0 - ramp_m) / 2.0
    start_and_end_s = 2.0 * v_c / 1.0  # the path starts and ends at rest, not at v_c
    assert trajectory.duration_s == pytest.approx(4 * side_s + start_and_end_s, rel=0.01)
    circle = MissionParams(pattern="circle", size_m=10.0, speed_m_s=5.0, acceleration_m_s2=2.0)
    timed = Trajectory(pattern_path(circle, START), circle.speed_m_s, circle.acceleration_m_s2)
    assert timed.speeds.max() == pytest.approx(math.sqrt(2.0 * 10.0), rel=0.01)  # centripetal limit v^2/r <= a


def sample_with_numpy(trajectory, t):
    """``Trajectory.sample`` as it was on the arrays (NumPy's search and arithmetic on 3-vectors), before issue 34
    wrote it in floats: what ``sample`` and ``at`` must give bit for bit."""
    times = trajectory.times
    if t <= times[0] or t >= times[-1]:
        return trajectory.points[0 if t <= times[0] else -1], np.zeros(3), np.zeros(3)
    i = int(np.searchsorted(times, t, side="right")) - 1
    f = (t - times[i]) / (times[i + 1] - times[i])
    return tuple(a[i] + f * (a[i + 1] - a[i]) for a in (trajectory.points, trajectory.velocities, trajectory.accelerations))


def command_with_numpy(follower, t, position):
    """``PathFollower.command`` as it was on arrays (``np.linalg.norm`` for the correction's size)."""
    reference = sample_with_numpy(follower.trajectory, t)[0]
    velocity = sample_with_numpy(follower.trajectory, t + follower.lookahead_s)[1]
    correction = follower.gain * (reference - np.asarray(position, dtype=float))
    size = float(np.linalg.norm(correction))
    if size > follower.max_correction:
        correction *= follower.max_correction / size
    return velocity + correction, reference


def test_path_following_in_floats_gives_the_array_forms_bits():
    """The shipped patterns and random waypoint paths, at random times (before, inside and after each, and on
    vertices) and positions near and far from the path (the correction limited or not): the samples, the velocity
    command and the reference, bit for bit."""
    rng = np.random.default_rng(34)
    paths = [pattern_path(load_mission(name), START) for name in ("square_5m", "circle_10m", "figure_eight")]
    paths += [np.array([START, np.add(START, (1.0, 0.0, 0.0))]), np.array([START])]
    paths += [np.cumsum(rng.normal(0, 3, (count, 3)), axis=0) for count in (2, 3, 5, 8)]
    for path in paths:
        trajectory = Trajectory(path, 2.0, 1.0)
        follower = PathFollower(trajectory, 1.2, 0.5, 0.3)
        vertices = trajectory.times[rng.integers(0, len(trajectory.times), 50)]
        for t in [*rng.uniform(-1.0, trajectory.duration_s + 1.0, 300), *vertices, 0.0, trajectory.duration_s]:
            expected = sample_with_numpy(trajectory, t)
            assert [v.tobytes() for v in trajectory.sample(t)] == [np.asarray(v, float).tobytes() for v in expected]
            position = expected[0] + rng.normal(0, rng.choice([0.01, 0.3, 3.0]), 3)
            got, wanted = follower.command(t, position), command_with_numpy(follower, t, position)
            assert [np.array(v).tobytes() for v in got] == [np.asarray(v, float).tobytes() for v in wanted], (t, position)


def test_hausdorff_and_cross_track_on_known_geometry():
    square = np.array([[0, 0, 0], [5, 0, 0], [5, 5, 0], [0, 5, 0], [0, 0, 0]], dtype=float)
    # The same square shifted 0.3 m east: every point of either is within 0.3 m of the other.
    shifted = square + [0.3, 0.0, 0.0]
    dense = np.vstack([np.linspace(a, b, 200) for a, b in zip(shifted[:-1], shifted[1:])])
    metrics = compare_tracks(dense, square)
    assert metrics.hausdorff_m == pytest.approx(0.3, abs=1e-9)
    assert 0.0 < metrics.rms_cross_track_m < 0.3
    # A track that stops half way: the unflown half of the path is what the Hausdorff distance catches.
    half = np.linspace([0, 0, 0], [5, 0, 0], 100)
    assert compare_tracks(half, square).hausdorff_m == pytest.approx(5.0, abs=1e-9)
    assert compare_tracks(half, square).rms_cross_track_m == pytest.approx(0.0, abs=1e-12)
    assert distances_to_polyline([[2.5, 1.0, 0.0]], square)[0] == pytest.approx(1.0)


def test_track_csv_reads_back_what_was_written(tmp_path):
    # aerial_sim batch's missions leave their plots to the post-processing, which draws them from track.csv
    # (test_batch_runs checks the plots).
    recorder = TrackRecorder()
    for step in range(50):
        t = step * 0.004
        recorder.add(t, (t, 2 * t, 0.5), (1.0, 2.0, 0.0), "pattern" if step > 10 else "climb",
                     (t, 2 * t, 0.5) if step > 10 else None)
    recorder.write_csv(tmp_path / "track.csv")
    back = TrackRecorder.from_csv(tmp_path / "track.csv")
    assert [row[7] for row in back.rows] == [row[7] for row in recorder.rows]
    assert np.allclose(back.positions("pattern"), recorder.positions("pattern"), atol=1e-6)
    assert np.allclose(back.times(), recorder.times(), atol=1e-6)
    assert all(math.isnan(v) for v in back.rows[0][8:11]) and back.rows[-1][8:11] == pytest.approx(recorder.rows[-1][8:11])


def test_track_csv_is_what_the_csv_module_writes_for_any_values_and_phases(tmp_path):
    """write_csv's one-format path writes csv.writer's bytes (nan, infinities, -0.0, rounding at the 6th
    decimal); a phase the dialect would quote sends the rows through csv.writer, quoted."""
    import csv
    import random

    rng = random.Random(4)
    special = [math.nan, math.inf, -math.inf, -0.0, 1e300, -1e-300, 5e-7, -5e-7, 123456789.1234565]
    for phases in (("climb", "pattern", " spaced"), ("climb", "a,b", 'say "x"', "")):
        recorder = TrackRecorder()
        for step in range(300):
            values = [rng.choice(special) if rng.random() < 0.2 else rng.uniform(-1e4, 1e4) for _ in range(9)]
            recorder.add(values[0], values[0:3], values[3:6], rng.choice(phases), None if step % 3 else values[6:9])
        recorder.write_csv(tmp_path / "track.csv")
        with open(tmp_path / "expected.csv", "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["time_s", "x_m", "y_m", "z_m", "vx_m_s", "vy_m_s", "vz_m_s", "phase", "ref_x_m", "ref_y_m",
                             "ref_z_m"])
            writer.writerows([f"{v:.6f}" if isinstance(v, float) else v for v in row] for row in recorder.rows)
        assert (tmp_path / "track.csv").read_bytes() == (tmp_path / "expected.csv").read_bytes()


def test_control_core_does_not_import_ros():
    import subprocess
    import sys

    code = "import sys, aerial_sim.control.supervisor, aerial_sim.control.track, aerial_sim.control.trajectory; " \
           "print('rclpy' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_a_streaming_client_answers_the_first_odometry_stamp_of_each_setpoint_period():
    """The mission runner and the flight controller decide alike which steps wait for a setpoint."""
    stamps = [k * 0.004 for k in range(0, 60)]  # 250 Hz of ground truth, 0.24 s
    due = [t for previous, t in zip([-math.inf] + stamps, stamps) if is_setpoint_due(t, previous, 50.0)]
    assert due == pytest.approx([0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.14, 0.16, 0.18, 0.2, 0.22])
    # 30 Hz on a 4 ms grid: the first stamp at or after each 33.3 ms instant
    due = [t for previous, t in zip([-math.inf] + stamps, stamps) if is_setpoint_due(t, previous, 30.0)]
    assert due == pytest.approx([0.0, 0.036, 0.068, 0.1, 0.136, 0.168, 0.2, 0.236])
    assert all(is_setpoint_due(t, previous, 0.0) for previous, t in zip([-math.inf] + stamps, stamps))
    assert is_setpoint_due(0.004, 5.0, 50.0)  # back in time: a simulation reset
    # fleets' 50 Hz ground truth at 50 Hz setpoints: every stamp
    assert all(is_setpoint_due(k * 0.02, (k - 1) * 0.02, 50.0) for k in range(1, 500))


@pytest.mark.parametrize("rate", [-1.0, math.nan, math.inf, 1e308])
def test_a_bad_setpoint_rate_is_one_error_naming_it_on_both_sides(rate):
    # 1e308 Hz would overflow the grid arithmetic on the first odometry stamp, inside a callback.
    pytest.importorskip("rclpy")
    from aerial_sim.nodes.flight_controller import FlightControllerNodeParams
    from aerial_sim.nodes.mission import MissionNodeParams

    with pytest.raises(ParamsError, match="setpoint_rate_hz"):
        MissionNodeParams(setpoint_rate_hz=rate)
    with pytest.raises(ParamsError, match="lockstep_client_rate_hz"):
        FlightControllerNodeParams(lockstep_client_rate_hz=rate)

