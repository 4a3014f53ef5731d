"""SparkTaskRuntime: Spark as the data plane of a TaskManager (``TaskRuntime``).

One SparkSession per TaskManager process, started in the background
(``BackgroundSparkSession``), shared by every TaskManager of an embedded cluster. Each task runs
its Spark jobs in a job group named by its attempt id (``spark/stream_task.py``), so cancelling
a task cancels that group; on Spark Connect (``spark.remote``) the task's operations carry its
attempt id as a tag, and cancelling interrupts the tag.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from millrace.config import Configuration
from millrace.spark.spark_session import BackgroundSparkSession, is_spark_connect

__all__ = ["SparkTaskRuntime"]

logger = logging.getLogger(__name__)


class SparkTaskRuntime:
    """Spark for the tasks of one TaskManager process.

    Args:
        configuration: Spark keys (``spark.*``).
        app_name: Spark application name.
        given: An already running SparkSession to use (not stopped by ``stop``).
        factory: Starts a session from the configuration (default ``create_spark_session``).
        warm_up: Run one small job before ``started`` completes (a TaskManager process).

    Threading:
        Any thread.
    """

    def __init__(
        self,
        configuration: Configuration,
        app_name: str = "millrace",
        given: Any = None,
        factory: Callable[[Configuration], Any] | None = None,
        warm_up: bool = False,
    ) -> None:
        self._session = BackgroundSparkSession(
            configuration, app_name=app_name, given=given, factory=factory, warm_up=warm_up
        )

    def start(self) -> None:
        self._session.start()

    @property
    def started(self) -> Future[Any]:
        return self._session.started

    def get(self) -> Any:
        """The SparkSession; blocks until it started. Raises what starting raised."""
        return self._session.get()

    def cancel_task_work(self, attempt_id: str) -> None:
        started = self._session.started
        if not started.done() or started.exception() is not None:
            return
        spark = started.result()
        try:
            if is_spark_connect(spark):
                spark.interruptTag(attempt_id)
            else:
                spark.sparkContext.cancelJobGroup(attempt_id)
        except Exception:  # the session may be stopping
            logger.debug("could not cancel the Spark jobs of %s", attempt_id, exc_info=True)

    def stop(self) -> None:
        self._session.stop()
