"""Length-prefixed frames: a 4-byte big-endian length, then the payload.

The sender refuses a payload above ``rpc.framesize`` before writing anything (only that call
fails); the receiver refuses a frame whose announced length exceeds it as soon as the header is
in, before buffering the payload, and the connection is closed (its peer is broken or hostile).
"""

from __future__ import annotations

import struct

from millrace.errors import ConnectionClosedError, FrameSizeError

__all__ = ["HEADER_BYTES", "FrameDecoder", "encode_frame"]

_HEADER = struct.Struct(">I")
HEADER_BYTES = _HEADER.size


def encode_frame(payload: bytes, limit_bytes: int) -> bytes:
    """Header and payload of one frame.

    Raises:
        FrameSizeError: If ``payload`` is larger than ``limit_bytes``; nothing is produced.
    """
    if len(payload) > limit_bytes:
        raise FrameSizeError(len(payload), limit_bytes)
    return _HEADER.pack(len(payload)) + payload


class FrameDecoder:
    """Cuts a byte stream into frame payloads, whatever the chunk boundaries.

    Bytes of an incomplete frame are kept as a list of chunks and joined once the frame is
    complete, so a large frame arriving in many reads costs linear time.

    Args:
        limit_bytes: ``rpc.framesize``; a larger announced length fails :meth:`feed`. A public
            attribute: a connection raises it once the peer is authenticated.

    Threading:
        One thread at a time (the connection's reading thread).
    """

    __slots__ = ("_chunks", "_have", "_need", "limit_bytes")

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self._chunks: list[bytes] = []
        self._have = 0  # bytes in _chunks
        self._need = HEADER_BYTES  # bytes needed before _chunks can yield a frame

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return self._have

    def feed(self, data: bytes) -> list[bytes]:
        """The payloads of the frames completed by ``data``, in order.

        Raises:
            FrameSizeError: If a header announces more than ``limit_bytes`` (stop reading).
        """
        if self._chunks:
            self._chunks.append(data)
            self._have += len(data)
            if self._have < self._need:
                return []
            data = b"".join(self._chunks)
            self._chunks = []
            self._have = 0
        frames = []
        unpack_from, end, pos, limit = _HEADER.unpack_from, len(data), 0, self.limit_bytes
        while end - pos >= HEADER_BYTES:
            (length,) = unpack_from(data, pos)
            if length > limit:
                raise FrameSizeError(length, limit, what="incoming frame")
            stop = pos + HEADER_BYTES + length
            if stop > end:
                self._need = HEADER_BYTES + length
                break
            frames.append(data[pos + HEADER_BYTES : stop])
            pos = stop
        else:
            self._need = HEADER_BYTES
        if pos < end:
            rest = data[pos:] if pos else data
            self._chunks.append(rest)
            self._have = len(rest)
        return frames

    def check_end(self) -> None:
        """Call when the stream ended: fine between frames, an error inside one.

        Raises:
            ConnectionClosedError: If a partial frame is buffered (always: the stream ended).
        """
        if self._have == 0:
            raise ConnectionClosedError("connection closed")
        if self._have < HEADER_BYTES:
            raise ConnectionClosedError("connection closed inside a frame header")
        raise ConnectionClosedError(
            f"connection closed after {self._have - HEADER_BYTES} of "
            f"{self._need - HEADER_BYTES} payload bytes"
        )
