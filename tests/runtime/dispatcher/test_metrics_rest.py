"""The REST metric paths (Flink's shapes): subtask metrics aggregated over a vertex's running
subtasks, back pressure per subtask, TaskManager and JobManager metrics with values as
strings; unknown jobs, vertices and TaskManagers are 404."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from millrace.errors import JobSubmissionError
from millrace.runtime.dispatcher.metrics_rest import back_pressure_level, create_metrics_router
from millrace.runtime.executiongraph import IOMetrics, JobStatus
from millrace.runtime.job_result import JobDetails, VertexDetails
from millrace.runtime.metrics.metric_query_service import MetricDump
from millrace.runtime.metrics.task_io_metric_group import TaskMetricsSnapshot
from millrace.runtime.resourcemanager.slot_manager import TaskManagerInfo
from millrace.testing import TestingResourceManagerGateway
from millrace.types import Address, JobId, ResourceId


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    if isinstance(value, BaseException):
        future.set_exception(value)
    else:
        future.set_result(value)
    return future


class _Dispatcher:
    def __init__(self) -> None:
        vertex = VertexDetails("Source: words", 2, {"RUNNING": 2}, IOMetrics())
        self.job = JobDetails(JobId("job-1"), "words", JobStatus.RUNNING, 0.0, 1.0, [vertex])

    def request_job_details(self, job_id: JobId) -> Future[JobDetails]:
        if job_id != self.job.job_id:
            return _done(JobSubmissionError(f"no job {job_id}", job_id))
        return _done(self.job)

    def list_jobs(self) -> Future[list[JobDetails]]:
        return _done([self.job])


def _task(subtask: int, records_in: int, busy: float, idle: float) -> TaskMetricsSnapshot:
    return TaskMetricsSnapshot(
        "job-1",
        "words",
        "vertex-1",
        "Source: words",
        subtask,
        f"attempt-{subtask}",
        records_in=records_in,
        busy_ms_per_second=busy,
        idle_ms_per_second=idle,
        timestamp_ms=1000 + subtask,
    )


@pytest.fixture
def client() -> TestClient:
    rm = TestingResourceManagerGateway()
    rm.task_manager_infos = [TaskManagerInfo(ResourceId("tm-1"), Address("tcp://h:1/tm-1"), 2, 0)]
    other_job = TaskMetricsSnapshot("job-2", "x", "vertex-1", "x", 0, "a", records_in=999)
    rm.metric_dumps = [
        MetricDump(
            "tm-1",
            {"Status.JVM.Memory.Heap.Used": 123456789.0, "Status.JVM.Threads.Count": 12.0},
            (_task(1, 300, 250.0, 750.0), _task(0, 100, 1000.0, 0.0), other_job),
        )
    ]
    app = FastAPI()
    app.include_router(create_metrics_router(_Dispatcher(), rm, timeout=5.0))  # type: ignore[arg-type]
    return TestClient(app)


def test_subtask_metrics_list_the_names_then_aggregate_them(client) -> None:
    names = client.get("/jobs/job-1/vertices/vertex-1/subtasks/metrics").json()
    assert {"id": "numRecordsIn"} in names and {"id": "busyTimeMsPerSecond"} in names
    got = client.get(
        "/jobs/job-1/vertices/vertex-1/subtasks/metrics?get=numRecordsIn,nonsense"
    ).json()
    assert got == [{"id": "numRecordsIn", "min": 100.0, "max": 300.0, "avg": 200.0, "sum": 400.0}]
    some = client.get(
        "/jobs/job-1/vertices/vertex-1/subtasks/metrics?get=numRecordsIn&agg=sum,max"
    ).json()
    assert some == [{"id": "numRecordsIn", "max": 300.0, "sum": 400.0}]
    assert client.get("/jobs/job-1/vertices/vertex-1/subtasks/metrics?agg=p99").status_code == 400


def test_back_pressure_per_subtask_with_flinks_levels(client) -> None:
    body = client.get("/jobs/job-1/vertices/vertex-1/backpressure").json()
    assert body["status"] == "ok"
    assert body["backpressureLevel"] == "ok"
    assert body["end-timestamp"] == 1001
    assert body["subtasks"] == [
        {"subtask": 0, "backpressureLevel": "ok", "ratio": 0.0, "idleRatio": 0.0, "busyRatio": 1.0},
        {
            "subtask": 1,
            "backpressureLevel": "ok",
            "ratio": 0.0,
            "idleRatio": 0.75,
            "busyRatio": 0.25,
        },
    ]
    assert [back_pressure_level(r) for r in (0.0, 0.1, 0.11, 0.5, 0.51)] == [
        "ok",
        "ok",
        "low",
        "low",
        "high",
    ]


def test_task_manager_metrics_are_strings_as_flinks(client) -> None:
    names = client.get("/taskmanagers/tm-1/metrics").json()
    assert {"id": "Status.JVM.Memory.Heap.Used"} in names
    got = client.get("/taskmanagers/tm-1/metrics?get=Status.JVM.Memory.Heap.Used").json()
    assert got == [{"id": "Status.JVM.Memory.Heap.Used", "value": "123456789"}]
    assert client.get("/taskmanagers/tm-9/metrics").status_code == 404


def test_job_manager_metrics(client) -> None:
    got = client.get(
        "/jobmanager/metrics?get=numRegisteredTaskManagers,taskSlotsTotal,numRunningJobs"
    ).json()
    assert got == [
        {"id": "numRegisteredTaskManagers", "value": "1"},
        {"id": "taskSlotsTotal", "value": "2"},
        {"id": "numRunningJobs", "value": "1"},
    ]
    names = [m["id"] for m in client.get("/jobmanager/metrics").json()]
    assert "Status.JVM.Memory.Heap.Used" in names and "taskSlotsAvailable" in names


def test_an_unknown_job_is_404(client) -> None:
    assert client.get("/jobs/nope/vertices/vertex-1/subtasks/metrics").status_code == 404
    assert client.get("/jobs/nope/vertices/vertex-1/backpressure").status_code == 404
