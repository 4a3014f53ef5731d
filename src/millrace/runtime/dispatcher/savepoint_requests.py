"""SavepointRequests: the REST API's table of triggered savepoints (issue 9, case 5).

``POST /jobs/{jobid}/savepoints`` answers a request id; ``GET
/jobs/{jobid}/savepoints/{requestid}`` reads that request's status, for the same job only. A
finished request stays readable for ``rest.async.store-duration`` (Flink's key), then it is
forgotten; the table holds at most ``max_requests`` entries, so it cannot grow without bound.

Threading:
    The REST app's event loop; a request's future may complete on any thread (it only stamps
    its finishing time).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from millrace.clock import Clock
from millrace.types import JobId, new_id

__all__ = ["SavepointRequests"]


@dataclass
class _Request:
    job_id: JobId
    future: Future[str]
    finished_at: float | None = field(default=None)


class SavepointRequests:
    """Savepoint requests by id, pruned as they age.

    Args:
        clock: Time source (seconds, monotonic).
        store_duration: Seconds a finished request stays readable.
        max_requests: Requests held at most (finished and running).
    """

    def __init__(self, clock: Clock, store_duration: float, max_requests: int = 1000) -> None:
        self._clock = clock
        self._store_duration = store_duration
        self._max_requests = max_requests
        self._requests: dict[str, _Request] = {}

    def __len__(self) -> int:
        return len(self._requests)

    def add(self, job_id: JobId, future: Future[str]) -> str | None:
        """Track ``future``; returns its request id, or None if the table is full of requests
        still running."""
        self.prune()
        if len(self._requests) >= self._max_requests:
            return None
        request = _Request(job_id, future)
        request_id = new_id()
        self._requests[request_id] = request

        def finished(_: Future[str]) -> None:
            request.finished_at = self._clock.monotonic()

        future.add_done_callback(finished)
        return request_id

    def start(self, job_id: JobId, starting: Callable[[], Future[Any]]) -> str | None:
        """Start a request with ``starting()`` only if the table has room for it: returns its
        id, or None (nothing started) if the table is full of requests still running."""
        self.prune()
        if len(self._requests) >= self._max_requests:
            return None
        return self.add(job_id, starting())

    def get(self, job_id: JobId, request_id: str) -> Future[str] | None:
        """The request ``request_id`` of job ``job_id``; None if unknown, forgotten, or of
        another job."""
        self.prune()
        request = self._requests.get(request_id)
        if request is None or request.job_id != job_id:
            return None
        return request.future

    def prune(self) -> None:
        """Forget the requests finished longer than the store duration ago, and the oldest
        finished ones beyond ``max_requests``."""
        now = self._clock.monotonic()
        expired = [
            request_id
            for request_id, request in self._requests.items()
            if request.finished_at is not None and now - request.finished_at >= self._store_duration
        ]
        for request_id in expired:
            del self._requests[request_id]
        excess = len(self._requests) - self._max_requests
        if excess > 0:
            finished = sorted(
                (r.finished_at, request_id)
                for request_id, r in self._requests.items()
                if r.finished_at is not None
            )
            for _, request_id in finished[:excess]:
                del self._requests[request_id]
