"""JobMasterGateway: what TaskExecutors, the Dispatcher and clients may ask a job's JobMaster.

The JobMaster is fenced: callers connect with its JobMasterId, so messages meant for an earlier
JobMaster of the same job are rejected. Besides the failures each method names, every ask may
fail with the failures every call may see (``millrace.rpc.rpc_gateway``): FencingTokenError
for a stale JobMasterId, RpcTimeoutError, RecipientUnreachableError (EndpointStoppedError once
the JobMaster stopped), GatewayMismatchError, and over TCP FrameSizeError and CodecError. No
builtin exception crosses this gateway.

Threading:
    Any thread; every call is executed on the JobMaster's main thread.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol

from millrace.rpc import FencedRpcGateway
from millrace.runtime.checkpoint.checkpoint_statistics import CheckpointStatistics
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.deployment import Acknowledge, SlotOffer, TaskExecutionState
from millrace.runtime.executiongraph.archived_execution_graph import ExecutionGraphInfo
from millrace.runtime.io.input_split import NextInputSplit
from millrace.runtime.job_result import JobDetails
from millrace.runtime.jobmaster.clock_service import WatermarksInfo
from millrace.runtime.jobmaster.job_change import JobChangeRequest, JobChangeResult
from millrace.types import (
    ExecutionAttemptId,
    JobVertexId,
    ResourceId,
    ResultPartitionId,
)

__all__ = ["JobMasterGateway"]


class JobMasterGateway(FencedRpcGateway, Protocol):
    """The gateway of one job's JobMaster (Flink's JobMasterGateway).

    Threading:
        Any thread; executed on the JobMaster's main thread.
    """

    def offer_slots(
        self,
        resource_id: ResourceId,
        task_manager_address: str,
        offers: list[SlotOffer],
        timeout: float | None = None,
    ) -> Future[list[SlotOffer]]:
        """A TaskManager offers slots the ResourceManager allocated to this job.

        Args:
            resource_id: The offering TaskManager.
            task_manager_address: Its TaskExecutor's address (the JobMaster connects to it).
            offers: The slots offered.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with the offers accepted: those the job requested and still
            needs (none once the job is no longer RUNNING).

        Raises:
            RecipientUnreachableError: via the future, if the JobMaster cannot reach the
                TaskExecutor at ``task_manager_address`` (the offers are not taken).
            GatewayMismatchError: via the future, if no TaskExecutor serves that address.
        """
        ...

    def update_task_execution_state(self, state: TaskExecutionState) -> Future[Acknowledge]:
        """UpdateTaskExecutionState: a task moved to ``state.state``.

        A report about an attempt the job does not run (one from before a restart, or none
        of this job) is acknowledged and ignored, as is a report that repeats the execution's
        state or follows its end. A FAILED report fails the job over under its restart
        strategy; a CANCELED one of a running job cancels the job.

        Args:
            state: The attempt, its new ExecutionState, its counters and, if FAILED, the
                root cause.

        Returns:
            Future completed with Acknowledge once the Execution is updated.

        Raises:
            IllegalExecutionStateTransitionError: via the future, if the ExecutionState
                machine forbids the move (a TaskExecutor bug; the Execution is unchanged).
        """
        ...

    def request_next_input_split(
        self,
        vertex_id: JobVertexId,
        attempt_id: ExecutionAttemptId,
        timeout: float | None = None,
    ) -> Future[NextInputSplit]:
        """RequestNextInputSplit -> NextInputSplit of a running source subtask.

        Args:
            vertex_id: The source vertex of the subtask.
            attempt_id: The subtask's execution attempt.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with the next split and its watermark bound; ``split`` is None
            when the subtask's splits are exhausted, or (``more_expected``) when an unbounded
            source has none yet.

        Raises:
            ExecutionGraphError: via the future, if ``attempt_id`` is not a running Execution
                of the job (an attempt from before a restart, one that ended, or none of this
                job) or not a subtask of the source ``vertex_id``.
            PipelineError: via the future, if the source's SplitEnumerator fails (its error is
                the cause).
        """
        ...

    def schedule_or_update_consumers(self, partition_id: ResultPartitionId) -> Future[Acknowledge]:
        """ScheduleOrUpdateConsumers: the partition produced its first event; deploy its
        consumers if they are not yet deployed (lazy scheduling).

        Args:
            partition_id: The producer's result partition (its attempt id).

        Returns:
            Future completed with Acknowledge; a partition of an attempt the job no longer
            runs, or a job that is not RUNNING, deploys nothing.
        """
        ...

    def request_job_details(self, timeout: float | None = None) -> Future[JobDetails]:
        """The job as the Dispatcher and REST show it.

        Args:
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with the job's JobDetails (status, vertices, splits, restarts).
        """
        ...

    def heartbeat_from_task_manager(self, resource_id: ResourceId) -> None:
        """A TaskManager holding slots of this job answers a heartbeat request (a tell;
        from a TaskManager the JobMaster does not watch, ignored)."""
        ...

    def acknowledge_checkpoint(
        self, attempt_id: ExecutionAttemptId, checkpoint_id: int, snapshot: TaskStateSnapshot
    ) -> None:
        """AcknowledgeCheckpoint: a task took its snapshot of ``checkpoint_id`` (a tell; one
        of an unknown attempt or of a checkpoint no longer pending is ignored, its sink data
        carried over if the checkpoint was aborted)."""
        ...

    def decline_checkpoint(
        self, attempt_id: ExecutionAttemptId, checkpoint_id: int, reason: str
    ) -> None:
        """DeclineCheckpoint: a task cannot take ``checkpoint_id``; it is aborted with
        ``reason`` in its history (a tell)."""
        ...

    def report_watermark(self, attempt_id: ExecutionAttemptId, watermark_ms: int) -> None:
        """A task's min clock advanced (a tell; the global clock service, seed 001; reports
        of former attempts are ignored)."""
        ...

    def trigger_savepoint(
        self, target_directory: str | None, cancel_job: bool, timeout: float | None = None
    ) -> Future[str]:
        """Take a savepoint into ``target_directory`` and, with ``cancel_job``, cancel the job
        once it is complete (Flink's stop with savepoint).

        Args:
            target_directory: Where the savepoint goes (resolved and confined by the
                Dispatcher); None: ``state.savepoints.dir``.
            cancel_job: Cancel the job once the savepoint is taken.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with the savepoint's directory.

        Raises:
            CheckpointError: via the future, if not every task runs, or the savepoint is
                declined, times out, is aborted by a failover or cannot be written.
        """
        ...

    def change_job(
        self, request: JobChangeRequest, timeout: float | None = None
    ) -> Future[JobChangeResult]:
        """Change the running job at a savepoint, state kept: replace a transform's function or
        set parallelisms (``millrace modify`` / ``rescale``; ``LiveJobChanges``).

        Args:
            request: The change.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with the JobChangeResult (timestamps, downtime) once the changed
            job runs; the job id stays the same.

        Raises:
            JobChangeError: via the future, if the job is BATCH or not RUNNING, a change is in
                progress, the request does not fit the job, or the changed job did not run.
            CheckpointError: via the future, if the savepoint fails (the job runs on unchanged).
        """
        ...

    def request_checkpoint_statistics(
        self, timeout: float | None = None
    ) -> Future[CheckpointStatistics]:
        """Counts, the latest checkpoints and their history (REST ``/jobs/{id}/checkpoints``).

        Args:
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with the job's CheckpointStatistics.
        """
        ...

    def request_job(self, timeout: float | None = None) -> Future[ExecutionGraphInfo]:
        """RequestJob: a snapshot of the ExecutionGraph with its exception history (Flink's
        ``requestJob`` -> ExecutionGraphInfo): subtasks, plan, failures, configuration and
        checkpoint details, for REST.

        Args:
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with the job's ExecutionGraphInfo (immutable).
        """
        ...

    def request_watermarks(self, timeout: float | None = None) -> Future[WatermarksInfo]:
        """The global min clock and every task's clock (seed 001).

        Args:
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with the WatermarksInfo.
        """
        ...

    def cancel(self, timeout: float | None = None) -> Future[Acknowledge]:
        """Cancel the job: every task is cancelled, the job ends CANCELED.

        Args:
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with Acknowledge once the cancellation started (a job already
            ended is left as it is).
        """
        ...
