"""The Scheduler in BATCH mode on a ManualClock, without RPC, Spark or threads: blocking
exchanges (consumers deployed once every producer FINISHED), region failover (a failed consumer
subtask runs again alone, from its complete inputs; the sources do not), the global failover
for a failed source, and no checkpoints."""

from __future__ import annotations

from typing import Any

import pytest

from millrace.clock import ManualClock
from millrace.config import Configuration
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointStorage
from millrace.runtime.deployment import TaskDeploymentDescriptor, TaskExecutionState
from millrace.runtime.executiongraph import ExecutionGraph, ExecutionState, JobStatus
from millrace.runtime.job_result import JobResult, JobResultSuccess
from millrace.runtime.jobgraph import DistributionPattern, JobEdge, JobGraph, JobVertex
from millrace.runtime.jobmaster.sink_committer import SinkCommitter
from millrace.runtime.jobmaster.slot_pool import AllocatedSlot, SlotPool
from millrace.runtime.scheduler import Scheduler
from millrace.testing import ManuallyTriggeredMainThreadExecutor, TestingTaskExecutorGateway
from millrace.types import Address, AllocationId, ExecutionAttemptId, ResultPartitionId
from tests.runtime.scheduler.test_scheduler import InlineExecutor, Preparer

DELAY = 1.0  # restart-strategy.fixed-delay.delay, seconds


class BatchJob:
    """source (2 subtasks) -HASH-> window (2 subtasks), BATCH mode, 2 slots on 2 TaskManagers."""

    def __init__(self, tmp_path: Any, mode: str = "BATCH", **settings: object) -> None:
        self.main_thread = ManuallyTriggeredMainThreadExecutor(ManualClock())
        source = JobVertex("source", 2, "m:Source", (), True, "src")
        window = JobVertex("window", 2, "m:Window", (), False, "win")
        edge = JobEdge(source.vertex_id, window.vertex_id, DistributionPattern.HASH, ("k",))
        self.graph = JobGraph("job", [source, window], [edge])
        self.gateways = [TestingTaskExecutorGateway(), TestingTaskExecutorGateway()]
        self.slots = SlotPool()
        self.results: list[JobResult] = []
        self.slot_requests = 0
        configuration = Configuration(
            {
                "io.tmp.dirs": str(tmp_path),
                "execution.runtime-mode": mode,
                "restart-strategy.type": "fixed-delay",
                "restart-strategy.fixed-delay.attempts": 2,
                "restart-strategy.fixed-delay.delay": f"{DELAY} s",
                **settings,
            }
        )
        self.scheduler = Scheduler(
            ExecutionGraph(self.graph),
            configuration,
            self.main_thread,
            InlineExecutor(),
            Preparer(),  # type: ignore[arg-type]
            SinkCommitter(self.graph.job_id, InlineExecutor()),
            CheckpointStorage(str(tmp_path / "chk"), str(tmp_path / "sp")),
            self.slots,
            "local://test/jobmaster",
            {},
            self,
        )
        self._next_slot = 0

    # SchedulerContext
    def request_slots(self) -> None:
        self.slot_requests += 1
        while len(self.slots) < 2:
            i = self._next_slot
            self._next_slot += 1
            gateway = self.gateways[i % 2]
            tm = f"tm-{i}"
            self.slots.add(AllocatedSlot(AllocationId(f"alloc-{i}"), tm, Address(tm), gateway))
        self.main_thread.execute(self.scheduler.slots_ready)

    def release_task_manager(self, resource_id: str, cause: str) -> None:
        pass

    def job_terminated(self, result: JobResult) -> None:
        self.results.append(result)

    # driving it
    def start(self) -> None:
        self.scheduler.start()
        self.main_thread.trigger_all()

    def deployed(self) -> list[TaskDeploymentDescriptor]:
        return [args[0] for g in self.gateways for args in g.called("submit_task")]

    def deployed_names(self) -> list[str]:
        return sorted(t.task_name for t in self.deployed())

    def current(self, vertex: str, index: int) -> TaskDeploymentDescriptor:
        """The deployment of subtask ``index`` of ``vertex``'s current attempt."""
        attempt = self.attempts(vertex)[index]
        return next(t for t in self.deployed() if t.attempt_id == attempt)

    def attempts(self, vertex: str) -> list[str]:
        jv = self.scheduler.graph.job_vertex(vertex)  # type: ignore[arg-type]
        return [ev.current_execution.attempt_id for ev in jv.task_vertices]

    def report(self, attempt: str, state: ExecutionState, error: str | None = None) -> None:
        self.scheduler.update_task_execution_state(
            TaskExecutionState(self.graph.job_id, ExecutionAttemptId(attempt), state, None, error)
        )
        self.main_thread.trigger_all()

    def finish(self, attempts: list[str]) -> None:
        for attempt in attempts:
            self.report(attempt, ExecutionState.RUNNING)
            self.report(attempt, ExecutionState.FINISHED)


