"""The scene's colliders sorted into a grid of cells on the ground, so a step tests only those near the body.

The scalar step (:meth:`aerial_sim.physics.rigid_body.RigidBody.advance`) compares the body's bounding
sphere with each collider's axis-aligned ``bounds`` before asking it for a contact. With a few dozen
objects (``urban``) that loop is nothing; the city scene has 2,240 colliders (buildings, props, the
terrain), and comparing all of them at 1 kHz cost the physics node 1.6 cores of a 5 m hover (profiled,
issue 29). :class:`ColliderIndex` answers, for the square of grid cells the sphere's footprint
``[x - r, x + r] x [y - r, y + r]`` lies in, the colliders whose bounds reach into that square (those
without bounds, e.g. a bare ``contact`` object, always), in the colliders' own order. A collider the
engine's sphere-box test would keep has bounds that overlap the footprint, so it is among them: the
engine applies the very same test to this shorter list, and finds the same contacts in the same order.

Each square's list is computed once (numpy over every collider's bounds, some 30 us for the city) and
kept: a body flying at 10 m/s enters a new 4 m cell a few times a second.
"""

from __future__ import annotations

import math
from typing import Iterator, Sequence

import numpy as np

#: Edge of a grid cell (m): a body's footprint spans 1-2 cells a side.
CELL_M = 4.0
#: Margin (m) a square of cells is widened by when its colliders are chosen (only ever adds candidates).
SQUARE_PAD_M = 1e-3
#: Squares of cells remembered (a long flight over a big world forgets them all and starts again).
MAX_CACHED_SQUARES = 4096


class ColliderIndex(Sequence):
    """An immutable sequence of colliders, with :meth:`near` for the candidates around a body.

    Two indexes are equal when they hold the same colliders in the same order (what a resting body
    compares to know that nothing changed under it).
    """

    def __init__(self, colliders: Sequence, cell_m: float = CELL_M):
        """``cell_m``: edge of a grid cell (m); 0 (or not finite): no grid, :meth:`near` is every collider."""
        self._colliders = tuple(colliders)
        self.cell_m = float(cell_m)
        self._grid = math.isfinite(self.cell_m) and self.cell_m > 0.0
        self._inv_cell = 1.0 / self.cell_m if self._grid else 0.0
        boxes = [getattr(c, "bounds", None) for c in self._colliders]
        self._pairs = tuple(zip(self._colliders, boxes))
        unbounded = np.array([b is None for b in boxes], dtype=bool)
        low = np.array([b[0][:2] if b is not None else (-math.inf, -math.inf) for b in boxes], float).reshape(-1, 2)
        high = np.array([b[1][:2] if b is not None else (math.inf, math.inf) for b in boxes], float).reshape(-1, 2)
        # NaN bounds never fail the engine's test (every comparison with NaN is false): always a candidate.
        unbounded |= np.isnan(low).any(axis=1) | np.isnan(high).any(axis=1)
        self._unbounded, self._low, self._high = unbounded, low, high
        self._squares: dict[tuple[int, int, int, int], tuple] = {}

    def __len__(self) -> int:
        return len(self._colliders)

    def __getitem__(self, index):
        return self._colliders[index]

    def __iter__(self) -> Iterator:
        return iter(self._colliders)

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if isinstance(other, ColliderIndex):
            return self._colliders == other._colliders
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._colliders)

    def __repr__(self) -> str:
        return f"ColliderIndex({len(self._colliders)} colliders)"

    @property
    def pairs(self) -> tuple:
        """Every ``(collider, bounds or None)``, in order."""
        return self._pairs

    def near(self, x: float, y: float, radius: float) -> tuple:
        """``(collider, bounds or None)`` of every collider whose bounds may reach the footprint of a sphere
        of ``radius`` at ``(x, y)``, in order: a superset of those the sphere-box test keeps."""
        if not self._grid:
            return self._pairs
        inv = self._inv_cell
        try:
            key = (math.floor((x - radius) * inv), math.floor((y - radius) * inv),
                   math.floor((x + radius) * inv), math.floor((y + radius) * inv))
        except (ValueError, OverflowError):  # NaN or infinite position: let the engine test every collider
            return self._pairs
        found = self._squares.get(key)
        if found is None:
            found = self._square(key)
        return found

    def _square(self, key: tuple[int, int, int, int]) -> tuple:
        x0, y0, x1, y1 = key
        cell = self.cell_m
        low_x, low_y, high_x, high_y = x0 * cell, y0 * cell, (x1 + 1) * cell, (y1 + 1) * cell
        # Widened a little, so that a footprint at the square's border (rounding of the key) is inside it.
        pad = SQUARE_PAD_M + 1e-9 * max(abs(low_x), abs(low_y), abs(high_x), abs(high_y))
        low_x, low_y, high_x, high_y = low_x - pad, low_y - pad, high_x + pad, high_y + pad
        overlap = ((self._low[:, 0] <= high_x) & (self._high[:, 0] >= low_x)
                   & (self._low[:, 1] <= high_y) & (self._high[:, 1] >= low_y))
        pairs = self._pairs
        found = tuple(pairs[i] for i in np.flatnonzero(overlap | self._unbounded))
        if len(self._squares) >= MAX_CACHED_SQUARES:
            self._squares.clear()
        self._squares[key] = found
        return found


def collider_index(colliders: Sequence) -> ColliderIndex:
    """``colliders`` as a :class:`ColliderIndex` (itself when it already is one)."""
    return colliders if isinstance(colliders, ColliderIndex) else ColliderIndex(colliders)
