"""The Prometheus collectors: Flink's metric names and labels (Flink's PrometheusReporter:
scopes joined with '_', prefix flink_, scope variables as labels), values from the task
snapshots and the JobManager's gateways."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from millrace.runtime.checkpoint.checkpoint_history import CheckpointRecord
from millrace.runtime.checkpoint.checkpoint_statistics import CheckpointStatistics
from millrace.runtime.executiongraph import JobStatus
from millrace.runtime.job_result import JobDetails
from millrace.runtime.metrics.flink_collectors import (
    TASK_LABELS,
    JobManagerCollector,
    TaskManagerCollector,
)
from millrace.runtime.metrics.metric_values import TASK_METRICS
from millrace.runtime.metrics.task_io_metric_group import TaskMetricsSnapshot
from millrace.runtime.resourcemanager.slot_manager import TaskManagerInfo
from millrace.types import Address, JobId, ResourceId
from tests.grafana_dashboard import dashboard_metrics


def _scrape(*collectors: Any) -> dict[str, list[tuple[dict[str, str], float]]]:
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    text = generate_latest(registry).decode()
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


SNAPSHOT = TaskMetricsSnapshot(
    "job-1",
    "word count",
    "vertex-1",
    "Source: words",
    1,
    "attempt-1",
    records_in=500,
    records_out=40,
    dead_letters=3,
    busy_ms=700,
    records_in_per_second=12.5,
    busy_ms_per_second=900.0,
    idle_ms_per_second=100.0,
    current_input_watermark_ms=1_700_000_000_000,
    operator_names=("Source: words", "Sink: counts"),
    head_operator_metrics=(("KafkaConsumer.records-lag-max", 3.0),),
)


def test_task_metrics_have_flinks_names_and_labels() -> None:
    scraped = _scrape(TaskManagerCollector({"tm-1": lambda: [SNAPSHOT]}, host="h"))
    for name in TASK_METRICS:
        [(labels, _)] = scraped[f"flink_taskmanager_job_task_{name}"]
        assert set(labels) == set(TASK_LABELS)
        assert labels == {
            "host": "h",
            "tm_id": "tm-1",
            "job_id": "job-1",
            "job_name": "word count",
            "task_id": "vertex-1",
            "task_attempt_id": "attempt-1",
            "task_name": "Source: words",
            "subtask_index": "1",
            "task_attempt_num": "0",
        }
    value = {name: scraped[f"flink_taskmanager_job_task_{name}"][0][1] for name in TASK_METRICS}
    assert value["numRecordsIn"] == 500
    assert value["numRecordsOut"] == 40
    assert value["numRecordsInPerSecond"] == 12.5
    assert value["busyTimeMsPerSecond"] == 900.0
    assert value["idleTimeMsPerSecond"] == 100.0
    assert value["backPressuredTimeMsPerSecond"] == 0.0
    assert value["currentInputWatermark"] == 1_700_000_000_000
    assert value["numRecordsInErrors"] == 3  # the dead letters (FLIP-33's name)
    assert value["accumulatedBusyTime"] == 700


def test_task_manager_process_metrics_carry_host_and_tm_id() -> None:
    scraped = _scrape(TaskManagerCollector({"tm-1": lambda: []}, host="h"))
    [(labels, rss)] = scraped["flink_taskmanager_Status_JVM_Memory_Heap_Used"]
    assert labels == {"host": "h", "tm_id": "tm-1"}
    assert rss > 1024 * 1024  # the Python process's resident memory
    assert scraped["flink_taskmanager_Status_JVM_Threads_Count"][0][1] >= 1
    assert not any(name.startswith("flink_taskmanager_job_task") for name in scraped)


class _Dispatcher:
    def __init__(self, jobs: list[JobDetails], stats: CheckpointStatistics) -> None:
        self.jobs, self.stats = jobs, stats

    def list_jobs(self) -> Future[list[JobDetails]]:
        return _done(self.jobs)

    def request_checkpoint_statistics(self, job_id: JobId) -> Future[CheckpointStatistics]:
        return _done(self.stats)


class _ResourceManager:
    def request_task_manager_infos(self) -> Future[list[TaskManagerInfo]]:
        return _done(
            [
                TaskManagerInfo(ResourceId("tm-1"), Address("tcp://a/tm-1"), 2, 1),
                TaskManagerInfo(ResourceId("tm-2"), Address("tcp://b/tm-2"), 2, 2),
            ]
        )


def _job(job_id: str, status: JobStatus, restarts: int = 0) -> JobDetails:
    return JobDetails(JobId(job_id), f"name-{job_id}", status, 0.0, 12.5, restarts=restarts)


def test_job_manager_metrics_have_flinks_names_and_labels() -> None:
    stats = CheckpointStatistics(
        1000,
        "EXACTLY_ONCE",
        completed=4,
        failed=1,
        in_progress=0,
        history=[CheckpointRecord(4, "COMPLETED", False, 0, duration_ms=85, state_size_bytes=2048)],
    )
    jobs = [_job("running", JobStatus.RUNNING, restarts=2), _job("done", JobStatus.FINISHED)]
    collector = JobManagerCollector(
        lambda: (_Dispatcher(jobs, stats), _ResourceManager()), timeout=1.0, host="h"
    )
    scraped = _scrape(collector)
    assert scraped["flink_jobmanager_numRegisteredTaskManagers"] == [({"host": "h"}, 2)]
    assert scraped["flink_jobmanager_taskSlotsTotal"] == [({"host": "h"}, 4)]
    assert scraped["flink_jobmanager_taskSlotsAvailable"] == [({"host": "h"}, 3)]
    assert scraped["flink_jobmanager_numRunningJobs"] == [({"host": "h"}, 1)]
    job = {"host": "h", "job_id": "running", "job_name": "name-running"}
    assert scraped["flink_jobmanager_job_numRestarts"] == [(job, 2)]  # a finished job: none
    assert scraped["flink_jobmanager_job_uptime"] == [(job, 12_500)]
    assert scraped["flink_jobmanager_job_downtime"] == [(job, 0)]
    assert scraped["flink_jobmanager_job_lastCheckpointDuration"] == [(job, 85)]
    assert scraped["flink_jobmanager_job_lastCheckpointSize"] == [(job, 2048)]
    assert scraped["flink_jobmanager_job_numberOfCompletedCheckpoints"] == [(job, 4)]
    assert scraped["flink_jobmanager_job_numberOfFailedCheckpoints"] == [(job, 1)]
    assert scraped["flink_jobmanager_job_numberOfInProgressCheckpoints"] == [(job, 0)]
    assert scraped["flink_jobmanager_Status_JVM_Memory_Heap_Used"][0][0] == {"host": "h"}


def test_a_standby_job_manager_shows_its_process_metrics_only() -> None:
    scraped = _scrape(JobManagerCollector(lambda: None, timeout=1.0, host="h"))
    assert set(scraped) == {
        "flink_jobmanager_Status_JVM_Memory_Heap_Used",
        "flink_jobmanager_Status_JVM_CPU_Time",
        "flink_jobmanager_Status_JVM_Threads_Count",
    }


def test_every_dashboard_metric_marked_provided_is_produced_with_its_labels() -> None:
    stats = CheckpointStatistics(1000, "EXACTLY_ONCE", 1, 0, 0)
    jobs = [_job("j", JobStatus.RUNNING)]
    scraped = _scrape(
        TaskManagerCollector({"tm-1": lambda: [SNAPSHOT]}, host="h"),
        JobManagerCollector(lambda: (_Dispatcher(jobs, stats), _ResourceManager()), 1.0, "h"),
    )
    for metric in dashboard_metrics():
        if metric.provided:
            assert metric.name in scraped, metric.name
            for labels, _ in scraped[metric.name]:
                assert set(metric.labels) <= set(labels), (metric.name, labels)
