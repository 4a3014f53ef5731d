"""Flink's REST paths (issue 14) against a real JobManager process running an unbounded job on
three TaskManager processes: every path answers with the shape of the contract and figures that
agree with ``/jobs/{id}``, a checkpoint's details show each vertex acknowledged, schemathesis
finds no server error and no response outside the OpenAPI document, the exception history shows
a TaskManager killed with SIGKILL (the failed task and that TaskManager), and stop with
savepoint writes a savepoint and ends the job CANCELED.

One cluster serves the module's tests, in order (the kill and the stop come last).
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from millrace.runtime.checkpoint.checkpoint_storage import METADATA_FILE
from tests.integration.directory_job import directory_job, rest_auth
from tests.integration.standalone_cluster import StandaloneCluster
from tests.waiting import WAIT, wait_value

pytestmark = [pytest.mark.slow, pytest.mark.spark]

SETTINGS = {
    "execution.checkpointing.interval": "300 ms",
    "source.discovery-interval": "200 ms",
    "heartbeat.interval": "0.2 s",
    "heartbeat.pause": "2 s",
    "rpc.ask-timeout": "10 s",
    "rpc.lookup-timeout": "3 s",
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": "3",
    "restart-strategy.fixed-delay.delay": "200 ms",
}
SUBTASK_KEYS = {
    "subtask",
    "status",
    "attempt",
    "endpoint",
    "start-time",
    "end-time",
    "duration",
    "metrics",
    "taskmanager-id",
    "status-duration",
}
METRIC_KEYS = {
    "read-records",
    "write-records",
    "read-bytes",
    "write-bytes",
    "accumulated-busy-time",
    "accumulated-idle-time",
    "accumulated-backpressured-time",
}


class Job:
    def __init__(self, cluster: StandaloneCluster, job_id: str) -> None:
        self.cluster, self.id = cluster, job_id
        self.auth = rest_auth(cluster)
        self.url = f"http://127.0.0.1:{cluster.rest_port}"

    def get(self, path: str) -> Any:
        response = httpx.get(self.url + path, timeout=30)
        assert response.status_code == 200, (path, response.status_code, response.text)
        return response.json()


@pytest.fixture(scope="module")
def job(spark, flights_dir, tmp_path_factory) -> Iterator[Job]:
    work = tmp_path_factory.mktemp("rest-api")
    with directory_job(spark, flights_dir, work, "rest-api", SETTINGS, taskmanagers=3) as (
        cluster,
        job_id,
    ):
        running = Job(cluster, job_id)
        wait_value(
            lambda: running.get(f"/jobs/{job_id}/checkpoints")["counts"]["completed"],
            lambda completed: completed >= 2,
            what="2 completed checkpoints",
        )
        yield running


def test_the_job_paths_answer_with_their_shapes_and_agree_with_the_job(job) -> None:
    details = job.get(f"/jobs/{job.id}")
    assert details["state"] == "RUNNING" and details["isStoppable"] is True
    assert {"timestamps", "status-counts", "plan", "now", "vertices", "restarts"} <= set(details)
    assert details["plan"] == job.get(f"/jobs/{job.id}/plan")["plan"]
    nodes = {n["id"]: n for n in details["plan"]["nodes"]}
    assert [v["id"] for v in details["vertices"]] == list(nodes)
    strategies = {i["ship_strategy"] for n in nodes.values() for i in n["inputs"]}
    assert "HASH" in strategies and strategies <= {"FORWARD", "HASH", "REBALANCE"}
    assert sum(details["status-counts"].values()) == sum(
        v["parallelism"] for v in details["vertices"]
    )
    [overview] = [j for j in job.get("/jobs/overview")["jobs"] if j["jid"] == job.id]
    assert overview["tasks"]["total"] == sum(details["status-counts"].values())
    assert overview["tasks"]["running"] == details["status-counts"]["RUNNING"]
    assert overview["start-time"] == details["start-time"] and overview["end-time"] == -1
    for vertex in details["vertices"]:
        assert set(vertex["metrics"]) >= METRIC_KEYS and vertex["status"] == "RUNNING"
        path = f"/jobs/{job.id}/vertices/{vertex['id']}"

        def agreeing(path: str = path, vertex_id: str = vertex["id"]) -> tuple[Any, Any]:
            again = job.get(f"/jobs/{job.id}")
            [shown] = [v for v in again["vertices"] if v["id"] == vertex_id]
            return shown, job.get(path)

        def add_up(pair: tuple[Any, Any]) -> bool:
            shown, detail = pair
            return all(
                sum(s["metrics"][key] for s in detail["subtasks"]) == shown["metrics"][key]
                for key in ("read-records", "write-records", "accumulated-busy-time")
            )

        _shown, detail = wait_value(agreeing, add_up, what=f"{path}'s subtasks to add up")
        assert (detail["id"], detail["parallelism"]) == (vertex["id"], vertex["parallelism"])
        assert len(detail["subtasks"]) == vertex["parallelism"]
        tms = {tm["id"] for tm in job.cluster.taskmanagers()}
        for subtask in detail["subtasks"]:
            assert set(subtask) == SUBTASK_KEYS and subtask["taskmanager-id"] in tms
            assert subtask["endpoint"].startswith("127.0.0.1:") and subtask["start-time"] > 0
        assert job.get(f"{path}/subtasks")["subtasks"][0]["subtask"] == 0
    config = job.get(f"/jobs/{job.id}/config")
    assert config["jid"] == job.id and config["execution-config"]["job-parallelism"] == 2
    checkpointing = job.get(f"/jobs/{job.id}/checkpoints/config")
    assert checkpointing["interval"] == 300 and checkpointing["mode"] == "EXACTLY_ONCE"
    assert job.get(f"/jobs/{job.id}/exceptions")["exceptionHistory"]["entries"] == []


def test_a_checkpoint_shows_every_vertex_acknowledged(job) -> None:
    stats = job.get(f"/jobs/{job.id}/checkpoints")
    latest = stats["latest"]
    checkpoint = job.get(f"/jobs/{job.id}/checkpoints/details/{latest['id']}")
    vertices = job.get(f"/jobs/{job.id}")["vertices"]
    assert checkpoint["status"] == "COMPLETED" and checkpoint["external_path"]
    # (a newer checkpoint may have replaced it by now: one is retained, one every 300 ms)
    assert checkpoint["external_path"].endswith(f"/{job.id}/chk-{latest['id']}")
    assert checkpoint["external_path"] == latest["external_path"]
    assert set(checkpoint["tasks"]) == {v["id"] for v in vertices}
    total = sum(v["parallelism"] for v in vertices)
    assert checkpoint["num_subtasks"] == checkpoint["num_acknowledged_subtasks"] == total
    assert checkpoint["trigger_timestamp"] <= checkpoint["latest_ack_timestamp"]
    assert checkpoint["state_size"] == sum(t["state_size"] for t in checkpoint["tasks"].values())
    for vertex in vertices:
        task = checkpoint["tasks"][vertex["id"]]
        assert task["num_subtasks"] == task["num_acknowledged_subtasks"] == vertex["parallelism"]
        assert task["end_to_end_duration"] >= 0 and task["latest_ack_timestamp"] > 0


def test_the_task_manager_and_job_manager_paths(job) -> None:
    listed = job.cluster.taskmanagers()
    busy = [tm for tm in listed if tm["freeSlots"] < tm["slotsNumber"]]
    assert busy
    for tm in listed:
        assert tm["hardware"]["cpuCores"] == os.cpu_count() and tm["dataPort"] > 0
        assert 0 <= tm["timeSinceLastHeartbeat"] < 5000
    tasks = []
    for tm in busy:
        detail = job.get(f"/taskmanagers/{tm['id']}")
        assert [s["jobId"] for s in detail["allocatedSlots"]] == [job.id] * len(
            detail["allocatedSlots"]
        )
        tasks += detail["tasks"]
    vertices = job.get(f"/jobs/{job.id}")["vertices"]
    assert len(tasks) == sum(v["parallelism"] for v in vertices)
    shown = {e["key"]: e["value"] for e in job.get("/jobmanager/config")}
    assert shown["security.cluster-secret.file"] == "******"
    assert shown["rest.port"] == str(job.cluster.rest_port)
    logs = job.get("/jobmanager/logs")["logs"]
    [log] = [entry for entry in logs if entry["name"].endswith(".log")]
    text = httpx.get(f"{job.url}/jobmanager/logs/{log['name']}", timeout=30).text
    assert "REST API at" in text


# A submitted JobGraph is msgpack bytes: generated as a binary string, sent as is.
schemathesis.serializer.alias("application/x-msgpack", "application/octet-stream")
FUZZ = settings(
    max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    content_type_conformance,
]


def fuzz_operation(operation, job: Job, known: dict[str, Any], seen: list[str]) -> None:  # type: ignore[no-untyped-def]
    """Hypothesis over one operation's requests, with the token: no 5xx, every answer as the
    OpenAPI document says; half the reads name the job's real objects."""
    label = f"{operation.method.upper()} {operation.path}"
    reads = operation.method.upper() == "GET"

    @FUZZ
    @given(case=operation.as_strategy())
    def check(case) -> None:  # type: ignore[no-untyped-def]
        if reads and case.path_parameters and len(seen) % 2 == 0:
            case.path_parameters = {k: known.get(k, v) for k, v in case.path_parameters.items()}
        response = case.call(base_url=job.url, headers=job.auth)
        seen.append(label)
        case.validate_response(response, checks=CHECKS)

    check()


