"""SparkTaskRuntime: Spark as the data plane of a TaskManager (``TaskRuntime``).

One SparkSession per TaskManager process, started in the background
(``BackgroundSparkSession``), shared by every TaskManager of an embedded cluster. Each task runs
its Spark jobs in a job group named by its attempt id (``spark/stream_task.py``), so cancelling
a task cancels that group; on Spark Connect (``spark.remote``) the task's operations carry its
attempt id as a tag, and cancelling interrupts the tag.

A Connect session lives on its server: a server that restarted no longer knows it, and every
call of it fails (``NO_ACTIVE_SESSION``, ``INVALID_HANDLE.SESSION_...``) while the server is
fine. A task failing so marks the session gone; the next deployment (the job's restart) gets a
new session, and the old one is released.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from millrace.config import Configuration
from millrace.spark.spark_session import BackgroundSparkSession, is_spark_connect

__all__ = ["SparkTaskRuntime"]

logger = logging.getLogger(__name__)

_SESSION_GONE = ("NO_ACTIVE_SESSION", "INVALID_HANDLE.SESSION")  # Spark's error conditions


class SparkTaskRuntime:
    """Spark for the tasks of one TaskManager process.

    Args:
        configuration: Spark keys (``spark.*``).
        app_name: Spark application name.
        given: An already running SparkSession to use (not stopped by ``stop``).
        factory: Starts a session from the configuration (default ``create_spark_session``).
        warm_up: Run one small job before ``started`` completes (a TaskManager process).

    Threading:
        Any thread (a lock guards replacing a session that is gone).
    """

    def __init__(
        self,
        configuration: Configuration,
        app_name: str = "millrace",
        given: Any = None,
        factory: Callable[[Configuration], Any] | None = None,
        warm_up: bool = False,
    ) -> None:
        self._arguments = (configuration, app_name, given, factory, warm_up)
        self._session = self._new_session()
        self._lock = threading.Lock()
        self._gone: Any = None  # the Connect session a task found gone, until replaced

    def _new_session(self) -> BackgroundSparkSession:
        configuration, app_name, given, factory, warm_up = self._arguments
        return BackgroundSparkSession(
            configuration, app_name=app_name, given=given, factory=factory, warm_up=warm_up
        )

    def start(self) -> None:
        self._session.start()

    @property
    def started(self) -> Future[Any]:
        """The session's future; a new session's once a task found the current one gone."""
        with self._lock:
            current = self._session
            gone, self._gone = self._gone, None
            if gone is not None and _is(current, gone) and self._arguments[2] is None:
                logger.warning(
                    "the Spark Connect session is gone (its server restarted?); opening a new one"
                )
                self._session = self._new_session()
                self._session.start()
                threading.Thread(target=current.stop, name="spark-release", daemon=True).start()
            return self._session.started

    def task_failed(self, error: BaseException) -> None:
        """Mark the Connect session gone if ``error`` (or its causes) says the server does not
        know it; the next :attr:`started` replaces it."""
        started = self._session.started
        if not started.done() or started.exception() is not None:
            return
        spark = started.result()
        if is_spark_connect(spark) and _says_session_gone(error):
            with self._lock:
                self._gone = spark

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


def _is(session: BackgroundSparkSession, spark: Any) -> bool:
    started = session.started
    return started.done() and started.exception() is None and started.result() is spark


def _says_session_gone(error: BaseException | None) -> bool:
    """Whether ``error`` or an exception it was raised from names a Connect session gone."""
    while error is not None:
        if any(condition in str(error) for condition in _SESSION_GONE):
            return True
        error = error.__cause__ or error.__context__
    return False
