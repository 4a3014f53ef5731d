"""The embedded cluster serves Prometheus metrics only when metrics.reporters is given: then its
JobManager's and every TaskManager's, with the tasks' counters moving."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from millrace.config import Configuration
from millrace.runtime.jobgraph import JobGraph, JobVertex
from millrace.runtime.minicluster import MiniCluster
from millrace.runtime.taskexecutor.task_environment import AbstractInvokable
from millrace.testing import TestingTaskRuntime
from tests.waiting import WAIT, wait_value


class CountsUntilCancelled(AbstractInvokable):
    """Reads a record every 20 ms and reports its progress, until cancelled."""

    def invoke(self) -> None:
        env = self.environment
        while True:
            env.check_cancelled()
            with env.io_metrics.idle():
                time.sleep(0.02)
            env.metrics.records_in += 1
            env.report_metrics()


def _conf(tmp_path, **extra: str) -> Configuration:
    return Configuration(
        {"io.tmp.dirs": str(tmp_path), "minicluster.number-of-taskmanagers": "2", **extra}
    )


@pytest.fixture
def cluster(tmp_path) -> Iterator[MiniCluster]:
    conf = _conf(tmp_path, **{"metrics.reporters": "prom", "metrics.reporter.prom.port": "0"})
    with MiniCluster(conf, TestingTaskRuntime()) as mc:
        yield mc


def _samples(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(httpx.get(url, timeout=30).text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def _records_in(samples: dict[str, list[tuple[dict[str, str], float]]]) -> float:
    return sum(v for _, v in samples.get("flink_taskmanager_job_task_numRecordsIn", []))


def test_without_the_key_no_reporter_starts(tmp_path) -> None:
    with MiniCluster(_conf(tmp_path), TestingTaskRuntime()) as mc:
        assert mc.metrics_url == ""


def test_the_jobmanager_and_every_taskmanager_are_reported(cluster) -> None:
    here = CountsUntilCancelled.__module__
    graph = JobGraph(
        "counting", [JobVertex("count", 2, f"{here}:CountsUntilCancelled", is_source=True)], []
    )
    cluster.job_client.submit_job_detached(graph).result(WAIT)
    first = wait_value(
        lambda: _samples(cluster.metrics_url),
        lambda s: len(s.get("flink_taskmanager_job_task_numRecordsIn", [])) == 2,
        what="both subtasks reported",
    )
    later = wait_value(
        lambda: _samples(cluster.metrics_url),
        lambda s: _records_in(s) > _records_in(first),
        what="numRecordsIn to grow",
    )
    tm_ids = {
        labels["tm_id"] for labels, _ in later["flink_taskmanager_Status_JVM_Memory_Heap_Used"]
    }
    assert tm_ids == {"taskmanager-0", "taskmanager-1"}
    assert later["flink_jobmanager_numRegisteredTaskManagers"][0][1] == 2
    assert later["flink_jobmanager_numRunningJobs"][0][1] == 1
    [(labels, _)] = later["flink_jobmanager_job_uptime"]
    assert (labels["job_id"], labels["job_name"]) == (graph.job_id, "counting")
    idle = later["flink_taskmanager_job_task_accumulatedIdleTime"]
    assert all(value > 0 for _, value in idle)
    cluster.job_client.cancel_job(graph.job_id).result(WAIT)
