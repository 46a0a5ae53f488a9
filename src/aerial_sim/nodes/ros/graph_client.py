"""A batch worker's hand on a running graph: service calls and parameter changes from outside it.

:class:`GraphClient` is one rclpy node in a context of its own (its own ``ROS_DOMAIN_ID``), spun only
while it waits for an answer, so several workers' clients live in one process without seeing each
other's graphs. It calls what ``ros2 service call`` and ``ros2 param set`` call: standard services
(std_srvs, rcl_interfaces), nothing of aerial_sim's own (:mod:`aerial_sim.batch.warm`).
"""

from __future__ import annotations

import itertools
import os
from typing import Any, Mapping

_names = itertools.count(1)


class GraphCallError(RuntimeError):
    """A service did not appear, did not answer in time, or refused the request (the message says which)."""


class GraphClient:
    """Service calls into the graph of ROS domain ``domain_id`` (discovery kept on this machine)."""

    def __init__(self, domain_id: int, timeout_s: float = 20.0):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        self.timeout_s = timeout_s
        self.context = rclpy.context.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node(f"batch_worker_{os.getpid()}_{next(_names)}", context=self.context,
                                      start_parameter_services=False)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._clients: dict[str, Any] = {}

    def prepare(self, srv_type, name: str) -> None:
        """Make the client of service ``name`` now: it is discovered in the background before the first call."""
        from aerial_sim.nodes.ros.services import SERVICE_QOS

        if name not in self._clients:
            self._clients[name] = self.node.create_client(srv_type, name, qos_profile=SERVICE_QOS)

    def call(self, srv_type, name: str, request):
        """The answer of service ``name``; :class:`GraphCallError` when none comes within the timeout."""
        from aerial_sim.nodes.ros.services import SERVICE_QOS

        client = self._clients.get(name)
        if client is None:
            client = self._clients[name] = self.node.create_client(srv_type, name, qos_profile=SERVICE_QOS)
        if not client.wait_for_service(timeout_sec=self.timeout_s):
            raise GraphCallError(f"{name}: no such service after {self.timeout_s:g} s")
        future = client.call_async(request)
        self.executor.spin_until_future_complete(future, timeout_sec=self.timeout_s)
        if not future.done() or future.result() is None:
            raise GraphCallError(f"{name}: no answer within {self.timeout_s:g} s")
        return future.result()

    def trigger(self, name: str) -> str:
        """Call a std_srvs/Trigger service; its message, or :class:`GraphCallError` with it when it refused."""
        from std_srvs.srv import Trigger

        answer = self.call(Trigger, name, Trigger.Request())
        if not answer.success:
            raise GraphCallError(f"{name} refused: {answer.message}")
        return answer.message

    def set_bool(self, name: str, value: bool) -> None:
        from std_srvs.srv import SetBool

        answer = self.call(SetBool, name, SetBool.Request(data=value))
        if not answer.success:
            raise GraphCallError(f"{name} {value} refused: {answer.message}")

    def set_parameters(self, node: str, values: Mapping[str, Any]) -> None:
        """``ros2 param set`` for each of ``values`` on ``node`` (one request); a refused one is an error naming it."""
        from rcl_interfaces.srv import SetParameters
        from rclpy.parameter import Parameter

        request = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()
                                                    for name, value in values.items()])
        answer = self.call(SetParameters, f"{node}/set_parameters", request)
        refused = [f"{name}: {result.reason}" for name, result in zip(values, answer.results) if not result.successful]
        if refused:
            raise GraphCallError(f"{node}: parameters refused ({'; '.join(refused)})")

    def close(self) -> None:
        try:
            self.executor.remove_node(self.node)
            self.node.destroy_node()
            self.executor.shutdown(timeout_sec=1.0)
        finally:
            if self.context.ok():
                self.context.try_shutdown()


__all__ = ["GraphCallError", "GraphClient"]
