"""Scheduler: runs one job's ExecutionGraph (Flink's SchedulerNG / DefaultScheduler).

The JobMaster is the gateway in front of it; the Scheduler owns what the job *is*: the
ExecutionGraph and the job status (``executiongraph/job_status.py``), the sources'
SourceCoordinators, the CheckpointCoordinator, the SinkCommitter and deployment
(``ExecutionDeployer``). Failover is Flink's full failover under a RestartBackoffTimeStrategy
(RESTARTING, every execution cancelled, the latest checkpoint restored); in BATCH mode a failed
region runs again alone when it can (``BatchScheduling``). When every Execution FINISHED, the
last output is committed as the final checkpoint (``FinalCommit``). Blocking work runs
elsewhere; its outcome comes back through the ComponentMainThreadExecutor.

Threading:
    Main thread of the JobMaster only (``ComponentMainThreadExecutor``); public methods assert
    it.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Executor, Future

from millrace.config import Configuration, ExecutionOptions
from millrace.errors import ExecutionGraphError, describe
from millrace.rpc.main_thread_executor import ComponentMainThreadExecutor
from millrace.runtime.checkpoint.checkpoint_coordinator import CheckpointCoordinator
from millrace.runtime.checkpoint.checkpoint_settings import CheckpointSettings
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata, CheckpointStorage
from millrace.runtime.checkpoint.pending_checkpoint import CheckpointTarget
from millrace.runtime.checkpoint.state_assignment import StateAssignment
from millrace.runtime.deployment import TaskExecutionState
from millrace.runtime.executiongraph import Execution, ExecutionGraph, ExecutionState, JobStatus
from millrace.runtime.failover import restart_strategy_from
from millrace.runtime.io.input_split import NextInputSplit, SplitState
from millrace.runtime.job_result import JobDetails
from millrace.runtime.jobmaster.clock_service import GlobalClockService
from millrace.runtime.jobmaster.job_preparation import JobPreparer, PreparedJob
from millrace.runtime.jobmaster.sink_committer import SinkCommitter
from millrace.runtime.jobmaster.slot_pool import SlotPool
from millrace.runtime.scheduler.batch_scheduling import batch_scheduling
from millrace.runtime.scheduler.execution_deployer import ExecutionDeployer
from millrace.runtime.scheduler.final_commit import FinalCommit
from millrace.runtime.scheduler.job_views import checkpoint_targets, job_details, job_result
from millrace.runtime.scheduler.scheduler_context import SchedulerContext
from millrace.runtime.source.source_coordinator import SourceCoordinator, notify_committed
from millrace.runtime.source.split_discovery import SplitDiscovery
from millrace.types import (
    AllocationId,
    ExecutionAttemptId,
    JobVertexId,
    ResourceId,
    ResultPartitionId,
)

__all__ = ["Scheduler", "SchedulerContext"]

logger = logging.getLogger(__name__)


class Scheduler:
    """Schedules one job.

    Args:
        graph: The job's ExecutionGraph (status CREATED).
        configuration: Cluster configuration merged with the job's.
        main_thread: The JobMaster's main thread.
        io_executor: Runs split discovery and checkpoint storage I/O.
        preparer: Prepares the job (and each restart) in the I/O executor.
        committer: The job's SinkCommitter.
        storage: Checkpoint storage of the job.
        slots: The slots the job holds (the JobMaster fills it).
        job_master_address: Where the tasks report.
        task_configuration: The configuration every task is deployed with (no secrets).
        context: The JobMaster.

    Attributes:
        checkpoints: The job's CheckpointCoordinator (its context is the Scheduler).
        restarts: Restarts so far; clocks: the job's global min clock service (seed 001).
        assignment: The restored state the tasks deploy with (None: none restored).
    """

    def __init__(
        self,
        graph: ExecutionGraph,
        configuration: Configuration,
        main_thread: ComponentMainThreadExecutor,
        io_executor: Executor,
        preparer: JobPreparer,
        committer: SinkCommitter,
        storage: CheckpointStorage,
        slots: SlotPool,
        job_master_address: str,
        task_configuration: dict[str, object],
        context: SchedulerContext,
    ) -> None:
        self.graph = graph
        self.job_graph = graph.job_graph
        self._main_thread = main_thread
        self._io = io_executor
        self._preparer = preparer
        self._committer = committer
        self._context = context
        self.checkpoints = CheckpointCoordinator(
            self.job_graph,
            CheckpointSettings.from_configuration(configuration),
            storage,
            main_thread,
            io_executor,
            self,
        )
        self._deployer = ExecutionDeployer(
            graph, slots, main_thread, job_master_address, task_configuration, self
        )
        self._restart_strategy = restart_strategy_from(configuration)
        self._discovery = SplitDiscovery(
            main_thread,
            io_executor,
            configuration.get(ExecutionOptions.SOURCE_DISCOVERY_INTERVAL),
            lambda: self._sources,
            lambda: not self.graph.status.is_globally_terminal,
        )
        self._final_commit = FinalCommit(
            graph,
            committer,
            self.checkpoints,
            main_thread,
            self._restart_strategy,
            lambda: {v: tuple(s.split_ids()) for v, s in self._sources.items()},
            self._final_commit_done,
        )
        self._sources: dict[JobVertexId, SourceCoordinator] = {}
        self.assignment: StateAssignment | None = None
        self._batch = batch_scheduling(  # None in STREAMING mode
            configuration, self._deployer, self._restart_strategy, context, self
        )
        self._failure: str | None = None
        self._restart_scheduled = False
        self._finishing = False  # every Execution FINISHED: the final commit runs
        self._started = time.time()
        self._ended: float | None = None
        self.restarts = 0
        self.clocks = GlobalClockService()

    @property
    def status(self) -> JobStatus:
        return self.graph.status

    @property
    def sources(self) -> dict[JobVertexId, SourceCoordinator]:
        """The sources' coordinators (replaced at every restart)."""
        return self._sources

    # Life cycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """CREATED -> RUNNING: prepare the job (its savepoint, if any), then request slots."""
        self._main_thread.assert_running_in_main_thread()
        self.graph.transition_job(JobStatus.RUNNING)
        logger.info(
            "job %s (%s) RUNNING; %d slots required",
            self.job_graph.name,
            self.job_graph.job_id,
            self.job_graph.slots_required(),
        )
        preparing = self._preparer.prepare(None, self.job_graph.savepoint_path)
        self._main_thread.when_done(preparing, self._prepared)

    def stop(self) -> None:
        """The JobMaster stops: a job still running fails; the committer's queued work is
        finished, nothing new is accepted."""
        self._main_thread.assert_running_in_main_thread()
        self.checkpoints.stop("the JobMaster stopped")
        if not self.graph.status.is_globally_terminal:
            if self._finishing:
                self._final_commit.cancel()
                self.fail_job("the JobMaster stopped while committing the sinks")
            else:
                self.fail_job("the JobMaster stopped before the job ended")
            self._complete()
        self._committer.close()

    def _prepared(self, preparing: Future[PreparedJob]) -> None:
        restarting = self.graph.status is JobStatus.RESTARTING
        if self.graph.status is not JobStatus.RUNNING and not restarting:
            return
        error = preparing.exception()
        if error is not None:
            cause = f"preparing the job failed: {describe(error)}"
            if restarting:  # e.g. a sink's restore commit hit an outage: retry, under the strategy
                self.graph.transition_job(JobStatus.RUNNING)
                self._handle_failure(cause)
            else:
                self.fail_job(cause)
            self._maybe_complete()
            return
        prepared = preparing.result()
        self._sources = prepared.sources
        self.assignment = prepared.assignment
        if prepared.restored is not None:
            self.checkpoints.restore(prepared.restored)
            logger.info(
                "job %s: restoring checkpoint %d from %s",
                self.job_graph.name,
                prepared.restored.checkpoint_id,
                prepared.restored.location,
            )
        if any(not s.bounded for s in self._sources.values()):
            self._discovery.start()
        if restarting:
            self.graph.transition_job(JobStatus.RUNNING)
            logger.info("job %s: restart %d", self.job_graph.name, self.restarts)
        if self._batch is None:  # BATCH ignores checkpointing, as Flink does
            self.checkpoints.start()
        self._context.request_slots()

    # Deployment --------------------------------------------------------------------------------

    def slots_ready(self) -> None:
        """Every slot is held: deploy the sources (consumers follow their first event)."""
        self._main_thread.assert_running_in_main_thread()
        if self.graph.status is not JobStatus.RUNNING or self._finishing:
            return
        if self._batch is not None and self._batch.deploy_restarted():
            return  # a region restart's subtasks are deployed
        if any(e.state is not ExecutionState.CREATED for e in self.graph.executions()):
            return  # deployed already
        logger.info("job %s: all slots allocated; deploying sources", self.job_graph.name)
        self.clocks.reset(self.graph.executions())
        for jv in self.graph.vertices:
            if jv.job_vertex.is_source:
                self._deployer.deploy(jv, self.assignment)

    def schedule_or_update_consumers(self, partition_id: ResultPartitionId) -> None:
        """A producer's partition has its first event: deploy the consumers it completes."""
        self._main_thread.assert_running_in_main_thread()
        producer = self.graph.execution(ExecutionAttemptId(partition_id))
        if producer is None or self.graph.status is not JobStatus.RUNNING or self._batch:
            return  # BATCH: consumers follow their producers' end (BatchScheduling)
        for consumer in self._deployer.ready_consumers(producer.vertex.job_vertex.vertex_id):
            logger.info(
                "job %s: deploying %s (ScheduleOrUpdateConsumers)",
                self.job_graph.name,
                consumer.name,
            )
            self._deployer.deploy(consumer, self.assignment)

    def deployment_failed(self, execution: Execution, cause: str) -> None:
        self._handle_failure(f"{execution}: {cause}")
        self._maybe_complete()

    def cancel_failed(self, execution: Execution, cause: str) -> None:
        self._maybe_complete()

    def task_manager_unreachable(self, resource_id: ResourceId, cause: str) -> None:
        self._context.release_task_manager(resource_id, cause)

    # Task states and splits --------------------------------------------------------------------

    def update_task_execution_state(self, state: TaskExecutionState) -> None:
        """UpdateTaskExecutionState: move the Execution, and react to a failure or a cancel."""
        self._main_thread.assert_running_in_main_thread()
        execution = self.graph.execution(state.attempt_id)
        if execution is None:  # an attempt from before a restart
            logger.debug("ignoring %s of a former attempt %s", state.state, state.attempt_id)
            return
        if state.metrics is not None:
            execution.metrics = state.metrics
        if execution.state is state.state or execution.state.is_terminal:
            return
        target = state.state
        if execution.state is ExecutionState.CANCELING:
            if not target.is_terminal:
                return  # a late INITIALIZING/RUNNING of a task being cancelled
            if target is ExecutionState.FINISHED:
                target = ExecutionState.CANCELED  # it ended before the cancel reached it
        elif target is ExecutionState.CANCELED:
            execution.transition_to(ExecutionState.CANCELING)
        execution.transition_to(target)
        if target is ExecutionState.FINISHED and self._batch is not None:
            self._batch.producer_finished()
        if target is ExecutionState.FAILED:
            execution.failure = state.error or "unknown error"
            self._handle_failure(f"{execution.vertex.task_name} failed: {execution.failure}")
        elif (
            target is ExecutionState.CANCELED
            and self._failure is None
            and self.graph.status is not JobStatus.RESTARTING
        ):
            self.fail_job(f"{execution.vertex.task_name} was cancelled", JobStatus.CANCELLING)
        self._maybe_complete()

    def next_input_split(
        self, vertex_id: JobVertexId, attempt_id: ExecutionAttemptId
    ) -> NextInputSplit:
        """RequestNextInputSplit of a running source subtask.

        Args:
            vertex_id: The source vertex the subtask belongs to.
            attempt_id: The subtask's execution attempt.

        Returns:
            The next split for the subtask (none when its splits are exhausted or, for an
            unbounded source, none yet).

        Raises:
            ExecutionGraphError: If ``attempt_id`` is not a running Execution of this job (an
                attempt from before a restart, one that ended, or none of this job) or not a
                subtask of the source vertex ``vertex_id``.
            PipelineError: If the source's SplitEnumerator fails; its error is the cause.
        """
        self._main_thread.assert_running_in_main_thread()
        execution = self.graph.running_execution(attempt_id)
        vertex = execution.vertex
        source = self._sources.get(vertex_id)
        if source is None or vertex.job_vertex.vertex_id != vertex_id:
            raise ExecutionGraphError(
                self.job_graph.job_id, attempt_id, f"not a subtask of source {vertex_id}"
            )
        return source.next_split(vertex.subtask_index, vertex.job_vertex.parallelism)

    # Checkpoints (the CheckpointCoordinator's context) -----------------------------------------

    def checkpoint_targets(self) -> list[CheckpointTarget] | None:
        """Every Execution with its trigger (sources), or None unless all of them RUN."""
        if self.graph.status is not JobStatus.RUNNING or self._finishing:
            return None
        return checkpoint_targets(self.graph, self._deployer.gateway_of)

    def checkpoint_completed(self, metadata: CheckpointMetadata) -> None:
        """Commit the sinks of a complete checkpoint; a failed commit fails over (the restore
        commits it with the latest checkpoint, which names it)."""
        committing = self._committer.commit(metadata)

        def committed(f: Future[None]) -> None:
            if f.exception() is None:
                self.checkpoints.commit_confirmed(metadata)
                notify_committed(self._sources, metadata)
            else:
                self._handle_failure(
                    f"committing checkpoint {metadata.checkpoint_id} failed: "
                    f"{describe(f.exception())}"
                )
                self._maybe_complete()

        self._main_thread.when_done(committing, committed)

    def restored_finished_splits(self, vertex_id: JobVertexId) -> tuple[str, ...]:
        restored = self.assignment.sources.get(vertex_id) if self.assignment else None
        return tuple(sorted(restored.finished)) if restored is not None else ()

    def unassigned_splits(self, vertex_id: JobVertexId) -> tuple[SplitState, ...]:
        source = self._sources.get(vertex_id)
        return source.unassigned_restored() if source is not None else ()

    @property
    def restored_checkpoint(self) -> int | None:
        """Id of the checkpoint the job last restored, if any."""
        return self.assignment.checkpoint_id if self.assignment is not None else None

    # Failing, cancelling, failover -------------------------------------------------------------

    def cancel(self) -> None:
        """The user cancels the job."""
        self._main_thread.assert_running_in_main_thread()
        if not self.graph.status.is_globally_terminal:
            self.fail_job("cancelled by the user", JobStatus.CANCELLING)
            self._maybe_complete()

    def fail_job(self, cause: str, status: JobStatus = JobStatus.FAILING) -> None:
        """Give up the job: record the first cause and cancel every running Execution."""
        self._main_thread.assert_running_in_main_thread()
        graph = self.graph
        if graph.status in (JobStatus.FAILING, JobStatus.CANCELLING) or (
            graph.status.is_globally_terminal
        ):
            return
        logger.info("job %s %s: %s", self.job_graph.name, status.name, cause)
        self._failure = cause
        graph.transition_job(status)
        self.checkpoints.stop(f"job {status.name}")
        self._deployer.cancel_all()

    def fail(self, cause: str) -> None:
        """The job cannot go on (no slots in time, no ResourceManager): it fails, and ends once
        its Executions have."""
        self._main_thread.assert_running_in_main_thread()
        if self.graph.status in (JobStatus.RUNNING, JobStatus.RESTARTING):
            self.fail_job(cause)
            self._maybe_complete()

    def task_manager_lost(
        self, resource_id: ResourceId, allocations: set[AllocationId], cause: str
    ) -> None:
        """A TaskManager holding ``allocations`` of the job is gone: its Executions FAIL and the
        job fails over."""
        self._main_thread.assert_running_in_main_thread()
        failed = False
        for execution in self.graph.executions():
            if execution.allocation_id in allocations and not execution.state.is_terminal:
                execution.failure = f"TaskManager {resource_id} lost ({cause})"
                execution.transition_to(ExecutionState.FAILED)
                failed = True
        if failed or allocations:
            self._handle_failure(f"TaskManager {resource_id} lost ({cause})")
        self._maybe_complete()

    def _handle_failure(self, cause: str) -> None:
        """Restart the whole job from its latest checkpoint if the restart strategy allows,
        else fail it (Flink's full failover)."""
        if self.graph.status is not JobStatus.RUNNING or self._finishing:
            return  # one restart covers failures that happen while cancelling
        self._restart_strategy.notify_failure(self._main_thread.clock.monotonic())
        if not self._restart_strategy.can_restart():
            self.fail_job(f"{cause} (no restart left: {self._restart_strategy!r})")
            return
        if self._batch is not None and self._batch.restart_regions(cause):
            return
        logger.warning(
            "job %s: %s; restarting (%r)", self.job_graph.name, cause, self._restart_strategy
        )
        self.graph.transition_job(JobStatus.RESTARTING)
        self.checkpoints.stop("the job restarts")
        self._deployer.cancel_all()

    def _schedule_restart(self) -> None:
        if not self._restart_scheduled:
            self._restart_scheduled = True
            self._main_thread.schedule(self._restart, self._restart_strategy.restart_delay())

    def _restart(self) -> None:
        self._restart_scheduled = False
        if self.graph.status is not JobStatus.RESTARTING:
            return
        if self.checkpoints.finalizing:  # a complete checkpoint is being written: restore it
            self._schedule_restart()
            return
        self.restarts += 1
        for gateway in self._deployer.held_gateways():
            gateway.release_partitions(self.job_graph.job_id)
        self.graph.reset_for_restart()
        self._deployer.reset()
        latest = self.checkpoints.latest
        self._main_thread.when_done(self._preparer.prepare(latest, None), self._prepared)

    # Completion --------------------------------------------------------------------------------

    def _maybe_complete(self) -> None:
        graph = self.graph
        if graph.status.is_globally_terminal:
            return
        if graph.status is JobStatus.RUNNING and graph.all_finished():
            if not self._finishing:
                self._finishing = True
                self.checkpoints.stop("the job finished")
                self._final_commit.start()
        elif graph.status is JobStatus.RESTARTING:
            if all(e.state.is_terminal for e in graph.executions()):
                self._schedule_restart()
        elif graph.status is not JobStatus.RUNNING and all(
            e.state.is_terminal for e in graph.executions()
        ):
            graph.transition_job(graph.status.ends_as)
            self._complete()

    def _final_commit_done(self, failure: str | None) -> None:
        if self.graph.status is not JobStatus.RUNNING:
            return  # stopped meanwhile
        if failure is None:
            self.graph.transition_job(JobStatus.FINISHED)
        else:
            self._failure = failure
            logger.info("job %s FAILED: %s", self.job_graph.name, failure)
            self.graph.transition_job(JobStatus.FAILED)
        self._complete()

    def _complete(self) -> None:
        """The job is terminal: keep what a later run may restore, publish the result."""
        if self._ended is not None:
            return
        self._ended = time.time()
        self.checkpoints.stop("the job ended")
        graph = self.graph
        if not graph.status.is_globally_terminal:
            graph.transition_job(graph.status.ends_as)
        if graph.status is not JobStatus.FINISHED:
            self._committer.abort(keep=self.checkpoints.retained())
        result = job_result(graph, self.details(), self._failure)
        logger.info("job %s %s in %.2f s", self.job_graph.name, graph.status.name, result.duration)
        self._context.job_terminated(result)

    def details(self) -> JobDetails:
        """The job as the Dispatcher and REST show it."""
        return job_details(
            self.graph,
            self._sources.values(),
            self._started,
            self._ended or time.time(),
            self.restarts + (self._batch.region_restarts if self._batch else 0),
            self.checkpoints.counts["completed"],
        )
