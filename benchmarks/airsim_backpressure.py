"""What unread pipelined replies cost the AirSim server (issue 30): memory held per connection.

A client sends 300 ``simGetImages``-sized requests (one 460x320x3 uncompressed image each, 441,600 bytes)
at once on one connection and reads nothing for 3 s, then reads everything. The server (the real
msgpack-rpc transport, in a thread of this process) is measured while the replies are unread: its
process RSS growth, the calls it holds and the reply bytes left unsent in its transport. Before the
per-connection backpressure every reply was written at once (300 x 441,600 bytes = 132 MB queued;
issue 30 measured 294 -> 907 MB RSS on the launched server). Run: ``tools/dev.sh bench airsim_backpressure``.

Measured here (2-core shared machine, 2026-11-26): RSS growth 6.5 MB, 64 calls held, 4.44 MB unsent, all
300 read in 0.85 s; the transport before the change (commit c372139's rpc.py, same script without the
counters it lacks): RSS growth 388.5 MB, read in 3.71 s.
"""

from __future__ import annotations

import asyncio
import resource
import socket
import threading
import time

import msgpack

from aerial_sim.airsim.rpc import MsgpackRpcServer

REPLY_BYTES = 460 * 320 * 3
REQUESTS = 300


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 1e6


async def image(method, params):
    return bytes(REPLY_BYTES)


def main() -> None:
    loop = asyncio.new_event_loop()
    server = MsgpackRpcServer(image, "127.0.0.1", 0)
    loop.run_until_complete(server.start())
    threading.Thread(target=loop.run_forever, daemon=True).start()
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
    before = rss_mb()
    sock.sendall(b"".join(msgpack.packb([0, i, "simGetImages", []]) for i in range(REQUESTS)))
    time.sleep(3.0)
    held = rss_mb() - before
    unpacker, replies, start = msgpack.Unpacker(raw=False), 0, time.monotonic()
    while replies < REQUESTS:
        unpacker.feed(sock.recv(1 << 20))
        replies += sum(1 for _ in unpacker)
    drained = time.monotonic() - start
    print(f"{REQUESTS} image requests pipelined, replies unread for 3 s ({REQUESTS * REPLY_BYTES / 1e6:.0f} MB of replies):")
    print(f"  server RSS growth while unread   {held:8.1f} MB")
    print(f"  calls held at most               {server.peak_pending:8d}   (max_pending {server.max_pending})")
    print(f"  reply bytes unsent at most       {server.peak_unsent_bytes / 1e6:8.2f} MB (high-water "
          f"{server.write_high_water_bytes / 1e6:.1f} MB + one reply)")
    print(f"  all {replies} replies then read in  {drained:8.2f} s")


if __name__ == "__main__":
    main()
