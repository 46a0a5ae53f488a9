"""MAVLink over UDP the way PX4 SITL opens it, for every vehicle's :class:`Autopilot` (asyncio, no ROS).

PX4 SITL instance *i* binds UDP 18570+i for the ground station and sends to 14550 (QGroundControl,
MAVProxy, ``mavutil.mavlink_connection('udpin:0.0.0.0:14550')``), and binds 14580+i for the
offboard API and sends to 14540+i (MAVSDK's ``udpin://0.0.0.0:14540``, MAVROS' ``fcu_url``
``udp://:14540@127.0.0.1:14580``). This server does the same for vehicle *i* with system id
``sysid_base + i``; a client that talks first to the bound port is answered at its own address too.

Frames are decoded with pymavlink's MAVLink 2 parser (robust parsing, one parser per datagram: a frame with a
bad checksum or length becomes a BAD_DATA message, logged once and dropped).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from pymavlink.dialects.v20 import common as mav

from aerial_sim.airsim.graph import SimClock
from aerial_sim.config import require

#: A peer silent this long (wall seconds) is no longer sent telemetry (the configured remote always is).
PEER_TIMEOUT_S = 30.0
MAX_PEERS = 8


@dataclass(frozen=True)
class EndpointParams:
    """UDP ports of vehicle 0 (vehicle i adds i to each), PX4 SITL's defaults."""

    host: str = "127.0.0.1"
    gcs_remote_port: int = 14550
    gcs_local_port: int = 18570
    api_remote_port: int = 14540
    api_local_port: int = 14580

    def __post_init__(self):
        for name in ("gcs_remote_port", "gcs_local_port", "api_remote_port", "api_local_port"):
            value = getattr(self, name)
            require(0 <= value <= 65535, f"{name} must be in 0..65535, got {value}")

    def ports(self, instance: int) -> list[tuple[int, int]]:
        """(local, remote) port pairs of vehicle ``instance``; a remote of 0 = answer only who writes."""
        return [(self.gcs_local_port + instance if self.gcs_local_port else 0,
                 self.gcs_remote_port if self.gcs_remote_port else 0),
                (self.api_local_port + instance if self.api_local_port else 0,
                 self.api_remote_port + instance if self.api_remote_port else 0)]


class Endpoint(asyncio.DatagramProtocol):
    """One bound UDP socket of one vehicle: decodes what arrives, sends to the remote and known peers."""

    def __init__(self, autopilot, host: str, remote_port: int, logger):
        self.autopilot = autopilot
        self.remote = (host, remote_port) if remote_port else None
        self.logger = logger
        self.transport: asyncio.DatagramTransport | None = None
        self.peers: dict[tuple, float] = {}
        self.received = 0

    def connection_made(self, transport) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr) -> None:
        self.received += 1
        addr = tuple(addr[:2])
        if addr not in self.peers and len(self.peers) >= MAX_PEERS:
            oldest = min(self.peers, key=self.peers.get)
            self.peers.pop(oldest)
        self.peers[addr] = time.monotonic()
        # Each datagram holds whole frames: a fresh parser per datagram, so a truncated or corrupt frame
        # never swallows the start of the next datagram's.
        parser = mav.MAVLink(None)
        parser.robust_parsing = True
        try:
            messages = list(parser.parse_buffer(data) or [])
            if parser.buf_len() > 0:
                messages.append(mav.MAVLink_bad_data(bytes(parser.buf[parser.buf_index:]), "truncated frame"))
        except Exception as error:  # pymavlink raises on some malformed frames even when robust
            messages = [mav.MAVLink_bad_data(data, f"{type(error).__name__}: {error}")]
        for message in messages:
            self.autopilot.receive(message)

    def error_received(self, exc) -> None:
        pass  # nobody listening on the remote port yet (ICMP port unreachable): normal before a client starts

    def send(self, frame: bytes) -> None:
        if self.transport is None:
            return
        now = time.monotonic()
        for peer in [p for p, seen in self.peers.items() if now - seen > PEER_TIMEOUT_S]:
            self.peers.pop(peer)
        targets = set(self.peers)
        if self.remote is not None:
            targets.add(self.remote)
        for target in targets:
            try:
                self.transport.sendto(frame, target)
            except OSError:
                pass


class MavlinkServer:
    """Every vehicle's endpoints, the guidance/telemetry tick on simulation time and the 1 Hz heartbeat."""

    def __init__(self, autopilots: list, endpoints: EndpointParams, clock: SimClock, tick_hz: float, logger):
        self.autopilots = autopilots
        self.endpoint_params = endpoints
        self.clock = clock
        self.tick_hz = tick_hz
        self.logger = logger
        self.endpoints: list[list[Endpoint]] = []
        self.bound: list[list[int]] = []  # the local ports actually bound, per vehicle
        self._tasks: list[asyncio.Task] = []

    async def start(self) -> None:
        """Bind every endpoint (OSError if a port is taken) and start the tick and heartbeat tasks."""
        loop = asyncio.get_running_loop()
        host = self.endpoint_params.host
        for instance, autopilot in enumerate(self.autopilots):
            endpoints, ports = [], []
            for local, remote in self.endpoint_params.ports(instance):
                transport, endpoint = await loop.create_datagram_endpoint(
                    lambda ap=autopilot, r=remote: Endpoint(ap, host, r, self.logger), local_addr=(host, local))
                endpoints.append(endpoint)
                ports.append(transport.get_extra_info("sockname")[1])
            self.endpoints.append(endpoints)
            self.bound.append(ports)
            autopilot.transmit = lambda frame, eps=endpoints: [e.send(frame) for e in eps]
        self._tasks = [loop.create_task(self._ticks()), loop.create_task(self._heartbeats())]

    async def _ticks(self) -> None:
        """Tick every ``1 / tick_hz`` of simulation time on an absolute schedule (waiting for the next
        /clock message after each would stretch every period by up to one control period)."""
        period = 1.0 / self.tick_hz
        due = await self.clock.started()
        while True:
            try:
                due += period
                await self.clock.wait_until(due)
                now = self.clock.now_s
                if abs(now - due) > 1.0:  # a reset, a jump or a long stall: start the schedule afresh
                    due = now
                for autopilot in self.autopilots:
                    autopilot.tick(now)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the tick must go on whatever happened in one
                self.logger.warning(f"MAVLink tick failed: {type(error).__name__}: {error}")
                await asyncio.sleep(0.01)

    async def _heartbeats(self) -> None:
        """HEARTBEAT at 1 Hz of wall time from the moment the ports are bound: before the graph is discovered, before
        /clock, while paused (a client finds the autopilot at once; it is armable once the heartbeat says STANDBY)."""
        while True:
            for autopilot in self.autopilots:
                try:
                    autopilot.heartbeat()
                except Exception as error:  # one vehicle's failure must not silence the others, nor the next round
                    self.logger.warning(f"MAVLink heartbeat failed: {type(error).__name__}: {error}")
            await asyncio.sleep(1.0)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for endpoints in self.endpoints:
            for endpoint in endpoints:
                if endpoint.transport is not None:
                    endpoint.transport.close()
