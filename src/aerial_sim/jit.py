"""numba's ``njit``, or a no-op stand-in where numba cannot be imported.

The compiled kernels (:mod:`aerial_sim.physics.batch_kernels`,
:mod:`aerial_sim.world.render_kernels`) are plain Python with NumPy; without
numba (a declared dependency) :data:`COMPILED` is False and callers take their
NumPy reference paths.
"""

from __future__ import annotations

try:
    from numba import njit

    COMPILED = True
except ImportError:  # pragma: no cover - numba is a declared dependency
    COMPILED = False

    def njit(*args, **kwargs):
        if args and callable(args[0]):
            return args[0]
        return lambda function: function


__all__ = ["COMPILED", "njit"]
