"""Job life cycle on a MiniCluster without Spark: tasks are plain invokables defined here.

Covers success, a failure racing a finishing subtask, user cancellation, the slot request
timeout, and lazy deployment of consumers via ScheduleOrUpdateConsumers.

A check that something does not happen (consumers deployed early, a goodbye from a crashed
TaskManager) first makes sure it would have happened by then: every message that could carry
it has gone through the mailboxes on its way (:func:`processed`) before the JobMaster and the
ResourceManager are asked.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from millrace.config import Configuration
from millrace.rpc import RpcEndpoint
from millrace.runtime.executiongraph import JobStatus
from millrace.runtime.io.partition_events import EndOfPartition, Watermark
from millrace.runtime.job_result import JobResultFailure, JobResultSuccess
from millrace.runtime.jobgraph import DistributionPattern, JobEdge, JobGraph, JobVertex
from millrace.runtime.minicluster import MiniCluster
from millrace.runtime.taskexecutor.task_environment import AbstractInvokable
from millrace.testing import TestingTaskRuntime
from tests.faults import busy_task_executor, crash_task_executor
from tests.waiting import result_within, wait_until

WAIT = 10.0
HERE = __name__
BARRIER = threading.Barrier(2)
RELEASE = threading.Event()
PARKED: list[int] = []  # subtask indexes of ProducesOnRelease tasks waiting for RELEASE


class Succeeds(AbstractInvokable):
    def invoke(self) -> None:
        self.environment.metrics.records_in += 1


class OneFailsAsTheOtherFinishes(AbstractInvokable):
    def invoke(self) -> None:
        BARRIER.wait(WAIT)
        if self.environment.subtask_index == 0:
            raise RuntimeError("boom")


class WaitsForCancel(AbstractInvokable):
    def invoke(self) -> None:
        while True:
            self.environment.check_cancelled()
            time.sleep(0.01)


class ProducesOnRelease(AbstractInvokable):
    def invoke(self) -> None:
        PARKED.append(self.environment.subtask_index)
        deadline = time.monotonic() + WAIT
        while not RELEASE.wait(0.01):
            self.environment.check_cancelled()
            assert time.monotonic() < deadline
        self.environment.broadcast(Watermark(1))
        self.environment.broadcast(EndOfPartition())


class Consumes(AbstractInvokable):
    def invoke(self) -> None:
        gate = self.environment.input_gate
        assert gate is not None
        while not gate.finished:
            for _ in gate.poll_next(1.0):
                self.environment.metrics.records_in += 1


@pytest.fixture
def cluster(tmp_path) -> Iterator[MiniCluster]:
    conf = Configuration(
        {
            "io.tmp.dirs": str(tmp_path),
            "slot.request.timeout": "1 s",
            "restart-strategy.type": "none",
        }
    )
    with MiniCluster(conf, TestingTaskRuntime()) as mc:
        yield mc


def vertex(name: str, parallelism: int, invokable: str, source: bool = True) -> JobVertex:
    return JobVertex(name, parallelism, f"{HERE}:{invokable}", is_source=source)


def run(cluster: MiniCluster, graph: JobGraph):
    return cluster.job_client.submit_job_wait(graph).result(WAIT)


def processed(endpoint: RpcEndpoint, hops: int = 2) -> None:
    """Return once ``endpoint`` has processed every message sent to it before the call, and
    what those messages sent on through its own mailbox within ``hops - 1`` further hops: one
    round trip through the FIFO mailbox per hop. A task's report to its JobMaster takes two
    hops on its TaskExecutor (``run_async`` from the task thread, then the JobMaster gateway's
    callback), after which it is in the JobMaster's mailbox."""
    for hop in range(hops):
        result_within(endpoint.call_async(lambda: None), WAIT, what=f"round trip {hop + 1}")


def free_slots(cluster: MiniCluster) -> int:
    assert cluster.resource_manager is not None
    rm = cluster.resource_manager
    return sum(i.slots_free for i in rm.call_async(rm.request_task_manager_infos).result(WAIT))


def test_successful_job_reports_accumulators_and_frees_its_slots(cluster) -> None:
    result = run(cluster, JobGraph("ok", [vertex("v", 3, "Succeeds")], []))
    assert isinstance(result, JobResultSuccess)
    assert result.accumulators["v"].records_in == 3
    assert result.details.vertices[0].states == {"FINISHED": 3}
    wait_until(lambda: free_slots(cluster) == 4, what="4 free slots", timeout=WAIT)


def test_failure_racing_a_finishing_subtask_always_ends_the_job(cluster) -> None:
    for i in range(20):
        BARRIER.reset()
        graph = JobGraph(f"race-{i}", [vertex("v", 2, "OneFailsAsTheOtherFinishes")], [])
        result = run(cluster, graph)
        assert isinstance(result, JobResultFailure)
        assert result.status is JobStatus.FAILED
        assert "boom" in result.root_cause
    wait_until(lambda: free_slots(cluster) == 4, what="4 free slots", timeout=WAIT)


