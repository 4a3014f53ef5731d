"""CheckpointCoordinator: triggers checkpoints, collects acknowledgements, completes them.

Asynchronous barrier snapshots (seed 002; Carbone et al. 2015, "Lightweight Asynchronous
Snapshots for Distributed Dataflows"): every ``execution.checkpointing.interval`` the
coordinator sends ``trigger_checkpoint`` to the source tasks, which snapshot their split
positions at a bundle boundary and put a ``CheckpointBarrier`` into their output. Downstream
tasks snapshot when the barrier has arrived on all their inputs (aligned, EXACTLY_ONCE; or
without waiting, AT_LEAST_ONCE), pre-commit their sinks and acknowledge with their state
handles. When every task has acknowledged, the coordinator writes the checkpoint's metadata
(durable: from then on it can be restored), keeps the newest ``state.checkpoints.num-retained``
checkpoints, and tells the JobMaster, which commits the sinks. A checkpoint that is declined or
not complete within ``execution.checkpointing.timeout`` is aborted; the job goes on.

An aborted checkpoint's sink data is not dropped: what its tasks pre-committed (in their
acknowledgements, also those that arrive after the abort) is carried over to the next checkpoint
that completes and committed with it, as Flink's two-phase commit sink commits every pending
transaction up to the completed checkpoint. A failover discards what was carried: the restore
aborts all staged data the restored checkpoint does not list, and the replay writes it again.
Likewise a completed checkpoint whose sink commit is not confirmed yet (it failed, or has not
run) is named in the metadata of every later checkpoint (``earlier_commits``), so that a
restore of a later one commits it first instead of dropping its data.

Threading:
    JobMaster main thread only (its ComponentMainThreadExecutor); storage I/O runs in the
    JobMaster's I/O executor and its outcome comes back through the main-thread executor.
"""

from __future__ import annotations

import functools
import logging
from collections import deque
from concurrent.futures import Executor, Future
from typing import Any, Protocol

from millrace.errors import CheckpointError, describe
from millrace.rpc.main_thread_executor import ComponentMainThreadExecutor
from millrace.runtime.checkpoint.chained_state import unchained_snapshots
from millrace.runtime.checkpoint.checkpoint_history import CheckpointHistory, CheckpointRecord
from millrace.runtime.checkpoint.checkpoint_ids import CheckpointIds
from millrace.runtime.checkpoint.checkpoint_settings import CheckpointSettings
from millrace.runtime.checkpoint.checkpoint_storage import (
    CheckpointMetadata,
    CheckpointStorage,
    SinkCommit,
    VertexState,
)
from millrace.runtime.checkpoint.pending_checkpoint import CheckpointTarget, PendingCheckpoint
from millrace.runtime.checkpoint.pending_sink_commits import PendingSinkCommits
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.io.input_split import SplitState
from millrace.runtime.jobgraph import JobGraph
from millrace.types import ExecutionAttemptId, JobVertexId

__all__ = [
    "CheckpointCoordinator",
    "CheckpointCoordinatorContext",
    "CheckpointTarget",
]

logger = logging.getLogger(__name__)
_Splits = dict[JobVertexId, tuple[str, ...]]  # source vertex -> split ids
_Staged = dict[tuple[str, int], tuple[str, ...]]  # (vertex, sink position) -> staged handles


class CheckpointCoordinatorContext(Protocol):
    """What the coordinator needs from its JobMaster (main thread)."""

    def checkpoint_targets(self) -> list[CheckpointTarget] | None:
        """Every task of the job, or None when not all of them are RUNNING (no checkpoint
        can start)."""
        ...

    def checkpoint_completed(self, metadata: CheckpointMetadata) -> None:
        """A checkpoint is complete and durable: commit its sinks."""
        ...

    def restored_finished_splits(self, vertex_id: JobVertexId) -> tuple[str, ...]:
        """Splits of a source vertex finished before the last restore (to carry over)."""
        ...

    def unassigned_splits(self, vertex_id: JobVertexId) -> tuple[SplitState, ...]:
        """Restored splits of a source vertex not yet handed to a subtask, at their restored
        positions (empty for other vertices)."""
        ...


