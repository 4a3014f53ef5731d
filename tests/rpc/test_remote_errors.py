"""Every Millrace error crosses the TCP transport as its own class, with its message and plain
attributes (issue 10): the wire form (``rpc/tcp/remote_errors.py``) through the codec, and
real replies between two TcpRpcServices."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from typing import Protocol

import pytest

from millrace import errors
from millrace.rpc import RpcEndpoint, RpcGateway
from millrace.rpc.tcp.connection import REPLY
from millrace.rpc.tcp.remote_errors import error_from_wire, error_to_wire
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.control_messages import control_message_codec

WAIT = 10.0
SECRET = b"remote-errors-test-secret-012345"

# One instance of every public error, built as the code that raises it does.
EXAMPLES: dict[type[errors.MillraceError], errors.MillraceError] = {
    errors.MillraceError: errors.MillraceError("something failed"),
    errors.RpcError: errors.RpcError("a call failed"),
    errors.RpcTimeoutError: errors.RpcTimeoutError("jobmaster-1", "cancel", 2.5),
    errors.RecipientUnreachableError: errors.RecipientUnreachableError("tcp://h:1/x", "gone"),
    errors.EndpointStoppedError: errors.EndpointStoppedError("tcp://h:1/x", "terminated"),
    errors.FencingTokenError: errors.FencingTokenError("jobmaster-1", "new", "old"),
    errors.GatewayMismatchError: errors.GatewayMismatchError("f() takes 1", "te-1", "f"),
    errors.FrameSizeError: errors.FrameSizeError(20, 10),
    errors.CodecError: errors.CodecError("cannot encode set"),
    errors.AuthenticationError: errors.AuthenticationError("wrong cluster secret"),
    errors.FrameMacError: errors.FrameMacError("record 3 fails its MAC"),
    errors.ConnectionClosedError: errors.ConnectionClosedError("connection closed"),
    errors.PartitionNotFoundError: errors.PartitionNotFoundError("p-1", "no subpartition 3"),
    errors.RemoteRpcError: errors.RemoteRpcError("foo.Bar", "bar"),
    errors.IllegalThreadError: errors.IllegalThreadError("dispatcher", "worker-1"),
    errors.CheckpointError: errors.CheckpointError("not every task is RUNNING"),
    errors.CheckpointDeclinedError: errors.CheckpointDeclinedError(7, "sink pre-commit failed"),
    errors.SlotAllocationError: errors.SlotAllocationError("no slot 9", "job-1"),
    errors.JobSubmissionError: errors.JobSubmissionError("unknown job job-1", "job-1"),
    errors.JobExecutionError: errors.JobExecutionError("job-1", "boom"),
    errors.JobCancelledError: errors.JobCancelledError("job-1"),
    errors.ExecutionGraphError: errors.ExecutionGraphError("job-1", "attempt-1", "it ended"),
    errors.TaskCancelledError: errors.TaskCancelledError("Source (1/2)"),
    errors.IllegalExecutionStateTransitionError: errors.IllegalExecutionStateTransitionError(
        "Source (1/2)", "CREATED", "FINISHED"
    ),
    errors.IllegalJobStatusTransitionError: errors.IllegalJobStatusTransitionError(
        "job-1", "FINISHED", "RUNNING"
    ),
    errors.PipelineError: errors.PipelineError("column x not found", "Source: files"),
    errors.UserCodeError: errors.UserCodeError("a SparkSession is captured"),
    errors.ConfigError: errors.ConfigError("rpc.ask-timeout", "-1 s", "a positive duration"),
    errors.HighAvailabilityError: errors.HighAvailabilityError(
        "no ZooKeeper server answered", "/millrace/default/leader"
    ),
    errors.LeadershipLostError: errors.LeadershipLostError("9f" * 16, "the latch is gone"),
    errors.LocalServerError: errors.LocalServerError(
        "/tmp/zk", "it did not answer within 30 s", "ERROR bind failed"
    ),
    errors.JobChangeError: errors.JobChangeError("no transform named 'tag'"),
    errors.MessageLossError: errors.MessageLossError("producer 0 -> consumer 1", "gap", 4, 6),
}


def public_attributes(error: BaseException) -> dict[str, object]:
    return {k: v for k, v in vars(error).items() if not k.startswith("_")}


def test_every_public_error_has_an_example() -> None:
    public = {getattr(errors, n) for n in errors.__all__ if isinstance(getattr(errors, n), type)}
    assert public == set(EXAMPLES)


@pytest.mark.parametrize("cls", list(EXAMPLES), ids=lambda c: c.__name__)
def test_every_error_is_rebuilt_as_itself_from_the_wire(cls) -> None:
    error = EXAMPLES[cls]
    codec = control_message_codec()
    wire = codec.decode(codec.encode([REPLY, 1, False, error_to_wire(error)]))[3]
    rebuilt = error_from_wire(wire)
    assert type(rebuilt) is cls
    assert str(rebuilt) == str(error)
    assert public_attributes(rebuilt) == public_attributes(error)


class FailingGateway(RpcGateway, Protocol):
    def fail(self, name: str) -> Future[None]: ...


class Failing(RpcEndpoint, FailingGateway):
    """Fails every ask with the example error it names."""

    def __init__(self, service: TcpRpcService) -> None:
        super().__init__(service, "failing")

    def fail(self, name: str) -> Future[None]:
        raise EXAMPLES[getattr(errors, name)]


@pytest.fixture(scope="module")
def failing() -> Iterator[FailingGateway]:
    security, codec = TransportSecurity(SECRET), control_message_codec()
    server = TcpRpcService("server", security=security, codec=codec)
    client = TcpRpcService("client", security=security, codec=codec)
    endpoint = Failing(server)
    endpoint.start()
    yield client.connect(endpoint.address, FailingGateway).result(WAIT)
    for service in (client, server):
        service.close_async().exception(timeout=WAIT)


@pytest.mark.parametrize("cls", list(EXAMPLES), ids=lambda c: c.__name__)
def test_an_error_raised_by_a_remote_endpoint_reaches_the_caller_as_itself(failing, cls) -> None:
    error = failing.fail(cls.__name__).exception(timeout=WAIT)
    assert type(error) is cls
    assert str(error) == str(EXAMPLES[cls])
    assert public_attributes(error) == public_attributes(EXAMPLES[cls])
