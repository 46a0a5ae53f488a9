"""msgpack-rpc over TCP on asyncio: the transport of AirSim's API (AIRSIM_API.md, "Transport").

Requests ``[0, msgid, method, params]`` become one asyncio task each, so a slow
call (``moveToPositionAsync`` waits until the vehicle arrives) never delays the
``getMultirotorState`` polls a client sends meanwhile: replies
``[1, msgid, error, result]`` go out in the order they finish. Notifications
``[2, method, params]`` run the same way with no reply.

Robustness (a client can never take the server down):
- a request larger than ``max_request_bytes`` or bytes that are not msgpack
  close that client's connection with one log line (the stream cannot be
  re-synchronised after garbage);
- a well-formed message that is not a request is logged and skipped;
- a client that disconnects mid-call: its pending calls finish (moves keep
  flying, as in AirSim) and their replies are dropped;
- any exception inside a handler becomes an error reply;
- backpressure, per connection: replies are written one at a time, each
  after the previous ones have drained to the socket below
  ``write_high_water_bytes``, and the server reads no further request from a
  client while ``max_pending`` of its calls are unanswered or unsent. A
  client that pipelines requests and never reads the replies therefore holds
  at most ``max_pending`` calls and one socket buffer of replies in the
  server, not one reply per request sent.

Packing: ``use_bin_type=True`` (image bytes travel as msgpack bin, which both
clients decode to ``bytes``); unpacking: ``raw=False`` with
``surrogateescape`` so an airsim 1.8.1 client (no bin type) can send anything.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

import msgpack
import numpy as np

REQUEST, RESPONSE, NOTIFY = 0, 1, 2

#: Dispatcher: (method, params) -> result; raise :class:`RpcError` for an error reply.
Dispatcher = Callable[[str, list], Awaitable[Any]]


class RpcError(Exception):
    """An error reply: ``str(error)`` is sent to the client as the error object."""


class Prepacked:
    """Bytes that are already one msgpack object (large image payloads packed with NumPy)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data


def pack_float32_array(values: np.ndarray) -> Prepacked:
    """A msgpack array of float32 (what the C++ server sends for vector<float>, ImageResponse's
    ``image_data_float``), packed by NumPy in one pass instead of one ``packer.pack`` per pixel."""
    flat = np.ascontiguousarray(values, dtype=np.float32).ravel()
    body = np.empty(flat.size, dtype=[("tag", "u1"), ("value", ">f4")])
    body["tag"] = 0xCA
    body["value"] = flat
    return Prepacked(b"\xdd" + flat.size.to_bytes(4, "big") + body.tobytes())


def pack_value(value: Any, packer: msgpack.Packer) -> bytes:
    """Pack ``value``, splicing in :class:`Prepacked` parts (only responses that hold one pay for the walk)."""
    parts: list[bytes] = []
    _pack_into(value, packer, parts)
    return b"".join(parts)


def _pack_into(value: Any, packer: msgpack.Packer, parts: list) -> None:
    """Append ``value``'s msgpack pieces to ``parts``: the megabyte image payloads are copied once, by the
    caller's single join (nested joins copied each payload once per level, ~10 ms a 460x320 image batch)."""
    if isinstance(value, Prepacked):
        parts.append(value.data)
    elif isinstance(value, bytes) and len(value) > 0xFFFF:  # bin 32, what msgpack writes, without its copy
        parts += (b"\xc6" + len(value).to_bytes(4, "big"), value)
    elif isinstance(value, dict):
        parts.append(packer.pack_map_header(len(value)))
        for key, item in value.items():
            parts.append(packer.pack(key))
            _pack_into(item, packer, parts)
    elif isinstance(value, (list, tuple)):
        parts.append(packer.pack_array_header(len(value)))
        for item in value:
            _pack_into(item, packer, parts)
    else:
        parts.append(packer.pack(value))


class ContainsPrepacked(list):
    """A list result some of whose items hold :class:`Prepacked` values."""


def encode_response(msgid: int, error: Any, result: Any) -> bytes:
    packer = msgpack.Packer(use_bin_type=True, autoreset=True)
    if isinstance(result, ContainsPrepacked):
        parts = [packer.pack_array_header(4), packer.pack(RESPONSE), packer.pack(msgid), packer.pack(error)]
        _pack_into(result, packer, parts)
        return b"".join(parts)
    return packer.pack([RESPONSE, msgid, error, result])


