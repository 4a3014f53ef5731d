"""A keyed vertex chained into its source: its one acknowledgement is stored as two vertices'
state, and either shape restores from a checkpoint of either (``chained_state``)."""

from __future__ import annotations

from millrace.runtime.checkpoint.chained_state import unchained_snapshots
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata, VertexState
from millrace.runtime.checkpoint.state_assignment import assign_state
from millrace.runtime.checkpoint.task_state_snapshot import (
    ChainedKeyedState,
    KeyedStateHandle,
    TaskStateSnapshot,
)
from millrace.runtime.io.input_split import InputSplit, SplitState
from millrace.runtime.jobgraph import (
    ChainedKeyedStage,
    JobGraph,
    JobVertex,
    OperatorKind,
    SerializedOperator,
)
from millrace.types import JobVertexId
from tests.runtime.checkpoint.test_checkpoint_state import checkpoint, graph


def chained_graph() -> JobGraph:
    """source -> window -> sink, side output last, at parallelism 1: the chain of ``graph``'s
    two vertices (ids ``src`` and ``win``)."""
    kinds = [OperatorKind.SOURCE, OperatorKind.WINDOW, OperatorKind.SINK, OperatorKind.SIDE_OUTPUT]
    chain = JobVertex(
        "source -> window",
        1,
        "m:Chain",
        tuple(SerializedOperator(kind, kind.value, b"") for kind in kinds),
        True,
        JobVertexId("src"),
        ChainedKeyedStage(JobVertexId("win"), "window", "m:Window", "source", "m:Source", 1, 2, ()),
    )
    return JobGraph("job", [chain], [], 128, "job-1")


def test_a_chained_acknowledgement_is_stored_as_the_two_vertices_state() -> None:
    (chain,) = chained_graph().vertices
    split = SplitState(InputSplit(0, "f"), 42)
    handle = KeyedStateHandle("/w.parquet", 0, 127, 10)
    ack = TaskStateSnapshot(
        split_states=(split,),
        finished_splits=("a",),
        sink_pending={2: ("/out/p0",), 3: ("/dead/p0",)},
        watermark_ms=90,
        chained=ChainedKeyedState((handle,), 70),
    )
    assert unchained_snapshots(chain, ack) == [
        (
            "src",
            TaskStateSnapshot(
                split_states=(split,),
                finished_splits=("a",),
                sink_pending={1: ("/dead/p0",)},  # the side output, unchained at 1
                watermark_ms=90,
            ),
        ),
        (
            "win",
            TaskStateSnapshot(
                keyed_state=(handle,), sink_pending={1: ("/out/p0",)}, watermark_ms=70
            ),
        ),
    ]


def test_a_checkpoint_of_two_vertices_at_two_restores_into_the_chain() -> None:
    assignment = assign_state(checkpoint(), chained_graph())
    assert list(assignment.tasks) == [("src", 0)]
    restore = assignment.tasks[("src", 0)]
    assert restore.watermark_ms == 80  # the sources' lowest
    assert restore.chained is not None
    assert restore.chained.watermark_ms == 70  # the windows' lowest: rescaled from 2 to 1
    assert [h.path for h in restore.chained.keyed_state] == ["/w0.parquet", "/w1.parquet"]
    assert assignment.sources["src"].finished == {"a", "b", "old"}


def test_a_checkpoint_of_the_chain_restores_into_two_vertices_at_two() -> None:
    (chain,) = chained_graph().vertices
    handle = KeyedStateHandle("/w.parquet", 0, 127, 10)
    ack = TaskStateSnapshot(
        split_states=(SplitState(InputSplit(0, "f"), 42),),
        watermark_ms=90,
        chained=ChainedKeyedState((handle,), 70),
    )
    vertices = {"src": VertexState("src", "source", 1), "win": VertexState("win", "window", 1)}
    for vertex_id, part in unchained_snapshots(chain, ack):
        vertices[vertex_id].subtasks[0] = part
    metadata = CheckpointMetadata("job-1", "job", 5, 0, 0, False, 128, list(vertices.values()))
    assignment = assign_state(metadata, graph(2, source_parallelism=2))
    assert assignment.sources["src"].open == ack.split_states
    for index in (0, 1):  # each window subtask reads its key groups from the one file
        window = assignment.tasks[("win", index)]
        assert window.keyed_state == (handle,) and window.watermark_ms == 70
        assert window.chained is None
    assert assignment.tasks[("src", 0)].watermark_ms == 90
