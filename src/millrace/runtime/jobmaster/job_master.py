"""JobMaster: the endpoint of one job (seed 000, 003; Flink's JobMaster).

The JobMaster is the gateway in front of the job's :class:`~millrace.runtime.scheduler.Scheduler`
(the ExecutionGraph, deployment, failover, completion), its CheckpointCoordinator, its source
coordinators and its clock service, and of its
:class:`~millrace.runtime.jobmaster.slot_pool_service.SlotPoolService` (the slots: requested
from the ResourceManager, timed out, offered by TaskExecutors; subtask *i* of every vertex runs
in slot *i*). What it keeps itself is DeathWatch of the TaskManagers holding the job's slots
(heartbeats; a lost one is released and the Scheduler fails over) and the job's clean-up. Every
gateway method forwards to one of those on the main thread; the Scheduler calls back
(``SchedulerContext``) to get slots, drop an unreachable TaskManager, and publish the result.
"""

from __future__ import annotations

import logging
from concurrent.futures import Executor, Future

from millrace.config import CheckpointingOptions, ClusterOptions, Configuration, HeartbeatOptions
from millrace.errors import CheckpointError
from millrace.rpc import FencedRpcEndpoint, RpcService
from millrace.rpc.main_thread_executor import EndpointMainThreadExecutor
from millrace.runtime.checkpoint.checkpoint_statistics import CheckpointStatistics
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata, CheckpointStorage
from millrace.runtime.checkpoint.high_availability_checkpoint_storage import (
    HighAvailabilityCheckpointStorage,
)
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.deployment import Acknowledge, SlotOffer, TaskExecutionState
from millrace.runtime.executiongraph import ExecutionGraph, JobStatus
from millrace.runtime.executiongraph.archived_execution_graph import ExecutionGraphInfo
from millrace.runtime.heartbeat import HeartbeatManager
from millrace.runtime.highavailability.high_availability_services import LeaderServices
from millrace.runtime.io import exchange_store
from millrace.runtime.io.input_split import NextInputSplit
from millrace.runtime.job_result import JobDetails, JobResult
from millrace.runtime.jobgraph import JobGraph
from millrace.runtime.jobmaster.clock_service import WatermarksInfo
from millrace.runtime.jobmaster.job_change import JobChangeRequest, JobChangeResult
from millrace.runtime.jobmaster.job_master_gateway import JobMasterGateway
from millrace.runtime.jobmaster.job_preparation import JobPreparer
from millrace.runtime.jobmaster.live_job_changes import LiveJobChanges
from millrace.runtime.jobmaster.sink_committer import SinkCommitter
from millrace.runtime.jobmaster.slot_pool_service import SlotPoolService
from millrace.runtime.scheduler import Scheduler
from millrace.runtime.scheduler.execution_graph_views import (
    checkpoint_statistics,
    execution_graph_info,
)
from millrace.runtime.taskexecutor.task_executor_gateway import TaskExecutorGateway
from millrace.types import (
    DEFAULT_LEADER_SESSION_ID,
    ExecutionAttemptId,
    JobMasterId,
    JobVertexId,
    ResourceId,
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
        resource_manager_address: Where the SlotPoolService requests slots.
        io_executor: Runs blocking work (split discovery, checkpoint metadata, preparation).
        leader: The leadership term's services under high availability (the JobMasterId is
            its leader session id; checkpoints enter its store; commits check it); None: none.

    Attributes:
        result_future: Completed with the JobResult when the job reaches a terminal status.
        scheduler: The job's Scheduler.

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
        leader: LeaderServices | None = None,
    ) -> None:
        self.job_master_id = JobMasterId(leader.leader_session_id if leader else new_id())
        super().__init__(rpc_service, f"jobmaster-{job_graph.job_id[:12]}", self.job_master_id)
        self.job_graph = job_graph
        self.result_future: Future[JobResult] = Future()
        self._configuration = configuration
        self._io = io_executor
        self._working_dir = exchange_store.job_directory(configuration, job_graph.job_id)
        self._main_thread = main_thread = EndpointMainThreadExecutor(self)
        self._heartbeats = HeartbeatManager(
            self.clock,
            self.schedule_run_async,
            self,
            configuration.get(HeartbeatOptions.INTERVAL),
            configuration.get(HeartbeatOptions.PAUSE),
            configuration.get(HeartbeatOptions.THRESHOLD),
        )
        dirs = (
            configuration.get(CheckpointingOptions.CHECKPOINTS_DIR),
            configuration.get(CheckpointingOptions.SAVEPOINTS_DIR),
        )
        retained = configuration.get(CheckpointingOptions.NUM_RETAINED)
        self._storage = (
            HighAvailabilityCheckpointStorage(*dirs, job_graph.job_id, leader, retained)
            if leader is not None
            else CheckpointStorage(*dirs)
        )
        self._checkpoint_ids = leader.checkpoint_id_counter(job_graph.job_id) if leader else None
        self._committer = SinkCommitter(
            job_graph.job_id, check_leadership=leader.check_leadership if leader else None
        )
        self._slots = SlotPoolService(
            job_graph,
            main_thread,
            rpc_service.connect,
            resource_manager_address,
            self.address,
            self.job_master_id,
            leader.leader_session_id if leader else DEFAULT_LEADER_SESSION_ID,
            configuration.get(ClusterOptions.SLOT_REQUEST_TIMEOUT),
            accepts_offers=lambda: self.scheduler.status is JobStatus.RUNNING,
            slots_ready=lambda: self.scheduler.slots_ready(),
            fail=lambda cause: self.scheduler.fail(cause),
            task_manager_connected=self._monitor_task_manager,
        )
        self.scheduler = self.create_scheduler()
        self._changes = LiveJobChanges(self, main_thread, configuration, self._slots.slot_pool)

    def create_scheduler(self) -> Scheduler:
        """A Scheduler of ``job_graph`` (not started): at the start and after a live change."""
        conf, io, graph, storage = self._configuration, self._io, self.job_graph, self._storage
        scheduler = Scheduler(
            ExecutionGraph(graph, self.clock),
            conf,
            self._main_thread,
            io,
            JobPreparer(graph, conf, storage, self._committer, self._working_dir, io),
            self._committer,
            storage,
            self._slots.slot_pool,
            self.address,
            conf.without_security(),  # no secret in task deployments
            self,
        )
        scheduler.checkpoints.ids.use_counter(self._checkpoint_ids)  # HA: ZooKeeper's
        return scheduler

    # Life cycle --------------------------------------------------------------------------------

    def on_start(self) -> None:
        self._heartbeats.start()
        self.scheduler.start()

    def on_stop(self) -> None:
        self._heartbeats.stop()
        self.scheduler.stop()

    def suspend(self) -> None:
        """Leadership revoked (HA): touch neither the sinks nor the checkpoints from now on; the
        job stays in the HA stores for the next leader. Any thread; the endpoint closes next."""

        def suspended() -> None:
            if isinstance(self._storage, HighAvailabilityCheckpointStorage):
                self._storage.suspended = True
            self._committer.suspend()

        self.run_async(suspended)

    # Slots (SchedulerContext, gateway) --------------------------------------------------------

    def request_slots(self) -> None:
        self._slots.request_slots()

    def offer_slots(
        self,
        resource_id: ResourceId,
        task_manager_address: str,
        offers: list[SlotOffer],
        timeout: float | None = None,
    ) -> Future[list[SlotOffer]]:
        return self._slots.offer_slots(resource_id, task_manager_address, offers)

    def _monitor_task_manager(self, resource_id: ResourceId, gateway: TaskExecutorGateway) -> None:
        job_id = self.job_graph.job_id
        if resource_id not in self._heartbeats.monitored:
            self._heartbeats.monitor_target(
                resource_id, lambda: gateway.heartbeat_from_job_manager(job_id)
            )

    # DeathWatch (seed 000) ---------------------------------------------------------------------

    def heartbeat_from_task_manager(self, resource_id: ResourceId) -> None:
        self._heartbeats.receive_heartbeat(resource_id)

    def notify_heartbeat_timeout(self, resource_id: ResourceId) -> None:
        """A TaskManager holding slots of this job is lost."""
        self.release_task_manager(resource_id, "heartbeat timeout")

    def release_task_manager(self, resource_id: ResourceId, cause: str) -> None:
        """Drop a lost TaskManager: its slots leave the job, the Scheduler fails over (Flink's
        disconnectTaskManager). If it was only cut off, it cleans up when it hears this."""
        self._heartbeats.unmonitor_target(resource_id)
        lost_slots = self._slots.release_task_manager(resource_id)
        if lost_slots:
            lost_slots[0].gateway.disconnect_job_manager(
                self.job_graph.job_id, f"the JobMaster lost it ({cause})"
            )
        logger.warning(
            "job %s: TaskManager %s lost (%s); %d slots gone",
            self.job_graph.name,
            resource_id,
            cause,
            len(lost_slots),
        )
        self.scheduler.task_manager_lost(resource_id, {s.allocation_id for s in lost_slots}, cause)

    # Completion (SchedulerContext) -------------------------------------------------------------

    def job_terminated(self, result: JobResult) -> None:
        """Release slots and partitions, drop the job's files, publish the result."""
        if self._changes.retiring:  # the old run of a live change: the job goes on
            return self._changes.retired(result)
        self._heartbeats.stop()
        self._slots.release_all(f"job {self.job_graph.job_id} ended")
        self._io.submit(exchange_store.remove_tree, self._working_dir)
        if not self.result_future.done():
            self.result_future.set_result(result)

    # Gateway: tasks ----------------------------------------------------------------------------

    def update_task_execution_state(self, state: TaskExecutionState) -> Acknowledge:
        self.scheduler.update_task_execution_state(state)
        return Acknowledge()

    def request_next_input_split(
        self,
        vertex_id: JobVertexId,
        attempt_id: ExecutionAttemptId,
        timeout: float | None = None,
    ) -> NextInputSplit:
        return self.scheduler.next_input_split(vertex_id, attempt_id)

    def schedule_or_update_consumers(self, partition_id: ResultPartitionId) -> Acknowledge:
        self.scheduler.schedule_or_update_consumers(partition_id)
        return Acknowledge()

    def acknowledge_checkpoint(
        self, attempt_id: ExecutionAttemptId, checkpoint_id: int, snapshot: TaskStateSnapshot
    ) -> None:
        self.scheduler.checkpoints.acknowledge(attempt_id, checkpoint_id, snapshot)

    def decline_checkpoint(
        self, attempt_id: ExecutionAttemptId, checkpoint_id: int, reason: str
    ) -> None:
        self.scheduler.checkpoints.decline(attempt_id, checkpoint_id, reason)

    def report_watermark(self, attempt_id: ExecutionAttemptId, watermark_ms: int) -> None:
        self.scheduler.clocks.report(attempt_id, watermark_ms)

    # Gateway: clients --------------------------------------------------------------------------

    def request_job_details(self, timeout: float | None = None) -> JobDetails:
        return self.scheduler.details()

    def trigger_savepoint(
        self, target_directory: str | None, cancel_job: bool, timeout: float | None = None
    ) -> Future[str]:
        reply: Future[str] = Future()
        try:
            taking = self.scheduler.checkpoints.trigger(
                is_savepoint=True, savepoint_target=target_directory
            )
        except CheckpointError as error:
            reply.set_exception(error)
            return reply

        def taken(f: Future[CheckpointMetadata]) -> None:
            if f.exception() is not None:
                return reply.set_exception(f.exception())
            if cancel_job:  # Flink's stop with savepoint
                self.cancel()
            reply.set_result(f.result().location)

        self.on_main_thread(taking, taken)
        return reply

    def change_job(
        self, request: JobChangeRequest, timeout: float | None = None
    ) -> Future[JobChangeResult]:
        return self._changes.change(request)

    def request_checkpoint_statistics(self, timeout: float | None = None) -> CheckpointStatistics:
        return checkpoint_statistics(self.scheduler)

    def request_job(self, timeout: float | None = None) -> ExecutionGraphInfo:
        return execution_graph_info(self.scheduler, self._configuration)

    def request_watermarks(self, timeout: float | None = None) -> WatermarksInfo:
        clocks = self.scheduler.clocks
        return WatermarksInfo(clocks.min_clock, clocks.task_clocks())

    def cancel(self, timeout: float | None = None) -> Acknowledge:
        if not self.scheduler.status.is_globally_terminal:
            self._heartbeats.stop()  # a cancelled job's TaskManagers are not watched any more
            self._changes.cancel(self.scheduler)  # a live change stopped meanwhile is dropped
        return Acknowledge()
