"""A flight controller's motor-command output: CDR bytes on its own topic, or its vehicle's row of the
fleet's ``/swarm/motor_commands`` (:mod:`aerial_sim.nodes.ros.swarm_link`)."""

from __future__ import annotations

from typing import Callable, Sequence

from rclpy.node import Node

from aerial_sim.cdr.encode import float64_array_encoder
from aerial_sim.nodes.ros.qos import COMMAND_QOS
from aerial_sim.nodes.ros.raw_publish import raw_sender
from aerial_sim.nodes.ros.swarm_link import SWARM_COMMANDS


def motor_command_output(node: Node, topic: str) -> Callable[[Sequence[float]], None]:
    """``send(controls)``: a vehicle's motor commands as ``std_msgs/Float64MultiArray`` on ``topic``
    (reliable), or its row of the fleet's ``/swarm/motor_commands`` (:mod:`aerial_sim.nodes.ros.swarm_link`)."""
    send = SWARM_COMMANDS.output(node, topic)
    if send is not None:
        return send
    from std_msgs.msg import Float64MultiArray  # noqa: PLC0415

    send = raw_sender(node.create_publisher(Float64MultiArray, topic, COMMAND_QOS), tap=True)
    encoders: dict[int, Callable[[Sequence[float]], bytes]] = {}

    def publish(controls: Sequence[float]) -> None:
        encode = encoders.get(len(controls))  # one per rotor count: the layout built once
        if encode is None:
            encode = encoders[len(controls)] = float64_array_encoder(len(controls))
        send(encode(controls))  # CDR: a sixth of the typed message's cost
    return publish
