"""DispatcherGateway: job submission and queries (Flink's DispatcherGateway)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol

from millrace.rpc import RpcGateway
from millrace.runtime.checkpoint.checkpoint_statistics import CheckpointStatistics
from millrace.runtime.deployment import Acknowledge
from millrace.runtime.job_result import JobDetails, JobResult
from millrace.runtime.jobgraph import JobGraph
from millrace.runtime.jobmaster.clock_service import WatermarksInfo
from millrace.types import JobId

__all__ = ["DispatcherGateway"]


class DispatcherGateway(RpcGateway, Protocol):
    def submit_job(self, job_graph: JobGraph, timeout: float | None = None) -> Future[Acknowledge]:
        """SubmitJob: start a JobMaster for ``job_graph``.

        Fails with JobSubmissionError if the job id is taken or the graph is invalid.
        """
        ...

    def request_job_result(self, job_id: JobId, timeout: float | None = None) -> Future[JobResult]:
        """Completes when the job reaches a terminal status (pass a long ``timeout``)."""
        ...

    def request_job_details(
        self, job_id: JobId, timeout: float | None = None
    ) -> Future[JobDetails]: ...

    def list_jobs(self, timeout: float | None = None) -> Future[list[JobDetails]]: ...

    def cancel_job(self, job_id: JobId, timeout: float | None = None) -> Future[Acknowledge]: ...

    def trigger_savepoint(
        self,
        job_id: JobId,
        target_directory: str | None = None,
        cancel_job: bool = False,
        timeout: float | None = None,
    ) -> Future[str]:
        """A savepoint of a running job (and its cancellation, with ``cancel_job``).

        Returns:
            Future completed with the savepoint's directory; failed with JobSubmissionError for
            an unknown or ended job, CheckpointError if ``target_directory`` lies outside
            ``state.savepoints.dir`` and ``state.savepoints.allowed-roots`` or the savepoint
            cannot be taken.
        """
        ...

    def request_checkpoint_statistics(
        self, job_id: JobId, timeout: float | None = None
    ) -> Future[CheckpointStatistics]: ...

    def request_watermarks(
        self, job_id: JobId, timeout: float | None = None
    ) -> Future[WatermarksInfo]: ...
