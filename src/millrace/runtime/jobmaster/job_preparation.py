"""What a JobMaster prepares before (re)deploying a job, in its I/O executor.

It loads the user's source and sink connectors from the JobGraph, asks each source's enumerator
for its splits and wraps it in a SourceCoordinator, and, when the job restores (a failover to
the latest checkpoint, or a new job started from a savepoint), reads the checkpoint and
distributes its state over the job's subtasks (``assign_state``). :class:`JobPreparer` also
brings the sinks to where the job starts: a failover finishes the restored checkpoint's commit
and aborts every other staged data; a job started from a savepoint or an earlier job's
checkpoint commits what that one owes; a fresh job initializes its sinks.
"""

from __future__ import annotations

from concurrent.futures import Executor, Future
from dataclasses import dataclass

from millrace.config import Configuration
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata, CheckpointStorage
from millrace.runtime.checkpoint.state_assignment import (
    RestoredSourceState,
    StateAssignment,
    assign_state,
)
from millrace.runtime.io import exchange_store
from millrace.runtime.jobgraph import JobGraph, OperatorKind
from millrace.runtime.jobmaster.sink_committer import SinkCommitter, SinkKey
from millrace.runtime.sink import Sink
from millrace.runtime.source.source_coordinator import SourceCoordinator
from millrace.types import JobVertexId

__all__ = ["JobPreparer", "PreparedJob", "prepare_job"]


@dataclass(frozen=True)
class PreparedJob:
    """A job ready to deploy.

    Attributes:
        sources: Source vertex -> its coordinator (splits discovered, restored positions).
        sinks: Sink connectors by (vertex id, chain position), including every source
            vertex's side-output sinks (SIDE_OUTPUT operators of its chain).
        restored: The checkpoint or savepoint restored from, if any.
        assignment: Its state, per subtask and source, if any.
    """

    sources: dict[JobVertexId, SourceCoordinator]
    sinks: dict[SinkKey, Sink]
    restored: CheckpointMetadata | None = None
    assignment: StateAssignment | None = None


def prepare_job(
    job_graph: JobGraph,
    configuration: Configuration,
    storage: CheckpointStorage,
    restore_from: CheckpointMetadata | None = None,
    savepoint_path: str | None = None,
) -> PreparedJob:
    """Load connectors, discover splits, assign restored state. Blocking I/O.

    Args:
        job_graph: The job.
        configuration: The job's configuration (where its side outputs go).
        storage: Reads the savepoint.
        restore_from: The checkpoint a failover restores, if any.
        savepoint_path: A savepoint or retained checkpoint to start from, if any (used when
            ``restore_from`` is None).

    Raises:
        CheckpointError: If the savepoint cannot be read or does not fit the job.
        UserCodeError: If a connector cannot be loaded here.
        Exception: Whatever a source's first discovery raises (e.g. no input files).
    """
    restored = restore_from
    if restored is None and savepoint_path:
        restored = storage.read(savepoint_path)
    assignment = assign_state(restored, job_graph) if restored is not None else None
    sources: dict[JobVertexId, SourceCoordinator] = {}
    sinks: dict[SinkKey, Sink] = {}
    for vertex in job_graph.vertices:
        for position, op in enumerate(vertex.operators):
            if op.kind is OperatorKind.SOURCE:
                source_op = op.deserialize()
                source = source_op.source
                enumerator = source.create_enumerator(source_op.event_time)
                if opening := getattr(enumerator, "open", None):  # a JobManager side: HttpSource
                    opening(configuration, job_graph.job_id, op.name)
                state = (
                    assignment.sources.get(vertex.vertex_id) if assignment else None
                ) or RestoredSourceState()
                coordinator = SourceCoordinator(
                    op.name, enumerator, source.boundedness, state.finished, state.open
                )
                coordinator.add_discovered(enumerator.discover())
                sources[vertex.vertex_id] = coordinator
            elif op.kind.writes:  # the chain's sinks and its side outputs alike
                # keyed as unchained: a chained keyed vertex's sinks keep their own keys
                sinks[vertex.unchained_position(position)] = op.deserialize().sink
    return PreparedJob(sources, sinks, restored, assignment)


class JobPreparer:
    """Prepares a job, and each of its restarts, in the JobMaster's I/O executor.

    Args:
        job_graph: The job.
        configuration: Its configuration.
        storage: Reads savepoints and checkpoints.
        committer: The job's SinkCommitter (sinks are set and prepared on its own thread).
        working_dir: The job's exchange and state directory, emptied before each attempt.
        io_executor: Where the preparation runs.

    Threading:
        ``prepare`` from the JobMaster's main thread; the work runs in ``io_executor``.
    """

    def __init__(
        self,
        job_graph: JobGraph,
        configuration: Configuration,
        storage: CheckpointStorage,
        committer: SinkCommitter,
        working_dir: str,
        io_executor: Executor,
    ) -> None:
        self._job_graph = job_graph
        self._configuration = configuration
        self._storage = storage
        self._committer = committer
        self._working_dir = working_dir
        self._io = io_executor

    def prepare(
        self, restore_from: CheckpointMetadata | None, savepoint_path: str | None
    ) -> Future[PreparedJob]:
        """Prepare a start (``restore_from`` None, from ``savepoint_path`` if given) or a
        failover to ``restore_from``.

        Returns:
            Future completed with the prepared job, or failed with what preparing raised (e.g.
            CheckpointError, or a sink's outage during the restore commit).
        """
        return self._io.submit(self._prepare, restore_from, savepoint_path)

    def _prepare(
        self, restore_from: CheckpointMetadata | None, savepoint_path: str | None
    ) -> PreparedJob:
        exchange_store.remove_tree(self._working_dir)
        prepared = prepare_job(
            self._job_graph, self._configuration, self._storage, restore_from, savepoint_path
        )
        committer = self._committer
        committer.set_sinks(prepared.sinks)
        restored = prepared.restored
        if restore_from is not None:  # a failover: finish its commit, drop the rest
            committer.restore(restore_from).result()
        elif restored is not None and restored.job_id == self._job_graph.job_id:
            # This very job's checkpoint: a new leader recovers it (high availability). As in a
            # failover, its commit is finished first (the former leader may have died between
            # completing and committing it), and only then is the rest of the staged data
            # dropped; aborting first would delete what the commit still needs.
            committer.restore(restored).result()
        elif restored is not None:  # a savepoint or an earlier job's checkpoint
            committer.abort().result()
            committer.commit(restored).result()
        else:
            committer.abort().result()
            committer.initialize().result()
        return prepared
