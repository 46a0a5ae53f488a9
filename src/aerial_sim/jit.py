"""numba's ``njit``, or a no-op stand-in where numba cannot be imported.

The compiled kernels (:mod:`aerial_sim.physics.batch_kernels`,
:mod:`aerial_sim.world.render_kernels`) are plain Python with NumPy; without
numba (a declared dependency) :data:`COMPILED` is False and callers take their
NumPy reference paths. :func:`jitable` makes a plain Python function (one the scalar path calls
as it is) callable from compiled code too (``numba.extending.register_jitable``).
"""

from __future__ import annotations

try:
    from numba import njit
    from numba.extending import register_jitable as jitable

    COMPILED = True
except ImportError:  # pragma: no cover - numba is a declared dependency
    COMPILED = False

    def jitable(function):
        return function

    def njit(*args, **kwargs):
        if args and callable(args[0]):
            return args[0]
        return lambda function: function


__all__ = ["COMPILED", "jitable", "njit"]
