"""Flink's operator scope on the TaskManager's Prometheus collector: names, labels, and the
counts only where a chain meets the outside (numRecordsIn and the input watermark on its head
operator, numRecordsOut and the output watermark on its tail), never inside a chain."""

from __future__ import annotations

from dataclasses import replace

from millrace.runtime.metrics.flink_collectors import OPERATOR_LABELS, TaskManagerCollector
from millrace.runtime.metrics.operator_scope import operator_id
from millrace.runtime.metrics.task_io_metric_group import NO_WATERMARK, TaskMetricsSnapshot
from tests.runtime.metrics.test_flink_collectors import _scrape

PREFIX = "flink_taskmanager_job_task_operator_"
VERTEX = "0123456789abcdef0123456789abcdef"
CHAIN = TaskMetricsSnapshot(
    "job-1",
    "word count",
    VERTEX,
    "Source: words -> split -> Sink: counts",
    2,
    "attempt-1",
    records_in=500,
    records_out=40,
    current_input_watermark_ms=1_700_000_000_000,
    current_output_watermark_ms=1_699_999_999_000,
    operator_names=("Source: words", "split", "Sink: counts"),
)


def _by_operator(scraped: dict, name: str) -> dict[str, float]:
    return {labels["operator_name"]: value for labels, value in scraped.get(PREFIX + name, [])}


def test_operator_metrics_have_flinks_names_and_labels() -> None:
    scraped = _scrape(TaskManagerCollector({"tm-1": lambda: [CHAIN]}, host="h"))
    operator_series = [(n, s) for n, s in scraped.items() if n.startswith(PREFIX)]
    assert {n.removeprefix(PREFIX) for n, _ in operator_series} == {
        "numRecordsIn",
        "numRecordsOut",
        "currentInputWatermark",
        "currentOutputWatermark",
    }
    [(head, _)] = scraped[PREFIX + "numRecordsIn"]
    assert set(head) == set(OPERATOR_LABELS)
    assert head == {
        "host": "h",
        "tm_id": "tm-1",
        "job_id": "job-1",
        "job_name": "word count",
        "task_id": VERTEX,
        "task_attempt_id": "attempt-1",
        "task_name": "Source: words -> split -> Sink: counts",
        "operator_id": VERTEX,  # the head's OperatorID is the JobVertexID, as in Flink
        "operator_name": "Source: words",
        "subtask_index": "2",
        "task_attempt_num": "0",
    }
    [(tail, _)] = scraped[PREFIX + "numRecordsOut"]
    assert tail["operator_name"] == "Sink: counts"
    assert tail["operator_id"] == operator_id(VERTEX, 2) != VERTEX
    assert len(tail["operator_id"]) == 32 and int(tail["operator_id"], 16) >= 0


def test_counts_sit_on_the_chains_head_and_tail_only() -> None:
    scraped = _scrape(TaskManagerCollector({"tm-1": lambda: [CHAIN]}, host="h"))
    assert _by_operator(scraped, "numRecordsIn") == {"Source: words": 500}
    assert _by_operator(scraped, "currentInputWatermark") == {"Source: words": 1_700_000_000_000}
    assert _by_operator(scraped, "numRecordsOut") == {"Sink: counts": 40}
    assert _by_operator(scraped, "currentOutputWatermark") == {"Sink: counts": 1_699_999_999_000}
    inside = [labels for series in scraped.values() for labels, _ in series]
    assert not any(labels.get("operator_name") == "split" for labels in inside)


def test_a_one_operator_chain_carries_everything() -> None:
    single = replace(CHAIN, task_name="keyed", operator_names=("keyed",))
    scraped = _scrape(TaskManagerCollector({"tm-1": lambda: [single]}, host="h"))
    for name, value in [("numRecordsIn", 500), ("numRecordsOut", 40)]:
        [(labels, got)] = scraped[PREFIX + name]
        assert (labels["operator_name"], labels["operator_id"], got) == ("keyed", VERTEX, value)


def test_operator_ids_are_stable_and_output_watermark_absent_until_one_is_sent() -> None:
    other_attempt = replace(CHAIN, attempt_id="attempt-2", current_output_watermark_ms=NO_WATERMARK)
    scraped = _scrape(TaskManagerCollector({"tm-2": lambda: [other_attempt]}, host="h"))
    [(tail, _)] = scraped[PREFIX + "numRecordsOut"]
    assert tail["operator_id"] == operator_id(VERTEX, 2)  # the same on every attempt and TM
    assert PREFIX + "currentOutputWatermark" not in scraped


def test_the_head_operators_own_gauges_are_exported_on_it() -> None:
    lagging = replace(
        CHAIN,
        head_operator_metrics=(
            ("KafkaConsumer.records-lag-max", 7.0),
            ("KafkaSourceReader.KafkaConsumer.records-lag-max", 7.0),
        ),
    )
    scraped = _scrape(TaskManagerCollector({"tm-1": lambda: [lagging]}, host="h"))
    for name in (
        "KafkaSourceReader_KafkaConsumer_records_lag_max",
        "KafkaConsumer_records_lag_max",
    ):
        assert _by_operator(scraped, name) == {"Source: words": 7.0}
    # without the gauge (not known yet) the metric is absent, not 0
    scraped = _scrape(TaskManagerCollector({"tm-1": lambda: [CHAIN]}, host="h"))
    assert PREFIX + "KafkaConsumer_records_lag_max" not in scraped


def test_a_snapshot_without_operator_names_has_no_operator_scope() -> None:
    unnamed = replace(CHAIN, operator_names=())
    scraped = _scrape(TaskManagerCollector({"tm-1": lambda: [unnamed]}, host="h"))
    assert not any(name.startswith(PREFIX) for name in scraped)
    assert "flink_taskmanager_job_task_numRecordsIn" in scraped
