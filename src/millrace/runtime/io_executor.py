"""The I/O executor of a JobManager: threads for blocking work of the endpoints.

The Dispatcher and its JobMasters run split enumeration, job preparation and checkpoint metadata
writes here, never on an endpoint's main thread (Flink's ``ioExecutor``).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["create_io_executor", "shutdown_io_executor"]

logger = logging.getLogger(__name__)

_THREADS = 4


def create_io_executor() -> ThreadPoolExecutor:
    """A pool of 4 threads named ``millrace-io_<n>``."""
    return ThreadPoolExecutor(_THREADS, thread_name_prefix="millrace-io")


def shutdown_io_executor(executor: ThreadPoolExecutor, timeout: float) -> bool:
    """Cancel queued work and wait up to ``timeout`` s for running work and the threads to end.

    A thread still blocked after ``timeout`` (e.g. in a slow network call) is left to finish
    alone and logged; the caller does not hang.

    Args:
        executor: The pool to stop.
        timeout: Seconds to wait (>= 0).

    Returns:
        True if every thread ended within ``timeout``.

    Threading:
        Any thread but one of ``executor``'s own.
    """
    stopping = threading.Thread(
        target=executor.shutdown,
        kwargs={"wait": True, "cancel_futures": True},
        name="io-executor-shutdown",
        daemon=True,
    )
    stopping.start()
    stopping.join(timeout)
    if stopping.is_alive():
        logger.warning("I/O work still running %.0f s after shutdown; left to finish", timeout)
        return False
    return True
