"""ResourceManagerGateway: what TaskExecutors and JobMasters may ask the ResourceManager.

Besides the failures each method names, every ask may fail with the failures every call may see
(``millrace.rpc.rpc_gateway``): RpcTimeoutError, RecipientUnreachableError
(EndpointStoppedError once the ResourceManager stopped), GatewayMismatchError, and over TCP
FrameSizeError and CodecError. No builtin exception crosses this gateway.

Threading:
    Any thread; every call is executed on the ResourceManager's main thread.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol

from millrace.rpc import RpcGateway
from millrace.runtime.deployment import Acknowledge
from millrace.runtime.metrics.metric_query_service import MetricDump
from millrace.runtime.registration import RegisterTaskManager, RegistrationResponse
from millrace.runtime.resourcemanager.slot_manager import TaskManagerInfo
from millrace.types import AllocationId, JobId, JobMasterId, ResourceId

__all__ = ["ResourceManagerGateway"]


class ResourceManagerGateway(RpcGateway, Protocol):
    """The gateway of the cluster's ResourceManager (Flink's ResourceManagerGateway).

    Threading:
        Any thread; executed on the ResourceManager's main thread.
    """

    def register_task_executor(
        self, registration: RegisterTaskManager, timeout: float | None = None
    ) -> Future[RegistrationResponse]:
        """RegisterTaskManager -> AcknowledgeRegistration | AlreadyRegistered |
        RefuseRegistration.

        Args:
            registration: The TaskManager's resource id, TaskExecutor address, slots and
                protocol version.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with AcknowledgeRegistration once the ResourceManager reached the
            TaskExecutor, AlreadyRegistered for a repeat from the same address, or
            RefuseRegistration with the reason (another protocol version, no slots, an
            unreachable address). A refusal is an answer, not a failure.
        """
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

        Unserved requests wait for slots to free up, until the JobMaster cancels them
        (``cancel_slot_requests``; it gives up after ``slot.request.timeout``).

        Args:
            job_master_address: Where the slot is to be offered.
            job_master_id: The JobMaster's fencing token.
            job_id: The job.
            allocation_id: The JobMaster's id of this request.
            timeout: Seconds until the returned future fails with RpcTimeoutError; None:
                ``rpc.ask-timeout``.

        Returns:
            Future completed with Acknowledge once the request is queued; the slot arrives as
            an offer to the JobMaster.
        """
        ...

    def cancel_slot_requests(self, job_id: JobId) -> None:
        """Drop the job's unserved slot requests (a tell)."""
        ...

    def notify_slot_available(self, resource_id: ResourceId, slot_index: int) -> None:
        """A TaskManager freed one of its slots (a tell; an unknown TaskManager or slot is
        ignored)."""
        ...

    def request_task_manager_infos(self) -> Future[list[TaskManagerInfo]]:
        """The registered TaskManagers (REST ``/taskmanagers``).

        Returns:
            Future completed with one TaskManagerInfo per registered TaskManager: address,
            slots and free slots, hardware, heartbeat age, resident memory and the slots
            allocated to jobs.
        """
        ...

    def request_task_manager_metrics(
        self, resource_id: ResourceId | None = None, timeout: float | None = None
    ) -> Future[list[MetricDump]]:
        """The metrics of TaskManager ``resource_id`` (every registered one with None), as
        its MetricQueryService reports them (REST ``/taskmanagers/{id}/metrics``, subtask
        metrics, back pressure; Flink's MetricFetcher).

        Returns:
            Future completed with one MetricDump per TaskManager that answered within half
            the ask timeout (an unknown ``resource_id``: an empty list); never failed by a
            TaskManager that does not answer.
        """
        ...

    def heartbeat_from_task_manager(
        self, resource_id: ResourceId, resident_memory_bytes: int = -1
    ) -> None:
        """A TaskManager answers a heartbeat request (DeathWatch, seed 000; a tell; from a
        TaskManager not registered, ignored), with its process's resident memory in bytes
        (-1: unknown; REST shows it)."""
        ...
