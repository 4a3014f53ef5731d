"""TaskExecutor: the endpoint of a TaskManager (seed 000, 003; Flink's TaskExecutor).

It registers at the ResourceManager (retrying with back-off until AcknowledgeRegistration or
AlreadyRegistered; under high availability at the leader the leader retrieval names, anew at
each new leader, failing the former one's tasks), allocates slots on the ResourceManager's
request and offers them to the JobMaster, runs submitted tasks on their own threads, and holds
their result partitions, which consumer tasks pull with long polls.

Tasks touch the endpoint only through ``run_async`` (partition appends, state reports); all
endpoint state lives on the main thread.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from millrace.config import (
    CheckpointingMode,
    CheckpointingOptions,
    ClusterOptions,
    Configuration,
    ExecutionOptions,
    HeartbeatOptions,
)
from millrace.errors import FencingTokenError, PartitionNotFoundError, SlotAllocationError
from millrace.rpc import RpcEndpoint, RpcService
from millrace.runtime.deployment import (
    Acknowledge,
    SlotOffer,
    TaskDeploymentDescriptor,
    TaskExecutionState,
    TaskOperationResult,
)
from millrace.runtime.executiongraph import ExecutionState, IOMetrics
from millrace.runtime.hardware_description import hardware, rss_bytes
from millrace.runtime.highavailability.leader_retrieval import LeaderInformation
from millrace.runtime.io import exchange_store
from millrace.runtime.io.partition_events import PartitionEvent, PartitionEvents
from millrace.runtime.io.result_partition import ResultPartition
from millrace.runtime.jobmaster.job_master_gateway import JobMasterGateway
from millrace.runtime.metrics.task_manager_metric_group import TaskManagerMetricGroup
from millrace.runtime.registration import (
    AcknowledgeRegistration,
    AlreadyRegistered,
    RefuseRegistration,
    RegisterTaskManager,
    RegistrationResponse,
)
from millrace.runtime.resourcemanager.resource_manager_gateway import ResourceManagerGateway
from millrace.runtime.taskexecutor.job_manager_connection import (
    JobManagerConnection,
    RpcCheckpointResponder,
    request_next_input_split,
)
from millrace.runtime.taskexecutor.partition_client import input_gate
from millrace.runtime.taskexecutor.partition_flow_control import PartitionFlowControl
from millrace.runtime.taskexecutor.task import Task, join_tasks_then
from millrace.runtime.taskexecutor.task_environment import TaskEnvironment
from millrace.runtime.taskexecutor.task_executor_gateway import TaskExecutorGateway
from millrace.runtime.taskexecutor.task_runtime import TaskRuntime
from millrace.runtime.taskexecutor.task_slot_table import TaskSlotTable
from millrace.types import (
    DEFAULT_LEADER_SESSION_ID,
    Address,
    AllocationId,
    ExecutionAttemptId,
    JobId,
    JobMasterId,
    ResourceId,
    ResultPartitionId,
    new_id,
)

__all__ = ["TaskExecutor"]

logger = logging.getLogger(__name__)

_REGISTRATION_BACKOFF = (0.05, 2.0)  # seconds: first retry, cap (doubling)
_TASK_STOP_TIMEOUT = 10.0  # seconds all tasks together get to stop when the TaskExecutor stops


class TaskExecutor(PartitionFlowControl, RpcEndpoint, implements=(TaskExecutorGateway,)):
    """One TaskManager.

    Args:
        rpc_service: Service to run on.
        configuration: Cluster configuration (slots, io.tmp.dirs, poll timeout).
        resource_manager_address: Where to register; None under high availability until
            :meth:`notify_leader_address` names the leader.
        task_runtime: The data plane the tasks run on (started by the creator; tasks wait for
            its session on their own threads).
        resource_id: Identity of this TaskManager (generated if None).

    Threading:
        Gateway methods and callbacks run on the main thread; tasks run on their own threads.
    """

    def __init__(
        self,
        rpc_service: RpcService,
        configuration: Configuration,
        resource_manager_address: str | None,
        task_runtime: TaskRuntime,
        resource_id: ResourceId | None = None,
    ) -> None:
        self.resource_id = resource_id or ResourceId(f"taskmanager-{new_id()[:8]}")
        super().__init__(rpc_service, self.resource_id)
        self._configuration = configuration
        self._rm_address = resource_manager_address
        self._leader_session: str | None = None  # HA: slots go only to this leader's JobMasters
        self._rm_token = DEFAULT_LEADER_SESSION_ID  # the ResourceManagerId (its fencing token)
        self._task_runtime = task_runtime
        self._slots = TaskSlotTable(configuration.get(ClusterOptions.NUM_TASK_SLOTS))
        self._poll_timeout = configuration.get(ExecutionOptions.PARTITION_POLL_TIMEOUT)
        self._tmp_dir = Path(configuration.get(ClusterOptions.TMP_DIR)).resolve()
        self._tasks: dict[ExecutionAttemptId, Task] = {}
        self.metric_group = TaskManagerMetricGroup(self.resource_id)  # its tasks' metrics
        self._partitions: dict[ResultPartitionId, ResultPartition] = {}
        self._job_masters: dict[JobId, JobManagerConnection] = {}
        self._resource_manager: ResourceManagerGateway | None = None
        self._registration: RegistrationResponse | None = None
        self._backoff = _REGISTRATION_BACKOFF[0]
        self._heartbeat_interval = configuration.get(HeartbeatOptions.INTERVAL)
        self._heartbeat_pause = configuration.get(HeartbeatOptions.PAUSE)
        self._last_rm_heartbeat = 0.0

    @property
    def registered(self) -> bool:
        """Whether the ResourceManager accepted this TaskManager. Threading: main thread."""
        return isinstance(self._registration, AcknowledgeRegistration | AlreadyRegistered)

    # Life cycle --------------------------------------------------------------------------------

    def on_start(self) -> None:
        self._register()
        self.schedule_run_async(self._check_heartbeats, self._heartbeat_interval)

    def on_stop(self) -> Future[None] | None:
        """Cancel every task; once their threads ended (or ``_TASK_STOP_TIMEOUT`` passed),
        release the partitions and terminate. The main thread keeps serving meanwhile: the
        tasks' last reports still reach it, and nothing blocks it."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if not tasks:
            self._release_all_partitions(None)
            return None
        stopped: Future[None] = Future()
        join_tasks_then(
            tasks,
            _TASK_STOP_TIMEOUT,
            lambda: self.run_async(functools.partial(self._release_all_partitions, stopped)),
            f"{self.resource_id}-stopping",
        )
        return stopped

    def _release_all_partitions(self, stopped: Future[None] | None) -> None:
        for partition in self._partitions.values():
            partition.release("released: the TaskManager stopped")
        self._partitions.clear()
        if stopped is not None:
            stopped.set_result(None)

    # Registration (seed 000) -------------------------------------------------------------------

    def notify_leader_address(self, leader: LeaderInformation | None) -> None:
        """HA, main thread (via ``run_async``): a new ResourceManager leader (None: none now).
        A former leader's JobMasters lose their tasks and slots; registers at the new one."""
        if leader is None or leader.leader_session_id == self._leader_session:
            return
        self._leader_session = self._rm_token = leader.leader_session_id
        self._rm_address = leader.address
        for job_id, connection in list(self._job_masters.items()):
            if connection.job_master_id != leader.leader_session_id:
                self._disconnect_job_manager(job_id, "another JobManager leads now")
        self._registration, self._resource_manager = None, None
        self._register()

    def _register(self) -> None:
        if self._rm_address is not None:  # else HA: no leader known yet
            rm = self.rpc_service.connect(self._rm_address, ResourceManagerGateway, self._rm_token)
            self.on_main_thread(rm, self._connected_to_resource_manager)

    def _connected_to_resource_manager(self, connecting: Future[ResourceManagerGateway]) -> None:
        if connecting.exception() is not None:
            self._retry_registration(f"ResourceManager unreachable: {connecting.exception()}")
            return
        self._resource_manager = connecting.result()
        message = RegisterTaskManager(
            self.resource_id, Address(self.address), len(self._slots.slots), hardware=hardware()
        )
        self.on_main_thread(
            self._resource_manager.register_task_executor(message), self._registration_reply
        )

    def _registration_reply(self, reply: Future[RegistrationResponse]) -> None:
        if reply.exception() is not None:
            self._retry_registration(str(reply.exception()))
            return
        response = reply.result()
        if isinstance(response, RefuseRegistration):
            self._retry_registration(f"refused: {response.reason}")
            return
        self._registration = response
        self._backoff = _REGISTRATION_BACKOFF[0]
        self._last_rm_heartbeat = self.clock.monotonic()
        logger.info(
            "%s registered at the ResourceManager (%s)", self.resource_id, type(response).__name__
        )

    def _retry_registration(self, reason: str) -> None:
        logger.info(
            "%s: registration failed (%s); retrying in %.2f s",
            self.resource_id,
            reason,
            self._backoff,
        )
        self.schedule_run_async(self._register, self._backoff)
        self._backoff = min(self._backoff * 2, _REGISTRATION_BACKOFF[1])

    # DeathWatch (seed 000) -----------------------------------------------------------------------
    def heartbeat_from_resource_manager(self, resource_manager_id: str) -> None:
        self._last_rm_heartbeat = self.clock.monotonic()
        if self._resource_manager is not None and self.registered:
            self._resource_manager.heartbeat_from_task_manager(self.resource_id, rss_bytes())

    def heartbeat_from_job_manager(self, job_id: JobId) -> None:
        connection = self._job_masters.get(job_id)
        if connection is not None:
            connection.last_heartbeat = self.clock.monotonic()

            def answer(connecting: Future[JobMasterGateway]) -> None:
                if connecting.exception() is None:
                    connecting.result().heartbeat_from_task_manager(self.resource_id)

            self.on_main_thread(connection.gateway, answer)

    def _check_heartbeats(self) -> None:
        """Watch the ResourceManager and every JobMaster (seed 000: the TaskManager watches the
        JobManager). Silence for pause + interval means the peer is lost: a lost
        ResourceManager makes this TaskManager register again; a lost JobMaster makes it fail
        that job's tasks and free its slots (a clean state), so no zombie keeps working."""
        now = self.clock.monotonic()
        limit = self._heartbeat_pause + self._heartbeat_interval
        silence = now - self._last_rm_heartbeat
        if self.registered and silence > limit:
            logger.warning(
                "%s: no heartbeat from the ResourceManager for %.1f s; registering again",
                self.resource_id,
                silence,
            )
            self._registration = None
            self._register()
        for job_id, connection in list(self._job_masters.items()):
            quiet = now - connection.last_heartbeat
            if quiet > limit:
                self._disconnect_job_manager(job_id, f"no heartbeat from it for {quiet:.1f} s")
        self.schedule_run_async(self._check_heartbeats, self._heartbeat_interval)

    def disconnect_job_manager(self, job_id: JobId, cause: str) -> None:
        self._disconnect_job_manager(job_id, cause)

    def _disconnect_job_manager(self, job_id: JobId, cause: str) -> None:
        """Fail the job's tasks, drop its partitions, free its slots and forget its JobMaster."""
        if job_id not in self._job_masters:
            return
        tasks = [t for t in self._tasks.values() if t.tdd.job_id == job_id]
        logger.warning(
            "%s: lost the JobMaster of job %s (%s); failing %d tasks and freeing its slots",
            self.resource_id,
            job_id,
            cause,
            len(tasks),
        )
        del self._job_masters[job_id]
        for task in tasks:
            task.cancel()
        self.release_partitions(job_id)
        for slot in self._slots.slots:
            if slot.job_id == job_id and slot.allocation_id is not None:
                self._free(slot.allocation_id)

    # Slots -------------------------------------------------------------------------------------

    def request_slot(
        self,
        slot_index: int,
        job_id: JobId,
        allocation_id: AllocationId,
        job_master_address: str,
        job_master_id: JobMasterId,
        timeout: float | None = None,
    ) -> Acknowledge:
        if self._leader_session is not None and job_master_id != self._leader_session:
            raise FencingTokenError(self.endpoint_id, self._leader_session, job_master_id)
        self._slots.allocate(slot_index, job_id, allocation_id, job_master_address)
        connection = self._job_masters.get(job_id)
        if connection is None or connection.job_master_id != job_master_id:
            gateway = self.rpc_service.connect(
                job_master_address, JobMasterGateway, fencing_token=job_master_id
            )
            connection = JobManagerConnection(job_master_id, gateway, self.clock.monotonic())
            self._job_masters[job_id] = connection
        offer = SlotOffer(allocation_id, slot_index)
        self.on_main_thread(connection.gateway, lambda f: self._offer(f, offer))
        return Acknowledge()

    def _offer(self, connecting: Future[JobMasterGateway], offer: SlotOffer) -> None:
        if connecting.exception() is not None:
            logger.warning(
                "cannot reach the JobMaster to offer %s: %s", offer, connecting.exception()
            )
            self._free(offer.allocation_id)
            return
        accepted = connecting.result().offer_slots(self.resource_id, self.address, [offer])

        def done(reply: Future[list[SlotOffer]]) -> None:
            if reply.exception() is not None or offer not in reply.result():
                logger.info("slot offer %s not accepted: %s", offer, reply.exception())
                self._free(offer.allocation_id)

        self.on_main_thread(accepted, done)

    def free_slot(self, allocation_id: AllocationId, cause: str) -> None:
        for task in self._tasks.values():
            if task.tdd.allocation_id == allocation_id:
                task.cancel()
        self._free(allocation_id)

    def _free(self, allocation_id: AllocationId) -> None:
        slot = self._slots.free(allocation_id)
        if slot is not None and self._resource_manager is not None:
            self._resource_manager.notify_slot_available(self.resource_id, slot.index)
        live_jobs = {s.job_id for s in self._slots.slots if s.job_id is not None}
        for job_id in list(self._job_masters):
            if job_id not in live_jobs:
                del self._job_masters[job_id]

    # Tasks -------------------------------------------------------------------------------------

    def submit_task(
        self, tdd: TaskDeploymentDescriptor, timeout: float | None = None
    ) -> TaskOperationResult:
        slot = self._slots.find(tdd.allocation_id)
        if slot is None or slot.job_id != tdd.job_id:
            raise SlotAllocationError(
                f"cannot run {tdd.task_name}: no slot of {self.resource_id} is allocated to "
                f"allocation {tdd.allocation_id} of job {tdd.job_id}",
                tdd.job_id,
            )
        if tdd.attempt_id in self._tasks:
            return TaskOperationResult(tdd.attempt_id, False, "attempt already running")
        if tdd.output_partition is not None:
            self._new_result_partition(tdd)
        configuration = Configuration(tdd.configuration)
        mode = configuration.get(CheckpointingOptions.MODE)
        aligned = mode is CheckpointingMode.EXACTLY_ONCE
        gate = input_gate(tdd.input_channels, self.rpc_service, self._poll_timeout, aligned)
        job_master = self._job_masters[tdd.job_id].gateway
        env = TaskEnvironment(
            tdd,
            configuration,
            self._task_runtime.started,
            exchange_store.job_directory(self._configuration, tdd.job_id),
            request_split=lambda: request_next_input_split(job_master, tdd),
            emit=lambda sub, event: self.run_async(lambda: self._emit(tdd, sub, event)),
            input_gate=gate,
            checkpoint_responder=RpcCheckpointResponder(
                functools.partial(self._tell_job_master, tdd.job_id), tdd.attempt_id
            ),
            output_room=self._output_room(tdd),
            report_metrics=lambda: self.run_async(
                lambda: self._task_state_changed(tdd, ExecutionState.RUNNING, env.metrics, None)
            ),
        )
        task = Task(
            tdd,
            env,
            report=lambda state, metrics, error: self.run_async(
                lambda: self._task_state_changed(tdd, state, metrics, error)
            ),
            cancel_work=functools.partial(self._task_runtime.cancel_task_work, tdd.attempt_id),
            failed=self._task_runtime.task_failed,
        )
        self._tasks[tdd.attempt_id] = task
        self.metric_group.add_task(env.io_metrics)
        task.start()
        return TaskOperationResult(tdd.attempt_id, True)

    def cancel_task(
        self, attempt_id: ExecutionAttemptId, timeout: float | None = None
    ) -> TaskOperationResult:
        task = self._tasks.get(attempt_id)
        if task is None:
            return TaskOperationResult(attempt_id, False, "no such task on " + self.resource_id)
        task.cancel()
        return TaskOperationResult(attempt_id, True)

    def trigger_checkpoint(
        self,
        attempt_id: ExecutionAttemptId,
        checkpoint_id: int,
        timestamp_ms: int,
        timeout: float | None = None,
    ) -> TaskOperationResult:
        task = self._tasks.get(attempt_id)
        if task is None:
            return TaskOperationResult(attempt_id, False, "no such task on " + self.resource_id)
        task.environment.trigger_checkpoint(checkpoint_id, timestamp_ms)
        return TaskOperationResult(attempt_id, True)

    def _tell_job_master(self, job_id: JobId, call: Callable[[JobMasterGateway], object]) -> None:
        """Any thread: ``call(gateway)`` on the job's JobMaster, from the main thread."""
        self.run_async(lambda: self._job_master(job_id, call))

    def _job_master(self, job_id: JobId, call: Callable[[JobMasterGateway], object]) -> None:
        """Main thread: ``call(gateway)`` on the job's JobMaster once connected (dropped if
        the job is gone)."""
        connection = self._job_masters.get(job_id)
        if connection is not None:
            self.on_main_thread(
                connection.gateway, lambda f: f.exception() is None and call(f.result())
            )

    def _task_state_changed(
        self,
        tdd: TaskDeploymentDescriptor,
        state: ExecutionState,
        metrics: IOMetrics,
        error: str | None,
    ) -> None:
        if state.is_terminal:
            self._tasks.pop(tdd.attempt_id, None)
            self.metric_group.remove_task(tdd.attempt_id)
        snapshot = IOMetrics(**vars(metrics))
        message = TaskExecutionState(tdd.job_id, tdd.attempt_id, state, snapshot, error)
        connection = self._job_masters.get(tdd.job_id)
        if connection is None:
            return
        self.on_main_thread(
            connection.gateway,
            lambda f: f.exception() is None and f.result().update_task_execution_state(message),
        )

    # Result partitions -------------------------------------------------------------------------

    def _emit(
        self, tdd: TaskDeploymentDescriptor, subpartition: int | None, event: PartitionEvent
    ) -> None:
        output = tdd.output_partition
        partition = None if output is None else self._partitions.get(output)
        if partition is None:
            return  # released: the job ended or was cancelled
        first = partition.num_events == 0
        if subpartition is None:
            partition.broadcast(event)
        else:
            partition.add(subpartition, event)
        if first:  # ScheduleOrUpdateConsumers on the first event (lazy scheduling)
            connection = self._job_masters.get(tdd.job_id)
            if connection is not None:
                self.on_main_thread(
                    connection.gateway,
                    lambda f: (
                        f.exception() is None
                        and f.result().schedule_or_update_consumers(partition.partition_id)
                    ),
                )

    def request_partition_events(
        self,
        partition_id: ResultPartitionId,
        subpartition: int,
        from_index: int,
        timeout: float | None = None,
    ) -> Future[PartitionEvents]:
        partition = self._partitions.get(partition_id)
        if partition is None:
            raise PartitionNotFoundError(partition_id)
        future = partition.poll(subpartition, from_index)
        if not future.done():
            self.schedule_run_async(
                lambda: partition.expire(future, from_index), self._poll_timeout
            )
        return future

    def release_partitions(self, job_id: JobId) -> None:
        for pid in [p for p, part in self._partitions.items() if part.job_id == job_id]:
            self._partitions.pop(pid).release(f"released with job {job_id}")