class MsgpackRpcServer:
    """Serves ``dispatcher`` to any number of TCP clients (see module docstring)."""

    def __init__(self, dispatcher: Dispatcher, host: str = "127.0.0.1", port: int = 41451,
                 max_request_bytes: int = 16 * 1024 * 1024, logger: logging.Logger | None = None,
                 max_pending: int = 64, write_high_water_bytes: int = 4 * 1024 * 1024):
        self.dispatcher = dispatcher
        self.host = host
        self.requested_port = port
        self.max_request_bytes = max_request_bytes
        self.max_pending = max_pending
        self.write_high_water_bytes = write_high_water_bytes
        self.log = logger or logging.getLogger("airsim_api.rpc")
        self._server: asyncio.AbstractServer | None = None
        self.connections = 0
        self.requests_served = 0
        #: Largest number of bytes of replies a connection's transport held unsent (backpressure check).
        self.peak_unsent_bytes = 0
        #: Largest number of unanswered or unsent calls of one connection.
        self.peak_pending = 0

    @property
    def port(self) -> int:
        """The bound port (useful with ``port=0``: the OS picks a free one)."""
        return self._server.sockets[0].getsockname()[1]

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.requested_port, reuse_address=True,
                                                  limit=2 ** 20)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        self.connections += 1
        unpacker = msgpack.Unpacker(raw=False, unicode_errors="surrogateescape", strict_map_key=False,
                                    max_buffer_size=self.max_request_bytes)
        pending: set[asyncio.Task] = set()
        room = asyncio.Event()  # set while fewer than max_pending calls are unanswered or unsent
        room.set()
        writer.transport.set_write_buffer_limits(high=self.write_high_water_bytes)
        connection = _Connection(writer, pending, room, asyncio.Lock())
        try:
            while True:
                data = await reader.read(1 << 16)
                if not data:
                    break
                try:
                    unpacker.feed(data)
                except msgpack.BufferFull:
                    self.log.warning(f"client {peer}: request larger than {self.max_request_bytes} bytes; "
                                     "connection closed")
                    break
                try:
                    for message in unpacker:
                        await room.wait()  # requests already received wait their turn too
                        self._on_message(message, connection, peer)
                except (ValueError, msgpack.UnpackException, msgpack.ExtraData) as error:
                    self.log.warning(f"client {peer}: malformed msgpack ({type(error).__name__}: {error}); "
                                     "connection closed")
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.connections -= 1
            writer.close()

    def _on_message(self, message: Any, connection: "_Connection", peer) -> None:
        if isinstance(message, (list, tuple)) and len(message) == 4 and message[0] == REQUEST:
            _, msgid, method, params = message
            task = asyncio.create_task(self._answer(msgid, method, params, connection))
        elif isinstance(message, (list, tuple)) and len(message) == 3 and message[0] == NOTIFY:
            _, method, params = message
            task = asyncio.create_task(self._answer(None, method, params, None))
        else:
            self.log.warning(f"client {peer}: not a msgpack-rpc request, skipped: {repr(message)[:80]}")
            return
        pending = connection.pending
        pending.add(task)
        self.peak_pending = max(self.peak_pending, len(pending))
        if len(pending) >= self.max_pending:
            connection.room.clear()

        def done(finished: asyncio.Task) -> None:
            pending.discard(finished)
            if len(pending) < self.max_pending:
                connection.room.set()

        task.add_done_callback(done)

    async def _answer(self, msgid: Any, method: Any, params: Any, connection: "_Connection | None") -> None:
        error, result = None, None
        try:
            if not isinstance(method, str) or not isinstance(params, (list, tuple)):
                raise RpcError(f"malformed request: method {repr(method)[:40]} with params {repr(params)[:40]}")
            result = await self.dispatcher(method, list(params))
        except RpcError as failure:
            error = str(failure)
        except asyncio.CancelledError:
            raise
        except Exception as failure:  # noqa: BLE001 - a handler bug must not end the server
            self.log.error(f"{method}: {type(failure).__name__}: {failure}")
            error = f"internal error in {method}: {type(failure).__name__}: {failure}"
        self.requests_served += 1
        if connection is None:
            return
        writer = connection.writer
        # One reply at a time, each after the ones before it drained below the high-water mark: the
        # transport never holds more than that plus one reply, however many the client leaves unread.
        async with connection.write_lock:
            if writer.is_closing():
                return
            try:
                await writer.drain()
                if writer.is_closing():
                    return
                try:
                    reply = encode_response(msgid, error, result)
                except (TypeError, ValueError, OverflowError) as failure:
                    reply = encode_response(msgid, f"cannot encode the result of {method}: {failure}", None)
                del result
                writer.write(reply)
                self.peak_unsent_bytes = max(self.peak_unsent_bytes, writer.transport.get_write_buffer_size())
                await writer.drain()
            except (ConnectionError, RuntimeError):
                pass  # the client left; nothing to tell it


class _Connection:
    """One client's writer, calls in the server and backpressure state."""

    __slots__ = ("writer", "pending", "room", "write_lock")

    def __init__(self, writer: asyncio.StreamWriter, pending: set, room: asyncio.Event, write_lock: asyncio.Lock):
        self.writer, self.pending, self.room, self.write_lock = writer, pending, room, write_lock
