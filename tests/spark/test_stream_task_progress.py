"""SparkStreamTask.report_progress: counters reach the JobMaster when they changed, throttled,
and the counts of a last bundle are not stranded when no bundle follows (CI failure of
test_kafka_idleness: the source reported only after a bundle, within a second of the last
report, so the JobMaster never saw the final count)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from millrace.runtime.executiongraph.execution_graph import IOMetrics
from millrace.spark import stream_task
from millrace.spark.stream_task import SparkStreamTask


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    clock = _Clock()
    monkeypatch.setattr(stream_task.time, "monotonic", clock)
    return clock


def _task() -> tuple[SparkStreamTask, list[IOMetrics]]:
    """A task without a SparkSession: report_progress reads only the environment's counters."""
    sent: list[IOMetrics] = []
    metrics = IOMetrics()
    task = object.__new__(SparkStreamTask)
    task.environment = SimpleNamespace(  # type: ignore[assignment]
        metrics=metrics,
        report_metrics=lambda: sent.append(IOMetrics(**vars(metrics))),
        io_metrics=SimpleNamespace(sync=lambda: None),
    )
    task._metrics_reported = None
    return task, sent


def test_the_first_report_goes_at_once(clock: _Clock) -> None:
    task, sent = _task()
    task.environment.metrics.records_in = 5
    task.report_progress()
    assert [m.records_in for m in sent] == [5]


def test_unchanged_counters_are_not_sent_again(clock: _Clock) -> None:
    task, sent = _task()
    task.report_progress()
    clock.now += 10
    task.report_progress()
    assert len(sent) == 1


def test_a_change_within_the_interval_waits_then_goes_on_an_idle_turn(clock: _Clock) -> None:
    task, sent = _task()
    task.environment.metrics.records_in = 20_000
    task.report_progress()
    clock.now += 0.3
    task.environment.metrics.records_in = 27_004  # the last bundle, within the interval
    task.report_progress()
    assert [m.records_in for m in sent] == [20_000]
    clock.now += 1.0  # no bundle follows: an idle turn of the loop
    task.report_progress()
    assert [m.records_in for m in sent] == [20_000, 27_004]
