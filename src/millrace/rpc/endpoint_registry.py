"""EndpointRegistry: the endpoints one RpcService hosts, and the lookups waiting for them.

Every transport hosts endpoints the same way, whatever carries the calls: an endpoint is
registered when it starts (``RpcService.start_server``) and unregistered when its main thread
ends; a lookup of an endpoint id completes with the endpoint as soon as it is registered, or
fails with RecipientUnreachableError after ``rpc.lookup-timeout`` (seed 004: the lookup timeout
is shorter than the ask timeout, so a missing endpoint is noticed fast). Closing the registry
fails the waiting lookups, refuses new registrations and closes every hosted endpoint. The
registry also holds the service's fatal error handler, which endpoints report their own
unexpected errors to.

Both transports compose one: :class:`~millrace.rpc.local_rpc_service.LocalRpcService` turns a
resolved lookup into an in-process gateway, :class:`~millrace.rpc.tcp.tcp_rpc_service.\
TcpRpcService` into a compact endpoint number a peer calls by.

Threading:
    Any thread. Lookups expire on the service's timer thread; a lookup's done callbacks run on
    the thread that registers its endpoint, on the timer thread, or on the closing thread.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING

from millrace.errors import RecipientUnreachableError
from millrace.rpc.future_utils import all_of, complete, fail, transfer
from millrace.rpc.rpc_service import FatalErrorHandler
from millrace.rpc.rpc_timer import RpcTimer, TimerHandle

if TYPE_CHECKING:
    from millrace.rpc.rpc_endpoint import RpcEndpoint

__all__ = ["EndpointRegistry"]

logger = logging.getLogger(__name__)


class _WaitingLookup:
    """A lookup waiting for its endpoint to register, with the timer that expires it."""

    __slots__ = ("address", "future", "timer")

    def __init__(self, address: str, future: Future[RpcEndpoint]) -> None:
        self.address = address
        self.future = future
        self.timer: TimerHandle | None = None


class EndpointRegistry:
    """The endpoints of one RpcService by id, and the lookups waiting for one.

    Args:
        service_name: Name of the owning service, named in errors and logs.
        timer: The service's timer; waiting lookups expire on it (and on its clock).
        lookup_timeout: Seconds a lookup waits for its endpoint (``rpc.lookup-timeout``),
            > 0.

    Raises:
        ValueError: If ``lookup_timeout`` is not positive.

    Threading:
        Any thread.
    """

    def __init__(self, service_name: str, timer: RpcTimer, lookup_timeout: float) -> None:
        if not lookup_timeout > 0:
            raise ValueError(f"lookup_timeout must be > 0 s, got {lookup_timeout}")
        self._service_name = service_name
        self._timer = timer
        self._lookup_timeout = lookup_timeout
        self._lock = threading.Lock()
        self._endpoints: dict[str, RpcEndpoint] = {}
        self._waiting: dict[str, list[_WaitingLookup]] = {}
        self._fatal_error_handler: FatalErrorHandler | None = None
        self._terminations: Future[None] | None = None  # set by close()

    @property
    def lookup_timeout(self) -> float:
        """Seconds a lookup waits for its endpoint to register."""
        return self._lookup_timeout

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._terminations is not None

    def register(self, endpoint: RpcEndpoint) -> None:
        """Host ``endpoint`` under its id and complete the lookups waiting for that id.

        Args:
            endpoint: An endpoint that is starting.

        Raises:
            ValueError: If an endpoint with the same id is registered.
            RuntimeError: If the registry is closed.

        Threading:
            Any thread; the waiting lookups' done callbacks run on it, after the endpoint is
            registered.
        """
        endpoint_id = endpoint.endpoint_id
        with self._lock:
            if self._terminations is not None:
                raise RuntimeError(
                    f"RpcService {self._service_name} is closed; cannot start endpoint "
                    f"{endpoint_id}"
                )
            if endpoint_id in self._endpoints:
                raise ValueError(
                    f"RpcService {self._service_name} already hosts an endpoint with id "
                    f"{endpoint_id!r}"
                )
            self._endpoints[endpoint_id] = endpoint
            waiting = self._waiting.pop(endpoint_id, [])
        for lookup in waiting:
            if lookup.timer is not None:
                lookup.timer.cancel()
            complete(lookup.future, endpoint)

    def unregister(self, endpoint: RpcEndpoint) -> None:
        """Stop hosting ``endpoint``; no effect if another endpoint now holds its id.

        Threading:
            Any thread.
        """
        with self._lock:
            if self._endpoints.get(endpoint.endpoint_id) is endpoint:
                del self._endpoints[endpoint.endpoint_id]

    def lookup(self, endpoint_id: str, address: str) -> Future[RpcEndpoint]:
        """The endpoint hosted under ``endpoint_id``, now or once it registers.

        Args:
            endpoint_id: Id of the endpoint.
            address: The address the caller asked for, named in errors.

        Returns:
            Future completed with the endpoint (at once if it is hosted). Failed with
            RecipientUnreachableError if it is not registered within the lookup timeout, or
            the registry is (or gets) closed.

        Threading:
            Any thread.
        """
        future: Future[RpcEndpoint] = Future()
        with self._lock:
            endpoint = self._endpoints.get(endpoint_id)
            closed = self._terminations is not None
            if endpoint is None and not closed:
                lookup = _WaitingLookup(address, future)
                self._waiting.setdefault(endpoint_id, []).append(lookup)
                lookup.timer = self._timer.schedule(
                    self._lookup_timeout, lambda: self._expire(endpoint_id, lookup)
                )
        if closed:
            fail(future, RecipientUnreachableError(address, self._closed_reason()))
        elif endpoint is not None:
            complete(future, endpoint)
        return future

    def set_fatal_error_handler(self, handler: FatalErrorHandler | None) -> None:
        """Install (or with None, remove) the callback for endpoints' unexpected errors.

        Threading:
            Any thread.
        """
        self._fatal_error_handler = handler

    def handle_fatal_error(self, endpoint: RpcEndpoint, error: BaseException) -> None:
        """Call the fatal error handler, if one is set; its own errors are logged.

        Threading:
            The endpoint's main thread.
        """
        handler = self._fatal_error_handler
        if handler is None:
            return
        try:
            handler(endpoint, error)
        except Exception:
            logger.exception("fatal error handler of RpcService %s raised", self._service_name)

    def close(self) -> Future[None]:
        """Refuse new endpoints, fail the waiting lookups and close every hosted endpoint.

        Returns:
            Future completed once every endpoint hosted at the call has terminated (failed
            with the first termination error, if any). Idempotent: every call returns the same
            future.

        Threading:
            Any thread.
        """
        with self._lock:
            if self._terminations is not None:
                return self._terminations
            terminations: Future[None] = Future()
            self._terminations = terminations
            endpoints = list(self._endpoints.values())
            waiting = [lookup for pending in self._waiting.values() for lookup in pending]
            self._waiting.clear()
        for lookup in waiting:
            if lookup.timer is not None:
                lookup.timer.cancel()
            fail(lookup.future, RecipientUnreachableError(lookup.address, self._closed_reason()))
        all_of([endpoint.close_async() for endpoint in endpoints]).add_done_callback(
            lambda done: transfer(done, terminations)
        )
        return terminations

    def _expire(self, endpoint_id: str, lookup: _WaitingLookup) -> None:
        """Timer thread: fail ``lookup`` unless it was resolved or failed meanwhile."""
        with self._lock:
            pending = self._waiting.get(endpoint_id, [])
            if lookup not in pending:
                return
            pending.remove(lookup)
            if not pending:
                del self._waiting[endpoint_id]
        fail(
            lookup.future,
            RecipientUnreachableError(
                lookup.address,
                f"no endpoint registered within rpc.lookup-timeout ({self._lookup_timeout:g} s)",
            ),
        )

    def _closed_reason(self) -> str:
        return f"RpcService {self._service_name} is closed"

    def __repr__(self) -> str:
        return f"EndpointRegistry({self._service_name!r}, {len(self._endpoints)} endpoints)"
