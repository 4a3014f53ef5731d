"""OutgoingConnections: the connections a TcpRpcService opens to its peers (issue 3).

One authenticated connection per remote service (``host:port``), opened on first use and shared
by every caller on every thread; a connection that failed or closed is opened again by the next
caller. Opening one connects within ``rpc.lookup-timeout`` and proves the cluster secret within
``rpc.handshake.timeout`` (after the TLS handshake with ``security.ssl.enabled``;
``handshake.py``); any failure fails the caller's future with RecipientUnreachableError.

Threading:
    :meth:`OutgoingConnections.get`, :meth:`~OutgoingConnections.established` and
    :meth:`~OutgoingConnections.fail_unopened`: any thread. :meth:`~OutgoingConnections.close`:
    the service's event-loop thread, which also runs every socket operation.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from concurrent.futures import Future

from millrace.errors import RecipientUnreachableError
from millrace.rpc.future_utils import fail, transfer
from millrace.rpc.tcp.connection import Connection, ConnectionStarter
from millrace.rpc.tcp.handshake import HANDSHAKE_LIMIT_BYTES, handshake_connect
from millrace.rpc.tcp.socket_link import SocketLink

__all__ = ["OutgoingConnections"]


class OutgoingConnections:
    """One authenticated connection per peer service, opened on demand.

    Args:
        service_name: Name of the owning service, named in errors.
        loop: The service's event loop.
        secret: The cluster secret this side proves.
        client_ssl: The TLS context of ``security.ssl.enabled``, or None (the channel is then
            bound by a MAC under keys from the handshake).
        connect_timeout: Seconds to establish the TCP connection (``rpc.lookup-timeout``).
        handshake_timeout: Seconds for the TLS and secret handshakes (``rpc.handshake.timeout``).
        start_connection: Starts the authenticated connection over a link.

    Threading:
        See the module docstring.
    """

    def __init__(
        self,
        service_name: str,
        loop: asyncio.AbstractEventLoop,
        *,
        secret: bytes,
        client_ssl: ssl.SSLContext | None,
        connect_timeout: float,
        handshake_timeout: float,
        start_connection: ConnectionStarter,
    ) -> None:
        self._service_name = service_name
        self._loop = loop
        self._secret = secret
        self._client_ssl = client_ssl
        self._connect_timeout = connect_timeout
        self._handshake_timeout = handshake_timeout
        self._start_connection = start_connection
        self._lock = threading.Lock()
        self._connections: dict[str, Future[Connection]] = {}  # "host:port" -> connection
        self._handshaking: set[SocketLink] = set()  # loop thread only
        self._closed = False  # loop thread only

    def get(self, authority: str) -> Future[Connection]:
        """The connection to the service at ``authority``, opening it if there is none.

        Args:
            authority: ``host:port`` of the peer service.

        Returns:
            Future completed with the authenticated connection, or failed with
            RecipientUnreachableError if the peer cannot be reached or authenticated in time,
            or the service closes first.

        Threading:
            Any thread; callers share one connection per peer.
        """
        with self._lock:
            existing = self._connections.get(authority)
            if existing is not None and not (
                existing.done() and (existing.exception() is not None or existing.result().closed)
            ):
                return existing
            future: Future[Connection] = Future()
            self._connections[authority] = future
        opening = asyncio.run_coroutine_threadsafe(self._open(authority), self._loop)
        opening.add_done_callback(lambda done: transfer(done, future))
        return future

    def established(self) -> list[Connection]:
        """The connections opened and authenticated (some may have closed since).

        Threading:
            Any thread.
        """
        with self._lock:
            return [f.result() for f in self._connections.values() if _succeeded(f)]

    def fail_unopened(self, error: Exception) -> None:
        """Fail every connection still being opened with ``error`` (the service closes).

        Threading:
            Any thread.
        """
        with self._lock:
            opening = list(self._connections.values())
        for future in opening:
            fail(future, error)

    def close(self) -> None:
        """Close the connections in their handshake and the established ones. Idempotent.

        Threading:
            Loop thread.
        """
        self._closed = True
        for link in list(self._handshaking):
            link.close()
        for connection in self.established():
            connection.close("service closed")

    async def _open(self, authority: str) -> Connection:
        host, _, port = authority.rpartition(":")
        try:
            connecting = _connect(self._loop, host, int(port))
            sock = await asyncio.wait_for(connecting, self._connect_timeout)
        except (OSError, TimeoutError, ValueError) as error:
            raise RecipientUnreachableError(authority, f"cannot connect: {error!r}") from error
        if self._closed:  # Python 3.11's wait_for may swallow the shutdown's cancel
            sock.close()
            raise RecipientUnreachableError(authority, f"RpcService {self._service_name} closed")
        try:
            link = SocketLink(self._loop, sock, HANDSHAKE_LIMIT_BYTES)
        except OSError as error:  # reset at once
            sock.close()
            raise RecipientUnreachableError(authority, f"cannot connect: {error!r}") from error
        self._handshaking.add(link)
        try:
            async with asyncio.timeout(self._handshake_timeout):
                if self._client_ssl is not None:
                    await link.start_tls(self._client_ssl, server_side=False)
                keys = await handshake_connect(
                    link, self._secret, bind_channel=self._client_ssl is None
                )
        except BaseException as error:
            link.close()
            if not isinstance(error, Exception):
                raise
            if isinstance(error, TimeoutError):
                error = TimeoutError(
                    f"no handshake within rpc.handshake.timeout ({self._handshake_timeout:g} s)"
                )
            raise RecipientUnreachableError(authority, f"handshake failed: {error}") from error
        finally:
            self._handshaking.discard(link)
        return self._start_connection(link, keys, lambda c: None)


def _succeeded(future: Future[Connection]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None


async def _connect(loop: asyncio.AbstractEventLoop, host: str, port: int) -> socket.socket:
    """A socket connected to the first address of ``host`` that accepts."""
    error: OSError | None = None
    for family, kind, proto, _, address in await loop.getaddrinfo(
        host, port, type=socket.SOCK_STREAM
    ):
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address)
        except BaseException as failed:
            sock.close()
            if not isinstance(failed, OSError):
                raise
            error = failed
            continue
        return sock
    raise error or OSError(f"{host} resolves to no address")
