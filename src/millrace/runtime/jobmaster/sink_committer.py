"""SinkCommitter: the global committer of a job's sinks (two-phase commit's second phase).

Commits run in checkpoint order on one thread of their own, never on the JobMaster's main
thread: a completed checkpoint's staged sink data is committed (idempotently: a replay is a
no-op), a restore first commits the restored checkpoint again (its commit may not have finished
before the failure) and then aborts every other staged data, and a bounded job's end commits
what its finishing tasks staged after the last checkpoint, recorded first as a final
checkpoint (Flink's final checkpoint of a bounded job, FLIP-147), so that a job that fails in
that commit can be resumed from it without writing anything twice.

Under high availability every commit first checks that its JobManager still leads (a former
leader woken from a pause commits nothing; PostgreSQL's commit record makes a late duplicate a
no-op besides), and a suspended or former leader aborts nothing: the staged data belongs to
the job's next leader.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent.futures import Executor, Future, ThreadPoolExecutor

from millrace.errors import HighAvailabilityError
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata
from millrace.runtime.sink import Sink
from millrace.types import JobId

__all__ = ["SinkCommitter", "SinkKey"]

logger = logging.getLogger(__name__)

SinkKey = tuple[str, int]
"""(vertex id, position of the sink operator in the vertex's chain)."""


class SinkCommitter:
    """Commits and aborts the sinks of one job.

    Args:
        job_id: The job.
        executor: Runs the commits (default: a thread of its own; one worker keeps them in
            order, and only it touches the sinks). Tests pass an inline executor.
        check_leadership: Raises LeadershipLostError unless this JobManager still leads
            (high availability); None: always leads.

    Threading:
        Any thread submits; the work runs on the committer's own thread, in submission order,
        and only there are the sinks touched.
    """

    def __init__(
        self,
        job_id: JobId,
        executor: Executor | None = None,
        check_leadership: Callable[[], None] | None = None,
    ) -> None:
        self._job_id = job_id
        self._check_leadership = check_leadership
        self._suspended = False
        self._own_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(
            1, thread_name_prefix=f"committer-{job_id[:8]}"
        )
        self._sinks: dict[SinkKey, Sink] = {}

    def set_sinks(self, sinks: Mapping[SinkKey, Sink]) -> Future[None]:
        """Use ``sinks`` (loaded by the job's preparation) from the next queued work on."""
        given = dict(sinks)

        def use() -> None:
            self._sinks = given

        return self._executor.submit(use)

    def initialize(self) -> Future[None]:
        """Prepare every sink for a fresh job (``Sink.initialize_global``)."""

        def run() -> None:
            for sink in self._sinks.values():
                sink.initialize_global(self._job_id)

        return self._executor.submit(run)

    def commit(self, metadata: CheckpointMetadata) -> Future[None]:
        """Commit what ``metadata`` pre-committed."""
        return self._executor.submit(self._commit, metadata)

    def suspend(self) -> None:
        """The JobMaster is suspended (leadership revoked): from the next queued work on,
        nothing is committed or aborted. Any thread."""

        def stop() -> None:
            self._suspended = True

        self._executor.submit(stop)

    def _leading(self) -> bool:
        """Committer thread: whether this JobManager may touch the sinks."""
        if self._suspended:
            return False
        if self._check_leadership is not None:
            try:
                self._check_leadership()
            except HighAvailabilityError as error:
                logger.warning("job %s: sinks left alone: %s", self._job_id, error)
                return False
        return True

    def _commit(self, metadata: CheckpointMetadata) -> None:
        if not self._leading():
            raise HighAvailabilityError(
                f"job {self._job_id}: checkpoint {metadata.checkpoint_id} not committed: "
                f"this JobManager does not lead"
            )
        # Under the job that took the checkpoint: a retained checkpoint of an earlier job is
        # committed as that job would have, so a commit it did make is not made twice. The
        # earlier checkpoints' commits that it carries go first, each under its own id.
        for commit in metadata.commits():
            for key, handles in commit.pending.items():
                sink = self._sinks.get(key)
                if sink is not None:
                    sink.commit(commit.job_id, commit.checkpoint_id, list(handles))
            logger.info("job %s: committed checkpoint %d", commit.job_id, commit.checkpoint_id)

    def restore(self, metadata: CheckpointMetadata | None) -> Future[None]:
        """Commit ``metadata`` again (a no-op if done), then abort all other staged data."""

        def run() -> None:
            if metadata is not None:
                self._commit(metadata)
            self._abort()

        return self._executor.submit(run)

    def final_pending(
        self, attempts: Mapping[str, set[str]]
    ) -> Future[dict[SinkKey, tuple[str, ...]]]:
        """A bounded job finished: what its final attempts (vertex id -> attempt ids) staged
        since the last checkpoint, per sink (for the final checkpoint)."""

        def run() -> dict[SinkKey, tuple[str, ...]]:
            return {
                key: tuple(sink.pending(self._job_id, attempts.get(key[0], set())))
                for key, sink in self._sinks.items()
            }

        return self._executor.submit(run)

    def finish(self, final: CheckpointMetadata) -> Future[None]:
        """Commit the final checkpoint (and the earlier commits it names), then drop every
        other staged data of the job."""

        def run() -> None:
            self._commit(final)
            self._abort()

        return self._executor.submit(run)

    def abort(self, keep: Iterable[CheckpointMetadata] = ()) -> Future[None]:
        """Drop the job's staged data, except what the checkpoints ``keep`` would commit
        (retained checkpoints of a failed or cancelled job, which a later run may restore and
        commit), earlier commits they name included."""
        kept = {
            h
            for metadata in keep
            for commit in metadata.commits()
            for hs in commit.pending.values()
            for h in hs
        }
        return self._executor.submit(self._abort, kept)

    def _abort(self, keep: Collection[str] = frozenset()) -> None:
        if not self._leading():
            return
        for sink in self._sinks.values():
            try:
                sink.abort(self._job_id, keep)
            except Exception:
                logger.exception("aborting %s failed", sink.describe())

    def close(self) -> None:
        """Finish queued work and stop the thread (does not wait)."""
        if self._own_executor:
            self._executor.shutdown(wait=False)
