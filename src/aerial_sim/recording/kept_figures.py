"""Matplotlib figures kept between plots of one layout, and lines thinned to what a plot's pixels can show.

A batch draws the same three PNGs for every run (``trajectory.png``, ``xy_over_time.png``,
``top_view.png``) in one kept post-processing process. Building a figure (its axes, their ticks,
tick labels and text objects) costs about a fifth of drawing it; a figure kept from the run
before gets the new run's lines (``set_data``), titles and limits (``relim``, ``autoscale_view``)
and is drawn again. The PNG is the one a new figure gives, byte for byte
(``test/test_batch_plots.py``).

:func:`thin_to_columns` keeps, of a time series drawn ``columns`` pixels wide, each pixel column's
first, last, lowest and highest point (min/max decimation, as plotting libraries for long series
do): the drawn line reaches the same extremes in every column, so a
spike or a step shows as it would with every sample, and a ten-minute flight's 60,000 samples
cost what about 3,000 do.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np

#: A title's height over its axes, given: where matplotlib puts it when nothing is above the axes, without the
#: pass over every tick label's extent it makes at each draw to find that out (about a fifth of a plot's CPU).
TITLE_Y = 1.0
#: Layouts kept at most (e.g. one trajectory layout per set of vehicle names); the oldest goes first.
MAX_KEPT = 8

_kept: "OrderedDict[tuple, Any]" = OrderedDict()
_lock = threading.Lock()


@contextmanager
def kept_figure(key: tuple, build: Callable[[], Any]) -> Iterator[Any]:
    """The parts (figure and artists) that ``build()`` made for ``key``, built at the first use.

    Held for the caller alone until the ``with`` block ends (one lock for every kept figure: a
    process draws one plot at a time). A block that raises drops its figure: the next use builds a
    new one rather than draw on a figure left half updated.
    """
    with _lock:
        parts = _kept.pop(key, None)
        if parts is None:
            parts = build()
        yield parts  # (a block that raises ends here: the figure is not kept)
        _kept[key] = parts
        while len(_kept) > MAX_KEPT:
            _kept.popitem(last=False)


def forget_figures() -> None:
    """Drop every kept figure (tests; a process that is done plotting)."""
    with _lock:
        _kept.clear()


def thin_to_columns(x: np.ndarray, ys: np.ndarray, columns: int) -> tuple[np.ndarray, np.ndarray]:
    """``x`` (N, increasing) and ``ys`` (N or N, K) thinned to at most four points per pixel column per series.

    The x range is split into ``columns`` equal bins (the axes' width in pixels); every bin keeps its
    first and last sample and, for each of the K series, the samples of its minimum and maximum, in
    their original order (K series share the kept indices, so they stay aligned in x). Series shorter
    than four points per column are returned as they are.
    """
    x = np.asarray(x, dtype=float)
    ys = np.asarray(ys, dtype=float)
    n = len(x)
    if columns < 1 or n <= 4 * columns or not np.all(np.isfinite(x)) or x[-1] <= x[0]:
        return x, ys
    bins = np.minimum(((x - x[0]) * (columns / (x[-1] - x[0]))).astype(np.int64), columns - 1)
    starts = np.flatnonzero(np.r_[True, bins[1:] != bins[:-1]])  # x increases: each bin is one run of samples
    ends = np.r_[starts[1:], n]
    keep = np.zeros(n, dtype=bool)
    keep[starts] = True
    keep[ends - 1] = True
    for series in (ys[:, None] if ys.ndim == 1 else ys).T:
        finite = np.where(np.isfinite(series), series, np.nan)
        filled_low = np.where(np.isnan(finite), np.inf, finite)
        filled_high = np.where(np.isnan(finite), -np.inf, finite)
        keep[_argext(filled_low, starts, ends, np.minimum)] = True
        keep[_argext(filled_high, starts, ends, np.maximum)] = True
        keep |= np.isnan(finite)  # a gap stays a gap
    return x[keep], ys[keep]


def _argext(values: np.ndarray, starts: np.ndarray, ends: np.ndarray, ufunc) -> np.ndarray:
    """Index of each run's extreme (``np.minimum`` or ``np.maximum``) of ``values``, runs ``starts:ends``."""
    extremes = ufunc.reduceat(values, starts)
    run = np.repeat(np.arange(len(starts)), ends - starts)
    hits = np.flatnonzero(values == extremes[run])
    first = np.unique(run[hits], return_index=True)[1]  # the first hit of each run
    return hits[first]


__all__ = ["MAX_KEPT", "TITLE_Y", "forget_figures", "kept_figure", "thin_to_columns"]
