"""ResourceManager: registers TaskManagers and hands their slots to JobMasters (seed 000, 003).

Registration answers RegisterTaskManager with AcknowledgeRegistration, AlreadyRegistered or
RefuseRegistration. A slot request is matched to a free slot by the SlotManager; the
ResourceManager then asks that TaskManager to allocate the slot, and the TaskManager offers it to
the JobMaster directly (Flink's slot protocol).
"""

from __future__ import annotations

import functools
import logging
from concurrent.futures import Future

from millrace.config import Configuration, HeartbeatOptions, RpcOptions
from millrace.errors import RecipientUnreachableError, SlotAllocationError
from millrace.rpc import FencedRpcEndpoint, RpcService
from millrace.runtime.deployment import Acknowledge
from millrace.runtime.heartbeat import HeartbeatManager
from millrace.runtime.metrics.metric_query_service import MetricDump, query_task_managers
from millrace.runtime.registration import (
    PROTOCOL_VERSION,
    AcknowledgeRegistration,
    AlreadyRegistered,
    RefuseRegistration,
    RegisterTaskManager,
    RegistrationResponse,
)
from millrace.runtime.resourcemanager.resource_manager_gateway import ResourceManagerGateway
from millrace.runtime.resourcemanager.slot_manager import (
    PendingSlotRequest,
    SlotManager,
    TaskManagerInfo,
    TaskManagerSlot,
)
from millrace.runtime.taskexecutor.task_executor_gateway import TaskExecutorGateway
from millrace.types import (
    DEFAULT_LEADER_SESSION_ID,
    AllocationId,
    JobId,
    JobMasterId,
    ResourceId,
    new_id,
)

__all__ = ["ResourceManager"]

logger = logging.getLogger(__name__)


