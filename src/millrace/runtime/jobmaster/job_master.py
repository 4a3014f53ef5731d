"""JobMaster: runs one job — slots, deployment, state updates, splits, checkpoints, failover.

Life of a job (seed 000, 003): the JobMaster prepares the job in its I/O executor (loads the
source and sink connectors, discovers splits, restores a savepoint if asked), requests
``slots_required`` slots from the ResourceManager and accepts the TaskManagers' offers. With all
slots it deploys every source subtask (SubmitTask); a consumer vertex is deployed when one of
its producers announces its first event (ScheduleOrUpdateConsumers). Subtask i of every vertex
runs in slot i (slot sharing). Its CheckpointCoordinator checkpoints the running job; each
completed checkpoint's staged sink data is committed by the SinkCommitter. When every Execution
FINISHED, the last staged data is committed and the job FINISHES. When a task fails or a
TaskManager is lost, the restart strategy decides: the job restarts from its latest completed
checkpoint (sources rewind, keyed state and watermarks are restored, uncommitted sink data is
aborted), or FAILS with the root cause.
"""

from __future__ import annotations

import functools
import logging
import shutil
import time
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

from millrace.config import (
    CheckpointingOptions,
    ClusterOptions,
    Configuration,
    ExecutionOptions,
    HeartbeatOptions,
)
from millrace.errors import CheckpointError, RecipientUnreachableError, SlotAllocationError
from millrace.rpc import FencedRpcEndpoint, RpcService
from millrace.runtime.checkpoint.checkpoint_coordinator import (
    CheckpointCoordinator,
    CheckpointSettings,
    CheckpointTarget,
)
from millrace.runtime.checkpoint.checkpoint_statistics import CheckpointStatistics
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata, CheckpointStorage
from millrace.runtime.checkpoint.state_assignment import StateAssignment
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.deployment import (
    Acknowledge,
    SlotOffer,
    TaskExecutionState,
    TaskOperationResult,
)
from millrace.runtime.executiongraph import (
    Execution,
    ExecutionGraph,
    ExecutionJobVertex,
    ExecutionState,
    JobStatus,
)
from millrace.runtime.failover import restart_strategy_from
from millrace.runtime.heartbeat import HeartbeatManager
from millrace.runtime.io.input_split import InputSplit, NextInputSplit, SplitState
from millrace.runtime.job_result import (
    JobDetails,
    JobResult,
    JobResultFailure,
    JobResultSuccess,
    VertexDetails,
)
from millrace.runtime.jobgraph import JobGraph
from millrace.runtime.jobmaster.clock_service import GlobalClockService, WatermarksInfo
from millrace.runtime.jobmaster.job_master_gateway import JobMasterGateway
from millrace.runtime.jobmaster.job_preparation import PreparedJob, prepare_job
from millrace.runtime.jobmaster.sink_committer import SinkCommitter, SinkKey
from millrace.runtime.jobmaster.slot_pool import AllocatedSlot, SlotPool
from millrace.runtime.jobmaster.task_deployment import task_deployment_descriptor
from millrace.runtime.resourcemanager.resource_manager_gateway import ResourceManagerGateway
from millrace.runtime.source.source_coordinator import SourceCoordinator
from millrace.runtime.taskexecutor.task_executor_gateway import TaskExecutorGateway
from millrace.types import (
    Address,
    AllocationId,
    ExecutionAttemptId,
    JobVertexId,
    ResultPartitionId,
    new_id,
)

__all__ = ["JobMaster"]

logger = logging.getLogger(__name__)


