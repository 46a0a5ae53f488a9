"""Compiled kernels of the batched physics' broad phase and its narrow prefilter: which vehicles may fly free
of contacts for a window of steps, and which close pairs need a contact test at all
(:mod:`aerial_sim.physics.batched` calls them; the free-flight step itself is :mod:`.batch_kernels`').

- :func:`sweep_radii`: a sphere around each vehicle that holds its body box for the window (a loose bound on
  how far it can move); :func:`near_colliders`: which spheres reach a scene collider's bounds;
  :func:`close_pairs`: which spheres overlap each other (a uniform grid of cells);
- :func:`spheres_meet` and :func:`boxes_may_touch`: the two conservative filters a close pair passes before
  FCL (sweep spheres that can meet in the window; oriented boxes a separating-axis test cannot prove apart).

Each filter only ever keeps a pair a looser test would keep: the states and collision records are those of
the path without them (test_physics_batched).
"""

from __future__ import annotations

import math

import numpy as np

from aerial_sim.jit import njit
from aerial_sim.physics.batch_kernels import (A, AREAS, B, DENSITY, DRAG_LAW, EXT_FORCE, GRAVITY, HALF_EXTENTS,
                                              INV_MASS, LIN_DRAG, MAX_LIFT, P, Q, RADIUS, ROTOR_DRAG, V)


@njit(cache=True)
def sweep_radii(state, type_of, const, steps, dt, slack_m, wind):
    """Radius of a sphere around each vehicle's centre that holds its body box for the next ``steps`` steps
    (vehicle ``i``'s constants: row ``type_of[i]`` of ``const``).

    ``r + |v| T + (|a| + a_max) T^2 + slack``: the box's bounding radius, the distance it can
    travel in ``T = steps dt`` at its speed and with an acceleration bounded by its present one
    plus what full thrust, the external force, gravity and drag at the air speed it could reach
    could add (a deliberately loose bound: T^2 is tiny, the slack dominates).
    """
    count = state.shape[0]
    radii = np.empty(count)
    horizon = steps * dt
    for i in range(count):
        s = state[i]
        c = const[type_of[i]]
        speed = math.sqrt(s[V] ** 2 + s[V + 1] ** 2 + s[V + 2] ** 2)
        accel = math.sqrt(s[A] ** 2 + s[A + 1] ** 2 + s[A + 2] ** 2)
        external = math.sqrt(s[EXT_FORCE] ** 2 + s[EXT_FORCE + 1] ** 2 + s[EXT_FORCE + 2] ** 2)
        air = math.sqrt((s[V] - wind[i, 0]) ** 2 + (s[V + 1] - wind[i, 1]) ** 2 + (s[V + 2] - wind[i, 2]) ** 2) + 1.0
        area = c[AREAS] + c[AREAS + 1] + c[AREAS + 2]
        drag = abs(c[LIN_DRAG]) * 2.0 * s[DENSITY] * area * air * air
        if c[DRAG_LAW] == 2.0:  # rotor drag at full thrust
            drag = (c[ROTOR_DRAG] * c[MAX_LIFT] * s[DENSITY] + c[ROTOR_DRAG + 1]) * c[ROTOR_DRAG + 2] * air
        bound = accel + 2.0 * ((c[MAX_LIFT] * s[DENSITY] + external + drag) * c[INV_MASS] + s[GRAVITY])
        radii[i] = c[RADIUS] + speed * horizon + bound * horizon * horizon + slack_m
    return radii


@njit(cache=True)
def near_colliders(state, radii, lows, highs):
    """Whether each vehicle's sweep sphere (as a cube) overlaps any collider's bounding box."""
    count = state.shape[0]
    near = np.zeros(count, dtype=np.bool_)
    for i in range(count):
        x, y, z, r = state[i, P], state[i, P + 1], state[i, P + 2], radii[i]
        for k in range(lows.shape[0]):
            if (z - r > highs[k, 2] or z + r < lows[k, 2] or x - r > highs[k, 0] or x + r < lows[k, 0]
                    or y - r > highs[k, 1] or y + r < lows[k, 1]):
                continue
            near[i] = True
            break
    return near


#: Grid cell size of :func:`close_pairs` in largest sweep radii: larger cells hold more
#: spheres, smaller ones make each sphere look into more cells.
CELL_PER_RADIUS = 8.0