class ResourceManager(FencedRpcEndpoint, implements=(ResourceManagerGateway,)):
    """The cluster's slot authority.

    Args:
        rpc_service: Service to run on.
        endpoint_id: Endpoint id (default ``resourcemanager``).
        configuration: Heartbeat settings (``heartbeat.*``).
        leader_session_id: The ResourceManagerId and fencing token: the leader session under
            high availability, else ``DEFAULT_LEADER_SESSION_ID``; a call carrying another is
            refused with FencingTokenError (seed 004).

    Threading:
        Every method runs on the endpoint's main thread (gateway calls arrive through the
        mailbox).
    """

    def __init__(
        self,
        rpc_service: RpcService,
        endpoint_id: str = "resourcemanager",
        configuration: Configuration | None = None,
        leader_session_id: str = DEFAULT_LEADER_SESSION_ID,
    ) -> None:
        super().__init__(rpc_service, endpoint_id, leader_session_id)
        conf = configuration or Configuration()
        self.resource_manager_id = leader_session_id
        self._slots = SlotManager()
        self._task_executors: dict[ResourceId, TaskExecutorGateway] = {}
        self._metrics_timeout = conf.get(RpcOptions.ASK_TIMEOUT) / 2  # within the REST's ask
        self._heartbeats = HeartbeatManager(
            self.clock,
            self.schedule_run_async,
            self,
            conf.get(HeartbeatOptions.INTERVAL),
            conf.get(HeartbeatOptions.PAUSE),
            conf.get(HeartbeatOptions.THRESHOLD),
        )

    def on_start(self) -> None:
        self._heartbeats.start()

    def on_stop(self) -> None:
        self._heartbeats.stop()

    # Registration ------------------------------------------------------------------------------

    def register_task_executor(
        self, registration: RegisterTaskManager, timeout: float | None = None
    ) -> Future[RegistrationResponse] | RegistrationResponse:
        self.validate_runs_in_main_thread()
        if registration.protocol_version != PROTOCOL_VERSION:
            return RefuseRegistration(
                f"protocol version {registration.protocol_version} is not supported; this "
                f"ResourceManager speaks version {PROTOCOL_VERSION}"
            )
        if registration.number_of_slots < 1:
            return RefuseRegistration(
                f"a TaskManager must offer at least one slot, got {registration.number_of_slots}"
            )
        known = self._slots.registration(registration.resource_id)
        if known is not None and known[0] == registration.address:
            return AlreadyRegistered(known[1], self.resource_manager_id)
        reply: Future[RegistrationResponse] = Future()
        connecting = self.rpc_service.connect(registration.address, TaskExecutorGateway)
        self.on_main_thread(connecting, lambda f: self._finish_registration(registration, f, reply))
        return reply

    def _finish_registration(
        self,
        registration: RegisterTaskManager,
        connecting: Future[TaskExecutorGateway],
        reply: Future[RegistrationResponse],
    ) -> None:
        error = connecting.exception()
        if error is not None:
            reply.set_result(RefuseRegistration(f"cannot reach {registration.address}: {error}"))
            return
        if registration.resource_id in self._task_executors:
            logger.info(
                "TaskManager %s re-registered at %s", registration.resource_id, registration.address
            )
        registration_id = new_id()
        gateway = connecting.result()
        self._task_executors[registration.resource_id] = gateway
        rm_id = self.resource_manager_id
        self._heartbeats.monitor_target(
            registration.resource_id, lambda: gateway.heartbeat_from_resource_manager(rm_id)
        )
        self._slots.register(
            registration.resource_id,
            registration.address,
            registration.number_of_slots,
            registration_id,
            registration.hardware,
            self.clock.monotonic(),
        )
        logger.info(
            "registered TaskManager %s at %s with %d slots",
            registration.resource_id,
            registration.address,
            registration.number_of_slots,
        )
        reply.set_result(AcknowledgeRegistration(registration_id, self.resource_manager_id))
        self._serve_requests()

    # Slots -------------------------------------------------------------------------------------

    def request_slot(
        self,
        job_master_address: str,
        job_master_id: JobMasterId,
        job_id: JobId,
        allocation_id: AllocationId,
        timeout: float | None = None,
    ) -> Acknowledge:
        self._slots.add_request(
            PendingSlotRequest(job_id, allocation_id, job_master_address, job_master_id)
        )
        self._serve_requests()
        return Acknowledge()

    def cancel_slot_requests(self, job_id: JobId) -> None:
        self._slots.cancel_requests(job_id)

    def notify_slot_available(self, resource_id: ResourceId, slot_index: int) -> None:
        self._slots.free(ResourceId(resource_id), slot_index)
        self._serve_requests()

    def request_task_manager_infos(self) -> list[TaskManagerInfo]:
        return self._slots.infos(self.clock.monotonic())

    def request_task_manager_metrics(
        self, resource_id: ResourceId | None = None, timeout: float | None = None
    ) -> Future[list[MetricDump]]:
        """The metrics of one registered TaskManager (all with None), from the
        MetricQueryService of each (``metric_query_service.py``)."""
        targets = [
            (str(info.resource_id), str(info.address))
            for info in self._slots.infos()
            if resource_id is None or info.resource_id == resource_id
        ]
        return query_task_managers(self.rpc_service, targets, self._metrics_timeout)

    # DeathWatch (seed 000) ---------------------------------------------------------------------

    def heartbeat_from_task_manager(
        self, resource_id: ResourceId, resident_memory_bytes: int = -1
    ) -> None:
        self._heartbeats.receive_heartbeat(resource_id)
        self._slots.heartbeat(
            ResourceId(resource_id), self.clock.monotonic(), resident_memory_bytes
        )

    def notify_heartbeat_timeout(self, resource_id: ResourceId) -> None:
        """A TaskManager stopped answering: it is dead to the cluster; its slots leave the
        pool. If it was only cut off, it registers again when it can."""
        logger.warning("TaskManager %s is unreachable; removing its slots", resource_id)
        self._heartbeats.unmonitor_target(resource_id)
        self._task_executors.pop(ResourceId(resource_id), None)
        self._slots.unregister(ResourceId(resource_id))

    def _serve_requests(self) -> None:
        for request, slot, _address in self._slots.match():
            gateway = self._task_executors[slot.resource_id]
            allocating = gateway.request_slot(
                slot.slot_index,
                request.job_id,
                request.allocation_id,
                request.job_master_address,
                request.job_master_id,
            )
            self.on_main_thread(
                allocating, functools.partial(self._allocated, request=request, slot=slot)
            )

    def _allocated(
        self, allocating: Future[Acknowledge], request: PendingSlotRequest, slot: TaskManagerSlot
    ) -> None:
        error = allocating.exception()
        if error is None:
            return
        logger.warning(
            "TaskManager %s could not allocate slot %d: %s; retrying the request",
            slot.resource_id,
            slot.slot_index,
            error,
        )
        if isinstance(error, RecipientUnreachableError):
            self.notify_heartbeat_timeout(slot.resource_id)  # gone: do not offer it again
        elif isinstance(error, SlotAllocationError):
            # The TaskManager still holds the slot (a job it has not let go of yet): it stays
            # taken here until the TaskManager reports it free (notify_slot_available).
            slot.allocation_id = AllocationId("held-by-task-manager")
            slot.job_id = None
        else:
            self._slots.free(slot.resource_id, slot.slot_index)
        self._slots.add_request(request)
        self.schedule_run_async(self._serve_requests, 0.1)
