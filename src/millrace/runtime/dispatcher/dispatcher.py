"""Dispatcher: accepts jobs, starts one JobMaster per job, keeps the results (seed 003).

SubmitJob validates the JobGraph, persists it in the JobGraph store and starts a JobMaster
endpoint for it; the Dispatcher watches the JobMaster's result future, archives the final
JobDetails, answers waiting clients and stops the JobMaster.

With high availability (seed 003) the Dispatcher is one leadership term's: on start it recovers
every job of the JobGraph store that has no entry in the JobResultStore, each from its latest
completed checkpoint; a job reaching a terminal state is recorded as a dirty result, its HA data
removed, then its result marked clean. A Dispatcher that stops because its leadership was
revoked *suspends* its jobs: nothing is cancelled, aborted or cleaned, and the next leader
recovers them.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

from millrace.config import ClusterOptions, Configuration
from millrace.errors import ConfigError, JobChangeError, JobSubmissionError, MillraceError
from millrace.rpc import FencedRpcEndpoint, RpcService
from millrace.rpc.future_utils import all_of
from millrace.runtime.checkpoint.checkpoint_statistics import CheckpointStatistics
from millrace.runtime.checkpoint.savepoint_targets import SavepointTargets
from millrace.runtime.configuration_display import displayed_configuration
from millrace.runtime.deployment import Acknowledge
from millrace.runtime.dispatcher.dispatcher_gateway import (
    ClusterConfigurationInfo,
    DispatcherGateway,
)
from millrace.runtime.dispatcher.execution_graph_archive import (
    archived_from_details,
    archived_with_result,
)
from millrace.runtime.executiongraph.archived_execution_graph import ExecutionGraphInfo
from millrace.runtime.highavailability.high_availability_services import LeaderServices
from millrace.runtime.job_result import JobDetails, JobResult
from millrace.runtime.jobgraph import JobGraph
from millrace.runtime.jobmaster.clock_service import WatermarksInfo
from millrace.runtime.jobmaster.job_change import JobChangeRequest, JobChangeResult
from millrace.runtime.jobmaster.job_master import JobMaster
from millrace.runtime.jobmaster.job_master_gateway import JobMasterGateway
from millrace.types import DEFAULT_LEADER_SESSION_ID, JobId

__all__ = ["Dispatcher"]

logger = logging.getLogger(__name__)


class Dispatcher(FencedRpcEndpoint, implements=(DispatcherGateway,)):
    """The cluster's entry point for jobs.

    Args:
        rpc_service: Service to run on.
        configuration: Cluster configuration handed to every JobMaster.
        resource_manager_address: The ResourceManager JobMasters request slots from.
        io_executor: Blocking work of JobMasters and of the HA stores.
        leader: The leadership term's services (stores, fencing); None: no high availability.
            Its leader session is the DispatcherId, the fencing token every call must carry
            (``DEFAULT_LEADER_SESSION_ID`` without HA); another is refused (FencingTokenError).
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
        leader: LeaderServices | None = None,
        endpoint_id: str = "dispatcher",
    ) -> None:
        super().__init__(
            rpc_service,
            endpoint_id,
            leader.leader_session_id if leader is not None else DEFAULT_LEADER_SESSION_ID,
        )
        self._leader = leader
        self.suspended = False  # set before a revoked leader stops: its jobs are recovered
        self._configuration = configuration
        self._rm_address = resource_manager_address
        self._io = io_executor
        self._job_masters: dict[JobId, JobMaster] = {}
        self._persisting: set[JobId] = set()
        # Client calls that arrive before the recovery finished wait for it (HA only).
        self._recovered = leader is None
        self._before_recovery: list[tuple[Callable[[], object], Future[object]]] = []
        self._results: dict[JobId, JobResult] = {}
        self._archived: dict[JobId, Future[ExecutionGraphInfo]] = {}  # ended jobs' snapshots
        self._waiting: dict[JobId, list[Future[JobResult]]] = {}
        self._savepoint_targets = SavepointTargets.from_configuration(configuration)

    def submit_job(
        self, job_graph: JobGraph, timeout: float | None = None
    ) -> Future[Acknowledge] | Acknowledge:
        job_id = job_graph.job_id
        if job_id in self._job_masters or job_id in self._results or job_id in self._persisting:
            raise JobSubmissionError(f"job {job_id} was already submitted")
        configuration = self._validated(job_graph)
        if self._leader is None:
            self._start_job_master(job_graph, configuration)
            return Acknowledge()
        # Persisted before it runs (Flink's JobGraphStore): a new leader recovers it.
        self._persisting.add(job_id)
        reply: Future[Acknowledge] = Future()
        store = self._leader.job_graph_store()

        def persisted(f: Future[None]) -> None:
            self._persisting.discard(job_id)
            if f.exception() is not None:
                reply.set_exception(
                    JobSubmissionError(f"job {job_graph.name!r}: {f.exception()}", job_id)
                )
                return
            try:
                self._start_job_master(job_graph, configuration)
                reply.set_result(Acknowledge())
            except MillraceError as error:
                self._io.submit(store.remove, job_id)
                reply.set_exception(error)

        self.on_main_thread(self._io.submit(store.put, job_graph), persisted)
        return reply

    def _validated(self, job_graph: JobGraph) -> Configuration:
        job_id = job_graph.job_id
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
        return configuration

    def _start_job_master(self, job_graph: JobGraph, configuration: Configuration) -> None:
        job_id = job_graph.job_id
        try:  # a graph the checks above let through may still not build (Flink wraps it too)
            job_master = JobMaster(
                self.rpc_service,
                job_graph,
                configuration,
                self._rm_address,
                self._io,
                self._leader,
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

    # Recovery (high availability) --------------------------------------------------------------

    def on_start(self) -> None:
        if self._leader is not None:
            self.on_main_thread(self._io.submit(self._recoverable_jobs), self._recover)

    def _recoverable_jobs(self) -> tuple[list[JobGraph], dict[JobId, JobResult]]:
        """I/O thread: the job graphs of the stored jobs without a result, each set to resume
        from its latest completed checkpoint, and the results on record.

        A job with a result (dirty or clean) reached a globally terminal state: it is never
        started again, although its job graph may still be stored (its leader died before the
        clean-up, FLIP-194). The graphs are listed before any clean-up, as Flink's
        SessionDispatcherLeaderProcess skips the jobs of the recovered results; then the HA
        data of dirty results, and job graphs a clean-up left behind, are removed."""
        leader = self._leader
        assert leader is not None
        results = leader.job_result_store().results()
        store = leader.job_graph_store()
        graphs = []
        left_behind: set[JobId] = set()
        for job_id in store.job_ids():
            if job_id in results:
                logger.info(
                    "not recovering job %s: it already reached a globally terminal state (%s)",
                    job_id,
                    results[job_id][0].details.status.name,
                )
                left_behind.add(job_id)
                continue
            graph = store.recover(job_id)
            latest = leader.checkpoint_store(job_id).latest()
            if latest is not None:
                graph = dataclasses.replace(graph, savepoint_path=latest[1])
            graphs.append(graph)
        for job_id, (_, clean) in results.items():
            if not clean or job_id in left_behind:
                self._clean_up_high_availability(job_id)
        return graphs, {job_id: result for job_id, (result, _) in results.items()}

    def _recover(self, recovering: Future[tuple[list[JobGraph], dict[JobId, JobResult]]]) -> None:
        error = recovering.exception()
        if error is not None:
            # Without its jobs this leader must not lead: escalate (the process stops, and a
            # standby recovers them).
            self.on_fatal_error(error)
            return
        graphs, results = recovering.result()
        self._results.update(results)
        self._recovered = True
        for graph in graphs:
            logger.info(
                "recovering job %s (%s) from %s",
                graph.name,
                graph.job_id,
                graph.savepoint_path or "its start (no completed checkpoint)",
            )
            try:
                self._start_job_master(graph, self._validated(graph))
            except MillraceError as error:
                logger.error("job %s cannot be recovered: %s", graph.job_id, error)
        for call, reply in self._before_recovery:
            _complete_with(reply, call)
        self._before_recovery.clear()

    def _after_recovery(self, call: Callable[[], object]) -> Future[Any]:
        """Main thread: the reply of ``call`` once the recovered jobs are known."""
        reply: Future[object] = Future()
        self._before_recovery.append((call, reply))
        return reply

    def _clean_up_high_availability(self, job_id: JobId) -> None:
        """I/O thread: the job's HA data goes, then its result is marked clean (FLIP-194)."""
        leader = self._leader
        assert leader is not None
        leader.job_graph_store().remove(job_id)
        leader.checkpoint_store(job_id).shutdown()
        leader.job_result_store().mark_clean(job_id)

    def _record_result(self, result: JobResult) -> None:
        """I/O thread: a dirty entry first, so a new leader never runs the job again."""
        assert self._leader is not None
        self._leader.job_result_store().create_dirty(result)
        self._clean_up_high_availability(result.job_id)

    def _job_reached_terminal(self, job_id: JobId, result: Future[JobResult]) -> None:
        if self.suspended:  # leadership revoked: the job is the next leader's
            return
        self._results[job_id] = result.result()
        if self._leader is not None:
            recording = self._io.submit(self._record_result, result.result())
            recording.add_done_callback(functools.partial(_log_failure, job_id))
        for waiter in self._waiting.pop(job_id, []):
            if not waiter.done():
                waiter.set_result(self._results[job_id])
        job_master = self._job_masters.pop(job_id, None)
        if job_master is not None:  # its last snapshot is asked first: answered before it stops
            self._archive(job_id, job_master.get_self_gateway(JobMasterGateway).request_job())
            job_master.close_async()

    def _archive(self, job_id: JobId, archiving: Future[ExecutionGraphInfo]) -> None:
        """Keep the ended job's last snapshot, with its result; asked for before it arrives,
        the snapshot is answered once it does (from the result alone if the ask failed)."""
        result = self._results[job_id]
        archived: Future[ExecutionGraphInfo] = Future()
        self._archived[job_id] = archived

        def arrived(f: Future[ExecutionGraphInfo]) -> None:
            if f.exception() is None:
                archived.set_result(archived_with_result(f.result(), result))
            else:
                archived.set_result(archived_from_details(result))

        self.on_main_thread(archiving, arrived)

    def request_job_result(
        self, job_id: JobId, timeout: float | None = None
    ) -> Future[JobResult] | JobResult:
        if not self._recovered:
            return self._after_recovery(lambda: self.request_job_result(job_id))
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
        if not self._recovered:
            return self._after_recovery(lambda: self.request_job_details(job_id))
        if job_id in self._results:
            return self._results[job_id].details
        job_master = self._job_masters.get(job_id)
        if job_master is None:
            raise JobSubmissionError(f"unknown job {job_id}")
        return job_master.get_self_gateway(JobMasterGateway).request_job_details()

    def list_jobs(
        self, timeout: float | None = None
    ) -> list[JobDetails] | Future[list[JobDetails]]:
        if not self._recovered:
            return self._after_recovery(self.list_jobs)
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

    def change_job(
        self, job_id: JobId, request: JobChangeRequest, timeout: float | None = None
    ) -> Future[JobChangeResult]:
        if self._leader is not None:
            # the JobGraph store keeps the submitted graph: a new leader would run the old one
            raise JobChangeError(
                f"job {job_id}: modify and rescale are not supported with "
                "high-availability.type=zookeeper yet (a new leader would recover the "
                "JobGraph as submitted); take a savepoint and resubmit the changed job instead"
            )
        return self._running_job_master(job_id).change_job(request, timeout=timeout)

    def request_checkpoint_statistics(
        self, job_id: JobId, timeout: float | None = None
    ) -> Future[CheckpointStatistics]:
        return self._running_job_master(job_id).request_checkpoint_statistics()

    def request_watermarks(
        self, job_id: JobId, timeout: float | None = None
    ) -> Future[WatermarksInfo]:
        return self._running_job_master(job_id).request_watermarks()

    def request_execution_graph_info(
        self, job_id: JobId, timeout: float | None = None
    ) -> Future[ExecutionGraphInfo] | ExecutionGraphInfo:
        if not self._recovered:
            return self._after_recovery(lambda: self.request_execution_graph_info(job_id))
        job_master = self._job_masters.get(job_id)
        if job_master is not None:
            return job_master.get_self_gateway(JobMasterGateway).request_job()
        if job_id in self._archived:
            return self._archived[job_id]
        if job_id in self._results:  # recovered from the JobResultStore: no snapshot
            return archived_from_details(self._results[job_id])
        raise JobSubmissionError(f"unknown job {job_id}", job_id)

    def request_cluster_configuration(
        self, timeout: float | None = None
    ) -> ClusterConfigurationInfo:
        return ClusterConfigurationInfo(
            tuple(displayed_configuration(self._configuration)),
            str(Path(self._configuration.get(ClusterOptions.TMP_DIR)).resolve() / "log"),
        )

    def on_stop(self) -> Future[None] | None:
        """Without HA, running jobs are cancelled; a suspended Dispatcher (leadership revoked,
        or an HA JobManager shutting down) leaves them to the next leader."""
        if self._leader is not None:
            self.suspended = True
        for job_master in list(self._job_masters.values()):
            if self.suspended:
                job_master.suspend()
            else:
                job_master.get_self_gateway(JobMasterGateway).cancel()
        terminations = [jm.close_async() for jm in self._job_masters.values()]
        for waiters in self._waiting.values():
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_exception(
                        JobSubmissionError(
                            "the Dispatcher stopped"
                            + (
                                " (leadership revoked: ask the new leader)"
                                if self.suspended
                                else ""
                            )
                        )
                    )
        if not terminations:
            return None
        return all_of(terminations)


def _log_failure(job_id: JobId, recording: Future[None]) -> None:
    """Any thread: a result that could not be recorded (the job is recovered and ends again)."""
    if recording.exception() is not None:
        logger.warning("job %s: recording its result failed: %s", job_id, recording.exception())


def _complete_with(reply: Future[Any], call: Callable[[], object]) -> None:
    """Complete ``reply`` with what ``call`` returns: a value, a future's outcome, or its error."""
    try:
        value = call()
    except Exception as error:
        reply.set_exception(error)
        return
    if isinstance(value, Future):
        value.add_done_callback(
            lambda f: (
                reply.set_exception(f.exception())
                if f.exception() is not None
                else reply.set_result(f.result())
            )
        )
    else:
        reply.set_result(value)
