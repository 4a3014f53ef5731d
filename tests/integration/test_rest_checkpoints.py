"""Flink's REST paths for checkpoints and savepoints, against a real JobManager process running
an unbounded job on two TaskManager processes: the checkpoint statistics (counts, latest,
history), triggering a savepoint and polling its status until it completes, and the status of a
savepoint that cannot be written (the job runs on).

One cluster serves the module's tests; every request that writes or reads a savepoint carries
the bearer token (a write without it is refused).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from millrace.runtime.checkpoint.checkpoint_storage import METADATA_FILE
from tests.integration.directory_job import directory_job, rest_auth
from tests.integration.standalone_cluster import StandaloneCluster
from tests.waiting import WAIT, wait_value

pytestmark = [pytest.mark.slow, pytest.mark.spark]

INTERVAL_MS = 300


@pytest.fixture(scope="module")
def running(spark, flights_dir, tmp_path_factory) -> Iterator[tuple[StandaloneCluster, str]]:
    """A cluster and the id of an unbounded job on it, checkpointing every 300 ms."""
    work = tmp_path_factory.mktemp("rest-checkpoints")
    settings = {
        "execution.checkpointing.interval": f"{INTERVAL_MS} ms",
        "source.discovery-interval": "200 ms",
    }
    with directory_job(spark, flights_dir, work, "rest-checkpoints", settings) as running:
        yield running


def token(cluster: StandaloneCluster) -> dict[str, str]:
    return rest_auth(cluster)


def get(cluster: StandaloneCluster, path: str) -> Any:
    response = httpx.get(
        f"http://127.0.0.1:{cluster.rest_port}{path}", headers=token(cluster), timeout=30
    )
    response.raise_for_status()
    return response.json()


def trigger(cluster: StandaloneCluster, job_id: str, target: Path, auth: bool = True) -> Any:
    return httpx.post(
        f"http://127.0.0.1:{cluster.rest_port}/jobs/{job_id}/savepoints",
        json={"target-directory": str(target), "cancel-job": False},
        headers=token(cluster) if auth else {},
        timeout=30,
    )


def savepoint_status(cluster: StandaloneCluster, job_id: str, request_id: str) -> Any:
    return wait_value(
        lambda: get(cluster, f"/jobs/{job_id}/savepoints/{request_id}"),
        lambda status: status["status"] == "COMPLETED",
        what=f"savepoint request {request_id} to complete",
    )


def test_checkpoint_statistics_show_counts_the_latest_and_the_history(running) -> None:
    cluster, job_id = running
    started = time.time() * 1000
    stats = wait_value(
        lambda: get(cluster, f"/jobs/{job_id}/checkpoints"),
        lambda s: s["counts"]["completed"] >= 3,
        what="3 completed checkpoints",
    )
    assert set(stats["counts"]) == {"completed", "failed", "in_progress"}
    assert stats["interval"] == INTERVAL_MS and stats["mode"] == "EXACTLY_ONCE"
    latest = stats["latest"]
    assert latest["status"] == "COMPLETED" and not latest["is_savepoint"]
    assert Path(latest["external_path"], METADATA_FILE).exists()
    assert latest["end_to_end_duration"] >= 0 and latest["trigger_timestamp"] <= time.time() * 1000
    assert latest["failure_message"] == ""
    history = stats["history"]
    ids = [c["id"] for c in history]
    assert ids == sorted(ids) and latest["id"] in ids
    assert {c["status"] for c in history} <= {"COMPLETED", "IN_PROGRESS", "FAILED"}
    assert stats["retained"] and stats["retained"][-1] == latest["external_path"]
    assert all(c["trigger_timestamp"] >= started - 120_000 for c in history)


def test_a_savepoint_is_triggered_polled_and_written(running) -> None:
    cluster, job_id = running
    target = cluster.work / "tmp" / "savepoints" / "by-rest"
    assert trigger(cluster, job_id, target, auth=False).status_code == 401
    accepted = trigger(cluster, job_id, target)
    assert accepted.status_code == 202, accepted.text
    request_id = accepted.json()["request-id"]
    status = savepoint_status(cluster, job_id, request_id)
    assert status["failure-cause"] is None, status
    location = Path(status["location"])
    assert location.parent == target and (location / METADATA_FILE).exists()
    history = get(cluster, f"/jobs/{job_id}/checkpoints")["history"]
    assert any(c["is_savepoint"] and c["status"] == "COMPLETED" for c in history), history
    unknown = httpx.get(
        f"http://127.0.0.1:{cluster.rest_port}/jobs/{job_id}/savepoints/no-such-request",
        headers=token(cluster),
        timeout=30,
    )
    assert unknown.status_code == 404
    assert get(cluster, f"/jobs/{job_id}")["state"] == "RUNNING"


def test_a_savepoint_that_cannot_be_written_reports_why_and_the_job_runs_on(running) -> None:
    cluster, job_id = running
    blocker = cluster.work / "tmp" / "savepoints" / "a-file"
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("not a directory")
    accepted = trigger(cluster, job_id, blocker / "below")
    assert accepted.status_code == 202, accepted.text
    status = savepoint_status(cluster, job_id, accepted.json()["request-id"])
    assert status["location"] is None
    assert status["failure-cause"] and "a-file" in status["failure-cause"], status
    history = get(cluster, f"/jobs/{job_id}/checkpoints")["history"]
    failed = [c for c in history if c["is_savepoint"] and c["status"] == "FAILED"]
    assert failed and "a-file" in failed[-1]["failure_message"], history
    before = get(cluster, f"/jobs/{job_id}/checkpoints")["counts"]["completed"]
    wait_value(  # checkpoints go on
        lambda: get(cluster, f"/jobs/{job_id}/checkpoints")["counts"]["completed"],
        lambda completed: completed > before,
        what="a checkpoint after the failed savepoint",
        timeout=WAIT,
    )
    assert get(cluster, f"/jobs/{job_id}")["state"] == "RUNNING"
