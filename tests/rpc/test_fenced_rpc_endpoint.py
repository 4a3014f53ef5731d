"""FencedRpcEndpoint: invocations must carry the endpoint's current fencing token."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from typing import Protocol

import pytest

from millrace.errors import FencingTokenError, IllegalThreadError
from millrace.rpc import FencedRpcEndpoint, FencedRpcGateway, RpcService

WAIT = 10.0


class LeaderGateway(FencedRpcGateway, Protocol):
    def add(self, amount: int) -> None: ...

    def total(self) -> Future[int]: ...


class Leader(FencedRpcEndpoint, LeaderGateway):
    def __init__(self, rpc_service: RpcService, fencing_token: object | None) -> None:
        super().__init__(rpc_service, "leader", fencing_token)
        self.sum = 0

    def add(self, amount: int) -> None:
        self.sum += amount

    def total(self) -> Future[int]:
        future: Future[int] = Future()
        future.set_result(self.sum)
        return future


@pytest.fixture
def leader(rpc_service: RpcService) -> Iterator[Leader]:
    leader = Leader(rpc_service, "session-2")
    leader.start()
    yield leader
    leader.close_async().exception(timeout=WAIT)


def connect(rpc_service: RpcService, leader: Leader, token: object | None) -> LeaderGateway:
    return rpc_service.connect(leader.address, LeaderGateway, token).result(timeout=WAIT)


def test_current_token_is_served_and_stale_token_is_rejected(
    rpc_service: RpcService, leader: Leader
) -> None:
    current = connect(rpc_service, leader, "session-2")
    stale = connect(rpc_service, leader, "session-1")

    assert current.total().result(timeout=WAIT) == 0
    with pytest.raises(FencingTokenError) as info:
        stale.total().result(timeout=WAIT)
    assert (info.value.expected, info.value.received) == ("session-2", "session-1")


def test_unfenced_gateway_is_rejected_by_a_fenced_endpoint(
    rpc_service: RpcService, leader: Leader
) -> None:
    unfenced = connect(rpc_service, leader, None)
    with pytest.raises(FencingTokenError):
        unfenced.total().result(timeout=WAIT)


def test_tells_with_a_stale_token_are_dropped(rpc_service: RpcService, leader: Leader) -> None:
    connect(rpc_service, leader, "session-1").add(5)
    current = connect(rpc_service, leader, "session-2")
    current.add(1)
    assert current.total().result(timeout=WAIT) == 1


def test_endpoint_without_token_rejects_every_invocation(rpc_service: RpcService) -> None:
    leader = Leader(rpc_service, None)
    leader.start()
    for token in (None, "session-1"):
        with pytest.raises(FencingTokenError):
            connect(rpc_service, leader, token).total().result(timeout=WAIT)


def test_new_token_set_on_main_thread_fences_off_the_old_one(
    rpc_service: RpcService, leader: Leader
) -> None:
    old = connect(rpc_service, leader, "session-2")
    new = connect(rpc_service, leader, "session-3")
    leader.call_async(lambda: leader.set_fencing_token("session-3")).result(timeout=WAIT)

    assert leader.fencing_token == "session-3"
    assert new.total().result(timeout=WAIT) == 0
    with pytest.raises(FencingTokenError):
        old.total().result(timeout=WAIT)


def test_set_fencing_token_off_the_main_thread_raises(leader: Leader) -> None:
    with pytest.raises(IllegalThreadError):
        leader.set_fencing_token("session-9")


def test_local_run_async_and_call_async_are_not_fenced(rpc_service: RpcService) -> None:
    leader = Leader(rpc_service, None)
    leader.start()
    leader.run_async(lambda: leader.add(7))
    assert leader.call_async(lambda: leader.sum).result(timeout=WAIT) == 7


def test_self_gateway_carries_the_current_token(leader: Leader) -> None:
    own = leader.get_self_gateway(LeaderGateway)
    assert own.fencing_token == "session-2"
    assert own.total().result(timeout=WAIT) == 0
    leader.call_async(lambda: leader.set_fencing_token("session-3")).result(timeout=WAIT)
    assert own.fencing_token == "session-3"
    assert own.total().result(timeout=WAIT) == 0
