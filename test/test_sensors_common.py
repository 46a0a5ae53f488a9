"""The reusable sensor pieces: resampling to exact instants, Gauss-Markov drift, filters, delay."""

import dataclasses
import math
import subprocess
import sys

import numpy as np
import pytest

from aerial_sim.config import ParamsError
from aerial_sim.sensors.filters import DelayLine, FirstOrderFilter
from aerial_sim.sensors.mounting import Mount, sensor_mount
from aerial_sim.sensors.noise import GaussMarkov
from aerial_sim.sensors.quaternions import quat_from_rpy, rotation_matrix
from aerial_sim.sensors.resampling import Resampler, resample_for
from aerial_sim.sensors.truth import TruthSample, truth_from_odometry


def truth_stream(rate_hz, duration_s, speed=2.0):
    """Truth moving east at ``speed`` and yawing at 0.5 rad/s, sampled at ``rate_hz``."""
    for k in range(int(round(duration_s * rate_hz)) + 1):
        t = k / rate_hz
        yield TruthSample(t, position=(speed * t, 0.0, 1.0), orientation=quat_from_rpy(0, 0, 0.5 * t))


def test_resampler_gives_exact_instants_at_the_sensor_rate_whatever_the_truth_rate():
    resampler = Resampler(200.0)
    samples = [s for truth in truth_stream(250.0, 2.0) for s in resampler.push(truth)]
    assert len(samples) == 401  # t = 0, 0.005, ..., 2.0
    times = np.array([s.time_s for s in samples])
    assert np.allclose(times, np.arange(401) / 200.0, atol=1e-12, rtol=0)
    # Interpolated between bracketing truth samples: linear motion and yaw come out exact.
    east = np.array([s.position[0] for s in samples])
    assert np.allclose(east, 2.0 * times, atol=1e-9)
    yaw = np.array([2 * math.atan2(s.orientation[3], s.orientation[0]) for s in samples])
    assert np.allclose(yaw, 0.5 * times, atol=1e-9)


def test_resampler_hold_mode_keeps_the_older_truth_sample():
    resampler = Resampler(100.0, mode="hold")
    out = [s for truth in truth_stream(30.0, 1.0) for s in resampler.push(truth)]
    assert len(out) == 101
    for s in out:  # held value is the truth at the latest truth instant not after the sample
        last_truth_time = math.floor(s.time_s * 30.0 + 1e-9) / 30.0
        assert s.position[0] == pytest.approx(2.0 * last_truth_time, abs=1e-9)


def test_resampler_starts_over_when_time_goes_backwards():
    resampler = Resampler(50.0)
    for truth in truth_stream(250.0, 1.0):
        resampler.push(truth)
    out = resampler.push(TruthSample(0.0))
    assert resampler.restarted and [s.time_s for s in out] == [0.0]
    with pytest.raises(ParamsError, match="rate_hz"):
        Resampler(0.0)


def sensor_models():
    from aerial_sim.sensors.barometer import Barometer
    from aerial_sim.sensors.gps import Gps
    from aerial_sim.sensors.imu import Imu
    from aerial_sim.sensors.magnetometer import Magnetometer

    return {"imu": Imu, "barometer": Barometer, "magnetometer": Magnetometer, "gps": Gps}


def measurement_numbers(measurement) -> np.ndarray:
    """Every number a measurement (or list of GPS fixes) carries, flattened."""
    if isinstance(measurement, list):
        return np.concatenate([measurement_numbers(m) for m in measurement] or [np.zeros(0)])
    names = getattr(measurement, "_fields", None) or [f.name for f in dataclasses.fields(measurement)]  # named tuple or dataclass
    values = [getattr(measurement, name) for name in names]
    return np.concatenate([np.ravel(np.asarray(v, dtype=float)) for v in values if not isinstance(v, str)])


@pytest.mark.parametrize("name", ["imu", "barometer", "magnetometer", "gps"])
def test_a_restarted_simulation_gives_a_sensor_the_same_samples_as_a_fresh_run(name):
    """Sim time going back (a new run) resets the model, noise streams included: run 2 = run 1."""
    model = sensor_models()[name]()
    resampler = Resampler(model.params.rate_hz)
    dt = 1.0 / model.params.rate_hz

    def run():
        return [measurement_numbers(model.step(dt, sample))
                for truth in truth_stream(250.0, 1.0) for sample in resample_for(model, resampler, truth)]

    first, second = run(), run()
    assert len(first) > 10
    np.testing.assert_array_equal(np.concatenate(first), np.concatenate(second))


