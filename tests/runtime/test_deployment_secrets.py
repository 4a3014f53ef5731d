"""Secrets never travel in task deployments (issue 9, case 6): a task sees the job's
configuration without the cluster secret or any other ``security.*`` key. MiniCluster without
Spark; the task is a plain invokable defined here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from millrace.config import Configuration
from millrace.runtime.job_result import JobResultSuccess
from millrace.runtime.jobgraph import JobGraph, JobVertex
from millrace.runtime.minicluster import MiniCluster
from millrace.runtime.taskexecutor.task_environment import AbstractInvokable
from millrace.testing import TestingTaskRuntime

WAIT = 10.0
SECRET = "never-in-a-deployment-0123456789"
SEEN: list[dict[str, object]] = []  # each task's configuration, as deployed


class RecordsItsConfiguration(AbstractInvokable):
    def invoke(self) -> None:
        SEEN.append(self.environment.configuration.to_dict())


@pytest.fixture
def cluster(tmp_path) -> Iterator[MiniCluster]:
    conf = Configuration(
        {
            "io.tmp.dirs": str(tmp_path),
            "restart-strategy.type": "none",
            "security.cluster-secret": SECRET,
            "security.ssl.key": str(tmp_path / "private.key"),
        }
    )
    with MiniCluster(conf, TestingTaskRuntime()) as mc:
        yield mc


def test_tasks_are_deployed_without_the_secret(cluster) -> None:
    SEEN.clear()
    vertex = JobVertex("v", 2, f"{__name__}:RecordsItsConfiguration", is_source=True)
    result = cluster.job_client.submit_job_wait(JobGraph("j", [vertex], [])).result(WAIT)
    assert isinstance(result, JobResultSuccess)
    assert len(SEEN) == 2
    for configuration in SEEN:
        assert SECRET not in map(str, configuration.values())
        assert not [k for k in configuration if k.startswith("security.")], configuration
        assert configuration["restart-strategy.type"] == "none"  # the rest is there
