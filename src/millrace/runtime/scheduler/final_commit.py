"""FinalCommit: the end of a bounded job — its last staged output as the final checkpoint,
committed (Flink's final checkpoint, FLIP-147).

When every Execution FINISHED and every complete checkpoint's metadata is written (a checkpoint
completing meanwhile owns the data its tasks staged before its barrier), what the final
attempts' sinks staged after the last checkpoint is listed (on the SinkCommitter's thread),
written as the final checkpoint (every split finished, no state), and that checkpoint is
committed. A failure anywhere is retried after the restart strategy's delay while it allows (a
database outage is common), always committing the same final checkpoint once it is written;
with no restart left the job fails and the final checkpoint stays retained, so a resume from
it commits what is owed and reads nothing again.

Threading:
    Main thread of the JobMaster only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from millrace.errors import describe
from millrace.rpc.main_thread_executor import ComponentMainThreadExecutor
from millrace.runtime.checkpoint.checkpoint_coordinator import CheckpointCoordinator
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata
from millrace.runtime.executiongraph import ExecutionGraph
from millrace.runtime.failover.restart_strategy import RestartStrategy
from millrace.runtime.jobmaster.sink_committer import SinkCommitter, SinkKey
from millrace.types import JobVertexId

__all__ = ["FinalCommit"]

logger = logging.getLogger(__name__)


class FinalCommit:
    """Commits a finished bounded job's last output.

    Args:
        graph: The job's ExecutionGraph (every Execution FINISHED).
        committer: The job's SinkCommitter.
        checkpoints: The job's CheckpointCoordinator (writes the final checkpoint).
        main_thread: The JobMaster's main thread.
        restart_strategy: Decides the retries.
        split_ids: Source vertex id -> ids of all its splits, when asked.
        done: Called once: with None when the sinks are committed, else with the cause.
    """

    def __init__(
        self,
        graph: ExecutionGraph,
        committer: SinkCommitter,
        checkpoints: CheckpointCoordinator,
        main_thread: ComponentMainThreadExecutor,
        restart_strategy: RestartStrategy,
        split_ids: Callable[[], dict[JobVertexId, tuple[str, ...]]],
        done: Callable[[str | None], None],
    ) -> None:
        self._graph = graph
        self._committer = committer
        self._checkpoints = checkpoints
        self._main_thread = main_thread
        self._restart_strategy = restart_strategy
        self._split_ids = split_ids
        self._done = done
        self._final: CheckpointMetadata | None = None
        self._cancelled = False

    def start(self) -> None:
        """List, write and commit (again, after a failure, from where it failed)."""
        self._main_thread.assert_running_in_main_thread()
        if self._cancelled:
            return
        if self._final is not None:
            self._main_thread.when_done(self._committer.finish(self._final), self._committed)
            return
        writing = self._checkpoints.being_written()
        if writing:  # its staged data is that checkpoint's to commit, not the final one's
            self._main_thread.when_done(writing[0], lambda _: self.start())
            return
        attempts: dict[str, set[str]] = {  # a chained keyed vertex's sinks: the chain's tasks
            vertex.vertex_id: {ev.current_execution.attempt_id for ev in jv.task_vertices}
            for jv in self._graph.vertices
            for vertex in jv.job_vertex.unchained()[0]
        }
        self._main_thread.when_done(self._committer.final_pending(attempts), self._listed)

    def cancel(self) -> None:
        """The JobMaster stops: nothing more is started; ``done`` is not called."""
        self._cancelled = True

    def _listed(self, listing: Future[dict[SinkKey, tuple[str, ...]]]) -> None:
        if self._cancelled:
            return
        if listing.exception() is not None:
            self._committed(listing)  # a failed commit: retried under the strategy
            return
        writing = self._checkpoints.complete_final(self._split_ids(), listing.result())
        self._main_thread.when_done(writing, self._written)

    def _written(self, writing: Future[CheckpointMetadata]) -> None:
        if self._cancelled:
            return
        if writing.exception() is not None:
            self._committed(writing)
            return
        self._final = writing.result()
        self.start()

    def _committed(self, committing: Future[Any]) -> None:
        if self._cancelled:
            return
        error = committing.exception()
        if error is None:
            self._checkpoints.discard_retained()  # the output is final: nothing to restore
            self._done(None)
            return
        cause = f"committing the sinks failed: {describe(error)}"
        self._restart_strategy.notify_failure(self._main_thread.clock.monotonic())
        if self._restart_strategy.can_restart():  # e.g. a database outage: try again
            logger.warning(
                "job %s: %s; retrying the commit (%r)",
                self._graph.job_graph.name,
                cause,
                self._restart_strategy,
            )
            self._main_thread.schedule(self.start, self._restart_strategy.restart_delay())
            return
        self._done(f"{cause} (no restart left: {self._restart_strategy!r})")
