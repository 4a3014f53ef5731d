"""JobMasterGateway: what TaskExecutors, the Dispatcher and clients may ask a job's JobMaster.

The JobMaster is fenced: callers connect with its JobMasterId, so messages meant for an earlier
JobMaster of the same job are rejected.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol

from millrace.rpc import FencedRpcGateway
from millrace.runtime.deployment import Acknowledge, SlotOffer, TaskExecutionState
from millrace.runtime.io.input_split import NextInputSplit
from millrace.runtime.job_result import JobDetails
from millrace.types import ExecutionAttemptId, JobVertexId, ResultPartitionId

__all__ = ["JobMasterGateway"]


class JobMasterGateway(FencedRpcGateway, Protocol):
    def offer_slots(
        self,
        resource_id: str,
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

    def heartbeat_from_task_manager(self, resource_id: str) -> None:
        """A TaskManager holding slots of this job answers a heartbeat request."""
        ...

    def cancel(self, timeout: float | None = None) -> Future[Acknowledge]:
        """Cancel the job: every task is cancelled, the job ends CANCELED."""
        ...
