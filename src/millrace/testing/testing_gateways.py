"""Gateways whose answers a test sets and whose calls it reads back (Flink's
TestingTaskExecutorGatewayBuilder and TestingResourceManagerGateway).

Each ask is answered by a function the test may replace (an attribute named after the method
with ``_fn``); it may return a value, a Future (to answer later), or raise (the future fails).
Every call, ask or tell, is recorded in ``calls`` as ``(method, args)``, in order. The classes
implement the gateway Protocols structurally; they do not subclass them.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from millrace.runtime.deployment import Acknowledge, TaskDeploymentDescriptor, TaskOperationResult
from millrace.runtime.io.partition_events import Ack, PartitionEvents
from millrace.runtime.resourcemanager.slot_manager import TaskManagerInfo
from millrace.types import AllocationId, ExecutionAttemptId, JobId, ResultPartitionId

__all__ = ["TestingResourceManagerGateway", "TestingTaskExecutorGateway"]


def _answer(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """``fn(*args)`` as a future: its value, its own future, or its exception."""
    try:
        value = fn(*args)
    except Exception as error:
        failed: Future[Any] = Future()
        failed.set_exception(error)
        return failed
    if isinstance(value, Future):
        return value
    done: Future[Any] = Future()
    done.set_result(value)
    return done


class _Recording:
    def __init__(self, address: str) -> None:
        self._address = address
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    @property
    def address(self) -> str:
        return self._address

    def _record(self, method: str, *args: Any) -> None:
        self.calls.append((method, args))

    def called(self, method: str) -> list[tuple[Any, ...]]:
        """The arguments of every call of ``method``, in order."""
        return [args for name, args in self.calls if name == method]


class TestingTaskExecutorGateway(_Recording):
    """A TaskExecutorGateway: submissions and cancellations succeed unless told otherwise.

    Args:
        address: The address it pretends to be.

    Attributes:
        submit_task_fn: ``tdd -> TaskOperationResult | Future | raise``.
        cancel_task_fn: ``attempt_id -> TaskOperationResult | Future | raise``.
        trigger_checkpoint_fn: ``(attempt_id, checkpoint_id, timestamp_ms) -> ...``.

    Threading:
        Any thread; answers are computed on the caller's thread.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, address: str = "local://testing/taskmanager") -> None:
        super().__init__(address)
        self.submit_task_fn: Callable[[TaskDeploymentDescriptor], Any] = lambda tdd: (
            TaskOperationResult(tdd.attempt_id, True)
        )
        self.cancel_task_fn: Callable[[ExecutionAttemptId], Any] = lambda attempt: (
            TaskOperationResult(attempt, True)
        )
        self.trigger_checkpoint_fn: Callable[[ExecutionAttemptId, int, int], Any] = (
            lambda attempt, checkpoint_id, timestamp_ms: TaskOperationResult(attempt, True)
        )

    def request_slot(
        self,
        slot_index: int,
        job_id: JobId,
        allocation_id: AllocationId,
        job_master_address: str,
        job_master_id: str,
        timeout: float | None = None,
    ) -> Future[Acknowledge]:
        self._record("request_slot", slot_index, job_id, allocation_id)
        return _answer(Acknowledge)

    def submit_task(
        self, tdd: TaskDeploymentDescriptor, timeout: float | None = None
    ) -> Future[TaskOperationResult]:
        self._record("submit_task", tdd)
        return _answer(self.submit_task_fn, tdd)

    def cancel_task(
        self, attempt_id: ExecutionAttemptId, timeout: float | None = None
    ) -> Future[TaskOperationResult]:
        self._record("cancel_task", attempt_id)
        return _answer(self.cancel_task_fn, attempt_id)

    def trigger_checkpoint(
        self,
        attempt_id: ExecutionAttemptId,
        checkpoint_id: int,
        timestamp_ms: int,
        timeout: float | None = None,
    ) -> Future[TaskOperationResult]:
        self._record("trigger_checkpoint", attempt_id, checkpoint_id, timestamp_ms)
        return _answer(self.trigger_checkpoint_fn, attempt_id, checkpoint_id, timestamp_ms)

    def free_slot(self, allocation_id: AllocationId, cause: str) -> None:
        self._record("free_slot", allocation_id, cause)

    def release_partitions(self, job_id: JobId) -> None:
        self._record("release_partitions", job_id)

    def heartbeat_from_resource_manager(self, resource_manager_id: str) -> None:
        self._record("heartbeat_from_resource_manager", resource_manager_id)

    def heartbeat_from_job_manager(self, job_id: JobId) -> None:
        self._record("heartbeat_from_job_manager", job_id)

    def disconnect_job_manager(self, job_id: JobId, cause: str) -> None:
        self._record("disconnect_job_manager", job_id, cause)

    def request_partition_events(
        self,
        partition_id: ResultPartitionId,
        subpartition: int,
        from_index: int,
        timeout: float | None = None,
    ) -> Future[PartitionEvents]:
        self._record("request_partition_events", partition_id, subpartition, from_index)
        return _answer(lambda: PartitionEvents(from_index, ()))

    def acknowledge_partition_events(
        self, partition_id: ResultPartitionId, subpartition: int, ack: Ack
    ) -> None:
        self._record("acknowledge_partition_events", partition_id, subpartition, ack)


class TestingResourceManagerGateway(_Recording):
    """A ResourceManagerGateway that records slot requests and answers them with Acknowledge.

    Attributes:
        request_slot_fn: ``(job_master_address, job_master_id, job_id, allocation_id) -> ...``.
        task_manager_infos: What ``request_task_manager_infos`` answers.
        metric_dumps: What ``request_task_manager_metrics`` answers (filtered by id).
    """

    __test__ = False

    def __init__(self, address: str = "local://testing/resourcemanager") -> None:
        super().__init__(address)
        self.request_slot_fn: Callable[[str, str, JobId, AllocationId], Any] = lambda *_: (
            Acknowledge()
        )
        self.task_manager_infos: list[TaskManagerInfo] = []
        self.metric_dumps: list[Any] = []  # MetricDumps for request_task_manager_metrics

    def register_task_executor(
        self, registration: Any, timeout: float | None = None
    ) -> Future[Any]:
        self._record("register_task_executor", registration)
        raise NotImplementedError("TestingResourceManagerGateway does not register TaskManagers")

    def request_slot(
        self,
        job_master_address: str,
        job_master_id: str,
        job_id: JobId,
        allocation_id: AllocationId,
        timeout: float | None = None,
    ) -> Future[Acknowledge]:
        self._record("request_slot", job_master_address, job_master_id, job_id, allocation_id)
        return _answer(
            self.request_slot_fn, job_master_address, job_master_id, job_id, allocation_id
        )

    def cancel_slot_requests(self, job_id: JobId) -> None:
        self._record("cancel_slot_requests", job_id)

    def notify_slot_available(self, resource_id: str, slot_index: int) -> None:
        self._record("notify_slot_available", resource_id, slot_index)

    def request_task_manager_infos(self) -> Future[list[TaskManagerInfo]]:
        self._record("request_task_manager_infos")
        return _answer(lambda: list(self.task_manager_infos))

    def request_task_manager_metrics(
        self, resource_id: str | None = None, timeout: float | None = None
    ) -> Future[list[Any]]:
        self._record("request_task_manager_metrics", resource_id)
        return _answer(
            lambda: [d for d in self.metric_dumps if resource_id in (None, d.resource_id)]
        )

    def heartbeat_from_task_manager(
        self, resource_id: str, resident_memory_bytes: int = -1
    ) -> None:
        self._record("heartbeat_from_task_manager", resource_id)
