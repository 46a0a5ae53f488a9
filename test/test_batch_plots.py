"""A run's PNG plots: kept figures draw what new ones do, thinned lines keep what each pixel column shows.

A batch's post-processing draws ``trajectory.png``, ``xy_over_time.png`` and ``top_view.png`` for every
run in one kept process, on figures kept from the run before (:mod:`aerial_sim.recording.kept_figures`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from aerial_sim.control.track import TrackRecorder, write_plots
from aerial_sim.recording.kept_figures import forget_figures, thin_to_columns
from aerial_sim.recording.summary import RunSummary, plot_trajectory


def _flight(seed: int, samples: int = 1500, side_m: float = 5.0) -> tuple[TrackRecorder, np.ndarray, RunSummary]:
    """A square flown with seeded wobble: the mission's track and the recorder's summary of it."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 12.0, samples)
    corners = np.array([[0, 0, 1], [side_m, 0, 1], [side_m, side_m, 1], [0, side_m, 1], [0, 0, 1]], dtype=float)
    reference = np.array([np.interp(t, np.linspace(0, 12, 5), corners[:, k]) for k in range(3)]).T
    flown = reference + np.cumsum(rng.normal(0, 0.01, (samples, 3)), axis=0)
    recorder = TrackRecorder()
    for k in range(samples):
        recorder.add(float(t[k]), flown[k], (0.0, 0.0, 0.0), "pattern", reference[k])
    summary = RunSummary(Path("bag"), 12.0, 6.0, [],
                         trajectories={"/drone1/ground_truth/odom": np.column_stack([t + 3.0, flown])})
    return recorder, corners, summary


