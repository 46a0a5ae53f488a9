"""Services answer every call of a burst: 50 callers at once, each its own client, across processes."""

import pytest

from conftest import requires_ros, spin_until

pytestmark = [requires_ros, pytest.mark.ros]

CALLERS = 50


def test_fifty_concurrent_callers_all_get_an_answer(launch, ros_node):
    from std_srvs.srv import SetBool, Trigger

    from aerial_sim.nodes.ros.services import SERVICE_QOS

    control = launch("control.launch.yaml", "mission:=none")
    kinds = [(SetBool, "/drone1/arm", lambda: SetBool.Request(data=False)),
             (Trigger, "/drone1/takeoff", Trigger.Request), (Trigger, "/drone1/land", Trigger.Request)]  # fmt: skip
    # Fast DDS hands every reply to every client of the service, each keeping its QoS depth of them:
    # the callers need queues as deep as the burst too (nodes.ros.services, SERVICE_QOS).
    clients = [(ros_node.create_client(kind, name, qos_profile=SERVICE_QOS), make) for kind, name, make in
               (kinds[i % len(kinds)] for i in range(CALLERS))]  # fmt: skip
    for client, _ in clients:
        assert client.wait_for_service(timeout_sec=20.0), control.output()
    futures = [client.call_async(make()) for client, make in clients]  # all sent before any is answered
    assert spin_until(ros_node, lambda: all(f.done() for f in futures), 20.0), (
        f"{sum(not f.done() for f in futures)} of {CALLERS} calls never answered\n" + control.output())
    assert all(f.result() is not None and isinstance(f.result().message, str) for f in futures)
