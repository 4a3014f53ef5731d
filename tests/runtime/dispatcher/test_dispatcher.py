"""The Dispatcher as an endpoint on the in-process transport, its ResourceManager a testing
endpoint: SubmitJob validation, one JobMaster per job, the jobs listed while they run and after,
cancellation, results kept for later askers, and the errors unknown jobs get. No Spark, no
sleeps: every wait is on a future."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor, Future
from typing import Any

import pytest

from millrace.config import Configuration
from millrace.errors import JobSubmissionError
from millrace.rpc import LocalRpcService
from millrace.runtime.dispatcher.dispatcher import Dispatcher
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.executiongraph import JobStatus
from millrace.runtime.job_result import JobResultFailure
from millrace.runtime.jobgraph import JobGraph, JobVertex
from millrace.testing import TestingEndpoint, TestingResourceManagerGateway
from millrace.types import JobId
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


@pytest.fixture
def dispatcher(tmp_path) -> Iterator[DispatcherGateway]:
    service = LocalRpcService("test")
    TestingEndpoint(service, "resourcemanager", TestingResourceManagerGateway()).start()
    endpoint = Dispatcher(
        service,
        Configuration({"io.tmp.dirs": str(tmp_path), "slot.request.timeout": "5 min"}),
        service.address_of("resourcemanager"),
        InlineExecutor(),
    )
    endpoint.start()
    try:
        yield endpoint.get_self_gateway(DispatcherGateway)
    finally:
        service.close_async().exception(timeout=WAIT)


def job(name: str = "job", parallelism: int = 2, **conf: object) -> JobGraph:
    graph = JobGraph(name, [JobVertex("source", parallelism, "m:Source", (), True, "src")], [])
    graph.configuration = dict(conf)
    return graph


def refusal(dispatcher: DispatcherGateway, graph: JobGraph) -> str:
    with pytest.raises(JobSubmissionError) as refused:
        dispatcher.submit_job(graph).result(WAIT)
    return str(refused.value)


def test_a_submitted_job_runs_is_listed_and_ends_canceled(dispatcher) -> None:
    graph = job()
    dispatcher.submit_job(graph).result(WAIT)
    listed = dispatcher.list_jobs().result(WAIT)
    assert [(j.job_id, j.status) for j in listed] == [(graph.job_id, JobStatus.RUNNING)]
    waiting = dispatcher.request_job_result(graph.job_id, timeout=WAIT)
    dispatcher.cancel_job(graph.job_id).result(WAIT)
    result = result_within(waiting, WAIT, what="the cancelled job's result")
    assert isinstance(result, JobResultFailure) and result.status is JobStatus.CANCELED
    # the result stays: a later asker gets it, and the job is listed as it ended
    assert dispatcher.request_job_result(graph.job_id).result(WAIT) == result
    assert [j.status for j in dispatcher.list_jobs().result(WAIT)] == [JobStatus.CANCELED]
    assert dispatcher.request_job_details(graph.job_id).result(WAIT).status is JobStatus.CANCELED
    assert "already submitted" in refusal(dispatcher, graph)  # an ended job's id too


def test_a_job_is_submitted_once(dispatcher) -> None:
    graph = job()
    dispatcher.submit_job(graph).result(WAIT)
    assert "already submitted" in refusal(dispatcher, graph)


def test_invalid_jobs_are_refused_with_the_reason(dispatcher) -> None:
    empty = JobGraph("empty", [], [])
    assert "has no vertices" in refusal(dispatcher, empty)
    too_wide = job(parallelism=200)
    too_wide.max_parallelism = 128
    assert "exceeds max parallelism 128" in refusal(dispatcher, too_wide)
    bad_conf = job(**{"execution.checkpointing.interval": "soon"})
    reason = refusal(dispatcher, bad_conf)
    assert "execution.checkpointing.interval" in reason and "soon" in reason
    assert dispatcher.list_jobs().result(WAIT) == []  # none of them started


def test_unknown_jobs_are_named_in_the_error(dispatcher) -> None:
    unknown = JobId("0123456789abcdef0123456789abcdef")
    for call in (
        dispatcher.request_job_details,
        dispatcher.request_job_result,
        dispatcher.cancel_job,
    ):
        with pytest.raises(JobSubmissionError, match=unknown):
            call(unknown).result(WAIT)
