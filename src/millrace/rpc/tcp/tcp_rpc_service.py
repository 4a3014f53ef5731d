"""TcpRpcService: the RpcService over TCP between processes (issue 3; seed 000, 004).

Endpoints are hosted in an :class:`~millrace.rpc.endpoint_registry.EndpointRegistry`, as by
LocalRpcService (same mailbox, registry and lookup semantics); what differs is how a gateway
reaches them. Addresses are
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

The service composes its parts: the registry, a :class:`~millrace.rpc.tcp.connection_acceptor.\
ConnectionAcceptor` (listening, admission, the acceptor's handshake), :class:`~millrace.rpc.tcp.\
outgoing_connections.OutgoingConnections` (one connection per peer service), ``RemoteDispatch``
(what peers may call) and ``Keepalive``; it owns the event loop they share and resolves gateways.

Threading:
    Any thread; network I/O runs on one event-loop thread per service (``<name>-io``), the
    idle checks' timing on ``<name>-keepalive``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

from millrace.clock import Clock, SystemClock
from millrace.config import Configuration, RpcOptions, check_rpc_limits
from millrace.errors import GatewayMismatchError, RecipientUnreachableError
from millrace.rpc.endpoint_registry import EndpointRegistry
from millrace.rpc.future_utils import complete, fail, transfer
from millrace.rpc.gateway_proxy import create_gateway_proxy, gateway_methods
from millrace.rpc.message_codec import MessageCodec
from millrace.rpc.rpc_gateway import GatewayType, RpcGateway
from millrace.rpc.rpc_invocation import RpcInvocation
from millrace.rpc.rpc_service import FatalErrorHandler
from millrace.rpc.rpc_timer import RpcTimer
from millrace.rpc.tcp.admission import HandshakeAdmission, ThrottledLog
from millrace.rpc.tcp.channel_mac import ChannelMac
from millrace.rpc.tcp.connection import CALL, LOOKUP, Connection
from millrace.rpc.tcp.connection_acceptor import ConnectionAcceptor, listen
from millrace.rpc.tcp.handshake import ChannelKeys
from millrace.rpc.tcp.keepalive import Keepalive
from millrace.rpc.tcp.outgoing_connections import OutgoingConnections
from millrace.rpc.tcp.remote_dispatch import RemoteDispatch
from millrace.rpc.tcp.socket_link import SocketLink
from millrace.rpc.tcp.transport_security import MIN_SECRET_BYTES, TransportSecurity

if TYPE_CHECKING:
    from collections.abc import Callable

    from millrace.rpc.rpc_endpoint import RpcEndpoint

__all__ = ["TcpRpcService"]

logger = logging.getLogger(__name__)

G = TypeVar("G", bound=RpcGateway)
SCHEME = "tcp"
_SHUTDOWN_GRACE = 2.0  # seconds close waits for cancelled handshakes to end


class TcpRpcService:
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
        host: Address to advertise in addresses, and to listen on unless ``bind_host`` is
            given (loopback by default).
        bind_host: Interface to listen on (e.g. ``0.0.0.0``); None: ``host``.
        port: Port to listen on; 0 picks a free one.
        framesize_bytes: Largest message in bytes; None: ``rpc.framesize`` (10485760).

    Raises:
        OSError: If the port cannot be bound (nothing is left running).
        ValueError: If the secret is shorter than 16 bytes or ``name`` is empty or contains
            ``/``.
        ConfigError: If a limit is invalid or ``rpc.handshake.timeout`` exceeds
            ``rpc.lookup-timeout``.

    Threading:
        Any thread.
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
        bind_host: str | None = None,
    ) -> None:
        if len(security.secret) < MIN_SECRET_BYTES:
            raise ValueError(f"the cluster secret must be at least {MIN_SECRET_BYTES} bytes")
        if not name or "/" in name:
            raise ValueError(f"invalid RpcService name {name!r}: non-empty, no '/'")
        conf = configuration if configuration is not None else Configuration()
        check_rpc_limits(conf)
        self._name = name
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._ask_timeout = conf.get(RpcOptions.ASK_TIMEOUT)
        self._secret = security.secret
        self._codec = codec
        self._framesize = framesize_bytes or conf.get(RpcOptions.FRAMESIZE)
        # One frame of the largest size always fits (framesize_bytes may exceed the key).
        self._max_unsent = max(conf.get(RpcOptions.WRITE_QUEUE_MAX_SIZE), self._framesize + 1024)
        listener = listen(bind_host or host, port)  # OSError here: nothing is running yet
        self._timer = RpcTimer(self._clock, f"{name}-rpc-timer")
        self._registry = EndpointRegistry(name, self._timer, conf.get(RpcOptions.LOOKUP_TIMEOUT))
        self._lock = threading.Lock()
        self._close_future: Future[None] | None = None
        self._connecting: set[Future[Any]] = set()  # connects not yet resolved
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name=f"{name}-io", daemon=True)
        limits_log = ThrottledLog()
        handshake_timeout = conf.get(RpcOptions.HANDSHAKE_TIMEOUT)
        self._acceptor = ConnectionAcceptor(
            self._loop,
            listener,
            secret=self._secret,
            server_ssl=security.server_ssl,
            handshake_timeout=handshake_timeout,
            admission=HandshakeAdmission(
                conf.get(RpcOptions.MAX_PENDING_HANDSHAKES),
                conf.get(RpcOptions.MAX_PENDING_HANDSHAKES_PER_ADDRESS),
                limits_log,
            ),
            log=limits_log,
            start_connection=self._start_connection,
        )
        self._outgoing = OutgoingConnections(
            name,
            self._loop,
            secret=self._secret,
            client_ssl=security.client_ssl,
            connect_timeout=self._registry.lookup_timeout,
            handshake_timeout=handshake_timeout,
            start_connection=self._start_connection,
        )
        self._keepalive = Keepalive(
            name, self._loop, conf.get(RpcOptions.IDLE_TIMEOUT), self._all_connections
        )
        self._dispatch = RemoteDispatch(self._loop, self._await_endpoint, limits_log)
        self._authority = f"{host}:{self._acceptor.port}"
        self._prefix = f"{SCHEME}://{self._authority}/"
        self._acceptor.start()
        self._thread.start()
        self._keepalive.start()

    def _run_loop(self) -> None:
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    @property
    def name(self) -> str:
        """The service name (thread names, logs)."""
        return self._name

    @property
    def clock(self) -> Clock:
        """The service's time source."""
        return self._clock

    @property
    def ask_timeout(self) -> float:
        """Default ask timeout in seconds."""
        return self._ask_timeout

    @property
    def lookup_timeout(self) -> float:
        """Seconds ``connect`` waits for an endpoint to answer."""
        return self._registry.lookup_timeout

    @property
    def secret(self) -> bytes:
        """The cluster secret this service proves and demands."""
        return self._secret

    @property
    def authority(self) -> str:
        """``host:port`` this service listens on."""
        return self._authority

    def address_of(self, endpoint_id: str) -> str:
        """``tcp://<host>:<port>/<endpoint_id>``."""
        return self._prefix + endpoint_id

    # Hosting -------------------------------------------------------------------------------------

    def start_server(self, endpoint: RpcEndpoint) -> None:
        """Register ``endpoint``: peers' lookups waiting for it are answered.

        Raises:
            ValueError: If an endpoint with the same id is registered.
            RuntimeError: If the service is closed.
        """
        self._registry.register(endpoint)

    def stop_server(self, endpoint: RpcEndpoint) -> None:
        """Unregister ``endpoint`` (no effect if another endpoint now holds its id)."""
        self._registry.unregister(endpoint)

    def schedule_ask_timeout(
        self, future: Future[Any], endpoint_id: str, method: str, timeout: float
    ) -> None:
        """Fail ``future`` with RpcTimeoutError unless it completes within ``timeout`` s."""
        self._timer.schedule_ask_timeout(future, endpoint_id, method, timeout)

    def set_fatal_error_handler(self, handler: FatalErrorHandler | None) -> None:
        """Install (or with None, remove) the callback for endpoints' unexpected errors."""
        self._registry.set_fatal_error_handler(handler)

    def handle_fatal_error(self, endpoint: RpcEndpoint, error: BaseException) -> None:
        """Call the fatal error handler, if set; its own errors are logged.

        Threading:
            Called on the endpoint's main thread.
        """
        self._registry.handle_fatal_error(endpoint, error)

    def _await_endpoint(self, endpoint_id: str) -> Future[RpcEndpoint]:
        """The hosted endpoint ``endpoint_id``, waiting up to the lookup timeout for it."""
        return self._registry.lookup(endpoint_id, self.address_of(endpoint_id))

    # Client side ---------------------------------------------------------------------------------

    def connect(
        self, address: str, gateway_type: GatewayType[G], fencing_token: object | None = None
    ) -> Future[G]:
        """Resolve ``tcp://host:port/endpoint_id`` to a gateway over TCP.

        Raises:
            TypeError: If ``gateway_type`` is not a gateway Protocol (raised directly).
            GatewayMismatchError: via the future, if the remote endpoint does not serve one of
                the gateway's methods.
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
        if self._close_future is not None:
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
        connecting = self._outgoing.get(authority)

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
        if error is not None:  # "TypeError: ...": the endpoint does not serve the gateway
            fail(
                result,
                GatewayMismatchError(error.removeprefix("TypeError: "), endpoint_id)
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

    # Peers' messages ----------------------------------------------------------------------------

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

    def _all_connections(self) -> list[Connection]:
        """Loop thread: the accepted and the outgoing connections that are up."""
        return [*self._acceptor.connections, *self._outgoing.established()]

    # Life cycle ----------------------------------------------------------------------------------

    async def _stop_network(self) -> None:
        """Loop thread: close the listener and every connection, end every task."""
        self._keepalive.stop()
        self._acceptor.close()
        self._outgoing.close()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:  # handshakes still running
            task.cancel()
        if others:  # bounded: a task that swallowed its cancel (Python 3.11) cannot hang close
            await asyncio.wait(others, timeout=_SHUTDOWN_GRACE)

    def close_async(self) -> Future[None]:
        """Stop every hosted endpoint, then close the listener, connections and event loop.

        Pending connects and peers' lookups fail with RecipientUnreachableError at once.

        Returns:
            Future completed once every endpoint has terminated and the network is shut down
            (failed with the first termination error, if any). Idempotent: every call returns
            the same future.
        """
        with self._lock:
            if self._close_future is not None:
                return self._close_future
            done: Future[None] = Future()
            self._close_future = done
            unresolved = list(self._connecting)
        closed = RecipientUnreachableError(self._prefix, f"RpcService {self._name} closed")
        terminations = self._registry.close()
        for future in unresolved:
            fail(future, closed)
        self._outgoing.fail_unopened(closed)

        def shut_down(terminated: Future[None]) -> None:
            self._timer.close()
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

        terminations.add_done_callback(shut_down)
        return done

    def __repr__(self) -> str:
        return f"TcpRpcService({self._name!r}, {self._authority})"


def _parse(address: str) -> tuple[str | None, str]:
    if not address.startswith(f"{SCHEME}://"):
        return None, ""
    authority, _, endpoint_id = address[len(SCHEME) + 3 :].partition("/")
    if not authority or ":" not in authority or not endpoint_id or "/" in endpoint_id:
        return None, ""
    return authority, endpoint_id
