"""ConnectionAcceptor: the listening side of a TcpRpcService (issues 3 and 9).

It accepts the connections of peers, admits at most ``rpc.handshake.max-pending`` of them
(``rpc.handshake.max-pending-per-address`` per peer IP) to the handshake at once
(``admission.py``), has each prove the cluster secret within ``rpc.handshake.timeout`` (after
the TLS handshake with ``security.ssl.enabled``; ``handshake.py``) and starts an authenticated
:class:`~millrace.rpc.tcp.connection.Connection` over it. A peer that fails or is too slow is
closed without a word; refusals are logged, throttled.

Accepting is a reader callback on the listener, not ``sock_accept``, whose cancellation can drop
an accepted socket on Python 3.11. After ``accept()`` fails (e.g. out of descriptors) the
acceptor pauses for 100 ms; while every pending slot is taken it pauses 20 ms after each
refusal, so a flood that reconnects at once waits in the kernel's backlog.

Threading:
    :func:`listen` and the constructor: any thread. Everything else: the service's event-loop
    thread, except :meth:`ConnectionAcceptor.start` (any thread).
"""

from __future__ import annotations

import asyncio
import socket
import ssl

from millrace.rpc.tcp.admission import HandshakeAdmission, ThrottledLog
from millrace.rpc.tcp.connection import Connection, ConnectionStarter
from millrace.rpc.tcp.handshake import HANDSHAKE_LIMIT_BYTES, ChannelKeys, handshake_accept
from millrace.rpc.tcp.socket_link import SocketLink

__all__ = ["ConnectionAcceptor", "listen"]

_ACCEPT_BATCH = 16  # connections accepted per readable event of the listener
_ACCEPT_PAUSE = 0.1  # seconds without accepting after accept() failed (e.g. EMFILE)
_FULL_PAUSE = 0.02  # seconds without accepting after a refusal while every slot is taken


def listen(host: str, port: int) -> socket.socket:
    """A non-blocking listening socket on the first address ``host`` resolves to.

    Args:
        host: Interface name or address.
        port: Port; 0 picks a free one.

    Returns:
        The bound, listening socket (backlog 128, ``SO_REUSEADDR``).

    Raises:
        OSError: If the address cannot be resolved or bound; nothing is left open.
    """
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class ConnectionAcceptor:
    """Accepts, admits and authenticates the connections of peers on one listening socket.

    Args:
        loop: The service's event loop.
        listener: A listening socket from :func:`listen`; the acceptor closes it.
        secret: The cluster secret a peer must prove.
        server_ssl: The TLS context of ``security.ssl.enabled``, or None (the channel is then
            bound by a MAC under keys from the handshake).
        handshake_timeout: Seconds a peer has for the TLS and secret handshakes
            (``rpc.handshake.timeout``).
        admission: The caps on connections being authenticated.
        log: Throttles the warnings about refused connections.
        start_connection: Starts the authenticated connection over a link.

    Threading:
        See the module docstring.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        listener: socket.socket,
        *,
        secret: bytes,
        server_ssl: ssl.SSLContext | None,
        handshake_timeout: float,
        admission: HandshakeAdmission,
        log: ThrottledLog,
        start_connection: ConnectionStarter,
    ) -> None:
        self._loop = loop
        self._listener = listener
        self._secret = secret
        self._server_ssl = server_ssl
        self._handshake_timeout = handshake_timeout
        self._admission = admission
        self._log = log
        self._start_connection = start_connection
        self._accepted: set[Connection] = set()
        self._handshaking: set[SocketLink] = set()
        self._closed = False
        self.port: int = listener.getsockname()[1]
        """The port the listener is bound to."""

    @property
    def connections(self) -> list[Connection]:
        """The authenticated connections accepted and not yet closed (loop thread)."""
        return list(self._accepted)

    def start(self) -> None:
        """Start accepting on the loop's next turn.

        Threading:
            Any thread; before the loop runs, or from the loop thread.
        """
        self._loop.call_soon(self._start_accepting)

    def close(self) -> None:
        """Close the listener, the connections in their handshake and the accepted ones.

        A handshake still running ends with its link (its task is cancelled by the service).
        Idempotent.

        Threading:
            Loop thread.
        """
        if self._closed:
            return
        self._closed = True
        self._loop.remove_reader(self._listener.fileno())
        self._listener.close()
        for link in list(self._handshaking):  # a handshake whose cancel is lost ends here
            link.close()
        for connection in list(self._accepted):
            connection.close("service closed")

    def _start_accepting(self) -> None:
        if not self._closed:
            self._loop.add_reader(self._listener.fileno(), self._acceptable)

    def _acceptable(self) -> None:
        """Accept the waiting connections and start their handshakes; close at once those
        over the admission caps."""
        for _ in range(_ACCEPT_BATCH):
            try:
                sock, address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:  # e.g. out of file descriptors: pause, then listen again
                self._log.warning("accept", "accepting a connection failed: %r", error)
                self._pause(_ACCEPT_PAUSE)
                return
            host = str(address[0])
            if not self._admission.admit(host):
                sock.close()
                if self._admission.full:  # a flood holds every slot: pace the refusals
                    self._pause(_FULL_PAUSE)
                    return
                continue
            self._loop.create_task(self._accept(sock, host))

    def _pause(self, seconds: float) -> None:
        self._loop.remove_reader(self._listener.fileno())
        self._loop.call_later(seconds, self._start_accepting)

    async def _accept(self, sock: socket.socket, host: str) -> None:
        try:
            try:
                link = SocketLink(self._loop, sock, HANDSHAKE_LIMIT_BYTES)
            except OSError:  # the peer is gone already
                sock.close()
                return
            authenticated, keys = await self._authenticate(link)
        finally:
            self._admission.release(host)
        if not authenticated:
            return
        connection = self._start_connection(link, keys, self._accepted.discard)
        if not connection.closed:
            self._accepted.add(connection)

    async def _authenticate(self, link: SocketLink) -> tuple[bool, ChannelKeys | None]:
        """The acceptor's TLS and secret handshake within rpc.handshake.timeout.

        Returns:
            ``(True, channel keys or None with TLS)``, or ``(False, None)`` if the link was
            refused (logged) and closed.
        """
        self._handshaking.add(link)
        try:
            async with asyncio.timeout(self._handshake_timeout):
                if self._server_ssl is not None:
                    await link.start_tls(self._server_ssl, server_side=True)
                keys = await handshake_accept(
                    link, self._secret, bind_channel=self._server_ssl is None
                )
                return True, keys
        except asyncio.CancelledError:  # the service is closing
            link.close()
            return False, None
        except TimeoutError:
            self._log.warning(
                "handshake-timeout",
                "rejected connection from %s: no handshake within rpc.handshake.timeout (%g s)",
                link.peer,
                self._handshake_timeout,
            )
        except Exception as error:
            self._log.warning(
                "rejected",
                "rejected connection from %s: %s",
                link.peer,
                error or type(error).__name__,
            )
        finally:
            self._handshaking.discard(link)
        link.close()
        return False, None
