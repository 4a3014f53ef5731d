"""Flink's job, TaskManager and JobManager REST paths in process, on a MiniCluster without Spark
(real Dispatcher, ResourceManager, JobMasters and TaskExecutors on a LocalRpcService; tasks are
plain invokables defined here): shapes and figures, 404s, masked secrets, log files confined
to the log directory, and stop with savepoint behind the token."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from millrace.config import Configuration
from millrace.runtime.checkpoint.savepoint_targets import SavepointTargets
from millrace.runtime.control_messages import control_message_codec
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.dispatcher.execution_graph_archive import archived_from_details
from millrace.runtime.dispatcher.rest_endpoint import create_rest_app
from millrace.runtime.dispatcher.rest_job_views import job_details
from millrace.runtime.executiongraph import IOMetrics, JobStatus
from millrace.runtime.job_result import JobDetails, JobResultFailure, VertexDetails
from millrace.runtime.jobgraph import DistributionPattern, JobEdge, JobGraph, JobVertex
from millrace.runtime.minicluster import MiniCluster
from millrace.runtime.resourcemanager.resource_manager_gateway import ResourceManagerGateway
from millrace.runtime.taskexecutor.task_environment import AbstractInvokable
from millrace.testing import TestingTaskRuntime
from millrace.types import JobId
from tests.waiting import wait_value

WAIT = 10.0
HERE = __name__
TOKEN = "b" * 64
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RELEASE = threading.Event()
ATTEMPTS: list[int] = []


class RunsUntilReleased(AbstractInvokable):
    def invoke(self) -> None:
        self.environment.metrics.records_in += 5
        deadline = time.monotonic() + 3 * WAIT
        while not RELEASE.wait(0.01):
            self.environment.check_cancelled()
            assert time.monotonic() < deadline


class FailsOnce(AbstractInvokable):
    def invoke(self) -> None:
        ATTEMPTS.append(self.environment.subtask_index)
        if len(ATTEMPTS) == 1:
            raise RuntimeError("first attempt fails")


@dataclass
class Rest:
    client: TestClient
    cluster: MiniCluster
    log_dir: Path


@pytest.fixture
def rest(tmp_path) -> Iterator[Rest]:
    conf = Configuration(
        {
            "io.tmp.dirs": str(tmp_path),
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 2,
            "restart-strategy.fixed-delay.delay": "50 ms",
            "minicluster.number-of-taskmanagers": 2,
            "heartbeat.interval": "50 ms",
            "heartbeat.pause": "5 s",
            "execution.checkpointing.timeout": "1 s",
            "security.cluster-secret": "do-not-show-me",
            "s3.access-key": "AKIA-do-not-show",
            "my.api.token": "tok-do-not-show",
        }
    )
    RELEASE.clear()
    ATTEMPTS.clear()
    with MiniCluster(conf, TestingTaskRuntime()) as cluster:
        assert cluster.dispatcher is not None and cluster.resource_manager is not None
        app = create_rest_app(
            cluster.dispatcher.get_self_gateway(DispatcherGateway),
            cluster.resource_manager.get_self_gateway(ResourceManagerGateway),
            control_message_codec(),
            TOKEN,
            max_body_bytes=64 * 1024,
            timeout=WAIT,
            savepoint_targets=SavepointTargets.from_configuration(conf),
        )
        with TestClient(app, base_url="http://127.0.0.1") as client:
            yield Rest(client, cluster, tmp_path / "log")
        RELEASE.set()


def submit(rest: Rest, graph: JobGraph) -> str:
    answer = rest.client.post("/jobs", content=control_message_codec().encode(graph), headers=AUTH)
    assert answer.status_code == 202, answer.text
    return graph.job_id


def get(rest: Rest, path: str) -> Any:
    answer = rest.client.get(path)
    assert answer.status_code == 200, (path, answer.status_code, answer.text)
    return answer.json()


def running_job(rest: Rest) -> tuple[str, JobGraph]:
    source = JobVertex("source", 2, f"{HERE}:RunsUntilReleased", is_source=True)
    sink = JobVertex("sink", 2, f"{HERE}:RunsUntilReleased", is_source=True)
    graph = JobGraph(
        "runs",
        [source, sink],
        [JobEdge(source.vertex_id, sink.vertex_id, DistributionPattern.HASH, ("k",))],
    )
    job_id = submit(rest, graph)
    wait_value(
        lambda: get(rest, f"/jobs/{job_id}"),
        lambda job: job["status-counts"]["RUNNING"] == 4,
        what="4 subtasks RUNNING",
        timeout=WAIT,
    )
    return job_id, graph


def test_job_vertex_and_subtask_paths_show_the_running_subtasks_and_their_task_managers(
    rest,
) -> None:
    job_id, graph = running_job(rest)
    job = get(rest, f"/jobs/{job_id}")
    assert job["state"] == "RUNNING" and job["isStoppable"] is True
    assert {"jid", "name", "start-time", "end-time", "duration", "restarts", "vertices"} <= set(job)
    assert job["timestamps"]["CREATED"] <= job["timestamps"]["RUNNING"] <= job["now"]
    assert job["timestamps"]["FINISHED"] == 0
    assert [v["id"] for v in job["vertices"]] == [v.vertex_id for v in graph.vertices]
    assert job["plan"] == get(rest, f"/jobs/{job_id}/plan")["plan"]
    sink_node = job["plan"]["nodes"][1]
    assert sink_node["inputs"] == [
        {
            "num": 0,
            "id": graph.vertices[0].vertex_id,
            "ship_strategy": "HASH",
            "exchange": "pipelined_bounded",
        }
    ]
    assert job["plan"]["type"] == "STREAMING"
    infos = {tm["id"]: tm for tm in get(rest, "/taskmanagers")["taskmanagers"]}
    for vertex in job["vertices"]:
        assert vertex["status"] == "RUNNING" and vertex["maxParallelism"] == graph.max_parallelism
        assert vertex["tasks"] == {"RUNNING": 2} and vertex["end-time"] == -1
        assert vertex["start-time"] > 0 and vertex["duration"] >= 0
        detail = get(rest, f"/jobs/{job_id}/vertices/{vertex['id']}")
        assert (detail["id"], detail["name"], detail["parallelism"]) == (
            vertex["id"],
            vertex["name"],
            2,
        )
        subtasks = detail["subtasks"]
        assert [s["subtask"] for s in subtasks] == [0, 1]
        assert (
            get(rest, f"/jobs/{job_id}/vertices/{vertex['id']}/subtasks")["subtasks"][0][
                "taskmanager-id"
            ]
            == subtasks[0]["taskmanager-id"]
        )
        for s in subtasks:
            assert s["status"] == "RUNNING" and s["attempt"] == 0 and s["end-time"] == -1
            assert s["taskmanager-id"] in infos
            assert f"://{s['endpoint']}/" in infos[s["taskmanager-id"]]["path"]
            assert s["start-time"] >= job["start-time"]
            assert set(s["status-duration"]) >= {"CREATED", "SCHEDULED", "DEPLOYING", "RUNNING"}
            assert set(s["metrics"]) == set(vertex["metrics"])
        # the subtasks' records add up to the vertex's
        for key in ("read-records", "write-records", "accumulated-busy-time"):
            assert sum(s["metrics"][key] for s in subtasks) == vertex["metrics"][key]
    overview = {j["jid"]: j for j in get(rest, "/jobs/overview")["jobs"]}
    assert overview[job_id]["tasks"]["running"] == overview[job_id]["tasks"]["total"] == 4
    assert overview[job_id]["last-modification"] >= job["timestamps"]["RUNNING"]
    config = get(rest, f"/jobs/{job_id}/config")
    assert config["execution-config"]["execution-mode"] == "PIPELINED"
    assert "FixedDelay" in config["execution-config"]["restart-strategy"]
    checkpoints = get(rest, f"/jobs/{job_id}/checkpoints/config")
    assert checkpoints["mode"] == "EXACTLY_ONCE" and checkpoints["interval"] == 0


def test_a_task_manager_shows_its_hardware_heartbeat_slots_and_tasks(rest) -> None:
    job_id, _ = running_job(rest)
    listed = get(rest, "/taskmanagers")["taskmanagers"]
    assert len(listed) == 2
    for entry in listed:
        assert entry["hardware"]["cpuCores"] == os.cpu_count()
        assert entry["hardware"]["physicalMemory"] > 0 and entry["timeSinceLastHeartbeat"] >= 0
        detail = get(rest, f"/taskmanagers/{entry['id']}")
        same = [k for k in entry if k != "timeSinceLastHeartbeat"]
        assert {k: detail[k] for k in same} == {k: entry[k] for k in same}
        wait_value(  # Linux: read from /proc, sent with the heartbeats
            lambda tm=entry["id"]: get(rest, f"/taskmanagers/{tm}")["memory"]["rss"],
            lambda rss: rss > 0,
            what="the resident memory of a heartbeat",
            timeout=WAIT,
        )
        held = entry["slotsNumber"] - entry["freeSlots"]
        assert len(detail["allocatedSlots"]) == held
        assert all(s["jobId"] == job_id for s in detail["allocatedSlots"])
        assert all(t["jobId"] == job_id and t["status"] == "RUNNING" for t in detail["tasks"])
    tasks = [t for e in listed for t in get(rest, f"/taskmanagers/{e['id']}")["tasks"]]
    assert sorted(t["taskName"] for t in tasks) == [
        "sink (1/2)",
        "sink (2/2)",
        "source (1/2)",
        "source (2/2)",
    ]


def test_the_exception_history_shows_the_failed_task_and_its_task_manager(rest) -> None:
    graph = JobGraph("fails once", [JobVertex("v", 2, f"{HERE}:FailsOnce", is_source=True)], [])
    job_id = submit(rest, graph)
    job = wait_value(
        lambda: get(rest, f"/jobs/{job_id}"),
        lambda job: job["state"] == "FINISHED",
        what="the job to finish after one restart",
        timeout=WAIT,
    )
    assert job["restarts"] == 1 and job["timestamps"]["RESTARTING"] > 0
    exceptions = get(rest, f"/jobs/{job_id}/exceptions")  # from the Dispatcher's archive
    [entry] = exceptions["exceptionHistory"]["entries"]
    assert entry["taskName"] in ("v (1/2)", "v (2/2)")
    assert entry["exceptionName"] == "RuntimeError" and "first attempt fails" in entry["stacktrace"]
    assert entry["taskManagerId"] and entry["endpoint"]
    assert job["timestamps"]["CREATED"] <= entry["timestamp"] <= job["timestamps"]["RESTARTING"]
    assert exceptions["root-exception"] == entry["stacktrace"]
    subtasks = get(rest, f"/jobs/{job_id}/vertices/{graph.vertices[0].vertex_id}/subtasks")
    assert {s["attempt"] for s in subtasks["subtasks"]} == {1}  # the restarted attempts
    assert {s["status"] for s in subtasks["subtasks"]} == {"FINISHED"}


def test_unknown_jobs_vertices_task_managers_and_checkpoints_are_not_found(rest) -> None:
    job_id, _ = running_job(rest)
    missing = [
        "/jobs/nope",
        "/jobs/nope/plan",
        "/jobs/nope/exceptions",
        "/jobs/nope/config",
        "/jobs/nope/checkpoints/config",
        "/jobs/nope/checkpoints/details/1",
        "/jobs/nope/vertices/v",
        "/jobs/nope/vertices/v/subtasks",
        f"/jobs/{job_id}/vertices/nope",
        f"/jobs/{job_id}/vertices/nope/subtasks",
        f"/jobs/{job_id}/checkpoints/details/1",
        "/taskmanagers/nope",
        "/jobmanager/logs/nope.log",
    ]
    for path in missing:
        answer = rest.client.get(path)
        assert answer.status_code == 404, (path, answer.status_code, answer.text)
        assert answer.json()["errors"], path


def test_the_jobmanager_configuration_masks_secrets(rest) -> None:
    shown = {e["key"]: e["value"] for e in get(rest, "/jobmanager/config")}
    for secret in ("security.cluster-secret", "s3.access-key", "my.api.token"):
        assert shown[secret] == "******", secret
    assert "do-not-show" not in str(shown)
    assert shown["restart-strategy.type"] == "fixed-delay" and shown["rest.port"] == "8081"


def test_only_the_jobmanager_log_files_in_the_log_directory_are_served(rest, tmp_path) -> None:
    rest.log_dir.mkdir(parents=True, exist_ok=True)
    (rest.log_dir / "jobmanager-20261127-1.log").write_text("the JobManager's log\n")
    (rest.log_dir / "taskmanager-20261127-2.log").write_text("not the JobManager's\n")
    outside = tmp_path / "jobmanager-outside.log"
    outside.write_text("secret\n")
    (rest.log_dir / "jobmanager-link.log").symlink_to(outside)
    listed = get(rest, "/jobmanager/logs")["logs"]
    assert [entry["name"] for entry in listed] == ["jobmanager-20261127-1.log"]
    assert listed[0]["size"] == len("the JobManager's log\n") and listed[0]["mtime"] > 0
    answer = rest.client.get("/jobmanager/logs/jobmanager-20261127-1.log")
    assert answer.status_code == 200 and answer.text == "the JobManager's log\n"
    assert answer.headers["content-type"].startswith("text/plain")
    for name in (
        "taskmanager-20261127-2.log",
        "jobmanager-link.log",
        "..%2Fjobmanager-outside.log",
        "..%2F..%2Fjobmanager-outside.log",
        "%2E%2E",
    ):
        answer = rest.client.get(f"/jobmanager/logs/{name}")
        assert answer.status_code == 404, (name, answer.status_code, answer.text)
        assert "secret" not in answer.text


def test_stop_with_savepoint_needs_the_token_and_answers_a_savepoint_request(rest) -> None:
    job_id, _ = running_job(rest)
    assert rest.client.post(f"/jobs/{job_id}/stop", json={}).status_code == 401
    assert rest.client.post("/jobs/nope/stop", json={}, headers=AUTH).status_code == 404
    drained = rest.client.post(f"/jobs/{job_id}/stop", json={"drain": True}, headers=AUTH)
    assert drained.status_code == 400
    outside = rest.client.post(
        f"/jobs/{job_id}/stop", json={"targetDirectory": "/elsewhere"}, headers=AUTH
    )
    assert outside.status_code == 400, outside.text
    stopped = rest.client.post(f"/jobs/{job_id}/stop", json={}, headers=AUTH)
    assert stopped.status_code == 202, stopped.text
    path = f"/jobs/{job_id}/savepoints/{stopped.json()['request-id']}"
    assert rest.client.get(path).status_code == 401  # its status is read with the token too
    status = wait_value(
        lambda: rest.client.get(path, headers=AUTH).json(),
        lambda status: status["status"] == "COMPLETED",
        what="the stop's savepoint request to finish",
        timeout=WAIT,
    )
    # the testing tasks take no snapshots: the savepoint times out, and the job is not stopped
    assert "not complete within 1 s" in status["failure-cause"], status
    assert get(rest, f"/jobs/{job_id}")["state"] == "RUNNING"


def test_a_job_recovered_from_the_result_store_shows_its_details_without_a_snapshot() -> None:
    vertex = VertexDetails("v", 2, {"FAILED": 1, "CANCELED": 1}, IOMetrics(records_in=7))
    details = JobDetails(JobId("j"), "recovered", JobStatus.FAILED, 1_700_000_000.0, 2.5, [vertex])
    info = archived_from_details(
        JobResultFailure(JobId("j"), JobStatus.FAILED, 2.5, "boom", details)
    )
    shown = job_details(info)
    assert (shown.state, shown.start_time, shown.end_time) == (
        "FAILED",
        1_700_000_000_000,
        1_700_000_002_500,
    )
    [vertex_shown] = shown.vertices
    assert (vertex_shown.status, vertex_shown.metrics.read_records, vertex_shown.id) == (
        "FAILED",
        7,
        "",
    )
    assert shown.plan.nodes == [] and info.root_exception == "boom"
    assert shown.timestamps["FAILED"] == 1_700_000_002_500
