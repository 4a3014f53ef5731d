"""Bounded waiting for tests: every wait has a deadline and fails saying what it waited for.

No test waits without a limit (``tests/test_suite_hygiene.py`` enforces it): futures are read
with :func:`result_within`, conditions are polled with :func:`wait_until`, and both fail with
the thing waited for and the last thing seen, so a hung TaskManager, JobMaster or Spark job
fails one test with a readable message instead of the whole run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any, TypeVar

__all__ = ["WAIT", "result_within", "wait_until", "wait_value"]

T = TypeVar("T")

WAIT = 120.0  # seconds: the default deadline of a wait in an integration test
_POLL = 0.05  # seconds between two checks of a condition


def wait_until(
    condition: Callable[[], object],
    *,
    what: str,
    timeout: float = WAIT,
    seen: Callable[[], object] | None = None,
    interval: float = _POLL,
) -> float:
    """Poll ``condition`` until it is truthy.

    Args:
        condition: Checked every ``interval`` s on the calling thread. An exception it raises
            propagates (a broken probe is a test failure, not a reason to wait longer).
        what: What is awaited, for the failure message ("3 TaskManagers registered").
        timeout: Seconds before the wait fails.
        seen: Describes the current state for the failure message (called once, on failure).
        interval: Seconds between two checks.

    Returns:
        Seconds waited.

    Raises:
        AssertionError: If ``timeout`` passes first; the message names ``what`` and ``seen()``.
    """
    started = time.monotonic()
    deadline = started + timeout
    while not condition():
        if time.monotonic() > deadline:
            state = "" if seen is None else f"; last seen: {seen()!r}"
            raise AssertionError(f"waited {timeout:g} s for {what}{state}")
        time.sleep(interval)
    return time.monotonic() - started


def wait_value(
    probe: Callable[[], T],
    accept: Callable[[T], bool],
    *,
    what: str,
    timeout: float = WAIT,
    interval: float = _POLL,
) -> T:
    """Poll ``probe`` until ``accept(value)``; returns that value.

    Raises:
        AssertionError: If ``timeout`` passes first; the message names ``what`` and the last
            value probed.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if accept(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}; last seen: {value!r}")
        time.sleep(interval)


def result_within(future: Future[Any], timeout: float = WAIT, *, what: str = "a result") -> Any:
    """``future.result(timeout)``, failing with ``what`` when the deadline passes.

    Raises:
        AssertionError: If the future is not done within ``timeout`` s.
        Exception: Whatever the future failed with.
    """
    try:
        return future.result(timeout=timeout)
    except FutureTimeoutError:
        if future.done():  # it completed with a TimeoutError of its own: that is the outcome
            raise
        raise AssertionError(
            f"waited {timeout:g} s for {what}; the future is still pending"
        ) from None
