"""A checkpoint in flight: the tasks it waits for and what they acknowledged (Flink's
PendingCheckpoint), and one task it waits for (CheckpointTarget).

Threading:
    JobMaster main thread only (owned by the CheckpointCoordinator).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata
from millrace.runtime.checkpoint.pending_sink_commits import CarriedSinkData
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.io.input_split import SplitState
from millrace.types import ExecutionAttemptId, JobVertexId

__all__ = ["CheckpointTarget", "PendingCheckpoint"]


@dataclass(frozen=True)
class CheckpointTarget:
    """One task a checkpoint waits for.

    Attributes:
        attempt_id: The running attempt.
        vertex_id: Its JobVertex.
        subtask_index: Its subtask.
        trigger: For a source task, sends it ``trigger_checkpoint(checkpoint_id, timestamp_ms)``
            and returns the TaskExecutor's reply; None for the others (they get barriers).
    """

    attempt_id: ExecutionAttemptId
    vertex_id: JobVertexId
    subtask_index: int
    trigger: Callable[[int, int], Future[Any]] | None = None


@dataclass
class PendingCheckpoint:
    """A checkpoint triggered and not yet complete or aborted (Flink's PendingCheckpoint).

    Attributes:
        checkpoint_id: Its id.
        timestamp_ms: When it was triggered (ms since the epoch).
        started: When it was triggered (s, the main thread's monotonic clock).
        is_savepoint: Whether the user asked for it (a savepoint) rather than the timer.
        savepoint_target: Where a savepoint is copied, if it is one with a target.
        targets: The tasks it waits for, by attempt.
        unassigned: Restored splits not yet handed to a subtask, by source vertex: part of
            the checkpoint although no task names them.
        acks: The acknowledgements received, by attempt.
        future: Completed with the metadata once written, failed when aborted.
        finalizing: The metadata is being written.
        timeout_handle: Cancels the expiry timer.
        carried: Sink data of aborted checkpoints that this one commits.
    """

    checkpoint_id: int
    timestamp_ms: int
    started: float
    is_savepoint: bool
    savepoint_target: str | None
    targets: dict[ExecutionAttemptId, CheckpointTarget]
    unassigned: dict[JobVertexId, tuple[SplitState, ...]] = field(default_factory=dict)
    acks: dict[ExecutionAttemptId, TaskStateSnapshot] = field(default_factory=dict)
    future: Future[CheckpointMetadata] = field(default_factory=Future)
    finalizing: bool = False
    timeout_handle: Any = None
    carried: CarriedSinkData = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """``"savepoint"`` or ``"checkpoint"`` (logs and errors)."""
        return "savepoint" if self.is_savepoint else "checkpoint"
