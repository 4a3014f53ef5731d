"""What a peer may call (issue 9, case 3): only the methods of an endpoint's declared gateways,
with arguments that fit; a call that fails is answered or logged, never fatal to the process."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from typing import Protocol

import pytest

from millrace.config import Configuration
from millrace.errors import GatewayMismatchError
from millrace.rpc import RpcEndpoint, RpcGateway
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.control_messages import control_message_codec
from tests.rpc.raw_peer import CALL, REPLY, RawPeer

WAIT = 10.0
SECRET = b"remote-dispatch-test-secret-0123"
CONF = Configuration({"rpc.lookup-timeout": "2 s", "rpc.ask-timeout": "5 s"})


class CounterGateway(RpcGateway, Protocol):
    def add(self, amount: int) -> None: ...

    def total(self) -> Future[int]: ...

    def scaled(self, factor: int, *, offset: int = 0) -> Future[int]: ...


class Counter(RpcEndpoint, implements=(CounterGateway,)):
    def __init__(self, service: TcpRpcService) -> None:
        super().__init__(service, "counter")
        self.count = 0

    def add(self, amount: int) -> None:
        self.count += amount

    def total(self) -> int:
        return self.count

    def scaled(self, factor: int, *, offset: int = 0) -> int:
        return self.count * factor + offset

    def reset(self) -> None:  # public, but in no gateway
        self.count = 0


class CloserGateway(RpcGateway, Protocol):
    def close_async(self) -> None: ...


class ResetGateway(RpcGateway, Protocol):
    def reset(self) -> None: ...


class CounterGatewayV2(RpcGateway, Protocol):
    """The same gateway, as a client of another version has it."""

    def add(self, amount: int, note: str) -> None: ...

    def total(self) -> Future[int]: ...

    def scaled(self, factor: int, *, offset: int = 0, unit: str = "") -> Future[int]: ...


def service(name: str) -> TcpRpcService:
    return TcpRpcService(
        name, security=TransportSecurity(SECRET), codec=control_message_codec(), configuration=CONF
    )


@pytest.fixture
def setup() -> Iterator[tuple[TcpRpcService, Counter, list[BaseException]]]:
    server, client = service("server"), service("client")
    fatal: list[BaseException] = []
    server.set_fatal_error_handler(lambda endpoint, error: fatal.append(error))
    counter = Counter(server)
    counter.start()
    yield client, counter, fatal
    for s in (client, server):
        s.close_async().exception(timeout=WAIT)


def test_a_peer_cannot_reach_public_methods_outside_the_gateways(setup) -> None:
    client, counter, fatal = setup
    for gateway_type in (CloserGateway, ResetGateway):
        with pytest.raises(GatewayMismatchError, match="does not serve"):
            client.connect(counter.address, gateway_type).result(WAIT)
    gateway = client.connect(counter.address, CounterGateway).result(WAIT)
    gateway.add(2)
    assert gateway.total().result(WAIT) == 2  # still running, nothing reset
    assert not counter.get_termination_future().done() and fatal == []


def test_tells_of_another_version_are_refused_and_logged_never_fatal(setup, caplog) -> None:
    client, counter, fatal = setup
    other = client.connect(counter.address, CounterGatewayV2).result(WAIT)
    other.add(5, "five")  # one argument too many
    assert other.total().result(WAIT) == 0  # behind the tell: it was not executed
    assert fatal == [] and not counter.get_termination_future().done()
    assert "refused tell 'add'" in caplog.text and "takes 1 positional" in caplog.text


def test_asks_of_another_version_fail_with_type_error_at_the_caller(setup) -> None:
    client, counter, fatal = setup
    other = client.connect(counter.address, CounterGatewayV2).result(WAIT)
    with pytest.raises(GatewayMismatchError, match="unexpected keyword argument 'unit'") as info:
        other.scaled(2, unit="cm").result(WAIT)
    assert isinstance(info.value, TypeError)  # what it replaces
    assert (info.value.endpoint_id, info.value.method) == ("counter", "scaled")
    assert other.scaled(2, offset=1).result(WAIT) == 1
    assert fatal == []


def test_a_tell_that_raises_on_the_endpoint_is_logged_not_fatal(setup, caplog) -> None:
    client, counter, fatal = setup
    gateway = client.connect(counter.address, CounterGateway).result(WAIT)
    gateway.add("not a number")  # type: ignore[arg-type]  # += str raises TypeError there
    assert gateway.total().result(WAIT) == 0
    assert fatal == []
    assert "tell add from 127.0.0.1:" in caplog.text


def test_raw_calls_outside_the_gateways_are_answered_and_the_connection_stays(setup) -> None:
    _, counter, fatal = setup
    with RawPeer(int(counter.address.split(":")[2].split("/")[0])) as peer:
        peer.handshake(SECRET)
        number = peer.lookup("counter", ["total"])
        for call_id, target, method, args, refusal in [
            (10, number + 1, "total", [], "RecipientUnreachableError"),  # never looked up
            (11, number, "reset", [], "GatewayMismatchError"),  # public, in no gateway
            (12, number, "close_async", [], "GatewayMismatchError"),
            (13, number, "add", [1, 2, 3], "GatewayMismatchError"),  # arity
            (14, number, "_rpc_server", [], "GatewayMismatchError"),
        ]:
            peer.send([CALL, call_id, target, method, args, {}, None])
            reply = peer.receive()
            assert reply[:3] == [REPLY, call_id, False], reply
            assert reply[3][:2] == ["millrace.errors", refusal], reply
        peer.send([CALL, 15, number, "total", [], {}, None])
        assert peer.receive() == [REPLY, 15, True, 0]
    assert fatal == [] and not counter.get_termination_future().done()
