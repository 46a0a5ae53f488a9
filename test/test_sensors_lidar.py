"""Lidar model against geometry with a known answer: wall distances within the noise, beam counts,
motion skew from the per-point times, the lidar-equation range limit, the scan patterns, determinism."""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

from aerial_sim.config import ParamsError, params_from_mapping
from aerial_sim.sensors.params import load_preset
from aerial_sim.sensors.quaternions import quat_from_rpy, quat_multiply, rotation_matrix, slerp
from aerial_sim.sensors.resampling import PoseTrack
from aerial_sim.sensors.truth import TruthSample
from aerial_sim.sensors.lidar import LidarModel, LidarParams, LidarSweeper, points_to_world, rotating_pattern
from aerial_sim.world.scene import load_scene

WALL_X = 10.0  # front faces of the corridor's three walls (plastic id 10, cement 11, formboard 12)
LEVEL = (1.0, 0.0, 0.0, 0.0)


@pytest.fixture(scope="module")
def corridor():
    return load_scene("corridor")


@pytest.fixture(scope="module")
def empty():
    return load_scene("empty")


def vlp16(**overrides) -> LidarParams:
    preset = load_preset(LidarParams, "velodyne_vlp16")
    return params_from_mapping(LidarParams, {**{k: getattr(preset, k) for k in ("scan_pattern", "channels", "range_m",
        "min_range_m", "points_per_second", "rotations_per_second", "vertical_fov_upper_deg", "vertical_fov_lower_deg",
        "channel_firing_interval_s", "range_noise_std_m", "vertical_angles_deg")}, **overrides})  # fmt: skip


def sweep(params, scene, position=(0.0, 0.0, 2.0), orientation=LEVEL, velocity=(0.0, 0.0, 0.0), yaw_rate=0.0, start=0.0):
    """One sweep starting at ``start`` along a track sampled at 250 Hz (constant velocity and yaw rate)."""
    sweeper = LidarSweeper(LidarModel(params, scene))
    for k in range(int(round((start + params.sweep_period_s) * 250)) + 1):
        t = k / 250.0
        q = quat_multiply(quat_from_rpy(0.0, 0.0, yaw_rate * t), orientation)  # yawing about the world z
        scans = sweeper.push(TruthSample(t, position=tuple(np.add(position, np.multiply(velocity, t))), orientation=q))
        if scans and scans[-1].start_time_s >= start - 1e-9:
            return scans[-1]
    raise AssertionError("no sweep finished")


@pytest.mark.parametrize("lane_y, wall_id, material", [(0.0, 10, "plastic"), (40.0, 11, "cement"), (-40.0, 12, "formboard")])
def test_a_vlp16_in_the_corridor_returns_the_wall_distances_within_the_noise(corridor, lane_y, wall_id, material):
    params = vlp16()
    distance = 6.0
    scan = sweep(params, corridor, position=(WALL_X - distance - params.mount.position_m[0], lane_y, 3.0))
    points = scan.points[0]
    wall = points[points["segmentation_id"] == wall_id]
    assert len(wall) > 5000  # the wall fills +-63 deg of azimuth and every ring
    direction_x = wall["x"] / np.sqrt(wall["x"] ** 2 + wall["y"] ** 2 + wall["z"] ** 2)
    # range noise along the beam moves x by noise * (the beam's x component): mean D, std sigma * rms(direction_x)
    expected_std = params.range_noise_std_m * math.sqrt(np.mean(direction_x**2))
    assert abs(wall["x"].mean() - distance) < 4 * expected_std / math.sqrt(len(wall))
    assert wall["x"].std() == pytest.approx(expected_std, rel=0.1)
    assert np.abs(wall["x"] - distance).max() < 6 * params.range_noise_std_m
    reflectivity = corridor.material(material).lidar_reflectivity
    assert wall["intensity"] == pytest.approx(100 * reflectivity * direction_x, abs=1e-3)  # Lambertian return


