"""RpcGateway: the typed contract through which endpoints talk to each other (seed 004).

A gateway is a ``typing.Protocol`` that subclasses :class:`RpcGateway` and declares the methods
other components may invoke on an endpoint. The return annotation decides how a call travels:

* ``-> Future[T]`` is an *ask*: the caller gets a ``concurrent.futures.Future`` completed with
  the endpoint's reply, or failed with the endpoint's error or with ``RpcTimeoutError`` after the
  ask timeout. A parameter named ``timeout`` (float seconds) overrides ``rpc.ask-timeout``.
* ``-> None`` is a *tell*: fire-and-forget, no reply and no error reported to the caller.

Failures every call may see, whatever the gateway (all in ``millrace.errors``; no builtin
exception crosses a gateway): ``RpcTimeoutError`` (no answer within the ask timeout),
``RecipientUnreachableError`` (the endpoint cannot be reached; ``EndpointStoppedError`` once it
has stopped), ``FencingTokenError`` (a fenced endpoint, a stale token),
``GatewayMismatchError`` (the call does not fit the endpoint's gateways: a method it does not
serve, arguments that do not bind; also a ``TypeError``), and over TCP ``FrameSizeError`` (a
message above ``rpc.framesize``) and ``CodecError`` (a value the codec cannot carry). What else
a method fails with, each gateway's docstrings say; the TCP transport rebuilds every one of
them as its own class at the caller. An endpoint's bug (an unexpected exception in a method)
reaches the caller as it was raised, or as ``RemoteRpcError`` over TCP if its class is not a
builtin one.

Example::

    class JobMasterGateway(FencedRpcGateway, Protocol):
        def update_task_execution_state(self, state: TaskExecutionState) -> Future[Acknowledge]:
            ...

        def heartbeat_from_task_manager(self, resource_id: ResourceId) -> None:
            ...

Callers obtain an implementation from ``RpcService.connect`` (a proxy that enqueues each call in
the target endpoint's mailbox). The endpoint class implements the gateway's methods itself, but
returns the reply directly where the gateway returns ``Future[T]`` (the RPC layer completes the
caller's future with it), so it does not subclass the gateway; it names it in its class statement
instead, ``class JobMaster(FencedRpcEndpoint, implements=(JobMasterGateway,))``, and
:class:`~millrace.rpc.rpc_endpoint.RpcEndpoint` checks there that every method is implemented.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeAlias, TypeVar

__all__ = ["FencedRpcGateway", "GatewayType", "RpcGateway"]


class RpcGateway(Protocol):
    """Base of every gateway: a handle on one remote endpoint.

    Threading:
        Any thread; every method call is executed in the target endpoint's main thread.
    """

    @property
    def address(self) -> str:
        """The address of the endpoint behind this gateway, e.g. ``local://cluster/jobmaster``."""
        ...


class FencedRpcGateway(RpcGateway, Protocol):
    """A gateway to a FencedRpcEndpoint: every call carries the caller's fencing token.

    A fenced endpoint (a leader such as the JobMaster or ResourceManager) rejects calls whose
    token differs from its current one, so messages meant for a former leader are not acted on.

    Threading:
        Any thread.
    """

    @property
    def fencing_token(self) -> object | None:
        """The token attached to every call made through this gateway (None: unfenced)."""
        ...


G = TypeVar("G", bound=RpcGateway)

GatewayType: TypeAlias = Callable[..., G]
"""A gateway Protocol class whose instances are ``G``, as passed to ``RpcService.connect``.

Spelled as a callable returning ``G`` rather than ``type[G]`` because type checkers accept only
concrete classes where ``type[G]`` is expected, and every gateway is a Protocol. Gateways are
never called: :func:`~millrace.rpc.gateway_proxy.gateway_methods` rejects anything that is not
a gateway Protocol with TypeError.
"""
