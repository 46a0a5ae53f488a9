"""rclpy's logger with :mod:`aerial_sim.nodes.ros.log_caller` installed names each call's caller exactly as rclpy's
own lookup does (function, file, line, bytecode offset: what ``/rosout`` carries and what ``once``/``throttle``
key on), for calls from a module file, from code without a file (``exec``), through a helper in between, and
with ``once``; and it no longer reads source files to do so."""

from __future__ import annotations

import inspect
import os
import textwrap
import types

import pytest
from rclpy.impl import rcutils_logger
from rclpy.logging import get_logger

from aerial_sim.nodes.ros import log_caller


def log_here(logger, message, **filters):
    logger.info(message, **filters)


def log_through_helper(logger):
    log_here(logger, "through a helper")


EXEC_SOURCE = textwrap.dedent("""
    def from_exec(logger):
        logger.info("from code without a file")
    from_exec(LOGGER)
""")


def call_sites(logger) -> None:
    log_here(logger, "from a module")
    log_through_helper(logger)
    logger.info("straight")
    for _ in range(2):
        logger.info("once", once=True)
    exec(compile(EXEC_SOURCE, "<generated>", "exec"), {"LOGGER": logger})


@pytest.fixture
def rclpy_lookup():
    """rclpy's own ``_find_caller`` and ``CallerId.__new__`` for the test, log_caller's restored after."""
    saved = rcutils_logger._find_caller, rcutils_logger.CallerId.__dict__["__new__"]
    yield
    rcutils_logger._find_caller = saved[0]
    rcutils_logger.CallerId.__new__ = saved[1]


def contexts_after_calls(name: str) -> list[tuple]:
    logger = get_logger(name)
    call_sites(logger)
    return [tuple(caller) for caller in logger.contexts]


def test_the_same_callers_as_rclpys_own_lookup(rclpy_lookup):
    original = rcutils_logger._find_caller, rcutils_logger.CallerId.__dict__["__new__"]
    if original[0] is log_caller.find_caller:
        pytest.skip("installed before this test could keep rclpy's own lookup")
    expected = contexts_after_calls("log_caller_test_rclpy")
    log_caller.install()
    assert rcutils_logger._find_caller is log_caller.find_caller
    found = contexts_after_calls("log_caller_test_installed")
    assert found == expected
    assert len(found) == 4  # log_here (called twice), the straight call, the once call, the exec one
    files = {caller[1] for caller in found}
    assert os.path.abspath(__file__) in files and "<generated>" in {os.path.basename(f) for f in files}
    assert {caller[0] for caller in found} == {"log_here", "call_sites", "from_exec"}


def test_no_source_is_read_to_find_the_caller(rclpy_lookup, monkeypatch):
    log_caller.install()

    def refuse(*args, **kwargs):
        raise AssertionError("the source was read")

    monkeypatch.setattr(inspect, "findsource", refuse)
    monkeypatch.setattr(inspect, "getframeinfo", refuse)
    logger = get_logger("log_caller_test_no_source")
    log_here(logger, "no source read")
    assert [caller[:3] for caller in logger.contexts] == [("log_here", os.path.abspath(__file__),
                                                           log_here.__code__.co_firstlineno + 1)]


def test_an_rclpy_without_the_replaced_internals_is_left_as_it_is(monkeypatch):
    """Another rclpy (a real ROS 2 install of another release) may lack what install() replaces: it is left alone,
    where setting or reading a missing attribute would end every node process at its start."""
    other_rclpy = types.SimpleNamespace(_find_caller=object(), CallerId=type("CallerId", (tuple,), {}))
    monkeypatch.setattr(log_caller, "rcutils_logger", other_rclpy)
    log_caller.install()
    assert other_rclpy._find_caller is not log_caller.find_caller and "__new__" not in other_rclpy.CallerId.__dict__
