"""Chaining a keyed stage into its source in BATCH mode, where the HASH edge is forward in effect.

Flink chains two operators when the edge between them is forward and their parallelism is
equal (seed 002); a ``key_by`` ends the chain, as it redistributes records by key group. When
a bounded source vertex and the keyed vertex it feeds both run at parallelism 1, though, the
HASH edge sends every record to the one consumer subtask: forward in effect. In BATCH mode the
keyed vertex is then chained into the source vertex, and the job runs as one Spark plan with
Spark's own shuffle between the partial and the final aggregates (``BatchKeyedChainTask``):
no exchange files, no second Spark job, no second deployment. In STREAMING the stages stay
apart: the keyed vertex's state is checkpointed by key group and can be rescaled on its own.
"""

from __future__ import annotations

from millrace.runtime.jobgraph import DistributionPattern, JobEdge, JobVertex, OperatorKind

__all__ = ["KEYED_CHAIN_TASK", "chain_keyed_stages"]

KEYED_CHAIN_TASK = "millrace.spark.batch_keyed_chain_task:BatchKeyedChainTask"

_SOURCE = "millrace.spark.batch_source_task:BatchSourceTask"
_KEYED = (
    "millrace.spark.batch_window_task:BatchWindowTask",
    "millrace.spark.batch_keyed_aggregate_task:BatchKeyedAggregateTask",
)


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
    by_id = {v.vertex_id: v for v in vertices}
    for edge in list(edges):
        source, keyed = by_id[edge.source], by_id[edge.target]
        if not (
            edge.pattern is DistributionPattern.HASH
            and source.invokable == _SOURCE
            and keyed.invokable in _KEYED
            and source.parallelism == keyed.parallelism == 1
            and [e for e in edges if e.source == source.vertex_id] == [edge]
            and [e for e in edges if e.target == keyed.vertex_id] == [edge]
            and not [e for e in edges if e.source == keyed.vertex_id]
        ):
            continue
        side_outputs = tuple(op for op in source.operators if op.kind is OperatorKind.SIDE_OUTPUT)
        chain = tuple(op for op in source.operators if op.kind is not OperatorKind.SIDE_OUTPUT)
        source.operators = (*chain, *keyed.operators, *side_outputs)
        source.name = f"{source.name} -> {keyed.name}"
        source.invokable = KEYED_CHAIN_TASK
        edges.remove(edge)
        vertices.remove(keyed)
