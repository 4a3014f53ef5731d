"""TestingTaskRuntime: a TaskRuntime without a data plane, for tasks that need no Spark."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

__all__ = ["TestingTaskRuntime"]


class TestingTaskRuntime:
    """Started at once with ``session`` (a plain object by default); records cancellations.

    Attributes:
        cancelled: Attempt ids whose work was cancelled, in order.

    Threading:
        Any thread.
    """

    __test__ = False

    def __init__(self, session: Any = None) -> None:
        self._started: Future[Any] = Future()
        self._session = session if session is not None else object()
        self.cancelled: list[str] = []

    def start(self) -> None:
        if not self._started.done():
            self._started.set_result(self._session)

    @property
    def started(self) -> Future[Any]:
        return self._started

    def cancel_task_work(self, attempt_id: str) -> None:
        self.cancelled.append(attempt_id)

    def task_failed(self, error: BaseException) -> None:
        pass

    def stop(self) -> None:
        pass