def test_points_per_sweep_are_points_per_second_over_rotation_rate_minus_the_no_returns(empty):
    params = vlp16(range_noise_std_m=0.0)
    height = 2.0  # lidar 2 m above the ground; level beams at -1 deg would reach it at 114.6 m > 100 m range
    scan = sweep(params, empty, position=(0.0, 0.0, height - params.mount.position_m[2]))
    fired = params.points_per_second / params.rotations_per_second
    assert scan.fired == fired == 28_800
    elevations = params.elevations_deg()
    reach = [height / math.sin(math.radians(-e)) for e in elevations if e < 0]
    hitting_rings = sum(params.min_range_m <= r <= params.range_m for r in reach)
    assert hitting_rings == 7  # -15 ... -3 deg
    columns = fired / params.channels
    assert scan.points.shape == (1, hitting_rings * columns)  # every other beam is a no-return, dropped
    assert set(np.unique(scan.points["ring"]).tolist()) == set(range(hitting_rings))  # ring 0 = lowest beam
    ring0 = scan.points[0][scan.points[0]["ring"] == 0]
    assert np.sqrt(ring0["x"] ** 2 + ring0["y"] ** 2 + ring0["z"] ** 2) == pytest.approx(reach[0], rel=1e-5)

    organized = sweep(vlp16(range_noise_std_m=0.0, no_return="nan"), empty, position=(0.0, 0.0, height - 0.1)).points
    assert organized.shape == (16, 1800)
    assert (organized["ring"] == np.arange(16)[:, None]).all()
    assert np.isnan(organized["x"]).sum() == fired - hitting_rings * columns
    assert np.isnan(organized["x"][hitting_rings:]).all() and not np.isnan(organized["x"][:hitting_rings]).any()

    dropout = 0.1
    lossy = sweep(vlp16(range_noise_std_m=0.0, dropout_probability=dropout), empty, position=(0.0, 0.0, height - 0.1))
    n = hitting_rings * columns
    assert abs(lossy.points.shape[1] - n * (1 - dropout)) < 4 * math.sqrt(n * dropout * (1 - dropout))


def test_flying_at_10_m_s_toward_a_wall_skews_the_sweep_as_its_point_times_predict(corridor):
    params = vlp16(range_noise_std_m=0.0, channel_firing_interval_s=2.304e-6)
    speed, start_x = 10.0, 2.0
    scan = sweep(params, corridor, position=(start_x, 0.0, 3.0), velocity=(speed, 0.0, 0.0), start=0.2)
    wall = scan.points[0][scan.points[0]["segmentation_id"] == 10]
    lidar_x = start_x + params.mount.position_m[0] + speed * (scan.start_time_s + wall["time"].astype(float))
    assert wall["x"] == pytest.approx(WALL_X - lidar_x, abs=1e-3)  # each point seen from where the lidar was then
    # The plastic wall fills the front of the sweep: beams at its start and its end, 0.1 s apart.
    assert wall["time"].max() - wall["time"].min() > 0.09
    assert wall["x"].max() - wall["x"].min() > 0.9  # ~1 m of skew; a motionless cast shows none


def test_per_point_poses_put_every_point_back_on_the_wall_while_turning_and_moving(corridor):
    params = vlp16(range_noise_std_m=0.0)
    velocity, yaw_rate = np.array([6.0, 3.0, 0.0]), 2.0  # rad/s: 11 deg within the sweep
    start = (3.0, 0.0, 3.0)
    scan = sweep(params, corridor, position=start, velocity=velocity, yaw_rate=yaw_rate, start=0.1)
    wall = scan.points[0][scan.points[0]["segmentation_id"] == 10]
    t = scan.start_time_s + wall["time"].astype(float)
    mount = np.asarray(params.mount.position_m)
    local = np.stack([wall["x"], wall["y"], wall["z"]], axis=1).astype(float) + mount
    world = np.array([np.asarray(start) + velocity * ti + rotation_matrix(quat_from_rpy(0, 0, yaw_rate * ti)) @ p
                      for ti, p in zip(t, local)])  # fmt: skip
    assert world[:, 0] == pytest.approx(WALL_X, abs=2e-3)
    at_start = np.asarray(start) + velocity * scan.start_time_s + local @ rotation_matrix(
        quat_from_rpy(0, 0, yaw_rate * scan.start_time_s)).T
    assert np.abs(at_start[:, 0] - WALL_X).max() > 0.3  # one pose for the whole sweep misplaces the wall
    track = PoseTrack()
    for k in range(60):
        t = k / 250.0
        track.push(t, tuple(np.asarray(start) + velocity * t), quat_from_rpy(0, 0, yaw_rate * t))
    assert points_to_world(wall, scan.start_time_s, track, params.mount) == pytest.approx(world, abs=2e-3)  # deskewing


