"""LocalRpcService: the in-process RpcService transport.

Gateway calls are handed to the target endpoint's mailbox by reference: no serialization, no
copying, so arguments must not be mutated after a call. Addresses are
``local://<service name>/<endpoint id>``. Hosting, lookups and their timeout are the
:class:`~millrace.rpc.endpoint_registry.EndpointRegistry`'s; this class turns a resolved lookup
into a gateway proxy that enqueues straight into the endpoint's mailbox.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

from millrace.clock import Clock, SystemClock
from millrace.config import Configuration, RpcOptions
from millrace.errors import GatewayMismatchError, RecipientUnreachableError
from millrace.rpc.endpoint_registry import EndpointRegistry
from millrace.rpc.future_utils import complete, fail, transfer
from millrace.rpc.gateway_proxy import create_gateway_proxy, gateway_methods
from millrace.rpc.rpc_gateway import GatewayType, RpcGateway
from millrace.rpc.rpc_service import FatalErrorHandler
from millrace.rpc.rpc_timer import RpcTimer

if TYPE_CHECKING:
    from millrace.rpc.rpc_endpoint import RpcEndpoint

__all__ = ["LocalRpcService"]

G = TypeVar("G", bound=RpcGateway)

SCHEME = "local"


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
        self._timer = RpcTimer(self._clock, f"{name}-rpc-timer")
        self._registry = EndpointRegistry(name, self._timer, conf.get(RpcOptions.LOOKUP_TIMEOUT))
        self._close_lock = threading.Lock()
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
        return self._registry.lookup_timeout

    def address_of(self, endpoint_id: str) -> str:
        """``local://<name>/<endpoint_id>``."""
        return self._prefix + endpoint_id

    def start_server(self, endpoint: RpcEndpoint) -> None:
        """Register ``endpoint`` and hand it to connects waiting for its address.

        Raises:
            ValueError: If an endpoint with the same id is registered.
            RuntimeError: If the service is closed.
        """
        self._registry.register(endpoint)

    def stop_server(self, endpoint: RpcEndpoint) -> None:
        """Unregister ``endpoint`` (no effect if another endpoint now holds its id)."""
        self._registry.unregister(endpoint)

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
            TypeError: If ``gateway_type`` is not a gateway Protocol (raised directly).
            GatewayMismatchError: via the future, if the endpoint lacks one of the gateway's
                methods.
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
        self._registry.lookup(endpoint_id, address).add_done_callback(
            lambda found: self._connected(found, address, gateway_type, fencing_token, future)
        )
        return future

    def _connected(
        self,
        found: Future[RpcEndpoint],
        address: str,
        gateway_type: GatewayType[G],
        fencing_token: object | None,
        future: Future[G],
    ) -> None:
        """The lookup of ``address`` is done: complete ``future`` with a proxy, or fail it."""
        error = found.exception()
        if error is not None:
            fail(future, error)
            return
        endpoint = found.result()
        missing = [
            n for n in gateway_methods(gateway_type) if not callable(getattr(endpoint, n, None))
        ]
        if missing:
            fail(
                future,
                GatewayMismatchError(
                    f"endpoint at {address} ({type(endpoint).__name__}) does not implement "
                    f"{', '.join(missing)} of {gateway_type.__name__}",
                    endpoint.endpoint_id,
                ),
            )
            return
        proxy = create_gateway_proxy(
            gateway_type,
            address=address,
            endpoint_id=endpoint.endpoint_id,
            send=endpoint.rpc_server.enqueue,
            schedule_ask_timeout=self._timer.schedule_ask_timeout,
            ask_timeout=self._ask_timeout,
            fencing_token=fencing_token,
        )
        complete(future, proxy)

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

    def close_async(self) -> Future[None]:
        """Close every hosted endpoint, fail pending connects, then stop the timer thread.

        Returns:
            Future completed once all endpoints terminated (failed with the first termination
            error, if any). Idempotent.
        """
        with self._close_lock:
            if self._close_future is not None:
                return self._close_future
            close_future: Future[None] = Future()
            self._close_future = close_future

        def finish(terminated: Future[None]) -> None:
            self._timer.close()
            transfer(terminated, close_future)

        self._registry.close().add_done_callback(finish)
        return close_future

    def __repr__(self) -> str:
        return f"LocalRpcService({self._name!r})"
