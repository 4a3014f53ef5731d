"""RpcEndpoint: a component that owns its state and one main thread (seed 004, Actor Model).

Each endpoint has a mailbox processed FIFO by one dedicated daemon thread, ``<endpoint_id>-main``.
Gateway calls, ``run_async``/``call_async``, scheduled runs, ``on_start`` and ``on_stop`` all run
there, one at a time, so an endpoint's state needs no locks. Timers live in the same loop: a
heap owned by the main thread, woken by the Clock (see :class:`~millrace.rpc.rpc_server.RpcServer`).

Errors: an exception in an ask fails that caller's future; one in a local tell, ``run_async``
or a scheduled run is unexpected and goes to :meth:`RpcEndpoint.on_fatal_error`. A tell that
came over the network and fails is logged, never fatal: a peer must not be able to stop the
process (issue 9). Neither ends the loop. Remote peers reach only the methods of the gateways
the endpoint declares (:mod:`~millrace.rpc.remote_calls`).
"""

from __future__ import annotations

import functools
import inspect
import itertools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

from millrace.clock import Clock
from millrace.errors import IllegalThreadError
from millrace.rpc.gateway_proxy import create_gateway_proxy, gateway_methods
from millrace.rpc.rpc_gateway import GatewayType, RpcGateway
from millrace.rpc.rpc_invocation import RpcInvocation
from millrace.rpc.rpc_server import CallAsync, RpcServer
from millrace.rpc.scheduled_run import ScheduledRun

if TYPE_CHECKING:
    from millrace.rpc.rpc_service import RpcService