def test_cancel_ends_the_job_canceled(cluster) -> None:
    graph = JobGraph("cancel", [vertex("v", 2, "WaitsForCancel")], [])
    waiting = cluster.job_client.submit_job_wait(graph)
    wait_until(
        lambda: (
            cluster.job_client.request_job_details(graph.job_id)
            .result(WAIT)
            .vertices[0]
            .states.get("RUNNING")
            == 2
        ),
        what="2 subtasks RUNNING",
        timeout=WAIT,
    )
    cluster.job_client.cancel_job(graph.job_id).result(WAIT)
    result = waiting.result(WAIT)
    assert isinstance(result, JobResultFailure)
    assert result.status is JobStatus.CANCELED
    assert result.details.vertices[0].states == {"CANCELED": 2}


def test_too_few_slots_fail_after_the_slot_request_timeout(cluster) -> None:
    result = run(cluster, JobGraph("big", [vertex("v", 5, "Succeeds")], []))
    assert isinstance(result, JobResultFailure)
    assert "could not obtain 5 slots" in result.root_cause
    assert "slot.request.timeout" in result.root_cause
    wait_until(lambda: free_slots(cluster) == 4, what="4 free slots", timeout=WAIT)


def test_consumers_are_deployed_when_producers_emit(cluster) -> None:
    """Lazy scheduling: consumers stay CREATED until a producer's first event."""
    RELEASE.clear()
    PARKED.clear()
    producer = vertex("producer", 2, "ProducesOnRelease")
    consumer = vertex("consumer", 2, "Consumes", source=False)
    graph = JobGraph(
        "lazy",
        [producer, consumer],
        [JobEdge(producer.vertex_id, consumer.vertex_id, DistributionPattern.HASH, ("k",))],
    )
    waiting = cluster.job_client.submit_job_wait(graph)

    def states(i: int) -> dict[str, int]:
        details = cluster.job_client.request_job_details(graph.job_id).result(WAIT)
        return details.vertices[i].states

    wait_until(lambda: states(0).get("RUNNING") == 2, what="2 producers RUNNING", timeout=WAIT)
    wait_until(lambda: len(PARKED) == 2, what="2 producers waiting to emit", timeout=WAIT)
    # Everything the producers said before their first event went through their TaskManagers
    # to the JobMaster, which answers the query below after it: a deployment of the consumers
    # caused by anything but an event would show now.
    for te in cluster.task_executors:
        processed(te)
    assert states(1) == {"CREATED": 2}, "consumers must wait for their producers' first event"
    RELEASE.set()
    result = waiting.result(WAIT)
    assert isinstance(result, JobResultSuccess)
    assert result.accumulators["consumer"].records_in == 2 * 2 * 2  # 2 events x 2 channels


def test_detached_submission_returns_the_job_id_at_once(cluster) -> None:
    RELEASE.clear()
    graph = JobGraph("detached", [vertex("v", 1, "ProducesOnRelease")], [])
    job_id = cluster.job_client.submit_job_detached(graph).result(WAIT)
    assert job_id == graph.job_id
    details = cluster.job_client.request_job_details(job_id).result(WAIT)
    assert details.status is JobStatus.RUNNING
    RELEASE.set()
    wait_until(
        lambda: (
            cluster.job_client.request_job_details(job_id).result(WAIT).status is JobStatus.FINISHED
        ),
        what="the job FINISHED",
        timeout=WAIT,
    )


ATTEMPTS: list[int] = []


class FailsOnce(AbstractInvokable):
    def invoke(self) -> None:
        ATTEMPTS.append(self.environment.subtask_index)
        if len(ATTEMPTS) == 1:
            raise RuntimeError("first attempt fails")
        self.environment.metrics.records_in += 1


class AlwaysFails(AbstractInvokable):
    def invoke(self) -> None:
        raise RuntimeError("always")


@pytest.fixture
def restarting_cluster(tmp_path) -> Iterator[MiniCluster]:
    conf = Configuration(
        {
            "io.tmp.dirs": str(tmp_path),
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 2,
            "restart-strategy.fixed-delay.delay": "50 ms",
            "minicluster.number-of-taskmanagers": 3,
            "heartbeat.interval": "50 ms",
            "heartbeat.pause": "500 ms",
        }
    )
    with MiniCluster(conf, TestingTaskRuntime()) as mc:
        yield mc


def test_failed_task_restarts_the_job_which_then_finishes(restarting_cluster) -> None:
    ATTEMPTS.clear()
    result = run(restarting_cluster, JobGraph("once", [vertex("v", 2, "FailsOnce")], []))
    assert isinstance(result, JobResultSuccess), result
    assert result.details.restarts == 1
    assert result.accumulators["v"].records_in == 2  # the restarted attempts' counts


