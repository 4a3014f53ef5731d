"""Dispatcher: accepts jobs, starts one JobMaster per job, keeps the results (seed 003).

SubmitJob validates the JobGraph and starts a JobMaster endpoint for it; the Dispatcher watches
the JobMaster's result future, archives the final JobDetails, answers waiting clients and stops
the JobMaster.
"""

from __future__ import annotations

import logging
from concurrent.futures import Executor, Future

from millrace.config import Configuration
from millrace.errors import ConfigError, JobSubmissionError, MillraceError
from millrace.rpc import RpcEndpoint, RpcService
from millrace.rpc.future_utils import all_of
from millrace.runtime.checkpoint.checkpoint_statistics import CheckpointStatistics
from millrace.runtime.checkpoint.savepoint_targets import SavepointTargets
from millrace.runtime.deployment import Acknowledge
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.job_result import JobDetails, JobResult
from millrace.runtime.jobgraph import JobGraph
from millrace.runtime.jobmaster.clock_service import WatermarksInfo
from millrace.runtime.jobmaster.job_master import JobMaster
from millrace.runtime.jobmaster.job_master_gateway import JobMasterGateway
from millrace.types import JobId

__all__ = ["Dispatcher"]

logger = logging.getLogger(__name__)


class Dispatcher(RpcEndpoint, implements=(DispatcherGateway,)):
    """The cluster's entry point for jobs.

    Args:
        rpc_service: Service to run on.
        configuration: Cluster configuration handed to every JobMaster.
        resource_manager_address: The ResourceManager JobMasters request slots from.
        io_executor: Blocking work of JobMasters.
        endpoint_id: Endpoint id (default ``dispatcher``).

    Threading:
        Every method runs on the main thread.
    """

    def __init__(
        self,
        rpc_service: RpcService,
        configuration: Configuration,
        resource_manager_address: str,
        io_executor: Executor,
        endpoint_id: str = "dispatcher",
    ) -> None:
        super().__init__(rpc_service, endpoint_id)
        self._configuration = configuration
        self._rm_address = resource_manager_address
        self._io = io_executor
        self._job_masters: dict[JobId, JobMaster] = {}
        self._results: dict[JobId, JobResult] = {}
        self._waiting: dict[JobId, list[Future[JobResult]]] = {}
        self._savepoint_targets = SavepointTargets.from_configuration(configuration)

    def submit_job(self, job_graph: JobGraph, timeout: float | None = None) -> Acknowledge:
        job_id = job_graph.job_id
        if job_id in self._job_masters or job_id in self._results:
            raise JobSubmissionError(f"job {job_id} was already submitted")
        if not job_graph.vertices:
            raise JobSubmissionError(f"job {job_graph.name!r} has no vertices")
        if max(v.parallelism for v in job_graph.vertices) > job_graph.max_parallelism:
            raise JobSubmissionError(
                f"job {job_graph.name!r}: a parallelism exceeds max parallelism "
                f"{job_graph.max_parallelism}"
            )
        configuration = self._configuration.with_overrides(
            Configuration(job_graph.configuration).job_level()
        )
        try:
            configuration.validate()
        except ConfigError as error:
            raise JobSubmissionError(f"job {job_graph.name!r}: {error}", job_id) from error
        try:  # a graph the checks above let through may still not build (Flink wraps it too)
            job_master = JobMaster(
                self.rpc_service, job_graph, configuration, self._rm_address, self._io
            )
            job_master.start()
        except MillraceError:
            raise
        except Exception as error:
            raise JobSubmissionError(
                f"job {job_graph.name!r} cannot start: {type(error).__name__}: {error}", job_id
            ) from error
        self._job_masters[job_id] = job_master
        self.on_main_thread(
            job_master.result_future, lambda f: self._job_reached_terminal(job_id, f)
        )
        logger.info("submitted job %s (%s)", job_graph.name, job_id)
        return Acknowledge()

    def _job_reached_terminal(self, job_id: JobId, result: Future[JobResult]) -> None:
        self._results[job_id] = result.result()
        for waiter in self._waiting.pop(job_id, []):
            if not waiter.done():
                waiter.set_result(self._results[job_id])
        job_master = self._job_masters.pop(job_id, None)
        if job_master is not None:
            job_master.close_async()

    def request_job_result(
        self, job_id: JobId, timeout: float | None = None
    ) -> Future[JobResult] | JobResult:
        if job_id in self._results:
            return self._results[job_id]
        if job_id not in self._job_masters:
            raise JobSubmissionError(f"unknown job {job_id}")
        future: Future[JobResult] = Future()
        self._waiting.setdefault(job_id, []).append(future)
        return future

    def request_job_details(
        self, job_id: JobId, timeout: float | None = None
    ) -> Future[JobDetails] | JobDetails:
        if job_id in self._results:
            return self._results[job_id].details
        job_master = self._job_masters.get(job_id)
        if job_master is None:
            raise JobSubmissionError(f"unknown job {job_id}")
        return job_master.get_self_gateway(JobMasterGateway).request_job_details()

    def list_jobs(
        self, timeout: float | None = None
    ) -> list[JobDetails] | Future[list[JobDetails]]:
        done = [r.details for r in self._results.values()]
        running = [
            jm.get_self_gateway(JobMasterGateway).request_job_details()
            for jm in self._job_masters.values()
        ]
        reply: Future[list[JobDetails]] = Future()
        if not running:
            reply.set_result(done)
            return reply
        remaining = [len(running)]

        def one_done(_: Future[JobDetails]) -> None:
            remaining[0] -= 1
            if remaining[0] == 0:
                reply.set_result(done + [f.result() for f in running if f.exception() is None])

        for f in running:
            self.on_main_thread(f, one_done)
        return reply

    def cancel_job(self, job_id: JobId, timeout: float | None = None) -> Future[Acknowledge]:
        job_master = self._job_masters.get(job_id)
        if job_master is None:
            raise JobSubmissionError(f"no running job {job_id}")
        return job_master.get_self_gateway(JobMasterGateway).cancel()

    def _running_job_master(self, job_id: JobId) -> JobMasterGateway:
        job_master = self._job_masters.get(job_id)
        if job_master is None:
            raise JobSubmissionError(f"no running job {job_id}", job_id)
        return job_master.get_self_gateway(JobMasterGateway)

    def trigger_savepoint(
        self,
        job_id: JobId,
        target_directory: str | None = None,
        cancel_job: bool = False,
        timeout: float | None = None,
    ) -> Future[str]:
        # A client's target must lie under an allowed root (CheckpointError otherwise).
        target = self._savepoint_targets.resolve(target_directory) if target_directory else None
        return self._running_job_master(job_id).trigger_savepoint(
            target, cancel_job, timeout=timeout
        )

    def request_checkpoint_statistics(
        self, job_id: JobId, timeout: float | None = None
    ) -> Future[CheckpointStatistics]:
        return self._running_job_master(job_id).request_checkpoint_statistics()

    def request_watermarks(
        self, job_id: JobId, timeout: float | None = None
    ) -> Future[WatermarksInfo]:
        return self._running_job_master(job_id).request_watermarks()

    def on_stop(self) -> Future[None] | None:
        for job_master in list(self._job_masters.values()):
            job_master.get_self_gateway(JobMasterGateway).cancel()
        terminations = [jm.close_async() for jm in self._job_masters.values()]
        for waiters in self._waiting.values():
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_exception(JobSubmissionError("the Dispatcher stopped"))
        if not terminations:
            return None
        return all_of(terminations)
