"""A live change through the JobMaster's gateway, with a testing TaskExecutor (no Spark, a
ManualClock): the savepoint's barrier, the old tasks cancelled, the new ones deployed at the new
parallelism under the same job id, the job never ending; and the refusals."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from millrace.errors import CheckpointError, JobChangeError
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.deployment import TaskExecutionState
from millrace.runtime.executiongraph import ExecutionState, JobStatus
from millrace.runtime.jobmaster.job_change import JobChangeRequest
from tests.runtime.jobmaster.test_job_master import WAIT, Cluster
from tests.waiting import wait_until


@pytest.fixture
def cluster(tmp_path) -> Iterator[Cluster]:
    started = Cluster(
        tmp_path,
        **{
            "state.checkpoints.dir": str(tmp_path / "checkpoints"),
            "state.savepoints.dir": str(tmp_path / "savepoints"),
        },
    )
    try:
        yield started
    finally:
        started.close()


def report(cluster: Cluster, tdd: Any, state: ExecutionState) -> None:
    cluster.gateway.update_task_execution_state(
        TaskExecutionState(tdd.job_id, tdd.attempt_id, state)
    ).result(WAIT)


def test_a_rescale_restarts_the_tasks_from_a_savepoint_under_the_same_job_id(cluster) -> None:
    tdds = cluster.offer_both_slots()
    for tdd in tdds:
        report(cluster, tdd, ExecutionState.RUNNING)
    changing = cluster.gateway.change_job(JobChangeRequest(parallelism=1), timeout=WAIT)
    wait_until(lambda: len(cluster.te.called("trigger_checkpoint")) == 2, what="2 barriers")
    savepoint_id = cluster.te.called("trigger_checkpoint")[0][1]
    for tdd in tdds:
        cluster.gateway.acknowledge_checkpoint(tdd.attempt_id, savepoint_id, TaskStateSnapshot())
    wait_until(lambda: len(cluster.te.called("cancel_task")) == 2, what="the old tasks cancelled")
    assert not changing.done()
    for tdd in tdds:
        report(cluster, tdd, ExecutionState.CANCELED)
    wait_until(lambda: len(cluster.te.called("submit_task")) == 3, what="the new task deployed")
    [new] = [args[0] for args in cluster.te.called("submit_task")[2:]]
    assert new.job_id == tdds[0].job_id and new.subtask_index == 0
    assert new.restore is not None and new.parallelism == 1
    report(cluster, new, ExecutionState.RUNNING)
    cluster.advance(0.1)  # the JobMaster looks at the new tasks every 50 ms
    result = changing.result(WAIT)
    assert result.job_id == new.job_id and result.checkpoint_id == savepoint_id
    assert result.barrier_ms <= result.stopped_ms <= result.sources_ms <= result.running_ms
    assert result.downtime_ms == result.running_ms - result.stopped_ms
    details = cluster.gateway.request_job_details().result(WAIT)
    assert details.status is JobStatus.RUNNING and details.vertices[0].parallelism == 1
    assert not cluster.job_master.result_future.done()  # the job did not end
    assert cluster.te.called("free_slot") == []  # and kept its slots


def test_a_cancel_between_the_stop_and_the_restart_ends_the_job(cluster) -> None:
    tdds = cluster.offer_both_slots()
    for tdd in tdds:
        report(cluster, tdd, ExecutionState.RUNNING)
    changing = cluster.gateway.change_job(JobChangeRequest(parallelism=1), timeout=WAIT)
    wait_until(lambda: len(cluster.te.called("trigger_checkpoint")) == 2, what="2 barriers")
    savepoint_id = cluster.te.called("trigger_checkpoint")[0][1]
    for tdd in tdds:
        cluster.gateway.acknowledge_checkpoint(tdd.attempt_id, savepoint_id, TaskStateSnapshot())
    wait_until(lambda: len(cluster.te.called("cancel_task")) == 2, what="the old tasks cancelled")
    cluster.gateway.cancel().result(WAIT)  # the user cancels while the change stops the job
    for tdd in tdds:
        report(cluster, tdd, ExecutionState.CANCELED)
    error = changing.exception(WAIT)
    assert isinstance(error, JobChangeError) and "cancelled during the change" in str(error)
    result = cluster.job_master.result_future.result(WAIT)
    assert result.status is JobStatus.CANCELED
    assert len(cluster.te.called("submit_task")) == 2  # nothing deployed again


def test_a_change_is_refused_with_the_reason(cluster) -> None:
    def refusal(request: JobChangeRequest) -> BaseException | None:
        return cluster.gateway.change_job(request, timeout=WAIT).exception(WAIT)

    error = refusal(JobChangeRequest(transform="tag", payload=b"x"))
    assert isinstance(error, JobChangeError) and "no transform named 'tag'" in str(error)
    error = refusal(JobChangeRequest(parallelism=1))  # the tasks are not deployed yet
    assert isinstance(error, CheckpointError) and "not every task is RUNNING" in str(error)
    cluster.gateway.cancel().result(WAIT)
    error = refusal(JobChangeRequest(parallelism=1))
    assert isinstance(error, JobChangeError) and "CANCELED, not RUNNING" in str(error)


def test_a_batch_job_is_not_changed(tmp_path) -> None:
    cluster = Cluster(tmp_path, **{"execution.runtime-mode": "BATCH"})
    try:
        error = cluster.gateway.change_job(JobChangeRequest(parallelism=1)).exception(WAIT)
        assert isinstance(error, JobChangeError) and "BATCH job" in str(error)
    finally:
        cluster.close()


def test_a_job_with_concurrent_checkpoints_is_not_changed(tmp_path) -> None:
    """A periodic checkpoint after the savepoint's barrier could complete after the old tasks
    stopped and commit what the new tasks replay: a change needs one checkpoint at a time."""
    cluster = Cluster(tmp_path, **{"execution.checkpointing.max-concurrent-checkpoints": "2"})
    try:
        error = cluster.gateway.change_job(JobChangeRequest(parallelism=1)).exception(WAIT)
        assert isinstance(error, JobChangeError), error
        assert "max-concurrent-checkpoints=2" in str(error)
    finally:
        cluster.close()
