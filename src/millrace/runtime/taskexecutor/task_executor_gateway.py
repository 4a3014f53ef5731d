"""TaskExecutorGateway: what the ResourceManager, JobMasters and consumer tasks may ask a
TaskManager's TaskExecutor."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol

from millrace.rpc import RpcGateway
from millrace.runtime.deployment import Acknowledge, TaskDeploymentDescriptor, TaskOperationResult
from millrace.runtime.io.partition_events import PartitionEvents
from millrace.types import AllocationId, ExecutionAttemptId, JobId, JobMasterId, ResultPartitionId

__all__ = ["TaskExecutorGateway"]


class TaskExecutorGateway(RpcGateway, Protocol):
    def request_slot(
        self,
        slot_index: int,
        job_id: JobId,
        allocation_id: AllocationId,
        job_master_address: str,
        job_master_id: JobMasterId,
        timeout: float | None = None,
    ) -> Future[Acknowledge]:
        """From the ResourceManager: allocate slot ``slot_index`` and offer it to the JobMaster.

        Fails with SlotAllocationError if the slot is taken by another allocation.
        """
        ...

    def submit_task(
        self, tdd: TaskDeploymentDescriptor, timeout: float | None = None
    ) -> Future[TaskOperationResult]:
        """SubmitTask: run a subtask in the slot named by ``tdd.allocation_id``."""
        ...

    def cancel_task(
        self, attempt_id: ExecutionAttemptId, timeout: float | None = None
    ) -> Future[TaskOperationResult]:
        """CancelTask: stop the attempt; it reports CANCELED once stopped."""
        ...

    def trigger_checkpoint(
        self,
        attempt_id: ExecutionAttemptId,
        checkpoint_id: int,
        timestamp_ms: int,
        timeout: float | None = None,
    ) -> Future[TaskOperationResult]:
        """TriggerCheckpoint of a source task: it snapshots at its next bundle boundary and
        sends a CheckpointBarrier downstream (seed 002). The reply says whether the task was
        found; the checkpoint's outcome comes as acknowledge_checkpoint to the JobMaster."""
        ...

    def free_slot(self, allocation_id: AllocationId, cause: str) -> None:
        """From the JobMaster: the job no longer needs the slot."""
        ...

    def release_partitions(self, job_id: JobId) -> None:
        """Drop the job's result partitions (its consumers are done)."""
        ...

    def heartbeat_from_resource_manager(self, resource_manager_id: str) -> None:
        """The ResourceManager asks for a heartbeat; the TaskExecutor answers with
        ``heartbeat_from_task_manager``."""
        ...

    def heartbeat_from_job_manager(self, job_id: JobId) -> None:
        """The JobMaster of ``job_id`` asks for a heartbeat; answered with its
        ``heartbeat_from_task_manager``."""
        ...

    def disconnect_job_manager(self, job_id: JobId, cause: str) -> None:
        """The JobMaster of ``job_id`` lets this TaskManager go (it declared it dead, or it
        stops): the job's tasks are failed, its partitions dropped and its slots freed."""
        ...

    def request_partition_events(
        self,
        partition_id: ResultPartitionId,
        subpartition: int,
        from_index: int,
        timeout: float | None = None,
    ) -> Future[PartitionEvents]:
        """Long poll of a consumer: events from ``from_index`` on, or none after the partition
        poll timeout. Fails with PartitionNotFoundError for an unknown partition."""
        ...