__all__ = ["RpcEndpoint", "ScheduledRun"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
G = TypeVar("G", bound=RpcGateway)


class RpcEndpoint:
    """Base class of every RPC component (JobMaster, TaskExecutor, ResourceManager, ...).

    Subclasses implement one or more gateway Protocols and override :meth:`on_start`,
    :meth:`on_stop` and :meth:`on_fatal_error` as needed. They name the gateways in the class
    statement, ``class JobMaster(FencedRpcEndpoint, implements=(JobMasterGateway,))``, rather
    than subclassing them: an implementation returns ``T`` where the gateway's ask returns
    ``Future[T]`` (the reply may also be a Future, whose outcome is passed on), which a type
    checker would reject as an incompatible override. The class statement raises TypeError if
    a gateway method is missing or takes other parameters than the gateway declares.

    Args:
        rpc_service: The service that hosts this endpoint and gives it its address and clock.
        endpoint_id: Unique id within the service, e.g. ``"jobmaster"``; no ``/``.

    Raises:
        ValueError: If ``endpoint_id`` is empty or contains ``/``.

    Threading:
        Construct on any thread; see each method. Subclasses must not use attribute names
        starting with ``_rpc_`` (the base class's own).
    """

    _rpc_implements: tuple[GatewayType[RpcGateway], ...] = ()  # named in the class statement

    def __init_subclass__(
        cls, *, implements: tuple[GatewayType[RpcGateway], ...] = (), **kwargs: Any
    ) -> None:
        """Check that the new endpoint class implements the gateways it names.

        Args:
            implements: Gateway Protocols whose methods the class serves; not inherited by
                its subclasses (which are not checked again).
            **kwargs: Passed on to the next ``__init_subclass__``.

        Raises:
            TypeError: If an entry is not a gateway Protocol, or one of its methods is missing
                or takes other parameters (names, kinds, defaults) than the gateway declares.
        """
        super().__init_subclass__(**kwargs)
        for gateway_type in implements:
            _check_implements(cls, gateway_type)
        cls._rpc_implements = tuple(implements)  # read by rpc.remote_calls.declared_gateways

    def __init__(self, rpc_service: RpcService, endpoint_id: str) -> None:
        if not endpoint_id or "/" in endpoint_id:
            raise ValueError(f"invalid RPC endpoint id {endpoint_id!r}: non-empty, no '/'")
        self._rpc_service = rpc_service
        self._rpc_endpoint_id = endpoint_id
        self._rpc_address = rpc_service.address_of(endpoint_id)
        self._rpc_clock = rpc_service.clock
        self._rpc_timer_seq = itertools.count()
        self._rpc_server = RpcServer(self)
        self._rpc_enqueue = self._rpc_server.enqueue

    @property
    def endpoint_id(self) -> str:
        """The endpoint's id within its service."""
        return self._rpc_endpoint_id

    @property
    def address(self) -> str:
        """The address other components connect to (given by the RpcService)."""
        return self._rpc_address

    @property
    def rpc_service(self) -> RpcService:
        """The hosting RpcService."""
        return self._rpc_service

    @property
    def clock(self) -> Clock:
        """The service's clock; use it for all time reads of this endpoint."""
        return self._rpc_clock

    @property
    def rpc_server(self) -> RpcServer:
        """The endpoint's mailbox server; transports deliver invocations to ``enqueue``.

        Threading:
            Any thread.
        """
        return self._rpc_server

    # Lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Register with the service and start the main thread; ``on_start`` runs first on it.

        Raises:
            RuntimeError: If the endpoint was started or closed before, or the service is closed.
            ValueError: If the service already hosts an endpoint with this id.

        Threading:
            Any thread.
        """
        self._rpc_server.start()

    def close_async(self) -> Future[None]:
        """Stop the endpoint: ``on_stop`` runs on the main thread, then the loop ends.

        Messages already in the mailbox before the stop are processed; while a Future returned
        by ``on_stop`` is pending, further messages are processed too. Afterwards the service
        unregisters the endpoint and remaining or new asks fail with EndpointStoppedError.
        Idempotent.

        Returns:
            The termination future (see :meth:`get_termination_future`).

        Threading:
            Any thread.
        """
        return self._rpc_server.stop()

    def get_termination_future(self) -> Future[None]:
        """Future completed once the main thread has ended.

        Returns:
            Future completed with None, or failed with the error of ``on_start``/``on_stop``.

        Threading:
            Any thread.
        """
        return self._rpc_server.termination_future

    def on_start(self) -> None:
        """Hook run first on the main thread; an exception is fatal and terminates the endpoint.

        Threading:
            Main thread only.
        """

    def on_stop(self) -> Future[None] | None:
        """Hook run on the main thread when the endpoint stops.

        Returns:
            None, or a Future the endpoint waits for (still serving its mailbox) before it
            terminates; its error fails the termination future.

        Threading:
            Main thread only.
        """
        return None

    def on_fatal_error(self, error: BaseException) -> None:
        """Handle an unexpected error (from a tell, run_async, a scheduled run or on_start).

        The default logs it and passes it to the service's fatal error handler.

        Args:
            error: The exception raised.

        Threading:
            Main thread only.
        """
        logger.error("unexpected error in RPC endpoint %s", self._rpc_endpoint_id, exc_info=error)
        self._rpc_service.handle_fatal_error(self, error)

    # Main-thread execution ---------------------------------------------------------------------

    def run_async(self, fn: Callable[[], None]) -> None:
        """Run ``fn()`` on the main thread after the messages already enqueued.

        Errors raised by ``fn`` go to :meth:`on_fatal_error`. Dropped if the endpoint terminated.

        Args:
            fn: Function to run; not fenced (local work of the endpoint).

        Threading:
            Any thread.
        """
        self._rpc_enqueue(fn)

    def call_async(
        self, fn: Callable[[], T | Future[T]], timeout: float | None = None
    ) -> Future[T]:
        """Run ``fn()`` on the main thread and return its outcome.

        Args:
            fn: Function to call; if it returns a Future, that future's outcome is passed on.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None: never.

        Returns:
            Future completed with ``fn``'s result, or failed with its exception.

        Raises:
            RpcTimeoutError: via the future, after ``timeout``.
            EndpointStoppedError: via the future, if the endpoint terminated before running it.

        Threading:
            Any thread.
        """
        future: Future[T] = Future()
        if timeout is not None:
            name = getattr(fn, "__name__", "call_async")
            self._rpc_service.schedule_ask_timeout(future, self._rpc_endpoint_id, name, timeout)
        self._rpc_enqueue(CallAsync(fn, future))
        return future

    def schedule_run_async(self, fn: Callable[[], None], delay: float) -> ScheduledRun:
        """Run ``fn()`` on the main thread ``delay`` seconds of the service clock from now.

        Runs with equal due time run in scheduling order. Errors go to :meth:`on_fatal_error`.

        Args:
            fn: Function to run.
            delay: Seconds (>= 0) on the service's clock.

        Returns:
            Handle whose ``cancel()`` prevents the run.

        Raises:
            ValueError: If ``delay`` is negative.

        Threading:
            Any thread.
        """
        if delay < 0:
            raise ValueError(f"delay must be >= 0 s, got {delay}")
        run = ScheduledRun(self._rpc_clock.monotonic() + delay, next(self._rpc_timer_seq), fn)
        self._rpc_enqueue(run)
        return run

    def on_main_thread(self, future: Future[T], fn: Callable[[Future[T]], object]) -> None:
        """Once ``future`` is done, run ``fn(future)`` on the main thread (like run_async).

        Use it to act on replies of asks without blocking the main thread.

        Args:
            future: Typically the reply of an ask to another endpoint.
            fn: Callback receiving the done future; its result is ignored, its errors go to
                :meth:`on_fatal_error`.

        Threading:
            Any thread.
        """
        future.add_done_callback(lambda done: self._rpc_enqueue(functools.partial(fn, done)))

    def is_main_thread(self) -> bool:
        """True if the calling thread is this endpoint's main thread.

        Threading:
            Any thread.
        """
        return self._rpc_server.is_main_thread()

    def validate_runs_in_main_thread(self) -> None:
        """Check that the caller runs on the main thread.

        Raises:
            IllegalThreadError: If called from any other thread.

        Threading:
            Any thread.
        """
        if not self._rpc_server.is_main_thread():
            raise IllegalThreadError(self._rpc_endpoint_id, threading.current_thread().name)

    def get_self_gateway(self, gateway_type: GatewayType[G]) -> G:
        """A gateway to this endpoint (calls go through the mailbox like any caller's).

        Args:
            gateway_type: A gateway Protocol this endpoint implements.

        Returns:
            The proxy.

        Raises:
            TypeError: If ``gateway_type`` is not a gateway Protocol or this endpoint lacks one
                of its methods.

        Threading:
            Any thread.
        """
        missing = [n for n in gateway_methods(gateway_type) if not callable(getattr(self, n, None))]
        if missing:
            raise TypeError(
                f"{type(self).__name__} does not implement {missing} of {gateway_type.__name__}"
            )
        service = self._rpc_service
        return create_gateway_proxy(
            gateway_type,
            address=self._rpc_address,
            endpoint_id=self._rpc_endpoint_id,
            send=self._rpc_enqueue,
            schedule_ask_timeout=service.schedule_ask_timeout,
            ask_timeout=service.ask_timeout,
            fencing_token_supplier=self._rpc_self_token_supplier(),
        )

    def _rpc_invocation_filter(self) -> Callable[[RpcInvocation], bool] | None:
        """Predicate deciding whether an invocation is served (None: all are); fencing hook."""
        return None

    def _rpc_self_token_supplier(self) -> Callable[[], object | None] | None:
        return None

    def _rpc_handle_unexpected(self, error: Exception) -> None:
        """Pass an unexpected error to :meth:`on_fatal_error`, logging if that raises."""
        try:
            self.on_fatal_error(error)
        except Exception:
            logger.exception("on_fatal_error of RPC endpoint %s raised", self._rpc_endpoint_id)


def _check_implements(endpoint_class: type, gateway_type: GatewayType[RpcGateway]) -> None:
    """Raise TypeError unless ``endpoint_class`` serves every method of ``gateway_type``.

    A method must exist and take the gateway's parameters (after ``self``) in the same order,
    with the same names and kinds, and with a default wherever the gateway has one; further
    parameters need defaults. Annotations are not compared: replies differ by design.
    """
    problems: list[str] = []
    for name in gateway_methods(gateway_type):
        implemented = getattr(endpoint_class, name, None)
        if not callable(implemented):
            problems.append(f"{name} is missing")
            continue
        declared = inspect.signature(getattr(gateway_type, name))
        try:
            actual = inspect.signature(implemented)
        except (TypeError, ValueError):  # no signature to compare (e.g. a builtin)
            continue
        if not _parameters_match(declared, actual):
            problems.append(
                f"{name}{_parameter_list(actual)} differs from {_parameter_list(declared)}"
            )
    if problems:
        raise TypeError(
            f"{endpoint_class.__name__} does not implement {gateway_type.__name__}: "
            + "; ".join(problems)
        )


def _parameters_match(declared: inspect.Signature, actual: inspect.Signature) -> bool:
    expected = list(declared.parameters.values())[1:]
    offered = list(actual.parameters.values())[1:]
    if len(offered) < len(expected):
        return False
    for want, have in zip(expected, offered, strict=False):
        if want.name != have.name or want.kind != have.kind:
            return False
        if want.default is not want.empty and have.default is have.empty:
            return False
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return all(p.default is not p.empty or p.kind in variadic for p in offered[len(expected) :])


def _parameter_list(signature: inspect.Signature) -> str:
    """``signature`` without ``self`` and annotations, e.g. ``(job_id, timeout=None)``."""
    parameters = [p.replace(annotation=p.empty) for p in list(signature.parameters.values())[1:]]
    return str(signature.replace(parameters=parameters, return_annotation=signature.empty))