def test_job_fails_when_the_restarts_are_used_up(restarting_cluster) -> None:
    result = run(restarting_cluster, JobGraph("doomed", [vertex("v", 1, "AlwaysFails")], []))
    assert isinstance(result, JobResultFailure)
    assert result.status is JobStatus.FAILED
    assert "always" in result.root_cause and "no restart left" in result.root_cause
    assert result.details.restarts == 2


def test_lost_task_manager_is_detected_and_the_job_runs_again_elsewhere(restarting_cluster) -> None:
    RELEASE.clear()
    graph = JobGraph("failover", [vertex("v", 2, "ProducesOnRelease")], [])
    waiting = restarting_cluster.job_client.submit_job_wait(graph)

    def details():
        return restarting_cluster.job_client.request_job_details(graph.job_id).result(WAIT)

    wait_until(
        lambda: details().vertices[0].states.get("RUNNING") == 2,
        what="2 subtasks RUNNING",
        timeout=WAIT,
    )
    crash_task_executor(busy_task_executor(restarting_cluster))  # no goodbye: heartbeats tell
    wait_until(
        lambda: details().restarts == 1 and details().vertices[0].states.get("RUNNING") == 2,
        what="the job restarted with 2 subtasks RUNNING",
        seen=details,
        timeout=WAIT,
    )
    RELEASE.set()
    result = waiting.result(WAIT)
    assert isinstance(result, JobResultSuccess), result
    assert result.details.restarts == 1


@pytest.fixture
def quiet_cluster(tmp_path) -> Iterator[MiniCluster]:
    """Heartbeats too rare to notice anything within a test: what changes, a message said."""
    conf = Configuration(
        {
            "io.tmp.dirs": str(tmp_path),
            "restart-strategy.type": "none",
            "heartbeat.interval": "60 s",
            "heartbeat.pause": "120 s",
        }
    )
    with MiniCluster(conf, TestingTaskRuntime()) as mc:
        yield mc


def test_a_crashed_task_manager_says_no_goodbye(quiet_cluster) -> None:
    """kill -9 (tests.faults): no task-state update, no deregistration, nothing released;
    only heartbeats can tell."""
    graph = JobGraph("goodbye", [vertex("v", 2, "WaitsForCancel")], [])
    quiet_cluster.job_client.submit_job_detached(graph).result(WAIT)

    def states() -> dict[str, int]:
        details = quiet_cluster.job_client.request_job_details(graph.job_id).result(WAIT)
        return details.vertices[0].states

    wait_until(lambda: states().get("RUNNING") == 2, what="2 subtasks RUNNING", timeout=WAIT)
    victim = busy_task_executor(quiet_cluster)
    tasks = list(victim._tasks.values())
    crash_task_executor(victim)
    assert tasks and all(t.join(0) for t in tasks)  # its task threads are gone
    assert not victim.rpc_server.main_thread.is_alive()
    # Its main thread and task threads have ended, so whatever they sent (a goodbye: a task's
    # final state, a deregistration) is in the JobMaster's or the ResourceManager's mailbox
    # already; both queries below go through those mailboxes after it (FIFO), and the 60 s
    # heartbeat interval keeps the heartbeats from telling them anything meanwhile.
    rm = quiet_cluster.resource_manager
    assert rm is not None
    infos = result_within(rm.call_async(rm.request_task_manager_infos), WAIT, what="infos")
    assert states() == {"RUNNING": 2}
    assert victim.resource_id in {i.resource_id for i in infos}


class IgnoresCancellation(AbstractInvokable):
    """Runs on for a while after it is cancelled (a long Spark job), then ends."""

    def invoke(self) -> None:
        RELEASE.wait(WAIT)


def test_a_stopping_task_manager_keeps_serving_while_its_tasks_end(tmp_path) -> None:
    """on_stop must not block the main thread while a task takes its time to end."""
    RELEASE.clear()
    conf = Configuration({"io.tmp.dirs": str(tmp_path), "restart-strategy.type": "none"})
    with MiniCluster(conf, TestingTaskRuntime()) as cluster:
        graph = JobGraph("slow-to-stop", [vertex("v", 1, "IgnoresCancellation")], [])
        cluster.job_client.submit_job_detached(graph).result(WAIT)

        def running() -> bool:
            details = cluster.job_client.request_job_details(graph.job_id).result(WAIT)
            return details.vertices[0].states.get("RUNNING") == 1

        wait_until(running, what="the task RUNNING", timeout=WAIT)
        victim = busy_task_executor(cluster)
        stopping = victim.close_async()
        try:
            # the main thread answers at once, though the task has not ended
            assert victim.call_async(lambda: len(victim._tasks)).result(2) == 1
            assert not stopping.done()
        finally:
            RELEASE.set()
        stopping.result(WAIT)
