"""Chaining a keyed stage into its source where the HASH edge is forward in effect.

Flink chains two operators when the edge between them is forward and their parallelism is
equal (seed 002); a ``key_by`` ends the chain, as it redistributes records by key group. When
a bounded source vertex and the keyed vertex it feeds both run at parallelism 1, though, the
HASH edge sends every record to the one consumer subtask: forward in effect. In BATCH mode the
keyed vertex is then chained into the source vertex, and the job runs as one Spark plan with
Spark's own shuffle between the partial and the final aggregates (``BatchKeyedChainTask``):
no exchange files, no second Spark job, no second deployment.

In STREAMING a window or running-aggregate vertex of parallelism 1 fed by a source vertex of
parallelism 1 is chained the same way (``spark/keyed_chain_stream_task.py``: each bundle's
partials become keyed state without an exchange, and the window fires, or the aggregate emits,
in the source's task), unless
``pipeline.chain-keyed-stages`` is false. The chained vertex keeps what it needs to split back
(``ChainedKeyedStage``): checkpoints store its state as the two vertices' (by their stable ids,
computed before chaining), sinks keep their unchained keys, and a live ``rescale`` above 1
splits it into the two vertices again.
"""

from __future__ import annotations

from millrace.runtime.jobgraph import (
    ChainedKeyedStage,
    DistributionPattern,
    JobEdge,
    JobVertex,
    OperatorKind,
)

__all__ = [
    "KEYED_CHAIN_STREAM_TASKS",
    "KEYED_CHAIN_TASK",
    "chain_keyed_stages",
    "chain_keyed_streaming_stages",
]

KEYED_CHAIN_TASK = "millrace.spark.batch_keyed_chain_task:BatchKeyedChainTask"
KEYED_CHAIN_STREAM_TASKS = {
    "millrace.spark.window_stream_task:WindowStreamTask": (
        "millrace.spark.keyed_chain_stream_task:WindowChainStreamTask"
    ),
    "millrace.spark.keyed_aggregate_stream_task:KeyedAggregateStreamTask": (
        "millrace.spark.keyed_chain_stream_task:RunningAggregateChainStreamTask"
    ),
}
"""STREAMING keyed task -> the task running it chained into its source."""

_SOURCE = "millrace.spark.batch_source_task:BatchSourceTask"
_KEYED = (
    "millrace.spark.batch_window_task:BatchWindowTask",
    "millrace.spark.batch_keyed_aggregate_task:BatchKeyedAggregateTask",
)
_STREAM_SOURCE = "millrace.spark.source_stream_task:SourceStreamTask"


def chain_keyed_stages(vertices: list[JobVertex], edges: list[JobEdge]) -> None:
    """Chain, in place, every BATCH keyed vertex of parallelism 1 whose one input is a HASH edge
    from a BATCH source vertex of parallelism 1 with no other output into that source vertex.

    The source vertex keeps its id and becomes a ``KEYED_CHAIN_TASK`` running
    ``source operators, keyed operators, source side outputs``; the keyed vertex and the edge
    go. A keyed vertex with outputs of its own is left as it is.

    Args:
        vertices: The JobGraph's vertices, invokables already in their BATCH form.
        edges: The JobGraph's edges.
    """
    for source, keyed, edge in _chainable(vertices, edges, _SOURCE, _KEYED):
        _chain(source, keyed, KEYED_CHAIN_TASK)
        edges.remove(edge)
        vertices.remove(keyed)


def chain_keyed_streaming_stages(vertices: list[JobVertex], edges: list[JobEdge]) -> None:
    """Chain, in place, every STREAMING window or running-aggregate vertex of parallelism 1
    whose one input is a HASH edge from a source vertex of parallelism 1 with no other output
    into that source vertex.

    The source vertex keeps its id, runs ``source operators, keyed operators, source side
    outputs`` as the keyed task's ``KEYED_CHAIN_STREAM_TASKS`` and records the keyed vertex in
    ``chained_keyed`` (``JobVertex.unchained`` gives the two back); the keyed vertex and the
    edge go. Ids must be the stable ones already.

    Args:
        vertices: The JobGraph's vertices, with their stable ids.
        edges: The JobGraph's edges.
    """
    keyed_tasks = tuple(KEYED_CHAIN_STREAM_TASKS)
    for source, keyed, edge in _chainable(vertices, edges, _STREAM_SOURCE, keyed_tasks):
        stage = ChainedKeyedStage(
            keyed.vertex_id,
            keyed.name,
            keyed.invokable,
            source.name,
            source.invokable,
            sum(op.kind is not OperatorKind.SIDE_OUTPUT for op in source.operators),
            len(keyed.operators),
            edge.key_columns,
        )
        _chain(source, keyed, KEYED_CHAIN_STREAM_TASKS[keyed.invokable])
        source.chained_keyed = stage
        edges.remove(edge)
        vertices.remove(keyed)


def _chainable(
    vertices: list[JobVertex], edges: list[JobEdge], source_task: str, keyed_tasks: tuple[str, ...]
) -> list[tuple[JobVertex, JobVertex, JobEdge]]:
    """(source, keyed, the HASH edge between them) of every pair that can be chained."""
    by_id = {v.vertex_id: v for v in vertices}
    found = []
    for edge in edges:
        source, keyed = by_id[edge.source], by_id[edge.target]
        if (
            edge.pattern is DistributionPattern.HASH
            and source.invokable == source_task
            and keyed.invokable in keyed_tasks
            and source.parallelism == keyed.parallelism == 1
            and [e for e in edges if e.source == source.vertex_id] == [edge]
            and [e for e in edges if e.target == keyed.vertex_id] == [edge]
            and not [e for e in edges if e.source == keyed.vertex_id]
        ):
            found.append((source, keyed, edge))
    return found


def _chain(source: JobVertex, keyed: JobVertex, invokable: str) -> None:
    """Make ``source`` run ``source chain, keyed chain, source side outputs`` as ``invokable``."""
    side_outputs = tuple(op for op in source.operators if op.kind is OperatorKind.SIDE_OUTPUT)
    chain = tuple(op for op in source.operators if op.kind is not OperatorKind.SIDE_OUTPUT)
    source.operators = (*chain, *keyed.operators, *side_outputs)
    source.name = f"{source.name} -> {keyed.name}"
    source.invokable = invokable
