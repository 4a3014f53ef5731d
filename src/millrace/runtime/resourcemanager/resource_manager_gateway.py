"""ResourceManagerGateway: what TaskExecutors and JobMasters may ask the ResourceManager."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol

from millrace.rpc import RpcGateway
from millrace.runtime.deployment import Acknowledge
from millrace.runtime.registration import RegisterTaskManager, RegistrationResponse
from millrace.runtime.resourcemanager.slot_manager import TaskManagerInfo
from millrace.types import AllocationId, JobId, JobMasterId, ResourceId

__all__ = ["ResourceManagerGateway"]


class ResourceManagerGateway(RpcGateway, Protocol):
    def register_task_executor(
        self, registration: RegisterTaskManager, timeout: float | None = None
    ) -> Future[RegistrationResponse]:
        """RegisterTaskManager -> AcknowledgeRegistration | AlreadyRegistered |
        RefuseRegistration."""
        ...

    def request_slot(
        self,
        job_master_address: str,
        job_master_id: JobMasterId,
        job_id: JobId,
        allocation_id: AllocationId,
        timeout: float | None = None,
    ) -> Future[Acknowledge]:
        """Find a free slot and have its TaskManager offer it to the JobMaster.

        The reply acknowledges the request; the slot arrives as an offer to the JobMaster.
        Unserved requests wait for slots to free up, until the JobMaster cancels them.
        """
        ...

    def cancel_slot_requests(self, job_id: JobId) -> None:
        """Drop the job's unserved slot requests."""
        ...

    def notify_slot_available(self, resource_id: ResourceId, slot_index: int) -> None:
        """A TaskManager freed one of its slots."""
        ...

    def request_task_manager_infos(self) -> Future[list[TaskManagerInfo]]: ...

    def heartbeat_from_task_manager(self, resource_id: ResourceId) -> None:
        """A TaskManager answers a heartbeat request (DeathWatch, seed 000)."""
        ...
