"""``DIR/summary.png``: each metric of the finished runs against each axis of the sweep (matplotlib Agg).

One column per axis (a key that varies across runs; the run index when none
does), one row per metric. Numeric axes are scatter plots on a numeric scale;
numeric vectors (a wind) are plotted against their magnitude; other axes
(scenes, vehicles, presets) are categories, with the runs of one category side by side. Failed runs are counted in the title, not plotted.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from aerial_sim.batch.manifest import OK

METRICS = (
    ("hausdorff_m", "Hausdorff [m]"),
    ("rms_cross_track_m", "RMS cross-track [m]"),
    ("real_time_factor", "sim s / wall s"),
    ("drops", "dropped samples"),
)


def plot_summary(rows: Sequence[Mapping[str, Any]], axes: Sequence[str], path: Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    done = [row for row in rows if row.get("status") == OK]
    columns = list(axes) or ["run"]
    figure = Figure(figsize=(3.6 * len(columns) + 0.8, 2.4 * len(METRICS) + 0.6), dpi=100)
    grid = figure.subplots(len(METRICS), len(columns), squeeze=False)
    for c, axis in enumerate(columns):
        labels = [_axis_value(row, axis, i) for i, row in enumerate(done)]
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in labels)
        categories = list(dict.fromkeys(labels)) if not numeric else []
        for r, (metric, label) in enumerate(METRICS):
            ax = grid[r][c]
            points = [(x, _number(row.get(metric))) for x, row in zip(labels, done)]
            points = [(x, y) for x, y in points if y is not None]
            if numeric:
                ax.plot([p[0] for p in points], [p[1] for p in points], "o", alpha=0.7)
            else:
                positions = {v: i for i, v in enumerate(categories)}
                spread = _spread([positions[p[0]] for p in points])
                ax.plot(spread, [p[1] for p in points], "o", alpha=0.7)
                ax.set_xticks(range(len(categories)))
                ax.set_xticklabels([_short(v) for v in categories], rotation=20, fontsize=8)
            ax.grid(True, alpha=0.3)
            if c == 0:
                ax.set_ylabel(label)
            if r == len(METRICS) - 1:
                ax.set_xlabel(f"|{axis}|" if numeric and _is_vector_axis(done, axis) else axis)
    failed = len(rows) - len(done)
    figure.suptitle(f"{title}  ({len(done)} runs done, {failed} not)" if title else f"{len(done)} runs done, {failed} not")
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path)
    return path


def _axis_value(row: Mapping[str, Any], axis: str, index: int) -> Any:
    if axis == "run":
        return index
    value = row.get(axis, "")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    if isinstance(value, list):
        numbers = [_number(v) for v in value]
        return math.hypot(*numbers) if numbers and None not in numbers else tuple(value)
    return value


def _is_vector_axis(rows: Sequence[Mapping[str, Any]], axis: str) -> bool:
    return any(isinstance(row.get(axis), str) and row[axis].startswith("[") for row in rows)


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _spread(positions: list[int], width: float = 0.3) -> list[float]:
    """Runs sharing a category side by side around its position."""
    seen: dict[int, int] = {}
    totals = {p: positions.count(p) for p in positions}
    out = []
    for p in positions:
        k = seen.get(p, 0)
        seen[p] = k + 1
        n = totals[p]
        out.append(p + (0.0 if n == 1 else width * (k / (n - 1) - 0.5)))
    return out


def _short(value: Any) -> str:
    text = ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) if isinstance(value, tuple) else str(value)
    return text if len(text) <= 18 else text[:17] + "…"
