"""Flink's operator scope (``flink_taskmanager_job_task_operator_<metric>``) from a task's
snapshot: what Millrace can say about single operators of a chain, and nothing more.

A task (JobVertex) runs its chain of operators as one Spark plan per bundle, so records are
counted only where the chain meets the outside: what the task reads enters at its *head*
operator and what it emits leaves at its *tail* operator (the last operator that is not a side
output). The operators inside a chain get no counts: Spark does not tell how many rows passed
between two chained operators, and Millrace does not invent them. Placement:

* head: ``numRecordsIn`` (the task's), ``currentInputWatermark`` (the task's: a source's is the
  watermark it emits), and the head operator's own gauges (a Kafka source reader's
  ``KafkaSourceReader.KafkaConsumer.records-lag-max`` and the legacy
  ``KafkaConsumer.records-lag-max``, see
  :class:`~millrace.runtime.metrics.operator_metric_group.OperatorMetricGroup`);
* tail: ``numRecordsOut`` (the task's) and ``currentOutputWatermark`` (the last watermark the
  task sent downstream; absent until one was sent, so a chain that forwards none has none);
* a one-operator chain: all of them on that operator.

Labels are the task scope's plus ``operator_id`` and ``operator_name``. ``operator_name`` is
the operator's name as the plan and the vertex name show it (``Source: flights``); the head's
``operator_id`` is the JobVertexId (in Flink the chain's head OperatorID is the JobVertexID),
the others' an MD5 of the JobVertexId and the operator's position in the chain (32 hex
digits, like Flink's OperatorID): both stable across attempts and TaskManagers.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from millrace.runtime.metrics.task_io_metric_group import NO_WATERMARK, TaskMetricsSnapshot

__all__ = ["OPERATOR_METRICS", "OperatorSample", "operator_id", "operator_samples"]

# Flink's name -> what it is (the help text); gauges of OperatorMetricGroups are added as found.
OPERATOR_METRICS: dict[str, str] = {
    "numRecordsIn": "Records the chain read, on its head operator (none inside a chain).",
    "numRecordsOut": "Records the chain emitted, on its tail operator (none inside a chain).",
    "currentInputWatermark": "The task's input watermark, epoch ms, on its head operator.",
    "currentOutputWatermark": "The last watermark the task sent downstream, epoch ms, on its "
    "tail operator.",
    "KafkaSourceReader.KafkaConsumer.records-lag-max": "Kafka source: the largest lag of the "
    "reader's assigned partitions (high watermark - next offset), in records.",
    "KafkaConsumer.records-lag-max": "The same lag under FlinkKafkaConsumer's (legacy) name.",
}


@dataclass(frozen=True)
class OperatorSample:
    """One operator-scope value.

    Attributes:
        operator_id: Stable 32-hex-digit id (see the module docstring).
        operator_name: The operator's name.
        name: Flink's metric identifier within the operator scope.
        value: The value.
    """

    operator_id: str
    operator_name: str
    name: str
    value: float


def operator_id(vertex_id: str, index: int) -> str:
    """The id of the chain's operator at position ``index`` (0: the head = ``vertex_id``)."""
    if index == 0:
        return vertex_id
    return hashlib.md5(f"{vertex_id}/{index}".encode(), usedforsecurity=False).hexdigest()


def operator_samples(s: TaskMetricsSnapshot) -> list[OperatorSample]:
    """The operator-scope values of one task's snapshot: head and tail only; none when the
    snapshot does not name its operators."""
    if not s.operator_names:
        return []
    last = len(s.operator_names) - 1
    head = (operator_id(s.vertex_id, 0), s.operator_names[0])
    tail = (operator_id(s.vertex_id, last), s.operator_names[last])
    values: list[tuple[tuple[str, str], str, float]] = [
        (head, "numRecordsIn", s.records_in),
        (head, "currentInputWatermark", s.current_input_watermark_ms),
        *((head, name, value) for name, value in s.head_operator_metrics),
        (tail, "numRecordsOut", s.records_out),
    ]
    if s.current_output_watermark_ms != NO_WATERMARK:
        values.append((tail, "currentOutputWatermark", s.current_output_watermark_ms))
    return [OperatorSample(op[0], op[1], name, value) for op, name, value in values]
