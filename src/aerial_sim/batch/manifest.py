"""The batch's record of its runs: one ``result.json`` per run and ``manifest.csv`` over all of them.

Layout of a batch folder (``--out DIR``)::

    DIR/sweep.yaml                 the sweep as run (a copy)
    DIR/manifest.csv               one row per run (columns below), rewritten after every run
    DIR/summary.png                metrics across the sweep's axes
    DIR/runs/<run_id>/result.json  the run's entry, written last, atomically
    DIR/runs/<run_id>/...          bag/, dataset/, metrics.json, track.csv, summary.txt, logs/

A run is finished when its ``result.json`` says ``ok`` for the same parameters:
the file is written after everything else of the run, by rename (atomic on
POSIX filesystems, NFS included), so a batch killed at any moment leaves
either a complete entry or none, and re-running the same command skips exactly
the finished runs. The manifest is rebuilt from the entries, also by rename.
Paths in both are relative to DIR, so the folder can be moved or mounted elsewhere.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from aerial_sim.batch.sweep import RunSpec, Sweep

RESULT_FILE = "result.json"
MANIFEST_FILE = "manifest.csv"
OK, FAILED, PENDING = "ok", "failed", "pending"

#: Manifest columns after ``run_id``, ``status``, ``attempts`` and the sweep's parameter columns.
RESULT_COLUMNS = (
    "domain_id",
    "wall_s",
    "sim_s",
    "real_time_factor",
    "cpu_s",
    "cpu_per_sim_s",
    "flight_cpu_per_sim_s",
    "hausdorff_m",
    "rms_cross_track_m",
    "max_cross_track_m",
    "messages",
    "drops",
    "bag_mb",
    "bag_digest",
    "bag",
    "dataset",
    "log",
    "error",
    "warnings",
)


def run_dir(out_dir: Path, run: RunSpec) -> Path:
    return Path(out_dir) / "runs" / run.run_id


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_result(out_dir: Path, run: RunSpec, result: Mapping[str, Any]) -> Path:
    """Write the run's entry (the last file a run writes)."""
    path = run_dir(out_dir, run) / RESULT_FILE
    write_atomic(path, json.dumps(dict(result), indent=2, sort_keys=False) + "\n")
    return path


def read_result(out_dir: Path, run: RunSpec) -> dict[str, Any] | None:
    """The run's entry, or None when there is none or it is unreadable (the run is then redone)."""
    try:
        result = json.loads((run_dir(out_dir, run) / RESULT_FILE).read_text())
    except (OSError, ValueError):
        return None
    return result if isinstance(result, dict) else None


def is_finished(out_dir: Path, run: RunSpec) -> bool:
    """True when the run has an ``ok`` entry for exactly these parameters."""
    result = read_result(out_dir, run)
    return bool(result) and result.get("status") == OK and result.get("parameters") == run.parameters


def pending_runs(out_dir: Path, sweep: Sweep) -> list[RunSpec]:
    """The runs still to do: no entry, a failed one, or one for other parameters."""
    return [run for run in sweep.runs if not is_finished(out_dir, run)]


def manifest_rows(out_dir: Path, sweep: Sweep) -> list[dict[str, Any]]:
    """One row per run of the sweep, from its entry (``pending`` when it has none yet)."""
    return [manifest_row(out_dir, sweep, run) for run in sweep.runs]


def manifest_row(out_dir: Path, sweep: Sweep, run: RunSpec) -> dict[str, Any]:
    """The run's row of the manifest, from its entry (``pending`` when it has none yet)."""
    result = read_result(out_dir, run)
    if result is None or result.get("parameters") != run.parameters:
        result = {"status": PENDING, "attempts": 0}
    row = {"run_id": run.run_id, "status": result.get("status"), "attempts": result.get("attempts", 0)}
    row.update({key: _cell(run.parameters.get(key)) for key in sweep.keys})
    row.update({column: _cell(result.get(column)) for column in RESULT_COLUMNS})
    return row


def write_manifest(out_dir: Path, sweep: Sweep, rows: Sequence[Mapping[str, Any]] | None = None) -> Path:
    """Rebuild ``DIR/manifest.csv`` from the runs' entries (or from ``rows``), atomically."""
    rows = manifest_rows(out_dir, sweep) if rows is None else rows
    columns = ["run_id", "status", "attempts", *sweep.keys, *RESULT_COLUMNS]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path = Path(out_dir) / MANIFEST_FILE
    write_atomic(path, buffer.getvalue())
    return path


class LiveManifest:
    """``DIR/manifest.csv`` during a batch: the rows read once, a finished run's row refreshed from its entry alone.

    Rebuilding the manifest from every run's entry after each run made a batch's bookkeeping grow with the
    square of its runs (10,000 runs: 10,000 entries read after each of them). Here the file is rewritten from
    the rows in memory after a run finishes, unless writing it has taken more than ``share`` of the time
    since the last write began (a sweep of a hundred thousand runs: a rewrite every few seconds, not after
    each run); :meth:`write` with ``force`` at the end.
    """

    def __init__(self, out_dir: Path, sweep, share: float = 0.05, clock=time.monotonic):  # sweep: a batch.sweep.Sweep
        self.out_dir, self.sweep, self.share, self.clock = Path(out_dir), sweep, share, clock
        self.runs = {run.run_id: run for run in sweep.runs}
        self.rows = {run.run_id: manifest_row(out_dir, sweep, run) for run in sweep.runs}
        self._next = -float("inf")
        self.dirty = True

    def update(self, run_id: str) -> None:
        """The run's row from its entry as it is on disk now."""
        if run_id in self.runs:
            self.rows[run_id] = manifest_row(self.out_dir, self.sweep, self.runs[run_id])
            self.dirty = True

    def write(self, force: bool = False) -> bool:
        """Rewrite the file if anything changed and it is due (``force``: if anything changed); True if written."""
        began = self.clock()
        if not self.dirty or (not force and began < self._next):
            return False
        write_manifest(self.out_dir, self.sweep, list(self.rows.values()))
        self.dirty = False
        self._next = began + (self.clock() - began) / self.share
        return True


def read_manifest(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def count_statuses(results: Iterable[Mapping[str, Any] | None]) -> dict[str, int]:
    counts = {OK: 0, FAILED: 0, PENDING: 0}
    for result in results:
        status = (result or {}).get("status", PENDING)
        counts[status] = counts.get(status, 0) + 1
    return counts


def _cell(value: Any) -> Any:
    """Lists (vectors) as JSON text in one cell; None as an empty cell."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value)
    return value
