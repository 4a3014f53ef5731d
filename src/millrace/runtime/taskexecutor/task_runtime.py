"""TaskRuntime: the data plane a TaskManager's tasks run on, as the runtime sees it.

The runtime never imports Spark: the process that builds a TaskManager (the embedded cluster's
creator, ``millrace taskmanager start``) injects a TaskRuntime, and the tasks' invokables, which
live in ``millrace.spark``, use the session it started. The runtime only starts it, hands its
session to the tasks, cancels a task's running data-plane work when the task is cancelled, tells
it why a task failed (so it can replace a session that is gone), and stops it. Spark's is
``millrace.spark.spark_task_runtime.SparkTaskRuntime``; tests without a data plane use
``millrace.testing.TestingTaskRuntime``.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Protocol

from millrace.types import ExecutionAttemptId

__all__ = ["TaskRuntime"]


class TaskRuntime(Protocol):
    """The data plane of one TaskManager process (shared by every TaskManager of an embedded
    cluster).

    Threading:
        Any thread.
    """

    def start(self) -> None:
        """Start it in the background; ``started`` completes when it is ready."""
        ...

    @property
    def started(self) -> Future[Any]:
        """Completed with the session tasks run their work in (opaque to the runtime), or
        failed with what starting raised."""
        ...

    def cancel_task_work(self, attempt_id: ExecutionAttemptId) -> None:
        """Cancel the running work of the task attempt ``attempt_id`` (its Spark jobs); a no-op
        when it runs none or the runtime is not started. Must not block for long."""
        ...

    def task_failed(self, error: BaseException) -> None:
        """A task failed with ``error`` (on the task's thread; must not block for long): a data
        plane whose session the error shows gone opens a new one for the next deployments."""
        ...

    def stop(self) -> None:
        """Stop it (and what it started, e.g. Spark's JVM); idempotent."""
        ...
