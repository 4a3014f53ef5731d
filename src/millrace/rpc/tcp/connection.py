"""One authenticated TCP connection between two TcpRpcServices.

Wire messages (msgpack lists, encoded by the service's MessageCodec, one per frame):

- ``[CALL, call_id, endpoint_no, method, args, kwargs, fencing_token]`` (call_id 0: a tell)
- ``[REPLY, call_id, ok, value_or_error]``
- ``[LOOKUP, lookup_id, endpoint_id, method_names]`` -> ``[FOUND, lookup_id, endpoint_no,
  error]``: endpoints get compact numbers per connection, so calls do not carry addresses.

Handshake (before any message is accepted): the acceptor sends a nonce, the connector answers
``HMAC-SHA256(secret, nonce)`` and a nonce of its own, the acceptor proves the secret back. A
peer that fails, or says nothing within the lookup timeout, is disconnected and told nothing.

Calls and replies are written by the thread that makes them (a caller's thread, an endpoint's
main thread) straight to the socket, see :class:`~millrace.rpc.tcp.socket_link.SocketLink`;
incoming frames are read and dispatched on the service's event-loop thread.

Threading:
    :meth:`Connection.request`, :meth:`Connection.send` and :meth:`Connection.close_threadsafe`:
    any thread. Everything else: the event-loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import itertools
import logging
import os
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from millrace.errors import AuthenticationError, RecipientUnreachableError
from millrace.rpc._futures import complete, fail
from millrace.rpc.message_codec import CodecError, MessageCodec
from millrace.rpc.tcp.framing import ConnectionClosedError, encode_frame
from millrace.rpc.tcp.remote_errors import error_from_wire
from millrace.rpc.tcp.socket_link import SocketLink

__all__ = [
    "CALL",
    "FOUND",
    "HANDSHAKE_LIMIT_BYTES",
    "LOOKUP",
    "REPLY",
    "Connection",
    "handshake_accept",
    "handshake_connect",
]

logger = logging.getLogger(__name__)

CALL, REPLY, LOOKUP, FOUND = 0, 1, 2, 3
HANDSHAKE_LIMIT_BYTES = 256  # the largest frame accepted before authentication
_NONCE_BYTES = 32
_SWEEP_MIN_SIZE = 1024  # pending calls before abandoned (timed-out) ones are swept


def _proof(secret: bytes, nonce: bytes, role: bytes) -> bytes:
    return hmac.new(secret, role + nonce, hashlib.sha256).digest()


def _handshake_frame(codec: MessageCodec, value: Any) -> bytes:
    return encode_frame(codec.encode(value), HANDSHAKE_LIMIT_BYTES)


async def _read(link: SocketLink, codec: MessageCodec, timeout: float) -> Any:
    return codec.decode(await asyncio.wait_for(link.read_frame(), timeout))


async def handshake_accept(
    link: SocketLink, codec: MessageCodec, secret: bytes, timeout: float
) -> None:
    """Acceptor side. Raises AuthenticationError, ConnectionClosedError or TimeoutError."""
    nonce = os.urandom(_NONCE_BYTES)
    link.write(_handshake_frame(codec, [b"millrace-1", nonce]))
    answer = await _read(link, codec, timeout)
    if not (
        isinstance(answer, list) and len(answer) == 2 and all(isinstance(a, bytes) for a in answer)
    ):
        raise AuthenticationError("malformed handshake answer")
    proof, peer_nonce = answer
    if not hmac.compare_digest(proof, _proof(secret, nonce, b"connector")):
        raise AuthenticationError("wrong cluster secret")
    link.write(_handshake_frame(codec, _proof(secret, peer_nonce, b"acceptor")))


async def handshake_connect(
    link: SocketLink, codec: MessageCodec, secret: bytes, timeout: float
) -> None:
    """Connector side. Raises AuthenticationError, ConnectionClosedError or TimeoutError."""
    hello = await _read(link, codec, timeout)
    if not (
        isinstance(hello, list)
        and len(hello) == 2
        and hello[0] == b"millrace-1"
        and isinstance(hello[1], bytes)
    ):
        raise AuthenticationError("the peer is not a Millrace RPC endpoint")
    nonce = os.urandom(_NONCE_BYTES)
    link.write(_handshake_frame(codec, [_proof(secret, hello[1], b"connector"), nonce]))
    proof = await _read(link, codec, timeout)
    if not (
        isinstance(proof, bytes) and hmac.compare_digest(proof, _proof(secret, nonce, b"acceptor"))
    ):
        raise AuthenticationError("the peer does not know the cluster secret")


class Connection:
    """An authenticated connection: calls, replies and lookups in both directions.

    Args:
        link: The socket link, after the handshake.
        codec: Message codec.
        limit_bytes: ``rpc.framesize``.
        on_message: ``(connection, message)`` for CALL and LOOKUP messages from the peer, on
            the loop thread.
        on_closed: Called once when the connection ends, on the loop thread.

    Threading:
        Construct on the loop thread; see the module docstring.
    """

    def __init__(
        self,
        link: SocketLink,
        codec: MessageCodec,
        limit_bytes: int,
        on_message: Callable[[Connection, list[Any]], None],
        on_closed: Callable[[Connection], None],
    ) -> None:
        self.peer = link.peer
        self._link = link
        self._codec = codec
        self._limit = limit_bytes
        self._on_message = on_message
        self._on_closed = on_closed
        self._loop = asyncio.get_running_loop()
        # Written by callers on any thread, popped by the loop thread: single dict operations,
        # atomic in CPython. A call that timed out stays until its reply or a sweep drops it.
        self._pending: dict[int, Future[Any]] = {}
        self._sweep_at = _SWEEP_MIN_SIZE
        self._ids = itertools.count(1)
        self.closed = False
        self.exported: dict[int, Any] = {}  # endpoint number -> endpoint (acceptor side)

    def start(self) -> None:
        """Start reading: from now on the peer's messages are dispatched.

        Threading:
            Loop thread.
        """
        self._link.start(self._on_frame, self.close, self._limit)

    # Any thread ----------------------------------------------------------------------------------

    def request(self, message: list[Any], reply: Future[Any] | None) -> None:
        """Encode ``message`` (its id slot filled here) and send it; ``reply`` gets the answer.

        Args:
            message: A CALL or LOOKUP message; ``message[1]`` is overwritten with the call id.
            reply: Future completed by the peer's answer; None for a tell (nothing comes back).

        Raises:
            FrameSizeError: If the encoded message exceeds ``rpc.framesize`` (nothing sent).
            CodecError: If an argument is not an encodable message.

        Threading:
            Any thread. If the connection is closed, ``reply`` fails with
            RecipientUnreachableError (a tell is dropped).
        """
        if reply is None:
            message[1] = 0
            frame = encode_frame(self._codec.encode(message), self._limit)
            try:  # noqa: SIM105 - on every tell; cheaper than contextlib.suppress
                self._link.write(frame)
            except ConnectionClosedError:
                pass
            return
        call_id = message[1] = next(self._ids)
        frame = encode_frame(self._codec.encode(message), self._limit)
        pending = self._pending
        pending[call_id] = reply  # before the write: the answer may come at once
        if len(pending) > self._sweep_at:
            self._sweep_at = 1 << 62  # until the sweep ran
            self._loop.call_soon_threadsafe(self._sweep)
        try:
            self._link.write(frame)
        except ConnectionClosedError:
            pending.pop(call_id, None)
            fail(reply, RecipientUnreachableError(self.peer, "connection closed"))

    def send(self, message: list[Any]) -> None:
        """Encode and send a message that expects no answer (replies, lookup answers).

        Raises:
            FrameSizeError, CodecError: As :meth:`request`.

        Threading:
            Any thread; dropped if the connection is closed.
        """
        frame = encode_frame(self._codec.encode(message), self._limit)
        try:  # noqa: SIM105 - on every reply; cheaper than contextlib.suppress
            self._link.write(frame)
        except ConnectionClosedError:
            pass

    def close_threadsafe(self, reason: str) -> None:
        """:meth:`close` from any thread."""
        with contextlib.suppress(RuntimeError):  # the loop closed: so did the connection
            self._loop.call_soon_threadsafe(self.close, reason)

    # Loop thread ---------------------------------------------------------------------------------

    def _sweep(self) -> None:
        """Drop calls that ended without an answer (timed out, cancelled)."""
        pending = self._pending
        for call_id, future in list(pending.items()):
            if future.done():
                pending.pop(call_id, None)
        self._sweep_at = max(2 * len(pending), _SWEEP_MIN_SIZE)

    def _on_frame(self, payload: bytes) -> None:
        try:
            message = self._codec.decode(payload)
            if not (
                isinstance(message, list)
                and len(message) >= 2
                and isinstance(message[0], int)
                and isinstance(message[1], int)
            ):
                raise CodecError(f"not a wire message: {str(message)[:80]}")
        except CodecError as error:
            reason = f"malformed frame: {error}"
            logger.warning("closing connection with %s: %s", self.peer, reason)
            self.close(reason)
            return
        kind = message[0]
        if kind in (REPLY, FOUND):
            self._complete(message)
            return
        try:
            self._on_message(self, message)
        except Exception:
            logger.exception("closing connection with %s: message handling failed", self.peer)
            self.close("message handling failed")

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
        self._link.close()  # from now on a request fails its own reply
        pending = self._pending
        while pending:
            _, future = pending.popitem()
            fail(future, RecipientUnreachableError(self.peer, f"connection closed: {reason}"))
        self._on_closed(self)
