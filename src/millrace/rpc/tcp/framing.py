"""Length-prefixed frames on asyncio streams: a 4-byte big-endian length, then the payload.

The sender refuses a payload above ``rpc.framesize`` before writing anything (only that call
fails); the receiver refuses a frame whose announced length exceeds it before reading the
payload, and the connection is closed (its peer is broken or hostile).
"""

from __future__ import annotations

import asyncio
import struct

from millrace.errors import FrameSizeError, RpcError

__all__ = ["HEADER_BYTES", "ConnectionClosedError", "encode_frame", "read_frame"]

_HEADER = struct.Struct(">I")
HEADER_BYTES = _HEADER.size


class ConnectionClosedError(RpcError):
    """The peer closed the connection (cleanly between frames, or in the middle of one)."""


def encode_frame(payload: bytes, limit_bytes: int) -> bytes:
    """Header and payload of one frame.

    Raises:
        FrameSizeError: If ``payload`` is larger than ``limit_bytes``; nothing is produced.
    """
    if len(payload) > limit_bytes:
        raise FrameSizeError(len(payload), limit_bytes)
    return _HEADER.pack(len(payload)) + payload


async def read_frame(reader: asyncio.StreamReader, limit_bytes: int) -> bytes:
    """The payload of the next frame.

    Raises:
        ConnectionClosedError: If the stream ends before or inside a frame.
        FrameSizeError: If the announced length exceeds ``limit_bytes`` (the payload is not
            read; close the connection).
    """
    try:
        header = await reader.readexactly(HEADER_BYTES)
    except asyncio.IncompleteReadError as error:
        if error.partial:
            raise ConnectionClosedError("connection closed inside a frame header") from error
        raise ConnectionClosedError("connection closed") from error
    (length,) = _HEADER.unpack(header)
    if length > limit_bytes:
        raise FrameSizeError(length, limit_bytes, what="incoming frame")
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError as error:
        raise ConnectionClosedError(
            f"connection closed after {len(error.partial)} of {length} payload bytes"
        ) from error
