"""The JobManager's I/O executor stops its threads on close, and never hangs on stuck work."""

from __future__ import annotations

import threading

from millrace.runtime.io_executor import create_io_executor, shutdown_io_executor


def io_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("millrace-io")]


def test_shutdown_joins_the_threads_and_cancels_queued_work() -> None:
    executor = create_io_executor()
    release = threading.Event()
    running = [executor.submit(release.wait) for _ in range(4)]
    queued = executor.submit(lambda: "never")
    release.set()
    assert shutdown_io_executor(executor, timeout=30)
    assert all(f.done() for f in running)
    assert queued.cancelled() or queued.result(30) == "never"
    assert io_threads() == []


def test_stuck_work_is_left_behind_and_reported() -> None:
    executor = create_io_executor()
    release = threading.Event()
    stuck = executor.submit(release.wait)
    assert not shutdown_io_executor(executor, timeout=0.05)
    assert not stuck.done()
    release.set()
    stuck.result(timeout=30)
