"""ScheduledRun: the cancellable handle of a delayed run on an endpoint's main thread."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["ScheduledRun"]


class ScheduledRun:
    """Handle of a :meth:`RpcEndpoint.schedule_run_async` call.

    Threading:
        Any thread. Cancelling from the endpoint's main thread is exact: a run not yet started
        never starts. From another thread it may race with a run that is due.
    """

    __slots__ = ("_due", "_fn", "_seq")

    def __init__(self, due: float, seq: int, fn: Callable[[], None]) -> None:
        self._due = due
        self._seq = seq
        self._fn: Callable[[], None] | None = fn

    @property
    def active(self) -> bool:
        """True until the run happened or was cancelled."""
        return self._fn is not None

    def cancel(self) -> None:
        """Prevent the run (no effect once it ran). Idempotent."""
        self._fn = None
