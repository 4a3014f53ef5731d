"""The JobMaster as an endpoint, on a ManualClock and the in-process transport, its peers being
testing endpoints: through its SlotPoolService it asks the ResourceManager for slots and accepts
offers, deploys into them, fails the job when slots do not come within slot.request.timeout,
watches the TaskManagers it holds slots on and fails over when one goes silent. The
SlotPoolService's own rules are tested on their own in test_slot_pool_service.py. No Spark, no
sleeps: every wait is on a future that a peer's call completes, and time moves only when the
test advances the clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor, Future
from typing import Any

import pytest

from millrace.clock import ManualClock
from millrace.config import Configuration
from millrace.rpc import LocalRpcService
from millrace.runtime.deployment import SlotOffer, TaskDeploymentDescriptor, TaskExecutionState
from millrace.runtime.executiongraph import ExecutionState, JobStatus
from millrace.runtime.job_result import JobResultFailure
from millrace.runtime.jobgraph import JobGraph, JobVertex
from millrace.runtime.jobmaster.job_master import JobMaster
from millrace.runtime.jobmaster.job_master_gateway import JobMasterGateway
from millrace.testing import (
    TestingEndpoint,
    TestingResourceManagerGateway,
    TestingTaskExecutorGateway,
)
from millrace.types import AllocationId, ResourceId
from tests.waiting import result_within

WAIT = 30.0


class InlineExecutor(Executor):
    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:
            future.set_exception(error)
        return future


def after(count: int) -> tuple[Any, Future[list[Any]]]:
    """A recorder, and a future completed with the arguments of its first ``count`` calls."""
    seen: list[Any] = []
    done: Future[list[Any]] = Future()

    def record(*args: Any) -> None:
        seen.append(args if len(args) > 1 else args[0])
        if len(seen) == count and not done.done():
            done.set_result(list(seen))

    return record, done


class Cluster:
    """A JobMaster of a 2-subtask source job, a testing ResourceManager and TaskExecutor."""

    def __init__(self, tmp_path: Any, **settings: object) -> None:
        self.clock = ManualClock()
        self.service = LocalRpcService("test", clock=self.clock)
        self.rm = TestingResourceManagerGateway()
        self.te = TestingTaskExecutorGateway()
        TestingEndpoint(self.service, "resourcemanager", self.rm).start()
        self.te_endpoint = TestingEndpoint(self.service, "tm-1", self.te)
        self.te_endpoint.start()
        record_request, self.requested = after(2)
        self.rm.request_slot_fn = lambda *args: record_request(*args)
        record_submission, submitted = after(2)
        self.submitted = submitted
        submit = self.te.submit_task_fn

        def submit_task(tdd: TaskDeploymentDescriptor) -> Any:
            record_submission(tdd)
            return submit(tdd)

        self.te.submit_task_fn = submit_task
        configuration = Configuration(
            {
                "io.tmp.dirs": str(tmp_path),
                "restart-strategy.type": "none",
                "slot.request.timeout": "10 s",
                "heartbeat.interval": "1 s",
                "heartbeat.pause": "5 s",
                **settings,
            }
        )
        graph = JobGraph("job", [JobVertex("source", 2, "m:Source", (), True, "src")], [])
        self.job_master = JobMaster(
            self.service,
            graph,
            configuration,
            self.service.address_of("resourcemanager"),
            InlineExecutor(),
        )
        self.job_master.start()
        self.gateway = self.job_master.get_self_gateway(JobMasterGateway)

    def offer_both_slots(self) -> list[TaskDeploymentDescriptor]:
        requests = result_within(self.requested, WAIT, what="2 slot requests")
        offers = [SlotOffer(AllocationId(args[3]), i) for i, args in enumerate(requests)]
        accepted = self.gateway.offer_slots(
            ResourceId("tm-1"), self.te_endpoint.address, offers
        ).result(WAIT)
        assert accepted == offers
        return result_within(self.submitted, WAIT, what="2 submitted tasks")

    def advance(self, seconds: float) -> None:
        """Move the clock; returns once the JobMaster ran what fell due (its mailbox is FIFO:
        a call queued after the clock's wake-up is answered after it)."""
        self.clock.advance(seconds)
        self.job_master.call_async(lambda: None).result(WAIT)

    def close(self) -> None:
        self.service.close_async().exception(timeout=WAIT)


@pytest.fixture
def cluster(tmp_path) -> Iterator[Cluster]:
    started = Cluster(tmp_path)
    try:
        yield started
    finally:
        started.close()


def test_the_job_master_asks_for_its_slots_and_deploys_into_the_offered_ones(cluster) -> None:
    tdds = cluster.offer_both_slots()
    assert sorted(t.subtask_index for t in tdds) == [0, 1]
    assert {t.allocation_id for t in tdds} == {
        AllocationId(args[3]) for args in cluster.requested.result(0)
    }
    details = cluster.gateway.request_job_details().result(WAIT)
    assert details.status is JobStatus.RUNNING
    assert details.vertices[0].states == {"DEPLOYING": 2}


def test_slots_that_do_not_come_in_time_fail_the_job(cluster) -> None:
    result_within(cluster.requested, WAIT, what="2 slot requests")
    cluster.advance(9.0)
    assert not cluster.job_master.result_future.done()
    cluster.advance(2.0)  # past slot.request.timeout
    result = result_within(cluster.job_master.result_future, WAIT, what="the job's result")
    assert isinstance(result, JobResultFailure) and result.status is JobStatus.FAILED
    assert "could not obtain 2 slots within slot.request.timeout=10 s" in result.root_cause


def test_a_silent_task_manager_is_declared_lost_and_the_job_fails_over(cluster) -> None:
    """No restart left here: losing the TaskManager fails the job, naming the heartbeat."""
    cluster.offer_both_slots()
    disconnected: Future[None] = Future()
    cluster.te.disconnect_job_manager = lambda job_id, cause: disconnected.set_result(None)  # type: ignore[method-assign]
    for _ in range(12):  # 12 s of heartbeat requests that the TaskManager never answers
        cluster.advance(1.0)
    result_within(disconnected, WAIT, what="the JobMaster to disconnect from the lost TaskManager")
    result = result_within(cluster.job_master.result_future, WAIT, what="the job's result")
    assert isinstance(result, JobResultFailure)
    assert "TaskManager tm-1 lost (heartbeat timeout)" in result.root_cause
    assert len(cluster.te.called("heartbeat_from_job_manager")) >= 4  # asked, never answered


def test_a_failed_task_without_a_restart_left_fails_the_job(cluster) -> None:
    tdds = cluster.offer_both_slots()
    for tdd in tdds:
        cluster.gateway.update_task_execution_state(
            TaskExecutionState(tdd.job_id, tdd.attempt_id, ExecutionState.RUNNING)
        ).result(WAIT)
    cluster.gateway.update_task_execution_state(
        TaskExecutionState(tdds[0].job_id, tdds[0].attempt_id, ExecutionState.FAILED, None, "boom")
    ).result(WAIT)
    cluster.gateway.update_task_execution_state(  # the other one, cancelled by the JobMaster
        TaskExecutionState(tdds[1].job_id, tdds[1].attempt_id, ExecutionState.CANCELED)
    ).result(WAIT)
    result = result_within(cluster.job_master.result_future, WAIT, what="the job's result")
    assert isinstance(result, JobResultFailure) and "boom" in result.root_cause
    cluster.te_endpoint.call_async(lambda: None).result(WAIT)  # the tells sent before it, run
    assert [args[0] for args in cluster.te.called("cancel_task")] == [tdds[1].attempt_id]
    # the job's slots go back to the TaskExecutor
    assert len(cluster.te.called("free_slot")) == 2
