"""RpcService: the transport abstraction behind endpoints and gateways (seed 004).

Endpoints and their callers only see this Protocol: it makes endpoints connectable
(``start_server``), hands out gateway proxies (``connect``) and owns the transport's resources.
Two transports implement it, side by side (neither derives from the other): in-process
(:class:`~millrace.rpc.local_rpc_service.LocalRpcService`) and TCP
(:class:`~millrace.rpc.tcp.tcp_rpc_service.TcpRpcService`). Both host their endpoints in an
:class:`~millrace.rpc.endpoint_registry.EndpointRegistry`, so registration, lookups, the lookup
timeout and the fatal error handler behave alike; they differ in how a gateway reaches a
mailbox.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from millrace.clock import Clock
from millrace.rpc.rpc_gateway import GatewayType, RpcGateway

if TYPE_CHECKING:
    from millrace.rpc.rpc_endpoint import RpcEndpoint

__all__ = ["FatalErrorHandler", "RpcService"]

G = TypeVar("G", bound=RpcGateway)

FatalErrorHandler = Callable[["RpcEndpoint", BaseException], None]
"""Called with the endpoint and the error when an endpoint hits an unexpected error."""


class RpcService(Protocol):
    """Hosts endpoints and connects gateways to them over one transport.

    Threading:
        Any thread, unless a method says otherwise.
    """

    @property
    def clock(self) -> Clock:
        """The time source of every endpoint, timer and timeout of this service."""
        ...

    @property
    def ask_timeout(self) -> float:
        """Default ask timeout in seconds (``rpc.ask-timeout``)."""
        ...

    @property
    def lookup_timeout(self) -> float:
        """Seconds ``connect`` waits for an address to resolve (``rpc.lookup-timeout``)."""
        ...

    def address_of(self, endpoint_id: str) -> str:
        """The address under which an endpoint with ``endpoint_id`` is reachable."""
        ...

    def start_server(self, endpoint: RpcEndpoint) -> None:
        """Register ``endpoint`` so that ``connect`` to its address reaches it.

        Called by ``RpcEndpoint.start``.

        Raises:
            ValueError: If an endpoint with the same id is already registered.
            RuntimeError: If the service is closed.
        """
        ...

    def stop_server(self, endpoint: RpcEndpoint) -> None:
        """Unregister ``endpoint``; called by the endpoint once its main thread has ended."""
        ...

    def connect(
        self, address: str, gateway_type: GatewayType[G], fencing_token: object | None = None
    ) -> Future[G]:
        """Resolve ``address`` to a gateway proxy implementing ``gateway_type``.

        Args:
            address: The target endpoint's address.
            gateway_type: Gateway Protocol the endpoint implements.
            fencing_token: Token attached to every call (for fenced endpoints).

        Returns:
            Future completed with the gateway once the endpoint is reachable.

        Raises:
            RecipientUnreachableError: via the future, if nothing answers at ``address`` within
                the lookup timeout.
            TypeError: If ``gateway_type`` is not a gateway Protocol (raised directly).
            GatewayMismatchError: via the future, if the endpoint does not implement (or, over
                TCP, does not serve in its declared gateways) one of its methods.
        """
        ...

    def schedule_ask_timeout(
        self, future: Future[Any], endpoint_id: str, method: str, timeout: float
    ) -> None:
        """Fail ``future`` with RpcTimeoutError unless it completes within ``timeout`` seconds."""
        ...

    def set_fatal_error_handler(self, handler: FatalErrorHandler | None) -> None:
        """Install the callback that endpoints' unexpected errors are reported to."""
        ...

    def handle_fatal_error(self, endpoint: RpcEndpoint, error: BaseException) -> None:
        """Pass an endpoint's unexpected error to the fatal error handler, if one is set."""
        ...

    def close_async(self) -> Future[None]:
        """Stop every endpoint this service hosts, then release the transport. Idempotent.

        Returns:
            Future completed once all endpoints have terminated, failed with the first
            termination error if any.
        """
        ...
