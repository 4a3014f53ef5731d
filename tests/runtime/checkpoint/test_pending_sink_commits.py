"""PendingSinkCommits: carried sink data merged subtask by subtask into the next checkpoint."""

from __future__ import annotations

from millrace.runtime.checkpoint.checkpoint_storage import VertexState
from millrace.runtime.checkpoint.pending_checkpoint import CheckpointTarget
from millrace.runtime.checkpoint.pending_sink_commits import PendingSinkCommits
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.types import ExecutionAttemptId, JobVertexId


def target(subtask: int) -> CheckpointTarget:
    return CheckpointTarget(ExecutionAttemptId(f"w{subtask}"), JobVertexId("win"), subtask)


def test_carried_data_of_a_subtask_the_checkpoint_lacks_stays_carried_and_the_rest_merges() -> None:
    owed = PendingSinkCommits()
    owed.carry(target(0), TaskStateSnapshot(sink_pending={1: ("lacking",)}))
    owed.carry(target(1), TaskStateSnapshot(sink_pending={1: ("a",)}))
    vertex = VertexState(JobVertexId("win"), "window", 2)
    vertex.subtasks[1] = TaskStateSnapshot(sink_pending={1: ("b",)})
    merged = owed.merge_into({JobVertexId("win"): vertex})
    assert merged == {(JobVertexId("win"), 1): {1: ["a"]}}
    assert vertex.subtasks[1].sink_pending == {1: ("a", "b")}
    assert owed.carried_handles == 1
    later = VertexState(JobVertexId("win"), "window", 2)
    later.subtasks[0] = TaskStateSnapshot()
    owed.merge_into({JobVertexId("win"): later})
    assert later.subtasks[0].sink_pending == {1: ("lacking",)}
    assert owed.carried_handles == 0


def test_carried_data_of_a_chain_keeps_its_sinks_unchained_keys() -> None:
    """An aborted checkpoint's acknowledgement by a chained source and window: the window
    sink's data is merged into the window vertex, the side output's into the source vertex,
    each at its position unchained (as the SinkCommitter keys them)."""
    from millrace.runtime.checkpoint.chained_state import unchained_snapshots
    from tests.runtime.checkpoint.test_chained_state import chained_graph

    job = chained_graph()
    owed = PendingSinkCommits(lambda v, snapshot: unchained_snapshots(job.vertex(v), snapshot))
    chain = CheckpointTarget(ExecutionAttemptId("c0"), JobVertexId("src"), 0)
    owed.carry(chain, TaskStateSnapshot(sink_pending={2: ("window-out",), 3: ("dead",)}))
    source = VertexState(JobVertexId("src"), "source", 1)
    window = VertexState(JobVertexId("win"), "window", 1)
    source.subtasks[0] = window.subtasks[0] = TaskStateSnapshot()
    owed.merge_into({JobVertexId("src"): source, JobVertexId("win"): window})
    assert window.subtasks[0].sink_pending == {1: ("window-out",)}
    assert source.subtasks[0].sink_pending == {1: ("dead",)}