@njit(cache=True, error_model="numpy")
def close_pairs(positions, radii):
    """Pairs (i < j) whose spheres overlap: ``|p_i - p_j| < r_i + r_j``, in near-linear time.

    Broad phase on a uniform grid with cells :data:`CELL_PER_RADIUS` times the largest
    radius: each sphere is binned by its centre (counting sort into a hash table of at
    least 2N buckets; bucket collisions are filtered by cell coordinates) and looks only
    into the cells its reach ``r_i + r_max`` touches (3 to 4 on average, at most 8).
    """
    count = positions.shape[0]
    pairs = np.empty((max(16, count // 4), 2), dtype=np.int64)
    found = 0
    if count < 2:
        return pairs[:0]
    largest = radii.max()
    cell = CELL_PER_RADIUS * largest
    if not cell > 0.0:
        return pairs[:0]
    per_cell = 1.0 / cell  # binning and look-up both use floor(x * per_cell): one monotone map
    buckets = 1
    while buckets < 2 * count:
        buckets *= 2
    mask = buckets - 1
    cells = np.empty((count, 3), dtype=np.int64)
    keys = np.empty(count, dtype=np.int64)
    for i in range(count):
        for k in range(3):
            cells[i, k] = np.int64(math.floor(positions[i, k] * per_cell))
        keys[i] = _bucket(cells[i, 0], cells[i, 1], cells[i, 2], mask)
    starts = np.zeros(buckets + 1, dtype=np.int64)
    for i in range(count):
        starts[keys[i] + 1] += 1
    for b in range(buckets):
        starts[b + 1] += starts[b]
    fill = starts[:-1].copy()
    members = np.empty(count, dtype=np.int64)
    for i in range(count):
        members[fill[keys[i]]] = i
        fill[keys[i]] += 1
    for i in range(count):
        reach = radii[i] + largest
        x, y, z = positions[i, 0], positions[i, 1], positions[i, 2]
        low_x, high_x = np.int64(math.floor((x - reach) * per_cell)), np.int64(math.floor((x + reach) * per_cell))
        low_y, high_y = np.int64(math.floor((y - reach) * per_cell)), np.int64(math.floor((y + reach) * per_cell))
        low_z, high_z = np.int64(math.floor((z - reach) * per_cell)), np.int64(math.floor((z + reach) * per_cell))
        for nx in range(low_x, high_x + 1):
            for ny in range(low_y, high_y + 1):
                for nz in range(low_z, high_z + 1):
                    b = _bucket(nx, ny, nz, mask)
                    for m in range(starts[b], starts[b + 1]):
                        j = members[m]
                        if j <= i or cells[j, 0] != nx or cells[j, 1] != ny or cells[j, 2] != nz:
                            continue
                        limit = radii[i] + radii[j]
                        d2 = (x - positions[j, 0]) ** 2 + (y - positions[j, 1]) ** 2 + (z - positions[j, 2]) ** 2
                        if d2 < limit * limit:
                            if found == pairs.shape[0]:
                                grown = np.empty((2 * found, 2), dtype=np.int64)
                                grown[:found] = pairs
                                pairs = grown
                            pairs[found, 0] = i
                            pairs[found, 1] = j
                            found += 1
    return pairs[:found]


@njit(cache=True)
def _bucket(x, y, z, mask):
    """Hash of integer cell coordinates into ``[0, mask]`` (Teschner et al. 2003 primes, then a
    SplitMix64 finaliser so that the low bits the mask keeps are well mixed)."""
    h = (x * 73856093) ^ (y * 19349663) ^ (z * 83492791)
    h ^= (h >> 31) & 0x1FFFFFFFF
    h *= -4658895280553007687  # 0xBF58476D1CE4E5B9 as a signed 64-bit integer
    h ^= (h >> 29) & 0x7FFFFFFFF
    return h & mask


@njit(cache=True)
def spheres_meet(state, radii, pairs):
    """For each pair (i, j): whether ``|p_i - p_j| < r_i + r_j`` (sweep spheres overlap)."""
    out = np.empty(pairs.shape[0], dtype=np.bool_)
    for n in range(pairs.shape[0]):
        i, j = pairs[n, 0], pairs[n, 1]
        limit = radii[i] + radii[j]
        d2 = (state[i, P] - state[j, P]) ** 2 + (state[i, P + 1] - state[j, P + 1]) ** 2 + (
            state[i, P + 2] - state[j, P + 2]) ** 2
        out[n] = d2 < limit * limit
    return out


@njit(cache=True)
def _rotations(state, pairs):
    """Rows of R(q) of every vehicle named in ``pairs`` (others left unset), (N, 3, 3)."""
    rot = np.empty((state.shape[0], 3, 3))
    for n in range(pairs.shape[0]):
        for side in range(2):
            i = pairs[n, side]
            w, x, y, z = state[i, Q], state[i, Q + 1], state[i, Q + 2], state[i, Q + 3]
            length = math.sqrt(w * w + x * x + y * y + z * z)
            w, x, y, z = w / length, x / length, y / length, z / length
            rot[i, 0, 0], rot[i, 0, 1], rot[i, 0, 2] = 1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)
            rot[i, 1, 0], rot[i, 1, 1], rot[i, 1, 2] = 2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)
            rot[i, 2, 0], rot[i, 2, 1], rot[i, 2, 2] = 2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)
    return rot