def test_schemathesis_against_the_running_cluster_finds_no_error_or_schema_violation(job) -> None:
    schema = schemathesis.openapi.from_url(f"{job.url}/openapi.json")
    details = job.get(f"/jobs/{job.id}")
    known = {
        "jobid": job.id,
        "vertexid": details["vertices"][-1]["id"],
        "taskmanagerid": job.cluster.taskmanagers()[0]["id"],
        "checkpointid": job.get(f"/jobs/{job.id}/checkpoints")["latest"]["id"],
        "name": job.get("/jobmanager/logs")["logs"][0]["name"],
    }
    seen: list[str] = []
    for result in schema.get_all_operations():
        fuzz_operation(result.ok(), job, known, seen)
    assert {"GET /jobs/{jobid}/vertices/{vertexid}", "POST /jobs/{jobid}/stop"} <= set(seen)
    assert job.get(f"/jobs/{job.id}")["state"] == "RUNNING"  # fuzzing wrote nothing to it


def test_the_exception_history_shows_a_killed_task_manager_and_its_task(job) -> None:
    busy = next(tm for tm in job.cluster.taskmanagers() if tm["freeSlots"] < tm["slotsNumber"])
    victim, address = busy["id"], re.search(r"\d+\.\d+\.\d+\.\d+:\d+", busy["path"])[0]

    def names_victim(entry: dict[str, Any]) -> bool:
        # its own tasks (heartbeat timeout), or a partner's whose channel to it broke first
        # (the global failover then cancels the victim's tasks: they are not FAILED)
        return entry["taskManagerId"] == victim or address in entry["stacktrace"]

    before = job.get(f"/jobs/{job.id}")
    os.kill(job.cluster.pid_of(victim), signal.SIGKILL)
    exceptions = wait_value(
        lambda: job.get(f"/jobs/{job.id}/exceptions"),
        lambda shown: any(names_victim(e) for e in shown["exceptionHistory"]["entries"]),
        what="the exception history to show the killed TaskManager",
    )
    entries = exceptions["exceptionHistory"]["entries"]
    lost = [e for e in entries if names_victim(e)]
    names = {v["name"] for v in before["vertices"]}
    for entry in lost:
        assert entry["exceptionName"] in ("HeartbeatTimeoutError", "RecipientUnreachableError")
        assert victim in entry["stacktrace"] or address in entry["stacktrace"], entry
    for entry in entries:
        assert entry["endpoint"].startswith("127.0.0.1:") and entry["exceptionName"], entry
        assert entry["taskName"].rsplit(" (", 1)[0] in names
        assert entry["timestamp"] >= before["timestamps"]["RUNNING"]
    assert exceptions["root-exception"] and exceptions["timestamp"] > 0
    after = wait_value(
        lambda: job.get(f"/jobs/{job.id}"),
        lambda shown: (
            shown["restarts"] >= 1
            and shown["status-counts"]["RUNNING"]
            == sum(v["parallelism"] for v in shown["vertices"])
        ),
        what="the job to run again after the restart",
    )
    subtasks = job.get(f"/jobs/{job.id}/vertices/{after['vertices'][0]['id']}/subtasks")
    assert all(s["attempt"] >= 1 and s["taskmanager-id"] != victim for s in subtasks["subtasks"])
    assert after["timestamps"]["RESTARTING"] >= entries[-1]["timestamp"]


