"""PendingSinkCommits: the sink data a job owes that no completed checkpoint has committed yet.

Two kinds, both kept by the CheckpointCoordinator so that no staged output is ever dropped
while the job runs (Flink's two-phase-commit sink commits every pending transaction up to the
checkpoint that completes):

* **carried**: what tasks pre-committed with a checkpoint that was then aborted (declined,
  expired, its metadata not written), from acknowledgements received before the abort and late
  ones after it. It is merged into the next checkpoint that completes, subtask by subtask.
* **unconfirmed**: the commits of completed checkpoints that the JobMaster has not heard
  succeed. Every later checkpoint names them (``earlier_commits``), so restoring it commits
  them first, each under its own id.

A failover or restore forgets what was carried (the restore aborts staged data the restored
checkpoint does not list, and the replay writes it again); a restore also empties the
unconfirmed commits, which the restored checkpoint's commit covers.

Threading:
    Plain state of the CheckpointCoordinator: the JobMaster's main thread only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from millrace.runtime.checkpoint.checkpoint_storage import (
    CheckpointMetadata,
    SinkCommit,
    VertexState,
)
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.types import ExecutionAttemptId, JobVertexId

if TYPE_CHECKING:
    from millrace.runtime.checkpoint.pending_checkpoint import CheckpointTarget

__all__ = ["CarriedSinkData", "PendingSinkCommits"]

_ABORTED_REMEMBERED = 16  # aborted checkpoints whose late acknowledgements still carry data

CarriedSinkData = dict[tuple[JobVertexId, int], dict[int, list[str]]]
"""(vertex id, subtask) -> chain position of a sink -> staged data handles."""


Unchain = Callable[[JobVertexId, TaskStateSnapshot], list[tuple[JobVertexId, TaskStateSnapshot]]]
"""A task's acknowledgement as (vertex id, snapshot) of the unchained vertices
(``chained_state.unchained_snapshots``): the keys sinks have."""


def _as_is(vertex_id: JobVertexId, snapshot: TaskStateSnapshot) -> list[Any]:
    return [(vertex_id, snapshot)]


class PendingSinkCommits:
    """Carried sink data of aborted checkpoints, and unconfirmed commits of completed ones.

    Args:
        unchain: Splits an acknowledgement of a chained keyed vertex into the two vertices'
            parts, so that carried data keeps its sinks' unchained keys (default: as is).
    """

    def __init__(self, unchain: Unchain = _as_is) -> None:
        self._unchain = unchain
        self._carried: CarriedSinkData = {}
        self._aborted: dict[int, dict[ExecutionAttemptId, CheckpointTarget]] = {}
        self._unconfirmed: dict[int, SinkCommit] = {}

    # carried -----------------------------------------------------------------------------------

    def carry(self, target: CheckpointTarget, snapshot: TaskStateSnapshot) -> None:
        """Keep what ``snapshot`` pre-committed for the next complete checkpoint, under its
        sinks' unchained (vertex id, position)."""
        for vertex_id, part in self._unchain(target.vertex_id, snapshot):
            if not part.sink_pending:
                continue
            carried = self._carried.setdefault((vertex_id, target.subtask_index), {})
            for position, handles in part.sink_pending.items():
                carried.setdefault(position, []).extend(handles)

    def aborted(
        self,
        checkpoint_id: int,
        targets: dict[ExecutionAttemptId, CheckpointTarget],
        acks: dict[ExecutionAttemptId, TaskStateSnapshot],
        taken: CarriedSinkData,
    ) -> None:
        """Checkpoint ``checkpoint_id`` was aborted: carry its acknowledged sink data and what
        it had taken to merge (``taken``), and remember its targets for late acknowledgements."""
        self._put_back(taken)
        for attempt_id, snapshot in acks.items():
            self.carry(targets[attempt_id], snapshot)
        self._aborted[checkpoint_id] = targets
        while len(self._aborted) > _ABORTED_REMEMBERED:
            del self._aborted[min(self._aborted)]

    def late_acknowledgement(
        self, checkpoint_id: int, attempt_id: ExecutionAttemptId, snapshot: TaskStateSnapshot
    ) -> bool:
        """An acknowledgement of an aborted checkpoint: its sink data is carried. Returns
        whether it was one (else it is unknown and ignored)."""
        targets = self._aborted.get(checkpoint_id)
        if targets is None or attempt_id not in targets:
            return False
        self.carry(targets[attempt_id], snapshot)
        return True

    def merge_into(self, vertices: dict[JobVertexId, VertexState]) -> CarriedSinkData:
        """Move the carried data into the subtasks of a checkpoint being completed; returns
        what was merged (to put back if its metadata is not written). Data of a subtask the
        checkpoint lacks stays carried."""
        taken, self._carried = self._carried, {}
        merged_now: CarriedSinkData = {}
        for (vertex_id, subtask), handles in taken.items():
            snapshot = vertices[vertex_id].subtasks.get(subtask)
            if snapshot is None:
                self._carried[(vertex_id, subtask)] = handles
                continue
            merged = {p: list(h) for p, h in handles.items()}
            for position, new in snapshot.sink_pending.items():
                merged.setdefault(position, []).extend(new)
            vertices[vertex_id].subtasks[subtask] = replace(
                snapshot, sink_pending={p: tuple(h) for p, h in merged.items()}
            )
            merged_now[(vertex_id, subtask)] = handles
        return merged_now

    def _put_back(self, taken: CarriedSinkData) -> None:
        for key, handles in taken.items():
            carried = self._carried.setdefault(key, {})
            for position, staged in handles.items():
                carried.setdefault(position, []).extend(staged)

    @property
    def carried_handles(self) -> int:
        return sum(len(h) for c in self._carried.values() for h in c.values())

    def forget_carried(self) -> None:
        """A failover: the restore aborts what was carried."""
        self._carried = {}
        self._aborted = {}

    # unconfirmed -------------------------------------------------------------------------------

    def earlier_commits(self) -> tuple[SinkCommit, ...]:
        """The unconfirmed commits, oldest first (for the next checkpoint's metadata)."""
        return tuple(self._unconfirmed[i] for i in sorted(self._unconfirmed))

    def completed(self, metadata: CheckpointMetadata) -> None:
        """``metadata`` is complete: its commits are owed until confirmed."""
        for commit in metadata.commits():
            self._unconfirmed.setdefault(commit.checkpoint_id, commit)

    def confirmed(self, metadata: CheckpointMetadata) -> None:
        """The sinks committed ``metadata`` and the earlier commits it names."""
        for commit in metadata.commits():
            self._unconfirmed.pop(commit.checkpoint_id, None)

    @property
    def unconfirmed_ids(self) -> list[int]:
        return sorted(self._unconfirmed)

    def restored(self) -> None:
        """A restore commits the restored checkpoint with every commit it names."""
        self.forget_carried()
        self._unconfirmed = {}
