"""Time sources: a Clock protocol, the SystemClock, and a ManualClock for tests.

Every component that needs time takes a Clock in its constructor; tests advance a ManualClock
instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol, TypeGuard

__all__ = ["Clock", "ListenableClock", "ManualClock", "SystemClock", "is_listenable"]


class Clock(Protocol):
    """A source of time.

    Threading:
        Any thread.
    """

    def monotonic(self) -> float:
        """Seconds on a monotonic clock (for timeouts and intervals)."""
        ...

    def time(self) -> float:
        """Seconds since the epoch (for timestamps shown to people)."""
        ...


class ListenableClock(Clock, Protocol):
    """A clock that moves only when told to and then calls its listeners (the ManualClock).

    Timer loops cannot sleep until a due time on such a clock: they wait for a listener call.

    Threading:
        Any thread.
    """

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` whenever the clock moves."""
        ...

    def remove_listener(self, listener: Callable[[], None]) -> None:
        """Stop calling ``listener`` (no effect if it is not registered)."""
        ...


def is_listenable(clock: Clock) -> TypeGuard[ListenableClock]:
    """True if ``clock`` has ``add_listener`` (a ListenableClock such as the ManualClock)."""
    return callable(getattr(clock, "add_listener", None))


class SystemClock:
    """The machine's clocks (``time.monotonic`` and ``time.time``)."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()


class ManualClock:
    """A clock that moves only when a test calls :meth:`advance`.

    Listeners registered with :meth:`add_listener` are called after each advance, so that mailbox
    loops waiting on timers re-check them.

    Threading:
        Any thread.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._listeners: list[Callable[[], None]] = []
        self._guard = threading.Lock()

    def monotonic(self) -> float:
        return self._now

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` (>= 0) and wake the listeners."""
        if seconds < 0:
            raise ValueError(f"cannot move a ManualClock backwards by {seconds} s")
        with self._guard:
            self._now += seconds
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every advance."""
        with self._guard:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[], None]) -> None:
        with self._guard:
            if listener in self._listeners:
                self._listeners.remove(listener)
