"""The Dispatcher's recovery of jobs under high availability, on a real ZooKeeper and a real
HA storage directory (the stores are the production ones; no Spark): a new leader starts one
JobMaster per stored job graph, never one for a job the JobResultStore says reached a terminal
state (even with its job graph still stored, as after a leader that died before its clean-up,
FLIP-194), cleans up what such a job left, answers its result, and refuses a job submitted
twice."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from millrace.config import Configuration
from millrace.errors import JobSubmissionError
from millrace.rpc import LocalRpcService
from millrace.rpc.rpc_endpoint import RpcEndpoint
from millrace.runtime.dispatcher.dispatcher import Dispatcher
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.executiongraph import IOMetrics, JobStatus
from millrace.runtime.highavailability.high_availability_services import (
    LeaderServices,
    ZooKeeperHaServices,
)
from millrace.runtime.job_result import JobDetails, JobResultSuccess, VertexDetails
from millrace.runtime.jobgraph import JobGraph, JobVertex
from millrace.testing import TestingEndpoint, TestingResourceManagerGateway
from tests.runtime.highavailability.ha_processes import JobManagers

WAIT = 30.0


class RecordingRpcService(LocalRpcService):
    """The in-process RpcService, noting the id of every endpoint that starts on it (a
    JobMaster's is ``jobmaster-<job id[:12]>``)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.started: list[str] = []

    def start_server(self, endpoint: RpcEndpoint) -> None:
        self.started.append(endpoint.endpoint_id)
        super().start_server(endpoint)

    def job_masters(self) -> Counter[str]:
        return Counter(e for e in self.started if e.startswith("jobmaster-"))


def job(name: str) -> JobGraph:
    return JobGraph(name, [JobVertex("source", 2, "m:Source", (), True, "src")], [])


def finished_result(graph: JobGraph) -> JobResultSuccess:
    metrics = IOMetrics(10, 10, 0, 0, 1)
    details = JobDetails(
        graph.job_id,
        graph.name,
        JobStatus.FINISHED,
        1.7e9,
        2.0,
        [VertexDetails("source", 2, {"FINISHED": 2}, metrics)],
    )
    return JobResultSuccess(graph.job_id, 2.0, {"source": metrics}, details)


def job_master_of(graph: JobGraph) -> str:
    return f"jobmaster-{graph.job_id[:12]}"


@dataclass
class NewLeader:
    """The Dispatcher of the leader that took over, and what it runs on."""

    dispatcher: DispatcherGateway
    service: RecordingRpcService
    leader: LeaderServices


@pytest.fixture
def io_executor() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(2, thread_name_prefix="millrace-io")
    try:
        yield executor
    finally:
        executor.shutdown(wait=False, cancel_futures=True)


@contextlib.contextmanager
def take_over(
    jobmanagers: JobManagers,
    former: ZooKeeperHaServices,
    io_executor: ThreadPoolExecutor,
    tmp_path: Path,
) -> Iterator[NewLeader]:
    """The former leader's process goes; a standby is granted the leadership and starts its
    Dispatcher (which recovers the stored jobs), stopped when the block ends."""
    services, contender = jobmanagers.contend("jobmanager-b")
    jobmanagers.close(former)
    session = contender.wait_granted()
    leader = services.leader_services(session)
    service = RecordingRpcService("recovery")
    TestingEndpoint(service, "resourcemanager", TestingResourceManagerGateway()).start()
    dispatcher = Dispatcher(
        service,
        Configuration({"io.tmp.dirs": str(tmp_path), "slot.request.timeout": "5 min"}),
        service.address_of("resourcemanager"),
        io_executor,
        leader,
    )
    dispatcher.start()
    try:
        yield NewLeader(dispatcher.get_self_gateway(DispatcherGateway), service, leader)
    finally:
        service.close_async().exception(timeout=WAIT)


def refusal(dispatcher: DispatcherGateway, graph: JobGraph) -> str:
    with pytest.raises(JobSubmissionError) as refused:
        dispatcher.submit_job(graph).result(WAIT)
    return str(refused.value)


def test_a_new_leader_starts_each_stored_job_once_and_never_a_finished_one(
    jobmanagers: JobManagers, io_executor: ThreadPoolExecutor, tmp_path: Path
) -> None:
    running = [job("running-1"), job("running-2")]
    dirty, clean = job("ended, not cleaned up"), job("ended, graph left behind")
    services, contender = jobmanagers.contend("jobmanager-a")
    former = services.leader_services(contender.wait_granted())
    for graph in (*running, dirty, clean):
        former.job_graph_store().put(graph)
    # ``dirty``: its leader recorded the result and died before the clean-up
    former.job_result_store().create_dirty(finished_result(dirty))
    # ``clean``: its result is clean, yet its job graph is still stored
    former.job_result_store().create_dirty(finished_result(clean))
    former.job_result_store().mark_clean(clean.job_id)
    stored_ids = {g.job_id for g in (*running, dirty, clean)}
    assert set(former.job_graph_store().job_ids()) == stored_ids

    with take_over(jobmanagers, services, io_executor, tmp_path) as new:
        # answered once the recovery is done (calls wait for it)
        listed = new.dispatcher.list_jobs().result(WAIT)
        assert Counter(j.job_id for j in listed) == Counter(stored_ids), "a job listed twice"
        statuses = {j.job_id: j.status for j in listed}
        assert statuses[dirty.job_id] is statuses[clean.job_id] is JobStatus.FINISHED
        assert all(not statuses[g.job_id].is_globally_terminal for g in running)
        # one JobMaster per recovered job, none for an ended one
        assert new.service.job_masters() == Counter(job_master_of(g) for g in running)
        # the ended jobs' HA data is gone, their results clean and answered
        assert new.leader.job_graph_store().job_ids() == sorted(g.job_id for g in running)
        results = new.leader.job_result_store().results()
        assert {j: clean_ for j, (_, clean_) in results.items()} == {
            dirty.job_id: True,
            clean.job_id: True,
        }
        for ended in (dirty, clean):
            answered = new.dispatcher.request_job_result(ended.job_id).result(WAIT)
            assert answered == finished_result(ended)

        # a job is submitted once: a recovered one, an ended one, a new one twice
        assert "already submitted" in refusal(new.dispatcher, running[0])
        assert "already submitted" in refusal(new.dispatcher, dirty)
        fresh = job("submitted to the new leader")
        first = new.dispatcher.submit_job(fresh)
        assert "already submitted" in refusal(new.dispatcher, fresh)
        first.result(WAIT)
        assert "already submitted" in refusal(new.dispatcher, fresh)
        assert new.service.job_masters() == Counter(job_master_of(g) for g in (*running, fresh))
        assert fresh.job_id in new.leader.job_graph_store().job_ids()