@njit(cache=True)
def boxes_may_touch(state, const, pairs, margin):
    """For each pair (i, j): False when the two body boxes are provably apart by more than ``margin``
    (m), True otherwise (touching, overlapping, or too close to call).

    The separating-axis test of two oriented boxes (Gottschalk, Lin & Manocha, "OBBTree", SIGGRAPH
    1996; Ericson, *Real-Time Collision Detection*, sec. 4.4.1): 15 candidate axes (each box's three
    faces, the nine edge-edge cross products), each a separating axis when the boxes' projections
    onto it are apart. The rotation entries are padded by 1e-9 so that near-parallel edges (a cross
    product near zero) never separate falsely; with the margin the test errs only towards "may
    touch", which FCL then decides exactly.
    """
    count = pairs.shape[0]
    out = np.ones(count, dtype=np.bool_)
    if count == 0:
        return out
    eps = 1e-9
    rot = _rotations(state, pairs)  # (a few pairs' worth of work; most pairs stop at the sphere test)
    rel = np.empty((3, 3))
    absr = np.empty((3, 3))
    ea = np.empty(3)
    eb = np.empty(3)
    t = np.empty(3)
    for n in range(count):
        i, j = pairs[n, 0], pairs[n, 1]
        dx = state[j, P] - state[i, P]
        dy = state[j, P + 1] - state[i, P + 1]
        dz = state[j, P + 2] - state[i, P + 2]
        reach = const[i, RADIUS] + const[j, RADIUS] + margin
        if dx * dx + dy * dy + dz * dz > reach * reach:  # the boxes' bounding spheres are apart
            out[n] = False
            continue
        for k in range(3):
            ea[k] = const[i, HALF_EXTENTS + k]
            eb[k] = const[j, HALF_EXTENTS + k]
        for a in range(3):
            for b in range(3):
                rel[a, b] = rot[i, 0, a] * rot[j, 0, b] + rot[i, 1, a] * rot[j, 1, b] + rot[i, 2, a] * rot[j, 2, b]
                absr[a, b] = abs(rel[a, b]) + eps
        for a in range(3):
            t[a] = rot[i, 0, a] * dx + rot[i, 1, a] * dy + rot[i, 2, a] * dz
        apart = False
        for a in range(3):  # A's faces
            rb = eb[0] * absr[a, 0] + eb[1] * absr[a, 1] + eb[2] * absr[a, 2]
            if abs(t[a]) > ea[a] + rb + margin:
                apart = True
                break
        if not apart:
            for b in range(3):  # B's faces
                ra = ea[0] * absr[0, b] + ea[1] * absr[1, b] + ea[2] * absr[2, b]
                if abs(t[0] * rel[0, b] + t[1] * rel[1, b] + t[2] * rel[2, b]) > ra + eb[b] + margin:
                    apart = True
                    break
        if not apart:  # A's edge a x B's edge b
            for a in range(3):
                a1, a2 = (a + 1) % 3, (a + 2) % 3
                for b in range(3):
                    b1, b2 = (b + 1) % 3, (b + 2) % 3
                    ra = ea[a1] * absr[a2, b] + ea[a2] * absr[a1, b]
                    rb = eb[b1] * absr[a, b2] + eb[b2] * absr[a, b1]
                    if abs(t[a2] * rel[a1, b] - t[a1] * rel[a2, b]) > ra + rb + margin:
                        apart = True
                        break
                if apart:
                    break
        out[n] = not apart
    return out
