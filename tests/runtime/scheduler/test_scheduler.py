"""The Scheduler on a ManualClock, without RPC, Spark or threads: deployment, task states, every
failover path (a task failure, a lost TaskManager, a failure while restarting, no restart left,
a failed final commit) and cancellation.

The JobMaster's main thread is the testing kit's ManuallyTriggeredMainThreadExecutor; blocking
work (preparation, storage, sink commits) runs inline; the TaskExecutors are
TestingTaskExecutorGateways whose calls the tests read back and answer with task states.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from concurrent.futures import Executor, Future
from typing import Any

import pytest

from millrace.clock import ManualClock
from millrace.config import Configuration
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata, CheckpointStorage
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.deployment import TaskDeploymentDescriptor, TaskExecutionState
from millrace.runtime.executiongraph import ExecutionGraph, ExecutionState, JobStatus
from millrace.runtime.job_result import JobResult, JobResultFailure, JobResultSuccess
from millrace.runtime.jobgraph import JobGraph, JobVertex
from millrace.runtime.jobmaster.job_preparation import PreparedJob
from millrace.runtime.jobmaster.sink_committer import SinkCommitter
from millrace.runtime.jobmaster.slot_pool import AllocatedSlot, SlotPool
from millrace.runtime.scheduler import Scheduler
from millrace.testing import ManuallyTriggeredMainThreadExecutor, TestingTaskExecutorGateway
from millrace.types import Address, AllocationId, ExecutionAttemptId

DELAY = 1.0  # restart-strategy.fixed-delay.delay, seconds


class InlineExecutor(Executor):
    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:
            future.set_exception(error)
        return future


class HeldExecutor(Executor):
    """Runs nothing until ``release``: a checkpoint's metadata write still in progress."""

    def __init__(self) -> None:
        self.held: list[tuple[Future[Any], Any]] = []

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        future: Future[Any] = Future()
        self.held.append((future, lambda: fn(*args, **kwargs)))
        return future

    def release(self) -> None:
        while self.held:
            future, call = self.held.pop(0)
            try:
                future.set_result(call())
            except Exception as error:
                future.set_exception(error)


class Preparer:
    """Plays the JobPreparer: records what each (re)start restores."""

    def __init__(self) -> None:
        self.restores: list[CheckpointMetadata | None] = []
        self.fail_next: Exception | None = None

    def prepare(self, restore_from: CheckpointMetadata | None, savepoint: str | None) -> Any:
        self.restores.append(restore_from)
        future: Future[PreparedJob] = Future()
        if self.fail_next is not None:
            future.set_exception(self.fail_next)
            self.fail_next = None
        else:
            future.set_result(PreparedJob({}, {}))
        return future


