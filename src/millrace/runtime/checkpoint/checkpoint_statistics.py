"""CheckpointStatistics: what REST and the CLI show of a job's checkpoints."""

from __future__ import annotations

from dataclasses import dataclass, field

from millrace.runtime.checkpoint.checkpoint_history import CheckpointRecord

__all__ = ["CheckpointStatistics"]


@dataclass(frozen=True)
class CheckpointStatistics:
    """A job's checkpoints (Flink's GET /jobs/{id}/checkpoints, reduced).

    Attributes:
        interval_ms: Periodic checkpoint interval, ms (0: periodic checkpoints off).
        mode: EXACTLY_ONCE or AT_LEAST_ONCE.
        completed: Checkpoints and savepoints completed.
        failed: Checkpoints and savepoints aborted.
        in_progress: Checkpoints in flight.
        restored_from: Location of the checkpoint or savepoint the job last restored, or "".
        retained: Locations of the completed checkpoints kept, oldest first.
        history: The newest checkpoints, oldest first.
    """

    interval_ms: int
    mode: str
    completed: int
    failed: int
    in_progress: int
    restored_from: str = ""
    retained: list[str] = field(default_factory=list)
    history: list[CheckpointRecord] = field(default_factory=list)
