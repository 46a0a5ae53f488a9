"""An in-process MAVLink client for the autopilot core: pymavlink frames both ways, no sockets, no ROS.

The autopilot flies the in-process physics world and flight supervisor of
:mod:`airsim_inprocess` (the same controller as the launched graph); frames it transmits are
decoded by a client-side pymavlink parser, and the client's frames go through the server's
:class:`aerial_sim.mavlink.server.Endpoint` decoding, so the wire format is exercised both ways.
"""

from __future__ import annotations

import asyncio
import math

from pymavlink.dialects.v20 import common as mav

from airsim_inprocess import InProcessGraph
from aerial_sim.environment.geodesy import HomePoint
from aerial_sim.mavlink.autopilot import Autopilot, AutopilotParams
from aerial_sim.mavlink.modes import FlightMode
from aerial_sim.mavlink.server import Endpoint


class ListLogger:
    def __init__(self):
        self.lines: list[tuple[str, str]] = []

    def info(self, text):
        self.lines.append(("info", text))

    def warning(self, text):
        self.lines.append(("warning", text))

    def warnings(self) -> list[str]:
        return [text for level, text in self.lines if level == "warning"]


class Harness:
    """Graph + autopilot + client; ``await harness.run_until(cond, sim_s)`` steps the simulation."""

    def __init__(self, system_id: int = 1, params: AutopilotParams | None = None, battery=None):
        self.graph = InProcessGraph(battery=battery)
        self.link = self.graph.vehicles["drone1"]
        self.logger = ListLogger()
        self.home = HomePoint()
        self.received: list = []
        self.client_parser = mav.MAVLink(None)
        self.client_parser.robust_parsing = True
        self.client = mav.MAVLink(None, srcSystem=255, srcComponent=190)
        self.autopilot = Autopilot(self.link, self.home, system_id, self._on_frame, self.logger, params)
        self.endpoint = Endpoint(self.autopilot, "127.0.0.1", 0, self.logger)
        self._task = None

    def _on_frame(self, frame: bytes) -> None:
        for message in self.client_parser.parse_buffer(frame) or []:
            self.received.append(message)

    def send(self, message) -> None:
        self.endpoint.datagram_received(message.pack(self.client), ("127.0.0.1", 50000))

    def send_raw(self, data: bytes) -> None:
        self.endpoint.datagram_received(data, ("127.0.0.1", 50000))

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.graph.run())
        self._tick_task = asyncio.get_running_loop().create_task(self._ticks())
        await self.graph.clock.started()

    async def _ticks(self) -> None:  # the absolute schedule of MavlinkServer._ticks
        period = 1.0 / self.autopilot.params.tick_hz
        due = await self.graph.clock.started()
        while True:
            due += period
            await self.graph.clock.wait_until(due)
            self.autopilot.tick(self.graph.clock.now_s)

    async def stop(self) -> None:
        for task in (self._task, self._tick_task):
            task.cancel()

    async def run_for(self, sim_s: float) -> None:
        await self.graph.clock.sleep(sim_s)

    async def run_until(self, condition, sim_s: float) -> bool:
        end = self.graph.clock.now_s + sim_s
        while self.graph.clock.now_s < end:
            if condition():
                return True
            await self.graph.clock.sleep(0.02)
        return bool(condition())

    def of_type(self, kind: str) -> list:
        return [m for m in self.received if m.get_type() == kind]

    def last(self, kind: str):
        found = self.of_type(kind)
        return found[-1] if found else None

    def acks(self, command: int) -> list[int]:
        return [m.result for m in self.of_type("COMMAND_ACK") if m.command == command]

    def final_acks(self, command: int) -> list[int]:
        """The results of ``command``'s COMMAND_ACKs, less the MAV_RESULT_IN_PROGRESS ones."""
        return [result for result in self.acks(command) if result != mav.MAV_RESULT_IN_PROGRESS]

    async def command(self, command: int, *params: float, sim_s: float = 2.0) -> int | None:
        """Send COMMAND_LONG and return its final result (None: none within ``sim_s``), as a client does that
        waits on through IN_PROGRESS."""
        before = len(self.final_acks(command))
        p = list(params) + [0.0] * (7 - len(params))
        self.send(mav.MAVLink_command_long_message(self.autopilot.system_id, 1, command, 0, *p))
        await self.run_until(lambda: len(self.final_acks(command)) > before, sim_s)
        acks = self.final_acks(command)
        return acks[-1] if len(acks) > before else None

    @property
    def position(self):
        return self.link.kinematics.position


def run(coroutine_function, timeout_s: float = 60.0, **harness_options):
    """Run ``coroutine_function(harness)`` on a started :class:`Harness`, stopped after, within ``timeout_s``."""
    async def main():
        harness = Harness(**harness_options)
        await harness.start()
        try:
            return await coroutine_function(harness)
        finally:
            await harness.stop()
    return asyncio.run(asyncio.wait_for(main(), timeout_s))


async def take_off(h: Harness, above_home_m: float = 3.0, hold_within_s: float = 20.0) -> None:
    """Arm and take off to ``above_home_m`` over home, as a ground station does; returns once in Hold."""
    await h.run_for(0.2)
    assert await h.command(mav.MAV_CMD_COMPONENT_ARM_DISARM, 1) == mav.MAV_RESULT_ACCEPTED
    amsl = h.home.altitude + h.autopilot.home_enu[2] + above_home_m
    nan = math.nan
    assert await h.command(mav.MAV_CMD_NAV_TAKEOFF, 0, 0, 0, nan, nan, nan, amsl) == mav.MAV_RESULT_ACCEPTED
    assert await h.run_until(lambda: h.autopilot.mode == FlightMode.HOLD, hold_within_s)
