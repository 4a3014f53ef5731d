"""MetricQueryService: a TaskManager's metrics reach whoever asks its ResourceManager; a
TaskManager that does not answer is left out instead of failing the answer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from millrace.config import Configuration
from millrace.rpc.local_rpc_service import LocalRpcService
from millrace.runtime.metrics.metric_query_service import (
    MetricQueryService,
    metric_query_service_address,
    query_task_managers,
)
from millrace.runtime.metrics.task_io_metric_group import TaskMetricsSnapshot

SNAPSHOT = TaskMetricsSnapshot("job", "name", "vertex", "Source", 0, "attempt", records_in=42)


@pytest.fixture
def service() -> Iterator[LocalRpcService]:
    conf = Configuration({"rpc.lookup-timeout": "200 ms", "rpc.ask-timeout": "5 s"})
    rpc = LocalRpcService("metrics-test", configuration=conf)
    yield rpc
    rpc.close_async().result(timeout=30)


def test_the_dumps_of_the_task_managers_that_answer(service) -> None:
    query = MetricQueryService(service, "tm-1", lambda: [SNAPSHOT])
    query.start()
    address = query.address.rsplit("/", 1)[0] + "/tm-1"  # where its TaskExecutor would be
    assert metric_query_service_address(address, "tm-1") == query.address
    gone = query.address.rsplit("/", 1)[0] + "/tm-2"  # no service: left out, not an error
    dumps = query_task_managers(service, [("tm-1", address), ("tm-2", gone)], 5.0).result(5)
    [dump] = dumps
    assert dump.resource_id == "tm-1"
    assert dump.tasks == (SNAPSHOT,)
    assert dump.process["Status.JVM.Memory.Heap.Used"] > 0


def test_no_task_manager_answers_an_empty_list(service) -> None:
    assert query_task_managers(service, [], 5.0).result(30) == []


def test_a_task_manager_without_a_service_costs_the_query_timeout_not_the_lookup_timeout() -> None:
    conf = Configuration({"rpc.lookup-timeout": "10 min", "rpc.ask-timeout": "5 s"})
    rpc = LocalRpcService("metrics-slow-lookup", configuration=conf)
    try:
        query = MetricQueryService(rpc, "tm-1", lambda: [SNAPSHOT])
        query.start()
        address = query.address.rsplit("/", 1)[0] + "/tm-1"
        missing = query.address.rsplit("/", 1)[0] + "/tm-2"  # its lookup would wait 10 min
        answering = query_task_managers(rpc, [("tm-1", address), ("tm-2", missing)], 0.5)
        [dump] = answering.result(timeout=30)
        assert dump.resource_id == "tm-1"
    finally:
        rpc.close_async().result(timeout=30)
