"""One authenticated TCP connection between two TcpRpcServices.

Wire messages (msgpack lists, encoded by the service's MessageCodec, one per frame):

- ``[CALL, call_id, endpoint_no, method, args, kwargs, fencing_token]`` (call_id 0: a tell)
- ``[REPLY, call_id, ok, value_or_error]``
- ``[LOOKUP, lookup_id, endpoint_id, method_names]`` -> ``[FOUND, lookup_id, endpoint_no,
  error]``: endpoints get compact numbers per connection, so calls do not carry addresses.
- ``[PING, 0]`` -> ``[PONG, 0]``: keepalive. A side that has heard nothing from its peer for a
  third of its ``rpc.idle-timeout`` pings; the peer answers at once, whatever its own
  settings, so liveness depends only on the checking side's configuration.

The connection starts after the handshake (``handshake.py``); without TLS every frame carries
a MAC (``channel_mac.py``), checked by the link before a message reaches this class. A reply
that cannot be understood fails the call it answers, at once, and nothing else.

Calls and replies are written by the thread that makes them (a caller's thread, an endpoint's
main thread) straight to the socket, see :class:`~millrace.rpc.tcp.socket_link.SocketLink`;
incoming frames are read and dispatched on the service's event-loop thread.

Threading:
    :meth:`Connection.request`, :meth:`Connection.send`, :meth:`Connection.ping` and
    :meth:`Connection.close_threadsafe`: any thread. Everything else: the event-loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from millrace.errors import (
    CodecError,
    ConnectionClosedError,
    RecipientUnreachableError,
    RemoteRpcError,
)
from millrace.rpc.future_utils import complete, fail
from millrace.rpc.message_codec import MessageCodec
from millrace.rpc.tcp.channel_mac import ChannelMac
from millrace.rpc.tcp.framing import encode_frame
from millrace.rpc.tcp.handshake import ChannelKeys
from millrace.rpc.tcp.remote_errors import error_from_wire
from millrace.rpc.tcp.socket_link import SocketLink

__all__ = ["CALL", "FOUND", "LOOKUP", "PING", "PONG", "REPLY", "Connection", "ConnectionStarter"]

logger = logging.getLogger(__name__)

CALL, REPLY, LOOKUP, FOUND, PING, PONG = 0, 1, 2, 3, 4, 5
_PING_FRAME = encode_frame(b"\x92\x04\x00", 16)  # msgpack [PING, 0]
_PONG_FRAME = encode_frame(b"\x92\x05\x00", 16)  # msgpack [PONG, 0]
_SWEEP_MIN_SIZE = 1024  # pending calls before abandoned (timed-out) ones are swept

ConnectionStarter = Callable[
    [SocketLink, "ChannelKeys | None", Callable[["Connection"], None]], "Connection"
]
"""``(link, channel keys or None with TLS, on_closed)``: the started Connection over an
authenticated link (the service's codec, frame size and limits; loop thread)."""


def _describe(value: Any) -> str:
    """A short description of a decoded value that never walks it (it may nest deeply)."""
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return f"a {type(value).__name__}"


class Connection:
    """An authenticated connection: calls, replies and lookups in both directions.

    Args:
        link: The socket link, after the handshake.
        codec: Message codec.
        limit_bytes: ``rpc.framesize``.
        on_message: ``(connection, message)`` for CALL and LOOKUP messages from the peer, on
            the loop thread.
        on_closed: Called once when the connection ends, on the loop thread.
        mac: The channel MAC of a connection without TLS (see ``handshake.py``).
        max_unsent_bytes: ``rpc.write-queue.max-size``: unsent bytes before the connection is
            closed (a peer that does not read).

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
        *,
        mac: ChannelMac | None = None,
        max_unsent_bytes: int | None = None,
    ) -> None:
        self.peer = link.peer
        self._link = link
        self._codec = codec
        self._limit = limit_bytes
        self._on_message = on_message
        self._on_closed = on_closed
        self._mac = mac
        self._max_unsent = max_unsent_bytes
        self._loop = asyncio.get_running_loop()
        # Written by callers on any thread, popped by the loop thread: single dict operations,
        # atomic in CPython. A call that timed out stays until its reply or a sweep drops it.
        self._pending: dict[int, Future[Any]] = {}
        self._sweep_at = _SWEEP_MIN_SIZE
        self._ids = itertools.count(1)
        self.closed = False
        self.exported: dict[int, Any] = {}  # endpoint number -> ExportedEndpoint (acceptor)

    def start(self) -> None:
        """Start reading: from now on the peer's messages are dispatched.

        Threading:
            Loop thread.
        """
        self._link.start(
            self._on_frame,
            self.close,
            self._limit,
            mac=self._mac,
            max_unsent_bytes=self._max_unsent,
        )

    @property
    def last_received(self) -> float:
        """``time.monotonic()`` when the peer last sent anything (loop thread)."""
        return self._link.last_received

    def ping(self) -> None:
        """Send a PING (keepalive; the peer answers PONG); dropped if the connection is closed.

        Threading:
            Any thread.
        """
        with contextlib.suppress(ConnectionClosedError):
            self._link.write(_PING_FRAME)

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

    def _on_frame(self, payload: bytes | memoryview) -> None:
        try:
            message = self._codec.decode(payload)
            if not (
                isinstance(message, list)
                and len(message) >= 2
                and type(message[0]) is int
                and type(message[1]) is int
            ):
                raise CodecError(f"not a wire message: {_describe(message)}")
        except CodecError as error:
            reason = f"malformed frame: {error}"
            logger.warning("closing connection with %s: %s", self.peer, reason)
            self.close(reason)
            return
        kind = message[0]
        if kind in (REPLY, FOUND):
            self._complete(message)
            return
        if kind == PING:
            with contextlib.suppress(ConnectionClosedError):
                self._link.write(_PONG_FRAME)
            return
        if kind == PONG:
            return
        try:
            self._on_message(self, message)
        except Exception:
            logger.exception("closing connection with %s: message handling failed", self.peer)
            self.close("message handling failed")

    def _complete(self, message: list[Any]) -> None:
        """Complete the call ``message`` answers; a malformed answer fails that call alone."""
        future = self._pending.pop(message[1], None)
        if future is None:
            return  # timed out meanwhile
        try:
            if message[0] == FOUND:
                if not _is_lookup_answer(message):
                    raise CodecError(f"malformed lookup answer ({_describe(message)})")
                complete(future, message)
            elif len(message) == 4 and message[2] is True:
                complete(future, message[3])
            elif len(message) == 4 and message[2] is False:
                fail(future, error_from_wire(message[3]))
            else:
                raise CodecError(f"malformed reply ({_describe(message)})")
        except Exception as error:  # whatever the peer sent: this call fails, nothing else
            logger.warning("malformed answer from %s: %s", self.peer, error)
            fail(future, RemoteRpcError("malformed reply", f"{type(error).__name__}: {error}"))

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


def _is_lookup_answer(message: list[Any]) -> bool:
    """``[FOUND, id, endpoint number or None, error text or None]``, one of them None."""
    if len(message) != 4:
        return False
    number, error = message[2], message[3]
    if error is None:
        return type(number) is int and number > 0
    return number is None and isinstance(error, str)
