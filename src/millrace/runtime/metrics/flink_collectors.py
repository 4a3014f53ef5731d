"""The Prometheus collectors of the JobManager and the TaskManagers, with Flink's names and
labels (Flink's PrometheusReporter: scope components joined with ``_``, prefix ``flink_``,
the scope variables as labels, every metric a gauge).

* TaskManager: ``flink_taskmanager_Status_JVM_*{host, tm_id}`` (process figures, see
  :mod:`~millrace.runtime.metrics.process_metrics`) and, per running task,
  ``flink_taskmanager_job_task_<metric>{host, tm_id, job_id, job_name, task_id,
  task_attempt_id, task_name, subtask_index, task_attempt_num}`` and, at the head and tail
  operator of each task's chain only, ``flink_taskmanager_job_task_operator_<metric>`` with
  ``operator_id`` and ``operator_name`` besides (a chain is one Spark plan: the operators
  inside it get no counts; see :mod:`~millrace.runtime.metrics.operator_scope`).
* JobManager: ``flink_jobmanager_Status_JVM_*{host}``, ``flink_jobmanager_<metric>{host}``
  (TaskManagers, slots, running jobs) and, per job that has not ended,
  ``flink_jobmanager_job_<metric>{host, job_id, job_name}``.

Collectors run on the reporter's HTTP thread at each scrape: the TaskManager's reads the
immutable snapshots its tasks publish; the JobManager's asks the ResourceManager and the
Dispatcher through their gateways, waiting at most ``timeout`` seconds (a scrape during a
leader change or a slow answer yields the process metrics alone).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from millrace.runtime.metrics.metric_values import (
    TASK_METRICS,
    job_manager_values,
    job_values,
    process_values,
    task_values,
)
from millrace.runtime.metrics.operator_scope import OPERATOR_METRICS, operator_samples
from millrace.runtime.metrics.process_metrics import process_metrics
from millrace.runtime.metrics.task_io_metric_group import TaskMetricsSnapshot
from millrace.types import JobId

__all__ = [
    "OPERATOR_LABELS",
    "TASK_LABELS",
    "JobManagerCollector",
    "TaskManagerCollector",
    "host_name",
    "prometheus_name",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

TASK_LABELS = (
    "host",
    "tm_id",
    "job_id",
    "job_name",
    "task_id",
    "task_attempt_id",
    "task_name",
    "subtask_index",
    "task_attempt_num",
)
OPERATOR_LABELS = (*TASK_LABELS[:7], "operator_id", "operator_name", *TASK_LABELS[7:])
JOB_LABELS = ("host", "job_id", "job_name")


def host_name() -> str:
    """This machine's host name (Flink's ``<host>`` scope variable)."""
    return socket.gethostname()


def prometheus_name(scope: str, metric: str) -> str:
    """``flink_<scope>_<metric>`` with every character Prometheus refuses as ``_`` (Flink's
    CHARACTER_FILTER)."""
    name = f"flink_{scope}_{metric}"
    return "".join(c if c.isalnum() or c in "_:" else "_" for c in name)


def _process_families(
    scope: str, label_names: tuple[str, ...], label_values: list[list[str]]
) -> Iterator[Metric]:
    """This process's figures, one sample per label set (the embedded cluster's TaskManagers
    share the process)."""
    for name, value in process_values(process_metrics()).items():
        family = GaugeMetricFamily(
            prometheus_name(scope, name),
            f"{name} (see millrace.runtime.metrics.process_metrics)",
            labels=label_names,
        )
        for labels in label_values:
            family.add_metric(labels, value)
        yield family


class TaskManagerCollector(Collector):
    """The metrics of the TaskManagers of one process (one; several in the embedded cluster).

    Task scope for every running task; operator scope (``OPERATOR_LABELS``) only for the head
    operator of each chain (``numRecordsIn``, ``currentInputWatermark``, the head's own gauges
    such as a Kafka reader's ``records-lag-max``) and its tail operator (``numRecordsOut``,
    ``currentOutputWatermark``): a chain runs as one Spark plan, so the operators inside it
    are given no counts (:mod:`~millrace.runtime.metrics.operator_scope`).

    Args:
        task_managers: ResourceID (``tm_id``) -> a function returning the latest snapshot of
            every task it runs (any thread; ``TaskManagerMetricGroup.snapshots``).
        host: The ``host`` label (default: this machine's host name).

    Threading:
        ``collect`` on the reporter's HTTP thread.
    """

    def __init__(
        self,
        task_managers: Mapping[str, Callable[[], list[TaskMetricsSnapshot]]],
        host: str | None = None,
    ) -> None:
        self._task_managers = dict(task_managers)
        self._host = host or host_name()

    def collect(self) -> Iterator[Metric]:
        yield from _process_families(
            "taskmanager", ("host", "tm_id"), [[self._host, tm] for tm in self._task_managers]
        )
        families = {
            name: GaugeMetricFamily(
                prometheus_name("taskmanager_job_task", name), text, labels=TASK_LABELS
            )
            for name, text in TASK_METRICS.items()
        }
        operator_families: dict[str, GaugeMetricFamily] = {}
        any_task = False
        for tm_id, snapshots in self._task_managers.items():
            for snapshot in snapshots():
                any_task = True
                labels = [
                    self._host,
                    tm_id,
                    snapshot.job_id,
                    snapshot.job_name,
                    snapshot.vertex_id,
                    snapshot.attempt_id,
                    snapshot.task_name,
                    str(snapshot.subtask_index),
                    "0",  # no attempt number in Millrace's deployment (the attempt id tells)
                ]
                for name, value in task_values(snapshot).items():
                    families[name].add_metric(labels, value)
                for sample in operator_samples(snapshot):
                    family = operator_families.get(sample.name)
                    if family is None:
                        family = operator_families[sample.name] = GaugeMetricFamily(
                            prometheus_name("taskmanager_job_task_operator", sample.name),
                            OPERATOR_METRICS.get(sample.name, sample.name),
                            labels=OPERATOR_LABELS,
                        )
                    operator = [sample.operator_id, sample.operator_name]
                    family.add_metric([*labels[:7], *operator, *labels[7:]], sample.value)
        if any_task:
            yield from families.values()
        yield from operator_families.values()


class JobManagerCollector(Collector):
    """The metrics of the JobManager process.

    Args:
        gateways: Returns the ``(dispatcher, resource_manager)`` gateways while this process
            leads, else None (any thread; set by the entrypoint).
        timeout: Seconds a scrape waits for each gateway call.
        host: The ``host`` label (default: this machine's host name).

    Threading:
        ``collect`` on the reporter's HTTP thread; it only calls gateways.
    """

    def __init__(
        self,
        gateways: Callable[[], tuple[Any, Any] | None],
        timeout: float,
        host: str | None = None,
    ) -> None:
        self._gateways = gateways
        self._timeout = timeout
        self._host = host or host_name()

    def collect(self) -> Iterator[Metric]:
        yield from _process_families("jobmanager", ("host",), [[self._host]])
        gateways = self._gateways()
        if gateways is None:
            return
        dispatcher, resource_manager = gateways
        infos = self._ask(resource_manager.request_task_manager_infos())
        jobs = self._ask(dispatcher.list_jobs())
        if infos is None or jobs is None:
            return
        for name, value in job_manager_values(infos, jobs).items():
            family = GaugeMetricFamily(prometheus_name("jobmanager", name), name, labels=("host",))
            family.add_metric([self._host], value)
            yield family
        families: dict[str, GaugeMetricFamily] = {}
        for job in jobs:
            if job.status.is_globally_terminal:
                continue
            stats = self._ask(dispatcher.request_checkpoint_statistics(JobId(job.job_id)))
            for name, value in job_values(job, stats).items():
                if name not in families:
                    families[name] = GaugeMetricFamily(
                        prometheus_name("jobmanager_job", name), name, labels=JOB_LABELS
                    )
                families[name].add_metric([self._host, job.job_id, job.name], value)
        yield from families.values()

    def _ask(self, future: Future[T]) -> T | None:
        try:
            return future.result(timeout=self._timeout)
        except Exception as error:  # a scrape shows what it can
            logger.debug("metrics: a gateway call failed: %r", error)
            return None
