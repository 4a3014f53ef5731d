"""JobPreparer: what a start does to the sinks, by what it restores.

A new leader recovers a job from this very job's latest checkpoint (high availability): its
commit must run before the rest of the staged data is dropped, since the former leader may have
died between completing and committing it (found by the Kafka/PostgreSQL kill -9 test: an
abort first deleted the files the commit still needed). A savepoint of an earlier job is
committed under that job after this one's staged data is dropped.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from millrace.config import Configuration
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointStorage
from millrace.runtime.jobgraph import JobGraph
from millrace.runtime.jobmaster import job_preparation
from millrace.runtime.jobmaster.job_preparation import JobPreparer, PreparedJob
from millrace.runtime.jobmaster.sink_committer import SinkCommitter
from millrace.types import JobId
from tests.runtime.jobmaster.test_sink_committer import RecordingSink, metadata
from tests.waiting import result_within


class InlineExecutor:
    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        done: Future[Any] = Future()
        done.set_result(fn(*args))
        return done


def prepare(job_id: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> RecordingSink:
    """Prepare job ``job_id`` whose savepoint path names checkpoint 3 of job ``job-1``."""
    sink = RecordingSink("sink")
    restored = metadata(3, {0: ("chk-3-file",)})  # a checkpoint of job "job-1"
    monkeypatch.setattr(
        job_preparation,
        "prepare_job",
        lambda *args: PreparedJob({}, {("win", 0): sink}, restored),  # type: ignore[arg-type]
    )
    graph = JobGraph("job", [], [], job_id=JobId(job_id), savepoint_path="/chk/chk-3")
    committer = SinkCommitter(graph.job_id, executor=InlineExecutor())  # type: ignore[arg-type]
    storage = CheckpointStorage(str(tmp_path / "chk"), str(tmp_path / "sp"))
    with ThreadPoolExecutor(1) as io:
        preparer = JobPreparer(graph, Configuration(), storage, committer, tmp_path / "w", io)
        result_within(preparer.prepare(None, graph.savepoint_path), 30, what="the preparation")
    return sink


def test_a_recovered_job_commits_its_own_latest_checkpoint_before_dropping_staged_data(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sink = prepare("job-1", monkeypatch, tmp_path)
    assert [call[0] for call in sink.calls] == ["commit", "abort"]
    assert sink.calls[0] == ("commit", "job-1", "3", "chk-3-file")


def test_a_savepoint_of_an_earlier_job_is_committed_after_this_jobs_staged_data_is_dropped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sink = prepare("job-2", monkeypatch, tmp_path)
    assert sink.calls == [("abort", "job-2"), ("commit", "job-1", "3", "chk-3-file")]
