"""Gateway proxies: ask/tell by annotation, ask timeouts, undeclared methods."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from typing import Protocol

import pytest

from millrace.clock import ManualClock
from millrace.config import Configuration
from millrace.errors import RpcTimeoutError
from millrace.rpc import RpcEndpoint, RpcGateway, RpcService, gateway_methods

WAIT = 10.0


class SlowGateway(RpcGateway, Protocol):
    def hang(self) -> Future[int]: ...

    def hang_with_timeout(self, label: str, timeout: float | None = None) -> Future[int]: ...

    def answer(self) -> Future[int]: ...

    def note(self, text: str) -> None: ...


class SlowEndpoint(RpcEndpoint, SlowGateway):
    def __init__(self, rpc_service: RpcService) -> None:
        super().__init__(rpc_service, "slow")
        self.notes: list[str] = []

    def hang(self) -> Future[int]:
        return Future()

    def hang_with_timeout(self, label: str, timeout: float | None = None) -> Future[int]:
        return Future()

    def answer(self) -> Future[int]:
        future: Future[int] = Future()
        future.set_result(42)
        return future

    def note(self, text: str) -> None:
        self.notes.append(text)

    def not_in_gateway(self) -> Future[int]:
        raise AssertionError("must not be reachable through SlowGateway")


def _start(rpc_service: RpcService) -> tuple[SlowEndpoint, SlowGateway]:
    endpoint = SlowEndpoint(rpc_service)
    endpoint.start()
    gateway = rpc_service.connect(endpoint.address, SlowGateway).result(timeout=WAIT)
    return endpoint, gateway


@pytest.fixture
def slow(manual_rpc_service: RpcService) -> Iterator[tuple[SlowEndpoint, SlowGateway]]:
    endpoint, gateway = _start(manual_rpc_service)
    yield endpoint, gateway
    endpoint.close_async().exception(timeout=WAIT)


def test_return_annotation_decides_between_ask_and_tell() -> None:
    methods = gateway_methods(SlowGateway)
    assert sorted(methods) == ["answer", "hang", "hang_with_timeout", "note"]
    assert methods["note"].is_tell
    assert not methods["answer"].is_tell
    assert methods["hang_with_timeout"].has_timeout
    assert methods["hang_with_timeout"].timeout_index == 1


def test_ask_fails_with_rpc_timeout_error_after_the_ask_timeout(
    slow: tuple[SlowEndpoint, SlowGateway], manual_clock: ManualClock
) -> None:
    _, gateway = slow
    pending = gateway.hang()
    manual_clock.advance(9.0)  # default rpc.ask-timeout is 10 s
    assert not pending.done()

    manual_clock.advance(2.0)
    with pytest.raises(RpcTimeoutError) as info:
        pending.result(timeout=WAIT)
    assert "slow" in str(info.value) and "hang" in str(info.value)
    assert (info.value.endpoint_id, info.value.method, info.value.timeout) == ("slow", "hang", 10.0)


def test_timeout_argument_overrides_the_ask_timeout(
    slow: tuple[SlowEndpoint, SlowGateway], manual_clock: ManualClock
) -> None:
    _, gateway = slow
    by_keyword = gateway.hang_with_timeout("k", timeout=1.0)
    by_position = gateway.hang_with_timeout("p", 2.0)
    by_default = gateway.hang_with_timeout("d")

    manual_clock.advance(1.5)
    with pytest.raises(RpcTimeoutError) as info:
        by_keyword.result(timeout=WAIT)
    assert info.value.timeout == 1.0
    assert not by_position.done()

    manual_clock.advance(1.0)
    with pytest.raises(RpcTimeoutError):
        by_position.result(timeout=WAIT)
    assert not by_default.done()


def test_configured_ask_timeout_applies(rpc_service_factory, manual_clock: ManualClock) -> None:
    service = rpc_service_factory(
        clock=manual_clock, configuration=Configuration({"rpc.ask-timeout": "3 s"})
    )
    _, gateway = _start(service)
    pending = gateway.hang()
    manual_clock.advance(3.5)
    with pytest.raises(RpcTimeoutError) as info:
        pending.result(timeout=WAIT)
    assert info.value.timeout == 3.0


def test_answered_ask_is_not_failed_by_a_later_timeout(
    slow: tuple[SlowEndpoint, SlowGateway], manual_clock: ManualClock
) -> None:
    _, gateway = slow
    answered = gateway.answer()
    assert answered.result(timeout=WAIT) == 42
    manual_clock.advance(100.0)
    assert gateway.answer().result(timeout=WAIT) == 42
    assert answered.result(timeout=0) == 42


def test_method_not_declared_by_the_gateway_raises_attribute_error(
    slow: tuple[SlowEndpoint, SlowGateway],
) -> None:
    _, gateway = slow
    with pytest.raises(AttributeError):
        gateway.not_in_gateway()  # type: ignore[attr-defined]


def test_proxy_exposes_address_and_fencing_token(
    manual_rpc_service: RpcService, slow: tuple[SlowEndpoint, SlowGateway]
) -> None:
    endpoint, gateway = slow
    assert gateway.address == endpoint.address
    fenced = manual_rpc_service.connect(endpoint.address, SlowGateway, "token-1").result(WAIT)
    assert fenced.fencing_token == "token-1"  # type: ignore[attr-defined]


def test_tell_is_delivered_and_returns_none(slow: tuple[SlowEndpoint, SlowGateway]) -> None:
    endpoint, gateway = slow
    assert gateway.note("hello") is None
    assert gateway.answer().result(timeout=WAIT) == 42  # FIFO per sender: the tell came first
    assert endpoint.call_async(lambda: list(endpoint.notes)).result(timeout=WAIT) == ["hello"]


class NotAGateway(Protocol):
    def ping(self) -> Future[int]: ...


class WrongReturnGateway(RpcGateway, Protocol):
    def ping(self) -> int: ...


class UnannotatedGateway(RpcGateway, Protocol):
    def ping(self): ...  # type: ignore[no-untyped-def]


class ConcreteGateway(RpcGateway):
    pass


@pytest.mark.parametrize(
    "gateway_type", [NotAGateway, WrongReturnGateway, UnannotatedGateway, ConcreteGateway, int]
)
def test_invalid_gateway_types_are_rejected(rpc_service: RpcService, gateway_type: type) -> None:
    with pytest.raises(TypeError):
        rpc_service.connect(rpc_service.address_of("any"), gateway_type)


def test_ask_times_out_on_the_system_clock(rpc_service: RpcService) -> None:
    _, gateway = _start(rpc_service)
    with pytest.raises(RpcTimeoutError):
        gateway.hang_with_timeout("real", timeout=0.05).result(timeout=WAIT)
