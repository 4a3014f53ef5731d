"""ManuallyTriggeredMainThreadExecutor: a ComponentMainThreadExecutor that runs nothing until
the test says so, on the test's own thread (Flink's ManuallyTriggeredComponentMainThreadExecutor).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from millrace.clock import ManualClock
from millrace.errors import IllegalThreadError

__all__ = ["ManuallyTriggeredMainThreadExecutor"]

T = TypeVar("T")


class _Scheduled:
    __slots__ = ("cancelled", "fn")

    def __init__(self, fn: Callable[[], object]) -> None:
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManuallyTriggeredMainThreadExecutor:
    """Queued work runs on ``trigger_all``; scheduled work when ``advance`` moves the clock past
    its due time. The "main thread" is the thread that created the executor.

    Args:
        clock: The clock scheduled runs follow (a new ManualClock at 0 if None).

    Threading:
        ``execute`` and ``when_done`` from any thread (a future may complete anywhere); the
        rest, and everything it runs, on the creating thread.
    """

    def __init__(self, clock: ManualClock | None = None) -> None:
        self._clock = clock if clock is not None else ManualClock()
        self._owner = threading.get_ident()
        self._queue: deque[Callable[[], object]] = deque()
        self._timers: list[tuple[float, int, _Scheduled]] = []
        self._seq = itertools.count()

    @property
    def clock(self) -> ManualClock:
        return self._clock

    def execute(self, fn: Callable[[], object]) -> None:
        """Queue ``fn`` for the next ``trigger_all``."""
        self._queue.append(fn)

    def schedule(self, fn: Callable[[], object], delay: float) -> _Scheduled:
        """Run ``fn`` once ``advance`` reaches ``delay`` seconds from now."""
        scheduled = _Scheduled(fn)
        heapq.heappush(self._timers, (self._clock.monotonic() + delay, next(self._seq), scheduled))
        return scheduled

    def when_done(self, future: Future[T], fn: Callable[[Future[T]], object]) -> None:
        """Queue ``fn(future)`` once ``future`` is done."""
        future.add_done_callback(lambda done: self.execute(lambda: fn(done)))

    def assert_running_in_main_thread(self) -> None:
        if threading.get_ident() != self._owner:
            raise IllegalThreadError("manually triggered executor", threading.current_thread().name)

    @property
    def queued(self) -> int:
        """Work waiting for ``trigger_all``."""
        return len(self._queue)

    @property
    def scheduled(self) -> int:
        """Scheduled runs not cancelled and not yet due."""
        return sum(not s.cancelled for _, _, s in self._timers)

    def trigger_all(self) -> int:
        """Run the queued work, and what it queues, until nothing is queued.

        Returns:
            How many callables ran.

        Raises:
            IllegalThreadError: If called from another thread than the creating one.
            Exception: Whatever a callable raises (the rest stays queued).
        """
        self.assert_running_in_main_thread()
        ran = 0
        while self._queue:
            self._queue.popleft()()
            ran += 1
        return ran

    def advance(self, seconds: float) -> None:
        """Move the clock forward, running each scheduled run when its time comes and the
        queued work after each (what a real main thread would do meanwhile)."""
        self.assert_running_in_main_thread()
        end = self._clock.monotonic() + seconds
        self.trigger_all()
        while self._timers and self._timers[0][0] <= end:
            due, _, scheduled = heapq.heappop(self._timers)
            if scheduled.cancelled:
                continue
            self._clock.advance(max(0.0, due - self._clock.monotonic()))
            scheduled.fn()
            self.trigger_all()
        self._clock.advance(max(0.0, end - self._clock.monotonic()))
        self.trigger_all()
