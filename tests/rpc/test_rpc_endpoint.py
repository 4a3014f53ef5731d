"""RpcEndpoint: mailbox order, the one-thread guarantee, timers, errors and lifecycle."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from functools import partial
from typing import Protocol

import pytest

from millrace.clock import ManualClock
from millrace.errors import (
    EndpointStoppedError,
    GatewayMismatchError,
    IllegalThreadError,
    RpcTimeoutError,
)
from millrace.rpc import GatewayProxy, RpcEndpoint, RpcGateway, RpcService

WAIT = 10.0  # seconds a test waits on a real event before it fails


def completed(value: object) -> Future[object]:
    future: Future[object] = Future()
    future.set_result(value)
    return future


class RecordingGateway(RpcGateway, Protocol):
    def record(self, value: object) -> None: ...

    def increment(self) -> Future[int]: ...

    def echo(self, value: object) -> Future[object]: ...

    def fail_ask(self, message: str) -> Future[int]: ...

    def fail_tell(self, message: str) -> None: ...

    def hang(self) -> Future[int]: ...

    def add(self, amount: int) -> Future[int]: ...


class RecordingEndpoint(RpcEndpoint, RecordingGateway):
    def __init__(self, rpc_service: RpcService, endpoint_id: str = "recorder") -> None:
        super().__init__(rpc_service, endpoint_id)
        self.records: list[object] = []
        self.counter = 0
        self.invocation_threads: set[threading.Thread] = set()
        self.start_thread: threading.Thread | None = None
        self.stop_thread: threading.Thread | None = None
        self.stop_result: Future[None] | None = None
        self.fatal_errors: list[tuple[BaseException, threading.Thread]] = []

    def on_start(self) -> None:
        self.start_thread = threading.current_thread()

    def on_stop(self) -> Future[None] | None:
        self.stop_thread = threading.current_thread()
        return self.stop_result

    def on_fatal_error(self, error: BaseException) -> None:
        self.fatal_errors.append((error, threading.current_thread()))

    def record(self, value: object) -> None:
        self.records.append(value)

    def increment(self) -> Future[int]:
        self.invocation_threads.add(threading.current_thread())
        self.counter += 1
        return completed(self.counter)  # type: ignore[return-value]

    def echo(self, value: object) -> Future[object]:
        return completed(value)

    def fail_ask(self, message: str) -> Future[int]:
        raise ValueError(message)

    def fail_tell(self, message: str) -> None:
        raise ValueError(message)

    def hang(self) -> Future[int]:
        return Future()

    def add(self, amount: int) -> Future[int]:
        self.counter += amount
        return completed(self.counter)  # type: ignore[return-value]


def sync(endpoint: RpcEndpoint) -> None:
    """Return once every message enqueued before this call has been processed."""
    endpoint.call_async(lambda: None).result(timeout=WAIT)


@pytest.fixture
def endpoint(rpc_service: RpcService) -> Iterator[RecordingEndpoint]:
    endpoint = RecordingEndpoint(rpc_service)
    endpoint.start()
    yield endpoint
    endpoint.close_async().exception(timeout=WAIT)  # waits; some tests make it fail


@pytest.fixture
def gateway(rpc_service: RpcService, endpoint: RecordingEndpoint) -> RecordingGateway:
    return rpc_service.connect(endpoint.address, RecordingGateway).result(timeout=WAIT)


@pytest.fixture
def manual_endpoint(manual_rpc_service: RpcService) -> Iterator[RecordingEndpoint]:
    endpoint = RecordingEndpoint(manual_rpc_service)
    endpoint.start()
    yield endpoint
    endpoint.close_async().exception(timeout=WAIT)  # waits; some tests make it fail


def test_run_async_messages_from_one_thread_run_in_fifo_order(
    endpoint: RecordingEndpoint,
) -> None:
    for i in range(1000):
        endpoint.run_async(partial(endpoint.records.append, i))
    sync(endpoint)
    assert endpoint.records == list(range(1000))


def test_tells_from_one_thread_run_in_fifo_order(
    endpoint: RecordingEndpoint, gateway: RecordingGateway
) -> None:
    for i in range(1000):
        gateway.record(i)
    assert gateway.echo("done").result(timeout=WAIT) == "done"
    assert endpoint.records == list(range(1000))


def test_concurrent_asks_execute_one_at_a_time_on_the_main_thread(
    endpoint: RecordingEndpoint, gateway: RecordingGateway
) -> None:
    threads, calls_per_thread = 8, 1250
    start = threading.Barrier(threads)
    futures: list[list[Future[int]]] = [[] for _ in range(threads)]

    def caller(index: int) -> None:
        start.wait(timeout=WAIT)
        futures[index].extend(gateway.increment() for _ in range(calls_per_thread))

    workers = [threading.Thread(target=caller, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=WAIT)
    results = sorted(f.result(timeout=WAIT) for batch in futures for f in batch)

    assert results == list(range(1, threads * calls_per_thread + 1))
    assert endpoint.call_async(lambda: endpoint.counter).result(timeout=WAIT) == 10_000
    assert endpoint.invocation_threads == {endpoint.start_thread}
    assert endpoint.start_thread is not None
    assert endpoint.start_thread.name == "recorder-main"


def test_run_async_runs_before_an_earlier_scheduled_run_that_is_not_yet_due(
    manual_endpoint: RecordingEndpoint, manual_clock: ManualClock
) -> None:
    order = manual_endpoint.records
    manual_endpoint.schedule_run_async(lambda: order.append("a"), 1.0)
    manual_endpoint.run_async(lambda: order.append("b"))
    sync(manual_endpoint)
    assert order == ["b"]

    manual_clock.advance(0.5)
    sync(manual_endpoint)
    assert order == ["b"]

    manual_clock.advance(0.5)
    sync(manual_endpoint)
    assert order == ["b", "a"]


def test_scheduled_runs_with_equal_due_time_run_in_scheduling_order(
    manual_endpoint: RecordingEndpoint, manual_clock: ManualClock
) -> None:
    for i in range(20):
        manual_endpoint.schedule_run_async(partial(manual_endpoint.records.append, i), 1.0)
    manual_clock.advance(1.0)
    sync(manual_endpoint)
    assert manual_endpoint.records == list(range(20))


def test_cancelled_scheduled_run_never_runs(
    manual_endpoint: RecordingEndpoint, manual_clock: ManualClock
) -> None:
    cancelled = manual_endpoint.schedule_run_async(lambda: manual_endpoint.record("x"), 1.0)
    kept = manual_endpoint.schedule_run_async(lambda: manual_endpoint.record("y"), 1.0)
    cancelled.cancel()
    manual_clock.advance(5.0)
    sync(manual_endpoint)
    assert manual_endpoint.records == ["y"]
    assert not cancelled.active and not kept.active


def test_scheduled_run_fires_on_the_system_clock(endpoint: RecordingEndpoint) -> None:
    ran: Future[threading.Thread] = Future()
    endpoint.schedule_run_async(lambda: ran.set_result(threading.current_thread()), 0.01)
    assert ran.result(timeout=WAIT) is endpoint.start_thread


def test_validate_runs_in_main_thread_rejects_other_threads(
    endpoint: RecordingEndpoint,
) -> None:
    with pytest.raises(IllegalThreadError) as info:
        endpoint.validate_runs_in_main_thread()
    assert info.value.thread_name == threading.current_thread().name
    assert info.value.endpoint_id == "recorder"
    assert not endpoint.is_main_thread()

    assert endpoint.call_async(endpoint.validate_runs_in_main_thread).result(WAIT) is None
    assert endpoint.call_async(endpoint.is_main_thread).result(timeout=WAIT) is True


def test_exception_in_ask_fails_only_that_future(
    endpoint: RecordingEndpoint, gateway: RecordingGateway
) -> None:
    with pytest.raises(ValueError, match="boom"):
        gateway.fail_ask("boom").result(timeout=WAIT)
    assert gateway.increment().result(timeout=WAIT) == 1
    assert endpoint.fatal_errors == []


class OtherVersionGateway(RpcGateway, Protocol):
    """RecordingGateway as a caller of another version sees it: ``echo`` takes two values."""

    def echo(self, value: object, other: object) -> Future[object]: ...


def test_an_ask_whose_arguments_do_not_bind_fails_with_gateway_mismatch_error(
    rpc_service: RpcService, endpoint: RecordingEndpoint
) -> None:
    other = rpc_service.connect(endpoint.address, OtherVersionGateway).result(timeout=WAIT)
    with pytest.raises(GatewayMismatchError, match="echo") as info:
        other.echo(1, 2).result(timeout=WAIT)
    assert (info.value.endpoint_id, info.value.method) == ("recorder", "echo")
    assert endpoint.fatal_errors == []


def test_a_type_error_raised_inside_a_method_stays_a_type_error(
    endpoint: RecordingEndpoint, gateway: RecordingGateway
) -> None:
    with pytest.raises(TypeError) as info:
        gateway.add("one").result(timeout=WAIT)  # type: ignore[arg-type]  # bound; += fails
    assert type(info.value) is TypeError


def test_exception_in_tell_goes_to_on_fatal_error_and_loop_continues(
    endpoint: RecordingEndpoint, gateway: RecordingGateway, caplog: pytest.LogCaptureFixture
) -> None:
    gateway.fail_tell("boom")
    assert gateway.increment().result(timeout=WAIT) == 1
    if endpoint.address.startswith("local://"):  # a caller in this process: its bug is ours
        [(error, thread)] = endpoint.fatal_errors
        assert isinstance(error, ValueError) and str(error) == "boom"
        assert thread is endpoint.start_thread
    else:  # over TCP the caller is a peer: logged, never fatal (issue 9)
        assert endpoint.fatal_errors == []
        assert "tell fail_tell from 127.0.0.1:" in caplog.text and "boom" in caplog.text


def test_exception_in_a_self_gateway_tell_is_fatal_on_every_transport(
    endpoint: RecordingEndpoint,
) -> None:
    endpoint.get_self_gateway(RecordingGateway).fail_tell("own bug")
    sync(endpoint)
    [(error, thread)] = endpoint.fatal_errors
    assert str(error) == "own bug" and thread is endpoint.start_thread


def test_exceptions_in_run_async_and_scheduled_runs_go_to_on_fatal_error(
    manual_endpoint: RecordingEndpoint, manual_clock: ManualClock
) -> None:
    def explode(message: str) -> None:
        raise RuntimeError(message)

    manual_endpoint.run_async(partial(explode, "now"))
    manual_endpoint.schedule_run_async(partial(explode, "later"), 1.0)
    manual_clock.advance(1.0)
    sync(manual_endpoint)
    assert [str(error) for error, _ in manual_endpoint.fatal_errors] == ["now", "later"]


def test_default_on_fatal_error_reports_to_the_service_handler(
    rpc_service: RpcService,
) -> None:
    reported: list[tuple[RpcEndpoint, BaseException]] = []
    rpc_service.set_fatal_error_handler(lambda ep, error: reported.append((ep, error)))
    endpoint = RpcEndpoint(rpc_service, "plain")
    endpoint.start()
    error = RuntimeError("unexpected")

    def explode() -> None:
        raise error

    endpoint.run_async(explode)
    sync(endpoint)
    assert reported == [(endpoint, error)]


def test_call_async_passes_on_results_errors_and_future_outcomes(
    endpoint: RecordingEndpoint,
) -> None:
    def explode() -> int:
        raise KeyError("k")

    assert endpoint.call_async(lambda: 42).result(timeout=WAIT) == 42
    assert endpoint.call_async(lambda: completed("chained")).result(timeout=WAIT) == "chained"
    with pytest.raises(KeyError):
        endpoint.call_async(explode).result(timeout=WAIT)


def test_call_async_fails_with_rpc_timeout_error_after_its_timeout(
    manual_endpoint: RecordingEndpoint, manual_clock: ManualClock
) -> None:
    never: Future[int] = Future()
    result = manual_endpoint.call_async(lambda: never, timeout=1.0)
    sync(manual_endpoint)
    manual_clock.advance(1.5)
    with pytest.raises(RpcTimeoutError):
        result.result(timeout=WAIT)


def test_on_main_thread_runs_the_callback_on_the_main_thread(
    endpoint: RecordingEndpoint,
) -> None:
    reply: Future[int] = Future()
    seen: Future[tuple[int, threading.Thread]] = Future()
    endpoint.on_main_thread(
        reply, lambda done: seen.set_result((done.result(0), threading.current_thread()))
    )
    reply.set_result(3)
    assert seen.result(timeout=WAIT) == (3, endpoint.start_thread)


def test_self_gateway_reaches_the_endpoint_through_its_mailbox(
    endpoint: RecordingEndpoint,
) -> None:
    gateway = endpoint.get_self_gateway(RecordingGateway)
    assert gateway.address == endpoint.address
    assert gateway.increment().result(timeout=WAIT) == 1
    with pytest.raises(TypeError):
        RpcEndpoint(endpoint.rpc_service, "other").get_self_gateway(RecordingGateway)


def test_close_async_runs_on_stop_on_main_thread_and_ends_the_thread(
    endpoint: RecordingEndpoint, gateway: RecordingGateway
) -> None:
    termination = endpoint.close_async()
    assert termination.result(timeout=WAIT) is None
    assert endpoint.stop_thread is endpoint.start_thread
    assert endpoint.start_thread is not None and not endpoint.start_thread.is_alive()
    assert endpoint.close_async() is termination
    assert endpoint.get_termination_future() is termination

    with pytest.raises(EndpointStoppedError):
        gateway.increment().result(timeout=WAIT)
    with pytest.raises(EndpointStoppedError):
        endpoint.call_async(lambda: 1).result(timeout=WAIT)
    gateway.record("dropped")
    endpoint.run_async(lambda: endpoint.record("dropped"))
    assert endpoint.records == []


def test_asks_queued_behind_the_stop_fail_with_endpoint_stopped_error(
    endpoint: RecordingEndpoint, gateway: RecordingGateway
) -> None:
    release = threading.Event()
    endpoint.run_async(lambda: release.wait(WAIT) and None)
    termination = endpoint.close_async()
    late = gateway.increment()
    release.set()
    with pytest.raises(EndpointStoppedError):
        late.result(timeout=WAIT)
    termination.result(timeout=WAIT)


def test_unanswered_asks_fail_with_endpoint_stopped_error_on_termination(
    endpoint: RecordingEndpoint, gateway: RecordingGateway
) -> None:
    pending = gateway.hang()
    sync(endpoint)
    endpoint.close_async().result(timeout=WAIT)
    with pytest.raises(EndpointStoppedError):
        pending.result(timeout=WAIT)


def test_endpoint_serves_its_mailbox_until_the_on_stop_future_completes(
    endpoint: RecordingEndpoint,
) -> None:
    endpoint.stop_result = Future()
    termination = endpoint.close_async()
    assert endpoint.call_async(lambda: 42).result(timeout=WAIT) == 42
    assert not termination.done()

    endpoint.stop_result.set_result(None)
    termination.result(timeout=WAIT)
    assert endpoint.start_thread is not None and not endpoint.start_thread.is_alive()


def test_failed_on_stop_future_fails_the_termination_future(
    endpoint: RecordingEndpoint,
) -> None:
    endpoint.stop_result = Future()
    termination = endpoint.close_async()
    endpoint.stop_result.set_exception(OSError("disk gone"))
    with pytest.raises(OSError, match="disk gone"):
        termination.result(timeout=WAIT)


def test_failing_on_start_is_fatal_and_terminates_the_endpoint(
    rpc_service: RpcService,
) -> None:
    class BrokenEndpoint(RecordingEndpoint):
        def on_start(self) -> None:
            raise RuntimeError("cannot start")

    broken = BrokenEndpoint(rpc_service, "broken")
    broken.start()
    with pytest.raises(RuntimeError, match="cannot start"):
        broken.get_termination_future().result(timeout=WAIT)
    [(error, _)] = broken.fatal_errors
    assert str(error) == "cannot start"


def test_closing_an_endpoint_that_never_started_completes_at_once(
    rpc_service: RpcService,
) -> None:
    endpoint = RecordingEndpoint(rpc_service, "idle")
    queued = endpoint.call_async(lambda: 1)
    assert endpoint.close_async().result(timeout=WAIT) is None
    with pytest.raises(EndpointStoppedError):
        queued.result(timeout=WAIT)
    with pytest.raises(RuntimeError):
        endpoint.start()


def test_an_endpoint_starts_only_once(endpoint: RecordingEndpoint) -> None:
    with pytest.raises(RuntimeError):
        endpoint.start()


@pytest.mark.parametrize("endpoint_id", ["", "a/b"])
def test_endpoint_ids_must_be_non_empty_without_slash(
    rpc_service: RpcService, endpoint_id: str
) -> None:
    with pytest.raises(ValueError):
        RpcEndpoint(rpc_service, endpoint_id)


def test_schedule_run_async_rejects_negative_delays(endpoint: RecordingEndpoint) -> None:
    noop: Callable[[], None] = lambda: None  # noqa: E731
    with pytest.raises(ValueError):
        endpoint.schedule_run_async(noop, -1.0)


class CounterGateway(RpcGateway, Protocol):
    def add(self, amount: int, timeout: float | None = None) -> Future[int]: ...

    def reset(self) -> None: ...


class Counter(RpcEndpoint, implements=(CounterGateway,)):
    """Names its gateway instead of subclassing it and replies with plain values."""

    def __init__(self, rpc_service: RpcService) -> None:
        super().__init__(rpc_service, "counter")
        self.total = 0

    def add(self, amount: int, timeout: float | None = None) -> int:
        self.total += amount
        return self.total

    def reset(self) -> None:
        self.total = 0


def test_an_endpoint_naming_its_gateway_serves_it(rpc_service: RpcService) -> None:
    counter = Counter(rpc_service)
    counter.start()
    try:
        gateway = rpc_service.connect(counter.address, CounterGateway).result(timeout=WAIT)
        assert gateway.add(2).result(timeout=WAIT) == 2
        gateway.reset()
        assert gateway.add(3).result(timeout=WAIT) == 3
        assert counter.get_self_gateway(CounterGateway).add(1).result(timeout=WAIT) == 4
        assert not isinstance(counter, GatewayProxy)
    finally:
        counter.close_async().result(timeout=WAIT)


def test_a_missing_gateway_method_fails_the_class_statement() -> None:
    with pytest.raises(TypeError, match="Incomplete does not implement CounterGateway: reset"):

        class Incomplete(RpcEndpoint, implements=(CounterGateway,)):
            def add(self, amount: int, timeout: float | None = None) -> int:
                return amount


@pytest.mark.parametrize(
    "add",
    [
        lambda self, value, timeout=None: value,  # another name
        lambda self, amount, timeout: amount,  # no default where the gateway has one
        lambda self, amount, *, timeout=None: amount,  # keyword-only where it is positional
        lambda self, amount: amount,  # a parameter too few
        lambda self, amount, timeout=None, *, scale: amount,  # an extra one without default
    ],
)
def test_gateway_methods_must_take_the_gateway_parameters(add: Callable[..., int]) -> None:
    with pytest.raises(TypeError, match=r"add\(.*\) differs from \(amount, timeout=None\)"):
        type(
            "Mismatched",
            (RpcEndpoint,),
            {"add": add, "reset": lambda self: None},
            implements=(CounterGateway,),
        )


def test_only_gateway_protocols_can_be_implemented() -> None:
    with pytest.raises(TypeError, match="not a Protocol subclassing RpcGateway"):

        class NotAGateway(RpcEndpoint, implements=(RpcService,)):  # type: ignore[arg-type]
            pass
