"""The last line of defence: no message, request or timer tick may end a node (:class:`InputGuard`)."""

from __future__ import annotations

import functools
import inspect
import math
import time

from rclpy.executors import ExternalShutdownException
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node

from aerial_sim.nodes.ros import callback_cpu, process


class InputGuard:
    """No message or request may end a node: the last line of defence behind each callback's own checks.

    Every subscription and service callback of the node is wrapped: an exception
    raised while handling one message (a value no check foresaw, a wrong size)
    drops that message; a service request gets ``success = False`` where the
    response has that field. One warning per topic and ``interval_s`` names the
    topic, the message type and the problem, and counts what was dropped since.
    Timer callbacks are wrapped too: they work on what messages left behind (the web
    viewer draws the newest cloud at each refresh), so a failing tick is skipped and
    reported the same way.

    Shutdown is not input, but neither is it a reason to print a traceback. rclpy's
    ``ExternalShutdownException`` passes through (and ``KeyboardInterrupt``/``SystemExit``,
    which are no ``Exception``); while the node stops (a stop signal, a dead context) an rclpy
    error (``RCLError``, ``InvalidHandle``: a publish on the context going away) drops the
    message quietly. Anything else, a malformed message handled after Ctrl-C included, is
    the one warning line as at any other time: the events executor prints a ``[FATAL]`` line
    and the traceback for whatever escapes a callback (it once did so for a malformed swarm
    packet a sensors process took after SIGINT, when every error passed through once a stop
    was requested), and a user's recording must close as cleanly as it ran.
    """

    def __init__(self, node: Node, interval_s: float = 5.0):
        self.node = node
        self.interval_s = interval_s
        self._dropped: dict[str, int] = {}
        self._reported_at: dict[str, float] = {}
        self._guarded_key: tuple = (0, None, 0)
        # AERIAL_SIM_CALLBACK_CPU set: each callback's CPU time is added up per node (callback_cpu).
        self._cpu = callback_cpu.account(node.get_fully_qualified_name())
        self._call_timed = self._call if self._cpu is None else callback_cpu.timed(self._cpu, self._call)
        self.guard_all()
        for factory in ("create_subscription", "create_service", "create_timer"):
            # What the node creates from now on (the recorder subscribes as topics appear) is
            # guarded as it is created, before the executor can call it.
            setattr(node, factory, self._guarding(getattr(node, factory)))

    def _guarding(self, create):
        def create_guarded(*args, **kwargs):
            entity = create(*args, **kwargs)
            self.guard_all()
            return entity
        return create_guarded

    def guard_all(self) -> None:
        """Wrap every callback not wrapped yet (cheap when there is none).

        New entities are spotted by the count and the last one: a node that destroys and recreates
        subscriptions (the web viewer, as browsers come and go) can end at the same count."""
        subscriptions, services, timers = list(self.node.subscriptions), list(self.node.services), list(self.node.timers)
        key = (len(subscriptions), subscriptions[-1] if subscriptions else None, len(services), len(timers),
               timers[-1] if timers else None)
        if key == self._guarded_key:
            return
        for subscription in self.node.subscriptions:
            if not hasattr(subscription.callback, "input_guard"):
                subscription.callback = self._guarded(subscription.callback, subscription.topic_name,
                                                      subscription.msg_type.__name__, subscription._callback_type.name)
        for service in self.node.services:
            if not hasattr(service.callback, "input_guard"):
                service.callback = self._guarded_service(service.callback, service.srv_name)
        for timer in timers:
            if timer.callback is not None and not hasattr(timer.callback, "input_guard"):
                timer.callback = self._guarded_timer(timer.callback)
        self._guarded_key = key

    def _guarded(self, callback, topic: str, type_name: str, callback_type: str):
        # Keep the callback's arity: rclpy passes the message info only to two-argument callbacks.
        call = self._call_timed
        if callback_type == "WithMessageInfo":
            def guarded(message, info):
                return call(callback, topic, type_name, None, message, info)
        else:
            def guarded(message):
                return call(callback, topic, type_name, None, message)
        guarded.input_guard = self
        return guarded

    def _guarded_service(self, callback, name: str):
        def guarded(request, response):
            answer = self._call_timed(callback, name, type(request).__name__, response, request, response)
            return response if answer is None else answer
        guarded.input_guard = self
        return guarded

    def _guarded_timer(self, callback):
        name = f"timer {getattr(callback, '__qualname__', type(callback).__name__)}"
        call = callback if self._cpu is None else callback_cpu.timed(self._cpu, callback)

        @functools.wraps(callback)  # keeps its signature: rclpy passes TimerInfo to callbacks that ask for it
        def guarded(*args, **kwargs):
            try:
                return call(*args, **kwargs)
            except Exception as error:  # noqa: BLE001 - as for a message: the node goes on
                if self._is_shutdown(error):
                    if isinstance(error, ExternalShutdownException):
                        raise
                    return None
                self.report(name, "timer", error, outcome="tick skipped")
        guarded.input_guard = self
        # rclpy's executors look for a TimerInfo parameter with inspect.signature at every tick (0.1-0.15 ms
        # through the wrapper to a bound method; 220 ticks of a batch graph's start, 80 of a smoke flight): the
        # callback's signature, found once here, is what that finds (one without any is left to rclpy).
        try:
            guarded.__signature__ = inspect.signature(callback)
        except (TypeError, ValueError):
            pass
        return guarded

    def _call(self, callback, topic: str, type_name: str, refusal, *args):
        try:
            return callback(*args)
        except Exception as error:  # noqa: BLE001 - this is the point: input never ends the node
            if self._is_shutdown(error):
                if isinstance(error, ExternalShutdownException):
                    raise
                return refusal
            self.report(topic, type_name, error)
            if refusal is not None and hasattr(refusal, "success"):
                refusal.success = False
                if hasattr(refusal, "message"):
                    refusal.message = f"refused: {type(error).__name__}: {error}"
            return refusal

    def _is_shutdown(self, error: Exception) -> bool:
        """``error`` comes from the shutdown, not from the input: rclpy's own signal to stop spinning,
        or an rclpy call failing while the node stops (its context or entities going away)."""
        if isinstance(error, ExternalShutdownException):
            return True
        return (isinstance(error, (_rclpy.RCLError, _rclpy.InvalidHandle))
                and (process.stop_requested() or not self.node.context.ok()))

    def report(self, topic: str, type_name: str, error: Exception, outcome: str = "message dropped") -> None:
        self._dropped[topic] = self._dropped.get(topic, 0) + 1
        now = time.monotonic()
        if now - self._reported_at.get(topic, -math.inf) < self.interval_s:
            return
        self._reported_at[topic] = now
        count, self._dropped[topic] = self._dropped[topic], 0
        detail = " ".join(str(error).split())[:200] or "-"
        self.node.get_logger().warning(
            f"{topic}: {outcome} ({type_name}: {type(error).__name__}: {detail}); "
            f"{count} since the last such warning")