class FlakySink:
    """A sink whose commits fail while ``failures`` lasts."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.commits: list[int] = []

    def describe(self) -> str:
        return "flaky sink"

    def commit(self, job_id: str, commit_id: int, pending: Sequence[str]) -> None:
        if self.failures:
            self.failures -= 1
            raise OSError("database down")
        self.commits.append(commit_id)

    def pending(self, job_id: str, attempt_ids: Collection[str]) -> list[str]:
        return ["staged-at-the-end"]

    def abort(self, job_id: str, keep: Collection[str] = ()) -> None:
        pass


class StagingSink(FlakySink):
    """A sink with staged handles that a commit consumes; committing one that is gone fails,
    as a file staged for PostgreSQL that an earlier commit already loaded."""

    def __init__(self) -> None:
        super().__init__(failures=0)
        self.staged: set[str] = set()
        self.committed: list[tuple[int, tuple[str, ...]]] = []

    def commit(self, job_id: str, commit_id: int, pending: Sequence[str]) -> None:
        gone = [h for h in pending if h not in self.staged]
        if gone:
            raise OSError(f"staged {gone} of commit {commit_id} is gone")
        self.staged -= set(pending)
        self.committed.append((commit_id, tuple(pending)))
        super().commit(job_id, commit_id, pending)

    def pending(self, job_id: str, attempt_ids: Collection[str]) -> list[str]:
        return sorted(self.staged)


class Job:
    """One job of 2 source subtasks in 2 slots of one TaskManager, and its Scheduler."""

    def __init__(
        self,
        tmp_path: Any,
        attempts: int = 2,
        sink: FlakySink | None = None,
        io: Executor | None = None,
    ) -> None:
        self.main_thread = ManuallyTriggeredMainThreadExecutor(ManualClock())
        self.graph = JobGraph("job", [JobVertex("source", 2, "m:Source", (), True, "src")], [])
        self.gateway = TestingTaskExecutorGateway()
        self.slots = SlotPool()
        self.preparer = Preparer()
        self.results: list[JobResult] = []
        self.slot_requests = 0
        self.released: list[str] = []
        committer = SinkCommitter(self.graph.job_id, InlineExecutor())
        if sink is not None:
            committer.set_sinks({("src", 1): sink})
        configuration = Configuration(
            {
                "io.tmp.dirs": str(tmp_path),
                "restart-strategy.type": "fixed-delay",
                "restart-strategy.fixed-delay.attempts": attempts,
                "restart-strategy.fixed-delay.delay": f"{DELAY} s",
            }
        )
        self.scheduler = Scheduler(
            ExecutionGraph(self.graph),
            configuration,
            self.main_thread,
            io or InlineExecutor(),
            self.preparer,  # type: ignore[arg-type]
            committer,
            CheckpointStorage(str(tmp_path / "chk"), str(tmp_path / "sp")),
            self.slots,
            "local://test/jobmaster",
            {},
            self,
        )

    # SchedulerContext
    def request_slots(self) -> None:
        self.slot_requests += 1
        if len(self.slots) < 2:
            for i in range(2):
                self.slots.add(
                    AllocatedSlot(
                        AllocationId(f"alloc-{i}"), "tm-1", Address("local://t/tm-1"), self.gateway
                    )
                )
        self.main_thread.execute(self.scheduler.slots_ready)

    def release_task_manager(self, resource_id: str, cause: str) -> None:
        self.released.append(resource_id)

    def job_terminated(self, result: JobResult) -> None:
        self.results.append(result)

    # driving it
    def start(self) -> None:
        self.scheduler.start()
        self.main_thread.trigger_all()

    def deployed(self) -> list[TaskDeploymentDescriptor]:
        return [args[0] for args in self.gateway.called("submit_task")]

    def report(self, attempt: str, state: ExecutionState, error: str | None = None) -> None:
        self.scheduler.update_task_execution_state(
            TaskExecutionState(self.graph.job_id, ExecutionAttemptId(attempt), state, None, error)
        )
        self.main_thread.trigger_all()

    def run_all(self) -> list[str]:
        """Every current attempt reports RUNNING; returns their ids."""
        attempts = [e.attempt_id for e in self.scheduler.graph.executions()]
        for attempt in attempts:
            self.report(attempt, ExecutionState.RUNNING)
        return attempts

    def cancelled(self) -> list[str]:
        return [args[0] for args in self.gateway.called("cancel_task")]


@pytest.fixture
def job(tmp_path) -> Job:
    return Job(tmp_path)


def test_start_prepares_requests_slots_and_deploys_every_source_subtask(job) -> None:
    job.start()
    assert job.preparer.restores == [None] and job.slot_requests == 1
    assert job.scheduler.status is JobStatus.RUNNING
    assert sorted(t.subtask_index for t in job.deployed()) == [0, 1]
    assert {e.state for e in job.scheduler.graph.executions()} == {ExecutionState.DEPLOYING}
    job.run_all()
    assert {e.state for e in job.scheduler.graph.executions()} == {ExecutionState.RUNNING}


def test_a_failed_task_restarts_the_job_after_the_strategy_delay(job) -> None:
    job.start()
    first, second = job.run_all()
    job.report(first, ExecutionState.FAILED, "boom")
    assert job.scheduler.status is JobStatus.RESTARTING
    assert job.cancelled() == [second]  # the other subtask is cancelled
    job.report(second, ExecutionState.CANCELED)
    job.main_thread.advance(DELAY - 0.01)
    assert job.scheduler.status is JobStatus.RESTARTING and len(job.preparer.restores) == 1
    job.main_thread.advance(0.02)
    assert job.scheduler.status is JobStatus.RUNNING and job.scheduler.restarts == 1
    assert len(job.preparer.restores) == 2  # restored its latest checkpoint (none yet)
    assert len(job.deployed()) == 4  # new attempts deployed
    assert {t.attempt_id for t in job.deployed()[2:]}.isdisjoint({first, second})
    assert ("release_partitions", (job.graph.job_id,)) in job.gateway.calls


def test_a_lost_task_manager_fails_its_executions_and_restarts_the_job(job) -> None:
    job.start()
    job.run_all()
    job.scheduler.task_manager_lost("tm-1", {AllocationId("alloc-0"), AllocationId("alloc-1")}, "x")
    job.main_thread.trigger_all()
    assert job.scheduler.status is JobStatus.RESTARTING
    assert {e.state for e in job.scheduler.graph.executions()} == {ExecutionState.FAILED}
    job.main_thread.advance(DELAY)
    assert job.scheduler.status is JobStatus.RUNNING and job.scheduler.restarts == 1


def test_a_failure_while_restarting_belongs_to_that_failover(job) -> None:
    job.start()
    first, second = job.run_all()
    job.report(first, ExecutionState.FAILED, "boom")
    job.report(second, ExecutionState.FAILED, "also boom")  # while RESTARTING
    job.main_thread.advance(DELAY)
    assert job.scheduler.status is JobStatus.RUNNING and job.scheduler.restarts == 1
    third, _ = job.run_all()
    job.report(third, ExecutionState.FAILED, "again")  # the second restart is still there
    assert job.scheduler.status is JobStatus.RESTARTING


def test_a_failed_restart_preparation_is_retried_under_the_strategy(job) -> None:
    job.start()
    first, second = job.run_all()
    job.report(first, ExecutionState.FAILED, "boom")
    job.report(second, ExecutionState.CANCELED)
    job.preparer.fail_next = OSError("the sink's restore commit hit an outage")
    job.main_thread.advance(DELAY)  # restart 1 fails to prepare: counts as a failure
    assert job.scheduler.status is JobStatus.RESTARTING
    job.main_thread.advance(DELAY)  # restart 2
    assert job.scheduler.status is JobStatus.RUNNING and job.scheduler.restarts == 2


def test_without_a_restart_left_the_job_fails_with_the_cause(tmp_path) -> None:
    job = Job(tmp_path, attempts=0)
    job.start()
    first, second = job.run_all()
    job.report(first, ExecutionState.FAILED, "boom")
    assert job.scheduler.status is JobStatus.FAILING
    job.report(second, ExecutionState.CANCELED)
    assert job.scheduler.status is JobStatus.FAILED
    [result] = job.results
    assert isinstance(result, JobResultFailure) and result.status is JobStatus.FAILED
    assert "boom" in result.root_cause and "no restart left" in result.root_cause


def test_a_finished_job_commits_its_final_checkpoint_then_finishes(tmp_path) -> None:
    sink = FlakySink(failures=0)
    job = Job(tmp_path, sink=sink)
    job.start()
    for attempt in job.run_all():
        job.report(attempt, ExecutionState.FINISHED)
    assert job.scheduler.status is JobStatus.FINISHED
    assert sink.commits == [1]  # the final checkpoint, id 1
    [result] = job.results
    assert isinstance(result, JobResultSuccess)


def test_a_checkpoint_completing_as_the_job_finishes_commits_its_own_data_once(
    tmp_path,
) -> None:
    """Both tasks acknowledge checkpoint 1 (one staged "part-1" before the barrier) and finish
    while its metadata is still being written: the final checkpoint waits for it, so "part-1"
    is committed by checkpoint 1 alone, not claimed again by the final one (seen in CI under
    high availability: the final commit found a staged file gone)."""
    sink, io = StagingSink(), HeldExecutor()
    job = Job(tmp_path, sink=sink, io=io)
    job.start()
    attempts = job.run_all()
    job.scheduler.checkpoints.trigger()
    sink.staged.add("part-1")
    for attempt, staged in zip(attempts, [("part-1",), ()], strict=True):
        snapshot = TaskStateSnapshot(sink_pending={1: staged} if staged else {})
        job.scheduler.checkpoints.acknowledge(ExecutionAttemptId(attempt), 1, snapshot)
    for attempt in attempts:
        job.report(attempt, ExecutionState.FINISHED)
    while io.held:  # the writes finish, in order
        io.release()
        job.main_thread.trigger_all()
    assert job.scheduler.status is JobStatus.FINISHED, job.results
    assert sink.committed == [(1, ("part-1",))]  # the final checkpoint 2 staged nothing


def test_a_failed_final_commit_is_retried_while_the_strategy_allows(tmp_path) -> None:
    sink = FlakySink(failures=2)
    job = Job(tmp_path, attempts=2, sink=sink)
    job.start()
    for attempt in job.run_all():
        job.report(attempt, ExecutionState.FINISHED)
    assert job.scheduler.status is JobStatus.RUNNING  # committing, not FINISHED yet
    job.main_thread.advance(DELAY)
    assert sink.commits == [] and job.results == []
    job.main_thread.advance(DELAY)
    assert sink.commits == [1] and job.scheduler.status is JobStatus.FINISHED
    assert isinstance(job.results[0], JobResultSuccess)


def test_a_final_commit_without_a_restart_left_fails_the_job(tmp_path) -> None:
    sink = FlakySink(failures=5)
    job = Job(tmp_path, attempts=1, sink=sink)
    job.start()
    for attempt in job.run_all():
        job.report(attempt, ExecutionState.FINISHED)
    job.main_thread.advance(DELAY)
    assert job.scheduler.status is JobStatus.FAILED
    [result] = job.results
    assert isinstance(result, JobResultFailure)
    assert (
        "committing the sinks failed" in result.root_cause and "database down" in result.root_cause
    )
    assert job.scheduler.checkpoints.retained()  # the final checkpoint, for a resume


def test_cancel_cancels_every_task_and_ends_canceled(job) -> None:
    job.start()
    attempts = job.run_all()
    job.scheduler.cancel()
    job.main_thread.trigger_all()
    assert job.scheduler.status is JobStatus.CANCELLING
    assert sorted(job.cancelled()) == sorted(attempts)
    for attempt in attempts:
        job.report(attempt, ExecutionState.CANCELED)
    assert job.scheduler.status is JobStatus.CANCELED
    assert job.results[0].status is JobStatus.CANCELED  # type: ignore[union-attr]


def test_a_refused_deployment_fails_over(job) -> None:
    job.gateway.submit_task_fn = lambda tdd: (_ for _ in ()).throw(RuntimeError("no slot"))
    job.start()
    assert job.scheduler.status is JobStatus.RESTARTING
    assert all(e.state.is_terminal for e in job.scheduler.graph.executions())


def test_a_report_of_a_former_attempt_is_ignored(job) -> None:
    job.start()
    first, second = job.run_all()
    job.report(first, ExecutionState.FAILED, "boom")
    job.report(second, ExecutionState.CANCELED)
    job.main_thread.advance(DELAY)
    job.report(first, ExecutionState.FAILED, "late report of the old attempt")
    assert job.scheduler.status is JobStatus.RUNNING


def test_public_methods_refuse_other_threads(job) -> None:
    import threading

    errors: list[BaseException] = []

    def elsewhere() -> None:
        try:
            job.scheduler.cancel()
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join(10)
    assert errors and type(errors[0]).__name__ == "IllegalThreadError"
