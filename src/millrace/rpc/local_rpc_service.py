"""LocalRpcService: the in-process RpcService transport.

Gateway calls are handed to the target endpoint's mailbox by reference: no serialization, no
copying, so arguments must not be mutated after a call. Addresses are
``local://<service name>/<endpoint id>``.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

from millrace.clock import Clock, SystemClock
from millrace.config import Configuration, RpcOptions
from millrace.errors import RecipientUnreachableError
from millrace.rpc._futures import all_of, complete, fail, transfer
from millrace.rpc.gateway_proxy import create_gateway_proxy, gateway_methods
from millrace.rpc.rpc_gateway import GatewayType, RpcGateway
from millrace.rpc.rpc_service import FatalErrorHandler
from millrace.rpc.rpc_timer import RpcTimer, TimerHandle

if TYPE_CHECKING:
    from millrace.rpc.rpc_endpoint import RpcEndpoint

__all__ = ["LocalRpcService"]

logger = logging.getLogger(__name__)

G = TypeVar("G", bound=RpcGateway)

SCHEME = "local"


class _PendingLookup:
    """A connect (or, with no gateway type, a TcpRpcService's remote lookup) waiting for its
    endpoint to register."""

    __slots__ = ("address", "fencing_token", "future", "gateway_type", "timer")

    def __init__(
        self,
        address: str,
        gateway_type: GatewayType[RpcGateway] | None,
        fencing_token: object | None,
        future: Future[Any],
    ) -> None:
        self.address = address
        self.gateway_type = gateway_type
        self.fencing_token = fencing_token
        self.future = future
        self.timer: TimerHandle | None = None


class LocalRpcService:
    """An RpcService whose endpoints all live in this process.

    Args:
        name: Service name, the host part of its addresses (e.g. ``"minicluster"``).
        configuration: Source of ``rpc.ask-timeout`` and ``rpc.lookup-timeout``.
        clock: Time source for endpoints and timeouts; a ManualClock makes tests deterministic.

    Raises:
        ValueError: If ``name`` is empty or contains ``/``.
        ConfigError: If a configured timeout is invalid.

    Threading:
        Any thread.
    """

    def __init__(
        self,
        name: str = "local",
        *,
        configuration: Configuration | None = None,
        clock: Clock | None = None,
    ) -> None:
        if not name or "/" in name:
            raise ValueError(f"invalid RpcService name {name!r}: non-empty, no '/'")
        conf = configuration if configuration is not None else Configuration()
        self._name = name
        self._prefix = f"{SCHEME}://{name}/"
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._ask_timeout = conf.get(RpcOptions.ASK_TIMEOUT)
        self._lookup_timeout = conf.get(RpcOptions.LOOKUP_TIMEOUT)
        self._timer = RpcTimer(self._clock, f"{name}-rpc-timer")
        self._lock = threading.Lock()
        self._endpoints: dict[str, RpcEndpoint] = {}
        self._lookups: dict[str, list[_PendingLookup]] = {}
        self._fatal_error_handler: FatalErrorHandler | None = None
        self._close_future: Future[None] | None = None

    @property
    def name(self) -> str:
        """The service name used in its addresses."""
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
        """Seconds ``connect`` waits for an endpoint to register."""
        return self._lookup_timeout

    def address_of(self, endpoint_id: str) -> str:
        """``local://<name>/<endpoint_id>``."""
        return self._prefix + endpoint_id

    def start_server(self, endpoint: RpcEndpoint) -> None:
        """Register ``endpoint`` and hand it to connects waiting for its address.

        Raises:
            ValueError: If an endpoint with the same id is registered.
            RuntimeError: If the service is closed.
        """
        endpoint_id = endpoint.endpoint_id
        with self._lock:
            if self._close_future is not None:
                raise RuntimeError(
                    f"RpcService {self._name} is closed; cannot start endpoint {endpoint_id}"
                )
            if endpoint_id in self._endpoints:
                raise ValueError(
                    f"RpcService {self._name} already hosts an endpoint with id {endpoint_id!r}"
                )
            self._endpoints[endpoint_id] = endpoint
            waiting = self._lookups.pop(endpoint_id, [])
        for lookup in waiting:
            if lookup.timer is not None:
                lookup.timer.cancel()
            self._resolve(lookup, endpoint)

    def stop_server(self, endpoint: RpcEndpoint) -> None:
        """Unregister ``endpoint`` (no effect if another endpoint now holds its id)."""
        with self._lock:
            if self._endpoints.get(endpoint.endpoint_id) is endpoint:
                del self._endpoints[endpoint.endpoint_id]

    def connect(
        self, address: str, gateway_type: GatewayType[G], fencing_token: object | None = None
    ) -> Future[G]:
        """Resolve ``address`` to a gateway, waiting up to the lookup timeout for registration.

        Args:
            address: ``local://<this service's name>/<endpoint id>``.
            gateway_type: Gateway Protocol the endpoint implements.
            fencing_token: Token attached to every call through the gateway.

        Returns:
            Future completed with the gateway proxy.

        Raises:
            TypeError: If ``gateway_type`` is not a gateway Protocol (raised directly), or via
                the future if the endpoint lacks one of its methods.
            RecipientUnreachableError: via the future, if the address belongs to another scheme
                or service, the service is closed, or no endpoint registers within the lookup
                timeout.
        """
        gateway_methods(gateway_type)  # validate the type eagerly
        future: Future[G] = Future()
        endpoint_id = address[len(self._prefix) :] if address.startswith(self._prefix) else ""
        if not endpoint_id or "/" in endpoint_id:
            fail(
                future,
                RecipientUnreachableError(
                    address, f"not an endpoint address of RpcService {self._prefix}<endpoint id>"
                ),
            )
            return future
        self._add_lookup(endpoint_id, _PendingLookup(address, gateway_type, fencing_token, future))
        return future

    def _add_lookup(self, endpoint_id: str, lookup: _PendingLookup) -> None:
        """Resolve ``lookup`` now if the endpoint is hosted, else when it starts or fail it
        after the lookup timeout (or at once if the service is closed)."""
        with self._lock:
            endpoint = self._endpoints.get(endpoint_id)
            closed = self._close_future is not None
            if endpoint is None and not closed:
                self._lookups.setdefault(endpoint_id, []).append(lookup)
                lookup.timer = self._timer.schedule(
                    self._lookup_timeout, lambda: self._expire_lookup(endpoint_id, lookup)
                )
        if closed:
            fail(
                lookup.future,
                RecipientUnreachableError(lookup.address, f"RpcService {self._name} is closed"),
            )
        elif endpoint is not None:
            self._resolve(lookup, endpoint)

    def schedule_ask_timeout(
        self, future: Future[Any], endpoint_id: str, method: str, timeout: float
    ) -> None:
        """Fail ``future`` with RpcTimeoutError unless it completes within ``timeout`` s."""
        self._timer.schedule_ask_timeout(future, endpoint_id, method, timeout)

    def set_fatal_error_handler(self, handler: FatalErrorHandler | None) -> None:
        """Install (or with None, remove) the callback for endpoints' unexpected errors."""
        self._fatal_error_handler = handler

    def handle_fatal_error(self, endpoint: RpcEndpoint, error: BaseException) -> None:
        """Call the fatal error handler, if set; its own errors are logged.

        Threading:
            Called on the endpoint's main thread.
        """
        handler = self._fatal_error_handler
        if handler is None:
            return
        try:
            handler(endpoint, error)
        except Exception:
            logger.exception("fatal error handler of RpcService %s raised", self._name)

    def close_async(self) -> Future[None]:
        """Close every hosted endpoint, fail pending connects, then stop the timer thread.

        Returns:
            Future completed once all endpoints terminated (failed with the first termination
            error, if any). Idempotent.
        """
        with self._lock:
            if self._close_future is not None:
                return self._close_future
            close_future: Future[None] = Future()
            self._close_future = close_future
            endpoints = list(self._endpoints.values())
            lookups = [lookup for pending in self._lookups.values() for lookup in pending]
            self._lookups.clear()
        for lookup in lookups:
            fail(
                lookup.future,
                RecipientUnreachableError(lookup.address, f"RpcService {self._name} closed"),
            )
        terminations = all_of([endpoint.close_async() for endpoint in endpoints])

        def finish(done: Future[None]) -> None:
            self._timer.close()
            transfer(done, close_future)

        terminations.add_done_callback(finish)
        return close_future

    def _resolve(self, lookup: _PendingLookup, endpoint: RpcEndpoint) -> None:
        gateway_type = lookup.gateway_type
        assert gateway_type is not None, "only TcpRpcService adds lookups without a gateway"
        methods = gateway_methods(gateway_type)
        missing = [name for name in methods if not callable(getattr(endpoint, name, None))]
        if missing:
            fail(
                lookup.future,
                TypeError(
                    f"endpoint at {lookup.address} ({type(endpoint).__name__}) does not implement "
                    f"{', '.join(missing)} of {gateway_type.__name__}"
                ),
            )
            return
        proxy = create_gateway_proxy(
            gateway_type,
            address=lookup.address,
            endpoint_id=endpoint.endpoint_id,
            send=endpoint.rpc_server.enqueue,
            schedule_ask_timeout=self._timer.schedule_ask_timeout,
            ask_timeout=self._ask_timeout,
            fencing_token=lookup.fencing_token,
        )
        complete(lookup.future, proxy)

    def _expire_lookup(self, endpoint_id: str, lookup: _PendingLookup) -> None:
        with self._lock:
            pending = self._lookups.get(endpoint_id, [])
            if lookup not in pending:
                return
            pending.remove(lookup)
            if not pending:
                del self._lookups[endpoint_id]
        fail(
            lookup.future,
            RecipientUnreachableError(
                lookup.address,
                f"no endpoint registered within rpc.lookup-timeout ({self._lookup_timeout:g} s)",
            ),
        )

    def __repr__(self) -> str:
        return f"LocalRpcService({self._name!r})"
