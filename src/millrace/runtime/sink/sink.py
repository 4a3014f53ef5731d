"""Sinks with two-phase commit (Flink's FLIP-143 sink with a global committer).

Tasks write each fired result as *pending* data that nobody reads (a staged file), then
pre-commit at a checkpoint barrier: the sink makes what they wrote since the previous barrier
durable (``pre_commit``), and the task lists it in its acknowledgement. A pre-commit that fails
declines the checkpoint; the data stays staged and goes with the next one. Once the checkpoint
is complete (its metadata is durable), the JobMaster commits those pendings, and those of the
checkpoints aborted since the previous completed one: the data becomes visible atomically,
once. Commits are idempotent per ``(job, commit_id)``, so a commit replayed after a failure or
a restore is a no-op. Pending data that no completed checkpoint lists is aborted when the job
restores.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from millrace.types import ExecutionAttemptId, JobId

__all__ = ["Sink", "SinkWrite"]


@dataclass(frozen=True)
class SinkWrite:
    """What one ``write`` staged.

    Attributes:
        rows: Records written.
        pending: Handle of the staged data (e.g. a pending file's path), to be listed in the
            next checkpoint; None if nothing was staged (an empty table).
    """

    rows: int
    pending: str | None


class Sink(Protocol):
    """A sink connector.

    Threading:
        ``write`` on a task's thread; every other method in the JobMaster's I/O executor
        (blocking I/O is fine there).
    """

    def describe(self) -> str:
        """Short human description, e.g. ``parquet at /out/delays``."""
        ...

    def initialize_global(self, job_id: JobId) -> None:
        """Before the first deployment: create the target, clear an earlier run's output
        (overwrite mode) and any pending data of this job."""
        ...

    def write(
        self, table: Any, job_id: JobId, subtask: int, sequence: int, attempt_id: ExecutionAttemptId
    ) -> SinkWrite:
        """Stage ``table`` (``pyarrow.Table``) as pending data.

        Args:
            table: The rows.
            job_id: The job.
            subtask: The writing subtask.
            sequence: The subtask's write number, unique per attempt.
            attempt_id: The writing Execution attempt (zombies of failed attempts are told
                apart by it).
        """
        ...

    def pre_commit(self, job_id: JobId, checkpoint_id: int, pending: Sequence[str]) -> None:
        """Make ``pending`` durable before the checkpoint that lists it can complete (two-phase
        commit's first phase; Flink's ``preCommit``/``closeForCommit``): e.g. fsync the
        staged files. A sink without this method has nothing to do here.

        Args:
            job_id: The job.
            checkpoint_id: The checkpoint at whose barrier the task pre-commits.
            pending: Handles returned by ``write`` since the previous barrier (not empty).

        Raises:
            Exception: Anything: the task declines the checkpoint with the error as reason
                and keeps ``pending`` staged for the next checkpoint.

        Threading:
            The task's thread, at the barrier (the checkpoint waits for it).
        """
        ...

    def commit(self, job_id: JobId, commit_id: int, pending: Sequence[str]) -> None:
        """Make ``pending`` visible as one transaction; a no-op if ``commit_id`` of this job
        was committed before.

        Args:
            job_id: The job.
            commit_id: The checkpoint id the pendings belong to.
            pending: Handles returned by ``write`` and listed in that checkpoint.
        """
        ...

    def pending(self, job_id: JobId, attempt_ids: Collection[str]) -> list[str]:
        """Handles of the pending data written by ``attempt_ids`` (for the final commit of a
        bounded job: what its finishing tasks wrote after the last checkpoint)."""
        ...

    def abort(self, job_id: JobId, keep: Collection[str] = ()) -> None:
        """Drop every pending data of the job except ``keep`` (restore; failed or cancelled
        job)."""
        ...