def _draw(folder: Path, flight, name: str) -> dict[str, bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    recorder, path, summary = flight
    files = write_plots(recorder, path, folder, name) + [plot_trajectory(summary, folder / "trajectory.png")]
    return {f.name: f.read_bytes() for f in files}


def test_a_kept_figure_draws_the_png_a_new_figure_draws(tmp_path):
    small, large = _flight(1), _flight(2, samples=1200, side_m=9.0)
    forget_figures()
    fresh = _draw(tmp_path / "fresh", large, "square_9m")
    forget_figures()
    _draw(tmp_path / "first", small, "hop_1m")  # the figures kept from this run ...
    kept = _draw(tmp_path / "kept", large, "square_9m")  # ... draw the next one
    assert sorted(kept) == ["top_view.png", "trajectory.png", "xy_over_time.png"]
    for name in kept:
        assert kept[name] == fresh[name], f"{name}: the kept figure drew another PNG"
    sizes = {name: Image.open(tmp_path / "kept" / name).size for name in kept}
    assert sizes == {"xy_over_time.png": (880, 550), "top_view.png": (660, 660), "trajectory.png": (1000, 450)}
    assert kept["top_view.png"] != _draw(tmp_path / "again", small, "hop_1m")["top_view.png"]


def test_a_figure_whose_drawing_failed_is_not_kept(tmp_path):
    recorder, path, _ = _flight(3)
    forget_figures()
    with pytest.raises(OSError):
        write_plots(recorder, path, tmp_path / "missing" / "folder", "square")
    files = write_plots(recorder, path, tmp_path, "square")
    assert all(f.stat().st_size > 10_000 for f in files)


def test_thinning_keeps_each_pixel_columns_extremes_and_ends():
    rng = np.random.default_rng(7)
    n, columns = 60_000, 700  # a ten-minute flight at 100 Hz on a 700-pixel axis
    x = np.sort(rng.uniform(0.0, 600.0, n))
    y = np.cumsum(rng.normal(0.0, 0.05, n))
    y[31_234] += 40.0  # a one-sample spike
    y[40_000:40_010] = np.nan  # a gap
    tx, ty = thin_to_columns(x, y, columns)
    assert len(tx) <= 4 * columns + 10 and np.all(np.diff(tx) > 0)
    assert (tx[0], tx[-1]) == (x[0], x[-1]) and np.nanmax(ty) == np.nanmax(y)
    assert np.count_nonzero(np.isnan(ty)) == 10
    bins = np.minimum(((x - x[0]) * columns / (x[-1] - x[0])).astype(int), columns - 1)
    thin_bins = np.minimum(((tx - x[0]) * columns / (x[-1] - x[0])).astype(int), columns - 1)
    for column in range(columns):
        full, thin = y[bins == column], ty[thin_bins == column]
        assert np.nanmin(full) == np.nanmin(thin) and np.nanmax(full) == np.nanmax(thin), column
    # Several series share the kept samples, each keeps its own extremes.
    two = np.column_stack([y, -2.0 * y])
    tx2, ty2 = thin_to_columns(x, two, columns)
    assert ty2.shape[1] == 2 and np.nanmin(ty2[:, 1]) == np.nanmin(two[:, 1])
    # Short, unsorted or broken series are drawn as they are.
    for args in ((x[:100], y[:100], columns), (x, y, 0), (np.full(n, 1.0), y, columns)):
        same_x, same_y = thin_to_columns(*args)
        assert len(same_x) == len(args[0])


def test_a_long_flights_altitude_plot_looks_as_with_every_sample(tmp_path):
    """60,000 samples drawn thinned to the axes' pixel columns: the PNG differs only in anti-aliasing."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    rng = np.random.default_rng(11)
    t = np.linspace(0.0, 600.0, 60_000)
    z = 10.0 + np.cumsum(rng.normal(0.0, 0.02, t.size))
    images = []
    for thinned in (False, True):
        figure = Figure(figsize=(6, 3), dpi=100)
        axis = figure.add_axes((0.1, 0.15, 0.85, 0.8))
        columns = round(axis.get_position().width * 600)
        axis.plot(*(thin_to_columns(t, z, columns) if thinned else (t, z)))
        figure.savefig(tmp_path / f"{thinned}.png")
        images.append(np.asarray(Image.open(tmp_path / f"{thinned}.png").convert("L"), dtype=int))
    full, thin = images
    for image in images:
        assert (image < 128).any(axis=0).sum() > 400  # the line crosses the axes
    # Every pixel column shows the line between the same top and bottom rows; at most 1 % of the
    # pixels are another shade (where many short segments overlapped, fewer do).
    assert np.array_equal(_inked_extent(full), _inked_extent(thin))
    assert (np.abs(full - thin) > 64).mean() < 0.01


def _inked_extent(image: np.ndarray) -> np.ndarray:
    """Per pixel column: its topmost and bottommost dark row (-1 where it has none)."""
    ink = image < 128
    rows = np.arange(image.shape[0])[:, None]
    top = np.where(ink, rows, image.shape[0]).min(axis=0)
    bottom = np.where(ink, rows, -1).max(axis=0)
    return np.where(ink.any(axis=0), np.stack([top, bottom]), -1)


def test_draw_plots_draws_a_plotless_sweeps_pngs_later_and_names_a_broken_run(tmp_path, capsys):
    """``aerial_sim batch SWEEP --draw-plots [RUN_ID ...]``: a sweep flown with ``run.plots: false`` gets its
    runs' PNGs afterwards from their bags and tracks; a run whose track is broken is one line, the others drawn."""
    from test_record_bag import cdr_odometry

    from aerial_sim.batch.manifest import run_dir, write_result
    from aerial_sim.batch.sweep import load_sweep
    from aerial_sim.cli.batch import main
    from aerial_sim.recording.bag import BagWriter

    sweep_file = tmp_path / "plotless.yaml"
    sweep_file.write_text("name: plotless\nbase: {scene: empty, mission: hop_1m, use_camera: false}\n"
                          "grid: {seed: [0, 1, 2]}\nrun: {plots: false}\n")
    sweep, out = load_sweep(sweep_file), tmp_path / "out"
    recorder, path, _ = _flight(5, samples=400)
    for index, run in enumerate(sweep.runs[:2]):  # the third never finished
        folder = run_dir(out, run)
        with BagWriter(folder / "bag") as writer:
            writer.add_topic("/drone1/ground_truth/odom", "nav_msgs/msg/Odometry")
            for k in range(100):
                writer.write("/drone1/ground_truth/odom", cdr_odometry(0.04 * k, 0.05 * k), k * 40_000_000)
        recorder.write_csv(folder / "track.csv")
        np.savetxt(folder / "commanded_path.csv", path, delimiter=",", header="x_m,y_m,z_m", comments="")
        (folder / "metrics.json").write_text('{"mission": {"name": "hop_1m"}}')
        write_result(out, run, {"run_id": run.run_id, "status": "ok", "parameters": run.parameters})
    (run_dir(out, sweep.runs[1]) / "track.csv").write_text("time_s,x_m\nnot a number,1\n")

    assert main([str(sweep_file), "--out", str(out), "--draw-plots"]) == 1
    printed = capsys.readouterr().out
    first, broken = sweep.runs[0].run_id, sweep.runs[1].run_id
    assert f"{broken}: plots not drawn: ValueError" in printed and "4 PNGs drawn" in printed, printed
    assert sorted(p.name for p in run_dir(out, sweep.runs[0]).glob("*.png")) == [
        "top_view.png", "trajectory.png", "xy_over_time.png"]
    assert Image.open(run_dir(out, sweep.runs[0]) / "xy_over_time.png").size == (880, 550)
    # Again, for the first run only: nothing is missing, nothing drawn; a run id not in the sweep is refused.
    assert main([str(sweep_file), "--out", str(out), "--draw-plots", first]) == 0
    assert "0 PNGs drawn" in capsys.readouterr().out
    assert main([str(sweep_file), "--out", str(out), "--draw-plots", "0099-nosuchrun"]) == 2
    assert "no run 0099-nosuchrun" in capsys.readouterr().err
