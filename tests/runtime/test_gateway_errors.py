"""The errors a caller of the runtime's gateways can see arrive as their own Millrace classes,
with their attributes, over TCP as in-process (issue 10: no builtin exception crosses a
gateway; every error is reconstructible by the TCP transport).

Real endpoints (Dispatcher, JobMaster, TaskExecutor, ResourceManager) are hosted by one
RpcService and called through gateways from another (TCP) or from the same one (in-process).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol

import pytest

from millrace.config import Configuration
from millrace.errors import (
    CheckpointError,
    ExecutionGraphError,
    FencingTokenError,
    GatewayMismatchError,
    JobSubmissionError,
    PartitionNotFoundError,
    SlotAllocationError,
)
from millrace.rpc import LocalRpcService, RpcGateway, RpcService
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.control_messages import control_message_codec
from millrace.runtime.dispatcher.dispatcher import Dispatcher
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.io_executor import create_io_executor
from millrace.runtime.jobgraph import JobGraph, JobVertex
from millrace.runtime.jobmaster.job_master import JobMaster
from millrace.runtime.jobmaster.job_master_gateway import JobMasterGateway
from millrace.runtime.resourcemanager.resource_manager import ResourceManager
from millrace.runtime.resourcemanager.resource_manager_gateway import ResourceManagerGateway
from millrace.runtime.taskexecutor.task_executor import TaskExecutor
from millrace.runtime.taskexecutor.task_executor_gateway import TaskExecutorGateway
from millrace.types import (
    DEFAULT_LEADER_SESSION_ID,
    AllocationId,
    ExecutionAttemptId,
    JobId,
    JobVertexId,
    ResourceId,
    ResultPartitionId,
)

WAIT = 10.0
SECRET = b"gateway-errors-test-secret-0123"
SPARK: Future[object] = Future()  # no task runs here


class OtherVersionDispatcherGateway(RpcGateway, Protocol):
    """A client of another version: ``list_jobs`` with arguments the Dispatcher lacks."""

    def list_jobs(self, state: str, limit: int, timeout: float | None = None) -> Future[list]: ...


@dataclass
class Cluster:
    """Endpoints on ``server``; gateways to them from ``client``."""

    client: RpcService
    dispatcher: DispatcherGateway
    job_master: JobMaster
    job_master_gateway: JobMasterGateway
    task_executor: TaskExecutorGateway


def waiting_job(tmp_path) -> JobGraph:
    """A job that waits for slots (no TaskManager offers one within the test)."""
    return JobGraph("waits", [JobVertex("source", 1, "tests.nowhere:Nothing", is_source=True)], [])


@pytest.fixture(params=["local", "tcp"])
def cluster(request, tmp_path) -> Iterator[Cluster]:
    conf = Configuration(
        {
            "io.tmp.dirs": str(tmp_path),
            "state.savepoints.dir": str(tmp_path / "savepoints"),
            "slot.request.timeout": "5 min",
            "rpc.lookup-timeout": "2 s",
        }
    )
    services: list[RpcService] = []
    if request.param == "local":
        server = client = LocalRpcService("test", configuration=conf)
        services.append(server)
    else:
        security, codec = TransportSecurity(SECRET), control_message_codec()
        server = TcpRpcService("server", security=security, codec=codec, configuration=conf)
        client = TcpRpcService("client", security=security, codec=codec, configuration=conf)
        services += [client, server]
    io = create_io_executor()
    resource_manager = ResourceManager(server)
    resource_manager.start()
    dispatcher = Dispatcher(server, conf, resource_manager.address, io)
    dispatcher.start()
    task_executor = TaskExecutor(server, conf, resource_manager.address, SPARK, ResourceId("te"))
    task_executor.start()
    job_master = JobMaster(server, waiting_job(tmp_path), conf, "local://test/nowhere", io)
    job_master.start()
    yield Cluster(
        client,
        client.connect(
            dispatcher.address, DispatcherGateway, fencing_token=DEFAULT_LEADER_SESSION_ID
        ).result(WAIT),
        job_master,
        client.connect(
            job_master.address, JobMasterGateway, fencing_token=job_master.job_master_id
        ).result(WAIT),
        client.connect(task_executor.address, TaskExecutorGateway).result(WAIT),
    )
    for service in services:
        service.close_async().exception(timeout=WAIT)
    io.shutdown(wait=False)


def failure(future: Future) -> BaseException:
    error = future.exception(timeout=WAIT)
    assert error is not None, f"expected a failure, got {future.result(timeout=0)!r}"
    return error


def test_an_unknown_attempt_asking_for_a_split_fails_with_execution_graph_error(cluster) -> None:
    job_id = cluster.job_master.job_graph.job_id
    vertex_id = cluster.job_master.job_graph.vertices[0].vertex_id
    error = failure(
        cluster.job_master_gateway.request_next_input_split(vertex_id, ExecutionAttemptId("x"))
    )
    assert type(error) is ExecutionGraphError, repr(error)
    assert (error.job_id, error.attempt_id) == (job_id, "x")


def test_a_split_request_naming_another_vertex_fails_with_execution_graph_error(cluster) -> None:
    job_graph = cluster.job_master.job_graph
    attempt = next(iter(cluster.job_master.scheduler.graph.executions())).attempt_id
    error = failure(
        cluster.job_master_gateway.request_next_input_split(JobVertexId("other"), attempt)
    )
    assert type(error) is ExecutionGraphError, repr(error)
    assert (error.job_id, error.attempt_id) == (job_graph.job_id, attempt)


def test_a_report_of_an_unknown_attempt_is_acknowledged(cluster) -> None:
    from millrace.runtime.deployment import Acknowledge, TaskExecutionState
    from millrace.runtime.executiongraph import ExecutionState, IOMetrics

    state = TaskExecutionState(
        cluster.job_master.job_graph.job_id,
        ExecutionAttemptId("former"),
        ExecutionState.FAILED,
        IOMetrics(),
        "boom",
    )
    reply = cluster.job_master_gateway.update_task_execution_state(state)
    assert reply.result(timeout=WAIT) == Acknowledge()


def test_a_stale_job_master_id_fails_with_fencing_token_error(cluster) -> None:
    stale = cluster.client.connect(
        cluster.job_master.address, JobMasterGateway, fencing_token="stale"
    ).result(WAIT)
    error = failure(stale.request_job_details())
    assert type(error) is FencingTokenError, repr(error)
    assert error.received == "stale"


def test_a_dispatcher_call_of_another_leader_session_fails_with_fencing_token_error(
    cluster,
) -> None:
    """DispatcherId = the leader session (seed 004): a client of a former leader is refused."""
    former = "f" * 32
    stale = cluster.client.connect(
        cluster.dispatcher.address, DispatcherGateway, fencing_token=former
    ).result(WAIT)
    error = failure(stale.list_jobs())
    assert type(error) is FencingTokenError, repr(error)
    assert (error.received, error.expected) == (former, DEFAULT_LEADER_SESSION_ID)


def test_a_resource_manager_call_without_its_leader_session_fails_with_fencing_token_error(
    cluster,
) -> None:
    address = cluster.dispatcher.address.replace("dispatcher", "resourcemanager")
    for token in (None, "f" * 32):
        stale = cluster.client.connect(address, ResourceManagerGateway, fencing_token=token)
        error = failure(stale.result(WAIT).request_task_manager_infos())
        assert type(error) is FencingTokenError, repr(error)


def test_a_savepoint_before_the_tasks_run_fails_with_checkpoint_error(cluster) -> None:
    error = failure(cluster.job_master_gateway.trigger_savepoint(None, False))
    assert type(error) is CheckpointError, repr(error)


@pytest.mark.parametrize(
    "graph",
    [
        JobGraph("empty", [], []),
        JobGraph(
            "bad-mode",
            [JobVertex("v", 1, "tests.nowhere:Nothing", is_source=True)],
            [],
            configuration={"execution.checkpointing.mode": "SOMETIMES"},
        ),
        JobGraph(  # passes the checks, but its JobMaster cannot start under that id
            "bad-id",
            [JobVertex("v", 1, "tests.nowhere:Nothing", is_source=True)],
            [],
            job_id=JobId("a/b"),
        ),
    ],
    ids=["no-vertices", "invalid-configuration", "job-master-cannot-start"],
)
def test_a_rejected_submission_fails_with_job_submission_error(cluster, graph) -> None:
    error = failure(cluster.dispatcher.submit_job(graph))
    assert type(error) is JobSubmissionError, repr(error)
    assert graph.name in str(error)


def test_calls_naming_an_unknown_job_fail_with_job_submission_error(cluster) -> None:
    unknown = JobId("no-such-job")
    for call in (
        cluster.dispatcher.request_job_result(unknown),
        cluster.dispatcher.request_job_details(unknown),
        cluster.dispatcher.cancel_job(unknown),
        cluster.dispatcher.request_watermarks(unknown),
    ):
        error = failure(call)
        assert type(error) is JobSubmissionError, repr(error)


@pytest.mark.parametrize("target", ["/elsewhere", "http://[::1/savepoints"])
def test_a_savepoint_target_outside_the_roots_fails_with_checkpoint_error(cluster, target) -> None:
    error = failure(cluster.dispatcher.trigger_savepoint(JobId("any"), target))
    assert type(error) is CheckpointError, repr(error)


def test_an_unknown_partition_fails_with_partition_not_found_error(cluster) -> None:
    error = failure(cluster.task_executor.request_partition_events(ResultPartitionId("p"), 0, 0))
    assert type(error) is PartitionNotFoundError, repr(error)
    assert error.partition_id == "p"


def test_a_slot_that_does_not_exist_fails_with_slot_allocation_error(cluster) -> None:
    request = cluster.task_executor.request_slot(
        99, JobId("j"), AllocationId("a"), "local://test/nowhere", "token"
    )
    error = failure(request)
    assert type(error) is SlotAllocationError, repr(error)


def test_a_call_that_does_not_fit_the_gateway_fails_with_gateway_mismatch_error(
    cluster,
) -> None:
    other = cluster.client.connect(
        cluster.dispatcher.address,
        OtherVersionDispatcherGateway,
        fencing_token=DEFAULT_LEADER_SESSION_ID,
    ).result(WAIT)
    error = failure(other.list_jobs("RUNNING", 10))
    assert type(error) is GatewayMismatchError, repr(error)
    assert (error.endpoint_id, error.method) == ("dispatcher", "list_jobs")
    assert isinstance(error, TypeError)
