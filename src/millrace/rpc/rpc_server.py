"""RpcServer: an endpoint's mailbox, main thread and timers (seed 004's RpcServer).

One daemon thread, ``<endpoint_id>-main``, takes messages from a ``queue.SimpleQueue`` in FIFO
order and dispatches them to the endpoint: gateway invocations (method looked up by name, reply
completed), local calls, and scheduled runs. Timers are a heap of ``(due, seq, run)`` owned by
that thread; the loop waits on the queue until the next due time, or, with a clock that has
``add_listener`` (ManualClock), until the clock's listener enqueues a wake-up.
"""

from __future__ import annotations

import enum
import heapq
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from millrace.clock import is_listenable
from millrace.errors import EndpointStoppedError, GatewayMismatchError
from millrace.rpc.future_utils import complete, fail, transfer
from millrace.rpc.rpc_invocation import RpcInvocation
from millrace.rpc.scheduled_run import ScheduledRun

if TYPE_CHECKING:
    from millrace.rpc.rpc_endpoint import RpcEndpoint

__all__ = ["CallAsync", "RpcServer"]

logger = logging.getLogger(__name__)


class CallAsync:
    """Mailbox message of ``call_async``: run ``fn`` and complete ``future`` with its outcome."""

    __slots__ = ("fn", "future")

    def __init__(self, fn: Callable[[], Any], future: Future[Any]) -> None:
        self.fn = fn
        self.future = future


class _StopDone:
    __slots__ = ("future",)

    def __init__(self, future: Future[Any]) -> None:
        self.future = future


class _Control(enum.Enum):
    WAKE = "wake"  # re-check timers (the clock moved)
    STOP = "stop"  # run on_stop, then terminate


class _State(enum.Enum):
    CREATED = "created"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    TERMINATED = "terminated"


