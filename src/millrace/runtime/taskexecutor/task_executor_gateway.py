"""TaskExecutorGateway: what the ResourceManager, JobMasters and consumer tasks may ask a
TaskManager's TaskExecutor.

Besides the failures each method names, every ask may fail with the failures every call may see
(``millrace.rpc.rpc_gateway``): RpcTimeoutError, RecipientUnreachableError
(EndpointStoppedError once the TaskExecutor stopped), GatewayMismatchError, and over TCP
FrameSizeError and CodecError. No builtin exception crosses this gateway.

Threading:
    Any thread; every call is executed on the TaskExecutor's main thread.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol

from millrace.rpc import RpcGateway
from millrace.runtime.deployment import Acknowledge, TaskDeploymentDescriptor, TaskOperationResult
from millrace.runtime.io.partition_events import Ack, PartitionEvents
from millrace.types import AllocationId, ExecutionAttemptId, JobId, JobMasterId, ResultPartitionId

__all__ = ["TaskExecutorGateway"]


class TaskExecutorGateway(RpcGateway, Protocol):
    """The gateway of one TaskManager's TaskExecutor (Flink's TaskExecutorGateway).

    Threading:
        Any thread; executed on the TaskExecutor's main thread.
    """

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

        Args:
            slot_index: The slot, 0 to the TaskManager's slots - 1.
            job_id: The job the slot is for.
            allocation_id: The JobMaster's id of the request (allocating it again is a no-op).
            job_master_address: Where to offer the slot.
            job_master_id: The JobMaster's fencing token.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with Acknowledge once the slot is allocated; the offer follows
            (a slot the JobMaster does not accept, or cannot be offered, is freed again).

        Raises:
            SlotAllocationError: via the future, if the slot does not exist or holds another
                allocation.
        """
        ...

    def submit_task(
        self, tdd: TaskDeploymentDescriptor, timeout: float | None = None
    ) -> Future[TaskOperationResult]:
        """SubmitTask: run a subtask in the slot named by ``tdd.allocation_id``.

        Args:
            tdd: The deployment: the task, its slot, its operators, state and configuration.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with a TaskOperationResult: success once the task's thread
            started (it then reports its states with ``update_task_execution_state``), or
            not, with the reason, if the attempt already runs here.

        Raises:
            SlotAllocationError: via the future, if no slot of this TaskManager is allocated
                to ``tdd.allocation_id`` for ``tdd.job_id``.
            ConfigError: via the future, if the deployment's configuration is invalid.
        """
        ...

    def cancel_task(
        self, attempt_id: ExecutionAttemptId, timeout: float | None = None
    ) -> Future[TaskOperationResult]:
        """CancelTask: stop the attempt; it reports CANCELED once stopped.

        Args:
            attempt_id: The attempt to cancel.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with a TaskOperationResult: success once the cancellation
            started, or not if no such task runs here.
        """
        ...

    def trigger_checkpoint(
        self,
        attempt_id: ExecutionAttemptId,
        checkpoint_id: int,
        timestamp_ms: int,
        timeout: float | None = None,
    ) -> Future[TaskOperationResult]:
        """TriggerCheckpoint of a source task: it snapshots at its next bundle boundary and
        sends a CheckpointBarrier downstream (seed 002).

        Args:
            attempt_id: The source task.
            checkpoint_id: Strictly increasing id from the CheckpointCoordinator.
            timestamp_ms: The checkpoint's timestamp, epoch milliseconds.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with a TaskOperationResult saying whether the task was found;
            the checkpoint's outcome comes as ``acknowledge_checkpoint`` (or
            ``decline_checkpoint``) to the JobMaster.
        """
        ...

    def free_slot(self, allocation_id: AllocationId, cause: str) -> None:
        """From the JobMaster: the job no longer needs the slot; its tasks are cancelled and
        the ResourceManager is told the slot is free (a tell; an unknown allocation is
        ignored)."""
        ...

    def release_partitions(self, job_id: JobId) -> None:
        """Drop the job's result partitions (its consumers are done); parked pulls fail with
        PartitionNotFoundError (a tell)."""
        ...

    def heartbeat_from_resource_manager(self, resource_manager_id: str) -> None:
        """The ResourceManager asks for a heartbeat; the TaskExecutor answers with
        ``heartbeat_from_task_manager`` once registered (a tell)."""
        ...

    def heartbeat_from_job_manager(self, job_id: JobId) -> None:
        """The JobMaster of ``job_id`` asks for a heartbeat; answered with its
        ``heartbeat_from_task_manager`` (a tell; from the JobMaster of a job this TaskManager
        holds no slot for, ignored)."""
        ...

    def disconnect_job_manager(self, job_id: JobId, cause: str) -> None:
        """The JobMaster of ``job_id`` lets this TaskManager go (it declared it dead, or it
        stops): the job's tasks are failed, its partitions dropped and its slots freed (a
        tell)."""
        ...

    def request_partition_events(
        self,
        partition_id: ResultPartitionId,
        subpartition: int,
        from_index: int,
        timeout: float | None = None,
    ) -> Future[PartitionEvents]:
        """Long poll of a consumer: the events of one subpartition from ``from_index`` on.

        Args:
            partition_id: The producer's result partition.
            subpartition: The consumer's subpartition, 0 to the partition's subpartitions - 1.
            from_index: Index of the first event wanted, >= 0.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout`` (pass more than ``execution.partition-poll-timeout``).

        Returns:
            Future completed with the events from ``from_index`` on as soon as there are
            some, or with none after ``execution.partition-poll-timeout``.

        Raises:
            PartitionNotFoundError: via the future, if this TaskManager holds no such
                partition (released with its job, never made, or the TaskManager stopped), it
                has no such subpartition, or ``from_index`` is negative.
        """
        ...

    def acknowledge_partition_events(
        self, partition_id: ResultPartitionId, subpartition: int, ack: Ack
    ) -> None:
        """A consumer's Ack (seed 001): it has taken the events of its channel up to the
        AckRequest ``ack.sequence``; frees the channel's flow-control window (a tell; ignored
        for a partition this TaskManager does not hold, or of another session)."""
        ...
