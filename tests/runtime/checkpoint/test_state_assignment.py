"""StateAssignment beyond the cases of ``test_checkpoint_state``: a final checkpoint (no subtask
state), vertices the pipeline no longer has."""

from __future__ import annotations

import pytest

from millrace.errors import CheckpointError
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata, VertexState
from millrace.runtime.checkpoint.state_assignment import assign_state
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.io.partition_events import MIN_WATERMARK
from tests.runtime.checkpoint.test_checkpoint_state import checkpoint, graph


def test_a_final_checkpoint_restores_every_task_empty_at_the_lowest_watermark() -> None:
    final = CheckpointMetadata(  # as complete_final writes it: no subtask state at all
        "job-1",
        "job",
        9,
        0,
        0,
        False,
        128,
        [VertexState("src", "source", 2, finished_splits=("a", "b")), VertexState("win", "w", 2)],
    )
    assignment = assign_state(final, graph(3))
    assert assignment.checkpoint_id == 9
    assert sorted(assignment.tasks) == [("src", 0), ("src", 1), ("win", 0), ("win", 1), ("win", 2)]
    empty = TaskStateSnapshot(watermark_ms=MIN_WATERMARK)
    assert all(task == empty for task in assignment.tasks.values())
    assert assignment.sources["src"].finished == {"a", "b"} and assignment.sources["src"].open == ()


def test_a_stateless_vertex_the_pipeline_no_longer_has_is_ignored() -> None:
    old = checkpoint()
    dropped = VertexState("map", "a map", 2, {0: TaskStateSnapshot(watermark_ms=5)})
    with_map = CheckpointMetadata(
        old.job_id, old.job_name, 5, 0, 0, False, 128, [dropped, *old.vertices]
    )
    assignment = assign_state(with_map, graph(2))
    assert [h.path for h in assignment.tasks[("win", 1)].keyed_state] == ["/w1.parquet"]
    assert assignment.sources["src"].finished == {"a", "b", "old"}


def test_finished_splits_of_a_source_the_pipeline_no_longer_has_are_an_error() -> None:
    gone = VertexState("src", "source", 1, {0: TaskStateSnapshot(finished_splits=("f",))})
    metadata = CheckpointMetadata("job-1", "job", 5, 0, 0, False, 128, [gone])
    job = graph(2)
    job.vertices = job.vertices[1:]
    with pytest.raises(CheckpointError, match="'source'"):
        assign_state(metadata, job)
