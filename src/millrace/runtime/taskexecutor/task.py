"""Task: one subtask attempt running on its own thread inside a TaskExecutor (Flink's Task).

The Task loads the invokable named in the TaskDeploymentDescriptor and runs it on a dedicated
thread, never on the endpoint's main thread. It reports INITIALIZING, RUNNING and a terminal
state (FINISHED, CANCELED, FAILED with the root cause) through ``report``.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
import traceback
from collections.abc import Callable

from millrace.errors import TaskCancelledError
from millrace.runtime.deployment import TaskDeploymentDescriptor
from millrace.runtime.executiongraph import ExecutionState, IOMetrics
from millrace.runtime.taskexecutor.task_environment import AbstractInvokable, TaskEnvironment

__all__ = ["Task", "join_tasks_then", "load_invokable", "root_cause"]

logger = logging.getLogger(__name__)

_CANCEL_INTERVAL = 0.1  # seconds between cancellations of a cancelled task's Spark jobs
_CANCEL_TIMEOUT = 180.0  # seconds after which a task that ignores cancellation is reported

ReportFn = Callable[[ExecutionState, IOMetrics, "str | None"], None]


def load_invokable(path: str) -> type[AbstractInvokable]:
    """Import ``module:Class``.

    Raises:
        ImportError, AttributeError: If the module or class does not exist.
        TypeError: If the class is not an AbstractInvokable.
    """
    module_name, _, class_name = path.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if not (isinstance(cls, type) and issubclass(cls, AbstractInvokable)):
        raise TypeError(f"{path} is not an AbstractInvokable")
    return cls


def root_cause(error: BaseException) -> str:
    """``Type: message`` of the innermost cause, with the outer message when it differs."""
    inner = error
    while inner.__cause__ is not None:
        inner = inner.__cause__
    text = f"{type(inner).__name__}: {inner}".strip()
    if inner is not error:
        text = f"{type(error).__name__}: {error} (caused by {text})"
    return text


class Task:
    """Runs one attempt.

    Args:
        tdd: The deployment descriptor.
        environment: The task's environment.
        report: Called on the task thread with (state, metrics, error) for every state change.
        cancel_work: Cancels the task's running data-plane work (its Spark jobs), again and
            again until the task thread ends (``TaskRuntime.cancel_task_work``).
        failed: Told the error when the task fails (``TaskRuntime.task_failed``), on the task
            thread before the FAILED report.

    Threading:
        ``start`` and ``cancel`` from the TaskExecutor's main thread; ``report`` runs on the
        task thread.
    """

    def __init__(
        self,
        tdd: TaskDeploymentDescriptor,
        environment: TaskEnvironment,
        report: ReportFn,
        cancel_work: Callable[[], None] = lambda: None,
        failed: Callable[[BaseException], None] = lambda error: None,
    ) -> None:
        self.tdd = tdd
        self.environment = environment
        self._report = report
        self._cancel_work = cancel_work
        self._failed = failed
        self._invokable: AbstractInvokable | None = None
        self._thread = threading.Thread(target=self._run, name=tdd.task_name, daemon=True)
        self._canceler: threading.Thread | None = None
        self.state = ExecutionState.DEPLOYING

    @property
    def attempt_id(self) -> str:
        return self.tdd.attempt_id

    def start(self) -> None:
        self._thread.start()

    def cancel(self) -> None:
        """Ask the task to stop; it reports CANCELED once it has.

        A canceler thread (Flink's TaskCanceler) cancels the task's Spark jobs, and again every
        ``_CANCEL_INTERVAL`` s until the task thread ends, so a job started while the first
        cancel was under way is cancelled too; Spark calls never run on the caller's thread.
        """
        self.environment.cancel()
        if self._invokable is not None:
            self._invokable.cancel()
        if self._canceler is None and self._thread.is_alive():
            self._canceler = threading.Thread(
                target=self._cancel_until_ended, name=f"{self.tdd.task_name}-canceler", daemon=True
            )
            self._canceler.start()

    def _cancel_until_ended(self) -> None:
        deadline = time.monotonic() + _CANCEL_TIMEOUT
        while self._thread.is_alive():
            try:
                self._cancel_work()
            except Exception:
                logger.debug(
                    "cancelling the Spark jobs of %s failed", self.tdd.task_name, exc_info=True
                )
            self._thread.join(_CANCEL_INTERVAL)
            if time.monotonic() > deadline:
                logger.error(
                    "task %s did not stop within %.0f s of its cancellation",
                    self.tdd.task_name,
                    _CANCEL_TIMEOUT,
                )
                return

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread; True if it ended."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _set(self, state: ExecutionState, error: str | None = None) -> None:
        self.state = state
        if state is ExecutionState.RUNNING:
            self.environment.io_metrics.start()  # busy time counts from RUNNING
        self.environment.io_metrics.sync()
        self._report(state, self.environment.metrics, error)

    def _run(self) -> None:
        try:
            self._set(ExecutionState.INITIALIZING)
            self._invokable = load_invokable(self.tdd.invokable)(self.environment)
            self.environment.check_cancelled()
            self._set(ExecutionState.RUNNING)
            self._invokable.invoke()
            self.environment.check_cancelled()
            self._set(ExecutionState.FINISHED)
        except BaseException as error:
            if self.environment.cancelled or isinstance(error, TaskCancelledError):
                self._set(ExecutionState.CANCELED)
            else:
                logger.error("task %s failed:\n%s", self.tdd.task_name, traceback.format_exc())
                try:
                    self._failed(error)
                except Exception:  # the data plane's bookkeeping must not hide the failure
                    logger.exception("task %s: the data plane's failure hook", self.tdd.task_name)
                self._set(ExecutionState.FAILED, root_cause(error))


def join_tasks_then(tasks: list[Task], timeout: float, then: Callable[[], None], name: str) -> None:
    """On a thread of its own: wait for ``tasks`` to end (``timeout`` s for all together,
    logging those that did not), then call ``then``. Never blocks the caller."""

    def join_all() -> None:
        deadline = time.monotonic() + timeout
        for task in tasks:
            if not task.join(timeout=max(0.0, deadline - time.monotonic())):
                logger.warning("task %s did not stop within %.0f s", task.tdd.task_name, timeout)
        then()

    threading.Thread(target=join_all, name=name, daemon=True).start()
