"""Each recorded stream's configured rate, asked from the nodes that publish it (the rule is
:mod:`aerial_sim.recording.rates`'s): :class:`ConfiguredRates`."""

from __future__ import annotations

from typing import Callable

from rcl_interfaces.srv import GetParameters
from rclpy.node import Node

from aerial_sim.recording.rates import (QUERIED_PARAMETERS, agreed_rate, configured_rate_hz, parameter_number,
                                        rate_from_table)

#: Discovery rounds a publisher's parameter service is waited for before its rates are given up.
PARAMETER_TRIES = 20
#: The same for a lockstep recorder (2 min of 0.5 s rounds): its bag's ``configured_rates_hz`` must not
#: depend on how soon a loaded machine answered (one run's sensors process took 11 s to start, past 20
#: rounds, and one of two identical runs' bags had no rate for its streams).
LOCKSTEP_PARAMETER_TRIES = 240


def node_path(namespace: str, name: str) -> str:
    return namespace.rstrip("/") + "/" + name


class ConfiguredRates:
    """The configured rate of each periodic stream: ``expected_rates`` names it, else its publishers' rate
    parameters do (``rate_hz`` ..., asked once per node over its standard ``get_parameters`` service).

    Never blocks: requests go out once per discovery round (:meth:`ask`) and their answers come in
    executor callbacks; ``found(topic, rate_hz)`` is called once per stream whose rate is known.
    """

    def __init__(self, node: Node, expected_rates, found: Callable[[str, float], None], tries: int = PARAMETER_TRIES):
        self.node = node
        self.tries = tries  # discovery rounds a publisher is asked before its rates are given up
        self.expected_rates = expected_rates
        self.found = found
        self._rate_publishers: dict[str, set[str]] = {}  # topic -> publisher nodes not yet resolved
        self._node_parameters: dict[str, dict[str, float | None]] = {}
        self._parameter_clients: dict[str, list] = {}  # node -> [client, rounds left]
        self._parameter_answers: dict[str, dict[str, float | None]] = {}  # node -> parameters answered so far
        self._unnamed_publishers: dict[str, int] = {}  # topic -> rounds left to learn its publishers' names
        self._answered_clients: list = []  # destroyed at the next round, outside their own callback

    def find(self, topic: str, publishers) -> None:
        """The rate ``expected_rates`` gives ``topic``, else ask its publishers for their rate parameters."""
        explicit = rate_from_table(topic, self.expected_rates)
        if explicit is not None:
            self.found(topic, explicit)
            return
        nodes = {node_path(info.node_namespace, info.node_name) for info in publishers}
        nodes.discard(self.node.get_fully_qualified_name())
        if any(name.endswith("_NODE_NAME_UNKNOWN_") for name in nodes):  # not discovered yet: next round
            tries = self._unnamed_publishers.get(topic, self.tries) - 1
            if tries > 0:
                self._unnamed_publishers[topic] = tries
            else:
                self._unnamed_publishers.pop(topic, None)  # a publisher outside ROS: no parameters to ask
            return
        self._unnamed_publishers.pop(topic, None)
        if not nodes:
            return
        self._rate_publishers[topic] = nodes
        for name in nodes:
            if name not in self._node_parameters and name not in self._parameter_clients:
                client = self.node.create_client(GetParameters, f"{name}/get_parameters")
                self._parameter_clients[name] = [client, self.tries]
        self._resolve()

    def ask(self) -> None:
        """(Re)send each publisher's unanswered ``get_parameters`` requests, once per discovery round (never blocks).

        A reply can be lost when the request goes out right after the service is discovered (the
        server's reply writer not matched yet), and a busy node answers late: unanswered requests
        are sent again each round, for ``PARAMETER_TRIES`` rounds.
        """
        while self._answered_clients:
            self.node.destroy_client(self._answered_clients.pop())
        for topic in list(self._unnamed_publishers):
            self.find(topic, self.node.get_publishers_info_by_topic(topic))
        for name, entry in list(self._parameter_clients.items()):
            client, tries = entry
            if tries <= 0:  # no parameter service, or never an answer: its streams stay unrated
                self.node.destroy_client(client)
                del self._parameter_clients[name]
                self._node_parameters[name] = {}
                self._resolve()
                continue
            entry[1] -= 1
            if not client.service_is_ready():
                continue
            answers = self._parameter_answers.setdefault(name, {})
            for parameter in QUERIED_PARAMETERS:
                if parameter not in answers:
                    # One name per request: a node answers nothing at all when any name asked is undeclared.
                    future = client.call_async(GetParameters.Request(names=[parameter]))
                    future.add_done_callback(lambda done, n=name, p=parameter: self._on_parameter(n, p, done))

    def _on_parameter(self, name: str, parameter: str, future) -> None:
        """One parameter's answer; once all are in, the node's streams get their rates."""
        if name in self._node_parameters or name not in self._parameter_clients:
            return  # a late answer to a repeated request
        try:
            values = future.result().values  # empty: the node has no such parameter
        except Exception:  # noqa: BLE001 - a node that went away: asked again next round
            return
        answers = self._parameter_answers.setdefault(name, {})
        answers[parameter] = parameter_number(values[0]) if values else None
        if len(answers) < len(QUERIED_PARAMETERS):
            return
        self._node_parameters[name] = dict(answers)
        self._answered_clients.append(self._parameter_clients.pop(name)[0])
        self._resolve()

    def _resolve(self) -> None:
        for topic, nodes in list(self._rate_publishers.items()):
            if all(name in self._node_parameters for name in nodes):
                del self._rate_publishers[topic]
                rate = agreed_rate(configured_rate_hz(topic, self._node_parameters[name]) for name in nodes)
                if rate is not None:
                    self.found(topic, rate)