def test_gauss_markov_has_the_configured_std_and_time_constant_at_any_step():
    tau, sigma = 10.0, 3.0
    for dt in (0.1, 2.0):
        process = GaussMarkov(tau, sigma, np.random.default_rng(1), shape=(20000,))
        start = process.value.copy()
        for _ in range(int(round(tau / dt))):
            process.step(dt)
        assert np.std(process.value) == pytest.approx(sigma, rel=0.03)
        # autocorrelation one time constant later is 1/e (std of the estimate ~ 1/sqrt(20000))
        assert np.corrcoef(start, process.value)[0, 1] == pytest.approx(math.exp(-1), abs=0.03)


def test_gauss_markov_paper_form_only_reaches_a_rate_dependent_fraction_of_sigma():
    tau, sigma, dt = 1.0, 1.0, 0.02
    process = GaussMarkov(tau, sigma, np.random.default_rng(2), shape=(20000,), discretization="paper")
    for _ in range(500):  # 10 tau: stationary
        process.step(dt)
    w = math.exp(-dt / tau)
    assert np.std(process.value) == pytest.approx(sigma * math.sqrt((1 - w) / (1 + w)), rel=0.03)


def test_first_order_filter_decays_exponentially_and_delay_line_holds_items():
    f = FirstOrderFilter(tau_s=0.9, initial=100.0)
    for _ in range(45):
        f.step(0.02, 0.1)
    assert f.value == pytest.approx(0.1 + 99.9 * math.exp(-1.0), rel=1e-9)
    line = DelayLine(0.2)
    line.push(1.0, "a")
    assert line.pop_ready(1.19) == [] and line.pop_ready(1.2) == [(1.2, "a")]


def test_truth_from_odometry_rotates_the_body_twist_into_the_world():
    from nav_msgs.msg import Odometry

    msg = Odometry()
    msg.header.stamp.sec, msg.header.stamp.nanosec = 3, 500_000_000
    q = quat_from_rpy(0, 0, math.pi / 2)  # facing north
    o = msg.pose.pose.orientation
    o.w, o.x, o.y, o.z = q
    msg.twist.twist.linear.x = 2.0  # forward
    truth = truth_from_odometry(msg)
    assert truth.time_s == 3.5
    assert np.allclose(truth.velocity_world, (0.0, 2.0, 0.0), atol=1e-12)
    msg.pose.pose.position.x = float("nan")
    assert truth_from_odometry(msg) is None


def test_rotation_matrix_of_rpy_matches_the_axes():
    r = rotation_matrix(quat_from_rpy(0.0, 0.0, math.pi / 2))
    assert np.allclose(r @ [1, 0, 0], [0, 1, 0], atol=1e-12)


def test_sensor_core_modules_never_import_rclpy():
    code = (
        "import sys, aerial_sim.sensors.truth, aerial_sim.sensors.quaternions, aerial_sim.sensors.mounting,"
        " aerial_sim.sensors.params, aerial_sim.sensors.resampling, aerial_sim.sensors.noise, aerial_sim.sensors.filters,"
        " aerial_sim.sensors.imu, aerial_sim.sensors.barometer,"
        " aerial_sim.sensors.magnetometer, aerial_sim.sensors.gps, aerial_sim.environment.magnetic;"
        " sys.exit('rclpy' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_sensor_mount_is_the_params_mount_or_the_body_origin():
    from aerial_sim.sensors.barometer import BarometerParams
    from aerial_sim.sensors.imu import ImuParams

    assert sensor_mount(BarometerParams()) == Mount()  # no mount field: measured at the body origin
    lever = Mount(position_m=(0.1, 0.0, 0.05), rpy_rad=(0.0, 0.0, math.pi / 2))
    assert sensor_mount(dataclasses.replace(ImuParams(), mount=lever)) is lever


def test_a_normal_stream_hands_out_each_draw_in_order_across_blocks_and_again_after_a_rewind():
    from aerial_sim.sensors.noise import NormalStream, RandomCheckpoint

    rng = np.random.default_rng(42)
    checkpoint = RandomCheckpoint(rng)
    stream = NormalStream(rng)
    reference = np.random.default_rng(42)
    sizes = [3, 1, 2] * 700 + [NormalStream.BLOCK + 5]  # several blocks, a draw across each boundary, one larger than a block
    expected = [reference.standard_normal(size).tolist() for size in sizes]
    assert [stream.take(size) for size in sizes] == expected
    checkpoint.restore()
    stream.restart()
    assert [stream.take(size) for size in sizes[:50]] == expected[:50]
