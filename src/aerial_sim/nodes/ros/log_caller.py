"""rclpy's logger finds each call's caller without reading source files: the same caller, a hundredth of the CPU.

Every ``node.get_logger().info(...)`` builds a ``CallerId`` (rclpy ``impl/rcutils_logger.py``): the first frame
outside rclpy, and its function, file, line and ``f_lasti``. rclpy (9.x) takes each frame's file from
``inspect.getframeinfo(frame).filename``, which also reads the frame's source line: ``inspect.findsource``, whose
``inspect.getmodule`` walks ``sys.modules`` and resolves every module's path (a few ``lstat`` per path) the first
time and again whenever modules were imported since, or whenever the frame's file is no module's (``runpy``'s).
That cost 0.7-2 ms a line in a node process (about 40 lines at a graph's start, 25 a warm run), 0.03-0.09 CPU s
of a batch graph's start-up (``tools/dev.sh bench batch``, doc/scale.md "Start-up").

``getframeinfo``'s ``filename`` is ``inspect.getsourcefile(frame) or inspect.getfile(frame)`` (CPython 3.10-3.13
``inspect.getframeinfo``); the source line it also reads is not used. :func:`install` gives rclpy's
``_find_caller`` and ``CallerId`` that file, found without the line, and each file's ``realpath`` kept per
process (a module's file does not move while it runs): the same ``CallerId`` fields, so the same
``/rosout`` messages (file, function, line) and the same ``once``/``throttle`` contexts.
"""

from __future__ import annotations

import inspect
import os
from types import FrameType

from rclpy.impl import rcutils_logger

#: code object's file name -> (the file getframeinfo names, its realpath)
_FILES: dict[str, tuple[str, str]] = {}


def frame_file(frame: FrameType) -> tuple[str, str]:
    """``inspect.getframeinfo(frame).filename`` and its ``os.path.realpath``, kept per code file name."""
    key = frame.f_code.co_filename
    known = _FILES.get(key)
    if known is None:
        name = inspect.getsourcefile(frame) or inspect.getfile(frame)
        known = (name, os.path.realpath(name))
        if os.path.exists(name):  # else getsourcefile's answer may change (linecache, a module's loader)
            _FILES[key] = known
    return known


def find_caller(frame: FrameType | None) -> FrameType:
    """rclpy's ``_find_caller``: the first frame whose file is not one of rclpy's logging modules."""
    if rcutils_logger._populate_internal_callers:
        import rclpy.logging

        rcutils_logger._internal_callers.extend([
            os.path.realpath(rcutils_logger.__file__),
            os.path.realpath(rclpy.logging.__file__),
        ])
        rcutils_logger._populate_internal_callers = False
    internal = rcutils_logger._internal_callers
    if frame is None:
        raise ValueError("Cannot get frame info if frame is None")
    while any(f in frame_file(frame)[1] for f in internal):
        frame = frame.f_back
        if frame is None:
            raise ValueError("Cannot get frame info if frame is None")
    return frame


def _caller_id_new(cls, frame: FrameType | None = None):
    if not frame:  # rclpy starts at CallerId.__new__'s own frame, in rcutils_logger.py: its caller's is the same walk
        frame = find_caller(inspect.currentframe().f_back)
    return tuple.__new__(cls, (frame.f_code.co_name, os.path.abspath(frame_file(frame)[0]), frame.f_lineno,
                               frame.f_lasti))


#: The rclpy internals :func:`install` replaces or reads (rclpy 9.x, Kilted); another rclpy keeps its own lookup.
_RCLPY_INTERNALS = ("_find_caller", "CallerId", "_internal_callers", "_populate_internal_callers")


def install() -> None:
    """Give rclpy's logger :func:`find_caller` and the ``CallerId`` built from it (once per process); an rclpy
    without the internals this replaces is left as it is (slower first lines, the same messages)."""
    if not all(hasattr(rcutils_logger, name) for name in _RCLPY_INTERNALS):
        return
    if rcutils_logger._find_caller is not find_caller:
        rcutils_logger._find_caller = find_caller
        rcutils_logger.CallerId.__new__ = staticmethod(_caller_id_new)
