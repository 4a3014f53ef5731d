"""One authenticated TCP connection between two TcpRpcServices, on the service's event loop.

Wire messages (msgpack lists, encoded by the service's MessageCodec, one per frame):

- ``[CALL, call_id, endpoint_no, method, args, kwargs, fencing_token]`` (call_id 0: a tell)
- ``[REPLY, call_id, ok, value_or_error]``
- ``[LOOKUP, lookup_id, endpoint_id, method_names]`` -> ``[FOUND, lookup_id, endpoint_no,
  error]``: endpoints get compact numbers per connection, so calls do not carry addresses.

Handshake (before any message is accepted): the acceptor sends a nonce, the connector answers
``HMAC-SHA256(secret, nonce)`` and a nonce of its own, the acceptor proves the secret back. A
peer that fails, or says nothing within the lookup timeout, is disconnected and told nothing.

Adaptive batching: frames handed to the loop in one turn go out in one write right after it,
so a lone frame leaves at once and a burst coalesces; once the socket holds more than 64 KiB
unsent, frames wait until it drained and then go out together.

Threading:
    Everything runs on the service's event-loop thread; other threads use the ``*_threadsafe``
    methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import itertools
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from millrace.errors import AuthenticationError, FrameSizeError, RecipientUnreachableError
from millrace.rpc._futures import complete, fail
from millrace.rpc.message_codec import CodecError, MessageCodec
from millrace.rpc.tcp.framing import ConnectionClosedError, encode_frame, read_frame
from millrace.rpc.tcp.remote_errors import error_from_wire

__all__ = [
    "CALL",
    "FOUND",
    "LOOKUP",
    "REPLY",
    "Connection",
    "handshake_accept",
    "handshake_connect",
]

logger = logging.getLogger(__name__)

CALL, REPLY, LOOKUP, FOUND = 0, 1, 2, 3
_HANDSHAKE_LIMIT = 256  # bytes: the largest frame accepted before authentication
_NONCE_BYTES = 32
_HIGH_WATER = 64 * 1024  # bytes buffered in the transport above which frames are coalesced


def _proof(secret: bytes, nonce: bytes, role: bytes) -> bytes:
    return hmac.new(secret, role + nonce, hashlib.sha256).digest()


async def handshake_accept(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    codec: MessageCodec,
    secret: bytes,
    timeout: float,
) -> None:
    """Acceptor side. Raises AuthenticationError, ConnectionClosedError or TimeoutError."""
    nonce = os.urandom(_NONCE_BYTES)
    writer.write(encode_frame(codec.encode([b"millrace-1", nonce]), _HANDSHAKE_LIMIT))
    await writer.drain()
    answer = codec.decode(await asyncio.wait_for(read_frame(reader, _HANDSHAKE_LIMIT), timeout))
    if not (
        isinstance(answer, list) and len(answer) == 2 and all(isinstance(a, bytes) for a in answer)
    ):
        raise AuthenticationError("malformed handshake answer")
    proof, peer_nonce = answer
    if not hmac.compare_digest(proof, _proof(secret, nonce, b"connector")):
        raise AuthenticationError("wrong cluster secret")
    writer.write(
        encode_frame(codec.encode(_proof(secret, peer_nonce, b"acceptor")), _HANDSHAKE_LIMIT)
    )
    await writer.drain()


async def handshake_connect(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    codec: MessageCodec,
    secret: bytes,
    timeout: float,
) -> None:
    """Connector side. Raises AuthenticationError, ConnectionClosedError or TimeoutError."""
    hello = codec.decode(await asyncio.wait_for(read_frame(reader, _HANDSHAKE_LIMIT), timeout))
    if not (
        isinstance(hello, list)
        and len(hello) == 2
        and hello[0] == b"millrace-1"
        and isinstance(hello[1], bytes)
    ):
        raise AuthenticationError("the peer is not a Millrace RPC endpoint")
    nonce = os.urandom(_NONCE_BYTES)
    writer.write(
        encode_frame(
            codec.encode([_proof(secret, hello[1], b"connector"), nonce]), _HANDSHAKE_LIMIT
        )
    )
    await writer.drain()
    proof = codec.decode(await asyncio.wait_for(read_frame(reader, _HANDSHAKE_LIMIT), timeout))
    if not (
        isinstance(proof, bytes) and hmac.compare_digest(proof, _proof(secret, nonce, b"acceptor"))
    ):
        raise AuthenticationError("the peer does not know the cluster secret")


class Connection:
    """An authenticated connection: calls, replies and lookups in both directions.

    Args:
        reader, writer: The stream pair (after the handshake).
        codec: Message codec.
        limit_bytes: ``rpc.framesize``.
        on_message: ``(connection, message)`` for CALL and LOOKUP messages from the peer.
        on_closed: Called once when the connection ends.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        codec: MessageCodec,
        limit_bytes: int,
        on_message: Callable[[Connection, list[Any]], None],
        on_closed: Callable[[Connection], None],
    ) -> None:
        host, port = writer.get_extra_info("peername")[:2]
        self.peer = f"{host}:{port}"
        self._reader = reader
        self._writer = writer
        self._codec = codec
        self._limit = limit_bytes
        self._on_message = on_message
        self._on_closed = on_closed
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._queue: list[bytes] = []
        self._flush_scheduled = False
        self._draining = False
        self._pending: dict[int, Future[Any]] = {}
        self._ids = itertools.count(1)
        self.closed = False
        self.exported: dict[int, Any] = {}  # endpoint number -> endpoint (acceptor side)
        self._tasks = [self._loop.create_task(self._read_loop())]

    # Any thread ----------------------------------------------------------------------------------

    def request_threadsafe(self, message: list[Any], reply: Future[Any] | None) -> None:
        """Encode ``message`` (its id slot filled here) and send it; ``reply`` gets the answer.

        Raises:
            FrameSizeError: If the encoded message exceeds ``rpc.framesize`` (nothing sent).
            CodecError: If an argument is not an encodable message.
        """
        call_id = next(self._ids) if reply is not None else 0
        message[1] = call_id
        frame = encode_frame(self._codec.encode(message), self._limit)
        self._loop.call_soon_threadsafe(self._send, frame, call_id, reply)
        if reply is not None:
            reply.add_done_callback(lambda _: self._forget(call_id))

    def _forget(self, call_id: int) -> None:
        """A call ended (answered, timed out or failed): drop its pending entry."""
        if threading.get_ident() == self._loop_thread:
            self._pending.pop(call_id, None)  # answered: _complete popped it already
        else:
            with contextlib.suppress(RuntimeError):  # the loop closed: nothing left to drop
                self._loop.call_soon_threadsafe(self._pending.pop, call_id, None)

    def send_threadsafe(self, message: list[Any]) -> None:
        """Encode and send a message that expects no answer (replies, lookup answers).

        Raises:
            FrameSizeError, CodecError: As ``request_threadsafe``.
        """
        frame = encode_frame(self._codec.encode(message), self._limit)
        self._loop.call_soon_threadsafe(self._send, frame, 0, None)

    def close_threadsafe(self, reason: str) -> None:
        self._loop.call_soon_threadsafe(self.close, reason)

    # Loop thread ---------------------------------------------------------------------------------

    def _send(self, frame: bytes, call_id: int, reply: Future[Any] | None) -> None:
        if self.closed:
            if reply is not None:
                fail(reply, RecipientUnreachableError(self.peer, "connection closed"))
            return
        if reply is not None and not reply.done():
            self._pending[call_id] = reply
        self._queue.append(frame)
        if not self._flush_scheduled and not self._draining:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)  # after the other frames ready in this turn

    def _flush(self) -> None:
        """Write every queued frame in one write; past the high-water mark, wait for drain."""
        self._flush_scheduled = False
        if self.closed or not self._queue:
            return
        frames, self._queue = self._queue, []
        self._writer.write(b"".join(frames))
        if self._writer.transport.get_write_buffer_size() > _HIGH_WATER:
            self._draining = True
            self._tasks.append(self._loop.create_task(self._drain()))

    async def _drain(self) -> None:
        try:
            await self._writer.drain()
        except (ConnectionError, asyncio.CancelledError) as error:
            self.close(f"write failed: {error!r}")
            return
        self._draining = False
        self._flush()

    async def _read_loop(self) -> None:
        reason = "closed by peer"
        try:
            while True:
                message = self._codec.decode(await read_frame(self._reader, self._limit))
                if not (
                    isinstance(message, list)
                    and len(message) >= 2
                    and isinstance(message[0], int)
                    and isinstance(message[1], int)
                ):
                    raise CodecError(f"not a wire message: {str(message)[:80]}")
                if message[0] in (REPLY, FOUND):
                    self._complete(message)
                else:
                    self._on_message(self, message)
        except ConnectionClosedError:
            pass
        except (FrameSizeError, CodecError) as error:
            reason = f"malformed frame: {error}"
            logger.warning("closing connection with %s: %s", self.peer, reason)
        except (ConnectionError, asyncio.CancelledError) as error:
            reason = f"connection lost: {error!r}"
        self.close(reason)

    def _complete(self, message: list[Any]) -> None:
        future = self._pending.pop(message[1], None)
        if future is None:
            return  # timed out meanwhile
        if message[0] == FOUND:
            complete(future, message)
        elif len(message) == 4 and message[2] is True:
            complete(future, message[3])
        else:
            fail(future, error_from_wire(message[3] if len(message) == 4 else None))

    def close(self, reason: str) -> None:
        """Close the socket and fail every pending call with RecipientUnreachableError."""
        if self.closed:
            return
        self.closed = True
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        self._writer.close()
        pending, self._pending = self._pending, {}
        for future in pending.values():
            fail(future, RecipientUnreachableError(self.peer, f"connection closed: {reason}"))
        self._on_closed(self)
