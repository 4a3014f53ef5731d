"""ProcessTermination: how a cluster process waits to end (a signal or a fatal error).

SIGTERM and SIGINT ask for an orderly stop (exit code 0). An unexpected error inside an
endpoint is escalated to the process (the supervisor of its endpoints, as Flink's fatal error
handler does): it is logged and the process stops with exit code 1, so an outer supervisor
(systemd, Kubernetes, a test) restarts it in a clean state instead of it limping on.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

__all__ = ["ProcessTermination"]

logger = logging.getLogger(__name__)


class ProcessTermination:
    """The stop request of one process.

    Threading:
        ``install_signal_handlers`` on the main thread; the rest on any thread.
    """

    def __init__(self) -> None:
        self._stop = threading.Event()
        self.exit_code = 0

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT request an orderly stop."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda number, frame: self.request_stop(f"signal {number}"))

    def request_stop(self, reason: str, exit_code: int = 0) -> None:
        """Ask the process to stop; the first non-zero exit code wins."""
        if not self._stop.is_set():
            logger.info("stopping: %s", reason)
        if exit_code and not self.exit_code:
            self.exit_code = exit_code
        self._stop.set()

    def on_fatal_error(self, endpoint: Any, error: BaseException) -> None:
        """FatalErrorHandler of the process's RpcService: escalate, stop with exit code 1."""
        logger.error("fatal error in %s; stopping the process", endpoint, exc_info=error)
        self.request_stop(f"fatal error in {endpoint}: {error!r}", exit_code=1)

    def wait(self) -> int:
        """Block until a stop is requested; returns the exit code."""
        while not self._stop.wait(0.5):  # a timed wait lets signal handlers run
            pass
        return self.exit_code
