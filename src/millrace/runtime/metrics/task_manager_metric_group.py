"""TaskManagerMetricGroup: the metrics of one TaskManager's running tasks (Flink's name).

The TaskExecutor adds a task's :class:`TaskIOMetricGroup` when it starts the task and
removes it when the task ends, both on its main thread; each change publishes a new tuple of
the live groups, which any other thread (the metric query service, the Prometheus reporter)
reads without touching the endpoint: the tuple is immutable and replaced as a whole, and each
group's ``snapshot`` is an immutable value its task thread replaces.
"""

from __future__ import annotations

from millrace.runtime.metrics.task_io_metric_group import TaskIOMetricGroup, TaskMetricsSnapshot

__all__ = ["TaskManagerMetricGroup"]


class TaskManagerMetricGroup:
    """The live tasks of one TaskManager.

    Args:
        resource_id: The TaskManager's ResourceID (Flink's ``tm_id``).

    Threading:
        ``add_task`` and ``remove_task`` on the TaskExecutor's main thread; ``snapshots``
        from any thread.
    """

    def __init__(self, resource_id: str) -> None:
        self.resource_id = resource_id
        self._tasks: tuple[TaskIOMetricGroup, ...] = ()

    def add_task(self, group: TaskIOMetricGroup) -> None:
        self._tasks = (*(g for g in self._tasks if g.attempt_id != group.attempt_id), group)

    def remove_task(self, attempt_id: str) -> None:
        self._tasks = tuple(g for g in self._tasks if g.attempt_id != attempt_id)

    def snapshots(self) -> list[TaskMetricsSnapshot]:
        """The latest snapshot of every live task."""
        return [group.snapshot for group in self._tasks]
