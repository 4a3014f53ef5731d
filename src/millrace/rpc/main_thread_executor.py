"""ComponentMainThreadExecutor: an endpoint's main thread, handed to the components living on it
(Flink's ComponentMainThreadExecutor).

The Scheduler, the CheckpointCoordinator, the SlotPool and the other parts of a JobMaster keep
state that only the JobMaster's main thread may touch. Instead of loose callables (a clock, a
``schedule``, an ``on_main_thread``), each gets one executor that says which thread it lives on:
work is run there (``execute``), later (``schedule``), or when a future completes
(``when_done``: the outcome of blocking work done elsewhere comes back on the main thread), and
methods that must run there check it (``assert_running_in_main_thread``).
:class:`EndpointMainThreadExecutor` is the endpoint's; tests drive the same components on a
:class:`~millrace.testing.ManuallyTriggeredMainThreadExecutor` without threads or sleeps.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Protocol, TypeVar

from millrace.clock import Clock

if TYPE_CHECKING:
    from millrace.rpc.rpc_endpoint import RpcEndpoint

__all__ = ["Cancellable", "ComponentMainThreadExecutor", "EndpointMainThreadExecutor"]

T = TypeVar("T")


class Cancellable(Protocol):
    """A scheduled run that has not happened yet can be cancelled (a no-op afterwards)."""

    def cancel(self) -> None: ...


class ComponentMainThreadExecutor(Protocol):
    """The main thread of the endpoint a component lives on.

    Threading:
        ``execute``, ``schedule`` and ``when_done`` from any thread; what they run, runs on the
        main thread, one thing at a time, in submission order (scheduled runs when due).
    """

    @property
    def clock(self) -> Clock:
        """The endpoint's clock (monotonic seconds for timeouts and intervals)."""
        ...

    def execute(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` on the main thread, after what is already queued."""
        ...

    def schedule(self, fn: Callable[[], object], delay: float) -> Cancellable:
        """Run ``fn`` on the main thread in ``delay`` seconds (of ``clock``)."""
        ...

    def when_done(self, future: Future[T], fn: Callable[[Future[T]], object]) -> None:
        """Run ``fn(future)`` on the main thread once ``future`` is done (at once, queued, if
        it is)."""
        ...

    def assert_running_in_main_thread(self) -> None:
        """Raises IllegalThreadError unless called on the main thread."""
        ...


class EndpointMainThreadExecutor:
    """The ComponentMainThreadExecutor of an RpcEndpoint.

    Args:
        endpoint: The endpoint whose main thread it is.
    """

    def __init__(self, endpoint: RpcEndpoint) -> None:
        self._endpoint = endpoint

    @property
    def clock(self) -> Clock:
        return self._endpoint.clock

    def execute(self, fn: Callable[[], object]) -> None:
        self._endpoint.run_async(lambda: _discard(fn()))

    def schedule(self, fn: Callable[[], object], delay: float) -> Cancellable:
        return self._endpoint.schedule_run_async(lambda: _discard(fn()), delay)

    def when_done(self, future: Future[T], fn: Callable[[Future[T]], object]) -> None:
        self._endpoint.on_main_thread(future, fn)

    def assert_running_in_main_thread(self) -> None:
        self._endpoint.validate_runs_in_main_thread()


def _discard(_: object) -> None:
    return None