class JobMaster(FencedRpcEndpoint, implements=(JobMasterGateway,)):
    """The master of one job.

    Args:
        rpc_service: Service to run on.
        job_graph: The submitted job.
        configuration: Cluster configuration merged with the job's.
        resource_manager_address: Where to request slots.
        io_executor: Runs blocking work (split discovery, checkpoint metadata, preparation).

    Attributes:
        result_future: Completed with the JobResult when the job reaches a terminal status.

    Threading:
        Gateway methods and callbacks run on the main thread; blocking work in ``io_executor``
        and the SinkCommitter's thread.
    """

    def __init__(
        self,
        rpc_service: RpcService,
        job_graph: JobGraph,
        configuration: Configuration,
        resource_manager_address: str,
        io_executor: Executor,
    ) -> None:
        self.job_master_id = new_id()
        super().__init__(rpc_service, f"jobmaster-{job_graph.job_id[:12]}", self.job_master_id)
        self.job_graph = job_graph
        self.execution_graph = ExecutionGraph(job_graph)
        self.result_future: Future[JobResult] = Future()
        self._configuration = configuration
        self._rm_address = resource_manager_address
        self._io = io_executor
        self._resource_manager: ResourceManagerGateway | None = None
        self._sources: dict[JobVertexId, SourceCoordinator] = {}
        self._assignment: StateAssignment | None = None
        self._slot_pool = SlotPool()
        self._deployed_vertices: set[JobVertexId] = set()
        self._start = time.time()
        self._end: float | None = None
        self._failure: str | None = None
        self._working_dir = (
            Path(configuration.get(ClusterOptions.TMP_DIR)).resolve() / "jobs" / job_graph.job_id
        )
        self._restart_strategy = restart_strategy_from(configuration)
        self.restarts = 0
        self._restart_scheduled = False
        self._discovery_interval = configuration.get(ExecutionOptions.SOURCE_DISCOVERY_INTERVAL)
        self._heartbeats = HeartbeatManager(
            self.clock,
            self.schedule_run_async,
            self,
            configuration.get(HeartbeatOptions.INTERVAL),
            configuration.get(HeartbeatOptions.PAUSE),
            configuration.get(HeartbeatOptions.THRESHOLD),
        )
        self._storage = CheckpointStorage(
            configuration.get(CheckpointingOptions.CHECKPOINTS_DIR),
            configuration.get(CheckpointingOptions.SAVEPOINTS_DIR),
        )
        self.checkpoints = CheckpointCoordinator(
            job_graph,
            CheckpointSettings(
                configuration.get(CheckpointingOptions.INTERVAL),
                configuration.get(CheckpointingOptions.MODE) == "EXACTLY_ONCE",
                configuration.get(CheckpointingOptions.TIMEOUT),
                configuration.get(CheckpointingOptions.MAX_CONCURRENT),
                configuration.get(CheckpointingOptions.MIN_PAUSE),
                configuration.get(CheckpointingOptions.NUM_RETAINED),
            ),
            self._storage,
            self.clock,
            self.schedule_run_async,
            self.on_main_thread,
            io_executor,
            self,
        )
        self._committer = SinkCommitter(job_graph.job_id)
        self._final_checkpoint: CheckpointMetadata | None = None  # of a finished bounded job
        self._clocks = GlobalClockService()

    # Life cycle --------------------------------------------------------------------------------

    def on_start(self) -> None:
        self._heartbeats.start()
        self.execution_graph.transition_job(JobStatus.RUNNING)
        logger.info(
            "job %s (%s) RUNNING; %d slots required",
            self.job_graph.name,
            self.job_graph.job_id,
            self.job_graph.slots_required(),
        )
        preparing = self._io.submit(self._prepare, None, self.job_graph.savepoint_path)
        self.on_main_thread(preparing, self._prepared)

    def on_stop(self) -> None:
        self._heartbeats.stop()
        self.checkpoints.stop("the JobMaster stopped")
        if not self.result_future.done():
            if self.execution_graph.status is JobStatus.FINISHED:  # the final commit runs
                self.execution_graph.status = JobStatus.FAILED
                self._failure = "the JobMaster stopped while committing the sinks"
            else:
                self._fail_job("the JobMaster stopped before the job ended")
            self._complete()
        self._committer.close()

    def _prepare(
        self, restore_from: CheckpointMetadata | None, savepoint_path: str | None
    ) -> PreparedJob:
        """I/O executor: drop an earlier attempt's files, then prepare (``prepare_job``); a job
        that does not restore (re)initializes its sinks."""
        shutil.rmtree(self._working_dir, ignore_errors=True)
        prepared = prepare_job(
            self.job_graph, self._configuration, self._storage, restore_from, savepoint_path
        )
        self._committer.set_sinks(prepared.sinks)
        if restore_from is not None:  # a failover: finish its commit, drop the rest
            self._committer.restore(restore_from).result()
        elif prepared.restored is not None:  # a savepoint or an earlier job's checkpoint
            self._committer.abort().result()
            self._committer.commit(prepared.restored).result()
        else:
            self._committer.abort().result()
            self._committer.initialize()
        return prepared

    def _prepared(self, preparing: Future[PreparedJob]) -> None:
        restarting = self.execution_graph.status is JobStatus.RESTARTING
        if self.execution_graph.status is not JobStatus.RUNNING and not restarting:
            return
        if preparing.exception() is not None:
            cause = f"preparing the job failed: {_describe(preparing.exception())}"
            self.execution_graph.status = JobStatus.RUNNING
            if restarting:  # e.g. a sink's restore commit hit an outage: retry, under the strategy
                self._handle_failure(cause)
            else:
                self._fail_job(cause)
            self._maybe_complete()
            return
        prepared = preparing.result()
        self._sources = prepared.sources
        self._assignment = prepared.assignment
        if prepared.restored is not None:
            self.checkpoints.restore(prepared.restored)
            logger.info(
                "job %s: restoring checkpoint %d from %s",
                self.job_graph.name,
                prepared.restored.checkpoint_id,
                prepared.restored.location,
            )
        if any(not s.bounded for s in self._sources.values()):
            self.schedule_run_async(self._discover_splits, self._discovery_interval)
        if restarting:
            self.execution_graph.transition_job(JobStatus.RUNNING)
            logger.info(
                "job %s: restart %d; %d of %d slots held",
                self.job_graph.name,
                self.restarts,
                len(self._slot_pool),
                self.job_graph.slots_required(),
            )
            self._request_missing_slots()
            return
        self.checkpoints.start()
        connecting = self.rpc_service.connect(self._rm_address, ResourceManagerGateway)
        self.on_main_thread(connecting, self._request_slots)

    # Slots -------------------------------------------------------------------------------------

    def _request_slots(self, connecting: Future[ResourceManagerGateway]) -> None:
        if connecting.exception() is not None:
            self._fail_job(f"ResourceManager unreachable: {connecting.exception()}")
            self._complete()
            return
        self._resource_manager = connecting.result()
        self._request_missing_slots()

    def _request_missing_slots(self) -> None:
        assert self._resource_manager is not None
        required = self.job_graph.slots_required()
        if len(self._slot_pool) >= required:
            self._deploy_sources()
            return
        for _ in range(self._slot_pool.missing(required)):
            allocation_id = AllocationId(new_id())
            self._slot_pool.add_pending(allocation_id)
            self._resource_manager.request_slot(
                self.address, self.job_master_id, self.job_graph.job_id, allocation_id
            )
        timeout = self._configuration.get(ClusterOptions.SLOT_REQUEST_TIMEOUT)
        self.schedule_run_async(self._check_slot_timeout, timeout)

    def _check_slot_timeout(self) -> None:
        running = self.execution_graph.status is JobStatus.RUNNING
        if self._slot_pool.has_pending_requests and running:
            needed = self.job_graph.slots_required()
            cause = SlotAllocationError(
                f"could not obtain {needed} slots within slot.request.timeout="
                f"{self._configuration.get(ClusterOptions.SLOT_REQUEST_TIMEOUT):g} s (got "
                f"{len(self._slot_pool)}); add TaskManagers or lower the parallelism",
                self.job_graph.job_id,
            )
            self._fail_job(str(cause))
            self._maybe_complete()

    def offer_slots(
        self,
        resource_id: str,
        task_manager_address: str,
        offers: list[SlotOffer],
        timeout: float | None = None,
    ) -> Future[list[SlotOffer]]:
        reply: Future[list[SlotOffer]] = Future()
        if self.execution_graph.status is not JobStatus.RUNNING:
            reply.set_result([])
            return reply
        wanted = self._slot_pool.take_offers(offers)
        if not wanted:
            reply.set_result([])
            return reply
        connecting = self.rpc_service.connect(task_manager_address, TaskExecutorGateway)

        def connected(f: Future[TaskExecutorGateway]) -> None:
            if self.execution_graph.status is not JobStatus.RUNNING:
                reply.set_result([])  # the job ended meanwhile: the TaskExecutor frees them
                return
            if f.exception() is not None:
                self._slot_pool.return_offers(wanted)
                reply.set_exception(f.exception())
                return
            gateway, job_id = f.result(), self.job_graph.job_id
            for offer in wanted:
                self._slot_pool.add(
                    AllocatedSlot(
                        offer.allocation_id, resource_id, Address(task_manager_address), gateway
                    )
                )
            if resource_id not in self._heartbeats.monitored:
                self._heartbeats.monitor_target(
                    resource_id, lambda: gateway.heartbeat_from_job_manager(job_id)
                )
            reply.set_result(wanted)
            if len(self._slot_pool) == self.job_graph.slots_required():
                self._deploy_sources()

        self.on_main_thread(connecting, connected)
        return reply

    # Deployment --------------------------------------------------------------------------------

    def _deploy_sources(self) -> None:
        if self.execution_graph.status is not JobStatus.RUNNING:
            return
        logger.info(
            "job %s: all %d slots allocated; deploying sources",
            self.job_graph.name,
            len(self._slot_pool),
        )
        self._clocks.reset(
            {
                ev.current_execution.attempt_id: (jv.name, ev.subtask_index)
                for jv in self.execution_graph.vertices
                for ev in jv.task_vertices
            }
        )
        for jv in self.execution_graph.vertices:
            if jv.job_vertex.is_source:
                self._deploy_vertex(jv)

    def _deploy_vertex(self, jv: ExecutionJobVertex) -> None:
        self._deployed_vertices.add(jv.vertex_id)
        configuration = self._configuration.without_security()  # no secret in deployments
        for ev in jv.task_vertices:
            execution = ev.current_execution
            slot = self._slot_pool.slot_for(ev.subtask_index)
            execution.transition_to(ExecutionState.SCHEDULED)
            execution.allocation_id = slot.allocation_id
            execution.transition_to(ExecutionState.DEPLOYING)
            execution.task_manager = slot.task_manager
            tdd = task_deployment_descriptor(
                self.execution_graph, jv, ev, slot, self.address, configuration, self._assignment
            )
            submitting = slot.gateway.submit_task(tdd)
            self.on_main_thread(submitting, functools.partial(self._submitted, execution=execution))

    def _submitted(self, submitting: Future[TaskOperationResult], execution: Execution) -> None:
        error = submitting.exception()
        resource_id = self._resource_id_of(execution)
        if isinstance(error, RecipientUnreachableError) and resource_id is not None:
            self._release_task_manager(resource_id, f"unreachable: {error}")
            return
        if error is None and not submitting.result().success:
            error = RuntimeError(submitting.result().description)
        if error is not None and not execution.state.is_terminal:
            execution.failure = f"deployment failed: {_describe(error)}"
            execution.transition_to(ExecutionState.FAILED)
            self._handle_failure(f"{execution}: {execution.failure}")
            self._maybe_complete()

    def schedule_or_update_consumers(self, partition_id: ResultPartitionId) -> Acknowledge:
        producer = self.execution_graph.execution(ExecutionAttemptId(partition_id))
        if producer is None or self.execution_graph.status is not JobStatus.RUNNING:
            return Acknowledge()
        self._deploy_ready_consumers(producer.vertex.job_vertex.vertex_id)
        return Acknowledge()

    def _deploy_ready_consumers(self, vertex_id: JobVertexId) -> None:
        for consumer in self.execution_graph.consumers_of(vertex_id):
            if consumer.vertex_id in self._deployed_vertices:
                continue
            producers = self.execution_graph.producers_of(consumer.vertex_id)
            if all(p.vertex_id in self._deployed_vertices for p in producers):
                logger.info(
                    "job %s: deploying %s (ScheduleOrUpdateConsumers)",
                    self.job_graph.name,
                    consumer.name,
                )
                self._deploy_vertex(consumer)

    # Task state and splits ---------------------------------------------------------------------

    def update_task_execution_state(self, state: TaskExecutionState) -> Acknowledge:
        execution = self.execution_graph.execution(state.attempt_id)
        if execution is None:  # an attempt from before a restart
            logger.debug("ignoring %s of a former attempt %s", state.state, state.attempt_id)
            return Acknowledge()
        if state.metrics is not None:
            execution.metrics = state.metrics
        if execution.state is state.state or execution.state.is_terminal:
            return Acknowledge()
        target = state.state
        if execution.state is ExecutionState.CANCELING:
            if not target.is_terminal:
                return Acknowledge()  # a late INITIALIZING/RUNNING of a task being cancelled
            if target is ExecutionState.FINISHED:
                target = ExecutionState.CANCELED  # it ended before the cancel reached it
        elif target is ExecutionState.CANCELED:
            execution.transition_to(ExecutionState.CANCELING)
        execution.transition_to(target)
        if target is ExecutionState.FAILED:
            execution.failure = state.error or "unknown error"
            self._handle_failure(f"{execution.vertex.task_name} failed: {execution.failure}")
        elif (
            target is ExecutionState.CANCELED
            and self._failure is None
            and self.execution_graph.status is not JobStatus.RESTARTING
        ):
            self._fail_job(f"{execution.vertex.task_name} was cancelled", JobStatus.CANCELLING)
        self._maybe_complete()
        return Acknowledge()

    def request_next_input_split(
        self,
        vertex_id: JobVertexId,
        attempt_id: ExecutionAttemptId,
        timeout: float | None = None,
    ) -> NextInputSplit:
        execution = self.execution_graph.execution(attempt_id)
        if execution is None or execution.state.is_terminal:
            raise KeyError(f"no running execution {attempt_id} in job {self.job_graph.job_id}")
        vertex = execution.vertex
        return self._sources[vertex_id].next_split(
            vertex.subtask_index, vertex.job_vertex.parallelism
        )

    def _discover_splits(self) -> None:
        """Ask the unbounded sources' enumerators for new splits (I/O), every
        ``source.discovery-interval``."""
        if self.execution_graph.status.is_globally_terminal:
            return
        for coordinator in self._sources.values():
            if not coordinator.bounded:
                found = self._io.submit(coordinator.enumerator.discover)
                self.on_main_thread(found, functools.partial(self._discovered, coordinator))
        self.schedule_run_async(self._discover_splits, self._discovery_interval)

    def _discovered(self, coordinator: SourceCoordinator, found: Future[list[InputSplit]]) -> None:
        if found.exception() is not None:
            logger.warning("source %s: discovery failed: %s", coordinator.name, found.exception())
        elif any(c is coordinator for c in self._sources.values()):  # not replaced by a restart
            coordinator.add_discovered(found.result())

    # Checkpoints (seed 002) --------------------------------------------------------------------

    def checkpoint_targets(self) -> list[CheckpointTarget] | None:
        graph = self.execution_graph
        if graph.status is not JobStatus.RUNNING:
            return None
        targets = []
        for jv in graph.vertices:
            for ev in jv.task_vertices:
                execution = ev.current_execution
                if execution.state is not ExecutionState.RUNNING:
                    return None
                trigger = None
                if jv.job_vertex.is_source:
                    gateway = self._gateway_of(execution)
                    if gateway is None:
                        return None
                    trigger = functools.partial(_trigger, gateway, execution.attempt_id)
                targets.append(
                    CheckpointTarget(execution.attempt_id, jv.vertex_id, ev.subtask_index, trigger)
                )
        return targets

    def checkpoint_completed(self, metadata: CheckpointMetadata) -> None:
        committing = self._committer.commit(metadata)

        def committed(f: Future[None]) -> None:
            if f.exception() is None:
                self.checkpoints.commit_confirmed(metadata)
            else:  # the restore commits it with the latest checkpoint, which names it
                self._handle_failure(
                    f"committing checkpoint {metadata.checkpoint_id} failed: "
                    f"{_describe(f.exception())}"
                )

        self.on_main_thread(committing, committed)

    def restored_finished_splits(self, vertex_id: JobVertexId) -> tuple[str, ...]:
        restored = self._assignment.sources.get(vertex_id) if self._assignment else None
        return tuple(sorted(restored.finished)) if restored is not None else ()

    def unassigned_splits(self, vertex_id: JobVertexId) -> tuple[SplitState, ...]:
        source = self._sources.get(vertex_id)
        return source.unassigned_restored() if source is not None else ()

    def acknowledge_checkpoint(
        self, attempt_id: ExecutionAttemptId, checkpoint_id: int, snapshot: TaskStateSnapshot
    ) -> None:
        self.checkpoints.acknowledge(attempt_id, checkpoint_id, snapshot)

    def decline_checkpoint(
        self, attempt_id: ExecutionAttemptId, checkpoint_id: int, reason: str
    ) -> None:
        self.checkpoints.decline(attempt_id, checkpoint_id, reason)

    def trigger_savepoint(
        self, target_directory: str | None, cancel_job: bool, timeout: float | None = None
    ) -> Future[str]:
        reply: Future[str] = Future()
        try:
            taking = self.checkpoints.trigger(is_savepoint=True, savepoint_target=target_directory)
        except CheckpointError as error:
            reply.set_exception(error)
            return reply

        def taken(f: Future[CheckpointMetadata]) -> None:
            if f.exception() is not None:
                reply.set_exception(f.exception())
                return
            if cancel_job:
                self.cancel()
            reply.set_result(f.result().location)

        self.on_main_thread(taking, taken)
        return reply

    def request_checkpoint_statistics(self, timeout: float | None = None) -> CheckpointStatistics:
        coordinator = self.checkpoints
        restored = self._assignment
        return CheckpointStatistics(
            round(coordinator.settings.interval * 1000),
            "EXACTLY_ONCE" if coordinator.settings.exactly_once else "AT_LEAST_ONCE",
            coordinator.counts["completed"],
            coordinator.counts["failed"],
            coordinator.in_progress,
            f"checkpoint {restored.checkpoint_id}" if restored is not None else "",
            [c.location for c in coordinator.retained()],
            coordinator.history(),
        )

    def report_watermark(self, attempt_id: ExecutionAttemptId, watermark_ms: int) -> None:
        self._clocks.report(attempt_id, watermark_ms)

    def request_watermarks(self, timeout: float | None = None) -> WatermarksInfo:
        return WatermarksInfo(self._clocks.min_clock, self._clocks.task_clocks())

    # Job status --------------------------------------------------------------------------------

    def cancel(self, timeout: float | None = None) -> Acknowledge:
        if not self.execution_graph.status.is_globally_terminal:
            self._fail_job("cancelled by the user", JobStatus.CANCELLING)
            self._heartbeats.stop()
            self._maybe_complete()
        return Acknowledge()

    def _fail_job(self, cause: str, status: JobStatus = JobStatus.FAILING) -> None:
        """Record the first cause and cancel every running execution."""
        graph = self.execution_graph
        if graph.status is JobStatus.RESTARTING:
            graph.status = JobStatus.RUNNING  # give up restarting
        if graph.status in (JobStatus.FAILING, JobStatus.CANCELLING) or (
            graph.status.is_globally_terminal
        ):
            return
        logger.info("job %s %s: %s", self.job_graph.name, status.name, cause)
        self._failure = cause
        graph.transition_job(status)
        self.checkpoints.stop(f"job {status.name}")
        if self._resource_manager is not None:
            self._resource_manager.cancel_slot_requests(self.job_graph.job_id)
        self._cancel_executions()

    def _cancel_executions(self) -> None:
        """Cancel every execution that is not terminal; those whose TaskManager cannot be
        reached are marked FAILED."""
        for execution in self.execution_graph.executions():
            if execution.state in (ExecutionState.CREATED, ExecutionState.SCHEDULED):
                execution.transition_to(ExecutionState.CANCELED)
            elif not execution.state.is_terminal and execution.state is not (
                ExecutionState.CANCELING
            ):
                execution.transition_to(ExecutionState.CANCELING)
                gateway = self._gateway_of(execution)
                if gateway is None:
                    execution.transition_to(ExecutionState.FAILED)
                    continue
                cancelling = gateway.cancel_task(execution.attempt_id)
                self.on_main_thread(
                    cancelling, functools.partial(self._cancelled, execution=execution)
                )

    def _cancelled(self, cancelling: Future[TaskOperationResult], execution: Execution) -> None:
        error = cancelling.exception()
        resource_id = self._resource_id_of(execution)
        if isinstance(error, RecipientUnreachableError) and resource_id is not None:
            self._release_task_manager(resource_id, f"unreachable: {error}")
            return
        if error is not None and not execution.state.is_terminal:
            execution.failure = f"TaskManager unreachable: {cancelling.exception()}"
            execution.transition_to(ExecutionState.FAILED)
            self._maybe_complete()

    # Failover ----------------------------------------------------------------------------------

    def _handle_failure(self, cause: str) -> None:
        """A task failed or a TaskManager was lost: restart the whole job from its latest
        checkpoint if the restart strategy allows, else fail it (Flink's full failover)."""
        graph = self.execution_graph
        if graph.status is not JobStatus.RUNNING:
            return  # one restart covers failures that happen while cancelling
        self._restart_strategy.notify_failure(self.clock.monotonic())
        if not self._restart_strategy.can_restart():
            self._fail_job(f"{cause} (no restart left: {self._restart_strategy!r})")
            return
        logger.warning(
            "job %s: %s; restarting (%r)", self.job_graph.name, cause, self._restart_strategy
        )
        graph.transition_job(JobStatus.RESTARTING)
        self.checkpoints.stop("the job restarts")
        self._cancel_executions()

    def _schedule_restart(self) -> None:
        if self._restart_scheduled:
            return
        self._restart_scheduled = True
        self.schedule_run_async(self._restart, self._restart_strategy.restart_delay())

    def _restart(self) -> None:
        self._restart_scheduled = False
        if self.execution_graph.status is not JobStatus.RESTARTING:
            return
        if self.checkpoints.finalizing:  # a complete checkpoint is being written: restore it
            self._schedule_restart()
            return
        self.restarts += 1
        for slot in self._slot_pool.slots:
            slot.gateway.release_partitions(self.job_graph.job_id)
        self.execution_graph.reset_for_restart()
        self._deployed_vertices.clear()
        latest = self.checkpoints.latest
        self.on_main_thread(self._io.submit(self._prepare, latest, None), self._restarted)

    def _restarted(self, preparing: Future[PreparedJob]) -> None:
        self._prepared(preparing)
        if self.execution_graph.status is JobStatus.RUNNING:
            self.checkpoints.start()

    # DeathWatch (seed 000) ---------------------------------------------------------------------

    def heartbeat_from_task_manager(self, resource_id: str) -> None:
        self._heartbeats.receive_heartbeat(resource_id)

    def notify_heartbeat_timeout(self, resource_id: str) -> None:
        """A TaskManager holding slots of this job is lost: its slots go, its tasks failed."""
        self._release_task_manager(resource_id, "heartbeat timeout")

    def _release_task_manager(self, resource_id: str, cause: str) -> None:
        """Drop a lost TaskManager: its slots leave the job, its executions FAIL, the job
        restarts under its strategy (Flink's disconnectTaskManager)."""
        self._heartbeats.unmonitor_target(resource_id)
        lost_slots = self._slot_pool.release_task_manager(resource_id)
        lost = {s.allocation_id for s in lost_slots}
        if lost_slots:  # if it is only cut off, it cleans up as soon as it hears this
            lost_slots[0].gateway.disconnect_job_manager(
                self.job_graph.job_id, f"the JobMaster lost it ({cause})"
            )
        failed = False
        for execution in self.execution_graph.executions():
            if execution.allocation_id in lost and not execution.state.is_terminal:
                execution.failure = f"TaskManager {resource_id} lost ({cause})"
                execution.transition_to(ExecutionState.FAILED)
                failed = True
        logger.warning(
            "job %s: TaskManager %s lost (%s); %d slots gone",
            self.job_graph.name,
            resource_id,
            cause,
            len(lost),
        )
        if failed or lost:
            self._handle_failure(f"TaskManager {resource_id} lost ({cause})")
        self._maybe_complete()

    def _resource_id_of(self, execution: Execution) -> str | None:
        slot = self._slot_pool.get(execution.allocation_id)
        return slot.resource_id if slot is not None else None

    # Completion --------------------------------------------------------------------------------

    def _maybe_complete(self) -> None:
        graph = self.execution_graph
        if graph.status.is_globally_terminal:
            return
        if graph.status is JobStatus.RUNNING and graph.all_finished():
            graph.transition_job(JobStatus.FINISHED)  # sinks commit before the result is out
            self.checkpoints.stop("the job finished")
            self._commit_final()
        elif graph.status is JobStatus.RESTARTING:
            if all(e.state.is_terminal for e in graph.executions()):
                self._schedule_restart()
        elif graph.status is not JobStatus.RUNNING and all(
            e.state.is_terminal for e in graph.executions()
        ):
            graph.transition_job(
                JobStatus.CANCELED if graph.status is JobStatus.CANCELLING else JobStatus.FAILED
            )
            self._complete()

    def _commit_final(self) -> None:
        """Record what the final attempts staged since the last checkpoint as the final
        checkpoint, then commit it (idempotent: a retry commits the same checkpoint)."""
        if self.result_future.done():
            return  # stopped meanwhile
        if self._final_checkpoint is not None:
            self.on_main_thread(self._committer.finish(self._final_checkpoint), self._committed)
            return
        attempts: dict[str, set[str]] = {
            jv.vertex_id: {ev.current_execution.attempt_id for ev in jv.task_vertices}
            for jv in self.execution_graph.vertices
        }
        self.on_main_thread(self._committer.final_pending(attempts), self._final_pending_listed)

    def _final_pending_listed(self, listing: Future[dict[SinkKey, tuple[str, ...]]]) -> None:
        if self.result_future.done():
            return
        if listing.exception() is not None:
            self._committed(listing)  # a failed commit: retried under the restart strategy
            return
        finished = {vertex_id: tuple(s.split_ids()) for vertex_id, s in self._sources.items()}
        writing = self.checkpoints.complete_final(finished, listing.result())
        self.on_main_thread(writing, self._final_checkpoint_written)

    def _final_checkpoint_written(self, writing: Future[CheckpointMetadata]) -> None:
        if self.result_future.done():
            return
        if writing.exception() is not None:
            self._committed(writing)
            return
        self._final_checkpoint = writing.result()
        self._commit_final()

    def _committed(self, committing: Future[Any]) -> None:
        if self.result_future.done():
            return  # stopped meanwhile
        error = committing.exception()
        if error is not None:
            cause = f"committing the sinks failed: {_describe(error)}"
            self._restart_strategy.notify_failure(self.clock.monotonic())
            if self._restart_strategy.can_restart():  # e.g. a database outage: try again
                logger.warning(
                    "job %s: %s; retrying the commit (%r)",
                    self.job_graph.name,
                    cause,
                    self._restart_strategy,
                )
                self.schedule_run_async(self._commit_final, self._restart_strategy.restart_delay())
                return
            self.execution_graph.status = JobStatus.FAILED
            self._failure = f"{cause} (no restart left: {self._restart_strategy!r})"
        else:
            self.checkpoints.discard_retained()  # the output is final: nothing to restore
        self._complete()

    def _complete(self) -> None:
        """Release slots and partitions, drop the job's files, publish the result."""
        if self.result_future.done():
            return
        self._end = time.time()
        self._heartbeats.stop()
        self.checkpoints.stop("the job ended")
        for slot in self._slot_pool.release_all():
            slot.gateway.release_partitions(self.job_graph.job_id)
            slot.gateway.free_slot(slot.allocation_id, f"job {self.job_graph.job_id} ended")
        if self._resource_manager is not None:
            self._resource_manager.cancel_slot_requests(self.job_graph.job_id)
        self._io.submit(shutil.rmtree, self._working_dir, True)
        graph = self.execution_graph
        if graph.status is not JobStatus.FINISHED:
            if not graph.status.is_globally_terminal:
                graph.status = (
                    JobStatus.CANCELED if graph.status is JobStatus.CANCELLING else JobStatus.FAILED
                )
            self._committer.abort(keep=self.checkpoints.retained())
        details = self._details()
        duration = self._end - self._start
        result: JobResult
        if graph.status is JobStatus.FINISHED:
            accumulators = {jv.name: jv.metrics() for jv in graph.vertices}
            result = JobResultSuccess(self.job_graph.job_id, duration, accumulators, details)
        else:
            result = JobResultFailure(
                self.job_graph.job_id, graph.status, duration, self._failure or "unknown", details
            )
        logger.info(
            "job %s %s in %.2f s", self.job_graph.name, self.execution_graph.status.name, duration
        )
        self.result_future.set_result(result)

    def request_job_details(self, timeout: float | None = None) -> JobDetails:
        return self._details()

    def _details(self) -> JobDetails:
        graph = self.execution_graph
        vertices = [
            VertexDetails(
                jv.name,
                jv.parallelism,
                {s.name: n for s, n in jv.state_counts().items()},
                jv.metrics(),
            )
            for jv in graph.vertices
        ]
        end = self._end or time.time()
        return JobDetails(
            self.job_graph.job_id,
            self.job_graph.name,
            graph.status,
            self._start,
            end - self._start,
            vertices,
            sum(s.splits_total for s in self._sources.values()),
            sum(s.splits_assigned for s in self._sources.values()),
            self.restarts,
            self.checkpoints.counts["completed"],
        )

    def _gateway_of(self, execution: Execution) -> TaskExecutorGateway | None:
        slot = self._slot_pool.get(execution.allocation_id)
        return slot.gateway if slot is not None else None


def _trigger(
    gateway: TaskExecutorGateway,
    attempt_id: ExecutionAttemptId,
    checkpoint_id: int,
    timestamp_ms: int,
) -> Future[TaskOperationResult]:
    return gateway.trigger_checkpoint(attempt_id, checkpoint_id, timestamp_ms)


def _describe(error: BaseException | None) -> str:
    return f"{type(error).__name__}: {error}"
