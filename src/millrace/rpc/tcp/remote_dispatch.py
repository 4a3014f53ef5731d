"""RemoteDispatch: LOOKUP and CALL messages from authenticated peers, to hosted endpoints.

A lookup names an endpoint id and the methods of the caller's gateway; it is answered with a
compact endpoint number only if every method belongs to the endpoint's declared gateways
(:func:`~millrace.rpc.remote_calls.served_methods`), else with the reason (the caller fails its
connect with ``GatewayMismatchError``). A call is dispatched only if its method is one of those
and its arguments fit the method's signature; otherwise an ask is answered with the reason
(``GatewayMismatchError``, or ``RecipientUnreachableError`` for an unknown endpoint number) and
a tell is logged. A dispatched call carries its peer as ``origin``, so that a remote tell that
fails on the endpoint is logged rather than escalated to the fatal error handler (issue 9).

Threading:
    :meth:`RemoteDispatch.lookup` and :meth:`RemoteDispatch.call`: the service's event-loop
    thread. Replies are sent from the thread that completes them (an endpoint's main thread).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from millrace.errors import (
    GatewayMismatchError,
    MillraceError,
    RecipientUnreachableError,
    RemoteRpcError,
)
from millrace.rpc.remote_calls import CallShape, served_methods
from millrace.rpc.rpc_invocation import RpcInvocation
from millrace.rpc.tcp.admission import ThrottledLog
from millrace.rpc.tcp.connection import FOUND, REPLY, Connection
from millrace.rpc.tcp.remote_errors import error_to_wire

if TYPE_CHECKING:
    from millrace.rpc.rpc_endpoint import RpcEndpoint

__all__ = ["ExportedEndpoint", "RemoteDispatch"]

logger = logging.getLogger(__name__)


class ExportedEndpoint:
    """An endpoint a peer looked up on one connection, with the methods it may call."""

    __slots__ = ("endpoint", "methods")

    def __init__(self, endpoint: RpcEndpoint, methods: Mapping[str, CallShape]) -> None:
        self.endpoint = endpoint
        self.methods = methods


class RemoteDispatch:
    """Serves the lookups and calls of a TcpRpcService's peers.

    Args:
        loop: The service's event loop.
        await_endpoint: Hosted endpoint by id, waiting up to the lookup timeout for it.
        log: Throttles the warnings about refused calls (a peer may send many).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        await_endpoint: Callable[[str], Future[RpcEndpoint]],
        log: ThrottledLog,
    ) -> None:
        self._loop = loop
        self._await_endpoint = await_endpoint
        self._log = log

    def lookup(
        self, connection: Connection, lookup_id: int, endpoint_id: Any, methods: Any
    ) -> None:
        """Answer ``[FOUND, lookup_id, number, error]`` once the endpoint is there (or not)."""

        def answer(number: int | None, error: str | None) -> None:
            connection.send([FOUND, lookup_id, number, error])

        if not (
            isinstance(endpoint_id, str)
            and isinstance(methods, list)
            and all(isinstance(m, str) for m in methods)
        ):
            answer(None, "malformed lookup")
            return
        waiting = self._await_endpoint(endpoint_id)

        def resolved(done: Future[RpcEndpoint]) -> None:
            if done.exception() is not None:
                answer(None, str(done.exception()))
                return
            endpoint = done.result()
            served = served_methods(type(endpoint))
            missing = [m for m in methods if m not in served]
            if missing:
                answer(
                    None,
                    f"TypeError: endpoint {endpoint_id} ({type(endpoint).__name__}) does not "
                    f"serve {', '.join(missing)} in its gateways",
                )
                return
            exported = connection.exported
            number = next((n for n, e in exported.items() if e.endpoint is endpoint), None)
            if number is None:
                number = len(exported) + 1
                exported[number] = ExportedEndpoint(endpoint, served)
            answer(number, None)

        waiting.add_done_callback(lambda done: self._loop.call_soon_threadsafe(resolved, done))

    def call(
        self,
        connection: Connection,
        call_id: int,
        number: Any,
        method: Any,
        args: Any,
        kwargs: Any,
        token: Any,
    ) -> None:
        """Enqueue the call in its endpoint's mailbox, or refuse it (see the module)."""
        exported = connection.exported.get(number) if type(number) is int else None
        if exported is None or not isinstance(args, list) or not isinstance(kwargs, dict):
            self._refuse(
                connection,
                call_id,
                method,
                RecipientUnreachableError(str(number), "unknown endpoint or malformed call"),
            )
            return
        shape = exported.methods.get(method) if isinstance(method, str) else None
        problem = (
            f"{type(exported.endpoint).__name__} serves no RPC method {method!r}"
            if shape is None
            else shape.check(args, kwargs)
        )
        if problem is not None:
            endpoint_id = exported.endpoint.endpoint_id
            self._refuse(
                connection, call_id, method, GatewayMismatchError(problem, endpoint_id, method)
            )
            return
        reply: Future[Any] | None = None
        if call_id:
            reply = Future()
            reply.add_done_callback(lambda done: self._reply(connection, call_id, method, done))
        exported.endpoint.rpc_server.enqueue(
            RpcInvocation(method, tuple(args), kwargs, token, reply, connection.peer)
        )

    def _refuse(self, connection: Connection, call_id: int, method: Any, error: Exception) -> None:
        self._log.warning(
            "refused-call",
            "refused %s %r from %s: %s",
            "ask" if call_id else "tell",
            method,
            connection.peer,
            error,
        )
        if call_id:
            connection.send([REPLY, call_id, False, error_to_wire(error)])

    def _reply(self, connection: Connection, call_id: int, method: str, done: Future[Any]) -> None:
        """Any thread: send the outcome of a call back (an unsendable result fails the call)."""
        if connection.closed:
            return
        failure = (
            RemoteRpcError("CancelledError", f"{method} was cancelled on the endpoint")
            if done.cancelled()
            else done.exception()
        )
        if failure is not None:
            if not isinstance(failure, MillraceError):
                logger.info("ask %s from %s failed: %r", method, connection.peer, failure)
            message = [REPLY, call_id, False, error_to_wire(failure)]
        else:
            message = [REPLY, call_id, True, done.result()]
        try:
            connection.send(message)
        except Exception as error:  # the result cannot be encoded or is too large
            connection.send([REPLY, call_id, False, error_to_wire(error)])