@pytest.fixture
def job(tmp_path) -> BatchJob:
    return BatchJob(tmp_path)


def test_consumers_start_only_once_every_producer_finished(job) -> None:
    job.start()
    assert job.deployed_names() == ["source (1/2)", "source (2/2)"]
    first, second = job.attempts("src")
    job.report(first, ExecutionState.RUNNING)
    job.scheduler.schedule_or_update_consumers(ResultPartitionId(first))  # first event
    job.main_thread.trigger_all()
    job.finish([first])
    assert len(job.deployed()) == 2, "a consumer started before all its producers finished"
    job.finish([second])
    assert job.deployed_names() == [
        "source (1/2)",
        "source (2/2)",
        "window (1/2)",
        "window (2/2)",
    ]


def test_a_failed_consumer_subtask_runs_again_alone_and_the_sources_do_not(job) -> None:
    job.start()
    sources = job.attempts("src")
    job.finish(sources)
    failed, other = job.attempts("win")
    job.report(failed, ExecutionState.RUNNING)
    job.report(failed, ExecutionState.FAILED, "boom")
    assert job.scheduler.status is JobStatus.RUNNING  # no global restart
    assert not any(g.called("cancel_task") for g in job.gateways), "nothing else is cancelled"
    job.main_thread.advance(DELAY)
    assert len(job.deployed()) == 5
    again = job.current("win", 0)
    assert again.task_name == "window (1/2)" and again.attempt_id != failed
    assert {c.partition_id for c in again.input_channels} == set(sources)  # the same inputs
    assert job.attempts("src") == sources
    job.finish([again.attempt_id, other])
    assert job.scheduler.status is JobStatus.FINISHED
    [result] = job.results
    assert isinstance(result, JobResultSuccess)
    assert result.details.restarts == 1


def test_a_lost_task_manager_reruns_only_its_unfinished_consumer_subtasks(job) -> None:
    job.start()
    sources = job.attempts("src")
    job.finish(sources)
    first, second = job.attempts("win")
    job.report(first, ExecutionState.RUNNING)
    job.finish([second])
    lost = job.scheduler.graph.execution(ExecutionAttemptId(first))
    assert lost is not None
    job.slots.release_task_manager(job.slots.get(lost.allocation_id).resource_id)  # type: ignore[union-attr]
    job.scheduler.task_manager_lost("tm-x", {lost.allocation_id}, "heartbeat timeout")  # type: ignore[arg-type]
    job.main_thread.trigger_all()
    job.main_thread.advance(DELAY)
    assert job.slot_requests == 2  # the lost slot is requested again
    again = job.current("win", 0)
    assert again.task_name == "window (1/2)" and len(job.deployed()) == 5
    assert job.attempts("src") == sources  # the finished sources keep their attempts
    job.finish([again.attempt_id])
    assert job.scheduler.status is JobStatus.FINISHED


def test_a_failed_source_subtask_restarts_the_whole_job(job) -> None:
    job.start()
    first, second = job.attempts("src")
    job.report(first, ExecutionState.RUNNING)
    job.report(first, ExecutionState.FAILED, "boom")
    assert job.scheduler.status is JobStatus.RESTARTING
    job.report(second, ExecutionState.CANCELED)
    job.main_thread.advance(DELAY)
    assert job.scheduler.status is JobStatus.RUNNING and job.scheduler.restarts == 1
    assert job.deployed_names().count("source (1/2)") == 2


def test_region_restarts_count_against_the_restart_strategy(job) -> None:
    job.start()
    job.finish(job.attempts("src"))
    for _ in range(2):  # two restarts allowed
        failed = job.attempts("win")[0]
        job.report(failed, ExecutionState.RUNNING)
        job.report(failed, ExecutionState.FAILED, "boom")
        job.main_thread.advance(DELAY)
    failed = job.attempts("win")[0]
    job.report(failed, ExecutionState.FAILED, "boom again")
    assert job.scheduler.status in (JobStatus.FAILING, JobStatus.FAILED)


def test_batch_starts_no_periodic_checkpoint(tmp_path) -> None:
    """Flink ignores checkpointing in BATCH: no trigger is even scheduled (in STREAMING the
    periodic trigger is, and fires once every task runs)."""
    interval = {"execution.checkpointing.interval": "100 ms"}
    job = BatchJob(tmp_path, **interval)
    job.start()
    assert job.main_thread.scheduled == 0
    streaming = BatchJob(tmp_path, mode="STREAMING", **interval)
    streaming.start()
    assert streaming.main_thread.scheduled == 1
    sources = streaming.attempts("src")
    streaming.scheduler.schedule_or_update_consumers(ResultPartitionId(sources[0]))
    for attempt in [*sources, *streaming.attempts("win")]:
        streaming.report(attempt, ExecutionState.RUNNING)
    streaming.main_thread.advance(1.0)
    assert any(g.called("trigger_checkpoint") for g in streaming.gateways)
