"""Swarm formations (issue 14): slot geometry, separation, the centre's timing, Hausdorff and closest approach
against hand-computed cases (pure, fast)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aerial_sim.config import ParamsError
from aerial_sim.control.formation import (
    CentrePath,
    FormationParams,
    FormationPlan,
    assembly_setpoints,
    assign_slots,
    check_separation,
    closest_approach,
    hausdorff_per_vehicle,
    load_formation,
    min_separation,
    planned_path,
    resample_tracks,
    slot_offsets,
    summary_text,
)


def test_ring_slots_are_evenly_spaced_on_the_circle():
    params = FormationParams(formation="ring", radius_m=3.0)
    offsets = slot_offsets(params, 4)
    np.testing.assert_allclose(offsets, [[3, 0, 0], [0, 3, 0], [-3, 0, 0], [0, -3, 0]], atol=1e-12)
    for count in (2, 3, 5, 8):
        offsets = slot_offsets(params, count)
        np.testing.assert_allclose(np.linalg.norm(offsets, axis=1), 3.0)
        assert min_separation(offsets) == pytest.approx(2 * 3.0 * math.sin(math.pi / count))  # chord


def test_grid_slots_are_centred_rows_spacing_apart():
    params = FormationParams(formation="grid", spacing_m=2.0)
    offsets = slot_offsets(params, 4)
    np.testing.assert_allclose(offsets, [[-1, -1, 0], [1, -1, 0], [-1, 1, 0], [1, 1, 0]])
    five = slot_offsets(params, 5)  # 3 columns, 2 rows, filled row by row
    np.testing.assert_allclose(five[:, :2], [[-2, -1], [0, -1], [2, -1], [-2, 1], [0, 1]])
    assert min_separation(five) == pytest.approx(2.0)


def test_planned_slots_keep_the_safety_distance_and_a_tight_ring_is_refused():
    params = FormationParams(formation="ring", radius_m=3.0, safety_distance_m=1.5)
    for count in range(2, 13):
        assert check_separation(params, count) >= params.safety_distance_m
    with pytest.raises(ParamsError, match="less than safety_distance_m.*radius_m"):
        check_separation(params, 13)  # chord 2*3*sin(pi/13) = 1.44 m
    plan = FormationPlan.build(FormationParams(centre_path="circle", circle_radius_m=4.0, duration_s=6.0), 5)
    # The formation translates: the separation of the planned slots is the same at every instant.
    for t in np.linspace(0.0, plan.duration_s, 13):
        assert min_separation(plan.setpoints(t)) == pytest.approx(min_separation(plan.offsets))


def test_slot_assignment_keeps_straight_assembly_flights_from_crossing():
    starts = np.array([[0.0, 0, 3], [10.0, 0, 3]])
    slots = np.array([[9.0, 0, 3], [1.0, 0, 3]])
    assert list(assign_slots(starts, slots)) == [1, 0]  # not the crossing [0, 1]
    rng = np.random.default_rng(4)
    for _ in range(20):
        starts = np.column_stack([rng.uniform(-10, 10, (6, 2)), np.full(6, 3.0)])
        if min_separation(starts) < 1.0:
            continue
        goals = slot_offsets(FormationParams(radius_m=4.0), 6) + [rng.uniform(-5, 5), rng.uniform(-5, 5), 3.0]
        order = assign_slots(starts, goals)
        times = np.linspace(0.0, 1.0, 201)
        tracks = np.stack([assembly_setpoints(starts, goals[order], t, 1.0) for t in times])
        approach = closest_approach(times, tracks)
        assert approach.distance_m > 0.3  # synchronised lines of the least-squares assignment never meet


def test_centre_moves_with_a_trapezoidal_speed_profile_and_stops_at_the_end():
    path = CentrePath(FormationParams(centre_path="waypoints", waypoints=((0, 0), (10, 0), (10, 5)),
                                      centre_speed_m_s=2.0, centre_acceleration_m_s2=1.0, altitude_m=3.0))
    assert path.length_m == pytest.approx(15.0)
    assert path.duration_s == pytest.approx(2 * 2.0 + (15.0 - 4.0) / 2.0)  # 2 s ramps each way + cruise
    np.testing.assert_allclose(path.position(0.0), [0, 0, 3])
    np.testing.assert_allclose(path.position(2.0), [2, 0, 3])  # 1/2 a t^2 at the end of the ramp
    np.testing.assert_allclose(path.position(6.5), [10, 1, 3])  # 2 + 2 * 4.5 = 11 m along: past the corner
    np.testing.assert_allclose(path.position(100.0), [10, 5, 3])
    t = np.linspace(0, path.duration_s, 2001)
    speed = np.diff(path.arc_length(t)) / np.diff(t)
    assert speed.max() <= 2.0 + 1e-9 and np.all(speed >= 0)
    short = CentrePath(FormationParams(centre_path="circle", circle_radius_m=5.0, centre_speed_m_s=2.0,
                                       centre_acceleration_m_s2=1.0, duration_s=3.0))
    assert short.duration_s == pytest.approx(3.0) and short.length_m == pytest.approx(1.0 * 9 / 4)  # triangle
    lap = CentrePath(FormationParams(centre_path="circle", circle_radius_m=5.0, circle_centre_m=(1.0, 2.0)))
    np.testing.assert_allclose(lap.position(0.0), [6, 2, 4])
    np.testing.assert_allclose(lap.position(lap.duration_s), [6, 2, 4], atol=1e-9)  # one lap
    np.testing.assert_allclose(np.linalg.norm(lap.position(t[:50])[:, :2] - [1, 2], axis=1), 5.0)


def test_planned_path_is_the_slot_trace():
    params = FormationParams(centre_path="waypoints", waypoints=((0, 0), (6, 0)), radius_m=2.0, altitude_m=3.0)
    plan = FormationPlan.build(params, 4)
    path = planned_path(plan, 1)  # slot 1 is 2 m north of the centre
    np.testing.assert_allclose(path[0], [0, 2, 3], atol=1e-12)
    np.testing.assert_allclose(path[-1], [6, 2, 3], atol=1e-12)
    np.testing.assert_allclose(path[:, 1:], np.tile([2.0, 3.0], (len(path), 1)))
    steps = np.diff(path[:, 0])
    assert steps.min() > 0 and steps[:-1].min() >= 0.05 and steps.max() < 0.08  # about every 5 cm


def test_hausdorff_per_vehicle_against_hand_computed_offsets():
    line = np.array([[0.0, 0, 0], [10.0, 0, 0]])
    tracks = {
        "a": np.column_stack([np.linspace(0, 10, 11), np.full(11, 0.3), np.zeros(11)]),  # 0.3 m beside it
        "b": np.column_stack([np.linspace(0, 8, 9), np.zeros(9), np.zeros(9)]),  # stops 2 m short
        "c": np.zeros((1, 3)),  # too short to compare
    }
    metrics = hausdorff_per_vehicle(tracks, {"a": line, "b": line, "c": line})
    assert set(metrics) == {"a", "b"}
    assert metrics["a"].hausdorff_m == pytest.approx(0.3)
    assert metrics["a"].rms_cross_track_m == pytest.approx(0.3)
    assert metrics["b"].hausdorff_m == pytest.approx(2.0)  # the path's end is 2 m from the track
    assert metrics["b"].max_cross_track_m == pytest.approx(0.0)


def test_closest_approach_finds_the_pair_and_the_time():
    times = np.linspace(0.0, 10.0, 101)
    # Two vehicles pass each other on parallel lines 1 m apart at t = 5; a third stays far away.
    first = np.column_stack([times - 5.0, np.zeros_like(times), np.full_like(times, 3.0)])
    second = np.column_stack([5.0 - times, np.ones_like(times), np.full_like(times, 3.0)])
    third = np.tile([0.0, 20.0, 3.0], (len(times), 1))
    approach = closest_approach(times, np.stack([third, first, second], axis=1))
    assert approach.distance_m == pytest.approx(1.0)
    assert (approach.first, approach.second) == (1, 2)
    assert approach.time_s == pytest.approx(5.0)
    assert closest_approach(times, first[:, None, :]) is None


def test_resample_tracks_puts_staggered_samples_on_common_instants():
    a = (np.array([0.0, 1.0, 2.0]), np.array([[0.0, 0, 0], [1, 0, 0], [2, 0, 0]]))
    b = (np.array([0.5, 2.5]), np.array([[0.0, 5, 0], [0, 3, 0]]))
    grid, positions = resample_tracks([a, b], rate_hz=4.0)
    np.testing.assert_allclose(grid, [0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0])
    np.testing.assert_allclose(positions[:, 0, 0], grid)
    np.testing.assert_allclose(positions[:, 1, 1], 5.0 - (grid - 0.5))
    grid, positions = resample_tracks([a, (np.array([5.0]), np.zeros((1, 3)))], 4.0)
    assert grid.shape == (0,) and positions.shape == (0, 2, 3)


def test_shipped_swarm_missions_load_and_bad_keys_are_named(tmp_path):
    ring = load_formation("swarm_ring")
    assert ring.formation == "ring" and check_separation(ring, 6) >= ring.safety_distance_m
    grid = load_formation("swarm_grid")
    assert grid.formation == "grid" and FormationPlan.build(grid, 9).duration_s > 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("formation: ring\nradius: 3\n")
    with pytest.raises(ParamsError, match="radius: unknown parameter"):
        load_formation(str(bad))
    with pytest.raises(ParamsError, match="at least two waypoints"):
        FormationParams(centre_path="waypoints", waypoints=((1, 2),))
    with pytest.raises(ParamsError, match="not found"):
        load_formation("no_such_swarm")


def test_summary_names_every_vehicle_and_the_closest_pair():
    params = FormationParams()
    line = np.array([[0.0, 0, 0], [1.0, 0, 0]])
    metrics = hausdorff_per_vehicle({"drone1": line + [0, 0.1, 0]}, {"drone1": line})
    approach = closest_approach(np.array([0.0]), np.array([[[0, 0, 0], [0, 2.5, 0]]]))
    text = summary_text(params, ["drone1", "drone2"], metrics, approach, ("drone1", "drone2"), 5.196,
                        {"drone1": "landed", "drone2": "failed: arm refused"}, 12.0)
    assert "closest approach   2.500 m between drone1 and drone2 at t = 0.00 s" in text
    assert "drone1" in text and "0.100 m" in text and "failed: arm refused" in text


def test_formation_core_does_not_import_ros():
    import subprocess
    import sys

    code = "import sys, aerial_sim.control.formation; sys.exit('rclpy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_brute_force_and_scipy_assignments_agree():
    from scipy.optimize import linear_sum_assignment

    rng = np.random.default_rng(7)
    for count in (1, 3, 7):
        starts, slots = rng.uniform(-5, 5, (count, 3)), rng.uniform(-5, 5, (count, 3))
        cost = ((starts[:, None] - slots[None]) ** 2).sum(axis=2)
        rows, columns = linear_sum_assignment(cost)
        assert cost[np.arange(count), assign_slots(starts, slots)].sum() == pytest.approx(cost[rows, columns].sum())
