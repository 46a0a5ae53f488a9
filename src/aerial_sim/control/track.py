"""Comparing a flown track with the commanded path, and writing a run's results (pure, no ROS).

The AirSim paper (Shah et al., FSR 2017, sec. 4) compares two tracks with the
symmetric Hausdorff distance, H(A, B) = max(sup_a d(a, B), sup_b d(b, A)):
the largest distance from any point of either curve to the other curve. Here
both curves are polylines and d(., polyline) is the exact point-to-segment
distance, so the result does not depend on how densely either was sampled
(scipy's ``directed_hausdorff`` works on point sets only, which would make the
commanded square's 5 m sides a handful of points). The RMS cross-track error is
sqrt(mean over track points of d(point, path)^2).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: Track points handled per block in the distance computation (bounds memory).
_BLOCK = 512


def distances_to_polyline(points, polyline) -> np.ndarray:
    """Distance from each of ``points`` (N, 3) to the polyline through ``polyline`` (M, 3)."""
    points = np.atleast_2d(np.asarray(points, dtype=float))
    polyline = np.atleast_2d(np.asarray(polyline, dtype=float))
    if len(polyline) == 1:
        return np.linalg.norm(points - polyline[0], axis=1)
    starts = polyline[:-1]
    segments = polyline[1:] - starts
    squared = np.maximum(np.einsum("ij,ij->i", segments, segments), 1e-18)
    result = np.empty(len(points))
    for first in range(0, len(points), _BLOCK):
        block = points[first : first + _BLOCK]
        offsets = block[:, None, :] - starts[None, :, :]  # (n, m, 3)
        fraction = np.clip(np.einsum("nmk,mk->nm", offsets, segments) / squared, 0.0, 1.0)
        nearest = starts[None, :, :] + fraction[..., None] * segments[None, :, :]
        result[first : first + _BLOCK] = np.linalg.norm(block[:, None, :] - nearest, axis=2).min(axis=1)
    return result


@dataclass(frozen=True)
class TrackMetrics:
    hausdorff_m: float
    rms_cross_track_m: float
    max_cross_track_m: float
    samples: int


def compare_tracks(track, path) -> TrackMetrics:
    """Symmetric Hausdorff distance and cross-track error between a flown ``track`` and a commanded ``path``."""
    track = np.asarray(track, dtype=float)
    path = np.asarray(path, dtype=float)
    track_to_path = distances_to_polyline(track, path)
    path_to_track = distances_to_polyline(path, track)
    return TrackMetrics(
        hausdorff_m=float(max(track_to_path.max(), path_to_track.max())),
        rms_cross_track_m=float(math.sqrt(np.mean(track_to_path**2))),
        max_cross_track_m=float(track_to_path.max()),
        samples=len(track),
    )


#: A row of :class:`TrackRecorder` as ``csv.writer`` (excel dialect) writes it with 6 decimals.
_ROW_FORMAT = "%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%s,%.6f,%.6f,%.6f\r\n"
_ROW_TYPES = (float,) * 7 + (str,) + (float,) * 3


def _plain_rows(rows) -> bool:
    """Whether every row is ten floats and a phase (exactly those types, in that order) with no character the
    CSV dialect would quote."""
    if not all(tuple(map(type, row)) == _ROW_TYPES for row in rows):
        return False
    return all(phase and not any(c in phase for c in ',"\r\n') for phase in {row[7] for row in rows})


@dataclass
class TrackRecorder:
    """Ground-truth samples of a flight, each tagged with the mission phase and the reference point."""

    rows: list

    def __init__(self):
        self.rows = []

    def add(self, time_s: float, position, velocity, phase: str, reference=None) -> None:
        ref = reference if reference is not None else (math.nan, math.nan, math.nan)
        self.rows.append((time_s, *map(float, position), *map(float, velocity), phase, *map(float, ref)))

    def relabel_from(self, time_s: float, phase: str, after: bool = False) -> None:
        """Tag the samples at or after ``time_s`` (``after``: after it only) with ``phase`` (a phase that
        took effect at that stamp)."""
        for index in range(len(self.rows) - 1, -1, -1):
            row = self.rows[index]
            if row[0] < time_s or (after and row[0] == time_s):
                break
            self.rows[index] = (*row[:7], phase, *row[8:])

    def truncate_after(self, time_s: float) -> None:
        """Drop the samples stamped after ``time_s`` (the end of the flight)."""
        self.rows = [row for row in self.rows if row[0] <= time_s]

    def positions(self, phase: str | None = None) -> np.ndarray:
        return np.array([row[1:4] for row in self.rows if phase is None or row[7] == phase]).reshape(-1, 3)

    def times(self, phase: str | None = None) -> np.ndarray:
        return np.array([row[0] for row in self.rows if phase is None or row[7] == phase])

    @classmethod
    def from_csv(cls, path: Path) -> "TrackRecorder":
        """The samples :meth:`write_csv` wrote (to 6 decimals), e.g. to draw the plots after the flight."""
        recorder = cls()
        with open(path, newline="") as handle:
            rows = csv.reader(handle)
            next(rows)  # header
            for row in rows:
                recorder.rows.append((*map(float, row[:7]), row[7], *map(float, row[8:11])))
        return recorder

    def write_csv(self, path: Path) -> None:
        """The samples as CSV, 6 decimals. Rows as :meth:`add` makes them (ten floats and a phase that needs no
        quoting) are written with one format string, the bytes ``csv.writer`` writes for them (a smoke run's
        2,600 rows: a fraction of the row-by-row writer's time, paid after landing in the flight's CPU);
        any other row goes through ``csv.writer``."""
        with open(path, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["time_s", "x_m", "y_m", "z_m", "vx_m_s", "vy_m_s", "vz_m_s", "phase", "ref_x_m", "ref_y_m", "ref_z_m"])
            if _plain_rows(self.rows):
                handle.write("".join(_ROW_FORMAT % row for row in self.rows))
                return
            for row in self.rows:
                writer.writerow([f"{v:.6f}" if isinstance(v, float) else v for v in row])


def write_plots(recorder: TrackRecorder, path: np.ndarray, folder: Path, title: str) -> list[Path]:
    """x/y over time and a top view (matplotlib's Agg canvas: no display needed).

    Plain ``Figure`` objects with fixed margins, no pyplot and no ``tight_layout``: the
    mission writes these after landing, on the way to ending the launch, and pyplot's
    import and the layout pass made up about half of that time. The figures are kept for the
    next call (a batch's post-processing draws them for every run) and the time series thinned
    to the axes' pixel columns (:mod:`aerial_sim.recording.kept_figures`).
    """
    from aerial_sim.recording.kept_figures import TITLE_Y, kept_figure, thin_to_columns

    data = recorder.rows
    times = np.array([r[0] for r in data], dtype=float)
    xyz = recorder.positions().reshape(-1, 3)
    refs = np.array([r[8:11] for r in data], dtype=float).reshape(-1, 3)
    written = []

    with kept_figure(("track", "xy_over_time"), _xy_over_time_figure) as (figure, axes, lines):
        columns = round(axes[0].get_position().width * figure.get_figwidth() * XY_DPI)  # its width in pixels
        thin_t, thin = thin_to_columns(times, np.column_stack([xyz[:, :2], refs[:, :2]]), columns)
        for index in (0, 1):
            lines[index][0].set_data(thin_t, thin[:, index])
            lines[index][1].set_data(thin_t, thin[:, 2 + index])
        for axis in axes:  # (shared x: every axis's data first, then the limits)
            axis.relim()
        for axis in axes:
            axis.autoscale_view()
        axes[0].set_title(f"{title}: position over time", y=TITLE_Y)
        written.append(folder / "xy_over_time.png")
        figure.savefig(written[-1], dpi=XY_DPI)

    with kept_figure(("track", "top_view"), _top_view_figure) as (figure, axis, commanded, flown):
        commanded.set_data(path[:, 0], path[:, 1])
        flown.set_data(xyz[:, 0], xyz[:, 1])
        axis.relim()
        axis.autoscale_view()
        axis.set_title(f"{title}: top view", y=TITLE_Y)
        written.append(folder / "top_view.png")
        figure.savefig(written[-1], dpi=XY_DPI)
    return written


#: Resolution of the mission's plots, dots per inch.
XY_DPI = 110


def _xy_over_time_figure():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 5))
    figure.subplots_adjust(left=0.1, right=0.97, bottom=0.1, top=0.93, hspace=0.08)
    axes = figure.subplots(2, 1, sharex=True)
    lines = []
    for axis, label in ((axes[0], "x (east) [m]"), (axes[1], "y (north) [m]")):
        flown, = axis.plot([], [], label="flown (ground truth)")
        commanded, = axis.plot([], [], "--", label="commanded")
        lines.append((flown, commanded))
        axis.set_ylabel(label)
        axis.grid(True, alpha=0.3)
    axes[0].legend(loc="best")
    axes[1].set_xlabel("sim time [s]")
    return figure, axes, lines


def _top_view_figure():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 6))
    figure.subplots_adjust(left=0.13, right=0.97, bottom=0.09, top=0.94)
    axis = figure.subplots()
    commanded, = axis.plot([], [], "k--", linewidth=1, label="commanded path")
    flown, = axis.plot([], [], linewidth=1.2, label="flown (ground truth)")
    axis.set_aspect("equal", adjustable="datalim")
    axis.set_xlabel("x (east) [m]")
    axis.set_ylabel("y (north) [m]")
    axis.grid(True, alpha=0.3)
    axis.legend(loc="best")
    return figure, axis, commanded, flown


def write_plots_from_csv(folder: Path, title: str) -> list[Path]:
    """:func:`write_plots` from a run folder's ``track.csv`` and ``commanded_path.csv`` (the mission's own files)."""
    path = np.loadtxt(folder / "commanded_path.csv", delimiter=",", skiprows=1, ndmin=2)
    return write_plots(TrackRecorder.from_csv(folder / "track.csv"), path, folder, title)


def summary_text(mission_name: str, metrics: TrackMetrics, speed_m_s: float, duration_s: float, path_length_m: float,
                 paper_hausdorff_m: float | None = None) -> str:
    """The one-screen summary printed at the end of a run and saved as summary.txt."""
    lines = [
        f"mission            {mission_name}",
        f"path length        {path_length_m:.1f} m at up to {speed_m_s:g} m/s, flown in {duration_s:.1f} s (sim time)",
        f"Hausdorff distance {metrics.hausdorff_m:.3f} m (track vs commanded path)",
        f"RMS cross-track    {metrics.rms_cross_track_m:.3f} m   (max {metrics.max_cross_track_m:.3f} m, {metrics.samples} samples)",
    ]
    if paper_hausdorff_m is not None:
        lines.append(f"paper (sim vs real) {paper_hausdorff_m:.2f} m  (AirSim, FSR 2017, sec. 4)")
    return "\n".join(lines)
