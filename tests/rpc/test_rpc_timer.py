"""RpcTimer: one thread runs due functions in due order; cancelled ones never run."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from millrace.clock import ManualClock
from millrace.errors import RpcTimeoutError
from millrace.rpc import RpcTimer

WAIT = 10.0


@pytest.fixture
def timer(manual_clock: ManualClock) -> Iterator[RpcTimer]:
    timer = RpcTimer(manual_clock, "test-timer")
    yield timer
    timer.close()


def test_due_functions_run_in_due_then_scheduling_order(
    timer: RpcTimer, manual_clock: ManualClock
) -> None:
    order: list[str] = []
    done: Future[None] = Future()
    timer.schedule(2.0, lambda: order.append("late"))
    timer.schedule(1.0, lambda: order.append("early-1"))
    timer.schedule(1.0, lambda: order.append("early-2"))
    timer.schedule(3.0, lambda: done.set_result(None))
    manual_clock.advance(3.0)
    done.result(timeout=WAIT)
    assert order == ["early-1", "early-2", "late"]


def test_cancelled_function_never_runs(timer: RpcTimer, manual_clock: ManualClock) -> None:
    ran: list[str] = []
    done: Future[None] = Future()
    handle = timer.schedule(1.0, lambda: ran.append("cancelled"))
    timer.schedule(2.0, lambda: done.set_result(None))
    handle.cancel()
    manual_clock.advance(2.0)
    done.result(timeout=WAIT)
    assert ran == [] and not handle.active


def test_a_failing_function_does_not_stop_the_timer(
    timer: RpcTimer, manual_clock: ManualClock
) -> None:
    done: Future[None] = Future()

    def explode() -> None:
        raise RuntimeError("timer function failed")

    timer.schedule(1.0, explode)
    timer.schedule(1.0, lambda: done.set_result(None))
    manual_clock.advance(1.0)
    done.result(timeout=WAIT)


def test_ask_timeout_is_cancelled_by_a_reply(timer: RpcTimer, manual_clock: ManualClock) -> None:
    answered: Future[int] = Future()
    unanswered: Future[int] = Future()
    timer.schedule_ask_timeout(answered, "jobmaster", "request_job", 1.0)
    timer.schedule_ask_timeout(unanswered, "jobmaster", "request_job", 1.0)
    answered.set_result(7)
    manual_clock.advance(1.0)
    with pytest.raises(RpcTimeoutError):
        unanswered.result(timeout=WAIT)
    assert answered.result(timeout=0) == 7


def test_many_cancelled_entries_are_compacted(timer: RpcTimer) -> None:
    for _ in range(5000):
        timer.schedule(100.0, lambda: None).cancel()
    assert len(timer._heap) <= 2048


def test_close_stops_the_thread_and_later_schedules_never_run(
    manual_clock: ManualClock,
) -> None:
    timer = RpcTimer(manual_clock, "closing-timer")
    timer.schedule(1.0, lambda: None)
    assert any(t.name == "closing-timer" for t in threading.enumerate())
    timer.close()
    timer.close()
    assert not any(t.name == "closing-timer" for t in threading.enumerate())
    assert not timer.schedule(0.0, lambda: None).active
