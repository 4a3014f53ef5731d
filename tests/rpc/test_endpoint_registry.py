"""EndpointRegistry: hosting, waiting lookups and their timeout, closing, the fatal error
handler; the same registry behind both transports (issue 10)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any, cast

import pytest

from millrace.clock import ManualClock
from millrace.errors import RecipientUnreachableError
from millrace.rpc import EndpointRegistry, RpcEndpoint, RpcTimer

WAIT = 10.0
LOOKUP_TIMEOUT = 2.0


class FakeEndpoint:
    """What the registry sees of an endpoint: its id, and a close that the test completes."""

    def __init__(self, endpoint_id: str) -> None:
        self.endpoint_id = endpoint_id
        self.termination: Future[None] = Future()
        self.close_requested = False

    def close_async(self) -> Future[None]:
        self.close_requested = True
        return self.termination


def endpoint(endpoint_id: str) -> RpcEndpoint:
    return cast(RpcEndpoint, FakeEndpoint(endpoint_id))


def fake(e: RpcEndpoint) -> FakeEndpoint:
    return cast(FakeEndpoint, e)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def registry(clock: ManualClock) -> Iterator[EndpointRegistry]:
    timer = RpcTimer(clock, "registry-test-rpc-timer")
    yield EndpointRegistry("svc", timer, LOOKUP_TIMEOUT)
    timer.close()


def test_a_lookup_of_a_registered_endpoint_completes_at_once(registry) -> None:
    echo = endpoint("echo")
    registry.register(echo)
    found = registry.lookup("echo", "local://svc/echo")
    assert found.done() and found.result(timeout=0) is echo


def test_a_waiting_lookup_completes_when_its_endpoint_registers(registry, clock) -> None:
    found = registry.lookup("late", "local://svc/late")
    clock.advance(LOOKUP_TIMEOUT / 2)
    assert not found.done()
    late = endpoint("late")
    registry.register(late)
    assert found.result(timeout=0) is late
    clock.advance(LOOKUP_TIMEOUT)  # its timer was cancelled: nothing fails it afterwards
    assert found.result(timeout=0) is late


def test_a_lookup_fails_after_the_lookup_timeout_on_the_service_clock(registry, clock) -> None:
    found = registry.lookup("nobody", "tcp://h:1/nobody")
    clock.advance(LOOKUP_TIMEOUT * 0.9)
    assert not found.done()
    clock.advance(LOOKUP_TIMEOUT * 0.2)
    with pytest.raises(RecipientUnreachableError, match=r"rpc\.lookup-timeout") as info:
        found.result(timeout=WAIT)
    assert info.value.address == "tcp://h:1/nobody"
    registry.register(endpoint("nobody"))  # an expired lookup is not resolved later
    assert isinstance(found.exception(timeout=0), RecipientUnreachableError)


def test_an_id_is_hosted_once_and_freed_only_by_its_own_endpoint(registry) -> None:
    first, second = endpoint("echo"), endpoint("echo")
    registry.register(first)
    with pytest.raises(ValueError, match="already hosts"):
        registry.register(second)
    registry.unregister(second)  # not the hosted one: no effect
    assert registry.lookup("echo", "a").result(timeout=0) is first
    registry.unregister(first)
    registry.register(second)
    assert registry.lookup("echo", "a").result(timeout=0) is second


def test_close_fails_lookups_refuses_endpoints_and_waits_for_the_hosted_ones(registry) -> None:
    a, b = endpoint("a"), endpoint("b")
    registry.register(a)
    registry.register(b)
    waiting = registry.lookup("never", "local://svc/never")

    closing = registry.close()

    assert registry.closed and registry.close() is closing
    assert fake(a).close_requested and fake(b).close_requested
    with pytest.raises(RecipientUnreachableError, match="closed"):
        waiting.result(timeout=0)
    with pytest.raises(RecipientUnreachableError, match="closed"):
        registry.lookup("a", "local://svc/a").result(timeout=0)
    with pytest.raises(RuntimeError, match="closed"):
        registry.register(endpoint("late"))
    fake(a).termination.set_result(None)
    assert not closing.done()  # b has not terminated yet
    fake(b).termination.set_exception(ValueError("b failed to stop"))
    with pytest.raises(ValueError, match="b failed to stop"):
        closing.result(timeout=0)


def test_fatal_errors_go_to_the_handler_whose_own_errors_are_logged(registry, caplog) -> None:
    seen: list[tuple[Any, BaseException]] = []
    echo, error = endpoint("echo"), RuntimeError("bug in echo")
    registry.handle_fatal_error(echo, error)  # no handler: nothing happens
    registry.set_fatal_error_handler(lambda e, x: seen.append((e, x)))
    registry.handle_fatal_error(echo, error)
    assert seen == [(echo, error)]

    def broken(e: RpcEndpoint, x: BaseException) -> None:
        raise OSError("handler broke")

    registry.set_fatal_error_handler(broken)
    with caplog.at_level(logging.ERROR):
        registry.handle_fatal_error(echo, error)
    assert "fatal error handler of RpcService svc raised" in caplog.text


def test_the_lookup_timeout_must_be_positive() -> None:
    timer = RpcTimer(ManualClock(), "registry-test-rpc-timer")
    try:
        with pytest.raises(ValueError, match="lookup_timeout"):
            EndpointRegistry("svc", timer, 0.0)
    finally:
        timer.close()