class RpcServer:
    """Runs one endpoint's messages on its main thread.

    Mailbox messages are RpcInvocation (from gateways), CallAsync, ScheduledRun, or a plain
    callable (``run_async``).

    Args:
        endpoint: The endpoint served; its hooks run on the main thread.

    Threading:
        :meth:`enqueue`, :meth:`start`, :meth:`stop` and :meth:`is_main_thread`: any thread.
        Everything else runs on the main thread.
    """

    def __init__(self, endpoint: RpcEndpoint) -> None:
        self._endpoint = endpoint
        self._endpoint_id = endpoint.endpoint_id
        self._clock = endpoint.clock
        self._listenable = self._clock if is_listenable(self._clock) else None
        self._clock_driven = self._listenable is not None
        self._mailbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._run, name=f"{self._endpoint_id}-main", daemon=True
        )
        self._lifecycle_lock = threading.Lock()
        self._state = _State.CREATED
        self._terminated = False  # read lock-free by senders; set before the final drain
        self.termination_future: Future[None] = Future()
        # Main-thread state.
        self._running = True
        self._stop_error: BaseException | None = None
        self._timers: list[tuple[float, int, ScheduledRun]] = []
        self._methods: dict[str, Callable[..., Any]] = {}
        self._pending_replies: set[Future[Any]] = set()
        self._accepts = endpoint._rpc_invocation_filter()

    @property
    def main_thread(self) -> threading.Thread:
        """The endpoint's main thread (alive between start and termination)."""
        return self._thread

    def is_main_thread(self) -> bool:
        """True if the calling thread is the main thread."""
        return threading.get_ident() == self._thread.ident

    def enqueue(self, message: Any) -> None:
        """Append a message to the mailbox; after termination it is rejected instead.

        Rejection fails an ask or call_async with EndpointStoppedError and drops anything else.
        """
        self._mailbox.put(message)
        if self._terminated:  # set before the final drain, so no message is stranded
            self._drain()

    def start(self) -> None:
        """Register the endpoint with its service and start the main thread.

        The service is called without holding the lifecycle lock, so callbacks it triggers
        (connects waiting for this endpoint) may use the endpoint, even close it.

        Raises:
            RuntimeError: If started or stopped before.
            ValueError: If the service rejects the endpoint id as a duplicate.
        """
        with self._lifecycle_lock:
            if self._state is not _State.CREATED:
                raise RuntimeError(f"RPC endpoint {self._endpoint_id} is {self._state.value}")
            self._state = _State.STARTING
        try:
            self._endpoint.rpc_service.start_server(self._endpoint)
        except BaseException:
            with self._lifecycle_lock:
                closed = self._state is _State.STOPPING  # close_async raced with the start
                self._state = _State.TERMINATED if closed else _State.CREATED
                self._terminated = closed
            if closed:
                self._drain()
                complete(self.termination_future, None)
            raise
        if self._listenable is not None:
            self._listenable.add_listener(self._wake)
        with self._lifecycle_lock:
            if self._state is _State.STARTING:
                self._state = _State.RUNNING
            self._thread.start()

    def stop(self) -> Future[None]:
        """Enqueue the stop (``on_stop``, then termination). Idempotent.

        Returns:
            The termination future.
        """
        with self._lifecycle_lock:
            state = self._state
            if state is _State.RUNNING or state is _State.STARTING:
                self._state = _State.STOPPING
                self._mailbox.put(_Control.STOP)
            elif state is _State.CREATED:
                self._state = _State.TERMINATED
                self._terminated = True
        if state is _State.CREATED:
            self._drain()
            complete(self.termination_future, None)
        return self.termination_future

    def _wake(self) -> None:
        self._mailbox.put(_Control.WAKE)

    def _run(self) -> None:
        error: BaseException | None = None
        try:
            try:
                self._endpoint.on_start()
            except Exception as exc:
                self._endpoint._rpc_handle_unexpected(exc)
                error = exc
            else:
                self._process_mailbox()
                error = self._stop_error
        except BaseException as exc:  # escaped every handler (e.g. SystemExit): still terminate
            error = exc
        finally:
            self._terminate(error)

    def _process_mailbox(self) -> None:
        get = self._mailbox.get
        timers = self._timers
        while self._running:
            message = self._next_message() if timers else get()
            cls = message.__class__
            if cls is RpcInvocation:
                self._invoke(message)
            elif cls is CallAsync:
                self._call(message)
            elif cls is ScheduledRun:
                heapq.heappush(timers, (message._due, message._seq, message))
            elif cls is _Control or cls is _StopDone:
                self._control(message)
            else:
                self._run_unexpected_safe(message)
            if timers:
                self._fire_due_timers()

    def _next_message(self) -> Any:
        if self._clock_driven:  # the clock's listener enqueues WAKE when time moves
            return self._mailbox.get()
        wait = self._timers[0][0] - self._clock.monotonic()
        if wait <= 0:
            return _Control.WAKE
        try:
            return self._mailbox.get(timeout=wait)
        except queue.Empty:
            return _Control.WAKE

    def _fire_due_timers(self) -> None:
        timers = self._timers
        now = self._clock.monotonic()
        while timers and timers[0][0] <= now and self._running:
            run = heapq.heappop(timers)[2]
            fn = run._fn
            if fn is not None:
                run._fn = None
                self._run_unexpected_safe(fn)

    def _run_unexpected_safe(self, fn: Callable[[], object]) -> None:
        try:
            fn()
        except Exception as exc:
            self._endpoint._rpc_handle_unexpected(exc)

    def _invoke(self, invocation: RpcInvocation) -> None:
        if self._accepts is not None and not self._accepts(invocation):
            return
        reply = invocation.reply
        try:
            method = self._methods.get(invocation.method_name)
            if method is None:
                method = self._resolve(invocation.method_name)
            result = method(*invocation.args, **invocation.kwargs)
        except Exception as exc:
            if type(exc) is TypeError and _raised_by_the_call(exc):
                exc = GatewayMismatchError(str(exc), self._endpoint_id, invocation.method_name)
            if reply is not None:
                fail(reply, exc)
            elif invocation.origin is None:
                self._endpoint._rpc_handle_unexpected(exc)
            else:  # a peer's tell: its failure is the peer's, not this process's (issue 9)
                logger.error(
                    "tell %s from %s failed on RPC endpoint %s",
                    invocation.method_name,
                    invocation.origin,
                    self._endpoint_id,
                    exc_info=exc,
                )
            return
        if reply is not None:
            self._reply(result, reply)

    def _resolve(self, name: str) -> Callable[..., Any]:
        method = None if name.startswith("_") else getattr(self._endpoint, name, None)
        if not callable(method):
            raise GatewayMismatchError(
                f"RPC endpoint {self._endpoint_id} has no RPC method {name!r}; does "
                f"{type(self._endpoint).__name__} implement the gateway?",
                self._endpoint_id,
                name,
            )
        resolved: Callable[..., Any] = method
        self._methods[name] = resolved
        return resolved

    def _call(self, call: CallAsync) -> None:
        future = call.future
        if future.done():  # cancelled or timed out before its turn
            return
        try:
            result = call.fn()
        except Exception as exc:
            fail(future, exc)
            return
        self._reply(result, future)

    def _reply(self, result: Any, reply: Future[Any]) -> None:
        if not isinstance(result, Future):
            complete(reply, result)
        elif result.done():
            transfer(result, reply)
        else:
            pending = self._pending_replies
            pending.add(reply)

            def on_done(done: Future[Any]) -> None:
                pending.discard(reply)
                transfer(done, reply)

            result.add_done_callback(on_done)

    def _control(self, message: _Control | _StopDone) -> None:
        if isinstance(message, _StopDone):
            done = message.future
            self._stop_error = None if done.cancelled() else done.exception()
            self._running = False
        elif message is _Control.STOP:
            try:
                result = self._endpoint.on_stop()
            except Exception as exc:
                self._stop_error = exc
                self._running = False
                return
            if isinstance(result, Future):
                result.add_done_callback(lambda done: self._mailbox.put(_StopDone(done)))
            else:
                self._running = False

    def _terminate(self, error: BaseException | None) -> None:
        with self._lifecycle_lock:
            self._state = _State.TERMINATED
            self._terminated = True
        try:
            self._endpoint.rpc_service.stop_server(self._endpoint)
        except Exception:
            logger.exception("could not unregister RPC endpoint %s", self._endpoint_id)
        if self._listenable is not None:
            self._listenable.remove_listener(self._wake)
        self._timers.clear()
        self._drain()
        for reply in self._pending_replies.copy():
            fail(reply, self._stopped_error())
        self._pending_replies.clear()
        threading.Thread(
            target=self._complete_termination,
            args=(error,),
            name=f"{self._endpoint_id}-terminator",
            daemon=True,
        ).start()

    def _complete_termination(self, error: BaseException | None) -> None:
        self._thread.join()  # the thread is gone once the termination future completes
        if error is None:
            complete(self.termination_future, None)
        else:
            fail(self.termination_future, error)

    def _stopped_error(self) -> EndpointStoppedError:
        address = self._endpoint.address
        return EndpointStoppedError(address, f"endpoint {self._endpoint_id} has terminated")

    def _drain(self) -> None:
        while True:
            try:
                message = self._mailbox.get_nowait()
            except queue.Empty:
                return
            cls = message.__class__
            if cls is RpcInvocation:
                if message.reply is not None:
                    fail(message.reply, self._stopped_error())
                else:
                    logger.debug(
                        "dropped tell %s to terminated RPC endpoint %s",
                        message.method_name,
                        self._endpoint_id,
                    )
            elif cls is CallAsync:
                fail(message.future, self._stopped_error())
            elif cls not in (ScheduledRun, _Control, _StopDone):
                logger.debug("dropped run_async to terminated RPC endpoint %s", self._endpoint_id)


def _raised_by_the_call(error: BaseException) -> bool:
    """True if ``error`` was raised binding the arguments of the call in whose frame it was
    caught, before the called method ran a line: its traceback has no further frame."""
    traceback = error.__traceback__
    return traceback is not None and traceback.tb_next is None
