"""ExecutionGraph: the parallel form of a JobGraph, kept by the JobMaster (Flink's names).

``ExecutionGraph`` -> one ``ExecutionJobVertex`` per JobVertex -> one ``ExecutionVertex`` per
subtask -> its current ``Execution`` (an attempt, with an ExecutionState). The graph is plain
state owned by the JobMaster and touched only on its main thread; it holds no locks.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from millrace.clock import Clock, SystemClock
from millrace.errors import ExecutionGraphError, IllegalExecutionStateTransitionError
from millrace.runtime.executiongraph.execution_state import ExecutionState, is_legal_transition
from millrace.runtime.executiongraph.job_status import JobStatus, check_job_transition
from millrace.runtime.jobgraph import JobGraph, JobVertex
from millrace.types import (
    Address,
    AllocationId,
    ExecutionAttemptId,
    JobVertexId,
    ResourceId,
    ResultPartitionId,
    new_id,
)

EXCEPTION_HISTORY_SIZE = 16  # failed Executions kept (Flink's web.exception-history-size)

__all__ = [
    "Execution",
    "ExecutionGraph",
    "ExecutionHistory",
    "ExecutionJobVertex",
    "ExecutionVertex",
    "IOMetrics",
    "JobStatus",
]


class ExecutionHistory:
    """When things happened in one ExecutionGraph: the epoch-ms time of every job status and
    Execution state reached, and the last failed Executions (Flink's exception history).

    Args:
        clock: Wall-clock source of the timestamps.
        size: Failed Executions kept, newest last (older ones are dropped).

    Threading:
        JobMaster main thread only (plain state of the ExecutionGraph).
    """

    def __init__(self, clock: Clock, size: int = EXCEPTION_HISTORY_SIZE) -> None:
        self.clock = clock
        self.failed: deque[Execution] = deque(maxlen=size)
        self.dropped = 0  # failed Executions no longer kept (the history is truncated)
        self.job_timestamps: dict[JobStatus, int] = {}

    def now_ms(self) -> int:
        return round(self.clock.time() * 1000)

    def execution_failed(self, execution: Execution) -> None:
        if len(self.failed) == self.failed.maxlen:
            self.dropped += 1
        self.failed.append(execution)


@dataclass
class IOMetrics:
    """Records counted by one subtask (Flink's IOMetrics / accumulators).

    Attributes:
        records_in: Records read (sources: rows read from splits; others: rows received).
        records_out: Records emitted downstream or written by a sink.
        dead_letters: Malformed records sent to the dead-letter output.
        late_records: Records later than the watermark, sent to the late side output.
        bundles: Spark jobs run for bundles.
        busy_ms: Accumulated ms the task spent processing (Flink's accumulated busy time).
        idle_ms: Accumulated ms the task waited for input.
        backpressured_ms: Accumulated ms the task waited for room downstream.
    """

    records_in: int = 0
    records_out: int = 0
    dead_letters: int = 0
    late_records: int = 0
    bundles: int = 0
    busy_ms: int = 0
    idle_ms: int = 0
    backpressured_ms: int = 0

    def add(self, other: IOMetrics) -> None:
        self.records_in += other.records_in
        self.records_out += other.records_out
        self.dead_letters += other.dead_letters
        self.late_records += other.late_records
        self.bundles += other.bundles
        self.busy_ms += other.busy_ms
        self.idle_ms += other.idle_ms
        self.backpressured_ms += other.backpressured_ms


@dataclass
class Execution:
    """One attempt to run an ExecutionVertex.

    Attributes:
        attempt_id: Unique id of the attempt.
        vertex: The ExecutionVertex it runs.
        state: Current ExecutionState; change it only with ``transition_to``.
        allocation_id: Slot it was deployed to, once SCHEDULED.
        task_manager: RPC address of the TaskExecutor running it, once DEPLOYING.
        task_manager_id: ResourceId of that TaskManager, once DEPLOYING.
        metrics: Counters reported by the task when it ended.
        failure: Root cause when FAILED.
        attempt_number: 0 for the first attempt of its subtask, then +1 per restart.
        timestamps: Epoch ms at which it reached each state (CREATED at creation).
    """

    vertex: ExecutionVertex
    attempt_id: ExecutionAttemptId = field(default_factory=lambda: ExecutionAttemptId(new_id()))
    state: ExecutionState = ExecutionState.CREATED
    allocation_id: AllocationId | None = None
    task_manager: Address | None = None
    metrics: IOMetrics = field(default_factory=IOMetrics)
    failure: str | None = None
    attempt_number: int = 0
    task_manager_id: ResourceId | None = None
    timestamps: dict[ExecutionState, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.timestamps[ExecutionState.CREATED] = self.vertex.job_vertex.history.now_ms()

    @property
    def partition_id(self) -> ResultPartitionId:
        """Id of the result partition this attempt produces."""
        return ResultPartitionId(self.attempt_id)

    def transition_to(self, target: ExecutionState) -> None:
        """Move to ``target``.

        Raises:
            IllegalExecutionStateTransitionError: If the state machine forbids the move.
        """
        if not is_legal_transition(self.state, target):
            raise IllegalExecutionStateTransitionError(str(self), self.state.name, target.name)
        self.state = target
        history = self.vertex.job_vertex.history
        self.timestamps[target] = history.now_ms()
        if target is ExecutionState.FAILED:
            history.execution_failed(self)

    def __str__(self) -> str:
        return f"{self.vertex.task_name} ({self.attempt_id[:8]})"


@dataclass(eq=False)
class ExecutionVertex:
    """Subtask ``subtask_index`` of an ExecutionJobVertex."""

    job_vertex: ExecutionJobVertex
    subtask_index: int
    current_execution: Execution = field(init=False)

    def __post_init__(self) -> None:
        self.current_execution = Execution(self)

    @property
    def task_name(self) -> str:
        jv = self.job_vertex
        return f"{jv.name} ({self.subtask_index + 1}/{jv.parallelism})"

    @property
    def state(self) -> ExecutionState:
        return self.current_execution.state


@dataclass(eq=False)
class ExecutionJobVertex:
    """The subtasks of one JobVertex."""

    job_vertex: JobVertex
    history: ExecutionHistory = field(default_factory=lambda: ExecutionHistory(SystemClock()))
    task_vertices: list[ExecutionVertex] = field(init=False)

    def __post_init__(self) -> None:
        self.task_vertices = [ExecutionVertex(self, i) for i in range(self.job_vertex.parallelism)]

    @property
    def vertex_id(self) -> JobVertexId:
        return self.job_vertex.vertex_id

    @property
    def name(self) -> str:
        return self.job_vertex.name

    @property
    def parallelism(self) -> int:
        return self.job_vertex.parallelism

    def metrics(self) -> IOMetrics:
        """Sum of the subtasks' counters."""
        total = IOMetrics()
        for v in self.task_vertices:
            total.add(v.current_execution.metrics)
        return total

    def state_counts(self) -> dict[ExecutionState, int]:
        counts: dict[ExecutionState, int] = {}
        for v in self.task_vertices:
            counts[v.state] = counts.get(v.state, 0) + 1
        return counts


class ExecutionGraph:
    """The job's ExecutionJobVertices in topological order, and the job status.

    Threading:
        JobMaster main thread only.
    """

    def __init__(self, job_graph: JobGraph, clock: Clock | None = None) -> None:
        self.job_graph = job_graph
        self.job_id = job_graph.job_id
        self.history = ExecutionHistory(clock or SystemClock())
        self._status = JobStatus.CREATED
        self.history.job_timestamps[JobStatus.CREATED] = self.history.now_ms()
        self.vertices = [ExecutionJobVertex(v, self.history) for v in job_graph.vertices]
        self._by_id = {v.vertex_id: v for v in self.vertices}
        self._by_attempt: dict[ExecutionAttemptId, Execution] = {
            ev.current_execution.attempt_id: ev.current_execution
            for v in self.vertices
            for ev in v.task_vertices
        }

    def reset_for_restart(self) -> None:
        """Give every subtask a new Execution attempt in CREATED (global failover).

        Reports of the old attempts are no longer found by ``execution``.
        """
        self._by_attempt = {}
        for vertex in self.vertices:
            for ev in vertex.task_vertices:
                ev.current_execution = Execution(
                    ev, attempt_number=ev.current_execution.attempt_number + 1
                )
                self._by_attempt[ev.current_execution.attempt_id] = ev.current_execution

    def reset_subtask(self, vertex: ExecutionVertex) -> None:
        """Give ``vertex`` a new Execution attempt in CREATED (region failover); reports of its
        former attempt are no longer found by ``execution``."""
        self._by_attempt.pop(vertex.current_execution.attempt_id, None)
        vertex.current_execution = Execution(
            vertex, attempt_number=vertex.current_execution.attempt_number + 1
        )
        self._by_attempt[vertex.current_execution.attempt_id] = vertex.current_execution

    def job_vertex(self, vertex_id: JobVertexId) -> ExecutionJobVertex:
        """Raises KeyError for an unknown vertex."""
        return self._by_id[vertex_id]

    def execution(self, attempt_id: ExecutionAttemptId) -> Execution | None:
        """The Execution with ``attempt_id``, or None if the graph has no such attempt."""
        return self._by_attempt.get(attempt_id)

    def running_execution(self, attempt_id: ExecutionAttemptId) -> Execution:
        """The Execution with ``attempt_id``, which must not have ended.

        Raises:
            ExecutionGraphError: If the graph has no such attempt (one of a run before a
                restart, or none of this job) or it ended.
        """
        execution = self._by_attempt.get(attempt_id)
        if execution is None:
            raise ExecutionGraphError(self.job_graph.job_id, attempt_id, "not of the job's run")
        if execution.state.is_terminal:
            raise ExecutionGraphError(
                self.job_graph.job_id, attempt_id, f"it ended {execution.state.name}"
            )
        return execution

    def executions(self) -> list[Execution]:
        return [ev.current_execution for v in self.vertices for ev in v.task_vertices]

    def producers_of(self, vertex_id: JobVertexId) -> list[ExecutionJobVertex]:
        return [self._by_id[e.source] for e in self.job_graph.inputs_of(vertex_id)]

    def consumers_of(self, vertex_id: JobVertexId) -> list[ExecutionJobVertex]:
        return [self._by_id[e.target] for e in self.job_graph.outputs_of(vertex_id)]

    def all_finished(self) -> bool:
        return all(e.state is ExecutionState.FINISHED for e in self.executions())

    @property
    def status(self) -> JobStatus:
        """The job status; it changes only through :meth:`transition_job`."""
        return self._status

    def transition_job(self, target: JobStatus) -> None:
        """Move the job status along the JobStatus state machine (``job_status.py``).

        Raises:
            IllegalJobStatusTransitionError: If the move is not in its transition table.
        """
        check_job_transition(f"job {self.job_id}", self._status, target)
        self._status = target
        self.history.job_timestamps[target] = self.history.now_ms()
