"""CheckpointHistory: the newest checkpoints of a job as REST shows them (Flink's checkpoint
history), one record per checkpoint, updated from IN_PROGRESS to COMPLETED or FAILED.

Threading:
    Plain state of the CheckpointCoordinator: the JobMaster's main thread only.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from millrace.types import JobVertexId

__all__ = ["CheckpointHistory", "CheckpointRecord", "CheckpointTaskStatistics"]

_SHOWN = 10  # checkpoints kept in the history


@dataclass(frozen=True)
class CheckpointTaskStatistics:
    """One JobVertex's part of a checkpoint (Flink's TaskCheckpointStatistics).

    Attributes:
        vertex_id: The JobVertex.
        num_subtasks: Its subtasks the checkpoint waits for.
        num_acknowledged: Those that acknowledged it.
        latest_ack_ms: Epoch ms of the latest acknowledgement (0: none yet).
        state_size_bytes: Bytes of keyed state its subtasks acknowledged.
    """

    vertex_id: JobVertexId
    num_subtasks: int
    num_acknowledged: int = 0
    latest_ack_ms: int = 0
    state_size_bytes: int = 0


@dataclass(frozen=True)
class CheckpointRecord:
    """One line of the checkpoint history (REST).

    Attributes:
        checkpoint_id: The checkpoint.
        status: IN_PROGRESS, COMPLETED or FAILED.
        is_savepoint: Whether a user asked for it.
        trigger_ms: Trigger time, epoch ms.
        duration_ms: Trigger to completion or failure, ms (0 while in progress).
        state_size_bytes: Bytes of keyed state.
        location: Its directory, once complete.
        failure: Why it failed.
        tasks: Per JobVertex acknowledgements, in the job's vertex order.
    """

    checkpoint_id: int
    status: str
    is_savepoint: bool
    trigger_ms: int
    duration_ms: int = 0
    state_size_bytes: int = 0
    location: str = ""
    failure: str = ""
    tasks: tuple[CheckpointTaskStatistics, ...] = ()

    @property
    def latest_ack_ms(self) -> int:
        """Epoch ms of the latest acknowledgement of any task (0: none)."""
        return max((t.latest_ack_ms for t in self.tasks), default=0)


class CheckpointHistory:
    """The last ten checkpoints, oldest first."""

    def __init__(self) -> None:
        self._records: deque[CheckpointRecord] = deque(maxlen=_SHOWN)

    def started(
        self,
        checkpoint_id: int,
        is_savepoint: bool,
        trigger_ms: int,
        vertices: Iterable[JobVertexId] = (),
    ) -> None:
        """Checkpoint ``checkpoint_id`` was triggered; it waits for one task per entry of
        ``vertices`` (a vertex id per subtask)."""
        subtasks: dict[JobVertexId, int] = {}
        for vertex_id in vertices:
            subtasks[vertex_id] = subtasks.get(vertex_id, 0) + 1
        tasks = tuple(CheckpointTaskStatistics(v, n) for v, n in subtasks.items())
        self._records.append(
            CheckpointRecord(checkpoint_id, "IN_PROGRESS", is_savepoint, trigger_ms, tasks=tasks)
        )

    def acknowledged(
        self, checkpoint_id: int, vertex_id: JobVertexId, state_size_bytes: int, ack_ms: int
    ) -> None:
        """A subtask of ``vertex_id`` acknowledged ``checkpoint_id`` at ``ack_ms`` (epoch)."""
        for i, record in enumerate(self._records):
            if record.checkpoint_id == checkpoint_id:
                tasks = tuple(
                    dataclasses.replace(
                        t,
                        num_acknowledged=t.num_acknowledged + 1,
                        latest_ack_ms=max(t.latest_ack_ms, ack_ms),
                        state_size_bytes=t.state_size_bytes + state_size_bytes,
                    )
                    if t.vertex_id == vertex_id
                    else t
                    for t in record.tasks
                )
                self._records[i] = dataclasses.replace(record, tasks=tasks)
                return

    def ended(
        self,
        checkpoint_id: int,
        status: str,
        duration_ms: int,
        size: int = 0,
        location: str = "",
        failure: str = "",
    ) -> None:
        """Checkpoint ``checkpoint_id`` ended ``status`` (COMPLETED or FAILED)."""
        started = next((r for r in self._records if r.checkpoint_id == checkpoint_id), None)
        is_savepoint = started.is_savepoint if started is not None else False
        trigger_ms = started.trigger_ms if started is not None else 0
        tasks = started.tasks if started is not None else ()
        record = CheckpointRecord(
            checkpoint_id,
            status,
            is_savepoint,
            trigger_ms,
            duration_ms,
            size,
            location,
            failure,
            tasks,
        )
        kept = [r for r in self._records if r.checkpoint_id != checkpoint_id]
        self._records = deque([*kept, record], maxlen=_SHOWN)

    def records(self) -> list[CheckpointRecord]:
        return list(self._records)
