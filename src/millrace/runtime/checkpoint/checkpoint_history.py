"""CheckpointHistory: the newest checkpoints of a job as REST shows them (Flink's checkpoint
history), one record per checkpoint, updated from IN_PROGRESS to COMPLETED or FAILED.

Threading:
    Plain state of the CheckpointCoordinator: the JobMaster's main thread only.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

__all__ = ["CheckpointHistory", "CheckpointRecord"]

_SHOWN = 10  # checkpoints kept in the history


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
    """

    checkpoint_id: int
    status: str
    is_savepoint: bool
    trigger_ms: int
    duration_ms: int = 0
    state_size_bytes: int = 0
    location: str = ""
    failure: str = ""


class CheckpointHistory:
    """The last ten checkpoints, oldest first."""

    def __init__(self) -> None:
        self._records: deque[CheckpointRecord] = deque(maxlen=_SHOWN)

    def started(self, checkpoint_id: int, is_savepoint: bool, trigger_ms: int) -> None:
        self._records.append(
            CheckpointRecord(checkpoint_id, "IN_PROGRESS", is_savepoint, trigger_ms)
        )

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
        record = CheckpointRecord(
            checkpoint_id, status, is_savepoint, trigger_ms, duration_ms, size, location, failure
        )
        kept = [r for r in self._records if r.checkpoint_id != checkpoint_id]
        self._records = deque([*kept, record], maxlen=_SHOWN)

    def records(self) -> list[CheckpointRecord]:
        return list(self._records)