class CheckpointCoordinator:
    """Periodic checkpoints and savepoints of one job.

    Args:
        job_graph: The job (names, parallelism, max parallelism for the metadata).
        settings: The checkpointing settings.
        storage: Where checkpoints are written.
        main_thread: The JobMaster's main thread (its clock times the checkpoints).
        io_executor: Runs storage I/O.
        context: The Scheduler of the job.

    Threading:
        Main thread of the JobMaster only.
    """

    def __init__(
        self,
        job_graph: JobGraph,
        settings: CheckpointSettings,
        storage: CheckpointStorage,
        main_thread: ComponentMainThreadExecutor,
        io_executor: Executor,
        context: CheckpointCoordinatorContext,
    ) -> None:
        self._job = job_graph
        self.settings = settings
        self.storage = storage
        self._main_thread = main_thread
        self._clock = main_thread.clock
        self._schedule = main_thread.schedule
        self._on_main_thread = main_thread.when_done
        self._io = io_executor
        self._context = context
        self.ids = CheckpointIds(job_graph.name, main_thread, io_executor)  # HA: a counter
        self._pending: dict[int, PendingCheckpoint] = {}
        self._completed: deque[CheckpointMetadata] = deque()
        self._restored: CheckpointMetadata | None = None
        self._running = False
        self._periodic: Any = None
        self._last_completion = float("-inf")
        self._history = CheckpointHistory()
        self.counts = {"completed": 0, "failed": 0}
        self._owed = PendingSinkCommits(
            lambda vertex_id, snapshot: unchained_snapshots(self._job.vertex(vertex_id), snapshot)
        )

    # Life cycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Begin periodic checkpoints (if an interval is set). Idempotent."""
        self._main_thread.assert_running_in_main_thread()
        if self._running:
            return
        self._running = True
        if self.settings.interval > 0:
            self._periodic = self._schedule(self._periodic_trigger, self.settings.interval)

    def stop(self, reason: str) -> None:
        """Stop periodic checkpoints and abort the pending ones (failover, job end)."""
        self._main_thread.assert_running_in_main_thread()
        self._running = False
        if self._periodic is not None:
            self._periodic.cancel()
            self._periodic = None
        for checkpoint_id in list(self._pending):
            pending = self._pending[checkpoint_id]
            if not pending.finalizing:
                self._abort(pending, reason)
        self._owed.forget_carried()

    @property
    def finalizing(self) -> bool:
        """Whether a complete checkpoint's metadata is being written (a restore waits)."""
        return any(p.finalizing for p in self._pending.values())

    def being_written(self) -> list[Future[CheckpointMetadata]]:
        """Futures of the complete checkpoints whose metadata is being written; each is done,
        on the main thread, once its checkpoint completed (sinks' commit submitted) or failed.
        The final checkpoint waits for them: its commit must not claim their staged data."""
        return [p.future for p in self._pending.values() if p.finalizing]

    # Restore -----------------------------------------------------------------------------------

    def restore(self, metadata: CheckpointMetadata) -> None:
        """Continue from ``metadata`` (a restored checkpoint or savepoint): ids continue after
        it, and it is the latest state until a newer checkpoint completes."""
        self._main_thread.assert_running_in_main_thread()
        self._restored = metadata
        self.ids.restored(metadata.checkpoint_id)
        self._owed.restored()  # its restore commits it with every commit it names

    @property
    def latest(self) -> CheckpointMetadata | None:
        """The newest completed checkpoint, else the restored one, else None."""
        return self._completed[-1] if self._completed else self._restored

    @property
    def next_checkpoint_id(self) -> int:
        return self.ids.next_id

    # Triggering --------------------------------------------------------------------------------

    def _periodic_trigger(self) -> None:
        self._periodic = None
        if not self._running:
            return
        wait = self._last_completion + self.settings.min_pause - self._clock.monotonic()
        if wait <= 0 and len(self._pending) + self.ids.reserving < self.settings.max_concurrent:
            try:
                self.trigger()
            except CheckpointError as error:
                logger.debug("job %s: no checkpoint now: %s", self._job.name, error)
        self._periodic = self._schedule(self._periodic_trigger, max(self.settings.interval, wait))

    def trigger(
        self, *, is_savepoint: bool = False, savepoint_target: str | None = None
    ) -> Future[CheckpointMetadata]:
        """Start a checkpoint (or a savepoint) now.

        Returns:
            Future completed with the checkpoint's metadata once it is durable, or failed with
            CheckpointError if it is declined, times out or the job fails over.

        Raises:
            CheckpointError: If not every task is RUNNING (nothing is started).
        """
        self._main_thread.assert_running_in_main_thread()
        if self._context.checkpoint_targets() is None:  # asked again once the id is there
            raise CheckpointError(f"job {self._job.name}: not every task is RUNNING")
        return self.ids.with_id(functools.partial(self._start, is_savepoint, savepoint_target))

    def _start(
        self, is_savepoint: bool, savepoint_target: str | None, checkpoint_id: int
    ) -> Future[CheckpointMetadata]:
        if (targets := self._context.checkpoint_targets()) is None:
            raise CheckpointError(f"job {self._job.name}: not every task is RUNNING")
        pending = PendingCheckpoint(
            checkpoint_id,
            round(self._clock.time() * 1000),
            self._clock.monotonic(),
            is_savepoint,
            savepoint_target,
            {t.attempt_id: t for t in targets},
            # the coordinators' share, taken now, before any barrier (Flink's coordinator
            # checkpoint): restored splits not yet handed to their subtask
            {v.vertex_id: self._context.unassigned_splits(v.vertex_id) for v in self._job.vertices},
        )
        self._pending[checkpoint_id] = pending
        self._history.started(
            checkpoint_id, is_savepoint, pending.timestamp_ms, (t.vertex_id for t in targets)
        )
        pending.timeout_handle = self._schedule(
            lambda: self._expire(checkpoint_id), self.settings.timeout
        )
        logger.info("job %s: triggering %s %d", self._job.name, pending.kind, checkpoint_id)
        for target in targets:
            if target.trigger is not None:
                sent = target.trigger(checkpoint_id, pending.timestamp_ms)
                self._on_main_thread(
                    sent,
                    functools.partial(
                        self._trigger_sent, checkpoint_id=checkpoint_id, target=target
                    ),
                )
        return pending.future

    def _trigger_sent(
        self, sent: Future[Any], checkpoint_id: int, target: CheckpointTarget
    ) -> None:
        error = sent.exception()
        if error is None and getattr(sent.result(), "success", True) is False:
            error = RuntimeError(getattr(sent.result(), "description", "refused"))
        if error is not None:
            self.decline(target.attempt_id, checkpoint_id, f"trigger not delivered: {error}")

    def _expire(self, checkpoint_id: int) -> None:
        pending = self._pending.get(checkpoint_id)
        if pending is not None and not pending.finalizing:
            self._abort(pending, f"not complete within {self.settings.timeout:g} s")

    # Acknowledgements --------------------------------------------------------------------------

    def acknowledge(
        self, attempt_id: ExecutionAttemptId, checkpoint_id: int, snapshot: TaskStateSnapshot
    ) -> None:
        """AcknowledgeCheckpoint of one task. Unknown ones are ignored; a late one of an aborted
        checkpoint only hands over its sink data, carried to the next complete checkpoint."""
        self._main_thread.assert_running_in_main_thread()
        pending = self._pending.get(checkpoint_id)
        if pending is None and self._owed.late_acknowledgement(checkpoint_id, attempt_id, snapshot):
            return
        if pending is None or pending.finalizing or attempt_id not in pending.targets:
            logger.debug(
                "ignoring acknowledgement of checkpoint %d by %s", checkpoint_id, attempt_id
            )
            return
        pending.acks[attempt_id] = snapshot
        self._history.acknowledged(
            checkpoint_id,
            pending.targets[attempt_id].vertex_id,
            snapshot.state_size_bytes,
            round(self._clock.time() * 1000),
        )
        if len(pending.acks) == len(pending.targets):
            self._finalize(pending)

    def decline(self, attempt_id: ExecutionAttemptId, checkpoint_id: int, reason: str) -> None:
        """DeclineCheckpoint: the task cannot take it; the checkpoint is aborted."""
        self._main_thread.assert_running_in_main_thread()
        pending = self._pending.get(checkpoint_id)
        if pending is not None and not pending.finalizing and attempt_id in pending.targets:
            self._abort(pending, f"declined by {attempt_id[:8]}: {reason}")

    def _finalize(self, pending: PendingCheckpoint) -> None:
        pending.finalizing = True
        if pending.timeout_handle is not None:
            pending.timeout_handle.cancel()
        vertices: dict[JobVertexId, VertexState] = {
            v.vertex_id: VertexState(
                v.vertex_id,
                v.name,
                v.parallelism,
                finished_splits=self._context.restored_finished_splits(v.vertex_id),
                unassigned_splits=pending.unassigned.get(v.vertex_id, ()),
            )
            for chain in self._job.vertices
            for v in chain.unchained()[0]
        }
        for attempt_id, snapshot in pending.acks.items():
            target = pending.targets[attempt_id]
            chain = self._job.vertex(target.vertex_id)
            for vertex_id, part in unchained_snapshots(chain, snapshot):
                vertices[vertex_id].subtasks[target.subtask_index] = part
        pending.carried = self._owed.merge_into(vertices)
        metadata = CheckpointMetadata(
            job_id=self._job.job_id,
            job_name=self._job.name,
            checkpoint_id=pending.checkpoint_id,
            timestamp_ms=pending.timestamp_ms,
            completed_ms=round(self._clock.time() * 1000),
            is_savepoint=False,
            max_parallelism=self._job.max_parallelism,
            vertices=list(vertices.values()),
            earlier_commits=self._owed.earlier_commits(),
        )
        directory = self.storage.checkpoint_directory(self._job.job_id, pending.checkpoint_id)

        def write() -> tuple[CheckpointMetadata, CheckpointMetadata | None]:
            written = self.storage.write(metadata, directory)
            if pending.is_savepoint:
                return written, self.storage.write_savepoint(written, pending.savepoint_target)
            return written, None

        self._on_main_thread(self._io.submit(write), lambda f: self._written(pending, f))

    def _written(
        self,
        pending: PendingCheckpoint,
        writing: Future[tuple[CheckpointMetadata, CheckpointMetadata | None]],
    ) -> None:
        self._pending.pop(pending.checkpoint_id, None)
        if writing.exception() is not None:
            pending.finalizing = False
            error = writing.exception()
            self._abort(pending, f"writing the metadata failed: {describe(error)}")
            return
        checkpoint, savepoint = writing.result()
        shown = savepoint or checkpoint
        duration_ms = round((self._clock.monotonic() - pending.started) * 1000)
        self._last_completion = self._clock.monotonic()
        self.counts["completed"] += 1
        self._history.ended(
            pending.checkpoint_id, "COMPLETED", duration_ms, shown.state_size_bytes, shown.location
        )
        self._completed.append(checkpoint)  # a savepoint's checkpoint serves failover too
        self._owed.completed(checkpoint)
        while len(self._completed) > self.settings.num_retained:
            self._io.submit(self.storage.discard, self._completed.popleft())
        logger.info(
            "job %s: %s %d complete in %d ms (%d bytes of state) at %s",
            self._job.name,
            pending.kind,
            pending.checkpoint_id,
            duration_ms,
            shown.state_size_bytes,
            shown.location,
        )
        self._context.checkpoint_completed(checkpoint)
        pending.future.set_result(shown)

    def _abort(self, pending: PendingCheckpoint, reason: str) -> None:
        self._pending.pop(pending.checkpoint_id, None)
        if pending.timeout_handle is not None:
            pending.timeout_handle.cancel()
        self._owed.aborted(pending.checkpoint_id, pending.targets, pending.acks, pending.carried)
        pending.carried = {}
        duration_ms = round((self._clock.monotonic() - pending.started) * 1000)
        self.counts["failed"] += 1
        self._history.ended(pending.checkpoint_id, "FAILED", duration_ms, failure=reason)
        logger.warning(
            "job %s: %s %d aborted: %s",
            self._job.name,
            pending.kind,
            pending.checkpoint_id,
            reason,
        )
        directory = self.storage.checkpoint_directory(self._job.job_id, pending.checkpoint_id)
        self._io.submit(self.storage.discard_directory, directory)
        if not pending.future.done():
            pending.future.set_exception(
                CheckpointError(f"{pending.kind} {pending.checkpoint_id} aborted: {reason}")
            )

    def complete_final(
        self, finished_splits: _Splits, sink_pending: _Staged
    ) -> Future[CheckpointMetadata]:
        """Write the final checkpoint of a finished bounded job (FLIP-147): every source split
        finished, no keyed state, and the sink data the final attempts staged after the last
        checkpoint as its commit. Restoring it commits what is owed and reads nothing again.

        Args:
            finished_splits: Source vertex id -> ids of all its splits.
            sink_pending: (vertex id, sink position) -> staged handles not in a checkpoint.

        Returns:
            Future completed with the written metadata (retained like any checkpoint), or
            failed with what writing raised.
        """
        self._main_thread.assert_running_in_main_thread()
        return self.ids.with_id(functools.partial(self._write_final, finished_splits, sink_pending))

    def _write_final(
        self, finished_splits: _Splits, sink_pending: _Staged, checkpoint_id: int
    ) -> Future[CheckpointMetadata]:
        earlier = self._owed.earlier_commits()
        # staged data an unconfirmed checkpoint already owes is committed under its own id
        owed = {h for c in earlier for hs in c.pending.values() for h in hs}
        left = {k: tuple(h for h in hs if h not in owed) for k, hs in sink_pending.items()}
        own = SinkCommit(self._job.job_id, checkpoint_id, {k: hs for k, hs in left.items() if hs})
        now_ms = round(self._clock.time() * 1000)
        metadata = CheckpointMetadata(
            job_id=self._job.job_id,
            job_name=self._job.name,
            checkpoint_id=checkpoint_id,
            timestamp_ms=now_ms,
            completed_ms=now_ms,
            is_savepoint=False,
            max_parallelism=self._job.max_parallelism,
            vertices=[
                VertexState(
                    v.vertex_id,
                    v.name,
                    v.parallelism,
                    finished_splits=tuple(sorted(finished_splits.get(v.vertex_id, ()))),
                )
                for chain in self._job.vertices
                for v in chain.unchained()[0]
            ],
            earlier_commits=(*earlier, own),
        )
        directory = self.storage.checkpoint_directory(self._job.job_id, checkpoint_id)
        written: Future[CheckpointMetadata] = Future()

        def done(writing: Future[CheckpointMetadata]) -> None:
            error = writing.exception()
            if error is not None:
                written.set_exception(error)
                return
            final = writing.result()
            self._completed.append(final)
            self.counts["completed"] += 1
            self._owed.completed(final)
            logger.info(
                "job %s: final checkpoint %d at %s", self._job.name, checkpoint_id, directory
            )
            written.set_result(final)

        self._on_main_thread(self._io.submit(self.storage.write, metadata, directory), done)
        return written

    def commit_confirmed(self, metadata: CheckpointMetadata) -> None:
        """The sinks committed ``metadata`` (and the earlier commits it names): later
        checkpoints need not name them any more."""
        self._main_thread.assert_running_in_main_thread()
        self._owed.confirmed(metadata)

    @property
    def unconfirmed_commits(self) -> list[int]:
        """Ids of completed checkpoints whose sink commit is not confirmed yet."""
        return self._owed.unconfirmed_ids

    def carried_sink_handles(self) -> int:
        """Staged sink data handles waiting for the next complete checkpoint."""
        return self._owed.carried_handles

    # Statistics --------------------------------------------------------------------------------

    def history(self) -> list[CheckpointRecord]:
        """The newest checkpoints, oldest first."""
        return self._history.records()

    @property
    def in_progress(self) -> int:
        return len(self._pending)

    def retained(self) -> list[CheckpointMetadata]:
        """Completed checkpoints kept, oldest first."""
        return list(self._completed)

    def discard_retained(self) -> None:
        """Delete every retained checkpoint (the job finished: they are no longer needed)."""
        while self._completed:
            self._io.submit(self.storage.discard, self._completed.popleft())
