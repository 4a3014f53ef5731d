"""RpcService lookups and lifecycle; LocalRpcService addresses."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Protocol

import pytest

from millrace.clock import ManualClock
from millrace.config import Configuration
from millrace.errors import GatewayMismatchError, RecipientUnreachableError
from millrace.rpc import LocalRpcService, RpcEndpoint, RpcGateway, RpcService

WAIT = 10.0
FAST_LOOKUP = Configuration({"rpc.lookup-timeout": "0.2 s"})


class EchoGateway(RpcGateway, Protocol):
    def echo(self, value: str) -> Future[str]: ...


class OtherGateway(RpcGateway, Protocol):
    def other(self) -> Future[None]: ...


class EchoEndpoint(RpcEndpoint, EchoGateway):
    def echo(self, value: str) -> Future[str]:
        future: Future[str] = Future()
        future.set_result(value)
        return future


@pytest.fixture
def local_service() -> Iterator[LocalRpcService]:
    service = LocalRpcService("cluster", configuration=FAST_LOOKUP)
    yield service
    service.close_async().exception(timeout=WAIT)


def test_addresses_name_the_service_and_endpoint(local_service: LocalRpcService) -> None:
    endpoint = EchoEndpoint(local_service, "echo")
    assert local_service.address_of("echo") == "local://cluster/echo"
    assert endpoint.address == "local://cluster/echo"


def test_connect_to_unknown_endpoint_fails_after_the_lookup_timeout(
    rpc_service_factory,
) -> None:
    service = rpc_service_factory(configuration=FAST_LOOKUP)
    pending = service.connect(service.address_of("nobody"), EchoGateway)
    with pytest.raises(RecipientUnreachableError):
        pending.result(timeout=WAIT)


def test_lookup_timeout_follows_the_service_clock(
    manual_rpc_service: RpcService, manual_clock: ManualClock
) -> None:
    pending = manual_rpc_service.connect(manual_rpc_service.address_of("nobody"), EchoGateway)
    manual_clock.advance(manual_rpc_service.lookup_timeout / 2)
    assert not pending.done()
    manual_clock.advance(manual_rpc_service.lookup_timeout)
    with pytest.raises(RecipientUnreachableError) as info:
        pending.result(timeout=WAIT)
    assert info.value.address == manual_rpc_service.address_of("nobody")


def test_connect_before_registration_succeeds_once_the_endpoint_starts(
    rpc_service: RpcService,
) -> None:
    pending = rpc_service.connect(rpc_service.address_of("late"), EchoGateway)
    endpoint = EchoEndpoint(rpc_service, "late")
    endpoint.start()
    gateway = pending.result(timeout=WAIT)
    assert gateway.echo("hi").result(timeout=WAIT) == "hi"


@pytest.mark.parametrize(
    "address", ["tcp://cluster/echo", "local://elsewhere/echo", "local://cluster/", "echo"]
)
def test_foreign_addresses_are_unreachable(local_service: LocalRpcService, address: str) -> None:
    EchoEndpoint(local_service, "echo").start()
    with pytest.raises(RecipientUnreachableError):
        local_service.connect(address, EchoGateway).result(timeout=WAIT)


def test_duplicate_endpoint_id_is_rejected(rpc_service: RpcService) -> None:
    EchoEndpoint(rpc_service, "echo").start()
    with pytest.raises(ValueError):
        EchoEndpoint(rpc_service, "echo").start()


def test_endpoint_must_implement_the_requested_gateway(rpc_service: RpcService) -> None:
    endpoint = EchoEndpoint(rpc_service, "echo")
    endpoint.start()
    with pytest.raises(GatewayMismatchError):
        rpc_service.connect(endpoint.address, OtherGateway).result(timeout=WAIT)


def test_terminated_endpoint_is_unregistered(rpc_service_factory) -> None:
    service = rpc_service_factory(configuration=FAST_LOOKUP)
    endpoint = EchoEndpoint(service, "echo")
    endpoint.start()
    endpoint.close_async().result(timeout=WAIT)
    with pytest.raises(RecipientUnreachableError):
        service.connect(endpoint.address, EchoGateway).result(timeout=WAIT)
    EchoEndpoint(service, "echo").start()  # the id is free again


def test_close_async_stops_every_endpoint_and_the_timer_thread(
    rpc_service_factory, manual_clock: ManualClock
) -> None:
    service = rpc_service_factory(clock=manual_clock)
    endpoints = [EchoEndpoint(service, f"echo-{i}") for i in range(3)]
    for endpoint in endpoints:
        endpoint.start()
    waiting = service.connect(service.address_of("never"), EchoGateway)

    closed = service.close_async()
    assert closed.result(timeout=WAIT) is None
    assert service.close_async() is closed
    assert all(e.get_termination_future().done() for e in endpoints)
    with pytest.raises(RecipientUnreachableError):
        waiting.result(timeout=WAIT)
    with pytest.raises(RecipientUnreachableError):
        service.connect(endpoints[0].address, EchoGateway).result(timeout=WAIT)
    with pytest.raises(RuntimeError):
        EchoEndpoint(service, "late").start()
    assert not [t for t in threading.enumerate() if t.name.startswith("echo-")]
    assert not [t for t in threading.enumerate() if t.name.endswith("-rpc-timer")]


def test_a_waiting_connect_may_close_the_endpoint_it_resolved_to(
    rpc_service: RpcService,
) -> None:
    pending = rpc_service.connect(rpc_service.address_of("brief"), EchoGateway)
    endpoint = EchoEndpoint(rpc_service, "brief")
    pending.add_done_callback(lambda _: endpoint.close_async())
    endpoint.start()
    assert endpoint.get_termination_future().result(timeout=WAIT) is None
