"""TcpRpcService: the RpcService over TCP between processes (issue 3; seed 000, 004).

Endpoints are hosted exactly as by LocalRpcService (same mailbox, registry and lookup
semantics); what differs is how a gateway reaches them. Addresses are
``tcp://<host>:<port>/<endpoint id>``. ``connect`` opens (or reuses) one authenticated
connection per remote service, resolves the endpoint id to a compact number (waiting up to
``rpc.lookup-timeout`` on the remote side for the endpoint to start), and returns a proxy whose
calls are encoded with the control-message codec: a call whose message exceeds
``rpc.framesize`` fails alone with FrameSizeError and nothing is sent.

Against the network (issue 9; ``docs/security.md``): a connection must prove the cluster secret
within ``rpc.handshake.timeout`` (fixed-layout handshake, ``handshake.py``), and only
``rpc.handshake.max-pending`` connections (``rpc.handshake.max-pending-per-address`` per peer
IP) may be at it at once; without TLS everything later is sealed with a MAC under keys bound
to the connection (``channel_mac.py``); a connection that received nothing for
``rpc.idle-timeout`` is closed (a side pings after a third of it without hearing from the
peer, which answers at once; a ``<name>-keepalive`` thread times the checks, so the event loop
keeps no standing timer, ``keepalive.py``); a peer that does
not read loses its connection past ``rpc.write-queue.max-size`` unsent bytes; peers call only
the methods of an endpoint's declared gateways, with arguments that fit
(``remote_dispatch.py``). Transport timeouts run on the real monotonic clock, not the service
clock.

Threading:
    Any thread; network I/O runs on one event-loop thread per service (``<name>-io``), the
    idle checks' timing on ``<name>-keepalive``.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

from millrace.clock import Clock
from millrace.config import Configuration, RpcOptions, check_rpc_limits
from millrace.errors import RecipientUnreachableError
from millrace.rpc._futures import complete, fail, transfer
from millrace.rpc.gateway_proxy import create_gateway_proxy, gateway_methods
from millrace.rpc.local_rpc_service import LocalRpcService, _PendingLookup
from millrace.rpc.message_codec import MessageCodec
from millrace.rpc.rpc_gateway import GatewayType, RpcGateway
from millrace.rpc.rpc_invocation import RpcInvocation
from millrace.rpc.tcp.admission import HandshakeAdmission, ThrottledLog
from millrace.rpc.tcp.channel_mac import ChannelMac
from millrace.rpc.tcp.connection import CALL, LOOKUP, Connection
from millrace.rpc.tcp.handshake import (
    HANDSHAKE_LIMIT_BYTES,
    ChannelKeys,
    handshake_accept,
    handshake_connect,
)
from millrace.rpc.tcp.keepalive import Keepalive
from millrace.rpc.tcp.remote_dispatch import RemoteDispatch
from millrace.rpc.tcp.socket_link import SocketLink
from millrace.rpc.tcp.transport_security import MIN_SECRET_BYTES, TransportSecurity

if TYPE_CHECKING:
    from millrace.rpc.rpc_endpoint import RpcEndpoint

__all__ = ["TcpRpcService"]

logger = logging.getLogger(__name__)

G = TypeVar("G", bound=RpcGateway)
SCHEME = "tcp"
_ACCEPT_BATCH = 16  # connections accepted per readable event of the listener
_ACCEPT_PAUSE = 0.1  # seconds without accepting after accept() failed (e.g. EMFILE)
_FULL_PAUSE = 0.02  # seconds without accepting after a refusal while every slot is taken
_SHUTDOWN_GRACE = 2.0  # seconds close waits for cancelled handshakes to end


class TcpRpcService(LocalRpcService):
    """Hosts endpoints and connects gateways over authenticated TCP connections.

    Args:
        name: Service name (thread names, logs).
        security: The cluster secret every connection must prove (HMAC-SHA256 challenge) and
            the TLS contexts, if any.
        codec: Codec of every message; it must know every argument and result type.
        configuration: ``rpc.ask-timeout``, ``rpc.lookup-timeout``, ``rpc.framesize`` and
            the limits of the module docstring (``rpc.handshake.*``, ``rpc.idle-timeout``,
            ``rpc.write-queue.max-size``).
        clock: Time source of timeouts.
        host: Interface to listen on and to advertise in addresses (loopback by default).
        port: Port to listen on; 0 picks a free one.
        framesize_bytes: Largest message in bytes; None: ``rpc.framesize`` (10485760).

    Raises:
        OSError: If the port cannot be bound (nothing is left running).
        ValueError: If the secret is shorter than 16 bytes.
        ConfigError: If a limit is invalid or ``rpc.handshake.timeout`` exceeds
            ``rpc.lookup-timeout``.
    """

    def __init__(
        self,
        name: str,
        *,
        security: TransportSecurity,
        codec: MessageCodec,
        configuration: Configuration | None = None,
        clock: Clock | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        framesize_bytes: int | None = None,
    ) -> None:
        if len(security.secret) < MIN_SECRET_BYTES:
            raise ValueError(f"the cluster secret must be at least {MIN_SECRET_BYTES} bytes")
        super().__init__(name, configuration=configuration, clock=clock)
        conf = configuration or Configuration()
        check_rpc_limits(conf)
        self._secret = security.secret
        self._client_ssl = security.client_ssl
        self._codec = codec
        self._framesize = framesize_bytes or conf.get(RpcOptions.FRAMESIZE)
        self._server_ssl = security.server_ssl
        self._handshake_timeout = conf.get(RpcOptions.HANDSHAKE_TIMEOUT)
        # One frame of the largest size always fits (framesize_bytes may exceed the key).
        self._max_unsent = max(conf.get(RpcOptions.WRITE_QUEUE_MAX_SIZE), self._framesize + 1024)
        self._limits_log = ThrottledLog()
        self._admission = HandshakeAdmission(
            conf.get(RpcOptions.MAX_PENDING_HANDSHAKES),
            conf.get(RpcOptions.MAX_PENDING_HANDSHAKES_PER_ADDRESS),
            self._limits_log,
        )
        self._listener = _listen(host, port)  # OSError here: nothing is running yet
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name=f"{name}-io", daemon=True)
        self._connections: dict[str, Future[Connection]] = {}  # "host:port" -> connection
        self._accepted: set[Connection] = set()
        self._tcp_close_future: Future[None] | None = None
        self._connecting: set[Future[Any]] = set()  # connects not yet resolved
        self._handshaking: set[SocketLink] = set()  # loop thread only
        self._network_closed = False  # loop thread only
        self._keepalive = Keepalive(
            name, self._loop, conf.get(RpcOptions.IDLE_TIMEOUT), self._all_connections
        )
        self._dispatch = RemoteDispatch(self._loop, self._await_endpoint, self._limits_log)
        self._loop.call_soon(self._start_accepting)
        self._thread.start()
        self._keepalive.start()
        bound_port = self._listener.getsockname()[1]
        self._authority = f"{host}:{bound_port}"
        self._prefix = f"{SCHEME}://{self._authority}/"

    def _run_loop(self) -> None:
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    @property
    def secret(self) -> bytes:
        """The cluster secret this service proves and demands."""
        return self._secret

    @property
    def authority(self) -> str:
        """``host:port`` this service listens on."""
        return self._authority

    # Client side ---------------------------------------------------------------------------------

    def connect(
        self, address: str, gateway_type: GatewayType[G], fencing_token: object | None = None
    ) -> Future[G]:
        """Resolve ``tcp://host:port/endpoint_id`` to a gateway over TCP.

        Raises:
            TypeError: If ``gateway_type`` is not a gateway Protocol (raised directly), or via
                the future if the remote endpoint lacks one of its methods.
            RecipientUnreachableError: via the future, if the address is malformed, the peer
                cannot be reached or authenticated, or no endpoint answers within the lookup
                timeout.
        """
        methods = list(gateway_methods(gateway_type))
        result: Future[G] = Future()
        authority, endpoint_id = _parse(address)
        if authority is None:
            fail(result, RecipientUnreachableError(address, "not a tcp://host:port/id address"))
            return result
        if self._tcp_close_future is not None:
            fail(result, RecipientUnreachableError(address, f"RpcService {self._name} is closed"))
            return result
        with self._lock:
            self._connecting.add(result)
        result.add_done_callback(self._connecting.discard)
        # The lookup timeout runs from now, on the service clock, whatever the network does.
        timer = self._timer.schedule(
            self.lookup_timeout,
            lambda: fail(
                result,
                RecipientUnreachableError(
                    address,
                    f"no endpoint answered within rpc.lookup-timeout ({self.lookup_timeout:g} s)",
                ),
            ),
        )
        result.add_done_callback(lambda _: timer.cancel())
        connecting = self._connection_to(authority)

        def connected(done: Future[Connection]) -> None:
            if done.exception() is not None:
                fail(result, RecipientUnreachableError(address, str(done.exception())))
                return
            connection = done.result()
            found: Future[Any] = Future()
            result.add_done_callback(
                lambda _: fail(found, RecipientUnreachableError(address, "lookup abandoned"))
            )
            try:
                connection.request([LOOKUP, 0, endpoint_id, methods], found)
            except Exception as error:
                fail(result, error)
                return
            found.add_done_callback(
                lambda f: self._found(
                    f, connection, address, endpoint_id, gateway_type, fencing_token, result
                )
            )

        connecting.add_done_callback(connected)
        return result

    def _found(
        self,
        found: Future[Any],
        connection: Connection,
        address: str,
        endpoint_id: str,
        gateway_type: GatewayType[G],
        fencing_token: object | None,
        result: Future[G],
    ) -> None:
        if found.exception() is not None:
            fail(result, RecipientUnreachableError(address, str(found.exception())))
            return
        _, _, number, error = found.result()
        if error is not None:
            fail(
                result,
                TypeError(error)
                if error.startswith("TypeError")
                else RecipientUnreachableError(address, error),
            )
            return

        def send(invocation: RpcInvocation) -> None:
            message = [
                CALL,
                0,
                number,
                invocation.method_name,
                list(invocation.args),
                invocation.kwargs,
                invocation.fencing_token,
            ]
            connection.request(message, invocation.reply)

        complete(
            result,
            create_gateway_proxy(
                gateway_type,
                address=address,
                endpoint_id=endpoint_id,
                send=send,
                schedule_ask_timeout=self.schedule_ask_timeout,
                ask_timeout=self.ask_timeout,
                fencing_token=fencing_token,
            ),
        )

    def _connection_to(self, authority: str) -> Future[Connection]:
        with self._lock:  # callers on many threads share one connection per peer
            existing = self._connections.get(authority)
            if existing is not None and not (
                existing.done() and (existing.exception() is not None or existing.result().closed)
            ):
                return existing
            future: Future[Connection] = Future()
            self._connections[authority] = future
        coroutine = self._open(authority)
        transfer_to = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        transfer_to.add_done_callback(lambda done: transfer(done, future))
        return future

    async def _open(self, authority: str) -> Connection:
        host, _, port = authority.rpartition(":")
        try:
            connecting = _connect(self._loop, host, int(port))
            sock = await asyncio.wait_for(connecting, self.lookup_timeout)
        except (OSError, TimeoutError, ValueError) as error:
            raise RecipientUnreachableError(authority, f"cannot connect: {error!r}") from error
        if self._network_closed:  # Python 3.11's wait_for may swallow the shutdown's cancel
            sock.close()
            raise RecipientUnreachableError(authority, f"RpcService {self._name} closed")
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

    def _start_connection(
        self,
        link: SocketLink,
        keys: ChannelKeys | None,
        on_closed: Callable[[Connection], None],
    ) -> Connection:
        """Loop thread: the authenticated connection over ``link``, reading from now on."""
        connection = Connection(
            link,
            self._codec,
            self._framesize,
            self._on_message,
            on_closed,
            mac=ChannelMac(keys, self._framesize) if keys is not None else None,
            max_unsent_bytes=self._max_unsent,
        )
        connection.start()
        return connection

    # Server side ---------------------------------------------------------------------------------

    def _start_accepting(self) -> None:
        """Loop thread: accept connections (a reader callback, not ``sock_accept``, whose
        cancellation can drop an accepted socket on Python 3.11)."""
        if not self._network_closed:
            self._loop.add_reader(self._listener.fileno(), self._acceptable)

    def _acceptable(self) -> None:
        """Loop thread: accept the waiting connections and start their handshakes; close at
        once those over the admission caps."""
        for _ in range(_ACCEPT_BATCH):
            try:
                sock, address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:  # e.g. out of file descriptors: pause, then listen again
                self._limits_log.warning("accept", "accepting a connection failed: %r", error)
                self._loop.remove_reader(self._listener.fileno())
                self._loop.call_later(_ACCEPT_PAUSE, self._start_accepting)
                return
            host = str(address[0])
            if not self._admission.admit(host):
                sock.close()
                if self._admission.full:  # a flood holds every slot: pace the refusals
                    self._loop.remove_reader(self._listener.fileno())
                    self._loop.call_later(_FULL_PAUSE, self._start_accepting)
                    return
                continue
            self._loop.create_task(self._accept(sock, host))

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
        """Loop thread: the acceptor's TLS and secret handshake within rpc.handshake.timeout.

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
            self._limits_log.warning(
                "handshake-timeout",
                "rejected connection from %s: no handshake within rpc.handshake.timeout (%g s)",
                link.peer,
                self._handshake_timeout,
            )
        except Exception as error:
            self._limits_log.warning(
                "rejected",
                "rejected connection from %s: %s",
                link.peer,
                error or type(error).__name__,
            )
        finally:
            self._handshaking.discard(link)
        link.close()
        return False, None

    def _on_message(self, connection: Connection, message: list[Any]) -> None:
        """Loop thread: a CALL or LOOKUP from a peer."""
        if message[0] == LOOKUP and len(message) == 4:
            self._dispatch.lookup(connection, message[1], message[2], message[3])
        elif message[0] == CALL and len(message) == 7:
            self._dispatch.call(connection, *message[1:])
        else:
            reason = f"malformed frame: message kind {message[0]} with {len(message)} fields"
            logger.warning("closing connection with %s: %s", connection.peer, reason)
            connection.close(reason)

    # Keepalive and idle connections (loop thread) -------------------------------------------------

    def _all_connections(self) -> list[Connection]:
        """Loop thread: the accepted and the outgoing connections that are up."""
        with self._lock:
            outgoing = [f.result() for f in self._connections.values() if _succeeded(f)]
        return [*self._accepted, *outgoing]

    def _await_endpoint(self, endpoint_id: str) -> Future[RpcEndpoint]:
        """The hosted endpoint ``endpoint_id``, waiting up to the lookup timeout for it."""
        future: Future[RpcEndpoint] = Future()
        self._add_lookup(
            endpoint_id, _PendingLookup(self.address_of(endpoint_id), None, None, future)
        )
        return future

    def _resolve(self, lookup: _PendingLookup, endpoint: RpcEndpoint) -> None:
        if lookup.gateway_type is None:  # a remote lookup: hand over the endpoint itself
            complete(lookup.future, endpoint)
        else:
            super()._resolve(lookup, endpoint)

    # Life cycle ----------------------------------------------------------------------------------

    async def _stop_network(self) -> None:
        """Loop thread: close the listener and every connection, end every task."""
        self._network_closed = True
        self._keepalive.stop()
        self._loop.remove_reader(self._listener.fileno())
        self._listener.close()
        for link in list(self._handshaking):  # a handshake whose cancel is lost ends here
            link.close()
        for connection in list(self._accepted):
            connection.close("service closed")
        with self._lock:
            outgoing = list(self._connections.values())
        for pending in outgoing:
            if pending.done() and pending.exception() is None:
                pending.result().close("service closed")
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:  # handshakes still running
            task.cancel()
        if others:  # bounded: a task that swallowed its cancel (Python 3.11) cannot hang close
            await asyncio.wait(others, timeout=_SHUTDOWN_GRACE)

    def close_async(self) -> Future[None]:
        """Stop every hosted endpoint, then close the listener, connections and event loop.

        Idempotent: every call returns the same future.
        """
        with self._lock:
            if self._tcp_close_future is not None:
                return self._tcp_close_future
            done: Future[None] = Future()
            self._tcp_close_future = done
        closing = super().close_async()
        with self._lock:
            unresolved = list(self._connecting) + list(self._connections.values())
        for future in unresolved:
            fail(future, RecipientUnreachableError(self._prefix, f"RpcService {self._name} closed"))

        def shut_down(terminated: Future[None]) -> None:
            self._keepalive.stop()

            def finish() -> None:
                if threading.current_thread() is not self._thread:
                    self._thread.join(timeout=10)
                transfer(terminated, done)

            if not self._loop.is_running():
                finish()
                return

            def stopped(_: Future[None]) -> None:
                # On the loop thread, or on this one if the network stopped before the callback
                # was added: call_soon alone would not wake a loop waiting in select.
                self._loop.call_soon_threadsafe(self._loop.stop)
                transfer(terminated, done)

            asyncio.run_coroutine_threadsafe(self._stop_network(), self._loop).add_done_callback(
                stopped
            )

        closing.add_done_callback(shut_down)
        return done

    def __repr__(self) -> str:
        return f"TcpRpcService({self._name!r}, {self._authority})"


def _succeeded(future: Future[Connection]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None


def _parse(address: str) -> tuple[str | None, str]:
    if not address.startswith(f"{SCHEME}://"):
        return None, ""
    authority, _, endpoint_id = address[len(SCHEME) + 3 :].partition("/")
    if not authority or ":" not in authority or not endpoint_id or "/" in endpoint_id:
        return None, ""
    return authority, endpoint_id


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on the first address ``host`` resolves to."""
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
