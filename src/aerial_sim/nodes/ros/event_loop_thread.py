"""A node's asyncio server (the AirSim RPC server, the MAVLink endpoints) on an event loop of its own thread.

The server is started on the loop before the thread runs, so a port that cannot be bound is said at
once, in one ERROR line, and the node goes on without that server: the rest of the simulation must not
stop because a port is taken.
"""

from __future__ import annotations

import asyncio
import threading

from rclpy.node import Node


class EventLoopThread:
    """``loop`` runs forever on a daemon thread named ``name``; ``server`` is the started server, or None
    when ``server.start()`` raised OSError (``unavailable`` is then logged, its ``{error}`` filled in)."""

    def __init__(self, node: Node, server, name: str, unavailable: str):
        self.loop = asyncio.new_event_loop()
        self.server = server
        try:
            self.loop.run_until_complete(server.start())  # binding errors surface here, before spinning
        except OSError as error:
            node.get_logger().error(unavailable.format(error=error))
            self.server = None
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def close(self, timeout_s: float = 2.0) -> None:
        """Close the server on its loop, stop the loop and join the thread."""
        if not self.loop.is_running():
            return
        if self.server is not None:
            asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(timeout=timeout_s)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=timeout_s)
