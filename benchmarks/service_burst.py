"""How many calls of a burst a service answers: N callers at once, each its own client, one server.

    tools/dev.sh bench service_burst [--callers 50] [--rounds 3]

A std_srvs/Trigger server runs in a child process (rclpy's SingleThreadedExecutor: spun from a
bare script like this one, the experimental events executor served nothing at all here, while the
nodes, spun by :func:`aerial_sim.nodes.ros.run.run_node`, serve with it: ``test/test_service_bursts.py``
checks the flight controller's services that way), with rclpy's default service QoS (keep last 10) or with
:data:`aerial_sim.nodes.ros.services.SERVICE_QOS` (keep last 1000); this process makes N clients,
with the default or the deep QoS, waits until each sees the service, sends every request at
once and counts the answers within 10 s. Prints served / answered per combination and round.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src")]

SERVER = r"""
import os, sys, threading, time, rclpy
from rclpy.node import Node
from std_srvs.srv import Trigger
from aerial_sim.nodes.ros.services import SERVICE_QOS
rclpy.init()
node = Node("burst_server")
served = [0]
def answer(request, response):
    served[0] += 1
    response.success = True
    return response
kwargs = {"qos_profile": SERVICE_QOS} if sys.argv[1] == "deep" else {}
node.create_service(Trigger, "/burst_probe", answer, **kwargs)
def report():  # the executor spins in the main thread, as in every node here
    sys.stdin.readline()
    print(served[0], flush=True)
    os._exit(0)
threading.Thread(target=report, daemon=True).start()
executor = rclpy.executors.SingleThreadedExecutor(context=node.context)
executor.add_node(node)
executor.spin()
"""


def burst(server_qos: str, client_qos: str, callers: int) -> tuple[int, int]:
    import rclpy
    from rclpy.node import Node
    from std_srvs.srv import Trigger

    from aerial_sim.nodes.ros.services import SERVICE_QOS

    server = subprocess.Popen([sys.executable, "-c", SERVER, server_qos], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    context = rclpy.context.Context()
    rclpy.init(context=context)
    node = Node("burst_callers", context=context)
    try:
        kwargs = {"qos_profile": SERVICE_QOS} if client_qos == "deep" else {}
        clients = [node.create_client(Trigger, "/burst_probe", **kwargs) for _ in range(callers)]
        for client in clients:
            client.wait_for_service(timeout_sec=30.0)
        executor = rclpy.executors.SingleThreadedExecutor(context=context)
        executor.add_node(node)
        futures = [client.call_async(Trigger.Request()) for client in clients]
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and not all(f.done() for f in futures):
            executor.spin_once(timeout_sec=0.05)
        answered = sum(f.done() for f in futures)
        served, _ = server.communicate("\n", timeout=30)
        return int(served.strip() or 0), answered
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)
        if server.poll() is None:
            server.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--callers", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    print(f"{options.callers} callers at once, each its own client; calls served by the server / answered to the callers")
    for server_qos, client_qos in (("default", "default"), ("deep", "default"), ("deep", "deep")):
        results = [burst(server_qos, client_qos, options.callers) for _ in range(options.rounds)]
        text = ", ".join(f"{served}/{answered}" for served, answered in results)
        print(f"  server {server_qos:7s} client {client_qos:7s}: {text}")


if __name__ == "__main__":
    main()
