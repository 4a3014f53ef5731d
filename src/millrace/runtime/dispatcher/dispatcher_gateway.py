"""DispatcherGateway: job submission and queries (Flink's DispatcherGateway).

Besides the failures each method names, every ask may fail with the failures every call may see
(``millrace.rpc.rpc_gateway``): RpcTimeoutError, RecipientUnreachableError
(EndpointStoppedError once the Dispatcher stopped), GatewayMismatchError, and over TCP
FrameSizeError (a JobGraph above ``rpc.framesize``) and CodecError. A call that names a job the
Dispatcher does not know fails with JobSubmissionError. No builtin exception crosses this
gateway.

Threading:
    Any thread; every call is executed on the Dispatcher's main thread.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol

from millrace.rpc import RpcGateway
from millrace.runtime.checkpoint.checkpoint_statistics import CheckpointStatistics
from millrace.runtime.deployment import Acknowledge
from millrace.runtime.executiongraph.archived_execution_graph import ExecutionGraphInfo
from millrace.runtime.job_result import JobDetails, JobResult
from millrace.runtime.jobgraph import JobGraph
from millrace.runtime.jobmaster.clock_service import WatermarksInfo
from millrace.runtime.jobmaster.job_change import JobChangeRequest, JobChangeResult
from millrace.types import JobId

__all__ = ["ClusterConfigurationInfo", "DispatcherGateway"]


@dataclass(frozen=True)
class ClusterConfigurationInfo:
    """The JobManager's effective configuration as REST shows it.

    Attributes:
        entries: ``(key, value)`` pairs sorted by key, values as strings, secrets masked
            (``configuration_display.py``).
        log_directory: Absolute directory the JobManager process writes its log files to
            (``<io.tmp.dirs>/log``).
    """

    entries: tuple[tuple[str, str], ...]
    log_directory: str


class DispatcherGateway(RpcGateway, Protocol):
    """The gateway of the cluster's Dispatcher.

    Threading:
        Any thread; executed on the Dispatcher's main thread.
    """

    def submit_job(self, job_graph: JobGraph, timeout: float | None = None) -> Future[Acknowledge]:
        """SubmitJob: start a JobMaster for ``job_graph``.

        Args:
            job_graph: The job; its configuration applies over the cluster's for this job.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with Acknowledge once the job's JobMaster started.

        Raises:
            JobSubmissionError: via the future, if the job id was submitted before, the graph
                has no vertices or a parallelism above its max parallelism, its configuration
                is invalid, or its JobMaster cannot be built from it (the cause chained).
        """
        ...

    def request_job_result(self, job_id: JobId, timeout: float | None = None) -> Future[JobResult]:
        """SubmitJobWait's second half: the job's result once it is terminal.

        Args:
            job_id: The job.
            timeout: Seconds until the returned future fails with RpcTimeoutError; pass one
                longer than the job may run.

        Returns:
            Future completed with JobResultSuccess or JobResultFailure when the job reaches a
            terminal status (at once for a job that ended).

        Raises:
            JobSubmissionError: via the future, if the job is unknown, or the Dispatcher stops
                before the job ends.
        """
        ...

    def request_job_details(
        self, job_id: JobId, timeout: float | None = None
    ) -> Future[JobDetails]:
        """The job as REST and ``millrace list`` show it.

        Args:
            job_id: The job.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with the JobDetails of a running or ended job.

        Raises:
            JobSubmissionError: via the future, if the job is unknown.
        """
        ...

    def list_jobs(self, timeout: float | None = None) -> Future[list[JobDetails]]:
        """Every job, running and ended.

        Args:
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with the JobDetails of every ended job and of every running one
            whose JobMaster answered.
        """
        ...

    def cancel_job(self, job_id: JobId, timeout: float | None = None) -> Future[Acknowledge]:
        """Cancel a running job; it ends CANCELED.

        Args:
            job_id: The job.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with Acknowledge once the cancellation started.

        Raises:
            JobSubmissionError: via the future, if no such job runs.
        """
        ...

    def trigger_savepoint(
        self,
        job_id: JobId,
        target_directory: str | None = None,
        cancel_job: bool = False,
        timeout: float | None = None,
    ) -> Future[str]:
        """A savepoint of a running job (and its cancellation, with ``cancel_job``).

        Args:
            job_id: The job.
            target_directory: Where the savepoint goes, under ``state.savepoints.dir`` or one
                of ``state.savepoints.allowed-roots``; None: ``state.savepoints.dir``.
            cancel_job: Cancel the job once the savepoint is taken.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with the savepoint's directory.

        Raises:
            JobSubmissionError: via the future, if no such job runs.
            CheckpointError: via the future, if ``target_directory`` is not a valid path or
                URL or lies outside the allowed roots, or the savepoint cannot be taken (see
                ``JobMasterGateway.trigger_savepoint``).
        """
        ...

    def change_job(
        self, job_id: JobId, request: JobChangeRequest, timeout: float | None = None
    ) -> Future[JobChangeResult]:
        """A live change of a running job (``JobMasterGateway.change_job``).

        Args:
            job_id: The job.
            request: The change (a transform's new function, or a parallelism).
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with the JobChangeResult once the changed job runs.

        Raises:
            JobSubmissionError: via the future, if no such job runs.
            JobChangeError: via the future, if the change is refused or fails, and always
                under high availability (the JobGraph store would keep the submitted graph).
            CheckpointError: via the future, if its savepoint fails.
        """
        ...

    def request_checkpoint_statistics(
        self, job_id: JobId, timeout: float | None = None
    ) -> Future[CheckpointStatistics]:
        """Checkpoint counts, the latest checkpoints and their history of a running job.

        Args:
            job_id: The job.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with the job's CheckpointStatistics.

        Raises:
            JobSubmissionError: via the future, if no such job runs.
        """
        ...

    def request_watermarks(
        self, job_id: JobId, timeout: float | None = None
    ) -> Future[WatermarksInfo]:
        """The global min clock and every task's clock of a running job (seed 001).

        Args:
            job_id: The job.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with the job's WatermarksInfo.

        Raises:
            JobSubmissionError: via the future, if no such job runs.
        """
        ...

    def request_execution_graph_info(
        self, job_id: JobId, timeout: float | None = None
    ) -> Future[ExecutionGraphInfo]:
        """A job's ExecutionGraphInfo: its JobMaster's snapshot while it runs, the last one
        once it ended (Flink's requestExecutionGraphInfo).

        Args:
            job_id: The job.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with the ExecutionGraphInfo (for a job whose result was
            recovered from the JobResultStore, one holding only its JobDetails).

        Raises:
            JobSubmissionError: via the future, if the job is unknown.
        """
        ...

    def request_cluster_configuration(
        self, timeout: float | None = None
    ) -> Future[ClusterConfigurationInfo]:
        """The JobManager's effective configuration (secrets masked) and its log directory.

        Args:
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with the ClusterConfigurationInfo.
        """
        ...