def test_a_vlp16_fires_its_lasers_interleaved_and_each_point_lies_where_the_head_had_turned_at_its_time(corridor):
    params = vlp16(range_noise_std_m=0.0)
    pattern = rotating_pattern(params)
    first_column = pattern.directions[:16]
    elevation = np.degrees(np.arcsin(np.clip(first_column[:, 2], -1, 1)))
    # the datasheet's firing order (laser ID 0..15), not the elevation order
    assert elevation == pytest.approx([-15, 1, -13, 3, -11, 5, -9, 7, -7, 9, -5, 11, -3, 13, -1, 15], abs=1e-4)
    assert pattern.ring[:16].tolist() == [0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15]  # ring 0: lowest beam
    assert np.all(np.diff(pattern.time_s) >= 0)
    # A motionless lidar: every returned point's azimuth is where the head pointed when that laser fired,
    # 360 deg x 10 Hz x its time; the last laser of a column fires 34.6 us (0.124 deg) after the first.
    scan = sweep(params, corridor, position=(3.0, 0.0, 3.0), start=0.1)
    points = scan.points[0]
    assert len(points) > 10000
    azimuth = np.degrees(np.arctan2(-points["y"].astype(float), points["x"].astype(float))) % 360
    head = (360.0 * params.rotations_per_second * points["time"].astype(float)) % 360
    lag = (azimuth - head + 180) % 360 - 180
    assert np.abs(lag).max() < 0.005  # float32 points; the ring-15 firing offset alone is 0.124 deg


def test_pose_track_follows_slerp_between_samples():
    track = PoseTrack()
    q0, q1 = quat_from_rpy(0.1, -0.2, 0.3), quat_from_rpy(0.4, 0.1, -0.5)
    track.push(0.0, (0.0, 0.0, 0.0), q0)
    track.push(1.0, (2.0, -4.0, 6.0), q1)
    times = np.linspace(-0.5, 1.5, 9)
    vector = np.array([[0.3, -0.7, 0.65]] * len(times), np.float32)
    origins, directions = track.to_world(times, vector, (1.0, 0.0, 0.0))
    for t, origin, direction in zip(times, origins, directions):
        s = min(max(t, 0.0), 1.0)
        R = rotation_matrix(slerp(q0, q1, s))
        assert direction == pytest.approx(R @ vector[0], abs=1e-5)
        assert origin == pytest.approx(np.array([2.0, -4.0, 6.0]) * s + R @ [1.0, 0.0, 0.0], abs=1e-5)
    held = PoseTrack(hold=True)
    held.push(0.0, (0.0, 0.0, 0.0), q0)
    held.push(1.0, (2.0, -4.0, 6.0), q1)
    _, directions = held.to_world(np.array([0.5]), vector[:1], (0.0, 0.0, 0.0))
    assert directions[0] == pytest.approx(rotation_matrix(q0) @ vector[0], abs=1e-5)


def test_detection_range_follows_the_lidar_equation(tmp_path):
    """OS1-64: 120 m at 80 % reflectivity; a square-on wall of reflectivity rho is seen out to 120 sqrt(rho / 0.8) m:
    cement (0.30) to 73.5 m, plastic (0.70) to 112 m. At 80 m the plastic wall returns, the cement one does not."""
    params = load_preset(LidarParams, "ouster_os1_64")
    assert (params.range_m, params.range_reflectivity) == (120.0, 0.8)
    scene_file = tmp_path / "walls.yaml"
    scene_file.write_text(textwrap.dedent("""\
        ground: {segmentation_id: 1, material: asphalt}
        objects:
          - {name: near_cement, shape: box, size: [0.2, 8, 40], position: [60.1, 0, 20], segmentation_id: 2, material: cement}
          - {name: far_cement, shape: box, size: [0.2, 8, 40], position: [-80.1, 0, 20], segmentation_id: 3, material: cement}
          - {name: far_plastic, shape: box, size: [8, 0.2, 40], position: [0, 80.1, 20], segmentation_id: 4, material: plastic}
    """))
    scene = load_scene(str(scene_file))
    narrow = params_from_mapping(LidarParams, {"channels": 64, "range_m": 120.0, "points_per_second": 1310720,
                                               "vertical_fov_upper_deg": 2.0, "vertical_fov_lower_deg": -2.0,
                                               "range_reflectivity": 0.8})  # fmt: skip
    points = sweep(narrow, scene, position=(0.0, 0.0, 20.0 - narrow.mount.position_m[2])).points[0]
    counts = {wall: int((points["segmentation_id"] == wall).sum()) for wall in (2, 3, 4)}
    assert counts[2] > 1000 and counts[4] > 1000 and counts[3] == 0, counts
    near = points[points["segmentation_id"] == 2]
    range_ = np.sqrt(near["x"] ** 2 + near["y"] ** 2 + near["z"] ** 2)
    limit = 120.0 * np.sqrt(0.30 * np.abs(near["x"]) / range_ / 0.8)  # |cos theta| = x / r on a wall facing x
    assert (range_ <= limit).all()


