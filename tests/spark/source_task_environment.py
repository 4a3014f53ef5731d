"""A SourceStreamTask's TaskEnvironment without a cluster or a SparkSession: the deployment of
one source subtask chained into a sink that is never reached, split replies the test scripts,
events and checkpoint answers collected by the test (``test_source_task_states``,
``test_source_idleness``)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from millrace.api.operators import SinkOperator, SourceOperator
from millrace.config import Configuration
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.deployment import TaskDeploymentDescriptor
from millrace.runtime.io.input_split import NextInputSplit
from millrace.runtime.io.partition_events import MAX_WATERMARK
from millrace.runtime.jobgraph import OperatorKind, SerializedOperator
from millrace.runtime.taskexecutor.task_environment import CheckpointResponder, TaskEnvironment
from millrace.types import (
    Address,
    AllocationId,
    ExecutionAttemptId,
    JobId,
    JobVertexId,
    ResultPartitionId,
)

__all__ = ["scripted_split_replies", "source_task_environment"]


def scripted_split_replies(replies: list[NextInputSplit]) -> Callable[[], Future[NextInputSplit]]:
    """``request_split``: the next of ``replies`` (taken from the list), then "none yet, more
    expected" for ever."""

    def next_split() -> Future[NextInputSplit]:
        reply: Future[NextInputSplit] = Future()
        reply.set_result(
            replies.pop(0) if replies else NextInputSplit(None, MAX_WATERMARK, more_expected=True)
        )
        return reply

    return next_split


def source_task_environment(
    source: SourceOperator,
    work: Path,
    *,
    replies: list[NextInputSplit],
    events: list[Any],
    responder: CheckpointResponder,
    bundle_max_delay: str,
    restore: TaskStateSnapshot | None = None,
) -> TaskEnvironment:
    """The environment of subtask 1/1 of ``source`` (named ``source.name``), emitting into
    ``events``; Spark's session is a stand-in whose job groups and local properties do
    nothing (the tasks under test run no Spark plan)."""
    sink = SinkOperator(object(), "Sink: nowhere")
    tdd = TaskDeploymentDescriptor(
        JobId("job"),
        "job",
        Address("local://test/jobmaster"),
        JobVertexId("src"),
        f"{source.name} (1/1)",
        0,
        1,
        ExecutionAttemptId("attempt-1"),
        AllocationId("slot-0"),
        "millrace.spark.source_stream_task:SourceStreamTask",
        (
            SerializedOperator.of(OperatorKind.SOURCE, source.name, source),
            SerializedOperator.of(OperatorKind.SINK, "Sink: nowhere", sink),
        ),
        True,
        ResultPartitionId("attempt-1"),
        1,
        (),
        128,
        restore=restore,
    )
    session: Future[Any] = Future()
    context = SimpleNamespace(setJobGroup=lambda *a, **k: None, setLocalProperty=lambda *a: None)
    session.set_result(SimpleNamespace(sparkContext=context))
    return TaskEnvironment(
        tdd,
        Configuration({"execution.bundle.max-delay": bundle_max_delay}),
        session,
        work,
        request_split=scripted_split_replies(replies),
        emit=lambda subpartition, event: events.append(event),
        input_gate=None,
        checkpoint_responder=responder,
        report_metrics=lambda: None,
    )
