"""TaskIOMetricGroup: busy, idle and back-pressured time of a task (Flink's definitions: busy
is the running time that was neither idle nor back-pressured) and Flink's per-second views."""

from __future__ import annotations

from millrace.runtime.executiongraph import IOMetrics
from millrace.runtime.metrics.task_io_metric_group import (
    NO_WATERMARK,
    TaskIOMetricGroup,
)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _group(clock: _Clock) -> TaskIOMetricGroup:
    return TaskIOMetricGroup(
        "job-1", "word count", "vertex-1", "Source: words (2/3)", 1, "attempt-1", IOMetrics(), clock
    )


def test_busy_time_is_running_time_neither_idle_nor_back_pressured() -> None:
    clock = _Clock()
    group = _group(clock)
    clock.now += 5.0  # before RUNNING: not counted
    group.start()
    with group.idle():
        clock.now += 2.0
    with group.back_pressured():
        clock.now += 0.5
    clock.now += 1.5  # processing
    snapshot = group.sync()
    assert (snapshot.busy_ms, snapshot.idle_ms, snapshot.backpressured_ms) == (1500, 2000, 500)
    assert (group.counters.busy_ms, group.counters.idle_ms) == (1500, 2000)


def test_rates_average_counters_over_the_window() -> None:
    clock = _Clock()
    group = _group(clock)
    group.start()
    assert group.sync().records_in_per_second == 0.0  # one sample: no rate yet
    for _ in range(10):
        clock.now += 1.0
        group.counters.records_in += 100
        group.counters.records_out += 10
        group.add_idle(0.25)
        snapshot = group.sync()
    assert snapshot.records_in_per_second == 100.0
    assert snapshot.records_out_per_second == 10.0
    assert snapshot.idle_ms_per_second == 250.0  # over the last 5 s
    assert snapshot.busy_ms_per_second == 750.0
    assert snapshot.backpressured_ms_per_second == 0.0


def test_an_idle_minute_brings_the_record_rate_to_zero() -> None:
    clock = _Clock()
    group = _group(clock)
    group.start()
    group.sync()
    clock.now += 1.0
    group.counters.records_in += 1000
    group.sync()
    for _ in range(61):
        clock.now += 1.0
        with group.idle():
            pass
        snapshot = group.sync()
    assert snapshot.records_in_per_second == 0.0


def test_snapshot_names_the_task_as_flink_does() -> None:
    group = _group(_Clock())
    snapshot = group.snapshot
    assert snapshot.task_name == "Source: words"  # the subtask suffix is a label of its own
    assert (snapshot.subtask_index, snapshot.attempt_id) == (1, "attempt-1")
    assert snapshot.current_input_watermark_ms == NO_WATERMARK
    group.current_input_watermark_ms = 42
    assert group.sync().current_input_watermark_ms == 42


def test_sync_publishes_the_operators_gauges_and_the_output_watermark() -> None:
    group = TaskIOMetricGroup(
        "job-1",
        "j",
        "vertex-1",
        "Source: s -> Sink: t (1/1)",
        0,
        "attempt-1",
        IOMetrics(),
        _Clock(),
        operator_names=("Source: s", "Sink: t"),
    )
    assert group.sync().head_operator_metrics == ()
    assert group.snapshot.current_output_watermark_ms == NO_WATERMARK
    group.head_operator.set_gauge("KafkaConsumer.records-lag-max", 12)
    group.current_output_watermark_ms = 1_700_000_000_000
    assert group.snapshot.head_operator_metrics == ()  # published at the next sync only
    snapshot = group.sync()
    assert snapshot.operator_names == ("Source: s", "Sink: t")
    assert snapshot.head_operator_metrics == (("KafkaConsumer.records-lag-max", 12.0),)
    assert snapshot.current_output_watermark_ms == 1_700_000_000_000
    group.head_operator.set_gauge("KafkaConsumer.records-lag-max", None)  # not known: absent
    assert group.sync().head_operator_metrics == ()