def test_stop_with_savepoint_writes_a_savepoint_and_cancels_the_job(job) -> None:
    wait_value(
        lambda: job.get(f"/jobs/{job.id}"),
        lambda shown: (
            shown["status-counts"]["RUNNING"] == sum(v["parallelism"] for v in shown["vertices"])
        ),
        what="every task RUNNING (after the previous test's restart)",
    )
    completed = job.get(f"/jobs/{job.id}/checkpoints")["counts"]["completed"]
    wait_value(
        lambda: job.get(f"/jobs/{job.id}/checkpoints")["counts"]["completed"],
        lambda now: now > completed,
        what="a checkpoint with every task RUNNING",
    )
    stop = f"{job.url}/jobs/{job.id}/stop"
    assert httpx.post(stop, json={}, timeout=30).status_code == 401
    target = job.cluster.work / "tmp" / "savepoints" / "stopped"
    accepted = httpx.post(stop, json={"targetDirectory": str(target)}, headers=job.auth, timeout=30)
    assert accepted.status_code == 202, accepted.text
    status = wait_value(
        lambda: httpx.get(
            f"{job.url}/jobs/{job.id}/savepoints/{accepted.json()['request-id']}",
            headers=job.auth,
            timeout=30,
        ).json(),
        lambda status: status["status"] == "COMPLETED",
        what="the stop's savepoint",
        timeout=WAIT,
    )
    assert status["failure-cause"] is None, status
    assert (target / os.path.basename(status["location"]) / METADATA_FILE).exists()
    ended = wait_value(
        lambda: job.get(f"/jobs/{job.id}"),
        lambda shown: shown["state"] == "CANCELED",
        what="the stopped job to end CANCELED",
    )
    assert ended["end-time"] >= ended["start-time"] and ended["isStoppable"] is False
    assert job.get(f"/jobs/{job.id}/exceptions")["exceptionHistory"]["entries"]  # kept