def test_the_non_repetitive_pattern_never_repeats_and_its_coverage_grows_with_time(empty):
    params = load_preset(LidarParams, "livox_mid360")
    model = LidarModel(params, empty)
    first, second = model.pattern(0.0), model.pattern(0.1)
    assert len(first.time_s) == 20_000 and first.rows == 4 and set(first.ring.tolist()) == {0, 1, 2, 3}
    assert not np.allclose(first.directions, second.directions)
    assert np.array_equal(model.pattern(0.3).directions, LidarModel(params, empty).pattern(0.3).directions)  # sim-time bound

    def covered_cells(sweeps: int) -> int:  # 1 x 1 deg cells of the FOV hit at least once
        directions = np.concatenate([model.pattern(k * 0.1).directions for k in range(sweeps)])
        azimuth = np.degrees(np.arctan2(-directions[:, 1], directions[:, 0])) % 360
        elevation = np.degrees(np.arcsin(np.clip(directions[:, 2], -1, 1)))
        assert elevation.min() >= -7.0 - 1e-3 and elevation.max() <= 52.0 + 1e-3
        return len(set(zip(azimuth.astype(int).tolist(), np.floor(elevation).astype(int).tolist())))

    cells = 360 * 59
    one, ten = covered_cells(1), covered_cells(10)
    # one sweep (20 000 points over 21 240 cells) leaves a quarter of the cells empty (0.756 covered, deterministic);
    # ten sweeps leave none, where a rotating lidar would hit the same cells every sweep
    assert one < 0.8 * cells and ten > 0.99 * cells


def test_sweeps_are_stamped_on_the_sweep_grid_and_a_restart_repeats_the_noise(corridor):
    params = vlp16(dropout_probability=0.05)
    sweeper = LidarSweeper(LidarModel(params, corridor))

    def run(start_k: int, count: int) -> list:
        scans = []
        for k in range(start_k, start_k + count):
            scans += sweeper.push(TruthSample(k / 250.0, position=(3.9, 0.0, 3.0)))
        return scans

    first = run(13, 100)  # the first truth at 0.052 s: the first sweep starts at 0.1 s
    assert [round(s.start_time_s, 9) for s in first] == pytest.approx([0.1, 0.2, 0.3])
    again = run(13, 100)  # time went back: a restarted simulation
    assert len(again) == len(first)
    for a, b in zip(first, again):
        assert np.array_equal(a.points, b.points)
    other_seed = LidarSweeper(LidarModel(vlp16(dropout_probability=0.05, seed=1), corridor))
    other = [s for k in range(13, 113) for s in other_seed.push(TruthSample(k / 250.0, position=(3.9, 0.0, 3.0)))]
    assert not np.array_equal(other[0].points["x"][:100], first[0].points["x"][:100])


@pytest.mark.parametrize("values, name", [
    ({"channels": 0}, "channels"),
    ({"vertical_fov_upper_deg": -50.0}, "vertical_fov_lower_deg must be <= vertical_fov_upper_deg"),
    ({"range_noise_std_m": -0.1}, "range_noise_std_m"),
    ({"vertical_angles_deg": [1.0, 2.0]}, "vertical_angles_deg"),
    ({"horizontal_fov_end_deg": 400.0}, "horizontal FOV"),
    ({"points_per_second": 10}, "points_per_second"),
    ({"dropout_probability": 1.0}, "dropout_probability"),
    ({"channel_firing_interval_s": 1e-3}, "channel_firing_interval_s"),
    ({"no_return": "zero"}, "no_return"),
    ({"beams": 16}, "beams: unknown parameter"),
])  # fmt: skip
def test_bad_parameters_are_one_clear_error(values, name):
    with pytest.raises(ParamsError, match=name):
        params_from_mapping(LidarParams, values)


@pytest.mark.parametrize("width, height, point_step, with_x, data", [
    (2**32 - 1, 2**32 - 1, 0, False, b""),  # a fuzzed cloud: no step, no fields, a huge count (was an OverflowError)
    (10, 1, 16, True, bytes(100)),  # shorter than its points
])
def test_a_malformed_cloud_is_a_value_error_naming_what_is_wrong(width, height, point_step, with_x, data):
    from types import SimpleNamespace

    from aerial_sim.sensors.pointcloud import cloud_to_array

    fields = [SimpleNamespace(name="x", offset=0, datatype=7, count=1)] if with_x else []  # FLOAT32
    cloud = SimpleNamespace(width=width, height=height, point_step=point_step, is_bigendian=False, fields=fields,
                            data=data)
    with pytest.raises(ValueError, match="PointCloud2"):
        cloud_to_array(cloud)

