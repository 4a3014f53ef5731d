"""Failover regions of a BATCH job (Flink's RestartPipelinedRegionFailoverStrategy).

In BATCH mode every exchange is blocking: a consumer starts once all its producers FINISHED and
reads their complete output from the exchange store, where it stays until the job ends. A
pipelined region is then a single subtask (Flink: vertices connected by pipelined edges; a
keyed BLOCKING edge connects none), and a failed subtask whose inputs are all complete can run
again alone, from those inputs, while the rest of the job goes on.

A failed source subtask is a region too when its source takes splits back (Flink's
``addSplitsBack``: the splits it was handed go out again, ``SourceCoordinator.add_splits_back``);
its failed attempt's output is in an exchange directory of its own that no consumer reads, and
what its sinks staged is not committed (the final commit takes the final attempts' only).

What this module does not cover falls back to the global failover (restore the latest
checkpoint, or start over): a failed source subtask of a source that cannot take splits back,
and a failed subtask whose producers are not all FINISHED (never the case in BATCH, where
consumers start only then).

Threading:
    Pure functions over the ExecutionGraph: call them on the JobMaster's main thread.
"""

from __future__ import annotations

from collections.abc import Collection

from millrace.runtime.executiongraph import ExecutionGraph, ExecutionState, ExecutionVertex
from millrace.types import JobVertexId

__all__ = ["inputs_complete", "regions_to_restart"]


def inputs_complete(graph: ExecutionGraph, vertex: ExecutionVertex) -> bool:
    """Whether every producer subtask of ``vertex`` FINISHED (its blocking inputs are whole)."""
    return all(
        producer.state is ExecutionState.FINISHED
        for producers in graph.producers_of(vertex.job_vertex.vertex_id)
        for producer in producers.task_vertices
    )


def regions_to_restart(
    graph: ExecutionGraph, rewindable: Collection[JobVertexId] = ()
) -> list[ExecutionVertex] | None:
    """The subtasks to run again after a failure of a BATCH job, or None for a global failover.

    Args:
        graph: The job's ExecutionGraph.
        rewindable: The source vertices whose splits can go back to their enumerator.

    Returns:
        The FAILED subtasks, each its own region, when every one of them is a consumer whose
        inputs are complete or a subtask of a ``rewindable`` source; None when a FAILED
        subtask is another source's or lacks a complete input, or when nothing FAILED (a
        failure outside the tasks, e.g. a sink commit).
    """
    failed = [
        ev
        for vertex in graph.vertices
        for ev in vertex.task_vertices
        if ev.state is ExecutionState.FAILED
    ]
    if not failed:
        return None
    for ev in failed:
        job_vertex = ev.job_vertex.job_vertex
        if job_vertex.is_source and job_vertex.vertex_id not in rewindable:
            return None
        if not inputs_complete(graph, ev):
            return None
    return failed
