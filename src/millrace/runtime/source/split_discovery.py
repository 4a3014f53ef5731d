"""SplitDiscovery: asks the unbounded sources' enumerators for new splits, every
``source.discovery-interval`` (Flink's periodic split discovery of continuous sources).

``discover`` may block (it lists files, fetches metadata), so it runs in the I/O executor; what
it finds comes back on the main thread and goes to the source's coordinator, unless a restart
replaced that coordinator meanwhile.

Threading:
    Main thread of the JobMaster only.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from concurrent.futures import Executor, Future

from millrace.rpc.main_thread_executor import ComponentMainThreadExecutor
from millrace.runtime.io.input_split import InputSplit
from millrace.runtime.source.source_coordinator import SourceCoordinator
from millrace.types import JobVertexId

__all__ = ["SplitDiscovery"]

logger = logging.getLogger(__name__)


class SplitDiscovery:
    """Periodic discovery of a job's unbounded sources.

    Args:
        main_thread: The JobMaster's main thread.
        io_executor: Runs ``discover``.
        interval: Seconds between two rounds (``source.discovery-interval``).
        sources: The job's current source coordinators, when asked.
        running: Whether the job still wants splits, when asked.
    """

    def __init__(
        self,
        main_thread: ComponentMainThreadExecutor,
        io_executor: Executor,
        interval: float,
        sources: Callable[[], dict[JobVertexId, SourceCoordinator]],
        running: Callable[[], bool],
    ) -> None:
        self._main_thread = main_thread
        self._io = io_executor
        self._interval = interval
        self._sources = sources
        self._running = running
        self._started = False

    def start(self) -> None:
        """Begin the rounds (idempotent: a restart does not start a second series)."""
        self._main_thread.assert_running_in_main_thread()
        if not self._started:
            self._started = True
            self._main_thread.schedule(self._round, self._interval)

    def _round(self) -> None:
        if not self._running():
            self._started = False
            return
        for coordinator in self._sources().values():
            if not coordinator.bounded:
                found = self._io.submit(coordinator.enumerator.discover)
                self._main_thread.when_done(found, functools.partial(self._discovered, coordinator))
        self._main_thread.schedule(self._round, self._interval)

    def _discovered(self, coordinator: SourceCoordinator, found: Future[list[InputSplit]]) -> None:
        if found.exception() is not None:
            logger.warning("source %s: discovery failed: %s", coordinator.name, found.exception())
        elif any(c is coordinator for c in self._sources().values()):  # not replaced by a restart
            coordinator.add_discovered(found.result())
