"""Every dashboard page's REST requests answer correctly with 50 jobs and 20 TaskManagers
registered (simulated TaskManagers: real TaskExecutors without Spark, registered through
RegisterTaskManager; tests/runtime/dispatcher/dashboard_scale.py).

Each page's requests (as its JavaScript makes them) must answer 200 with the fields of the
issue-14 contract (/work/issue14/contract.md: Flink 1.19's REST shapes) and figures that add up
to the cluster's size. The answer times are measured by bench/dashboard_pages.py, not here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.runtime.dispatcher.dashboard_scale import ScaledCluster, page_requests

JOBS, TASKMANAGERS, SLOTS = 50, 20, 2

# The fields each path's answer must have (a list path: those of its entries).
SHAPES: list[tuple[str, set[str]]] = [
    (r"/overview", {"taskmanagers", "slots-total", "slots-available", "jobs-running"}),
    (r"/jobs/overview", {"jobs"}),
    (r"/jobs/[^/]+", {"jid", "name", "state", "vertices", "now", "plan", "status-counts"}),
    (r"/jobs/[^/]+/plan", {"plan"}),
    (r"/jobs/[^/]+/watermarks", {"min-clock", "tasks"}),
    (r"/jobs/[^/]+/vertices/[^/]+", {"id", "name", "parallelism", "subtasks"}),
    (r"/jobs/[^/]+/vertices/[^/]+/backpressure", {"status", "backpressureLevel", "subtasks"}),
    (r"/jobs/[^/]+/checkpoints", {"counts", "history"}),
    (r"/jobs/[^/]+/checkpoints/config", {"mode", "interval", "timeout"}),
    (r"/jobs/[^/]+/exceptions", {"root-exception", "exceptionHistory"}),
    (r"/jobs/[^/]+/config", {"jid", "name", "execution-config"}),
    (r"/taskmanagers", {"taskmanagers"}),
    (r"/taskmanagers/[^/]+", {"id", "slotsNumber", "freeSlots", "tasks", "allocatedSlots"}),
    (r"/jobmanager/config", {"key", "value"}),
    (r"/jobmanager/logs", {"logs"}),
]
JOB_ENTRY = {"jid", "name", "state", "start-time", "end-time", "duration", "tasks"}
TM_ENTRY = {"id", "path", "slotsNumber", "freeSlots", "dataPort", "timeSinceLastHeartbeat"}
PLAN_NODE = {"id", "parallelism", "operator", "inputs"}
SUBTASK = {"subtask", "status", "attempt", "endpoint", "taskmanager-id", "metrics"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[ScaledCluster]:
    with ScaledCluster(tmp_path_factory.mktemp("scale"), JOBS, TASKMANAGERS, SLOTS) as started:
        yield started


@pytest.fixture(scope="module")
def pages(cluster) -> dict[str, list[str]]:
    return page_requests(cluster)


def fields(path: str) -> set[str]:
    shape = [keys for pattern, keys in SHAPES if re.fullmatch(pattern, path)]
    assert shape, f"no shape for {path}"
    return shape[0]


def check(path: str, answer: Any) -> None:
    """The answer has the contract's fields, and the figures add up to the cluster's size."""
    entries = answer if isinstance(answer, list) else [answer]
    assert entries, f"{path}: empty"
    for entry in entries:
        missing = fields(path) - set(entry)
        assert not missing, f"{path} lacks {sorted(missing)}"
    if path == "/overview":
        assert answer["taskmanagers"] == TASKMANAGERS
        assert answer["slots-total"] == TASKMANAGERS * SLOTS
        ended = answer["jobs-finished"] + answer["jobs-failed"] + answer["jobs-cancelled"]
        assert answer["jobs-running"] + ended == JOBS and answer["jobs-finished"] == JOBS // 10
        assert answer["jobs-failed"] == 1
    elif path == "/jobs/overview":
        assert len(answer["jobs"]) == JOBS
        for job in answer["jobs"]:
            assert not JOB_ENTRY - set(job), sorted(JOB_ENTRY - set(job))
    elif path == "/taskmanagers":
        assert len(answer["taskmanagers"]) == TASKMANAGERS
        for tm in answer["taskmanagers"]:
            assert not TM_ENTRY - set(tm), sorted(TM_ENTRY - set(tm))
    elif path.endswith("/plan"):
        for node in answer["plan"]["nodes"]:
            assert not PLAN_NODE - set(node), sorted(PLAN_NODE - set(node))
    elif re.fullmatch(r"/jobs/[^/]+/vertices/[^/]+", path):
        assert len(answer["subtasks"]) == answer["parallelism"] == 1
        assert not SUBTASK - set(answer["subtasks"][0])
    elif re.fullmatch(r"/taskmanagers/[^/]+", path):
        assert len(answer["tasks"]) == SLOTS  # every slot runs a task: 45 jobs want 40 slots


@pytest.mark.parametrize(
    "page",
    [
        "overview",
        "jobs",
        "job",
        "job-vertex",
        "job-checkpoints",
        "job-exceptions",
        "job-config",
        "job-watermarks",
        "taskmanagers",
        "taskmanager",
        "jobmanager",
    ],
)
def test_every_request_of_the_page_answers_at_50_jobs_and_20_taskmanagers(
    cluster, pages, page
) -> None:
    for path in pages[page]:
        answer = cluster.client.get(path)
        assert answer.status_code == 200, f"{page}: {path} -> {answer.status_code} {answer.text}"
        check(path, answer.json())


def test_the_page_list_covers_every_page_of_the_dashboard(pages) -> None:
    assert set(pages) == {
        "overview",
        "jobs",
        "job",
        "job-vertex",
        "job-checkpoints",
        "job-exceptions",
        "job-config",
        "job-watermarks",
        "taskmanagers",
        "taskmanager",
        "jobmanager",
    }
