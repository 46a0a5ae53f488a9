"""Every node in the graph has a name of its own and answers the standard parameter services.

Processes that may serve a fleet (sensors, flight controllers) read the fleet selection with a probe
node named as the process. Serving one vehicle, that probe had the very name of the node it served
(``/drone1/flight_controller`` twice in ``ros2 node list``); serving a fleet or sharing a process,
the process's own node (``/sensors_0``, ``/drone1/sensors``, ``/flight_controller``) answered no
parameter services, so ``ros2 param list`` hung on it. Three such processes are started here as a
launch file starts them, and asked.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from conftest import spin_until

REPO = Path(__file__).resolve().parents[1]


def start(*arguments: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", *arguments], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=REPO)


def test_no_two_nodes_share_a_name_and_every_node_answers_parameter_services(ros_node):
    from rcl_interfaces.srv import ListParameters

    processes = [
        # One vehicle's controller, as control.launch.yaml starts it (its parameters from a file).
        start("aerial_sim.nodes.flight_controller", "--ros-args", "-r", "__ns:=/drone1", "-p", "use_sim_time:=true",
              "--params-file", str(REPO / "config" / "flight_controller.yaml")),
        # One vehicle's sensors sharing a process, as sensors.launch.yaml starts them.
        start("aerial_sim.nodes.sensors", "--ros-args", "-r", "__ns:=/drone1", "-p", "use_sim_time:=true"),
        # A fleet's controllers in one process.
        start("aerial_sim.nodes.flight_controller", "--ros-args", "-r", "__ns:=/fleet", "-p", "vehicles:=2",
              "-p", "use_sim_time:=true"),
    ]
    expected = {"/drone1/flight_controller", "/drone1/sensors", "/drone1/imu", "/drone1/gps", "/fleet/flight_controller",
                "/fleet/drone1/flight_controller", "/fleet/drone2/flight_controller"}

    def names() -> Counter:
        return Counter(f"{namespace.rstrip('/')}/{name}" for name, namespace in ros_node.get_node_names_and_namespaces())

    try:
        assert spin_until(ros_node, lambda: expected <= set(names()), timeout_s=60.0), names()
        spin_until(ros_node, lambda: False, timeout_s=1.0)  # a duplicate would be discovered by now as well
        ours = {name: count for name, count in names().items() if not name.startswith("/test_probe")}
        assert {name: count for name, count in ours.items() if count > 1} == {}, ours
        for node in sorted(ours):
            client = ros_node.create_client(ListParameters, f"{node}/list_parameters")
            try:
                assert client.wait_for_service(timeout_sec=20.0), f"{node} answers no parameter services"
                future = client.call_async(ListParameters.Request())
                assert spin_until(ros_node, future.done, timeout_s=20.0), f"{node}: list_parameters unanswered"
                assert "use_sim_time" in future.result().result.names, node
            finally:
                ros_node.destroy_client(client)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
