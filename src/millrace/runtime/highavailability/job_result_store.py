"""Job result stores (Flink's JobResultStore, FLIP-194): a job that reached a terminal state
is never run again by a new leader.

When a job ends, its result is written as a *dirty* entry before its HA data (job graph,
checkpoint pointers) is cleaned up, and marked *clean* after: a new leader skips every job with
an entry, finishes the clean-up of dirty ones, and answers clients asking for their result.
Entries are files under ``<storageDir>/<cluster-id>/job-result-store/``:
``<job-id>_DIRTY.msgpack`` then ``<job-id>.msgpack``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from millrace.errors import HighAvailabilityError
from millrace.rpc.message_codec import MessageCodec
from millrace.runtime.highavailability.ha_storage import HaStorage
from millrace.runtime.job_result import JobResult
from millrace.types import JobId

__all__ = ["FileSystemJobResultStore", "JobResultStore", "NoJobResultStore"]

_DIRTY = "_DIRTY.msgpack"
_CLEAN = ".msgpack"


class JobResultStore(Protocol):
    """Results of the jobs that reached a terminal state.

    Raises:
        HighAvailabilityError: If the storage fails; LeadershipLostError from writes of a
            former leader.

    Threading:
        Blocking I/O: an I/O thread.
    """

    def create_dirty(self, result: JobResult) -> None: ...

    def mark_clean(self, job_id: JobId) -> None: ...

    def results(self) -> dict[JobId, tuple[JobResult, bool]]:
        """Every entry: job id -> (result, whether it is clean)."""
        ...


class NoJobResultStore:
    """No high availability: results live in the Dispatcher's memory only."""

    def create_dirty(self, result: JobResult) -> None:
        pass

    def mark_clean(self, job_id: JobId) -> None:
        pass

    def results(self) -> dict[JobId, tuple[JobResult, bool]]:
        return {}


class FileSystemJobResultStore:
    """Entries as files of the HA storage directory.

    Args:
        storage: The HA storage directory.
        codec: Encodes a JobResult (the control-message codec).
        check_leadership: Raises LeadershipLostError unless this process still leads (called
            before every write; None: read-only).
    """

    def __init__(
        self,
        storage: HaStorage,
        codec: MessageCodec,
        check_leadership: Callable[[], None] | None,
    ) -> None:
        self._storage = storage
        self._codec = codec
        self._check = check_leadership
        self._directory = storage.path("job-result-store")

    def _writable(self) -> None:
        if self._check is None:
            raise HighAvailabilityError("the job result store is read-only here")
        self._check()

    def create_dirty(self, result: JobResult) -> None:
        self._writable()
        path = f"{self._directory}/{result.job_id}{_DIRTY}"
        self._storage.write(path, self._codec.encode(result))

    def mark_clean(self, job_id: JobId) -> None:
        self._writable()
        dirty = f"{self._directory}/{job_id}{_DIRTY}"
        if self._storage.exists(dirty):
            self._storage.write(f"{self._directory}/{job_id}{_CLEAN}", self._storage.read(dirty))
            self._storage.remove(dirty)

    def results(self) -> dict[JobId, tuple[JobResult, bool]]:
        found: dict[JobId, tuple[JobResult, bool]] = {}
        for name in self._storage.names(self._directory):
            if name.endswith(".tmp") or not name.endswith(_CLEAN):
                continue
            clean = not name.endswith(_DIRTY)
            job_id = JobId(name[: -len(_CLEAN if clean else _DIRTY)])
            result = self._codec.decode(self._storage.read(f"{self._directory}/{name}"))
            if job_id not in found or clean:
                found[job_id] = (result, clean)
        return found
