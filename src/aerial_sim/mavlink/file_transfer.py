"""MAVLink FTP (FILE_TRANSFER_PROTOCOL) answered as an autopilot without files (pure).

Clients ask an autopilot for files over MAVLink FTP before falling back to the plain protocols:
MAVProxy fetches parameters as PX4's and ArduPilot's ``@PARAM/param.pck`` first, QGroundControl reads
component metadata and the mission as files. This autopilot keeps no files, so it answers every
request at once as the FTP protocol (mavlink.io "File Transfer Protocol") lets a server say so —
``TerminateSession`` and ``ResetSessions`` acknowledged, opening, listing, reading or checksumming a
file refused with ``FileNotFound``, writing, creating or removing with ``UnknownCommand`` — and the
client falls back at once instead of after its timeouts. Each reply carries the request's opcode and
sequence number + 1, as PX4's ``MavlinkFTP`` answers.
"""

from __future__ import annotations

import struct

OP_TERMINATE_SESSION, OP_RESET_SESSIONS = 1, 2
OP_ACK, OP_NAK = 128, 129
#: Requests about an existing file or directory: ListDirectory, OpenFileRO, ReadFile, CalcFileCRC32,
#: BurstReadFile, ListDirectoryWithTime.
READ_OPCODES = (3, 4, 5, 14, 15, 16)
ERR_UNKNOWN_COMMAND, ERR_FILE_NOT_FOUND = 7, 10
HEADER = struct.Struct("<HBBBBBBI")  # seq, session, opcode, size, req_opcode, burst_complete, padding, offset
PAYLOAD_BYTES = 251


def reply_payload(request: bytes | list[int]) -> list[int] | None:
    """The 251-byte FTP payload answering ``request`` (a FILE_TRANSFER_PROTOCOL payload); None if it is too
    short to be one (nothing to answer)."""
    data = bytes(request)
    if len(data) < HEADER.size:
        return None
    seq, session, opcode, _, _, _, _, _ = HEADER.unpack_from(data)
    if opcode in (OP_TERMINATE_SESSION, OP_RESET_SESSIONS):
        answer, body = OP_ACK, b""
    elif opcode in READ_OPCODES:
        answer, body = OP_NAK, bytes([ERR_FILE_NOT_FOUND])
    else:
        answer, body = OP_NAK, bytes([ERR_UNKNOWN_COMMAND])
    packed = HEADER.pack((seq + 1) & 0xFFFF, session, answer, len(body), opcode, 0, 0, 0) + body
    return list(packed.ljust(PAYLOAD_BYTES, b"\0"))
