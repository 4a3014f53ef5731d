"""MetricQueryService: a TaskManager's metrics for the REST API (Flink's MetricQueryService).

Each TaskManager process runs this small endpoint on its RPC service, at the endpoint id
:func:`metric_query_service_id` of its ResourceID, next to its TaskExecutor. The REST API asks
the ResourceManager (:meth:`ResourceManager.request_task_manager_metrics`), which asks the
service of every registered TaskManager (:func:`query_task_managers`) and answers with one
:class:`MetricDump` per TaskManager that replied. A dump holds immutable task snapshots and
the process figures; the service reads them from the TaskManagerMetricGroup's published
tuple, never from the TaskExecutor's state.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Protocol

from millrace.rpc import RpcEndpoint, RpcGateway, RpcService
from millrace.runtime.metrics.metric_values import process_values
from millrace.runtime.metrics.process_metrics import process_metrics
from millrace.runtime.metrics.task_io_metric_group import TaskMetricsSnapshot

__all__ = [
    "MetricDump",
    "MetricQueryService",
    "MetricQueryServiceGateway",
    "metric_query_service_address",
    "metric_query_service_id",
    "query_task_managers",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MetricDump:
    """One TaskManager's metrics at one moment.

    Attributes:
        resource_id: The TaskManager.
        process: Process metrics by Flink's name (``Status.JVM.Memory.Heap.Used``, ...).
        tasks: The latest snapshot of every task it runs.
    """

    resource_id: str
    process: dict[str, float] = field(default_factory=dict)
    tasks: tuple[TaskMetricsSnapshot, ...] = ()


class MetricQueryServiceGateway(RpcGateway, Protocol):
    """The gateway of a TaskManager's MetricQueryService.

    Threading:
        Any thread; executed on the service's main thread.
    """

    def query_metrics(self, timeout: float | None = None) -> Future[MetricDump]:
        """The TaskManager's metrics now.

        Returns:
            Future completed with a MetricDump.
        """
        ...


def metric_query_service_id(resource_id: str) -> str:
    """The endpoint id of the MetricQueryService of TaskManager ``resource_id``."""
    return f"{resource_id}-metrics"


def metric_query_service_address(task_executor_address: str, resource_id: str) -> str:
    """The service's address, on the same RPC service as the TaskExecutor at
    ``task_executor_address`` (``tcp://host:port/<endpoint>``)."""
    base = task_executor_address.rsplit("/", 1)[0]
    return f"{base}/{metric_query_service_id(resource_id)}"


class MetricQueryService(RpcEndpoint, implements=(MetricQueryServiceGateway,)):
    """Serves one TaskManager's metrics.

    Args:
        rpc_service: The TaskManager's RPC service.
        resource_id: The TaskManager's ResourceID.
        snapshots: Returns the latest snapshot of every running task (any thread).

    Threading:
        Gateway methods on its main thread.
    """

    def __init__(
        self,
        rpc_service: RpcService,
        resource_id: str,
        snapshots: Callable[[], list[TaskMetricsSnapshot]],
    ) -> None:
        super().__init__(rpc_service, metric_query_service_id(resource_id))
        self._resource_id = resource_id
        self._snapshots = snapshots

    def query_metrics(self, timeout: float | None = None) -> MetricDump:
        return MetricDump(
            self._resource_id,
            dict(process_values(process_metrics())),
            tuple(self._snapshots()),
        )


def query_task_managers(
    rpc_service: RpcService, task_managers: list[tuple[str, str]], timeout: float
) -> Future[list[MetricDump]]:
    """Ask the MetricQueryService of every ``(resource_id, task_executor_address)``.

    Returns:
        Future completed with the dumps of those that answered within ``timeout`` seconds
        (in the given order; the others are left out and logged), never failed.

    Threading:
        Any thread; the future completes on an RPC or timer thread.
    """
    answers: list[Future[MetricDump | None]] = []
    for resource_id, address in task_managers:
        answer: Future[MetricDump | None] = Future()
        answers.append(answer)
        connecting = rpc_service.connect(
            metric_query_service_address(address, resource_id), MetricQueryServiceGateway
        )
        connecting.add_done_callback(functools.partial(_query, answer, resource_id, timeout))
        # the lookup of a missing service may wait longer than ``timeout``: bound each answer
        rpc_service.schedule_ask_timeout(answer, resource_id, "query_metrics", timeout)
    result: Future[list[MetricDump]] = Future()

    def gathered(_: Future[MetricDump | None]) -> None:
        if all(a.done() for a in answers):
            # another answer's callback may have got there first
            with contextlib.suppress(InvalidStateError):
                result.set_result(
                    [d for a in answers if a.exception() is None and (d := a.result()) is not None]
                )

    for answer in answers:
        answer.add_done_callback(gathered)
    if not answers:
        result.set_result([])
    return result


def _query(
    answer: Future[MetricDump | None],
    resource_id: str,
    timeout: float,
    connecting: Future[MetricQueryServiceGateway],
) -> None:
    """Complete ``answer`` with the service's dump, or None if it could not be had."""
    if connecting.exception() is not None:
        logger.info("metrics of %s: %s", resource_id, connecting.exception())
        with contextlib.suppress(InvalidStateError):  # timed out already
            answer.set_result(None)
        return
    reply = connecting.result().query_metrics(timeout=timeout)
    reply.add_done_callback(functools.partial(_answered, answer))


def _answered(answer: Future[MetricDump | None], done: Future[MetricDump]) -> None:
    with contextlib.suppress(InvalidStateError):  # timed out already
        answer.set_result(done.result() if done.exception() is None else None)
