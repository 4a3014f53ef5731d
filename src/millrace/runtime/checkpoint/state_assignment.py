"""StateAssignment: which task restores what from a checkpoint, at any parallelism (Flink's
StateAssignmentOperation).

Keyed state moves in key groups: new subtask ``i`` gets every state file whose key-group range
meets its own (``key_group_range``) and keeps only its key groups' rows. Source state is not
tied to subtasks: the finished splits are left out of the enumeration and the open ones are
handed out again with their positions, to whichever subtask asks (``SourceCoordinator``); every
source subtask resumes at the lowest watermark any of them had, so that no record read again is
judged late.
Vertices are matched by id, which is stable across runs of the same pipeline; a keyed vertex
chained into its source restores as the two vertices it was chained from (``chained_state``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from millrace.errors import CheckpointError
from millrace.runtime.checkpoint.chained_state import chained_restore
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata
from millrace.runtime.checkpoint.key_groups import KeyGroupRange, key_group_range
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.io.input_split import SplitState
from millrace.runtime.io.partition_events import MIN_WATERMARK
from millrace.runtime.jobgraph import JobGraph
from millrace.types import JobVertexId

__all__ = ["RestoredSourceState", "StateAssignment", "assign_state"]


@dataclass(frozen=True)
class RestoredSourceState:
    """A source vertex's restored splits.

    Attributes:
        finished: Ids of the splits read to the end before the checkpoint.
        open: Splits begun and not finished, with their positions: those the subtasks
            snapshotted, and those the checkpoint's SourceCoordinator still held (restored
            earlier, not yet handed out) that no subtask named.
    """

    finished: frozenset[str] = frozenset()
    open: tuple[SplitState, ...] = ()


@dataclass(frozen=True)
class StateAssignment:
    """What every task and source coordinator of a job restores.

    Attributes:
        checkpoint_id: The restored checkpoint.
        tasks: (vertex id, subtask index) -> the task's restore snapshot.
        sources: Source vertex id -> its restored splits.
    """

    checkpoint_id: int
    tasks: dict[tuple[str, int], TaskStateSnapshot] = field(default_factory=dict)
    sources: dict[str, RestoredSourceState] = field(default_factory=dict)


def assign_state(metadata: CheckpointMetadata, job_graph: JobGraph) -> StateAssignment:
    """Distribute ``metadata`` over ``job_graph``'s subtasks.

    Raises:
        CheckpointError: If the max parallelism differs, or state belongs to a vertex the job
            does not have (the pipeline changed).
    """
    if metadata.max_parallelism != job_graph.max_parallelism:
        raise CheckpointError(
            f"the checkpoint has {metadata.max_parallelism} key groups, the job "
            f"{job_graph.max_parallelism} (pipeline.max-parallelism must stay the same)"
        )
    # a keyed vertex chained into its source restores as the two vertices (chained_state)
    vertices = {v.vertex_id: v for chain in job_graph.vertices for v in chain.unchained()[0]}
    assignment = StateAssignment(metadata.checkpoint_id)
    for state in metadata.vertices:
        vertex = vertices.get(JobVertexId(state.vertex_id))
        if vertex is None:
            if not state.finished_splits and not any(
                _has_state(s) for s in state.subtasks.values()
            ):
                continue  # a stateless vertex of the old pipeline: nothing to restore
            raise CheckpointError(
                f"the checkpoint holds state of {state.name!r} (vertex {state.vertex_id}), "
                f"which job {job_graph.name!r} does not have; was the pipeline changed?"
            )
        snapshots = list(state.subtasks.items())
        if vertex.is_source:
            finished = frozenset(state.finished_splits).union(
                f for _, s in snapshots for f in s.finished_splits
            )
            in_tasks = tuple(
                x for _, s in snapshots for x in s.split_states if x.split.split_id not in finished
            )
            # a subtask's snapshot is newer than the coordinator's share of the same checkpoint
            named = finished.union(x.split.split_id for x in in_tasks)
            held = tuple(x for x in state.unassigned_splits if x.split.split_id not in named)
            open_splits = in_tasks + held
            assignment.sources[vertex.vertex_id] = RestoredSourceState(finished, open_splits)
        for index in range(vertex.parallelism):
            own = key_group_range(job_graph.max_parallelism, vertex.parallelism, index)
            handles = tuple(
                h
                for _, s in snapshots
                for h in s.keyed_state
                if own.intersects(KeyGroupRange(h.key_group_start, h.key_group_end))
            )
            keyed_same_subtask = (
                not vertex.is_source
                and vertex.parallelism == state.parallelism
                and index in state.subtasks
            )
            if keyed_same_subtask:
                watermark = state.subtasks[index].watermark_ms
            else:
                # Sources: any subtask may get any unfinished split back, and each split's
                # records are later than its old owner's watermark, so the minimum is the
                # highest watermark that makes none of them late. Rescaled windows: the
                # minimum of the subtasks whose key groups they inherit.
                watermark = min((s.watermark_ms for _, s in snapshots), default=MIN_WATERMARK)
            assignment.tasks[(vertex.vertex_id, index)] = TaskStateSnapshot(
                keyed_state=handles, watermark_ms=watermark
            )
    for chain in job_graph.vertices:
        if chain.chained_keyed is None:
            continue
        keyed_id = chain.chained_keyed.keyed_id
        for index in range(chain.parallelism):
            restore = chained_restore(
                assignment.tasks.pop((chain.vertex_id, index), None),
                assignment.tasks.pop((keyed_id, index), None),
            )
            if restore is not None:
                assignment.tasks[(chain.vertex_id, index)] = restore
    return assignment


def _has_state(snapshot: TaskStateSnapshot) -> bool:
    return bool(snapshot.keyed_state or snapshot.split_states or snapshot.finished_splits)
