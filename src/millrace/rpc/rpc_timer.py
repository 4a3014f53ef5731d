"""RpcTimer: the one timer thread of an RpcService (ask and lookup timeouts).

Every ask registers a timeout here and almost every one is answered in time, so the ask path is
kept cheap: an ask timeout is a heap entry holding the reply future, nothing is done when the
reply arrives, and an entry whose future is done is skipped when it falls due. The heap is
compacted (done and cancelled entries dropped) whenever it has doubled since the last
compaction, so its size stays within twice the live entries plus a constant.

Time is read from the service's Clock. With a clock that has ``add_listener`` (a ManualClock) the
thread sleeps until the clock moves, so ``advance()`` fires due timeouts without real waiting.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from millrace.clock import Clock, is_listenable
from millrace.errors import RpcTimeoutError
from millrace.rpc.future_utils import fail

__all__ = ["RpcTimer", "TimerHandle"]

logger = logging.getLogger(__name__)

_COMPACT_MIN_SIZE = 1024

# A heap entry: (due, seq, reply future of an ask timeout or None, (endpoint_id, method,
# timeout) of an ask timeout or the TimerHandle of a scheduled function).
_Entry = tuple[float, int, "Future[Any] | None", Any]


class TimerHandle:
    """A function scheduled on an :class:`RpcTimer`; cancel it with :meth:`cancel`.

    Threading:
        Any thread.
    """

    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[[], None] | None) -> None:
        self._fn = fn

    @property
    def active(self) -> bool:
        """True until the function ran or the handle was cancelled."""
        return self._fn is not None

    def cancel(self) -> None:
        """Prevent the function from running (no effect once it ran); drops its references."""
        self._fn = None


def _is_live(entry: _Entry) -> bool:
    future = entry[2]
    return not future.done() if future is not None else entry[3]._fn is not None


def _expire_ask(future: Future[Any], endpoint_id: str, method: str, timeout: float) -> None:
    if not future.done():
        fail(future, RpcTimeoutError(endpoint_id, method, timeout))


class RpcTimer:
    """Runs short functions after a delay on one daemon thread, started on first use.

    Args:
        clock: Time source for due times (the RpcService's clock).
        name: Thread name, e.g. ``"local-rpc-timer"``.

    Threading:
        Any thread. Scheduled functions run on the timer thread and must not block: done
        callbacks of futures it fails with a timeout run there too.
    """

    def __init__(self, clock: Clock, name: str) -> None:
        self._clock = clock
        self._name = name
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._heap: list[_Entry] = []
        self._compact_at = _COMPACT_MIN_SIZE
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._listenable = clock if is_listenable(clock) else None
        self._clock_driven = self._listenable is not None

    def schedule(self, delay: float, fn: Callable[[], None]) -> TimerHandle:
        """Run ``fn()`` on the timer thread ``delay`` seconds of the clock from now.

        Args:
            delay: Seconds (>= 0) on the timer's clock.
            fn: Function to run; its exceptions are logged.

        Returns:
            A handle to cancel the run. After :meth:`close`, an inactive handle: ``fn`` never runs.

        Threading:
            Any thread.
        """
        handle = TimerHandle(fn)
        if not self._push(self._clock.monotonic() + max(delay, 0.0), None, handle):
            handle.cancel()
        return handle

    def schedule_ask_timeout(
        self, future: Future[Any], endpoint_id: str, method: str, timeout: float
    ) -> None:
        """Fail ``future`` with RpcTimeoutError unless it is done within ``timeout`` seconds.

        Nothing needs to happen when ``future`` completes: its entry is skipped or compacted.

        Args:
            future: The caller's reply future.
            endpoint_id: Endpoint named in the error.
            method: Method named in the error.
            timeout: Seconds on the timer's clock.

        Threading:
            Any thread.
        """
        due = self._clock.monotonic() + timeout
        self._push(due, future, (endpoint_id, method, timeout))

    def close(self) -> None:
        """Stop the thread; pending functions and timeouts never run. Idempotent.

        Threading:
            Any thread; waits for the timer thread to end unless called from it.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._heap.clear()
            self._cond.notify()
            thread = self._thread
        if thread is not None and self._listenable is not None:
            self._listenable.remove_listener(self._wake)
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _push(self, due: float, future: Future[Any] | None, detail: Any) -> bool:
        with self._lock:
            if self._closed:
                return False
            if self._thread is None:
                self._start_thread()
            heap = self._heap
            if len(heap) >= self._compact_at:
                heap = self._heap = [entry for entry in heap if _is_live(entry)]
                heapq.heapify(heap)
                self._compact_at = max(2 * len(heap), _COMPACT_MIN_SIZE)
            entry = (due, next(self._seq), future, detail)
            heapq.heappush(heap, entry)
            if heap[0] is entry:
                self._cond.notify()
        return True

    def _start_thread(self) -> None:
        if self._listenable is not None:
            self._listenable.add_listener(self._wake)
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def _wake(self) -> None:
        with self._lock:
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                due = self._await_due()
            if due is None:
                return
            for fn in due:
                try:
                    fn()
                except Exception:
                    logger.exception("timer function of %s failed", self._name)

    def _await_due(self) -> list[Callable[[], None]] | None:
        """Wait until functions are due; return them, or None once closed. Holds the lock."""
        while not self._closed:
            heap = self._heap
            now = self._clock.monotonic()
            due: list[Callable[[], None]] = []
            while heap and (heap[0][0] <= now or not _is_live(heap[0])):
                _, _, future, detail = heapq.heappop(heap)
                if future is not None:
                    if not future.done():
                        due.append(functools.partial(_expire_ask, future, *detail))
                elif detail._fn is not None:
                    due.append(detail._fn)
                    detail._fn = None
            if due:
                return due
            if not heap or self._clock_driven:
                self._cond.wait()
            else:
                self._cond.wait(heap[0][0] - now)
        return None
