"""A chained keyed vertex's state, stored and restored as that of two vertices.

A keyed vertex chained into its source vertex (``ChainedKeyedStage``: STREAMING, parallelism
1) runs in the source's task, and that task acknowledges one ``TaskStateSnapshot`` with the
keyed part in ``chained``. Checkpoints store it as the two vertices would have: the split
positions, the finished splits and the source side outputs' staged data under the source
vertex's id, the keyed state, the fired watermark and the window's sinks' staged data under the
keyed vertex's id, every sink at its chain position unchained. So a checkpoint or savepoint of
either shape restores into either (a live ``rescale`` above 1 splits the chain).
"""

from __future__ import annotations

from dataclasses import replace

from millrace.runtime.checkpoint.task_state_snapshot import ChainedKeyedState, TaskStateSnapshot
from millrace.runtime.jobgraph import JobVertex
from millrace.types import JobVertexId

__all__ = ["chained_restore", "unchained_snapshots"]


def unchained_snapshots(
    vertex: JobVertex, snapshot: TaskStateSnapshot
) -> list[tuple[JobVertexId, TaskStateSnapshot]]:
    """``snapshot``, acknowledged by a subtask of ``vertex``, as (vertex id, snapshot) of the
    unchained vertices: itself alone for a vertex without a chained keyed stage.

    Threading:
        Any; pure.
    """
    stage = vertex.chained_keyed
    if stage is None:
        return [(vertex.vertex_id, snapshot)]
    pending: dict[JobVertexId, dict[int, tuple[str, ...]]] = {
        vertex.vertex_id: {},
        stage.keyed_id: {},
    }
    for position, handles in snapshot.sink_pending.items():
        owner, own_position = vertex.unchained_position(position)
        pending[owner][own_position] = handles
    keyed = snapshot.chained or ChainedKeyedState()
    return [
        (
            vertex.vertex_id,
            replace(snapshot, chained=None, keyed_state=(), sink_pending=pending[vertex.vertex_id]),
        ),
        (
            stage.keyed_id,
            TaskStateSnapshot(
                keyed_state=keyed.keyed_state,
                sink_pending=pending[stage.keyed_id],
                watermark_ms=keyed.watermark_ms,
            ),
        ),
    ]


def chained_restore(
    source: TaskStateSnapshot | None, keyed: TaskStateSnapshot | None
) -> TaskStateSnapshot | None:
    """What a chained task restores: the source vertex's assigned state with the keyed
    vertex's keyed state and watermark in ``chained`` (None when neither has any).

    Threading:
        Any; pure.
    """
    if source is None and keyed is None:
        return None
    chained = None if keyed is None else ChainedKeyedState(keyed.keyed_state, keyed.watermark_ms)
    return replace(source or TaskStateSnapshot(), chained=chained)
