"""Race-tolerant helpers for ``concurrent.futures.Future`` (Flink's FutureUtils).

Several parties may complete the same future (an endpoint replying, the timer failing it with a
timeout, a caller cancelling it); the first one wins and the others are ignored.

Threading:
    Any thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import CancelledError, Future, InvalidStateError
from typing import Any, TypeVar

__all__ = ["all_of", "chain", "complete", "fail", "transfer"]

T = TypeVar("T")


def complete(future: Future[T], result: T) -> None:
    """Complete ``future`` with ``result`` unless it is already done."""
    try:  # noqa: SIM105 - on every reply; cheaper than contextlib.suppress
        future.set_result(result)
    except InvalidStateError:
        pass


def fail(future: Future[Any], error: BaseException) -> None:
    """Fail ``future`` with ``error`` unless it is already done."""
    try:  # noqa: SIM105 - see complete()
        future.set_exception(error)
    except InvalidStateError:
        pass


def transfer(source: Future[T], target: Future[T]) -> None:
    """Copy the outcome of the done future ``source`` into ``target`` (first outcome wins)."""
    if source.cancelled():
        fail(target, CancelledError())
        return
    error = source.exception()
    if error is not None:
        fail(target, error)
    else:
        complete(target, source.result())


def chain(source: Future[T], target: Future[T]) -> None:
    """Complete ``target`` with the outcome of ``source`` once ``source`` is done."""
    source.add_done_callback(lambda done: transfer(done, target))


def all_of(futures: Iterable[Future[Any]]) -> Future[None]:
    """A future completed when every one of ``futures`` is done.

    Returns:
        Future completed with None, or failed with the first error among ``futures`` (in
        iteration order) once all are done.
    """
    pending = list(futures)
    combined: Future[None] = Future()
    if not pending:
        combined.set_result(None)
        return combined

    def on_done(_: Future[Any]) -> None:
        if all(f.done() for f in pending):
            errors = [f.exception() for f in pending if not f.cancelled()]
            first = next((e for e in errors if e is not None), None)
            if first is None:
                complete(combined, None)
            else:
                fail(combined, first)

    for future in pending:
        future.add_done_callback(on_done)
    return combined
