"""JobMasterGateway: what TaskExecutors, the Dispatcher and clients may ask a job's JobMaster.

The JobMaster is fenced: callers connect with its JobMasterId, so messages meant for an earlier
JobMaster of the same job are rejected.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol

from millrace.rpc import FencedRpcGateway
from millrace.runtime.checkpoint.checkpoint_statistics import CheckpointStatistics
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.deployment import Acknowledge, SlotOffer, TaskExecutionState
from millrace.runtime.io.input_split import NextInputSplit
from millrace.runtime.job_result import JobDetails
from millrace.runtime.jobmaster.clock_service import WatermarksInfo
from millrace.types import (
    ExecutionAttemptId,
    JobVertexId,
    ResourceId,
    ResultPartitionId,
)

__all__ = ["JobMasterGateway"]


class JobMasterGateway(FencedRpcGateway, Protocol):
    def offer_slots(
        self,
        resource_id: ResourceId,
        task_manager_address: str,
        offers: list[SlotOffer],
        timeout: float | None = None,
    ) -> Future[list[SlotOffer]]:
        """A TaskManager offers slots; the reply lists the accepted ones."""
        ...

    def update_task_execution_state(self, state: TaskExecutionState) -> Future[Acknowledge]:
        """UpdateTaskExecutionState. Fails with KeyError-like error for an unknown attempt."""
        ...

    def request_next_input_split(
        self,
        vertex_id: JobVertexId,
        attempt_id: ExecutionAttemptId,
        timeout: float | None = None,
    ) -> Future[NextInputSplit]:
        """RequestNextInputSplit -> NextInputSplit (split None when exhausted)."""
        ...

    def schedule_or_update_consumers(self, partition_id: ResultPartitionId) -> Future[Acknowledge]:
        """ScheduleOrUpdateConsumers: the partition produced its first event; deploy its
        consumers if they are not yet deployed (lazy scheduling)."""
        ...

    def request_job_details(self, timeout: float | None = None) -> Future[JobDetails]: ...

    def heartbeat_from_task_manager(self, resource_id: ResourceId) -> None:
        """A TaskManager holding slots of this job answers a heartbeat request."""
        ...

    def acknowledge_checkpoint(
        self, attempt_id: ExecutionAttemptId, checkpoint_id: int, snapshot: TaskStateSnapshot
    ) -> None:
        """AcknowledgeCheckpoint: a task took its snapshot of ``checkpoint_id``."""
        ...

    def decline_checkpoint(
        self, attempt_id: ExecutionAttemptId, checkpoint_id: int, reason: str
    ) -> None:
        """DeclineCheckpoint: a task cannot take ``checkpoint_id``; it is aborted."""
        ...

    def report_watermark(self, attempt_id: ExecutionAttemptId, watermark_ms: int) -> None:
        """A task's min clock advanced (the global clock service, seed 001)."""
        ...

    def trigger_savepoint(
        self, target_directory: str | None, cancel_job: bool, timeout: float | None = None
    ) -> Future[str]:
        """Take a savepoint into ``target_directory`` (default ``state.savepoints.dir``) and,
        with ``cancel_job``, cancel the job once it is complete.

        Returns:
            Future completed with the savepoint's directory; failed with CheckpointError if not
            every task runs or the savepoint is aborted.
        """
        ...

    def request_checkpoint_statistics(
        self, timeout: float | None = None
    ) -> Future[CheckpointStatistics]: ...

    def request_watermarks(self, timeout: float | None = None) -> Future[WatermarksInfo]:
        """The global min clock and every task's clock (seed 001)."""
        ...

    def cancel(self, timeout: float | None = None) -> Future[Acknowledge]:
        """Cancel the job: every task is cancelled, the job ends CANCELED."""
        ...
