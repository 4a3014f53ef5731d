"""OperatorMetricGroup: the metrics one chained operator registers itself (Flink's
OperatorMetricGroup; a source reader's is Flink's SourceReaderMetricGroup).

Flink's gauges are callbacks a reporter calls on its own thread; Millrace's readers run on the
task thread and their state is not thread-safe, so an operator *sets* each value on the task
thread and the task's :class:`~millrace.runtime.metrics.task_io_metric_group.TaskIOMetricGroup`
copies the group into the task's immutable snapshot at each ``sync`` (about once a second).
A reporter reads only that snapshot: nothing is polled from the HTTP thread.
"""

from __future__ import annotations

__all__ = ["OperatorMetricGroup"]


class OperatorMetricGroup:
    """Named values of one operator, within Flink's operator scope.

    Names are Flink's metric identifiers inside the operator scope, with their groups joined
    by ``.`` (``KafkaSourceReader.KafkaConsumer.records-lag-max``); the Prometheus reporter
    turns every character it refuses into ``_``.

    Threading:
        Task thread only (``set_gauge``, ``values``).
    """

    def __init__(self) -> None:
        self._values: dict[str, float] = {}

    def set_gauge(self, name: str, value: float | None) -> None:
        """Set gauge ``name`` to ``value``; None removes it (the value is not known now, so
        the metric is absent rather than stale)."""
        if value is None:
            self._values.pop(name, None)
        else:
            self._values[name] = float(value)

    def values(self) -> tuple[tuple[str, float], ...]:
        """Every gauge as ``(name, value)``, sorted by name (an immutable copy)."""
        return tuple(sorted(self._values.items()))
